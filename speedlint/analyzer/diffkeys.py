"""Texts shared by the report and the commands below it: the unified diff of a fixed file, and
the line key of a finding.

A base module: it imports only the findings, sources and notebook modules, so that the report
(`speedlint.analyzer.report`) and the orchestration (`rewrite`, `baseline`) both import it and the
report imports no orchestration module (`tests/test_layout.py`).

* `unified_diff`: what `speedlint fix` shows for one file (a notebook: per changed cell).
* `FindingKeyer`: a finding's key, (rule code, file relative to a base folder, the flagged line's
  code with comments removed and whitespace collapsed): never a line number, so an edit elsewhere
  in the file leaves it unchanged. Baseline entries and SARIF fingerprints are keyed on it.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import tokenize
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from speedlint.analyzer.findings import Finding, FixOutcome
from speedlint.analyzer.notebook import read_checked_text
from speedlint.analyzer.notebook_fix import NotebookFixOutcome
from speedlint.analyzer.sources import source_lines

Key = Tuple[str, str, str]  # (code, path, normalized line content)

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def unified_diff(outcome: FixOutcome) -> str:
    """The diff of one file's fixes, `a/PATH` to `b/PATH`, line endings kept as they are."""
    if isinstance(outcome, NotebookFixOutcome):
        return outcome.diff()  # per changed cell, named `path:cell N`
    a = _LINES.findall(outcome.original)  # lines end at line breaks only (not at form feeds)
    b = _LINES.findall(outcome.fixed)
    lines = difflib.unified_diff(a, b, fromfile=f"a/{outcome.path}", tofile=f"b/{outcome.path}")
    # a last line without a line break gets one and a marker, as `diff` and git write it
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def normalize(code_line: str) -> str:
    return " ".join(code_line.split())


def code_lines(text: str) -> List[str]:
    """Each line of `text` (index 0 = line 1) with its comment removed and whitespace normalized."""
    lines = source_lines(text)
    comment_at: Dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                comment_at[tok.start[0]] = tok.start[1]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # keep the comments we found so far; the rest of the lines stay whole
    return [normalize(line[: comment_at[i]] if i in comment_at else line) for i, line in enumerate(lines, start=1)]


def relative_path(path: str, base: Path) -> str:
    """`path` (as reported, relative to the working folder) relative to `base`, posix form."""
    absolute = Path(os.path.abspath(path))
    try:
        rel = os.path.relpath(absolute, os.path.abspath(base))
    except ValueError:  # another drive on Windows
        rel = str(absolute)
    return Path(rel).as_posix()


def _source_of(path: str, sources: Dict[str, Optional[str]]) -> str:
    text = sources.get(path)
    if text is None:
        text = read_checked_text(path)  # a notebook: the text its findings' lines refer to
    return text


class FindingKeyer:
    """Computes the keys of findings (see the module docstring), reading each file's lines once.

    `base`: the folder paths are made relative to; `sources`: reported path -> the text that was
    checked, when known (else the file is read)."""

    def __init__(self, base: Path, sources: Dict[str, Optional[str]]) -> None:
        self.base = base
        self.sources = sources
        self._lines: Dict[str, List[str]] = {}
        self._paths: Dict[str, str] = {}

    def key(self, f: Finding) -> Key:
        if f.path not in self._lines:
            self._lines[f.path] = code_lines(_source_of(f.path, self.sources))
            self._paths[f.path] = relative_path(f.path, self.base)
        lines = self._lines[f.path]
        line = f.source_line
        content = lines[line - 1] if 0 < line <= len(lines) else ""
        return (f.code, self._paths[f.path], content)
