"""Shared pieces of the training-loop codemods (AMP, gradient accumulation).

* `Edits`: statement-level edits keyed on ORIGINAL nodes (replace, insert before/after, wrap a
  run of statements in a `with`), applied in one transformer pass.
* `context_for(module)`: the analysis facts (imports, training structure, value tracing) of a module.
* Training-step helpers: the backward calls of a step loop, the statement holding a call, the
  optimizer steps, gradient clipping.
* Device inference: the device expression a script uses, as a static device type or run-time code.
* Autocast coverage: is a step's forward already under `autocast` (any spelling)?
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.add_imports import add_imports
from speedlint.analyzer.config import Settings
from speedlint.analyzer.findings import ImportSpec
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.branches import never_runs, off_gpu_path
from speedlint.analyzer.providers.loaders import one_site
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.inference import iter_nodes
from speedlint.analyzer.textscan import says_autocast
from speedlint.analyzer.providers import walk

Loop = Union[cst.For, cst.While]
Block = Union[cst.IndentedBlock, cst.Module]
#: What a `cst.BaseStatement` always is (LibCST's `BaseStatement` itself does not declare `leading_lines`)
Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]

AUTOCAST_NAMES = ("torch.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast")
SCALER_NAMES = ("torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.amp.grad_scaler.GradScaler", "torch.cpu.amp.GradScaler")
CLIP_NAMES = ("torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad_norm", "torch.nn.utils.clip_grad.clip_grad_norm_")


def context_for(module: cst.Module, settings: Optional[Settings] = None) -> FileContext:
    return FileContext("<fixer>", module.code, module, settings or Settings())


def parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def parse_stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


# -- edits -----------------------------------------------------------------------------------------
WrapFactory = Callable[[List[cst.BaseStatement]], cst.BaseStatement]


class Edits:
    """Edits keyed on original nodes; `apply` runs them in one pass."""

    def __init__(self) -> None:
        self.replace: Dict[cst.CSTNode, Union[cst.CSTNode, Callable[[cst.CSTNode], cst.CSTNode]]] = {}
        self.before: Dict[cst.CSTNode, List[cst.BaseStatement]] = defaultdict(list)
        self.after: Dict[cst.CSTNode, List[cst.BaseStatement]] = defaultdict(list)
        self.wraps: Dict[cst.CSTNode, List[Tuple[cst.CSTNode, cst.CSTNode, WrapFactory]]] = defaultdict(list)
        self.imports: List[Tuple[str, Optional[str]]] = []

    def wrap(self, block: cst.CSTNode, first: cst.CSTNode, last: cst.CSTNode, factory: WrapFactory) -> None:
        self.wraps[block].append((first, last, factory))

    def __bool__(self) -> bool:
        return bool(self.replace or self.before or self.after or self.wraps)

    def apply(self, module: cst.Module) -> cst.Module:
        return add_imports(module.visit(_Apply(self)), [ImportSpec(mod, obj) for mod, obj in self.imports])


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: Edits) -> None:
        super().__init__()
        self.e = edits

    # (LibCST types `on_leave` as giving back a node of the type it left: a replacement may be of another type)
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[cst.CSTNode]]:
        # (this class defines no `leave_*` method: LibCST's stubs give back `updated_node`, a node)
        updated = cast(cst.CSTNode, super().on_leave(original_node, updated_node))
        r = self.e.replace.get(original_node)
        if r is not None:
            updated = r(updated) if callable(r) else r
        if isinstance(original_node, (cst.IndentedBlock, cst.Module)) and type(updated) is type(original_node):
            updated = self._rebuild(original_node, cast(Block, updated))  # (of the same type as `original_node`)
        return updated

    def _rebuild(self, orig: Block, updated: Block) -> Block:
        if len(orig.body) != len(updated.body):
            return updated
        groups: List[Tuple[Optional[cst.CSTNode], List[cst.BaseStatement]]] = []
        touched = False
        for o, u in zip(orig.body, updated.body):
            before, after = self.e.before.get(o, []), self.e.after.get(o, [])
            if before:
                touched = True
                # comments and blank lines above the statement move above the inserted code
                head = before[0].with_changes(leading_lines=cast(Statement, u).leading_lines)
                before = [head, *before[1:]]
                u = u.with_changes(leading_lines=())
            if after:
                touched = True
            groups.append((o, [*before, u, *after]))
        for first, last, factory in self.e.wraps.get(orig, []):
            idx = [g[0] for g in groups]
            if first not in idx or last not in idx:
                continue
            i, j = idx.index(first), idx.index(last)
            body = [s for g in groups[i : j + 1] for s in g[1]]
            lead = cast(Statement, body[0]).leading_lines
            body[0] = body[0].with_changes(leading_lines=())
            wrapped = factory(body).with_changes(leading_lines=lead)
            groups[i : j + 1] = [(None, [wrapped])]
            touched = True
        if not touched:
            return updated
        return updated.with_changes(body=[s for g in groups for s in g[1]])


def with_block(items: Sequence[cst.WithItem], body: List[cst.BaseStatement]) -> cst.With:
    return cst.With(items=list(items), body=cst.IndentedBlock(body=body))


# -- statements ------------------------------------------------------------------------------------
def statement_line(ctx: FileContext, node: cst.CSTNode) -> Optional[cst.BaseStatement]:
    """The statement (simple line or compound statement) directly holding `node`."""
    for a in [node, *ctx.torch.ancestors(node)]:
        if isinstance(a, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return a
    return None


def expr_statement(ctx: FileContext, call: cst.Call) -> Optional[cst.SimpleStatementLine]:
    """The line when `call` is a whole statement on its own line (`loss.backward()`)."""
    line = ctx.torch.parent(call)
    if not isinstance(line, cst.Expr) or line.value is not call:
        return None
    stmt = ctx.torch.parent(line)
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        return stmt
    return None


def block_of(ctx: FileContext, stmt: cst.CSTNode) -> Optional[Block]:
    parent = ctx.torch.parent(stmt)
    return parent if isinstance(parent, (cst.IndentedBlock, cst.Module)) else None


def contains(ctx: FileContext, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
    return ctx.torch.contains(outer, node)


def calls_in(ctx: FileContext, node: cst.CSTNode) -> List[cst.Call]:
    return ctx.torch.calls_inside(node)


def step_calls(ctx: FileContext, loop: Loop, pred: Callable[[cst.Call], bool]) -> List[cst.Call]:
    """Calls satisfying `pred` run by one iteration of step loop `loop` (its body and step functions)."""
    facts = ctx.torch
    funcs = facts.callees_closure([loop])
    out = []
    for c in facts.calls:
        if not pred(c):
            continue
        if facts.grad_disabled_at(c) is not None:
            continue
        unit = facts.step_of(c)
        if unit is loop or (unit in funcs) or (isinstance(unit, (cst.For, cst.While)) and contains(ctx, loop.body, unit)):
            out.append(c)
    return sorted(out, key=lambda c: facts.order.get(c, 0))


def receiver(call: cst.Call) -> Optional[str]:
    func = call.func
    return dotted(func.value) if isinstance(func, cst.Attribute) else None


def is_zero_grad(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "zero_grad"


def is_clip(ctx: FileContext, call: cst.Call) -> bool:
    if ctx.matches(call.func, *CLIP_NAMES):
        return True
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in ("clip_grad_norm_", "clip_grad_value_") and ctx.matches(call.func.value, "torch.nn.utils")


def scaler_of_backward(call: cst.Call) -> Optional[Tuple[str, cst.Call]]:
    """`scaler.scale(loss).backward()` -> ("scaler", the scale call)."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        inner = func.value
        if isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "scale":
            name = dotted(inner.func.value)
            if name:
                return name, inner
    return None


def fresh_name(ctx: FileContext, base: str, scope: Optional[cst.CSTNode] = None) -> str:
    """`base`, or `base2`... when taken: in `scope` (a function) plus module-level names, or anywhere."""
    used = _names(ctx) if scope is None else names_in(ctx, scope) | _module_names(ctx)
    if base not in used:
        return base
    i = 2
    while f"{base}{i}" in used:
        i += 1
    return f"{base}{i}"


def names_in(ctx: FileContext, node: cst.CSTNode) -> Set[str]:
    """Every name used in `node` (memoised per node: planning asks again and again)."""
    memo = ctx.provider(_names_memo)
    found = memo.get(id(node))
    if found is None or found[0] is not node:
        found = memo[id(node)] = (node, {n.value for n in iter_nodes(node, skip_defs=False) if n.__class__ is cst.Name})
    return found[1]


def _names_memo(ctx: FileContext) -> Dict[int, Tuple[cst.CSTNode, Set[str]]]:
    return {}


def _module_names(ctx: FileContext) -> Set[str]:
    return ctx.provider(_names_at_top)


def _names_at_top(ctx: FileContext) -> Set[str]:
    """The names the module's top level defines or uses."""
    names: Set[str] = set()
    for stmt in ctx.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            names.add(stmt.name.value)
        else:
            names |= names_in(ctx, stmt)
    return names


def _names(ctx: FileContext) -> Set[str]:
    return names_in(ctx, ctx.module)


# -- devices ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceType:
    """Where autocast runs: a static "cuda"/"cpu", or `expr` (code of a run-time device-type string)."""

    static: Optional[str] = None
    expr: Optional[str] = None

    @property
    def code(self) -> str:
        return f'"{self.static}"' if self.static else str(self.expr)

    @property
    def cuda_test(self) -> str:
        return f'{self.expr} == "cuda"'


def _is_dtype(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    q = ctx.qualname(expr) or ""
    return q.startswith("torch.") and any(q.endswith(t) for t in ("float16", "bfloat16", "float32", "float", "half", "double", "float64", "int64", "long", "int32", "bool", "uint8"))


def device_candidates(ctx: FileContext, scope: Optional[cst.CSTNode]) -> List[cst.BaseExpression]:
    """Device expressions used in `scope` (`.to(X)`, `device=X`, `.cuda()`), in source order."""
    out: List[cst.BaseExpression] = []
    for c in ctx.torch.calls:
        if scope is not None and not contains(ctx, scope, c):
            continue
        func = c.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and not c.args:
            out.append(cst.SimpleString('"cuda"'))
            continue
        if isinstance(func, cst.Attribute) and func.attr.value == "to":
            for arg in c.args:
                if arg.keyword is not None and arg.keyword.value == "device":
                    out.append(arg.value)
                    break
            else:
                if c.args and c.args[0].keyword is None and not c.args[0].star and not _is_dtype(ctx, c.args[0].value):
                    out.append(c.args[0].value)
            continue
        for arg in c.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                out.append(arg.value)
    return [e for e in out if isinstance(e, (cst.Name, cst.Attribute, cst.SimpleString))]


def device_type(ctx: FileContext, expr: cst.BaseExpression) -> Optional[DeviceType]:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        if not isinstance(value, str):
            return None
        kind = value.split(":")[0]
        return DeviceType(static=kind) if kind in ("cuda", "cpu") else None
    code = ctx.code(expr)
    traced = ctx.values.resolve(expr)
    if traced is not None and traced.certain and traced.all(lambda v: isinstance(v, str)):
        kinds = {str(v).split(":")[0] for v in traced.options}
        if len(kinds) == 1 and kinds <= {"cuda", "cpu"}:
            return DeviceType(static=kinds.pop())
    if _bound_to_device(ctx, expr):
        return DeviceType(expr=f"{code}.type")
    return DeviceType(expr=f"torch.device({code}).type")


def _bound_to_device(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """Is `expr` assigned a `torch.device(...)` somewhere (so `.type` is valid)?"""
    target = dotted(expr)
    if target is None:
        return False
    found = False
    for c in ctx.torch.calls:
        if not ctx.matches(c.func, "torch.device"):
            continue
        parent = ctx.torch.parent(c)
        if isinstance(parent, cst.Assign) and any(dotted(t.target) == target for t in parent.targets):
            found = True
    return found


def name_available(ctx: FileContext, expr: cst.BaseExpression, scope_fn: Optional[cst.FunctionDef], at: cst.CSTNode) -> bool:
    """Whether the head name of `expr` is bound at `at` in `scope_fn` (param, earlier local, or global)."""
    head = (dotted(expr) or "").split(".")[0]
    if not head:
        return isinstance(expr, cst.SimpleString)
    if head == "self":
        return scope_fn is not None
    if scope_fn is not None:
        params = [p.name.value for p in (*scope_fn.params.posonly_params, *scope_fn.params.params, *scope_fn.params.kwonly_params)]
        if head in params:
            return True
    binds = _assign_targets(ctx)
    for fn, stmt in binds.get(head, []):
        if fn is scope_fn and ctx.torch.is_before(stmt, at):
            return True
        if fn is None and scope_fn is not None:
            return True  # a module global read from a function
    return head in ctx.imports.aliases


def _assign_targets(ctx: FileContext) -> Dict[str, List[Tuple[Optional[cst.FunctionDef], cst.CSTNode]]]:
    return ctx.provider(_binds)


def _binds(ctx: FileContext) -> Dict[str, List[Tuple[Optional[cst.FunctionDef], cst.CSTNode]]]:
    """Per name, the assignments to it (and the function each is in), anywhere in the file."""
    binds: Dict[str, List[Tuple[Optional[cst.FunctionDef], cst.CSTNode]]] = defaultdict(list)
    facts = ctx.torch
    for node in iter_nodes(ctx.module, skip_defs=False):  # the fast read-only walk
        kind = node.__class__  # (LibCST's node classes have no subclasses)
        if kind is cst.Assign:
            for t in cast(cst.Assign, node).targets:
                for name in target_names(t.target):
                    binds[name].append((facts.enclosing_function(node), node))
        elif kind is cst.AnnAssign and cast(cst.AnnAssign, node).value is not None:
            for name in target_names(cast(cst.AnnAssign, node).target):
                binds[name].append((facts.enclosing_function(node), node))
    return binds


def target_names(t: cst.BaseExpression) -> Iterable[str]:
    if isinstance(t, cst.Name):
        yield t.value
    elif isinstance(t, (cst.Tuple, cst.List)):
        for el in t.elements:
            yield from target_names(el.value)


def bindings(ctx: FileContext, name: str) -> List[Tuple[Optional[cst.FunctionDef], cst.CSTNode]]:
    return list(_assign_targets(ctx).get(name, []))


def self_bindings(ctx: FileContext, cls: Optional[cst.ClassDef], attr: str) -> List[cst.Assign]:
    out = []
    for c in [cls] if cls is not None else []:

        class V(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for t in node.targets:
                    if dotted(t.target) == f"self.{attr}":
                        out.append(node)

        walk.visit(c, V())
    return out


# -- autocast coverage -----------------------------------------------------------------------------
def autocast_call(ctx: FileContext, expr: cst.BaseExpression) -> Optional[cst.Call]:
    """`expr` when it is a call of `torch.autocast` (any spelling, aliased) or of a helper named
    after it (`smart_amp_autocast(amp)`, `accelerator.autocast()`, `self.autocast_ctx()`): a
    project or library wrapper whose body speedlint cannot see, taken as an autocast."""
    if not isinstance(expr, cst.Call):
        return None
    if ctx.matches(expr.func, *AUTOCAST_NAMES):
        return expr
    name = ctx.qualname(expr.func) or dotted(expr.func)
    return expr if name is not None and says_autocast(name.rsplit(".", 1)[-1]) else None


def _off_by_default(ctx: FileContext, node: cst.CSTNode, call: cst.Call) -> Optional[Tuple[str, Any]]:
    """The command-line option (or config field) that switches this autocast on, when it is off
    by default: `if args.use_amp: with autocast():`, `autocast(enabled=args.amp)`; with its
    traced value (where its default is written)."""
    tests: List[cst.BaseExpression] = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "enabled"]
    child = node
    for a in ctx.torch.ancestors(node):
        if isinstance(a, cst.FunctionDef):
            break
        if isinstance(a, cst.If) and child is a.body:
            tests.append(a.test)
        child = a
    for test in tests:
        if isinstance(test, (cst.Name, cst.Attribute)):
            value = ctx.values.resolve(test)
            if value is not None and value.kind in ("argparse", "config-default") and value.options and not value.any(bool):
                return ctx.code(test), value
    return None


def config_switch_off(ctx: FileContext, call: cst.Call) -> Any:
    """The config-file place (`providers.configs.ConfigSite`) of an `enabled=` that the config file
    the code reads sets false (`amp: false`), else None."""
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "enabled"), None)
    if arg is None:
        return None
    value = ctx.config_values.resolve(arg.value)
    if value is None or value.kind != "config" or not value.config or value.any(bool):
        return None
    return one_site(value.config, value.options)  # (one per file for a required config option's candidates)


def autocast_enabled(ctx: FileContext, call: cst.Call) -> bool:
    """False only when `enabled=` is a value that never becomes true (constant, not a CLI flag)."""
    arg = None
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "enabled":
            arg = a
    q = ctx.qualname(call.func)
    if arg is None and q == "torch.cuda.amp.autocast":
        positional = [a for a in call.args if a.keyword is None and not a.star]
        arg = positional[0] if positional else None
    if arg is None:
        return True
    if _never_true(ctx, arg.value):
        return False
    value = ctx.values.resolve(arg.value)
    if value is None or not value.certain or value.kind in ("argparse", "config-default", "dict", "attribute"):
        return True
    return value.any(bool)


def _never_true(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """`self._use_amp` that nothing in the file ever sets (to anything but a false constant),
    `self.cfg["mixed_precision"]` of a literal dict that hard-codes False and is not changed."""
    if isinstance(expr, cst.Attribute) and dotted(expr.value) == "self":
        name = expr.attr.value
        writes = []
        for node in iter_nodes(ctx.module, skip_defs=False):
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                if any(isinstance(t, cst.Attribute) and t.attr.value == name for t in targets):
                    writes.append(node.value)
                elif any(isinstance(t, cst.Name) and t.value == name for t in targets) and ctx.torch.enclosing_function(node) is None:
                    return False  # a module global of that name: not this attribute, but unclear
            elif isinstance(node, cst.Call) and dotted(node.func) == "setattr":
                return False  # set by name somewhere: cannot tell
            elif isinstance(node, cst.FunctionDef) and node.name.value == name:
                return False  # a property or method
        return all(isinstance(w, cst.Name) and w.value in ("False", "None") for w in writes if w is not None)
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = expr.slice[0].slice.value
        base = expr.value
        if not (isinstance(key, cst.SimpleString) and isinstance(base, cst.Attribute) and dotted(base.value) == "self"):
            return False
        cls = ctx.torch.enclosing_class(expr)
        assigned = ctx.values.index.self_attrs.get((cls, base.attr.value), [])
        if len(assigned) != 1 or not isinstance(assigned[0], cst.Dict):
            return False
        for node in iter_nodes(ctx.module, skip_defs=False):  # changed anywhere? then it may be true
            if isinstance(node, cst.Subscript) and ctx.code(node.value) == ctx.code(base) and _is_store(ctx, node):
                return False
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in ("update", "setdefault") and ctx.code(node.func.value) == ctx.code(base):
                return False
        for el in assigned[0].elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == key.evaluated_value:
                return isinstance(el.value, cst.Name) and el.value.value in ("False", "None")
    return False


def _is_store(ctx: FileContext, node: cst.CSTNode) -> bool:
    parent = ctx.torch.parent(node)
    return isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and getattr(parent, "target", None) is node


def autocasts(ctx: FileContext) -> List[Tuple[cst.CSTNode, cst.Call]]:
    """(`with` statement or decorated function, autocast call) everywhere in the file (a
    provider: found once per file)."""
    return ctx.provider(_autocasts)


def _autocasts(ctx: FileContext) -> List[Tuple[cst.CSTNode, cst.Call]]:
    out: List[Tuple[cst.CSTNode, cst.Call]] = []
    bound: Dict[str, cst.Call] = {}  # `ctx = nullcontext() if cpu else torch.autocast(...)`
    facts = ctx.torch
    for c in facts.calls:
        ac = autocast_call(ctx, c)
        if ac is None and dotted(c.func) in ("partial", "functools.partial") and c.args and ctx.matches(c.args[0].value, *AUTOCAST_NAMES):
            ac = c  # `partial(torch.amp.autocast, device_type=...)`, entered as `with ctx():`
        if ac is None:
            continue
        parent = facts.parent(c)
        if isinstance(parent, cst.WithItem):
            out.append((cast(cst.With, facts.parent(parent)), c))  # (a `with` item always sits in its `with`)
        elif isinstance(parent, cst.Decorator):
            out.append((cast(cst.CSTNode, facts.parent(parent)), c))  # (its function or class)
        else:
            node: cst.CSTNode = c
            while isinstance(parent, (cst.IfExp, cst.BooleanOperation)):
                node, parent = parent, facts.parent(parent)
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target] if isinstance(parent, cst.AnnAssign) else []
            for t in targets:
                name = dotted(t)
                if name:
                    bound[name] = c
    if bound:  # `with ctx:` / `with ctx():` / `with self.autocast_ctx():`
        for node in facts.tree.nodes:
            if isinstance(node, cst.With):
                for item in node.items:
                    target = item.item.func if isinstance(item.item, cst.Call) else item.item
                    name = dotted(target)
                    if name in bound:
                        out.append((node, bound[name]))
    return out


def _covering(ctx: FileContext, node: cst.CSTNode, autocast_nodes: Dict[cst.CSTNode, cst.Call], seen: Set[cst.CSTNode]) -> Optional[cst.Call]:
    """The autocast around `node`: lexically, or around every same-file call of its function."""
    for a in ctx.torch.ancestors(node):
        if a in autocast_nodes:
            return autocast_nodes[a]
    fn = ctx.torch.enclosing_function(node)
    if fn is None or fn in seen:
        return None
    seen.add(fn)
    callers = [c for c in ctx.torch.calls if fn in ctx.torch.resolve_call(c)]
    if not callers:
        return None
    found = [_covering(ctx, c, autocast_nodes, seen) for c in callers]
    return found[0] if all(f is not None for f in found) else None


@dataclass
class Coverage:
    covered: bool
    disabled: Optional[cst.Call] = None  # an autocast that is there but never enabled
    opt_in: Optional[str] = None  # the option that turns autocast on, off by default (`self.args.use_amp`)
    config_site: Any = None  # the config-file value that switches the disabled autocast off (`amp: false`)
    opt_in_value: Any = None  # `opt_in`'s traced value (`providers.values.Value`: where its default is)


def step_coverage(ctx: FileContext, loop: Loop, backwards: Sequence[cst.Call]) -> Coverage:
    """Whether the forward of step loop `loop` runs under an enabled autocast."""
    found = autocasts(ctx)
    if not found:
        return Coverage(False)
    nodes = {n: c for n, c in found}
    facts = ctx.torch
    disabled: Optional[cst.Call] = None
    # autocast inside the step (its body or a step function) or around it (loop, caller)
    units: List[cst.CSTNode] = [loop, *facts.callees_closure([loop])]
    opt_in: Optional[str] = None
    opt_in_value: Any = None
    for node, call in found:
        inside = any(contains(ctx, u, node) for u in units) or node in units
        around = _covering(ctx, loop, nodes, set()) is call
        if inside or around:
            if never_runs(ctx, node):  # `if hasattr(self, "scaler") and ...`, the attribute never set
                disabled = disabled or call
                continue
            if off_gpu_path(ctx, node):  # an autocast for the CPU / MPS branch: not the CUDA step's
                continue
            flag = _off_by_default(ctx, node, call)
            if flag is not None:
                opt_in, opt_in_value = (opt_in, opt_in_value) if opt_in is not None else flag
            elif autocast_enabled(ctx, call):
                site = config_switch_off(ctx, call)
                if site is None:
                    return Coverage(True)
                return Coverage(False, call, None, site)
            else:
                disabled = disabled or call
    if opt_in is not None:
        return Coverage(False, disabled, opt_in, opt_in_value=opt_in_value)
    # autocast in a model's forward (the model runs in mixed precision whatever the step does)
    for fn in facts.forward_functions:
        for node, call in found:
            if contains(ctx, fn, node) and autocast_enabled(ctx, call):
                return Coverage(True)
    return Coverage(False, disabled)
