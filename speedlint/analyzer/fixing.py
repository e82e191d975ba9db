"""The fix engine: apply non-overlapping fixes, re-lint, repeat until stable.

* Only fixes whose applicability is allowed are applied (safe; unsafe with `unsafe_fixes`).
* Replacement fixes are keyed on original nodes; two fixes whose nodes overlap are never applied
  in the same round: the second waits for the next round, on the rewritten result.
* Codemod fixes (`Fix.fixer`) run one per round, after the replacement fixes are done.
* The text of each round's result is compiled (parsed, when the user's text does not compile); a
  round that breaks it is reverted and reported as an internal error naming the rules involved.
  The next round analyses the rewritten tree itself (its code is that text), not a parse of it.
* The loop is capped; not converging is reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Type, Union, cast

import libcst as cst

from speedlint.analyzer.add_imports import add_imports
from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.findings import FixOutcome, allowed, unsafe_left
from speedlint.analyzer.providers.walk import index_of
from speedlint.analyzer.pyparse import compile_quietly
from speedlint.analyzer.rule import Diagnostic, Finding, Fix, Rule
from speedlint.analyzer.suppress import apply_suppressions

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program.seeds import FileSeeds
    from speedlint.analyzer.rule import Replacement

MAX_ROUNDS = 10


class _Replacer(cst.CSTTransformer):
    """Replaces the nodes of `mapping`, entering only the subtrees that hold one (`on_the_way`:
    the ids of their ancestors). A subtree left alone is kept as it is, the same objects: LibCST
    rebuilds every node it enters, which made this pass most of a fix round's time."""

    def __init__(self, mapping: Dict[cst.CSTNode, Replacement], on_the_way: Set[int]) -> None:
        super().__init__()
        self.mapping = mapping
        self.on_the_way = on_the_way

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) in self.on_the_way

    # (LibCST types `on_leave` as giving back a node of the type it left: a replacement may be of another type)
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[cst.CSTNode]]:
        if original_node in self.mapping:
            new = self.mapping[original_node]
            # a copy of its own: a fix may reuse a node that stays elsewhere in the tree (or put
            # one in two places), and the next round analyses this tree as it is
            if isinstance(new, cst.FlattenSentinel):
                return cst.FlattenSentinel([node.deep_clone() for node in new.nodes])
            return new.deep_clone() if isinstance(new, cst.CSTNode) else new
        return updated_node


def _ancestors(ctx: FileContext, targets: Iterable[cst.CSTNode]) -> Set[int]:
    """The ids of the nodes of the file's tree above some node of `targets` (the root included),
    found on the reading of the tree the rules used, when it is kept (`TorchFacts.tree`)."""
    facts = ctx.torch_if_built
    index = facts.tree if facts is not None and facts.tree.nodes[0] is ctx.module else index_of(ctx.module)
    nodes, parents = index.nodes, index.parents
    out: Set[int] = set()
    for target in targets:
        i = index.index(target)
        if i is None:  # not in this tree (cannot happen for a rule's own nodes): enter everything
            return {id(node) for node in nodes}
        i = parents[i]
        while i >= 0 and id(nodes[i]) not in out:
            out.add(id(nodes[i]))
            i = parents[i]
    return out


def _span(ctx: FileContext, node: cst.CSTNode) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    pos = ctx.position(node)
    return (pos.start.line, pos.start.column), (pos.end.line, pos.end.column)


def _overlaps(a: Tuple[Tuple[int, int], Tuple[int, int]], b: Tuple[Tuple[int, int], Tuple[int, int]]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def apply_round(module: cst.Module, ctx: FileContext, findings: Sequence[Finding]) -> Tuple[cst.Module, List[Finding]]:
    """Apply the replacement fixes of `findings` that do not overlap; or else one codemod fix."""
    mapping: Dict[cst.CSTNode, Replacement] = {}
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
        new_module = module.visit(_Replacer(mapping, _ancestors(ctx, mapping)))
        return add_imports(new_module, imports), applied
    # codemods one at a time, in catalogue order (AMP before accumulation), whatever line each
    # finding is anchored on
    codemods = [f for f in findings if f.fix is not None and f.fix.fixer is not None]
    if codemods:
        finding = min(codemods, key=lambda f: f.code)
        fix = cast(Fix, finding.fix)  # `codemods` holds only findings whose fix has a fixer
        fixer = cast(Callable[[cst.Module], cst.Module], fix.fixer)
        return add_imports(fixer(module), fix.imports), [finding]
    return module, []


def compiles(text: str, path: str) -> bool:
    """Whether `text` compiles as Python (the guard every fix passes: it must not break the file)."""
    try:
        compile_quietly(text, path)
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
    tree: Optional[cst.Module] = None  # the tree whose code is `current`, when the last round made it
    text_compiles: Optional[bool] = None  # whether `text` compiles (a fix must keep it so), once asked
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
        # This round's analysis (its tree, the fixes' nodes and closures) is done with: freed
        # before the next round's analysis, so that one file's rounds do not pile up in memory (a
        # big file's fix peaked at several trees).
        applied = [f.portable() for f in applied]
        findings = [f.portable() for f in findings]
        del todo, analysis
        try:
            if text_compiles is None:
                text_compiles = compiles(text, path)  # (the user's text: compiled once, not every round)
            if text_compiles:
                compile_quietly(new_text, path)
                parsed = module  # its code is `new_text`: the next round analyses it unparsed
            else:
                parsed = cst.parse_module(new_text)  # (LibCST must still read what it wrote)
        except Exception as exc:
            codes = ", ".join(sorted({f.code for f in applied}))
            outcome.diagnostics.append(
                Diagnostic(path, f"internal error: fixes for {codes} produced invalid code ({exc.__class__.__name__}); reverted, please report this bug", "internal-error")
            )
            outcome.remaining = findings
            break
        outcome.applied.extend(applied)
        current = new_text
        tree = parsed
    else:
        outcome.diagnostics.append(
            Diagnostic(path, f"fixes did not converge after {MAX_ROUNDS} rounds; applied what was stable", "warning")
        )
        final = analyze_text(current, path, rules, settings, seeds=seeds)
        outcome.remaining = apply_suppressions(final.findings, current, settings, path)
    outcome.fixed = current
    outcome.config_fixes = [f for f in outcome.remaining if f.fix is not None and f.fix.config_edits and allowed(f.fix, unsafe)]
    outcome.unsafe_available = unsafe_left(outcome.remaining, unsafe)
    return outcome
