"""`speedlint fix`: fix files to a fixed point, show the diff or write atomically.

Files are fixed like `check` checks them (`parallel.process_files`): the same program phase,
the same worker pool (`--jobs`), results in discovery order whatever order the workers finish in.
A file that `check`'s cache answers for its exact content, settings, rules and program facts with
no fix to apply is not analysed again (its first round would find what `check` found).

The workers fix texts; the parent writes. Writing in one place, after a file's fix is complete,
keeps the report exact (a worker that dies has written nothing, and its files are redone
in-process), and lets the parent check, just before it replaces a file, that the file still
holds the text that was fixed: an edit made meanwhile is never overwritten.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from speedlint.analyzer.findings import Diagnostic, allowed, unsafe_left
from speedlint.analyzer.fixing import FixOutcome, fix_text
from speedlint.analyzer.parallel import CheckWork, Job, process_files, read_bytes, rules_by_code
from speedlint.analyzer.runner import SettingsResolver, cache_root, codes_for, collect_files, display_path, rules_for
from speedlint.analyzer.sources import SourceError, decode, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.cache import CachedResult
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.findings import Profile


@dataclass
class FixRun:
    outcomes: List[FixOutcome] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    written: List[str] = field(default_factory=list)

    @property
    def changed(self) -> List[FixOutcome]:
        return [o for o in self.outcomes if o.changed]


def unified_diff(outcome: FixOutcome) -> str:
    a = outcome.original.splitlines(keepends=True)
    b = outcome.fixed.splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, fromfile=f"a/{outcome.path}", tofile=f"b/{outcome.path}"))


@dataclass
class FileFix:
    """One file's fix, as a worker sends it back: the outcome (None when the file could not be
    read), the file's encoding and the hash of the bytes that were fixed."""

    outcome: Optional[FixOutcome]
    diagnostics: List[Diagnostic] = field(default_factory=list)
    encoding: str = "utf-8"
    digest: Optional[str] = None


def _portable(outcome: FixOutcome) -> FixOutcome:
    """What crosses the process boundary: findings without their trees, and the texts only of
    a file that changed (the diff and the write need them; the others are not sent back)."""
    texts = (outcome.original, outcome.fixed) if outcome.changed else ("", "")
    return replace(
        outcome,
        original=texts[0],
        fixed=texts[1],
        applied=[f.portable() for f in outcome.applied],
        remaining=[f.portable() for f in outcome.remaining],
    )


def fix_job(job: Job, profile: "Optional[Profile]" = None) -> Tuple[FileFix, Optional[str]]:
    """Fix one file (in a worker or the parent); writes nothing. Never raises."""
    from speedlint.analyzer.cache import content_hash

    try:
        data = read_bytes(job.path)
        source = decode(data, job.shown)
    except SourceError as exc:
        return FileFix(None, [Diagnostic(job.shown, str(exc))]), None
    digest = content_hash(data)
    settings = job.settings
    enabled = rules_by_code(job.hint) if job.hint is not None and digest == job.digest else None
    try:
        outcome = fix_text(source.text, job.shown, rules_by_code(job.codes), settings, unsafe=settings.unsafe_fixes, seeds=job.seeds, enabled=enabled)
    except Exception as exc:  # a bug in a rule must not stop the run, nor lose the file
        message = f"internal error while fixing: {exc!r}; file left as it is, please report this bug"
        outcome = FixOutcome(job.shown, source.text, source.text, diagnostics=[Diagnostic(job.shown, message, "internal-error")])
    return FileFix(_portable(outcome), [], source.encoding, digest), digest


class FixWork(CheckWork):
    """`process_files` fixing each file (see the module docstring); the results are not cached."""

    store = False

    def run(self, job: Job, profile: "Optional[Profile]") -> Tuple[FileFix, Optional[str]]:
        return fix_job(job, profile)

    def nothing(self, shown: str) -> FileFix:
        return FileFix(FixOutcome(shown, "", ""))

    def unreadable(self, shown: str, message: str) -> FileFix:
        return FileFix(None, [Diagnostic(shown, message)])

    def needs_source(self, hit: "CachedResult") -> bool:
        return False

    def cached(self, shown: str, hit: "CachedResult", settings: "Settings", source: Optional[str]) -> Optional[FileFix]:
        """Unchanged when `check` found no fix to apply: exactly the first round of `fix_text`
        (same findings after suppressions, or the file's diagnostics); else None: fix it."""
        unsafe = settings.unsafe_fixes
        if any(allowed(f.fix, unsafe) for f in hit.findings):
            return None
        if hit.diagnostics:
            return FileFix(FixOutcome(shown, "", "", diagnostics=list(hit.diagnostics)))
        return FileFix(FixOutcome(shown, "", "", remaining=list(hit.findings), unsafe_available=unsafe_left(hit.findings, unsafe)))


def write_fixed(path: Path, shown: str, fixed: FileFix) -> Optional[Diagnostic]:
    """Replace the file with its fixed text, atomically, if it still holds what was fixed."""
    from speedlint.analyzer.cache import content_hash

    assert fixed.outcome is not None
    try:
        if content_hash(read_bytes(str(path))) != fixed.digest:
            return Diagnostic(shown, "cannot write fixes: the file changed while it was being fixed; not modified", "write-error")
        write_atomic(path, fixed.outcome.fixed.encode(fixed.encoding))
    except SourceError as exc:
        return Diagnostic(shown, f"cannot write fixes: {exc}", "write-error")
    except UnicodeEncodeError as exc:
        return Diagnostic(shown, f"fixed code cannot be encoded as {fixed.encoding}: {exc}; not modified", "write-error")
    return None


def fix_paths(
    paths: Sequence[str],
    resolver: SettingsResolver,
    apply: bool,
    force_exclude: bool = False,
    jobs: Optional[int] = None,
    use_cache: bool = True,
) -> FixRun:
    """Fix files in parallel; with `apply`, write the changed ones (in discovery order; a file
    that cannot be written is reported and the others are written)."""
    found = collect_files(paths, resolver, force_exclude)
    run = FixRun(missing=found.missing)
    files = [(path, display_path(path)) for path in found.files]
    root = cache_root(resolver) if use_cache else None
    results, _ = process_files(files, resolver.for_file, codes_for, root, jobs=jobs, work=FixWork())
    for (path, shown), fixed in zip(files, results):
        run.diagnostics.extend(fixed.diagnostics)
        if fixed.outcome is None:
            continue
        run.outcomes.append(fixed.outcome)
        if apply and fixed.outcome.changed:
            problem = write_fixed(path, shown, fixed)
            if problem is None:
                run.written.append(shown)
            else:
                run.diagnostics.append(problem)
    return run


def fix_stdin(text: str, filename: str, resolver: SettingsResolver) -> FixOutcome:
    settings = resolver.for_file(Path(filename))
    return fix_text(text, filename, rules_for(settings), settings, unsafe=settings.unsafe_fixes)
