"""Suppressions: a suppressed finding is neither reported nor fixed.

* `# noqa` (everything on the line) and `# noqa: SPD101, SPD4` on the flagged line;
* `# speedlint: ignore[SPD101]` (or `ignore` alone) on the flagged line or the line before;
* `# speedlint: file-ignore[SPD101]` anywhere in the file (or `file-ignore` alone: all rules);
* `per-file-ignores` from the settings.

Codes, code prefixes and rule names work alike.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path, PurePosixPath
from typing import Dict, List, Optional, Sequence, Set

from speedlint.analyzer.config import Settings
from speedlint.analyzer.rule import Finding

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[\w\-]+(?:[\s,]+[\w\-]+)*))?", re.I)
_IGNORE = re.compile(r"#\s*speedlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.I)
_FILE_IGNORE = re.compile(r"#\s*speedlint:\s*file-ignore(?:\[(?P<codes>[^\]]*)\])?", re.I)

ALL = "*"


def _codes(text: Optional[str]) -> Set[str]:
    if not text:
        return {ALL}
    return {c.strip() for c in re.split(r"[\s,]+", text) if c.strip()}


def _covers(selectors: Set[str], finding: Finding) -> bool:
    for s in selectors:
        if s == ALL or s.upper() == "ALL":
            return True
        if finding.code.startswith(s.upper()) or s.lower() == finding.name:
            return True
    return False


def _comment_part(line: str) -> str:
    i = line.find("#")
    return line[i:] if i >= 0 else ""


def line_suppressions(text: str) -> Dict[int, Set[str]]:
    """1-based line -> selectors suppressed on it."""
    result: Dict[int, Set[str]] = {}
    if "noqa" not in text and "speedlint:" not in text:
        return result
    lines = text.splitlines()
    for i, line in enumerate(lines, start=1):
        comment = _comment_part(line)
        if not comment:
            continue
        m = _NOQA.search(comment)
        if m:
            result.setdefault(i, set()).update(_codes(m.group("codes")))
        m = _IGNORE.search(comment)
        if m:
            codes = _codes(m.group("codes"))
            result.setdefault(i, set()).update(codes)
            if not line[: line.find("#")].strip():  # a comment line of its own covers the next line
                result.setdefault(i + 1, set()).update(codes)
    return result


def file_suppressions(text: str) -> Set[str]:
    found: Set[str] = set()
    if "file-ignore" not in text:
        return found
    for line in text.splitlines():
        m = _FILE_IGNORE.search(_comment_part(line))
        if m:
            found |= _codes(m.group("codes"))
    return found


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
        if any(fnmatch.fnmatch(c, pattern) or fnmatch.fnmatch(c, pattern.rstrip("/") + "/*") for c in candidates):
            found |= set(codes)
    return found


def is_suppressed(finding: Finding, by_line: Dict[int, Set[str]], whole_file: Set[str]) -> bool:
    if whole_file and _covers(whole_file, finding):
        return True
    selectors = by_line.get(finding.line)
    return bool(selectors) and _covers(selectors, finding)  # type: ignore[arg-type]


def apply_suppressions(findings: Sequence[Finding], text: str, settings: Settings, path: str) -> List[Finding]:
    if not findings:
        return list(findings)
    by_line = line_suppressions(text)
    whole = file_suppressions(text) | per_file_selectors(settings, path)
    return [f for f in findings if not is_suppressed(f, by_line, whole)]
