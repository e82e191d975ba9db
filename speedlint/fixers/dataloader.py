"""The tuned-DataLoader codemod (SPD101, with SPD102/SPD103's keywords).

For every `DataLoader(...)` that SPD101 flags (num_workers missing, 0 or 1; not an in-memory
dataset; not a one-off `next(iter(loader))`), it writes what a careful engineer would:

* `num_workers` from the CPU count, bounded: `min(8, os.cpu_count() or 1)`. When the value comes
  from an argparse option (`default=0`), a config dict entry, a module constant or a function
  default, the value is changed *there*, so the knob keeps working;
* `persistent_workers` only when workers > 0 (torch raises otherwise): `True` when the call gets
  the bounded CPU count itself, else `<workers expr> > 0`;
* `pin_memory=torch.cuda.is_available()` when the script may use CUDA;
* `prefetch_factor` only on request (fix option `prefetch_factor`) and only where the workers are
  known to be > 0: no spelling of it is valid on both torch 1.13 (`2` required with 0 workers) and
  torch 2.x (`None` required with 0 workers), and 2 is already the default;
* an `if __name__ == "__main__":` guard around the top-level statements after the definitions when
  the script trains at import time (worker processes re-import the main module on spawn
  platforms: macOS, Windows). When that cannot be done (definitions after the training code, or a
  dataset reading a global set by the training code), nothing is rewritten and `plan()` says why.

Keywords that may already arrive through `**kwargs` are never added; when the keyword arguments
come from a dict literal of the same file, the entries are added to that dict instead.
Rewriting twice gives the same code as rewriting once: the rewritten `num_workers` no longer
resolves to 0 or 1, so SPD101 no longer flags the loader.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union, cast

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from speedlint.analyzer.add_imports import add_imports
from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.findings import ImportSpec
from speedlint.analyzer.fixes import MAX_LINE, add_keywords, code_of, explode, is_multiline
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.loader_edits import PIN_CODE, dict_site, greater_than_zero, repeatable, splat_dict
from speedlint.analyzer.providers.loaders import LoaderFacts, kwarg, loader_facts, loader_kind, sync_loading
from speedlint.analyzer.providers import walk

WORKERS_CODE = "min(8, os.cpu_count() or 1)"
TopStatement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]  # what a module's body holds


@dataclass
class LoaderPlan:
    call: cst.Call
    site: Optional[cst.CSTNode] = None  # the Call or Dict that receives new keywords
    add: List[Tuple[str, cst.BaseExpression]] = field(default_factory=list)
    replace: Dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    reason: str = ""  # why this loader cannot be rewritten (empty: it can)

    @property
    def ok(self) -> bool:
        return not self.reason


@dataclass
class ModulePlan:
    loaders: List[LoaderPlan] = field(default_factory=list)
    guard_from: Optional[cst.CSTNode] = None  # first top-level statement to put under the guard
    reason: str = ""  # why the module cannot be rewritten (guard needed but impossible)
    needs_torch: bool = False
    columns: Dict[cst.CSTNode, int] = field(default_factory=dict)  # where each edited site starts

    def for_call(self, call: cst.Call) -> Optional[LoaderPlan]:
        return next((p for p in self.loaders if p.call is call), None)

    @property
    def changes(self) -> bool:
        return not self.reason and any(p.ok for p in self.loaders)


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def plan_loader(ctx: FileContext, call: cst.Call) -> Optional[LoaderPlan]:
    """The rewrite of one loader SPD101 flags (None: SPD101 does not flag it)."""
    kw = sync_loading(ctx, call)
    if kw is None:
        return None
    facts = loader_facts(ctx)
    plan = LoaderPlan(call)
    kind = loader_kind(ctx, call)
    if kind is not None and kind.subclass:
        plan.reason = "the loader is a project subclass of DataLoader: set `num_workers` where it is defined"
        return plan
    workers_at_site: Optional[cst.BaseExpression] = None  # how the site spells its workers
    known_positive = False
    if kw.missing:
        if any(a.star for a in call.args):
            plan.site = splat_dict(facts, call)
            if plan.site is None:
                plan.reason = "the keyword arguments come from `**kwargs` built elsewhere"
                return plan
        else:
            plan.site = call
        plan.add.append(("num_workers", _expr(WORKERS_CODE)))
        known_positive = True
    else:
        value = kw.value
        assert value is not None
        origin = value.origin
        if value.kind == "config-python":
            plan.reason = "`num_workers` comes from the project's config defaults in another module: raise it there"
            return plan
        if value.kind == "hparams-config":
            plan.reason = "`num_workers` comes from the config file the class is built from: raise it there"
            return plan
        if len(value.options) != 1 or origin is None or kw.conditional:
            plan.reason = "`num_workers` is chosen by a condition; set it from the CPU count by hand"
            return plan
        if isinstance(origin, cst.Arg) and origin.keyword is not None and origin.keyword.value == "default":
            plan.replace[origin.value] = _expr(WORKERS_CODE)  # argparse default
        elif isinstance(origin, (cst.Integer, cst.Name)):
            plan.replace[origin] = _expr(WORKERS_CODE)
        else:
            plan.reason = "cannot tell where `num_workers` is set"
            return plan
        node = kw.node
        if isinstance(node, cst.Arg) and kw.via is None:
            plan.site = call
            if node.keyword is None:  # positional: name it, so later keywords stay valid
                plan.reason = "`num_workers` is passed positionally"
                return plan
            workers_at_site = node.value
        elif isinstance(node, (cst.DictElement, cst.Arg)):
            plan.site = dict_site(facts, node)
            workers_at_site = node.value
        if plan.site is None:
            plan.reason = "cannot tell where the DataLoader keywords are built"
            return plan
        known_positive = workers_at_site is origin
    # persistent workers: only valid when workers > 0
    if kwarg(ctx, call, "persistent_workers").missing:
        if known_positive:
            plan.add.append(("persistent_workers", cst.Name("True")))
        elif workers_at_site is not None and repeatable(workers_at_site):
            plan.add.append(("persistent_workers", greater_than_zero(workers_at_site)))
    prefetch = ctx.settings.fix_option("prefetch_factor")
    if known_positive and isinstance(prefetch, int) and prefetch >= 1 and kwarg(ctx, call, "prefetch_factor").missing:
        plan.add.append(("prefetch_factor", cst.Integer(str(prefetch))))
    if ctx.may_use_gpu and kwarg(ctx, call, "pin_memory").missing:
        plan.add.append(("pin_memory", _expr(PIN_CODE)))
    return plan


def plan(ctx: FileContext) -> ModulePlan:
    """What the codemod would do to this module (a provider: made once per file)."""
    return ctx.provider(_plan)


def _plan(ctx: FileContext) -> ModulePlan:
    facts = loader_facts(ctx)
    result = ModulePlan()
    for call in facts.calls:
        p = plan_loader(ctx, call)
        if p is not None:
            result.loaders.append(p)
            result.needs_torch = result.needs_torch or any(name == "pin_memory" for name, _ in p.add)
    for p in result.loaders:
        if p.ok and p.site is not None:
            result.columns[p.site] = ctx.position(p.site).start.column
    at_import = {id(p): facts.import_time_triggers(p.call) for p in result.loaders if p.ok}
    triggers = [t for ts in at_import.values() for t in ts]
    if triggers:
        _plan_guard(ctx, facts, result, triggers)
        if result.reason:  # only the loaders that run at import time are blocked
            for p in result.loaders:
                if at_import.get(id(p)):
                    p.reason = result.reason
            result.reason = ""
    return result


def _plan_guard(ctx: FileContext, facts: LoaderFacts, result: ModulePlan, triggers: Sequence[cst.CSTNode]) -> None:
    body: List[cst.CSTNode] = list(ctx.module.body)
    if facts.main_guard() is not None:
        result.reason = (
            "the loader is iterated by top-level code outside the `if __name__ == \"__main__\":` block; "
            "move that code under the guard first (worker processes re-import the script on macOS/Windows)"
        )
        return
    last_def = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            last_def = i
        elif isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            last_def = i
    first = min(body.index(t) for t in triggers)
    if first <= last_def:
        result.reason = (
            "the script trains at import time and defines functions, classes or imports after the training "
            "code; put the training code under `if __name__ == \"__main__\":` by hand (worker processes "
            "re-import the script on macOS/Windows)"
        )
        return
    region = body[last_def + 1 :]
    bound = _names_bound(region)
    used = _names_read_per_sample(ctx)
    shared = sorted(bound & used)
    if shared:
        result.reason = (
            f"the dataset reads `{shared[0]}`, which top-level training code sets; a `__main__` guard would hide "
            "it from worker processes on macOS/Windows, so move it above the guard by hand"
        )
        return
    # keep a leading docstring-free prefix of plain constant assignments that definitions read? no:
    # everything after the last definition runs only as a script.
    result.guard_from = body[last_def + 1]


class _Bound(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        for n in target_names(node.target):
            self.names.add(n)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        for n in target_names(node.target):
            self.names.add(n)


def target_names(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in target_names(el.value)]
    return []


def _names_bound(stmts: Sequence[cst.CSTNode]) -> set:
    v = _Bound()
    for s in stmts:
        walk.visit(s, v)
    return v.names


class _Reads(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names_read_per_sample(ctx: FileContext) -> set:
    v = _Reads()
    for fn in ctx.torch.sample_functions:
        walk.visit(fn.body, v)
    return v.names


# -- applying -----------------------------------------------------------------------------------


class _Apply(cst.CSTTransformer):
    def __init__(self, module_plan: ModulePlan) -> None:
        super().__init__()
        self.replace: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.add: Dict[cst.CSTNode, List[Tuple[str, cst.BaseExpression]]] = {}
        for p in module_plan.loaders:
            if not p.ok:
                continue
            self.replace.update(p.replace)
            if p.site is not None and p.add:
                items = self.add.setdefault(p.site, [])
                for k, v in p.add:
                    if all(k != k2 for k2, _ in items):
                        items.append((k, v))
        self.guard_from = module_plan.guard_from
        self.columns = module_plan.columns

    # (LibCST types `on_leave` as giving back a node of the type it left: a replacement may be of another type)
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[cst.CSTNode]]:
        # (`leave_Module` gives back a module, LibCST's other `leave_*` stubs `updated_node`: a node)
        updated_node = cast(cst.CSTNode, super().on_leave(original_node, updated_node))
        if original_node in self.replace:
            return self.replace[original_node]
        if original_node in self.add:
            updated_node = add_keywords(updated_node, self.add[original_node])
            column = self.columns.get(original_node, 0)
            if column + len(code_of(updated_node)) > MAX_LINE and not is_multiline(updated_node):
                updated_node = explode(updated_node)
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self.guard_from is None:
            return updated_node
        original: List[cst.CSTNode] = list(original_node.body)
        index = original.index(self.guard_from)
        body = list(updated_node.body)
        head, tail = body[:index], body[index:]
        first = tail[0]
        inner = [first.with_changes(leading_lines=[])] + [_unindent_blank_lines(stmt) for stmt in tail[1:]]
        guard = cst.If(
            test=_expr('__name__ == "__main__"'),
            body=cst.IndentedBlock(body=inner),
            leading_lines=first.leading_lines,
        )
        return updated_node.with_changes(body=[*head, guard])


def _unindent_blank_lines(stmt: TopStatement) -> TopStatement:
    """Blank lines above a statement moved into a block must not gain trailing spaces."""
    lines = [l.with_changes(indent=False) if l.comment is None else l for l in stmt.leading_lines]
    return stmt.with_changes(leading_lines=lines)


def _import_root(stmt: cst.CSTNode) -> Optional[str]:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.Import):
        return (dotted(small.names[0].name) or "").split(".")[0]
    if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
        return (dotted(small.module) or "").split(".")[0]
    return None


def place_stdlib_import(module: cst.Module, name: str) -> cst.Module:
    """Move a top-level `import <name>` (a stdlib module) into the stdlib group, sorted, as isort would."""
    body = list(module.body)
    index = next(
        (i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
         and isinstance(s.body[0], cst.Import) and len(s.body[0].names) == 1 and s.body[0].names[0].asname is None
         and dotted(s.body[0].names[0].name) == name),
        None,
    )
    if index is None:
        return module
    stmt = body.pop(index)
    imports = [i for i, s in enumerate(body) if _import_root(s) is not None]
    if not imports:
        return module
    stdlib: FrozenSet[str] = getattr(sys, "stdlib_module_names", frozenset())
    group = [i for i in imports if _import_root(body[i]) in stdlib or _import_root(body[i]) == "__future__"]
    first = imports[0]
    if not group or group[0] != first:  # no stdlib group yet: a group of its own, first
        if _import_root(body[first]) == "__future__":
            return module
        moved = stmt.with_changes(leading_lines=body[first].leading_lines)
        body[first] = body[first].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body.insert(first, moved)
        return module.with_changes(body=body)
    # the contiguous stdlib group that starts the imports
    end = first
    while end + 1 < len(body) and (end + 1) in group:
        end += 1
    pos = next(
        (i for i in range(first, end + 1) if isinstance(cast(cst.SimpleStatementLine, body[i]).body[0], cst.Import)  # (an import line)
         and (_import_root(body[i]) or "") > name and _import_root(body[i]) != "__future__"),
        None,
    )
    if pos is None:
        body.insert(end + 1, stmt.with_changes(leading_lines=[]))
    else:
        moved = stmt.with_changes(leading_lines=body[pos].leading_lines)
        body[pos] = body[pos].with_changes(leading_lines=[])
        body.insert(pos, moved)
    return module.with_changes(body=body)


class TunedDataLoader(CodemodCommand):
    """Rewrite flagged DataLoaders into the tuned form (see the module docstring)."""

    DESCRIPTION = "Load data in worker processes: num_workers from the CPU count, persistent workers, pinned memory."

    def __init__(self, context: CodemodContext, settings: Optional[Settings] = None, seeds: Any = None) -> None:
        super().__init__(context)
        self.settings = settings or Settings()
        #: what the whole program says about the file (`program.FileSeeds`): the loaders SPD101
        #: flags with it (an in-memory dataset defined or built in another module) are the ones tuned
        self.seeds = seeds
        self.reason = ""

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        tuned, imports = _tune(FileContext(self.context.filename or "<codemod>", tree.code, tree, self.settings, self.seeds))
        for spec in imports:
            AddImportsVisitor.add_needed_import(self.context, spec.module, spec.obj)
        return tuned


def _tune(ctx: FileContext) -> Tuple[cst.Module, List[ImportSpec]]:
    """The tuned module of `ctx` and the imports it needs (the module itself, and none, when no
    loader can be tuned)."""
    tree = ctx.module
    module_plan = plan(ctx)
    if not module_plan.changes:
        return tree, []
    imports = [ImportSpec("os")] + ([ImportSpec("torch")] if module_plan.needs_torch else [])
    return tree.visit(_Apply(module_plan)), imports


def tune_module(module: cst.Module, settings: Optional[Settings] = None, seeds: Any = None, ctx: Optional[FileContext] = None) -> cst.Module:
    """The codemod on a parsed module (the fixer of SPD101; `seeds`: the program's facts about
    the file, as the rule saw them; `ctx`: the rule's context, when it is `module`'s: its plan
    is made already). Run here rather than through LibCST's `transform_module`, which
    copies the whole tree first (for metadata the codemod does not use)."""
    if ctx is None:
        ctx = FileContext("<codemod>", module.code, module, settings or Settings(), seeds)
    tuned, imports = _tune(ctx)
    if tuned is module:
        return module
    had_os = any(
        isinstance(s, cst.SimpleStatementLine) and any(isinstance(x, cst.Import) and any(dotted(a.name) == "os" for a in x.names) for x in s.body)
        for s in module.body
    )
    result = add_imports(tuned, imports)
    return result if had_os else place_stdlib_import(result, "os")


def tune_source(source: str, settings: Optional[Settings] = None) -> str:
    return tune_module(cst.parse_module(source), settings).code
