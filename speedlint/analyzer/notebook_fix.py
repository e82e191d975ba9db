"""`speedlint fix` for notebooks: fix the analysed text (`speedlint.analyzer.notebook`), map the
result back to cells, splice the changed cells' `source` into the file.

A fix that would change a magic line, or whose edit spans two cells, is found by fixing with its
rule alone, and left out (with a warning); the other rules' fixes are applied. Nothing is written
when no cell changes (the file keeps its bytes and its modification time).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Type

from speedlint.analyzer.findings import Diagnostic, FixOutcome
from speedlint.analyzer.notebook import Notebook, NotebookError, split_lines
from speedlint.analyzer.sources import SourceError, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.program.seeds import FileSeeds
    from speedlint.analyzer.rule import Rule


@dataclass
class NotebookFixOutcome(FixOutcome):
    """A `FixOutcome` for a notebook: `original` and `fixed` are the analysed texts; `cells` the
    changed cells, (cell number, old source, new source); `data` the rewritten file."""

    cells: List[Tuple[int, str, str]] = field(default_factory=list)
    data: Optional[bytes] = None

    def diff(self) -> str:
        out = []
        for number, old, new in self.cells:
            a = [c + "\n" for c, _ in split_lines(old)]
            b = [c + "\n" for c, _ in split_lines(new)]
            name = f"{self.path}:cell {number}"
            out.append("".join(difflib.unified_diff(a, b, fromfile=f"a/{name}", tofile=f"b/{name}")))
        return "".join(out)


def fix_notebook(
    data: bytes,
    shown: str,
    rules: Sequence[Type["Rule"]],
    settings: "Settings",
    unsafe: bool = False,
    seeds: "Optional[FileSeeds]" = None,
) -> NotebookFixOutcome:
    """Fix a notebook's bytes (NotebookError when it cannot be read). The fixes that cannot be
    mapped back to single cells without touching magics are left out, rule by rule."""
    nb = Notebook.parse(data)

    from speedlint.analyzer.fixing import fix_text

    def attempt(selected: Sequence[Type["Rule"]]) -> Tuple[FixOutcome, Dict[int, str], List[str]]:
        outcome = fix_text(nb.text, shown, selected, settings, unsafe=unsafe, seeds=seeds)
        changed, problems = nb.rebuild(outcome.fixed) if outcome.changed else ({}, [])
        return outcome, changed, problems

    outcome, changed, problems = attempt(rules)
    warnings: List[Diagnostic] = []
    if problems:
        refused: Dict[str, List[str]] = {}
        for code in sorted({f.code for f in outcome.applied}):
            _, _, why = attempt([r for r in rules if r.code == code])
            if why:
                refused[code] = why
        for code, why in refused.items():
            warnings.append(Diagnostic(shown, f"{code} fix not applied: {'; '.join(why)}", "warning"))
        outcome, changed, problems = attempt([r for r in rules if r.code not in refused])
        if problems:  # fixes that fit alone but not together: apply none
            warnings.append(Diagnostic(shown, f"fixes not applied: {'; '.join(problems)}", "warning"))
            outcome, changed = FixOutcome(shown, nb.text, nb.text, remaining=outcome.remaining), {}
    result = NotebookFixOutcome(
        path=shown,
        original=nb.text,
        fixed=outcome.fixed if changed else nb.text,
        applied=list(outcome.applied) if changed else [],
        remaining=outcome.remaining,
        diagnostics=[Diagnostic(shown, p) for p in nb.problems] + [replace(d, message=nb.place_message(d.message)) for d in outcome.diagnostics] + warnings,
        unsafe_available=outcome.unsafe_available,
    )
    if changed:
        try:
            result.data = nb.render(changed)
        except NotebookError as exc:
            result.diagnostics.append(Diagnostic(shown, str(exc), "internal-error"))
            result.fixed, result.applied = nb.text, []
            return result
        result.cells = [(nb.cells[k].number, nb.cells[k].source, changed[k]) for k in sorted(changed)]
    return result


def fix_notebook_file(
    path: Path,
    shown: str,
    rules: Sequence[Type["Rule"]],
    settings: "Settings",
    apply: bool,
    seeds: "Optional[FileSeeds]" = None,
) -> tuple:
    """`rewrite.fix_source_file` for a notebook: (outcome or None, diagnostics, written?)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return None, [Diagnostic(shown, f"cannot read: {exc.strerror or exc}")], False
    try:
        outcome = fix_notebook(data, shown, rules, settings, unsafe=settings.unsafe_fixes, seeds=seeds)
    except NotebookError as exc:
        return None, [Diagnostic(shown, str(exc))], False
    if not (apply and outcome.changed and outcome.data is not None):
        return outcome, [], False
    try:
        write_atomic(path, outcome.data)
    except SourceError as exc:
        return outcome, [Diagnostic(shown, f"cannot write fixes: {exc}", "write-error")], False
    return outcome, [], True


def fix_notebook_text(text: str, shown: str, rules: Sequence[Type["Rule"]], settings: "Settings") -> FixOutcome:
    """`fix` of a notebook's JSON text (stdin): `fixed` is the rewritten JSON text."""
    try:
        outcome = fix_notebook(text.encode("utf-8"), shown, rules, settings, unsafe=settings.unsafe_fixes)
    except NotebookError as exc:
        return FixOutcome(shown, text, text, diagnostics=[Diagnostic(shown, str(exc))])
    fixed = outcome.data.decode("utf-8") if outcome.data is not None else text
    return FixOutcome(shown, text, fixed, outcome.applied, outcome.remaining, outcome.diagnostics, outcome.unsafe_available)
