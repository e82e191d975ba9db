"""Suppressions: a suppressed finding is neither reported nor fixed.

* `# noqa` (every rule) and `# noqa: SPD101, SPD4` on the flagged line;
* `# speedlint: ignore[SPD101]` (or `# speedlint: ignore`: every rule) at the end of the flagged
  line, or on a comment line of its own just before it;
* `# speedlint: file-ignore[SPD101]` anywhere in the file (`# speedlint: file-ignore`: all rules);
* `per-file-ignores` from the settings (glob patterns relative to the config file's folder).

Codes, code prefixes (`SPD4`) and rule names (`gc-collect-in-hot-path`) work alike; a selector
that names no speedlint rule (`# noqa: E501` for another linter) suppresses nothing of ours.

A finding spanning several lines (a call split over lines, a whole loop) is suppressed by a comment
on its first line or on its last line: formatters such as black move a trailing comment of a
statement they split to its closing line. `# speedlint: ignore` on the line before goes before the
first line.

Only real comments count: `"# noqa"` inside a string does not suppress anything.
"""

from __future__ import annotations

import fnmatch
import io
import re
import tokenize
from pathlib import Path, PurePosixPath
from typing import Dict, List, Optional, Sequence, Set, Tuple

import pathspec

from speedlint.analyzer.config import Settings
from speedlint.analyzer.findings import Finding
from speedlint.analyzer.sources import source_lines

_NOQA = re.compile(r"#\s*noqa(?![\w-])(?:\s*:(?P<rest>.*))?", re.I)
_SELECTOR = re.compile(r"^(?:[A-Za-z]+\d+|[a-z][a-z0-9]*(?:-[a-z0-9]+)+|ALL)$")
_IGNORE = re.compile(r"#\s*speedlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?(?![\w-])", re.I)
_FILE_IGNORE = re.compile(r"#\s*speedlint:\s*file-ignore(?:\[(?P<codes>[^\]]*)\])?", re.I)

ALL = "*"


def _codes(text: Optional[str]) -> Set[str]:
    if not text or not text.strip():
        return {ALL}
    return {c.strip() for c in re.split(r"[\s,]+", text) if c.strip()}


def _noqa_codes(rest: Optional[str]) -> Set[str]:
    """`# noqa: SPD101, gc-collect-in-hot-path  reason` -> the selectors, up to the first word that
    is neither a code nor a rule name. `# noqa` and `# noqa:` with nothing after suppress all."""
    if rest is None:
        return {ALL}
    codes: Set[str] = set()
    for item in re.split(r"[\s,]+", rest.strip()):
        if not item or not _SELECTOR.match(item):
            break
        codes.add(item)
    return codes or {ALL}


def covers(selectors: Set[str], finding: Finding) -> bool:
    """Whether any selector (code, code prefix, rule name, ALL) names the finding's rule."""
    for s in selectors:
        if s == ALL or s.upper() == "ALL":
            return True
        if finding.code.startswith(s.upper()) or s.lower() == finding.name:
            return True
    return False


_covers = covers  # backwards-compatible name


def comments(text: str) -> List[Tuple[int, int, str]]:
    """(line, column, comment text) for each real comment; falls back to a line scan when the
    file does not tokenize (the engine reports the syntax error separately)."""
    found: List[Tuple[int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.append((tok.start[0], tok.start[1], tok.string))
        return found
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    found = []
    for i, line in enumerate(source_lines(text), start=1):
        col = line.find("#")
        if col >= 0:
            found.append((i, col, line[col:]))
    return found


def line_suppressions(text: str) -> Dict[int, Set[str]]:
    """1-based line -> selectors suppressed on it."""
    result: Dict[int, Set[str]] = {}
    if "noqa" not in text.lower() and "speedlint:" not in text.lower():
        return result
    lines = source_lines(text)
    for i, col, comment in comments(text):
        m = _NOQA.search(comment)
        if m:
            result.setdefault(i, set()).update(_noqa_codes(m.group("rest")))
        m = _IGNORE.search(comment)
        if m:
            codes = _codes(m.group("codes"))
            result.setdefault(i, set()).update(codes)
            own_line = i <= len(lines) and not lines[i - 1][:col].strip()
            if own_line:  # a comment line of its own covers the next line
                result.setdefault(i + 1, set()).update(codes)
    return result


def file_suppressions(text: str) -> Set[str]:
    found: Set[str] = set()
    if "file-ignore" not in text:
        return found
    for _, _, comment in comments(text):
        m = _FILE_IGNORE.search(comment)
        if m:
            found |= _codes(m.group("codes"))
    return found


def _glob_match(pattern: str, candidate: str) -> bool:
    if fnmatch.fnmatch(candidate, pattern) or fnmatch.fnmatch(candidate, pattern.rstrip("/") + "/*"):
        return True
    try:
        return pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(candidate)
    except Exception:  # an odd pattern for gitignore syntax: fnmatch already said no
        return False


def per_file_selectors(settings: Settings, path: str) -> Set[str]:
    if not settings.per_file_ignores:
        return set()
    p = Path(path)
    candidates = {PurePosixPath(p.as_posix()).as_posix(), p.name}
    if settings.root:
        try:
            candidates.add(p.resolve().relative_to(Path(settings.root).resolve()).as_posix())
        except (ValueError, OSError):
            pass
    found: Set[str] = set()
    for pattern, codes in settings.per_file_ignores:
        if any(_glob_match(pattern, c) for c in candidates):
            found |= set(codes)
    return found


def is_suppressed(finding: Finding, by_line: Dict[int, Set[str]], whole_file: Set[str]) -> bool:
    if whole_file and covers(whole_file, finding):
        return True
    for line in {finding.line, finding.end_line}:
        selectors = by_line.get(line)
        if selectors and covers(selectors, finding):
            return True
    return False


def apply_suppressions(findings: Sequence[Finding], text: str, settings: Settings, path: str) -> List[Finding]:
    """The findings of `path` that its comments and settings do not suppress. Findings placed in
    another file (a config file the code reads) are kept as they are: that file's own comments
    decide, where its findings are gathered."""
    if not findings:
        return list(findings)
    by_line = line_suppressions(text)
    whole = file_suppressions(text) | per_file_selectors(settings, path)
    return [f for f in findings if f.path != path or not is_suppressed(f, by_line, whole)]
