"""Positions of a few nodes, as LibCST's `PositionProvider` gives them, at a fraction of its cost.

`PositionProvider` generates the module's code and records a `CodeRange` for *every* node,
splitting every token on newlines as it goes: about as costly as parsing the file. A report
needs the positions of a handful of nodes (the findings and their edits). Here the code is
generated with LibCST's plain codegen (what `Module.code` does) and only the nodes asked for
are noted, as character offsets into the generated text; offsets become lines and columns at the
end. The rules are LibCST's own: a node's range runs from just before its code is generated to
just after, unless the node narrows it with `record_syntactic_position` (leading whitespace and
comments left out, or the range taken from a child's start or end), which wins.

Given the source text and the tree's reading, not even the module's code is generated: LibCST
round-trips, so only the statements that hold the nodes are (the innermost ones: a method of a
class, a statement of a loop's body), each placed in the text where it provably starts
(`_by_statements`); when that cannot be proven, the whole module's code is generated.

`tests/test_positions.py` checks the result against `PositionProvider` on every node of every
fixture, example and analyzer module, asked for all at once, alone, and a few at a time.
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

from speedlint.analyzer.providers.walk import TreeIndex

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


def node_positions(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    text: Optional[str] = None,
    tree: Optional[TreeIndex] = None,
) -> Optional[Dict[int, CodeRange]]:
    """id(node) -> its range, for those of `nodes` that are in `module`.

    With the module's source `text` and its reading `tree` (`walk.TreeIndex`), only the
    statements that hold the nodes are generated (`_by_statements`); otherwise, or when that
    cannot prove where they start, the whole module is. None when a range could not be rebuilt
    this way (the caller then asks `PositionProvider`).
    """
    nodes = list(nodes)
    if text is not None and tree is not None:
        found = _by_statements(module, nodes, text, tree)
        if found is not None:
            return found
    return _whole_module(module, nodes)


def _whole_module(module: cst.Module, nodes: List[cst.CSTNode]) -> Optional[Dict[int, CodeRange]]:
    """One codegen pass over the whole module."""
    wanted = {id(n) for n in nodes}
    state = _NotingState(module.default_indent, module.default_newline, wanted=set(wanted))
    module._codegen(state)
    if state.missing_hoist:
        return None
    text = "".join(state.tokens) + state.popped
    found = {key: span for key, span in state.found.items() if key in wanted}
    return _ranges(text, found)


def _ranges(text: str, found: Dict[int, Tuple[int, int]]) -> Dict[int, CodeRange]:
    """Offsets into `text` -> lines and columns, as LibCST's position provider counts them."""
    offsets = sorted({o for span in found.values() for o in span})
    where: Dict[int, CodePosition] = {}
    if "\r" in text:
        breaks = [m.end() for m in _NEWLINE.finditer(text)]
        for offset in offsets:
            line = bisect_right(breaks, offset)  # line breaks at or before the offset
            where[offset] = CodePosition(line + 1, offset - (breaks[line - 1] if line else 0))
    else:  # only "\n": count them, in one sweep over the offsets in order
        line, last, prev = 1, -1, 0
        count, rfind = text.count, text.rfind
        for offset in offsets:
            k = count("\n", prev, offset)
            if k:
                line += k
                last = rfind("\n", prev, offset)
            prev = offset
            where[offset] = CodePosition(line, offset - last - 1)
    return {key: CodeRange(where[a], where[b]) for key, (a, b) in found.items()}


def _generated_text(text: str, module: cst.Module, tree: TreeIndex) -> Optional[str]:
    """What a whole-module pass generates (`tokens` + `popped`), when that is the source `text`
    as far as can be told without generating it; None when it may not be.

    LibCST round-trips nearly always. Where it does not (found by comparing both over the fixtures,
    both corpora and random texts), the text has a BOM, a form feed, a line holding only a
    backslash continuation, or blank or comment lines at its end that are indented or hold
    whitespace: any of those, and the answer is None. Generated code always ends with a line
    break: a text that does not gets the module's last one (LibCST counts it in positions).
    """
    if text.startswith("\ufeff") or "\f" in text:
        return None
    rfind = text.rfind
    if "\r" in text:
        line_start = lambda at: max(rfind("\n", 0, at), rfind("\r", 0, at)) + 1  # noqa: E731
    else:  # (no needless scan back to the start for a CR)
        line_start = lambda at: rfind("\n", 0, at) + 1  # noqa: E731
    for pair in ("\\\n", "\\\r"):  # a backslash continuation alone on its line
        at = text.find(pair)
        while at >= 0:
            if not text[line_start(at) : at].strip(" \t"):
                return None
            at = text.find(pair, at + 2)
    end = len(text)
    while end > 0:  # the blank and comment lines at the end: empty or comments at column 0
        stop = end - 1 if text[end - 1] in "\r\n" else end
        if stop < end and text[stop - 1 : end] == "\r\n":
            stop -= 1
        line = text[line_start(stop) : stop]
        body = line.lstrip(" \t")
        if body and body[0] != "#":
            break  # a line of code
        if body != line:
            return None
        end = stop - len(line)
    if text.endswith(("\n", "\r")):
        return text
    # no line break at the end: the module's last line break is generated, then popped; it is the
    # last node of the tree (a statement's or a comment line's `Newline`)
    last = tree.nodes[-1]
    if not isinstance(last, cst.Newline):
        return None
    return text + (module.default_newline if last.value is None else last.value)


#: The searches for a statement's code may scan at most this many times the text (then the whole
#: module is generated instead: a scan is far cheaper than generating the same text, but many
#: statements apart from each other in a long file would make the searches quadratic).
_SEARCH_BUDGET = 64


def statement_positions(
    module: cst.Module, nodes: Iterable[cst.CSTNode], text: str, tree: TreeIndex
) -> Optional[Dict[int, CodeRange]]:
    """`node_positions` generating only the statements that hold the nodes; None when that
    cannot prove where they are (the caller then generates the whole module)."""
    return _by_statements(module, list(nodes), text, tree)


def _by_statements(
    module: cst.Module, nodes: List[cst.CSTNode], text: str, tree: TreeIndex
) -> Optional[Dict[int, CodeRange]]:
    """The ranges, generating only the statements that hold the nodes (None: not proven).

    LibCST round-trips: the module's code is its source text (plus the last newline when the
    file has none: LibCST's positions count it). A statement's code is generated alone, with the
    indentation of the blocks around it, and its place in the text is taken only when it is
    certain: it starts where the statement just before it in the same block ends (that one was
    generated too), or it is the module's first element (it starts the text) or its last (it
    ends the text), or its code occurs exactly once in the text after the end of the statement
    placed before it. A statement with an indented body whose wanted nodes all lie in that body's
    statements is entered: those statements are placed instead (at any depth); if one of them
    cannot be, the statement is generated whole. The offsets inside a statement's code are noted
    by the same `_NotingState` as in a whole-module pass.
    """
    if tree.nodes[0] is not module or len(tree._pos) != len(tree.nodes):
        return None  # another tree, or a node twice in the tree
    full = _generated_text(text, module, tree)
    if full is None:
        return None
    tree_nodes, parents, ends = tree.nodes, tree.parents, tree.ends
    index = tree.index
    wanted: Set[int] = set()
    groups: Dict[int, List[List[int]]] = {}  # top-level element -> paths down to the wanted nodes
    for node in nodes:
        i = index(node)
        if i is None or id(node) in wanted:
            continue
        if i == 0:
            return None  # the module itself
        wanted.add(id(node))
        path = [i]
        p = parents[i]
        while p > 0:
            path.append(p)
            p = parents[p]
        path.reverse()
        groups.setdefault(path[0], []).append(path)
    if not groups:
        return {}
    default_indent, default_newline = module.default_indent, module.default_newline
    size = len(full)
    budget = [_SEARCH_BUDGET * size]
    found: Dict[int, Tuple[int, int]] = {}

    def place(at: int, paths: List[List[int]], depth: int, lo: int, indent: List[str], edge: int) -> Tuple[int, bool]:
        """Place the statement nodes[at], or the statements inside it that hold the wanted nodes,
        at or after offset `lo`. Returns where the last one placed ends (-1: not proven) and
        whether that is the end of nodes[at] (generated whole). `edge`: 1 when the statement
        starts at `lo` (the one before it in its block ended there), 2 when it is the module's
        last element, 4 when its first."""
        node = tree_nodes[at]
        block = getattr(node, "body", None)
        if (
            isinstance(block, cst.IndentedBlock)
            and all(
                len(p) > depth + 2
                and tree_nodes[p[depth + 1]] is block
                and isinstance(tree_nodes[p[depth + 2]], cst.BaseStatement)
                for p in paths
            )
        ):
            inner = [*indent, default_indent if block.indent is None else block.indent]
            by_statement: Dict[int, List[List[int]]] = {}
            for p in paths:
                by_statement.setdefault(p[depth + 2], []).append(p)
            end, whole, after = lo, False, -1
            for child in sorted(by_statement):
                end, whole = place(child, by_statement[child], depth + 2, end, inner, 1 if whole and after == child else 0)
                if end < 0:
                    break
                after = ends[child]  # the statement right after it in the block
            else:
                return end, False
        state = _NotingState(default_indent, default_newline, wanted={id(tree_nodes[p[-1]]) for p in paths})
        state.indent_tokens = list(indent)
        node._codegen(state)
        if state.missing_hoist:
            return -1, False
        code = "".join(state.tokens)
        if edge & 4:
            start = 0 if full.startswith(code) else -1
            if edge & 2 and len(code) != size:
                start = -1
        elif edge & 2:
            start = size - len(code) if full.endswith(code) and size - len(code) >= lo else -1
        elif edge & 1:
            start = lo if full.startswith(code, lo) else -1
        elif budget[0] < 0:
            return -1, False
        else:
            budget[0] -= size - lo
            start = full.find(code, lo)
            if start >= 0 and full.find(code, start + 1) >= 0:
                start = -1  # more than one place: not proven
        if start < 0:
            return -1, False
        for key, (a, b) in state.found.items():
            if key in wanted:
                found[key] = (start + a, start + b)
        return start + len(code), True

    elements = tree.children_at(0)
    first, last = elements[0], elements[-1]
    end, whole, after = 0, False, -1
    for at in sorted(groups):
        edge = (4 if at == first else 0) | (2 if at == last else 0) | (1 if whole and after == at else 0)
        end, whole = place(at, groups[at], 0, end, [], edge)
        if end < 0:
            return None
        after = ends[at]
    return _ranges(full, found)
