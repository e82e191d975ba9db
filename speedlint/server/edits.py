"""Minimal text edits between two texts, and the `# noqa` edit that suppresses a finding.

Positions are (0-based line, 0-based column in code points); the server turns them into the
client's units (UTF-16 by default). Lines end at `\\r\\n`, `\\r` or `\\n`, as in LSP and in
`sources.source_lines`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from speedlint.analyzer.suppress import line_suppressions
from speedlint.analyzer.sources import source_lines

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass(frozen=True)
class TextChange:
    """Replace old text from `start` to `end` ((line, column), end exclusive) by `text`."""

    start: Tuple[int, int]
    end: Tuple[int, int]
    text: str


class _Offsets:
    """Character offset -> (line, column) in a text."""

    def __init__(self, text: str) -> None:
        self.starts = [0]
        for m in _LINES.finditer(text):
            self.starts.append(m.end())
        if len(self.starts) > 1 and self.starts[-1] == self.starts[-2]:
            self.starts.pop()

    def position(self, offset: int) -> Tuple[int, int]:
        import bisect

        line = bisect.bisect_right(self.starts, offset) - 1
        return line, offset - self.starts[line]


def minimal_changes(old: str, new: str) -> List[TextChange]:
    """The changes that turn `old` into `new`: changed runs of lines, each trimmed to the
    characters that differ (never the whole file unless every line changed)."""
    if old == new:
        return []
    a = _LINES.findall(old)
    b = _LINES.findall(new)
    starts_a = [0]
    for line in a:
        starts_a.append(starts_a[-1] + len(line))
    offsets = _Offsets(old)
    out: List[TextChange] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before, after = "".join(a[i1:i2]), "".join(b[j1:j2])
        prefix = 0
        limit = min(len(before), len(after))
        while prefix < limit and before[prefix] == after[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and before[len(before) - 1 - suffix] == after[len(after) - 1 - suffix]:
            suffix += 1
        start = starts_a[i1] + prefix
        end = starts_a[i2] - suffix
        out.append(TextChange(_position(offsets, old, start), _position(offsets, old, end), after[prefix: len(after) - suffix]))
    return out


def _position(offsets: _Offsets, text: str, offset: int) -> Tuple[int, int]:
    if offset >= len(text):  # the end of the text: after its last line break, a new line
        lines = source_lines(text)
        if text.endswith(("\n", "\r")) or not lines:
            return len(lines), 0
        return len(lines) - 1, len(lines[-1])
    return offsets.position(offset)


def apply_changes(text: str, changes: List[TextChange]) -> str:
    """`text` with `changes` applied (they refer to `text` and do not overlap): what an editor
    does with the edits (tests, and the server's own check of its edits)."""
    offsets = _Offsets(text)

    def offset(pos: Tuple[int, int]) -> int:
        line, col = pos
        if line >= len(offsets.starts):
            return len(text)
        return offsets.starts[line] + col

    out = text
    for change in sorted(changes, key=lambda c: c.start, reverse=True):
        out = out[: offset(change.start)] + change.text + out[offset(change.end):]
    return out


_NOQA = re.compile(r"#\s*noqa\s*:[ \t]*(?=\S)", re.I)


def suppression(text: str, lines: Tuple[int, ...], code: str) -> Optional[TextChange]:
    """The edit that adds `code` to a `# noqa` comment on the first of `lines` (1-based) where
    the comment counts (a line whose end is in a string is skipped: the next one is tried);
    None when there is no such line."""
    all_lines = source_lines(text)
    for line in dict.fromkeys(lines):
        if not 1 <= line <= len(all_lines):
            continue
        content = all_lines[line - 1]
        m = _NOQA.search(content)
        if m is not None:
            change = TextChange((line - 1, m.end()), (line - 1, m.end()), f"{code}, ")
        else:
            end = len(content.rstrip())
            change = TextChange((line - 1, end), (line - 1, len(content)), f"  # noqa: {code}")
        if code in line_suppressions(apply_changes(text, [change])).get(line, set()):
            return change
    return None
