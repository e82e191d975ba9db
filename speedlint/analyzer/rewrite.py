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
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from speedlint.analyzer.findings import Diagnostic, FixOutcome, allowed, unsafe_left
from speedlint.analyzer.notebook import NotebookError, is_notebook
from speedlint.analyzer.notebook_fix import NotebookFixOutcome, fix_notebook, fix_notebook_text
from speedlint.analyzer.parallel import CheckWork, Job, process_files, read_bytes, rules_by_code
from speedlint.analyzer.runner import SettingsResolver, cache_root, codes_for, collect_config_files, collect_files, display_path, program_scope, rules_for
from speedlint.analyzer.sources import SourceError, decode, read_source, write_atomic

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


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def unified_diff(outcome: FixOutcome) -> str:
    if isinstance(outcome, NotebookFixOutcome):
        return outcome.diff()  # per changed cell, named `path:cell N`
    a = _LINES.findall(outcome.original)  # lines end at line breaks only (not at form feeds)
    b = _LINES.findall(outcome.fixed)
    lines = difflib.unified_diff(a, b, fromfile=f"a/{outcome.path}", tofile=f"b/{outcome.path}")
    # a last line without a line break gets one and a marker, as `diff` and git write it
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


@dataclass
class FileFix:
    """One file's fix, as a worker sends it back: the outcome (None when the file could not be
    read), the file's encoding and the hash of the bytes that were fixed."""

    outcome: Optional[FixOutcome]
    diagnostics: List[Diagnostic] = field(default_factory=list)
    encoding: str = "utf-8"
    digest: Optional[str] = None


def _portable(outcome: FixOutcome) -> FixOutcome:
    """What crosses the process boundary: findings without their trees (a config fix keeps its
    edits), and the texts only of a file that changed (the diff and the write need them)."""
    texts = (outcome.original, outcome.fixed) if outcome.changed else ("", "")
    return replace(
        outcome,
        original=texts[0],
        fixed=texts[1],
        applied=[f.portable() for f in outcome.applied],
        remaining=[f.portable() for f in outcome.remaining],
        config_fixes=[f.portable() for f in outcome.config_fixes],
    )


def fix_job(job: Job, profile: "Optional[Profile]" = None) -> Tuple[FileFix, Optional[str]]:
    """Fix one file (in a worker or the parent); writes nothing. Never raises."""
    from speedlint.analyzer.cache import content_hash
    from speedlint.analyzer.fixing import fix_text

    try:
        data = read_bytes(job.path)
        digest = content_hash(data)
        if is_notebook(job.path):  # the cells' code, fixed and spliced back into the JSON
            settings = job.settings
            try:
                outcome: FixOutcome = fix_notebook(data, job.shown, rules_by_code(job.codes), settings, unsafe=settings.unsafe_fixes, seeds=job.seeds)
            except NotebookError as exc:
                return FileFix(None, [Diagnostic(job.shown, str(exc))]), digest
            return FileFix(_portable(outcome), [], "utf-8", digest), digest
        source = decode(data, job.shown)
    except SourceError as exc:
        return FileFix(None, [Diagnostic(job.shown, str(exc))]), None
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
    """Replace the file with its fixed text (a notebook: the rewritten JSON), atomically, if it
    still holds what was fixed."""
    from speedlint.analyzer.cache import content_hash

    outcome = fixed.outcome
    assert outcome is not None
    try:
        if content_hash(read_bytes(str(path))) != fixed.digest:
            return Diagnostic(shown, "cannot write fixes: the file changed while it was being fixed; not modified", "write-error")
        if isinstance(outcome, NotebookFixOutcome):
            if outcome.data is not None:
                write_atomic(path, outcome.data)
        else:
            write_atomic(path, outcome.fixed.encode(fixed.encoding))
    except SourceError as exc:
        return Diagnostic(shown, f"cannot write fixes: {exc}", "write-error")
    except UnicodeEncodeError as exc:
        return Diagnostic(shown, f"fixed code cannot be encoded as {fixed.encoding}: {exc}; not modified", "write-error")
    return None


#: Passes over the project when fixes change config files (a new value there may call for a
#: fix in the code: 4 workers now need `persistent_workers`).
MAX_PASSES = 3


def fix_paths(
    paths: Sequence[str],
    resolver: SettingsResolver,
    apply: bool,
    force_exclude: bool = False,
    jobs: Optional[int] = None,
    use_cache: bool = True,
) -> FixRun:
    """Fix files in parallel; with `apply`, write the changed ones (in discovery order; a file
    that cannot be written is reported and the others are written). When the fixes edit config
    files, the program is linked again over the edited config texts (in memory) and the files
    that depend on them are fixed again, up to `MAX_PASSES`; config files are written last."""
    found = collect_files(paths, resolver, force_exclude)
    run = FixRun(missing=found.missing)
    files = [(path, display_path(path)) for path in found.files]
    scope = program_scope(paths, files, resolver)  # the program is the project around the named files
    configs = collect_config_files(list(scope.roots) if scope is not None else paths, resolver)
    program_files = scope.files if scope is not None else None
    root = cache_root(resolver) if use_cache else None
    results, _ = process_files(files, resolver.for_file, codes_for, root, jobs=jobs, config_files=configs, work=FixWork(), program_files=program_files)
    fixed: Dict[int, FileFix] = {}
    for index, result in enumerate(results):
        run.diagnostics.extend(result.diagnostics)
        if result.outcome is not None:
            fixed[index] = result
    config_outcomes: Dict[str, FixOutcome] = {}  # config path -> its outcome (texts in memory)
    fresh = [f.outcome for f in fixed.values() if f.outcome is not None]
    for _ in range(MAX_PASSES - 1):
        if not fix_config_files(fresh, resolver, config_outcomes, run):
            break
        fresh = _fix_again(files, fixed, resolver, configs, config_outcomes, program_files)
    run.outcomes = [fixed[i].outcome for i in sorted(fixed)] + [config_outcomes[p] for p in sorted(config_outcomes)]  # type: ignore[misc]
    if apply:
        for index in sorted(fixed):
            result = fixed[index]
            if result.outcome is not None and result.outcome.changed:
                path, shown = files[index]
                problem = write_fixed(path, shown, result)
                if problem is None:
                    run.written.append(shown)
                else:
                    run.diagnostics.append(problem)
        _write_configs(run, config_outcomes)
    return run


def _fix_again(
    files: Sequence[Tuple[Path, str]],
    fixed: Dict[int, FileFix],
    resolver: SettingsResolver,
    configs: Sequence[str],
    config_outcomes: Dict[str, FixOutcome],
    program_files: Optional[Sequence[Tuple[Path, str]]] = None,
) -> List[FixOutcome]:
    """Another pass over the Python files (not notebooks) with the config files' new texts: the
    program is linked again, each file fixed from where the last pass left it. In-process: it
    only happens when fixes edit config files."""
    from speedlint.analyzer.configs.sources import overridden
    from speedlint.analyzer.fixing import fix_text
    from speedlint.analyzer.parallel import default_jobs, program_of

    fresh: List[FixOutcome] = []
    with overridden({p: o.fixed for p, o in config_outcomes.items()}):
        seeds = program_of(files, program_files, None, default_jobs(), config_files=configs).seeds
        for index, (path, shown) in enumerate(files):
            earlier = fixed.get(index)
            if earlier is None or earlier.outcome is None or isinstance(earlier.outcome, NotebookFixOutcome):
                continue
            text = earlier.outcome.fixed if earlier.outcome.changed else None
            try:
                text = text if text is not None else read_source(path).text
            except SourceError:
                continue
            settings = resolver.for_file(path)
            outcome = fix_text(text, shown, rules_for(settings), settings, unsafe=settings.unsafe_fixes, seeds=seeds.get(index))
            if not outcome.changed and not outcome.config_fixes:
                continue
            before = earlier.outcome
            original = before.original if before.changed else text
            merged = replace(
                _portable(outcome),
                original=original,
                fixed=outcome.fixed,
                applied=before.applied + [f.portable() for f in outcome.applied],
                diagnostics=before.diagnostics + [d for d in outcome.diagnostics if d not in before.diagnostics],
            )
            fixed[index] = replace(earlier, outcome=merged)
            fresh.append(merged)
    return fresh


def _write_configs(run: FixRun, config_outcomes: Dict[str, FixOutcome]) -> None:
    """Write the edited config files, each only if it still holds the text that was edited."""
    for path in sorted(config_outcomes):
        outcome = config_outcomes[path]
        if not outcome.changed:
            continue
        try:
            source = read_source(path)
            if source.text != outcome.original:
                run.diagnostics.append(Diagnostic(outcome.path, "changed while it was being fixed; not modified", "write-error"))
                continue
            write_atomic(Path(path), source.encode(outcome.fixed))
        except SourceError as exc:
            run.diagnostics.append(Diagnostic(outcome.path, f"cannot write fixes: {exc}", "write-error"))
            continue
        except UnicodeEncodeError as exc:
            run.diagnostics.append(Diagnostic(outcome.path, f"fixed text cannot be encoded as {source.encoding}: {exc}; not modified", "write-error"))
            continue
        run.written.append(outcome.path)


def fix_config_files(outcomes: Sequence[FixOutcome], resolver: SettingsResolver, config_outcomes: Dict[str, FixOutcome], run: FixRun) -> bool:
    """Work out the config-file edits the Python files' fixes ask for (in memory, into
    `config_outcomes`): each config file once per pass, only when it still reads as the same
    structure with just those values changed (`configs.edit.apply_edits`); its own `# noqa`
    comments suppress them; never a config file that is not understood. Returns whether any
    config text changed."""
    from speedlint.analyzer.configs.edit import apply_edits
    from speedlint.analyzer.suppress import apply_suppressions

    by_path: Dict[str, list] = {}  # type: ignore[type-arg]
    for outcome in outcomes:
        for finding in outcome.config_fixes:
            for edit in finding.fix.config_edits:  # type: ignore[union-attr]
                by_path.setdefault(edit.path, []).append((finding, edit))
    changed = False
    for path in sorted(by_path):
        shown = display_path(Path(path))
        earlier = config_outcomes.get(path)
        if earlier is not None:
            original, text = earlier.original, earlier.fixed
        else:
            try:
                original = text = read_source(path).text
            except SourceError as exc:
                run.diagnostics.append(Diagnostic(shown, f"config file not fixed: {exc}", "warning"))
                continue
        settings = resolver.for_file(Path(path))
        kept = apply_suppressions([f for f, _ in by_path[path]], text, settings, shown)
        pairs = [(f, e) for f, e in by_path[path] if any(k is f for k in kept)]
        if not pairs:
            continue
        new_text, why = apply_edits(path, text, [e for _, e in pairs])
        if new_text is None:
            diagnostic = Diagnostic(shown, f"config file not fixed: {why}", "warning")
            if diagnostic not in run.diagnostics:
                run.diagnostics.append(diagnostic)
            continue
        if new_text == text:
            continue
        applied = list(earlier.applied) if earlier is not None else []
        for f, _ in pairs:
            if all(f is not g for g in applied):
                applied.append(f)
        config_outcomes[path] = FixOutcome(shown, original, new_text, applied=applied)
        changed = True
    return changed


def fix_stdin(text: str, filename: str, resolver: SettingsResolver) -> FixOutcome:
    from speedlint.analyzer.fixing import fix_text

    settings = resolver.for_file(Path(filename))
    if is_notebook(filename):  # stdin holds the notebook's JSON: so does the output
        return fix_notebook_text(text, filename, rules_for(settings), settings)
    return fix_text(text, filename, rules_for(settings), settings, unsafe=settings.unsafe_fixes)
