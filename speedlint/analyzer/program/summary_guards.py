"""Interval guards in a module's `ast`: which branch of an `if` runs now and then.

`if step % N == 0:` runs its body on one step in N and its `else` on the others; `if step % N != 0:`
(or `if step % N:`) the other way round, and `if step % N != 0: continue` leaves the rest of the
block to one step in N. A helper whose whole body returns such a test (`def should_log(i): return
i % 10 == 0`) guards the branches of its callers the same way, whatever its name (`predicates`).
"""

from __future__ import annotations

import ast
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

#: (the body runs now and then, the `else` runs now and then)
Branches = Tuple[bool, bool]
_RARE_BODY: Branches = (True, False)
_COMMON_BODY: Branches = (False, True)


def _is_mod(node: ast.AST) -> bool:
    if node.__class__ is not ast.BinOp or node.op.__class__ is not ast.Mod:
        return False
    left = node.left
    return not (left.__class__ is ast.JoinedStr or (left.__class__ is ast.Constant and isinstance(left.value, str)))


def _callee_name(func: ast.AST) -> Optional[str]:
    if func.__class__ is ast.Name:
        return func.id
    if func.__class__ is ast.Attribute:
        return func.attr
    return None


def branches(test: ast.AST, predicates: Mapping[str, Branches]) -> Optional[Branches]:
    """Which branches of `if test:` run now and then, for a test built of interval terms
    (`i % N == 0`, `i % N != 0`, `i % N`, a predicate helper's call, `not`, `and`, `or`); None
    when the test holds no such term (other signals decide)."""
    kind = test.__class__
    if kind is ast.UnaryOp and test.op.__class__ is ast.Not:  # type: ignore[attr-defined]
        inner = branches(test.operand, predicates)  # type: ignore[attr-defined]
        return None if inner is None else (inner[1], inner[0])
    if _is_mod(test):
        return _COMMON_BODY  # `if step % N:` holds unless the step is a multiple of N
    if kind is ast.Compare and len(test.ops) == 1:  # type: ignore[attr-defined]
        left, right = test.left, test.comparators[0]  # type: ignore[attr-defined]
        if _is_mod(left) or _is_mod(right):
            op = test.ops[0].__class__  # type: ignore[attr-defined]
            other = right if _is_mod(left) else left
            zero = other.__class__ is ast.Constant and other.value == 0
            if op is ast.NotEq or (op is ast.Gt and zero and _is_mod(left)) or (op is ast.Lt and zero and _is_mod(right)):
                return _COMMON_BODY
            return _RARE_BODY
        return None
    if kind is ast.Call:
        name = _callee_name(test.func)  # type: ignore[attr-defined]
        return predicates.get(name) if name is not None else None
    if kind is ast.BoolOp:
        return combine([branches(v, predicates) for v in test.values], test.op.__class__ is ast.And)  # type: ignore[attr-defined]
    return None


def combine(parts: List[Optional[Branches]], conjunction: bool) -> Optional[Branches]:
    """`a and b` / `a or b` from its operands' branches. An operand that is no interval term
    (`global_step == 1`, `rank == 0`) may hold now and then or always: the result is known only
    when the known operands decide it (`step % N == 0 and ...` runs now and then; `step % N != 0
    or ...` on most steps); else None (other signals decide)."""
    known = [p for p in parts if p is not None]
    if not known:
        return None
    if len(known) == len(parts):
        if conjunction:
            return any(p[0] for p in known), all(p[1] for p in known)
        return all(p[0] for p in known), any(p[1] for p in known)
    if conjunction and any(p[0] for p in known):
        return (True, False)
    if not conjunction and any(p[1] for p in known):
        return (False, True)
    return None


def _returned(fn: ast.AST) -> Optional[ast.AST]:
    """The expression a function's whole body returns (after a docstring), else None."""
    body = list(fn.body)  # type: ignore[attr-defined]
    if body and body[0].__class__ is ast.Expr and body[0].value.__class__ is ast.Constant:
        body = body[1:]
    if len(body) == 1 and body[0].__class__ is ast.Return and body[0].value is not None:
        return body[0].value
    return None


def interval_predicates(tree: ast.Module) -> Dict[str, Branches]:
    """Module-level functions and methods whose whole body returns an interval test, by name."""
    found: Dict[str, Branches] = {}
    defs = [n for n in tree.body if n.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef)]
    for cls in (n for n in tree.body if n.__class__ is ast.ClassDef):
        defs.extend(n for n in cls.body if n.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef))
    for fn in defs:
        value = _returned(fn)
        found_branches = branches(value, {}) if value is not None else None
        if found_branches is not None and found_branches != (False, False):
            found[fn.name] = found_branches
    return found


def skips_rest(stmt: ast.AST, predicates: Mapping[str, Branches]) -> bool:
    """`if step % N != 0: continue` (or `return`), no `else`: what follows it in the block runs
    now and then."""
    if stmt.__class__ is not ast.If or stmt.orelse:
        return False
    body: Sequence[ast.stmt] = stmt.body
    if not body or any(s.__class__ not in (ast.Continue, ast.Return) for s in body):
        return False
    found = branches(stmt.test, predicates)
    return found is not None and found[1]
