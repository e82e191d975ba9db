"""The one fix driver: the fixes for some paths under some settings, computed, never written.

`speedlint fix` (preview or `--apply`), `fix --verify`, `speedlint verify` and the editor server
all get their fixes from `compute_fixes`, so that what is shown, what is verified and what is
written are the same edits:

* the files are fixed like `check` checks them (`parallel.process_files`): the same program phase
  and its seeds, the same worker pool (`jobs`), the same cache look-up (a file `check`'s cache
  answers with no fix to apply is not analysed again), results in discovery order;
* the config-file pass: when fixes edit config files (YAML, JSON, TOML ... that the code reads),
  the program is linked again over the edited texts (in memory) and the Python files fixed again
  from where they were left, up to `MAX_PASSES` passes;
* nothing is printed and nothing is written: the result holds, per file, the new text (and the
  bytes `fix --apply` writes, `FileChange.new_bytes`), the findings fixed and those left.

Workers fix texts; the caller writes (`rewrite.write_run`) or copies the new bytes elsewhere (the
harness, into its temporary copy of the project).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from speedlint.analyzer.findings import Diagnostic, FixOutcome, allowed, unsafe_left
from speedlint.analyzer.notebook import NotebookError, is_notebook
from speedlint.analyzer.notebook_fix import NotebookFixOutcome, fix_notebook
from speedlint.analyzer.parallel import CheckWork, Job, process_files, read_bytes, rules_by_code
from speedlint.analyzer.runner import SettingsResolver, cache_root, codes_for, collect_config_files, collect_files, display_path, program_scope, rules_for
from speedlint.analyzer.sources import SourceError, decode, read_source

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.cache import CachedResult
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.findings import Finding, Profile

#: Passes over the project when fixes change config files (a new value there may call for a
#: fix in the code: 4 workers now need `persistent_workers`).
MAX_PASSES = 3

PYTHON, NOTEBOOK, CONFIG = "python", "notebook", "config"


@dataclass
class FileChange:
    """What the fixes do to one file.

    `path`: the file as discovered (config files: absolute); `shown`: as reported; `outcome`:
    its text before and after (`outcome.fixed`), the findings fixed (`outcome.applied`) and
    those left (`outcome.remaining`); `kind`: python, notebook or config; `encoding`: the file's
    text encoding; `digest`: the hash of the bytes that were fixed (None for a config file, whose
    text is compared instead)."""

    path: str
    shown: str
    outcome: FixOutcome
    kind: str = PYTHON
    encoding: str = "utf-8"
    digest: Optional[str] = None

    @property
    def changed(self) -> bool:
        return self.outcome.changed

    def new_bytes(self) -> bytes:
        """What `fix --apply` writes for this file (a notebook: its rewritten JSON).

        UnicodeEncodeError when the fixed text cannot be written in the file's encoding."""
        outcome = self.outcome
        if isinstance(outcome, NotebookFixOutcome):
            return outcome.data if outcome.data is not None else b""
        return outcome.fixed.encode(self.encoding)


@dataclass
class FixRun:
    """The fixes for a set of paths: `files` holds every Python file and notebook that was
    fixed (discovery order; files that could not be read are left out, with a diagnostic), then
    the config files the fixes edit (sorted). `written` is filled by whoever writes them."""

    files: List[FileChange] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    written: List[str] = field(default_factory=list)

    @property
    def outcomes(self) -> List[FixOutcome]:
        return [f.outcome for f in self.files]

    @property
    def changed(self) -> List[FixOutcome]:
        return [f.outcome for f in self.files if f.changed]

    @property
    def changes(self) -> List[FileChange]:
        """The files whose text the fixes change."""
        return [f for f in self.files if f.changed]

    def new_texts(self) -> Dict[str, str]:
        """File path (as discovered) -> its fixed text, for the files the fixes change (a
        notebook: the analysed text of its code cells; `FileChange.new_bytes` has its JSON)."""
        return {f.path: f.outcome.fixed for f in self.changes}


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


def compute_fixes(
    paths: Sequence[str],
    resolver: SettingsResolver,
    *,
    force_exclude: bool = False,
    jobs: Optional[int] = None,
    use_cache: bool = True,
) -> FixRun:
    """The fixes `speedlint fix PATHS` makes under `resolver`'s settings, computed and not written.

    `paths`: files or folders, as on the command line (never `-`); `resolver`: the settings
    (config files and command-line overrides: selection, `--unsafe-fixes`, fix options);
    `force_exclude`: apply excludes to files named explicitly too; `jobs`: worker processes
    (None: one per core; 1: in-process); `use_cache`: read `check`'s cache (never written).

    Every file is fixed to a fixed point with the program's seeds; then the config-file pass (see
    the module docstring). Never raises for bad input (an unreadable file or config file is a
    diagnostic); prints nothing."""
    found = collect_files(paths, resolver, force_exclude)
    run = FixRun(missing=list(found.missing))
    files = [(path, display_path(path)) for path in found.files]
    scope = program_scope(paths, files, resolver)  # the program is the project around the named files
    configs = collect_config_files(list(scope.roots) if scope is not None else paths, resolver)
    program_files = scope.files if scope is not None else None
    root = cache_root(resolver) if use_cache else None
    results, _ = process_files(
        files, resolver.for_file, codes_for, root, jobs=jobs, config_files=configs, work=FixWork(), program_files=program_files
    )
    fixed: Dict[int, FileFix] = {}
    for index, result in enumerate(results):
        run.diagnostics.extend(result.diagnostics)
        if result.outcome is not None:
            fixed[index] = result
    config_changes: Dict[str, FileChange] = {}  # config path -> its change (texts in memory)
    fresh = [f.outcome for f in fixed.values() if f.outcome is not None]
    for _ in range(MAX_PASSES - 1):
        if not fix_config_files(fresh, resolver, config_changes, run):
            break
        fresh = _fix_again(files, fixed, resolver, configs, config_changes, program_files)
    for index in sorted(fixed):
        path, shown = files[index]
        result = fixed[index]
        assert result.outcome is not None
        kind = NOTEBOOK if isinstance(result.outcome, NotebookFixOutcome) else PYTHON
        run.files.append(FileChange(str(path), shown, result.outcome, kind, result.encoding, result.digest))
    run.files.extend(config_changes[p] for p in sorted(config_changes))
    return run


def _fix_again(
    files: Sequence[Tuple[Path, str]],
    fixed: Dict[int, FileFix],
    resolver: SettingsResolver,
    configs: Sequence[str],
    config_changes: Dict[str, FileChange],
    program_files: Optional[Sequence[Tuple[Path, str]]] = None,
) -> List[FixOutcome]:
    """Another pass over the Python files (not notebooks) with the config files' new texts: the
    program is linked again, each file fixed from where the last pass left it. In-process: it
    only happens when fixes edit config files."""
    from speedlint.analyzer.configs.sources import overridden
    from speedlint.analyzer.fixing import fix_text
    from speedlint.analyzer.parallel import default_jobs, program_of

    fresh: List[FixOutcome] = []
    with overridden({p: c.outcome.fixed for p, c in config_changes.items()}):
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


def fix_config_files(outcomes: Sequence[FixOutcome], resolver: SettingsResolver, config_changes: Dict[str, FileChange], run: FixRun) -> bool:
    """Work out the config-file edits the Python files' fixes ask for (in memory, into
    `config_changes`): each config file once per pass, only when it still reads as the same
    structure with just those values changed (`configs.edit.apply_edits`); its own `# noqa`
    comments suppress them; never a config file that is not understood. Returns whether any
    config text changed."""
    from speedlint.analyzer.configs.edit import apply_edits
    from speedlint.analyzer.suppress import apply_suppressions

    by_path: Dict[str, list] = {}
    for outcome in outcomes:
        for finding in outcome.config_fixes:
            for edit in finding.fix.config_edits:  # type: ignore[union-attr]
                by_path.setdefault(edit.path, []).append((finding, edit))
    changed = False
    for path in sorted(by_path):
        shown = display_path(Path(path))
        earlier = config_changes.get(path)
        if earlier is not None:
            original, text, encoding = earlier.outcome.original, earlier.outcome.fixed, earlier.encoding
        else:
            try:
                source = read_source(path)
            except SourceError as exc:
                run.diagnostics.append(Diagnostic(shown, f"config file not fixed: {exc}", "warning"))
                continue
            original = text = source.text
            encoding = source.encoding
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
        applied: List["Finding"] = list(earlier.outcome.applied) if earlier is not None else []
        for f, _ in pairs:
            if all(f is not g for g in applied):
                applied.append(f)
        config_changes[path] = FileChange(path, shown, FixOutcome(shown, original, new_text, applied=applied), CONFIG, encoding)
        changed = True
    return changed
