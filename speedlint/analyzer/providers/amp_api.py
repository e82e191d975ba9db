"""Deprecated `torch.cuda.amp` spellings and their `torch.amp` replacements: the sites SPD302
reports (with their fixes) and the AMP codemod rewrites along with its own edits.

* `torch.cuda.amp.autocast(args)` -> `torch.amp.autocast("cuda", args)`; its old positional
  arguments (`enabled`, `dtype`, `cache_enabled`) become keywords, since the new signature starts
  with `device_type`.
* `torch.cuda.amp.GradScaler(args)` -> `torch.amp.GradScaler("cuda", args)` (same order after
  the device).
* `from torch.cuda.amp import autocast, GradScaler` -> `from torch.amp import autocast, GradScaler`,
  together with every call of those names (one fix: the import and its calls change together).

Uses only as a type annotation are not runtime calls and are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, cast

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers import walk

OLD = {"torch.cuda.amp.autocast": "autocast", "torch.cuda.amp.GradScaler": "GradScaler"}
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


@dataclass
class Site:
    node: cst.CSTNode  # where the finding is reported
    old: str  # the deprecated qualified name (or module for imports)
    pairs: Optional[List[Tuple[cst.CSTNode, cst.CSTNode]]]  # None: not fixable
    imports: List[Tuple[str, Optional[str]]] = field(default_factory=list)
    kind: str = "call"


def _torch_name(ctx: FileContext) -> Tuple[str, bool]:
    """The local name of `torch`, and whether `import torch` must be added."""
    names = [n for n, q in ctx.imports.aliases.items() if q == "torch"]
    if "torch" in names:
        return "torch", False
    if names:
        return names[0], False
    return "torch", True


def _new_call(ctx: FileContext, call: cst.Call, func: cst.BaseExpression, kind: str) -> Optional[cst.Call]:
    if any(a.star for a in call.args):
        return None
    args = list(call.args)
    cuda = cst.Arg(cst.SimpleString('"cuda"'))
    if kind == "autocast":
        new_args = []
        for i, a in enumerate(args):
            if a.keyword is None:
                if i >= len(AUTOCAST_POSITIONAL):
                    return None
                a = a.with_changes(
                    keyword=cst.Name(AUTOCAST_POSITIONAL[i]),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
                )
            new_args.append(a)
        args = new_args
    if args:
        cuda = cuda.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(func=func, args=[cuda, *args])


def deprecated_sites(ctx: FileContext) -> List[Site]:
    """The file's uses of the deprecated API, each with its replacement (`pairs`; None: advice
    only), built once per file (a provider: SPD302 and the AMP codemod share it)."""
    return ctx.provider(_deprecated_sites)


def _deprecated_sites(ctx: FileContext) -> List[Site]:
    sites: List[Site] = []
    by_local: Dict[str, List[cst.Call]] = {}
    torch_name, need_import = _torch_name(ctx)
    for call in ctx.torch.calls:
        q = ctx.qualname(call.func)
        if q not in OLD or _fallback(ctx, call):
            continue
        kind = OLD[q]
        if isinstance(call.func, cst.Name):
            by_local.setdefault(call.func.value, []).append(call)
            continue
        func = cst.parse_expression(f"{torch_name}.amp.{kind}")
        new = _new_call(ctx, call, func, kind)
        imports: List[Tuple[str, Optional[str]]] = [("torch", None)] if need_import else []
        sites.append(Site(call, q, [(call, new)] if new is not None else None, imports))
    # `autocast = torch.cuda.amp.autocast if fp16 else nullcontext`: the deprecated API bound to
    # a name (or passed on) and called through it later; advice only (the call site decides
    # which arguments the new API needs)
    if "cuda.amp." in ctx.source:
        funcs = {id(c.func) for c in ctx.torch.calls}
        for node in walk.preorder(ctx.module):
            if type(node) is cst.Attribute and id(node) not in funcs and ctx.qualname(node) in OLD and not _in_import(ctx, node):
                sites.append(Site(node, ctx.qualname(node) or "", None))
    # `from torch.cuda.amp import autocast, GradScaler`: the import and the calls of its names
    for stmt in _amp_imports(ctx):
        if _fallback(ctx, stmt):
            continue
        local_names = {}
        ok = True
        for alias in stmt.names:  # type: ignore[union-attr]
            name = dotted(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            if name not in ("autocast", "GradScaler"):
                ok = False
            local_names[local] = name
        calls = [c for local in local_names for c in by_local.get(local, [])]
        if not calls:
            continue  # imported for annotations only: no runtime use of the deprecated API
        pairs: Optional[List[Tuple[cst.CSTNode, cst.CSTNode]]] = []
        if ok:
            pairs.append((stmt.module, cst.parse_expression("torch.amp")))  # type: ignore[union-attr,arg-type]
            for c in calls:  # (`by_local`: calls of a name)
                new = _new_call(ctx, c, c.func, local_names[cast(cst.Name, c.func).value])
                if new is None:
                    pairs = None
                    break
                cast(List[Tuple[cst.CSTNode, cst.CSTNode]], pairs).append((c, new))  # (None only on the way out)
        else:
            pairs = None
        sites.append(Site(stmt, "torch.cuda.amp", pairs, kind="import"))
        for c in calls:
            sites.append(Site(c, f"torch.cuda.amp.{local_names[cast(cst.Name, c.func).value]}", pairs))
    # `from torch.cuda import amp`: the deprecated module under a short name (its calls are
    # sites above, through the import map); the import itself says "deprecated" too
    for stmt in _cuda_amp_module_imports(ctx):
        if not _fallback(ctx, stmt):
            sites.append(Site(stmt, "torch.cuda.amp", None, kind="import"))
    return sites


def _in_import(ctx: FileContext, node: cst.CSTNode) -> bool:
    """In an import, or in a type annotation (not a runtime use)."""
    return any(isinstance(a, (cst.Import, cst.ImportFrom, cst.Annotation)) for a in ctx.torch.ancestors(node))


def _fallback(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`node` is in an `except` handler of a `try` that uses `torch.amp` / `torch.autocast`
    first: the old spelling is the fallback for an older torch, the rewrite would break it."""
    facts = ctx.torch
    for handler in facts.ancestors(node):
        if not isinstance(handler, cst.ExceptHandler):
            continue
        attempt = facts.parent(handler)
        if isinstance(attempt, cst.Try) and any(_new_api(ctx, n) for n in walk.preorder(attempt.body)):
            return True
    return False


def _new_api(ctx: FileContext, node: cst.CSTNode) -> bool:
    """A use of `torch.amp` / `torch.autocast`, or an import from `torch.amp`."""
    if isinstance(node, cst.ImportFrom):
        return node.module is not None and not node.relative and (dotted(node.module) or "").startswith("torch.amp")
    return isinstance(node, (cst.Name, cst.Attribute)) and (ctx.qualname(node) or "").startswith(("torch.amp", "torch.autocast"))


def _cuda_amp_module_imports(ctx: FileContext) -> List[cst.ImportFrom]:
    found: List[cst.ImportFrom] = []

    class V(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if node.module is None or node.relative or dotted(node.module) != "torch.cuda" or isinstance(node.names, cst.ImportStar):
                return
            if any(dotted(alias.name) == "amp" for alias in node.names):
                found.append(node)

    walk.visit(ctx.module, V())
    return found


def _amp_imports(ctx: FileContext) -> List[cst.ImportFrom]:
    found: List[cst.ImportFrom] = []

    class V(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if node.module is not None and not node.relative and dotted(node.module) == "torch.cuda.amp" and not isinstance(node.names, cst.ImportStar):
                found.append(node)

    walk.visit(ctx.module, V())
    return found
