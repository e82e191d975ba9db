"""Branches decided by what the code says, without running it: off the CUDA path, or never taken.

- `if x.device.type == "cpu":` / `"mps"`, `if device == "cpu":`, `if str(x.device) != "cuda":`'s
  body, `if not torch.cuda.is_available():`, the `else` of `if x.device.type == "cuda":`: the code
  there runs on another device, where reading a tensor on the host costs no GPU sync;
- `if hasattr(self, "scaler") and ...:` where no code of the file ever assigns `.scaler` (and the
  class has no project base that could): the branch never runs, whatever follows the `and`.

Every rule that asks whether some code runs on the GPU path (SPD201's syncs, SPD301's autocast
coverage) asks here, so that they agree.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Optional, Tuple

import libcst as cst

from speedlint.analyzer.providers.names import dotted

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

#: Device types that are not CUDA.
NOT_CUDA = frozenset({"cpu", "mps", "xpu", "xla", "hpu", "npu", "meta", "tpu", "ipu"})
#: Names that hold a device or a device type (`device`, `self.device`, `device_type`, `dev`).
_DEVICE_NAME = re.compile(r"(^|[._])(device|device_type|dev|devtype)$")
_BASES_WITHOUT_STATE = frozenset({"object", "nn.Module", "torch.nn.Module", "Module"})


def off_cuda_branch(ctx: "FileContext", test: cst.BaseExpression, taken: bool) -> bool:
    """Whether the code under `test` runs off the CUDA device: in the `if` body (`taken`) or in
    its `else` (not `taken`)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return off_cuda_branch(ctx, test.expression, not taken)
    if isinstance(test, cst.BooleanOperation):
        both_hold = isinstance(test.operator, cst.And) == taken  # `a and b` taken / `a or b` not taken
        return both_hold and (off_cuda_branch(ctx, test.left, taken) or off_cuda_branch(ctx, test.right, taken))
    if isinstance(test, cst.Call) and ctx.matches(test.func, "torch.cuda.is_available"):
        return not taken
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cuda":
        return not taken
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    left, right, op = test.left, target.comparator, target.operator
    types = _device_types(right) if _names_device(left) else _device_types(left) if _names_device(right) else None
    if types is None:
        return False
    if isinstance(op, (cst.Equal, cst.In, cst.Is)):
        holds = taken
    elif isinstance(op, (cst.NotEqual, cst.NotIn, cst.IsNot)):
        holds = not taken
    else:
        return False
    # where the comparison holds, the device is one of `types`; where not, it is none of them
    return all(t in NOT_CUDA for t in types) if holds else types == ("cuda",)


def _names_device(expr: cst.BaseExpression) -> bool:
    """`x.device.type`, `x.device`, `device`, `self.device_type`, `str(x.device)`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "str" and len(expr.args) == 1:
        return _names_device(expr.args[0].value)
    name = dotted(expr)
    if name is None:
        return False
    if name.endswith(".device.type") or name.endswith(".device"):
        return True
    return bool(_DEVICE_NAME.search(name)) or (name.endswith(".type") and bool(_DEVICE_NAME.search(name[: -len(".type")])))


def _device_types(expr: cst.BaseExpression) -> Optional[Tuple[str, ...]]:
    """The device types a literal names: `"cpu"`, `"cuda:0"`, `("cpu", "mps")`."""
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        found = [_device_types(e.value) for e in expr.elements]
        if not found or any(f is None for f in found):
            return None
        return tuple(t for f in found for t in f)  # type: ignore[union-attr]
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        if isinstance(text, bytes):
            return None
        kind = text.split(":", 1)[0]
        return (kind,) if kind in NOT_CUDA or kind == "cuda" else None
    return None


def never_true(ctx: "FileContext", test: cst.BaseExpression) -> bool:
    """A test that never holds: `hasattr(self, "name")` (alone or first in an `and`) where no code
    of the file assigns `.name` nor calls `setattr`, and the class has no project base class."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return never_true(ctx, test.left) or never_true(ctx, test.right)
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "hasattr"):
        return False
    args = [a.value for a in test.args]
    if len(args) != 2 or dotted(args[0]) != "self" or not isinstance(args[1], cst.SimpleString):
        return False
    attr = args[1].evaluated_value
    if not isinstance(attr, str) or not attr.isidentifier():
        return False
    source = ctx.source
    if "setattr(" in source or "__dict__" in source or re.search(rf"\.{re.escape(attr)}\s*(:[^=\n]*)?=(?!=)", source):
        return False
    cls = ctx.torch.enclosing_class(test)
    return cls is not None and all(dotted(b.value) in _BASES_WITHOUT_STATE for b in cls.bases)


def off_gpu_path(ctx: "FileContext", node: cst.CSTNode, boundary: Optional[cst.CSTNode] = None) -> bool:
    """`node` sits (below `boundary`, if given) in a branch that runs off the CUDA device or never."""
    for test, taken in _branches(ctx, node, boundary):
        if off_cuda_branch(ctx, test, taken) or (taken and never_true(ctx, test)):
            return True
    return False


def never_runs(ctx: "FileContext", node: cst.CSTNode, boundary: Optional[cst.CSTNode] = None) -> bool:
    """`node` sits (below `boundary`, if given) in a branch that never runs (`never_true`)."""
    return any(taken and never_true(ctx, test) for test, taken in _branches(ctx, node, boundary))


def _branches(ctx: "FileContext", node: cst.CSTNode, boundary: Optional[cst.CSTNode]) -> Iterator[Tuple[cst.BaseExpression, bool]]:
    """The tests of the `if`s around `node` (up to its function) and whether `node` is in the
    taken side (the body) or the other one."""
    child: cst.CSTNode = node
    for a in ctx.torch.ancestors(node):
        if a is boundary or isinstance(a, (cst.FunctionDef, cst.ClassDef)):
            return
        if isinstance(a, (cst.If, cst.IfExp)):
            if child is a.body:
                yield a.test, True
            elif child is a.orelse:
                yield a.test, False
        elif isinstance(a, cst.BooleanOperation) and child is a.right and isinstance(a.operator, cst.And):
            yield a.left, True
        child = a
