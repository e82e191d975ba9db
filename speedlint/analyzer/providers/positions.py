"""Positions of a few nodes, as LibCST's `PositionProvider` gives them, at a quarter of its cost.

`PositionProvider` generates the module's code and records a `CodeRange` for *every* node,
splitting every token on newlines as it goes: about as costly as parsing the file. A report
needs the positions of a handful of nodes (the findings and their edits). Here the code is
generated with LibCST's plain codegen (what `Module.code` does) and only the nodes asked for
are noted, as character offsets into the generated text; offsets become lines and columns at the
end. The rules are LibCST's own: a node's range runs from just before its code is generated to
just after, unless the node narrows it with `record_syntactic_position` (leading whitespace and
comments left out, or the range taken from a child's start or end), which wins.

`tests/test_performance_features.py` checks the result against `PositionProvider` on every node
of every fixture.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState  # the codegen state LibCST's own providers extend
from libcst.metadata import CodePosition, CodeRange

#: What LibCST's position provider counts as a line break.
_NEWLINE = re.compile(r"\r\n?|\n")


@dataclass
class _NotingState(CodegenState):
    """Plain codegen that notes the offsets of the wanted nodes (by id)."""

    wanted: Set[int] = field(default_factory=set)
    starts: Dict[int, List[int]] = field(default_factory=dict)
    found: Dict[int, Tuple[int, int]] = field(default_factory=dict)
    missing_hoist: bool = False
    popped: str = ""  # the module's last newline: not in its code, but counted in positions
    _measured: int = 0  # tokens[:_measured] are counted in _length
    _length: int = 0

    def offset(self) -> int:
        tokens = self.tokens
        n = len(tokens)
        if self._measured < n:
            self._length += sum(len(t) for t in tokens[self._measured:n])
            self._measured = n
        return self._length

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.offset()
            self.popped = self.tokens.pop()
            self._measured -= 1  # (its length stays counted, as LibCST's provider counts it)

    def before_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.wanted:
            self.starts.setdefault(key, []).append(self.offset())

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.wanted:
            start = self.starts[key].pop()
            if key not in self.found:  # a syntactic position recorded by the node itself wins
                self.found[key] = (start, self.offset())

    @contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> Iterator[None]:
        key = id(node)
        if key not in self.wanted:
            yield
            return
        # the range may come from children generated inside this block: note them too
        for hoisted in (start_node, end_node):
            if hoisted is not None:
                self.wanted.add(id(hoisted))
        start = self.offset()
        try:
            yield
        finally:
            end = self.offset()
            if start_node is not None:
                got = self.found.get(id(start_node))
                if got is None:
                    self.missing_hoist = True
                else:
                    start = got[0]
            if end_node is not None:
                got = self.found.get(id(end_node))
                if got is None:
                    self.missing_hoist = True
                else:
                    end = got[1]
            self.found[key] = (start, end)


def node_positions(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> Optional[Dict[int, CodeRange]]:
    """id(node) -> its range, for those of `nodes` that are in `module` (one codegen pass).

    None when a range could not be rebuilt this way (the caller then asks `PositionProvider`).
    """
    wanted = {id(n) for n in nodes}
    state = _NotingState(module.default_indent, module.default_newline, wanted=set(wanted))
    module._codegen(state)
    if state.missing_hoist:
        return None
    text = "".join(state.tokens) + state.popped
    breaks = [m.end() for m in _NEWLINE.finditer(text)]

    def where(offset: int) -> CodePosition:
        line = bisect_right(breaks, offset)  # line breaks at or before the offset
        return CodePosition(line + 1, offset - (breaks[line - 1] if line else 0))

    return {key: CodeRange(where(a), where(b)) for key, (a, b) in state.found.items() if key in wanted}
