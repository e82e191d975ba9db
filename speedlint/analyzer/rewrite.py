"""`speedlint fix`: fix files to a fixed point, show the diff or write atomically."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from speedlint.analyzer.fixing import FixOutcome, fix_text
from speedlint.analyzer.notebook import is_notebook
from speedlint.analyzer.notebook_fix import NotebookFixOutcome, fix_notebook_file, fix_notebook_text
from speedlint.analyzer.rule import Diagnostic
from speedlint.analyzer.runner import SettingsResolver, collect_config_files, collect_files, display_path, rules_for
from speedlint.analyzer.sources import SourceError, read_source, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program import FileSeeds


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


def fix_source_file(path: Path, shown: str, resolver: SettingsResolver, apply: bool, seeds: "Optional[FileSeeds]" = None, text: Optional[str] = None) -> tuple:  # type: ignore[type-arg]
    """Fix one file; returns (outcome or None, diagnostics, written?). `seeds`: what the whole
    program says about it (`speedlint.analyzer.program`), so that `fix` sees what `check` sees.
    `text`: the file's text as an earlier pass left it (default: read the file)."""
    if is_notebook(path):  # (a notebook has no config-driven second pass: `text` is not used)
        settings = resolver.for_file(path)
        return fix_notebook_file(path, shown, rules_for(settings), settings, apply, seeds)
    try:
        source = read_source(path)
    except SourceError as exc:
        return None, [Diagnostic(shown, str(exc))], False
    settings = resolver.for_file(path)
    outcome = fix_text(source.text if text is None else text, shown, rules_for(settings), settings, unsafe=settings.unsafe_fixes, seeds=seeds)
    if text is not None:
        outcome.original = source.text
    if not (apply and outcome.changed):
        return outcome, [], False
    try:
        write_atomic(path, source.encode(outcome.fixed))
    except SourceError as exc:
        return outcome, [Diagnostic(shown, f"cannot write fixes: {exc}", "write-error")], False
    except UnicodeEncodeError as exc:
        return outcome, [Diagnostic(shown, f"fixed code cannot be encoded as {source.encoding}: {exc}; not modified", "write-error")], False
    return outcome, [], True


#: Passes over the project when fixes change config files (a new value there may call for a
#: fix in the code: 4 workers now need `persistent_workers`).
MAX_PASSES = 3


def fix_paths(paths: Sequence[str], resolver: SettingsResolver, apply: bool, force_exclude: bool = False) -> FixRun:
    from speedlint.analyzer.configs.sources import overridden
    from speedlint.analyzer.parallel import default_jobs, program_seeds

    found = collect_files(paths, resolver, force_exclude)
    run = FixRun(missing=found.missing)
    files = [(path, display_path(path)) for path in found.files]
    configs = collect_config_files(paths, resolver)
    outcomes: Dict[int, FixOutcome] = {}
    config_outcomes: Dict[str, FixOutcome] = {}  # config path -> its outcome (texts in memory)
    for _ in range(MAX_PASSES):
        with overridden({p: o.fixed for p, o in config_outcomes.items()}):
            seeds, _ = program_seeds(files, None, default_jobs(), config_files=configs)
            fresh = []
            for index, (path, shown) in enumerate(files):
                earlier = outcomes.get(index)
                if earlier is not None and (isinstance(earlier, NotebookFixOutcome) or (not earlier.config_fixes and not config_outcomes)):
                    continue
                text = earlier.fixed if earlier is not None else None
                outcome, diags, _ = fix_source_file(path, shown, resolver, False, seeds.get(index), text)
                run.diagnostics.extend(diags)
                if outcome is None:
                    continue
                if earlier is not None:
                    outcome.original = earlier.original
                    outcome.applied = earlier.applied + outcome.applied
                    outcome.diagnostics = earlier.diagnostics + [d for d in outcome.diagnostics if d not in earlier.diagnostics]
                outcomes[index] = outcome
                fresh.append(outcome)
        changed = fix_config_files(fresh, resolver, config_outcomes, run)
        if not changed:
            break
    run.outcomes = [outcomes[i] for i in sorted(outcomes)] + [config_outcomes[p] for p in sorted(config_outcomes)]
    if apply:
        _write(run, files, outcomes, config_outcomes)
    return run


def _write(run: FixRun, files: Sequence, outcomes: Dict[int, FixOutcome], config_outcomes: Dict[str, FixOutcome]) -> None:  # type: ignore[type-arg]
    targets = [(files[i][0], o) for i, o in sorted(outcomes.items())] + [(Path(p), o) for p, o in sorted(config_outcomes.items())]
    for path, outcome in targets:
        if not outcome.changed:
            continue
        if isinstance(outcome, NotebookFixOutcome):  # the rewritten notebook file, cells spliced in
            if outcome.data is None:
                continue
            try:
                write_atomic(path, outcome.data)
            except SourceError as exc:
                run.diagnostics.append(Diagnostic(outcome.path, f"cannot write fixes: {exc}", "write-error"))
                continue
            run.written.append(outcome.path)
            continue
        try:
            source = read_source(path)
            if source.text != outcome.original:
                run.diagnostics.append(Diagnostic(outcome.path, "changed while it was being fixed; not modified", "write-error"))
                continue
            write_atomic(path, source.encode(outcome.fixed))
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
    settings = resolver.for_file(Path(filename))
    if is_notebook(filename):  # stdin holds the notebook's JSON: so does the output
        return fix_notebook_text(text, filename, rules_for(settings), settings)
    return fix_text(text, filename, rules_for(settings), settings, unsafe=settings.unsafe_fixes)
