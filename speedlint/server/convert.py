"""Findings and diagnostics as LSP diagnostics, and a rule's documentation as a hover.

Ranges are computed in code points on the analysed text and converted to the client's units
(`PositionCodec`, UTF-16 unless the client asks for another encoding).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from speedlint.analyzer.findings import HIGH, LOW, Diagnostic, Finding
from speedlint.analyzer.sources import source_lines

SOURCE = "speedlint"
_SEVERITY = {HIGH: types.DiagnosticSeverity.Warning, LOW: types.DiagnosticSeverity.Hint}
_POSITION = re.compile(r"\bat (\d+):(\d+)\b")


def _range(codec: PositionCodec, lines: Sequence[str], line: int, column: int, end_line: int, end_column: int) -> types.Range:
    """1-based lines, 0-based columns in code points -> the client's range."""
    start = types.Position(line=max(line - 1, 0), character=max(column, 0))
    end = types.Position(line=max(end_line - 1, 0), character=max(end_column, 0))
    return codec.range_to_client_units(lines, types.Range(start=start, end=end))


def finding_diagnostic(f: Finding, codec: PositionCodec, lines: Sequence[str], uri_of: Callable[[str], Optional[str]]) -> types.Diagnostic:
    """`f` as an LSP diagnostic: its rule code, impact as severity, the call chain as related
    information (`uri_of`: a display path -> its URI)."""
    related = []
    for hop in f.related:
        uri = uri_of(hop[0])
        if uri is None:
            continue
        where = types.Range(start=types.Position(line=max(int(hop[1]) - 1, 0), character=0), end=types.Position(line=max(int(hop[1]) - 1, 0), character=0))
        label = f"cell {hop[3]}: " if len(hop) > 3 else ""
        related.append(types.DiagnosticRelatedInformation(location=types.Location(uri=uri, range=where), message=f"{label}calls `{hop[2]}`"))
    fix: Dict[str, Any] = {}
    if f.fix is not None:
        fix = {"title": f.fix.title, "applicability": f.fix.applicability.value, "applicable": bool(f.fix.applicable)}
    return types.Diagnostic(
        range=_range(codec, lines, f.line, f.column - 1, f.end_line, f.end_column - 1),
        message=f.message,
        severity=_SEVERITY.get(f.impact.level, types.DiagnosticSeverity.Information),
        code=f.code,
        source=SOURCE,
        related_information=related or None,
        data={"name": f.name, "line": f.line, "column": f.column, "end_line": f.end_line, "fix": fix or None, "cell": f.cell},
    )


def problem_diagnostic(d: Diagnostic, codec: PositionCodec, lines: Sequence[str]) -> types.Diagnostic:
    """A per-file problem (syntax error, internal error, config warning) as one diagnostic, at
    the position its message names (`syntax error at 3:5`), else at the top of the file."""
    m = _POSITION.search(d.message)
    line, column = (int(m.group(1)), int(m.group(2)) - 1) if m else (1, 0)
    line = min(max(line, 1), max(len(lines), 1))
    width = len(lines[line - 1]) if lines else 0
    column = min(max(column, 0), width)
    severity = types.DiagnosticSeverity.Warning if d.kind == "warning" else types.DiagnosticSeverity.Error
    return types.Diagnostic(
        range=_range(codec, lines, line, column, line, width if m is None else column + 1 if column < width else width),
        message=d.message,
        severity=severity,
        source=SOURCE,
        code=d.kind,
    )


def lines_of(text: str) -> List[str]:
    return source_lines(text)


#: Hover: the sections of the rule's docs shown, and how long the hover may be.
HOVER_SECTIONS = ("What it does", "Why is this slow?", "Fix safety")
HOVER_LIMIT = 1500


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind("\n\n", 0, limit)
    if cut < limit // 2:
        cut = text.rfind(" ", 0, limit)
    return text[: max(cut, 0)].rstrip() + " ..."


def hover_markdown(rule: Any, explained: str) -> str:
    """The rule's documentation (`explained`: what `speedlint explain` shows) shortened for a
    hover: title, status and impact record, then the first paragraphs of a few sections."""
    head = "\n\n".join(explained.split("\n\n")[:2])  # "# CODE (name)" and the status/impact line
    parts = [head]
    budget = HOVER_LIMIT
    for title in HOVER_SECTIONS:
        body = rule.doc_section(title)
        if not body:
            continue
        para = body.split("\n\n")[0]
        part = f"**{title}** {_shorten(' '.join(para.split()), max(budget, 200))}"
        parts.append(part)
        budget -= len(part)
        if budget <= 0:
            break
    parts.append(f"`speedlint explain {rule.code}` for the whole documentation.")
    return "\n\n".join(parts)


def uri_for_path(path: Path) -> str:
    return path.absolute().as_uri()
