"""Interval guards in LibCST form: which branch of an `if` runs now and then (the rules' view of
`program.summary_guards`).

`if step % N == 0:` runs its body on one step in N and its `else` on the others; `if step % N != 0:`
and `if step % N:` the other way round. A same-file helper whose whole body returns such a test
(`def should_log(i): return i % 10 == 0`, `def off_beat(i): return i % 10 != 0`) guards its callers'
branches the same way, whatever its name.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import libcst as cst

from speedlint.analyzer.program.summary_guards import combine

#: (the body runs now and then, the `else` runs now and then)
Branches = Tuple[bool, bool]
Predicate = Callable[[cst.Call], Optional[Branches]]
_RARE_BODY: Branches = (True, False)
_COMMON_BODY: Branches = (False, True)


def is_modulo(node: cst.CSTNode) -> bool:
    """`i % n` (not `"%d" % x`)."""
    return (
        isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)
        and not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
    )


def branches(test: cst.BaseExpression, predicate: Optional[Predicate] = None) -> Optional[Branches]:
    """Which branches of `if test:` run now and then, for a test built of interval terms
    (`i % N == 0`, `i % N != 0`, `i % N`, a predicate helper's call, `not`, `and`, `or`); None when
    the test holds no such term."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = branches(test.expression, predicate)
        return None if inner is None else (inner[1], inner[0])
    if is_modulo(test):
        return _COMMON_BODY  # `if step % N:` holds unless the step is a multiple of N
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, right = test.left, test.comparisons[0].comparator
        if is_modulo(left) or is_modulo(right):
            op = test.comparisons[0].operator
            other = right if is_modulo(left) else left
            zero = isinstance(other, cst.Integer) and other.value == "0"
            if (
                isinstance(op, cst.NotEqual)
                or (isinstance(op, cst.GreaterThan) and zero and is_modulo(left))
                or (isinstance(op, cst.LessThan) and zero and is_modulo(right))
            ):
                return _COMMON_BODY
            return _RARE_BODY
        return None
    if isinstance(test, cst.Call):
        return predicate(test) if predicate is not None else None
    if isinstance(test, cst.BooleanOperation):
        return combine([branches(test.left, predicate), branches(test.right, predicate)], isinstance(test.operator, cst.And))
    return None


def predicate_of(fn: cst.FunctionDef) -> Optional[Branches]:
    """A helper whose whole body (after a docstring) returns an interval test: what its result
    says about a branch on it."""
    if isinstance(fn.body, cst.SimpleStatementSuite):  # `def f(i): return i % 10 == 0`
        smalls = list(fn.body.body)
    else:
        stmts = list(fn.body.body)
        if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and len(stmts[0].body) == 1:
            first = stmts[0].body[0]
            if isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
                stmts = stmts[1:]  # the docstring
        if len(stmts) != 1 or not isinstance(stmts[0], cst.SimpleStatementLine):
            return None
        smalls = list(stmts[0].body)
    if len(smalls) != 1:
        return None
    ret = smalls[0]
    if not isinstance(ret, cst.Return) or ret.value is None:
        return None
    found = branches(ret.value)
    return found if found is not None and found != (False, False) else None
