"""What a value read on the host goes on to do: feed a host-only library, or decide Python control
flow.

A host copy (`.cpu()`, `.numpy()`, `.item()`, `.tolist()`) that only logs a number can stay on
the device and be read every N steps. One whose value a host-only library needs (numpy, scipy,
scikit-learn, pandas, OpenCV ...) or that decides what Python does next (`if`, `while`, `assert`,
`math.isfinite`) cannot: the cure is to batch the copies, move that computation to the device,
or do it every N steps. Rules ask `host_use(ctx, node)` for the expression that reads the value
and word their advice after it; they decide nothing else from it.

The value is followed inside its function: through method calls on it (`.numpy()`, `.squeeze()`),
subscripts, arithmetic, comparisons, containers (`{"y_pred": y_pred}`, `[a, b]`), conversions
(`float(v)`), a name it is assigned to (each later use of that binding), and a list it is
appended to (each use of the list). Not followed: returns, attributes of `self`, other modules.

Not a rule module (no `Rule` subclass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Set

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.flow import flow

LIBRARY = "library"
DECISION = "decision"

#: Top-level packages whose functions take host data only (numpy arrays, Python numbers).
HOST_LIBRARIES = frozenset({
    "numpy", "scipy", "sklearn", "pandas", "cv2", "PIL", "matplotlib", "skimage", "networkx", "lap",
    "lapx", "numba", "pycocotools", "editdistance", "Levenshtein", "jiwer", "nltk", "sacrebleu",
})
#: Python-number checks whose answer steers control flow (`if not math.isfinite(loss_value):`).
_DECIDERS = frozenset({"math.isfinite", "math.isnan", "math.isinf"})
#: Builtins that only convert the value: their result carries it on.
_CONVERSIONS = frozenset({"float", "int", "bool", "list", "tuple", "abs", "round", "sorted", "max", "min", "sum"})
#: Builtins that iterate the value: the loop's targets carry it on.
_ITERATORS = frozenset({"enumerate", "zip", "iter", "reversed"})
_CONTAINERS = (cst.List, cst.Tuple, cst.Set, cst.Dict, cst.Element, cst.BaseDictElement)
_DEPTH = 3


@dataclass(frozen=True)
class HostUse:
    """What a host copy feeds: `kind` LIBRARY (`what`: the function, `scipy.optimize.linear_sum_assignment`)
    or DECISION (`what`: `if`, `while`, `assert`, a conditional expression or `math.isfinite`)."""

    kind: str
    what: str


def host_use(ctx: FileContext, node: cst.CSTNode) -> Optional[HostUse]:
    """What the value `node` reads onto the host is used for (a library first, when it does both);
    None when it only goes elsewhere (logging, accumulation, returned) or cannot be followed."""
    uses = list(_uses(ctx, node, 0, set()))
    return next((u for u in uses if u.kind == LIBRARY), None) or next(iter(uses), None)


def _uses(ctx: FileContext, node: cst.CSTNode, depth: int, seen: Set[int]) -> Iterator[HostUse]:
    if depth > _DEPTH or id(node) in seen:
        return
    seen.add(id(node))
    facts = ctx.torch
    child = node
    for parent in facts.ancestors(node):
        if parent is child:
            continue  # (the method call taken with its attribute)
        if isinstance(parent, cst.Attribute) and parent.value is child:
            call = facts.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:  # `v.numpy()`, `v.squeeze()`
                if parent.attr.value == "append" and isinstance(parent.value, cst.Name):
                    return  # (the list is followed below, from the argument)
                child = call
                continue
            return
        if isinstance(parent, (cst.Subscript, cst.SubscriptElement, cst.Index, cst.Slice)):
            if isinstance(parent, cst.Subscript) and parent.value is not child:
                return  # an index into something else
            child = parent
            continue
        if isinstance(parent, cst.Arg):
            child = parent
            continue
        if isinstance(parent, cst.Call):
            if child is parent.func:
                return
            found = _call_use(ctx, parent)
            if found is not None:
                yield found
                return
            func = parent.func
            if isinstance(func, cst.Name) and func.value in _CONVERSIONS:
                child = parent
                continue
            if isinstance(func, cst.Name) and func.value in _ITERATORS:
                child = parent  # `enumerate(v)`: the loop over it is followed below
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "append" and isinstance(func.value, cst.Name):
                yield from _name_uses(ctx, func.value, depth, seen)  # `preds.append(v)`: what the list feeds
            return
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.ComparisonTarget, cst.FormattedStringExpression)):
            if isinstance(parent, cst.FormattedStringExpression):
                return
            child = parent
            continue
        if isinstance(parent, _CONTAINERS):
            child = parent
            continue
        if isinstance(parent, (cst.For, cst.CompFor)) and child is parent.iter:
            yield from _loop_uses(ctx, parent, depth, seen)  # `for i, c in enumerate(C.split(sizes))`
            return
        if isinstance(parent, (cst.If, cst.While)) and child is parent.test:
            yield HostUse(DECISION, "if" if isinstance(parent, cst.If) else "while")
            return
        if isinstance(parent, cst.IfExp) and child is parent.test:
            yield HostUse(DECISION, "a conditional expression")
            return
        if isinstance(parent, cst.Assert) and child is parent.test:
            yield HostUse(DECISION, "assert")
            return
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and child is parent.value:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            for target in targets:
                if isinstance(target, cst.Name):
                    yield from _name_uses(ctx, target, depth, seen)
            return
        return


def _call_use(ctx: FileContext, call: cst.Call) -> Optional[HostUse]:
    func = call.func
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return None
    q = ctx.qualname(func) or ""
    if q in _DECIDERS:
        return HostUse(DECISION, f"`{q}`")
    if q and q.split(".", 1)[0] in HOST_LIBRARIES:
        return HostUse(LIBRARY, f"`{q}`")
    return None


def _name_uses(ctx: FileContext, target: cst.Name, depth: int, seen: Set[int]) -> Iterator[HostUse]:
    """The uses of the value bound to `target` (the loads of that name, after it, that its binding
    reaches; `target` is the assignment's target, or a use of the name)."""
    facts = ctx.torch
    info = flow(ctx)
    scope = facts.enclosing_function(target)
    root: cst.CSTNode = scope if scope is not None else facts.module
    tree = facts.tree
    start = tree.index(root)
    if start is None:
        return
    bound = [b for b in info.bindings(target) if _binds(b.site, target)]
    if not bound:  # a use (`preds.append(v)`): the binding that reaches it
        reaching = info.binding(target)
        bound = [reaching] if reaching is not None else []
    if not bound:
        return
    loads: List[cst.Name] = []
    for n in tree.nodes[start:tree.ends[start]]:
        if isinstance(n, cst.Name) and n.value == target.value and n is not target and facts.is_before(target, n):
            holder = facts.parent(n)
            if isinstance(holder, cst.Attribute) and holder.attr is n or isinstance(holder, cst.Arg) and holder.keyword is n:
                continue  # `x.name`, `f(name=...)`: not the variable
            loads.append(n)
    for name in loads[:20]:
        b = info.binding(name)
        if b is not None and b in bound:
            yield from _uses(ctx, name, depth + 1, seen)


def _binds(site: cst.CSTNode, target: cst.Name) -> bool:
    if isinstance(site, cst.Assign):
        return any(t.target is target for t in site.targets)
    if isinstance(site, cst.AnnAssign):
        return site.target is target
    return False


def _loop_uses(ctx: FileContext, loop: cst.CSTNode, depth: int, seen: Set[int]) -> Iterator[HostUse]:
    """The uses of a loop's targets (`for`, or a comprehension's `for`) inside the loop: the
    body, or the comprehension's element and conditions."""
    facts = ctx.torch
    targets = {n.value for n in _names(loop.target)}  # type: ignore[attr-defined]
    owner: Optional[cst.CSTNode] = loop if isinstance(loop, cst.For) else next(
        (a for a in facts.ancestors(loop) if isinstance(a, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp))), None
    )
    if owner is None or not targets:
        return
    tree = facts.tree
    start = tree.index(owner)
    if start is None:
        return
    info = flow(ctx)
    count = 0
    for n in tree.nodes[start:tree.ends[start]]:
        if not isinstance(n, cst.Name) or n.value not in targets or count >= 20:
            continue
        holder = facts.parent(n)
        if isinstance(holder, cst.Attribute) and holder.attr is n or isinstance(holder, cst.Arg) and holder.keyword is n:
            continue
        b = info.binding(n)
        if b is not None and b.site is loop and b.value is not n:
            count += 1
            yield from _uses(ctx, n, depth + 1, seen)


def _names(target: cst.CSTNode) -> Iterator[cst.Name]:
    if isinstance(target, cst.Name):
        yield target
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            yield from _names(el.value)
