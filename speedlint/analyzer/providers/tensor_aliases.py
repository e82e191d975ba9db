"""Names that hold a tensor type: `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`.

Old training scripts (GAN collections, early tutorials) pick the tensor type once, at module
level, and build every tensor through it: `Tensor(n, 1).fill_(1.0)` makes a tensor (on the GPU
when the CUDA type is chosen), `imgs.type(Tensor)` copies a batch to the GPU. Such a name is not
a model: calling it runs no forward. `tensor_type_alias` says which tensor types a name may hold,
when every binding of it in scope is one (or a conditional between them); every rule asks the
same question here: where the AMP plan anchors the forward (SPD301), whether `.type(...)` moves a
batch to the GPU (SPD102, SPD202).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

#: The legacy tensor types, `torch.<Name>` and `torch.cuda.<Name>`.
_TYPES = frozenset({
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor", "Tensor",
})


def tensor_type(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[str]:
    """`torch.cuda.FloatTensor` / `torch.FloatTensor` (as the imports spell it): its qualified name."""
    q = ctx.qualname(expr) or ""
    head, _, tail = q.rpartition(".")
    return q if tail in _TYPES and head in ("torch", "torch.cuda") else None


def tensor_type_alias(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[Tuple[str, ...]]:
    """The tensor types a name may hold (qualified names), when each of its bindings in scope is
    a tensor type or a conditional between tensor types; None for anything else."""
    if not isinstance(expr, cst.Name):
        return None
    _, bound = ctx.values.bindings(expr)
    if not bound:
        return None
    out: List[str] = []
    for b in bound:
        got = _types_of(ctx, b) if isinstance(b, cst.BaseExpression) else None
        if got is None:
            return None
        out += [t for t in got if t not in out]
    return tuple(out)


def _types_of(ctx: "FileContext", expr: cst.BaseExpression) -> Optional[List[str]]:
    if isinstance(expr, cst.IfExp):
        body, orelse = _types_of(ctx, expr.body), _types_of(ctx, expr.orelse)
        return None if body is None or orelse is None else [*body, *orelse]
    found = tensor_type(ctx, expr)
    return [found] if found is not None else None


def may_be_cuda_type(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """A tensor type (written, or held by a name) that is or may be a CUDA one."""
    found = tensor_type(ctx, expr)
    if found is not None:
        return found.startswith("torch.cuda.")
    aliases = tensor_type_alias(ctx, expr)
    return aliases is not None and any(t.startswith("torch.cuda.") for t in aliases)
