"""One document's findings and fixes, from the engine `check` and `fix` use.

`analyse` is `check` for one buffer: `engine.analyze_text` with the file's settings, rules and
seeds, then `# noqa` and `per-file-ignores` (`suppress.apply_suppressions`), the config-file
warnings (`parallel.config_diagnostics`) and, in a notebook, the cells (`Notebook.locate`). Where
`check` turns a crash in a rule into an internal error for the whole file, the server analyses
that file again rule by rule: the rules that crash are skipped (and reported), the others still
speak.

`fix_one` applies one finding's fix (`fixing.apply_round`, the step `fix` repeats); `fix_all` is
`fixing.fix_text`, `fix --apply` for one buffer (`fix_all_notebook`: for a notebook's cells).
None of them touches a text that LibCST does not give back exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Type

from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import Analysis, analyze_text
from speedlint.analyzer.findings import Diagnostic, Finding, allowed
from speedlint.analyzer.fixing import apply_round, compiles, fix_text
from speedlint.analyzer.notebook import Notebook, NotebookError
from speedlint.analyzer.notebook_fix import fix_notebook
from speedlint.analyzer.parallel import config_diagnostics
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.rule import Rule
from speedlint.analyzer.runner import rules_for
from speedlint.analyzer.suppress import apply_suppressions


@dataclass
class DocumentResult:
    findings: List[Finding] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    #: rules that crashed on this text: (code, the exception), skipped
    failed: List[Tuple[str, str]] = field(default_factory=list)


def _analyse_with(text: str, shown: str, rules: Sequence[Type[Rule]], settings: Settings, seeds: Optional[FileSeeds]) -> DocumentResult:
    analysis = analyze_text(text, shown, rules, settings, seeds=seeds)
    findings = [f.portable() for f in apply_suppressions(analysis.findings, text, settings, shown)]
    diagnostics = analysis.diagnostics + config_diagnostics(shown, seeds, analysis.ctx)
    if analysis.ctx is not None:
        analysis.ctx.__dict__.clear()  # free the tree now (see `parallel.analyze_job`)
    return DocumentResult(findings, diagnostics)


def analyse(
    text: str, shown: str, settings: Settings, seeds: Optional[FileSeeds], notebook: Optional[Notebook] = None, suspects: Sequence[str] = ()
) -> DocumentResult:
    """The findings and diagnostics of `text` (a notebook's analysed text when `notebook`), as
    `check` reports them for that file. Never raises. `suspects`: rules that failed on an
    earlier text of the file, run apart (the others together, once)."""
    rules = rules_for(settings)
    together = [r for r in rules if r.code not in suspects]
    try:
        result = _analyse_with(text, shown, together, settings, seeds)
        apart = [r for r in rules if r.code in suspects]
    except Exception:  # a bug in some rule: find which, skip it, keep the others
        result, apart = DocumentResult(), rules
    for rule in apart:
        if not rule.can_fire_on(text, seeds):
            continue
        try:
            one = _analyse_with(text, shown, [rule], settings, seeds)
        except Exception as exc:
            result.failed.append((rule.code, repr(exc)))
            continue
        result.findings.extend(one.findings)
        result.diagnostics.extend(d for d in one.diagnostics if d not in result.diagnostics)
    if apart:
        result.findings.sort(key=Finding.sort_key)
    result.findings = [f for f in result.findings if f.path == shown]  # (a config file's findings are its own)
    if notebook is not None:
        result.findings, result.diagnostics = notebook.locate(result.findings, result.diagnostics, shown)
    return result


def _reproduced(analysis: Analysis, text: str) -> bool:
    return analysis.ctx is not None and analysis.ctx.module.code == text


def fix_one(text: str, shown: str, settings: Settings, seeds: Optional[FileSeeds], code: str, line: int, column: int) -> Optional[str]:
    """`text` with the fix of the finding of rule `code` at `line`:`column` applied (safe or
    unsafe), or None when there is no such fix to apply (or LibCST does not give the text back)."""
    rules = [r for r in rules_for(settings) if r.code == code]
    if not rules:
        return None
    analysis = analyze_text(text, shown, rules, settings, seeds=seeds)
    if not _reproduced(analysis, text):
        return None
    found = [
        f for f in apply_suppressions(analysis.findings, text, settings, shown)
        if f.line == line and f.column == column and allowed(f.fix, True) and not f.fix.config_edits  # type: ignore[union-attr]
    ]
    if not found or analysis.ctx is None:
        return None
    module, applied = apply_round(analysis.ctx.module, analysis.ctx, found[:1])
    new = module.code
    if not applied or new == text or (compiles(text, shown) and not compiles(new, shown)):
        return None
    return new


def fix_all_notebook(data: str, shown: str, settings: Settings, seeds: Optional[FileSeeds]) -> List[Tuple[int, str, str]]:
    """`fix --apply` for a notebook's JSON (`notebook_fix.fix_notebook`): the changed cells,
    (cell number, old source, new source)."""
    try:
        outcome = fix_notebook(data.encode("utf-8"), shown, rules_for(settings), settings, unsafe=settings.unsafe_fixes, seeds=seeds)
    except NotebookError:
        return []
    return list(outcome.cells)


def fix_all(text: str, shown: str, settings: Settings, seeds: Optional[FileSeeds]) -> Optional[str]:
    """`fix --apply` for this text: its fixes (the safe ones; unsafe ones too where the settings
    enable them) to a fixed point. None when nothing changes."""
    outcome = fix_text(text, shown, rules_for(settings), settings, unsafe=settings.unsafe_fixes, seeds=seeds)
    return outcome.fixed if outcome.changed else None
