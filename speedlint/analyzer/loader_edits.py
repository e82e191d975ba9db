"""Where and how a DataLoader's keywords are edited: facts the loader rules (SPD102's
`pin_memory`, SPD103's `persistent_workers`) share with the DataLoader codemod
(`speedlint.fixers.dataloader`, SPD101).

* `keyword_site`: where a missing keyword can be added without a `got multiple values` error (the
  call, or the dict literal its single `**kwargs` comes from);
* `dict_site`: the dict literal or call that holds a keyword already passed;
* `repeatable` and `greater_than_zero`: `persistent_workers=<workers> > 0`, written only when the
  worker count is a name or attribute chain (cheap and safe to evaluate twice);
* `PIN_CODE`: the value `pin_memory` is set to.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.loaders import LoaderFacts, loader_facts, loader_kind

#: `pin_memory`'s value in a fix: pinned only where there is a GPU to copy to.
PIN_CODE = "torch.cuda.is_available()"


def repeatable(expr: cst.BaseExpression) -> bool:
    """A name, attribute or subscript chain: cheap and safe to repeat in `expr > 0`."""
    node: cst.CSTNode = expr
    while True:
        if isinstance(node, cst.Name):
            return True
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            if not isinstance(node.slice[0].slice.value, (cst.SimpleString, cst.Integer, cst.Name)):
                return False
            node = node.value
        else:
            return False


def greater_than_zero(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`<expr> > 0` (a copy of `expr`: the original stays where it is)."""
    return cst.Comparison(
        left=expr.deep_clone(),
        comparisons=[cst.ComparisonTarget(operator=cst.GreaterThan(), comparator=cst.Integer("0"))],
    )


def dict_site(facts: LoaderFacts, element: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The dict literal or call whose entry (or keyword argument) `element` is: where a sibling
    keyword is added."""
    parent = facts.ctx.torch.parent(element)
    if isinstance(element, cst.DictElement) and isinstance(parent, cst.Dict):
        return parent
    if isinstance(element, cst.Arg) and isinstance(parent, cst.Call):
        return parent
    return None


def splat_dict(facts: LoaderFacts, call: cst.Call) -> Optional[cst.CSTNode]:
    """The dict literal (or `dict(...)` call) behind the single `**kwargs` of `call`."""
    splats = [a for a in call.args if a.star == "**"]
    if len(splats) != 1:
        return None
    expr = splats[0].value
    if isinstance(expr, cst.Name):
        key = facts.name_key(expr)
        bound = facts.ctx.values.index.binds.get((key[1], key[2]), [])
        if len(bound) != 1 or not isinstance(bound[0], cst.BaseExpression):
            return None
        expr = bound[0]
    if isinstance(expr, cst.Dict):
        return expr
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        return expr
    return None


def keyword_site(ctx: FileContext, call: cst.Call) -> Optional[cst.CSTNode]:
    """Where a missing DataLoader keyword can be added without a `got multiple values` error:
    the call itself when it has no `**kwargs`, else the dict literal the kwargs come from."""
    kind = loader_kind(ctx, call)
    if kind is not None and kind.subclass:
        return None  # its `__init__` may not take the keyword
    if not any(a.star for a in call.args):
        return call
    return splat_dict(loader_facts(ctx), call)
