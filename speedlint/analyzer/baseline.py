"""A baseline: adopt speedlint on a legacy codebase by accepting today's findings, failing on new ones.

`speedlint check --write-baseline FILE` records each finding keyed on

* the rule code,
* the file, relative to the baseline file's folder, in posix form,
* the content of the flagged line (the finding's first line), with comments removed and runs of
  whitespace collapsed, and how many findings of that rule share that content in that file,

never on line numbers: an edit elsewhere in the file (a line added above, re-indentation, a
trailing comment) leaves the finding baselined. `speedlint check --baseline FILE` reports only
findings beyond what the baseline holds for their key, and notes entries that no longer match
(the finding was fixed or its line changed) as stale: a note, not a failure.

When a file holds more findings for a key than the baseline (a duplicated line), the first ones in
file order are taken as baselined and the rest are reported as new.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from speedlint.analyzer.diffkeys import FindingKeyer, Key, code_lines, relative_path
from speedlint.analyzer.findings import Finding

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.runner import RunResult

__all__ = ["BaselineError", "Entry", "BaselineOutcome", "Key", "code_lines", "relative_path", "entries_for", "write_baseline", "load_baseline", "apply_baseline", "filter_result"]

FORMAT_VERSION = 1


class BaselineError(ValueError):
    """A baseline file that cannot be read or written: exit code 2 with this message."""


@dataclass(frozen=True)
class Entry:
    code: str
    name: str
    path: str
    content: str
    count: int

    @property
    def key(self) -> Key:
        return (self.code, self.path, self.content)


@dataclass
class BaselineOutcome:
    """What applying a baseline did: findings matched, and entries left unmatched (stale)."""

    matched: int = 0
    stale: List[Tuple[Entry, int]] = field(default_factory=list)  # (entry, how many did not match)


def _ordered(findings: Sequence[Finding]) -> List[Finding]:
    return sorted(findings, key=Finding.sort_key)


def entries_for(findings: Sequence[Finding], base: Path, sources: Dict[str, Optional[str]]) -> List[Entry]:
    keyer = FindingKeyer(base, sources)
    counts: Counter = Counter()
    names: Dict[Key, str] = {}
    for f in _ordered(findings):
        k = keyer.key(f)
        counts[k] += 1
        names[k] = f.name
    return [Entry(code, names[(code, path, content)], path, content, n) for (code, path, content), n in sorted(counts.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2]))]


def write_baseline(file: Path, findings: Sequence[Finding], sources: Dict[str, Optional[str]]) -> int:
    """Write the baseline of `findings` to `file`; returns the number of findings recorded."""
    from speedlint import __version__

    file = Path(file)
    entries = entries_for(findings, file.parent if str(file.parent) else Path("."), sources)
    data = {
        "speedlint-baseline": FORMAT_VERSION,
        "generated-by": f"speedlint {__version__}",
        "findings": [
            {"code": e.code, "name": e.name, "path": e.path, "content": e.content, "count": e.count} for e in entries
        ],
    }
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"cannot write baseline {file}: {exc.strerror or exc}") from None
    return sum(e.count for e in entries)


def load_baseline(file: Path) -> List[Entry]:
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline file not found: {file} (create it with --write-baseline)") from None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise BaselineError(f"baseline {file} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("speedlint-baseline") != FORMAT_VERSION or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{file} is not a speedlint baseline (version {FORMAT_VERSION}); write one with --write-baseline")
    entries = []
    for i, item in enumerate(data["findings"]):
        try:
            entries.append(
                Entry(str(item["code"]), str(item.get("name", "")), str(item["path"]), str(item["content"]), int(item.get("count", 1)))
            )
        except (KeyError, TypeError, ValueError):
            raise BaselineError(f"baseline {file}: entry {i} lacks code, path or content") from None
    return entries


def apply_baseline(
    findings: Sequence[Finding],
    entries: Sequence[Entry],
    base: Path,
    sources: Dict[str, Optional[str]],
    checked: Optional[Sequence[str]] = None,
) -> Tuple[List[Finding], BaselineOutcome]:
    """The findings that are new with respect to the baseline, and what matched or went stale.

    `checked`: the files of this run (as reported); entries of other files are never stale.
    """
    keyer = FindingKeyer(base, sources)
    budget: Counter = Counter()
    by_key: Dict[Key, Entry] = {}
    for e in entries:
        budget[e.key] += e.count
        by_key.setdefault(e.key, e)
    left = Counter(budget)
    new: List[Finding] = []
    outcome = BaselineOutcome()
    for f in _ordered(findings):
        k = keyer.key(f)
        if left[k] > 0:
            left[k] -= 1
            outcome.matched += 1
        else:
            new.append(f)
    checked_rel = None if checked is None else {relative_path(p, base) for p in checked}
    for k, n in sorted(left.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        if n > 0 and (checked_rel is None or k[1] in checked_rel):
            outcome.stale.append((by_key[k], n))
    keep = set(map(id, new))
    return [f for f in findings if id(f) in keep], outcome


def filter_result(result: RunResult, entries: Sequence[Entry], base: Path) -> BaselineOutcome:
    """Apply a baseline to a RunResult in place (each file keeps only its new findings)."""
    sources = {r.path: r.source for r in result.files}
    all_findings = [f for r in result.files for f in r.findings]
    new, outcome = apply_baseline(all_findings, entries, base, sources, [r.path for r in result.files])
    keep = set(map(id, new))
    for r in result.files:
        r.findings = [f for f in r.findings if id(f) in keep]
    return outcome
