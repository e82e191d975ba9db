"""The engine: files -> pre-filter -> `ast` pre-look -> one parse -> one batched traversal -> findings.

1. A file is looked at only when one of the enabled rules' trigger tokens occurs in its text.
2. Each rule's `ast_precondition` is asked (`prelook.AstFacts`: text checks first, then one `ast`
   parse and walk when needed); LibCST runs only for the rules whose precondition holds.
3. The file is parsed once; those rules run in one batched traversal (`providers.walk`, which
   does not rebuild the tree like LibCST's `visit`); the shared facts (`FileContext`) are
   computed on first use and at most once.
4. A per-file failure (syntax error, bad encoding, unreadable) becomes a `Diagnostic`; the run goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.walk import TreeIndex, indexed, visitor_methods
from speedlint.analyzer.providers.walk import visit_batched as fast_visit_batched
from speedlint.analyzer.findings import FileResult, Profile  # noqa: F401 - re-exported
from speedlint.analyzer.prelook import AstFacts
from speedlint.analyzer.pyparse import AST_ERRORS, parse_quietly
from speedlint.analyzer.providers.places import place_of, says_where, stated_when
from speedlint.analyzer.rule import Diagnostic, Edit, Finding, Rule
from speedlint.analyzer.sources import Source
from speedlint.analyzer.program.seeds import USED_ELSEWHERE
from speedlint.analyzer.program.summary import summarize

if TYPE_CHECKING:  # pragma: no cover
    from libcst.metadata.base_provider import BaseMetadataProvider

    from speedlint.analyzer.program.seeds import FileSeeds
    from speedlint.analyzer.rule import Replacement, Report

    _T = TypeVar("_T")


@dataclass
class Analysis:
    """A parsed file with its findings, still tied to the tree (for the fix engine)."""

    ctx: Optional[FileContext]
    findings: List[Finding]
    diagnostics: List[Diagnostic] = field(default_factory=list)


def summarize_and_prelook(
    text: str, rules: Sequence[Type[Rule]], shared: Optional[Dict[Any, Any]] = None
) -> Tuple[Optional[dict], Optional[List[Type[Rule]]]]:
    """One `ast` parse for both the whole-program summary of `text` and the rules that survive
    the text pre-filter and the pre-look (None: they cannot be decided without LibCST).
    `shared`: see `program.summary.compact`."""
    try:
        tree = parse_quietly(text)
    except AST_ERRORS:
        return None, None  # LibCST decides (and reports the syntax error)
    summary = summarize(text, tree, shared)
    enabled = [r for r in rules if r.can_fire_on(text)]
    if enabled and all(getattr(r, "ast_precondition", None) is not None for r in enabled):
        enabled = _prelook(AstFacts(tree, text), enabled)
    return summary, enabled


def ast_prelook(text: str, rules: Sequence[Type[Rule]]) -> List[Type[Rule]]:
    """The rules whose `ast_precondition` holds on `text` (all of them when `ast` cannot parse it)."""
    return _prelook(AstFacts(None, text), rules)


def _prelook(facts: AstFacts, rules: Sequence[Type[Rule]]) -> List[Type[Rule]]:
    try:  # the text is parsed on first need only: text checks may answer first
        return [r for r in rules if r.ast_precondition(facts)]  # type: ignore[misc]
    except AST_ERRORS:
        return list(rules)  # `ast` cannot parse it: LibCST decides (and reports the error)
    finally:
        facts.release_tree()


def _is_valid_python(facts: AstFacts) -> bool:
    """Whether `ast` parses the text (the pre-look's or the program phase's parse counts; else it
    is parsed here)."""
    if facts.scanned or facts.known_valid:
        return True
    try:
        parse_quietly(facts.text)
    except AST_ERRORS:
        return False
    return True


def _skip_validation(self: cst.CSTNode) -> None:
    return None


def parse_valid_module(text: str) -> cst.Module:
    """`cst.parse_module` for a text known to be valid Python (`ast` parsed it).

    LibCST validates every node it builds (`CSTNode.__post_init__` -> `_validate`): about a
    quarter of the parse time, re-checking what the grammar already guarantees for parsed code.
    Here that check is skipped for the nodes the parser builds, and only for them (it is put
    back before this returns). The tree is the same (`deep_equals`, tested).
    """
    base = cst.CSTNode
    saved = base.__dict__.get("__post_init__")
    if saved is None:  # pragma: no cover - another LibCST: parse as usual
        return cst.parse_module(text)
    base.__post_init__ = _skip_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        base.__post_init__ = saved  # type: ignore[method-assign]


def syntax_error_message(exc: Exception) -> str:
    if isinstance(exc, cst.ParserSyntaxError):
        return f"syntax error at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}"
    return f"cannot parse: {exc}"


def analyze_text(
    text: str,
    path: str,
    rules: Sequence[Type[Rule]],
    settings: Settings,
    profile: Optional[Profile] = None,
    prelook: bool = True,
    seeds: "Optional[FileSeeds]" = None,
    enabled: Optional[Sequence[Type[Rule]]] = None,
    module: Optional[cst.Module] = None,
    valid: bool = False,
) -> Analysis:
    """Lint source text. Never raises for bad input: failures become diagnostics.

    `prelook=False` skips the `ast` pre-look (tests use it to prove the preconditions lose nothing).
    `seeds`: what the whole program says about this file (hot functions and their chains).
    `enabled`: the rules left after the pre-filter and pre-look, when already decided
    (`summarize_and_prelook`, which shares its `ast` parse with the program summary).
    `module`: the text's LibCST tree, when already made: `fix` hands over the tree its round
    rewrote (`text` is that tree's code), which is read again from `text` if it holds a node
    object twice (a fix that put one node in two places).
    `valid`: `ast` is known to parse the text (the program phase summarised it).
    """
    t0 = time.perf_counter()
    decided = enabled is not None
    enabled = list(enabled) if enabled is not None else [r for r in rules if r.can_fire_on(text, seeds)]
    t1 = time.perf_counter()
    if profile is not None:
        profile.add("pre-filter", t1 - t0)
        profile.files += 1
    facts = AstFacts(None, text)
    facts.known_valid = valid
    if seeds is not None:
        facts.seed(seeds)
        if any(seeds.project.get(k) for k in USED_ELSEWHERE):
            prelook = False  # used from elsewhere: the text of this file alone cannot tell
    if decided:
        facts.known_valid = True  # valid Python: `ast` parsed it before
    elif prelook and enabled and all(getattr(r, "ast_precondition", None) is not None for r in enabled):
        enabled = _prelook(facts, enabled)
        t1b = time.perf_counter()
        if profile is not None:
            profile.add("ast pre-look", t1b - t1)
        t1 = t1b
    if not enabled:
        return Analysis(None, [])
    index: Optional[TreeIndex] = None
    if module is not None:
        index = TreeIndex(module)
        if not index.holds_each_node_once():
            module = index = None
    try:
        if module is None:
            module = parse_valid_module(text) if _is_valid_python(facts) else cst.parse_module(text)
    except Exception as exc:  # ParserSyntaxError, and anything LibCST chokes on
        return Analysis(None, [], [Diagnostic(path, syntax_error_message(exc))])
    t2 = time.perf_counter()
    if profile is None:
        ctx = FileContext(path, text, module, settings, seeds)
        ctx.wrapper = _Wrapper(module, unsafe_skip_copy=True)
        visitors: List[cst.BatchableCSTVisitor] = [_Batched(rule(ctx)) for rule in enabled]
    else:
        profile.add("parse", t2 - t1)
        profile.parsed += 1
        ctx = _ProfiledContext(path, text, module, settings, seeds)
        ctx.wrapper = _Wrapper(module, unsafe_skip_copy=True)
        ctx._profile = profile
        visitors = [_Timed(rule(ctx), profile) for rule in enabled]
    try:
        t_index = time.perf_counter()
        with indexed(module, index):  # the tree is read once: every pass of the rules and providers reuses it
            if profile is not None:  # reading the tree is shared metadata: billed to "providers"
                read = time.perf_counter() - t_index
                profile.add("providers", read)
                ctx._provider_time += read  # type: ignore[attr-defined]
            if not fast_visit_batched(module, [v.get_visitors() for v in visitors]):
                cst.visit_batched(module, visitors)
    except RecursionError:
        return Analysis(None, [], [Diagnostic(path, "file too deeply nested to analyse")])
    t3 = time.perf_counter()
    findings: List[Finding] = []
    edit_time = 0.0
    ctx.prefetch_positions([
        node
        for visitor in visitors
        for report in visitor.rule.reports  # type: ignore[attr-defined]
        for node in (report.node, *(old for old, _ in (report.fix.replacements if report.fix is not None else ())))
    ])
    for visitor in visitors:
        rule = visitor.rule  # type: ignore[attr-defined]
        for report in rule.reports:
            finding, spent = _finding(ctx, rule, report, profile is not None)
            findings.append(finding)
            edit_time += spent
    findings.sort(key=Finding.sort_key)
    if profile is not None:
        providers = getattr(ctx, "_provider_time", 0.0)
        profile.add("rules", t3 - t2 - providers)
        profile.add("positions", time.perf_counter() - t3 - edit_time)
        if edit_time:
            profile.add("fixes", edit_time)
    return Analysis(ctx, findings)


#: How each kind of hotness reads in a message.
_HOT_WORDS = {
    "step": "on every training step",
    "sample": "for every sample",
    "eval": "on every evaluation batch",
    "epoch": "once per epoch",
}


def _chain(ctx: FileContext, node: cst.CSTNode, rule: Rule) -> Tuple[str, Tuple[Tuple[str, int, str], ...]]:
    """The message suffix and related locations naming the call chain that makes `node` hot
    through other modules (nothing when it is hot in its own file, or not hot; an epoch chain
    explains only the findings of a rule whose cost is per epoch: `Rule.per_epoch`)."""
    torch = ctx.torch_if_built
    if ctx.seeds is None or torch is None:
        return "", ()
    kind, chain = torch.chain_of(node)
    if not chain or (kind == "epoch" and not rule.per_epoch):
        return "", ()
    here = ctx.position(node).start.line
    hops = " -> ".join(h.text() for h in chain)
    return f" (runs {_HOT_WORDS.get(kind, kind)}: {hops} -> {ctx.path}:{here})", tuple(h.related() for h in chain)


def _finding(ctx: FileContext, rule: Rule, report: Report, timed: bool = False) -> Tuple[Finding, float]:
    if report.at is not None:
        return _config_finding(ctx, rule, report), 0.0
    pos = ctx.position(report.node)
    suffix, related = _chain(ctx, report.node, rule)
    if not suffix and not says_where(report.message) and not says_where(stated_when(report.impact.when)):
        place = place_of(ctx, report.node)  # every message says where its code runs
        suffix = f" (runs {place})" if place else ""
    edits: Tuple[Edit, ...] = ()
    fix = report.fix
    spent = 0.0
    if fix is not None and fix.replacements:
        t = time.perf_counter() if timed else 0.0
        edits = tuple(_edit(ctx, node, new) for node, new in fix.replacements)
        spent = time.perf_counter() - t if timed else 0.0
    return Finding(
        code=rule.code,
        name=rule.name,
        message=report.message + suffix,
        path=ctx.path,
        line=pos.start.line,
        column=pos.start.column + 1,
        end_line=pos.end.line,
        end_column=pos.end.column + 1,
        impact=report.impact,
        fix=fix,
        edits=edits,
        status=rule.status,
        related=related or report.related,
    ), spent


def _config_finding(ctx: FileContext, rule: Rule, report: Report) -> Finding:
    """A finding on the config-file line that holds the value (`Rule.report(..., at=site)`):
    the code that reads it is the first related location, then the hot chain, if any."""
    from speedlint.analyzer.providers.configs import display_path

    site = report.at
    pos = ctx.position(report.node)
    suffix, related = _chain(ctx, report.node, rule)
    code = ctx.module.code_for_node(report.node).strip().splitlines()[0][:60]
    here = (ctx.path, pos.start.line, code)
    edits = tuple(Edit(e.line, e.col, e.line, e.end_col, e.new) for e in report.fix.config_edits) if report.fix is not None else ()
    return Finding(
        code=rule.code,
        name=rule.name,
        message=f"{report.message} (read at {ctx.path}:{pos.start.line}){suffix}",
        path=display_path(site.path),
        line=site.line,
        column=site.col + 1,
        end_line=site.line,
        end_column=site.end_col + 1,
        impact=report.impact,
        fix=report.fix,
        edits=edits,
        status=rule.status,
        related=(here, *related),
    )


def _edit(ctx: FileContext, node: cst.CSTNode, new: Replacement) -> Edit:
    pos = ctx.position(node)
    if isinstance(new, cst.CSTNode):
        content = ctx.module.code_for_node(new)
    elif isinstance(new, cst.FlattenSentinel):
        content = "".join(ctx.module.code_for_node(n) for n in new.nodes)
    else:
        content = ""
    return Edit(pos.start.line, pos.start.column, pos.end.line, pos.end.column, content)


class _ProfiledContext(FileContext):
    """A FileContext that bills the building of each provider to the "providers" phase."""

    _profile: Profile
    _provider_time = 0.0
    _provider_depth = 0

    def _build(self, build: Any) -> Any:
        self._provider_depth += 1
        t = time.perf_counter()
        try:
            return build(self)
        finally:
            self._provider_depth -= 1
            if self._provider_depth == 0:  # nested providers are counted once, by the outermost
                spent = time.perf_counter() - t
                self._provider_time += spent
                self._profile.add("providers", spent)


class _Wrapper(MetadataWrapper):
    """`MetadataWrapper` that computes positions without LibCST's empty traversal.

    LibCST's resolver runs a batched traversal of the whole tree after the non-batchable
    providers even when no batchable provider is asked for (`PositionProvider` is not one): as
    costly as the position codegen itself. Positions are generated directly here (the same
    provider, the same result); anything else goes through LibCST as usual.
    """

    def resolve(self, key: Type[BaseMetadataProvider[_T]]) -> Mapping[cst.CSTNode, _T]:
        if key is PositionProvider and key not in self._metadata:
            self._metadata[key] = PositionProvider()._gen(self)
        return super().resolve(key)


class _Batched(cst.BatchableCSTVisitor):
    """A rule in the batched traversal (its visit methods found by `visitor_methods`)."""

    def __init__(self, rule: Rule) -> None:
        super().__init__()
        self.rule = rule

    def get_visitors(self) -> Mapping[str, Callable[[cst.CSTNode], None]]:
        # (LibCST's type says a visitor method returns None: what one returns is ignored, here as in LibCST)
        return cast("Mapping[str, Callable[[cst.CSTNode], None]]", visitor_methods(self.rule))


class _Timed(cst.BatchableCSTVisitor):
    """Wraps a rule to time its visit methods (only with --profile-rules)."""

    def __init__(self, rule: Rule, profile: Profile) -> None:
        super().__init__()
        self.rule = rule
        self.profile = profile

    def get_visitors(self) -> Mapping[str, Callable[[cst.CSTNode], None]]:
        code = self.rule.code
        rules = self.profile.rules
        ctx = self.rule.ctx

        def timed(fn: Callable[[cst.CSTNode], object]) -> Callable[[cst.CSTNode], object]:
            def run(node: cst.CSTNode) -> object:
                before = getattr(ctx, "_provider_time", 0.0)
                t = time.perf_counter()
                try:
                    return fn(node)
                finally:
                    # the first use of a shared provider is billed to "providers", not the rule
                    spent = time.perf_counter() - t - (getattr(ctx, "_provider_time", 0.0) - before)
                    rules[code] = rules.get(code, 0.0) + spent

            return run

        timed_methods = {name: timed(fn) for name, fn in visitor_methods(self.rule).items()}
        return cast("Mapping[str, Callable[[cst.CSTNode], None]]", timed_methods)  # (as in `_Batched.get_visitors`)


def check_source(
    source: Source,
    path: str,
    rules: Sequence[Type[Rule]],
    settings: Settings,
    profile: Optional[Profile] = None,
    seeds: "Optional[FileSeeds]" = None,
) -> FileResult:
    from speedlint.analyzer.suppress import apply_suppressions

    analysis = analyze_text(source.text, path, rules, settings, profile, seeds=seeds)
    findings = apply_suppressions(analysis.findings, source.text, settings, path)
    return FileResult(path, findings, analysis.diagnostics, source.text, analysis.ctx is not None)
