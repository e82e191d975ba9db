"""`speedlint fix`: show the fixes as a diff, or write them atomically.

The fixes come from the one fix driver (`fixdriver.compute_fixes`: program seeds, worker pool,
`check`'s cache, the config-file pass); this module writes them. Writing in one place, after a
file's fix is complete, keeps the report exact (a worker that dies has written nothing, and its
files are redone in-process), and lets the writer check, just before it replaces a file, that the
file still holds the text that was fixed: an edit made meanwhile is never overwritten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from speedlint.analyzer.diffkeys import unified_diff
from speedlint.analyzer.findings import Diagnostic, FixOutcome
from speedlint.analyzer.fixdriver import CONFIG, FileChange, FileFix, FixRun, FixWork, compute_fixes
from speedlint.analyzer.notebook import is_notebook
from speedlint.analyzer.notebook_fix import NotebookFixOutcome, fix_notebook_text
from speedlint.analyzer.parallel import read_bytes
from speedlint.analyzer.runner import SettingsResolver, rules_for, stdin_seeds
from speedlint.analyzer.sources import SourceError, read_source, write_atomic

__all__ = ["FixRun", "FixWork", "fix_paths", "fix_stdin", "unified_diff", "write_fixed", "write_run"]


def write_fixed(path: Path, shown: str, fixed: FileFix) -> Optional[Diagnostic]:
    """Replace the file with its fixed text (a notebook: the rewritten JSON), atomically, if it
    still holds what was fixed."""
    assert fixed.outcome is not None
    return _write_change(FileChange(str(path), shown, fixed.outcome, encoding=fixed.encoding, digest=fixed.digest))


def _write_change(change: FileChange) -> Optional[Diagnostic]:
    """Write one Python file or notebook the fixes change, if it still holds the bytes fixed."""
    from speedlint.analyzer.cache import content_hash

    outcome, shown = change.outcome, change.shown
    try:
        if content_hash(read_bytes(change.path)) != change.digest:
            return Diagnostic(shown, "cannot write fixes: the file changed while it was being fixed; not modified", "write-error")
        if not isinstance(outcome, NotebookFixOutcome) or outcome.data is not None:
            write_atomic(Path(change.path), change.new_bytes())
    except SourceError as exc:
        return Diagnostic(shown, f"cannot write fixes: {exc}", "write-error")
    except UnicodeEncodeError as exc:
        return Diagnostic(shown, f"fixed code cannot be encoded as {change.encoding}: {exc}; not modified", "write-error")
    return None


def _write_config(change: FileChange) -> Optional[Diagnostic]:
    """Write one edited config file, if it still holds the text that was edited."""
    outcome = change.outcome
    try:
        source = read_source(change.path)
        if source.text != outcome.original:
            return Diagnostic(outcome.path, "changed while it was being fixed; not modified", "write-error")
        write_atomic(Path(change.path), source.encode(outcome.fixed))
    except SourceError as exc:
        return Diagnostic(outcome.path, f"cannot write fixes: {exc}", "write-error")
    except UnicodeEncodeError as exc:
        return Diagnostic(outcome.path, f"fixed text cannot be encoded as {source.encoding}: {exc}; not modified", "write-error")
    return None


def write_run(run: FixRun) -> None:
    """Write what `run` changes (Python files and notebooks in discovery order, config files
    last); each written file is added to `run.written`, each that cannot be written is a
    diagnostic, and the others are written."""
    for change in run.changes:
        problem = _write_config(change) if change.kind == CONFIG else _write_change(change)
        if problem is None:
            run.written.append(change.shown)
        else:
            run.diagnostics.append(problem)


def fix_paths(
    paths: Sequence[str],
    resolver: SettingsResolver,
    apply: bool,
    force_exclude: bool = False,
    jobs: Optional[int] = None,
    use_cache: bool = True,
) -> FixRun:
    """Fix files (`fixdriver.compute_fixes`); with `apply`, write the changed ones (in discovery
    order, config files last; a file that cannot be written is reported and the others are
    written)."""
    run = compute_fixes(paths, resolver, force_exclude=force_exclude, jobs=jobs, use_cache=use_cache)
    if apply:
        write_run(run)
    return run


def fix_stdin(text: str, filename: str, resolver: SettingsResolver, use_cache: bool = True) -> FixOutcome:
    """Code read from stdin, fixed as `filename`: with a real file name, as part of the program
    around it (the seeds `check -` gives it), so that it gets the fixes the file would get on disk."""
    from speedlint.analyzer.fixing import fix_text

    settings = resolver.for_file(Path(filename))
    if is_notebook(filename):  # stdin holds the notebook's JSON: so does the output
        return fix_notebook_text(text, filename, rules_for(settings), settings)
    seeds = stdin_seeds(text, filename, resolver, use_cache) if filename != "-" else None
    return fix_text(text, filename, rules_for(settings), settings, unsafe=settings.unsafe_fixes, seeds=seeds)
