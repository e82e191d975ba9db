"""What a branch's test says about a name being a tensor: `isinstance(v, torch.Tensor)` (or a
tuple of types holding `torch.Tensor`) and `torch.is_tensor(v)`, negated or combined.

* `tensor_test`: the name a branch runs with only when it is a tensor (the body of
  `if isinstance(v, torch.Tensor) and ...:`, the `else` of `if not torch.is_tensor(v):`);
* `known_not_tensor`: a use of a name inside a branch that runs only when it is not a tensor
  (the `else` of `if isinstance(h, torch.Tensor):`, as in the recursive `repackage_hidden(h)` of
  language models: `h.detach()` for a tensor, else a loop over the tuple of states), with no
  other binding of the name in that branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from speedlint.analyzer.providers.flow import flow

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext


def tensor_test(ctx: FileContext, test: cst.BaseExpression, taken: bool) -> Optional[cst.Name]:
    """The name `test` checks for being a tensor, when the branch runs only if it is one
    (`taken`: the body of `if test`; else its `else`): `isinstance(v, torch.Tensor)` (or a
    tuple of types with `torch.Tensor`), `torch.is_tensor(v)`, in an `and`, or negated."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return tensor_test(ctx, test.expression, not taken)
    if isinstance(test, cst.BooleanOperation):
        if taken and isinstance(test.operator, cst.And):
            return tensor_test(ctx, test.left, True) or tensor_test(ctx, test.right, True)
        return None
    return _checked(ctx, test) if taken else None


def not_tensor_test(ctx: FileContext, test: cst.BaseExpression, taken: bool) -> Optional[cst.Name]:
    """The name `test` checks for being a tensor, when the branch runs only if it is not one:
    the `else` of `isinstance(v, torch.Tensor)`, the body of `not torch.is_tensor(v)`, an `or`
    whose sides all failed."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return not_tensor_test(ctx, test.expression, not taken)
    if isinstance(test, cst.BooleanOperation):
        if not taken and isinstance(test.operator, cst.Or):
            return not_tensor_test(ctx, test.left, False) or not_tensor_test(ctx, test.right, False)
        return None
    return None if taken else _checked(ctx, test)


def _checked(ctx: FileContext, test: cst.BaseExpression) -> Optional[cst.Name]:
    """The name a plain `isinstance(v, torch.Tensor)` / `torch.is_tensor(v)` call tests."""
    if not isinstance(test, cst.Call) or any(a.star or a.keyword is not None for a in test.args):
        return None
    args = [a.value for a in test.args]
    if isinstance(test.func, cst.Name) and test.func.value == "isinstance" and len(args) == 2:
        types = [e.value for e in args[1].elements] if isinstance(args[1], cst.Tuple) else [args[1]]
        if not any(isinstance(t, (cst.Name, cst.Attribute)) and ctx.qualname(t) == "torch.Tensor" for t in types):
            return None
    elif not (ctx.matches(test.func, "torch.is_tensor") and len(args) == 1):
        return None
    return args[0] if isinstance(args[0], cst.Name) else None


def known_not_tensor(ctx: FileContext, node: cst.Name) -> bool:
    """Some `if`/conditional expression around `node` (in its function) runs this branch only
    when `node`'s name is not a tensor, and nothing in the branch binds that name again."""
    facts = ctx.torch
    name = node.value
    child: cst.CSTNode = node
    for a in facts.ancestors(node):
        if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return False
        if isinstance(a, (cst.If, cst.IfExp)) and (child is a.body or child is a.orelse):
            subject = not_tensor_test(ctx, a.test, child is a.body)
            if subject is not None and subject.value == name and not any(facts.contains(child, b.site) for b in flow(ctx).bindings(node)):
                return True  # (a binding in the branch, `h = torch.stack(h)`, would undo it)
        child = a
    return False
