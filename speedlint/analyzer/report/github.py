"""GitHub Actions workflow commands: one annotation per finding on the pull request's diff.

    ::warning file=src/train.py,line=12,col=5,endLine=12,endColumn=17,title=speedlint SPD401 (gc-collect-in-hot-path)::SPD401 `gc.collect()` runs ...

Escaping follows the runner's rules: in the message `%`, CR and LF become `%25`, `%0D`, `%0A`;
in property values `:` and `,` are escaped too (`%3A`, `%2C`). Levels: high and medium impact ->
`warning`, low -> `notice`; per-file errors (syntax errors, unreadable files) -> `error`.
`endColumn` is the column after the last character (as in the other formats).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Tuple

from speedlint.analyzer.findings import LOW, Diagnostic, Finding


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, properties: Sequence[tuple], message: str) -> str:
    props = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties)
    return f"::{level} {props}::{escape_data(message)}" if props else f"::{level}::{escape_data(message)}"


def github_lines(findings: Sequence[Finding], diagnostics: Sequence[Diagnostic]) -> List[str]:
    lines = [
        _command("error" if d.kind != "warning" else "warning", [("file", Path(d.path).as_posix()), ("title", f"speedlint {d.kind}")], d.message)
        for d in diagnostics
    ]
    for f in sorted(findings, key=Finding.sort_key):
        title = ("title", f"speedlint {f.code} ({f.name})")
        if f.cell is not None:
            # a notebook: GitHub would pin line N to line N of the file's JSON, not of the cell;
            # the annotation is on the file, its message says where (`cell 3:12:5`)
            props: List[Tuple[str, object]] = [("file", Path(f.path).as_posix()), title]
            message = f"cell {f.cell}:{f.line}:{f.column}: {f.code} {f.message}"
        else:
            props = [
                ("file", Path(f.path).as_posix()),
                ("line", f.line),
                ("col", f.column),
                ("endLine", f.end_line),
                ("endColumn", f.end_column),
                title,
            ]
            message = f"{f.code} {f.message}"
        lines.append(_command("notice" if f.impact.level <= LOW else "warning", props, message))
    return lines
