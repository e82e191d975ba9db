"""The fix engine: apply non-overlapping fixes, re-lint, repeat until stable.

* Only fixes whose applicability is allowed are applied (safe; unsafe with `unsafe_fixes`).
* Replacement fixes are keyed on original nodes; two fixes whose nodes overlap are never applied
  in the same round: the second waits for the next round, on the re-parsed result.
* Codemod fixes (`Fix.fixer`) run one per round, after the replacement fixes are done.
* The result of each round is re-parsed; a round that breaks parsing is reverted and reported as
  an internal error naming the rules involved.
* The loop is capped; not converging is reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple, Type

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.findings import FixOutcome, allowed, unsafe_left
from speedlint.analyzer.rule import Diagnostic, Finding, Rule
from speedlint.analyzer.suppress import apply_suppressions

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program.seeds import FileSeeds

MAX_ROUNDS = 10


class _Replacer(cst.CSTTransformer):
    def __init__(self, mapping: Dict[cst.CSTNode, object]) -> None:
        super().__init__()
        self.mapping = mapping

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        if original_node in self.mapping:
            return self.mapping[original_node]
        return updated_node


def _span(ctx, node) -> Tuple[Tuple[int, int], Tuple[int, int]]:  # type: ignore[no-untyped-def]
    pos = ctx.position(node)
    return (pos.start.line, pos.start.column), (pos.end.line, pos.end.column)


def _overlaps(a, b) -> bool:  # type: ignore[no-untyped-def]
    return a[0] < b[1] and b[0] < a[1]


def apply_round(module: cst.Module, ctx, findings: Sequence[Finding]) -> Tuple[cst.Module, List[Finding]]:  # type: ignore[no-untyped-def]
    """Apply the replacement fixes of `findings` that do not overlap; or else one codemod fix."""
    mapping: Dict[cst.CSTNode, object] = {}
    spans: List[Tuple[Tuple[int, int], Tuple[int, int]]] = []
    imports = []
    applied: List[Finding] = []
    for finding in findings:
        fix = finding.fix
        assert fix is not None
        if not fix.replacements:
            continue
        mine = [_span(ctx, node) for node, _ in fix.replacements]
        if any(_overlaps(a, b) for a in mine for b in spans) or any(node in mapping for node, _ in fix.replacements):
            continue
        spans.extend(mine)
        for node, new in fix.replacements:
            mapping[node] = new
        imports.extend(fix.imports)
        applied.append(finding)
    if applied:
        new_module = module.visit(_Replacer(mapping))
        return _add_imports(new_module, imports), applied
    # codemods one at a time, in catalogue order (AMP before accumulation), whatever line each
    # finding is anchored on
    codemods = [f for f in findings if f.fix is not None and f.fix.fixer is not None]
    if codemods:
        finding = min(codemods, key=lambda f: f.code)
        return _add_imports(finding.fix.fixer(module), finding.fix.imports), [finding]  # type: ignore[union-attr,misc]
    return module, []


def _add_imports(module: cst.Module, imports) -> cst.Module:  # type: ignore[no-untyped-def]
    if not imports:
        return module
    context = CodemodContext()
    for spec in dict.fromkeys(imports):
        AddImportsVisitor.add_needed_import(context, spec.module, spec.obj)
    return AddImportsVisitor(context).transform_module(module)


def compiles(text: str, path: str) -> bool:
    """Whether `text` compiles as Python (the guard every fix passes: it must not break the file)."""
    try:
        compile(text, path, "exec", dont_inherit=True)
    except Exception:
        return False
    return True


def _first_difference(a: str, b: str) -> int:
    """The line of `a` where `b` first differs from it."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return a.count("\n", 0, i) + 1
    return a.count("\n", 0, min(len(a), len(b))) + 1


def fix_text(
    text: str,
    path: str,
    rules: Sequence[Type[Rule]],
    settings: Settings,
    unsafe: bool = False,
    seeds: "Optional[FileSeeds]" = None,
    enabled: Optional[Sequence[Type[Rule]]] = None,
) -> FixOutcome:
    """Fix `text` to a fixed point. Never raises for bad input; never returns unparsable code.

    `enabled`: the rules the pre-look leaves on `text`, when already decided (the first round's)."""
    outcome = FixOutcome(path, text, text)
    current = text
    failed_fixers: Set[int] = set()
    tree: Optional[cst.Module] = None  # the parse of `current`, when the last round made it
    for _ in range(MAX_ROUNDS):
        analysis = analyze_text(current, path, rules, settings, seeds=seeds, enabled=enabled if current is text else None, module=tree)
        tree = None
        if analysis.diagnostics and current is text:
            outcome.diagnostics.extend(analysis.diagnostics)
            return outcome
        findings = apply_suppressions(analysis.findings, current, settings, path)
        todo = [
            f for f in findings
            if allowed(f.fix, unsafe) and not f.fix.config_edits  # type: ignore[union-attr]
            and not (f.fix.fixer is not None and id(f.fix.fixer) in failed_fixers)  # type: ignore[union-attr]
        ]
        if not todo or analysis.ctx is None:
            outcome.remaining = findings
            break
        # LibCST does not give back every text it parses (a line holding only a `\`
        # continuation): writing its tree would drop what it lost. (Later rounds analyse its own
        # output, which it gives back: the user's text is compared once, before the first fix.)
        generated = analysis.ctx.module.code if current is text else current
        if generated != current:
            outcome.diagnostics.append(Diagnostic(path, f"not fixed: the parser cannot reproduce this file exactly (near line {_first_difference(current, generated)}), and a fix would change more than it should", "warning"))
            outcome.remaining = findings
            break
        try:
            module, applied = apply_round(analysis.ctx.module, analysis.ctx, todo)
            new_text = module.code
        except Exception as exc:  # a bug in a fix must not lose the file
            codes = ", ".join(sorted({f.code for f in todo}))
            outcome.diagnostics.append(Diagnostic(path, f"internal error while applying fixes ({codes}): {exc!r}; file left as it was before this round", "internal-error"))
            outcome.remaining = findings
            break
        if not applied or new_text == current:
            for f in applied:
                if f.fix is not None and f.fix.fixer is not None:
                    failed_fixers.add(id(f.fix.fixer))
            if any(f.fix is not None and f.fix.fixer is None for f in applied) or not applied:
                outcome.remaining = findings
                break
            continue
        # This round's trees (the analysis, the rewritten module, the fixes' nodes and closures)
        # are done with: freed before the re-parse and the next round's analysis, so that one
        # file's rounds do not pile up in memory (a big file's fix peaked at several trees).
        applied = [f.portable() for f in applied]
        findings = [f.portable() for f in findings]
        del todo, module, analysis
        try:
            parsed = cst.parse_module(new_text)
            if compiles(text, path):
                compile(new_text, path, "exec", dont_inherit=True)
        except Exception as exc:
            codes = ", ".join(sorted({f.code for f in applied}))
            outcome.diagnostics.append(
                Diagnostic(path, f"internal error: fixes for {codes} produced invalid code ({exc.__class__.__name__}); reverted, please report this bug", "internal-error")
            )
            outcome.remaining = findings
            break
        outcome.applied.extend(applied)
        current = new_text
        tree = parsed  # the next round analyses the tree this check parsed (not parsed twice)
    else:
        outcome.diagnostics.append(
            Diagnostic(path, f"fixes did not converge after {MAX_ROUNDS} rounds; applied what was stable", "warning")
        )
        final = analyze_text(current, path, rules, settings, seeds=seeds)
        outcome.remaining = apply_suppressions(final.findings, current, settings, path)
    outcome.fixed = current
    outcome.config_fixes = [f for f in outcome.remaining if f.fix is not None and f.fix.config_edits and allowed(f.fix, unsafe)]  # type: ignore[misc]
    outcome.unsafe_available = unsafe_left(outcome.remaining, unsafe)
    return outcome
