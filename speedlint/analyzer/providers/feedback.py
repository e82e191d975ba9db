"""Host reads a loop cannot do without: the value read from the device becomes the next
iteration's input.

An agent acting in an environment reads its action on the host (`actions = q(obs).argmax(1).cpu().numpy()`),
hands it to the environment (`next_obs, ... = envs.step(actions)`) and feeds what comes back to the
model on the next iteration (`obs = next_obs`, then `q(torch.Tensor(obs).to(device))` earlier in the
loop). The sync is the loop's own data dependence: the next forward cannot be queued before the
host has the action. Nothing can be done about it (short of moving the environment to the device),
so a rule that reports avoidable syncs stays silent there.

The test, in the loop body's source order: the statement holding the read binds names; names bound
later in the loop from expressions that read them (through at least one call that is not torch's or
a builtin: the environment, a simulator) carry the read on; one of them is read earlier in the loop
as an argument of a call (the next iteration's forward, `torch.Tensor(obs)`), not only printed.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Set, Tuple

import libcst as cst

from speedlint.analyzer.providers.inference import iter_nodes


def _simple_statements(loop: cst.CSTNode) -> List[cst.BaseSmallStatement]:
    """The small statements of a loop body (nested blocks included), in source order; the
    headers of nested compound statements count as statements of their own (`for x in f(obs)`)."""
    out: List[cst.BaseSmallStatement] = []
    for node in iter_nodes(loop.body):  # type: ignore[attr-defined]
        if isinstance(node, cst.BaseSmallStatement):
            out.append(node)
    return out


def _targets(stmt: cst.CSTNode) -> Set[str]:
    names: Set[str] = set()
    targets: List[cst.BaseExpression] = []
    if isinstance(stmt, cst.Assign):
        targets = [t.target for t in stmt.targets]
    elif isinstance(stmt, (cst.AnnAssign, cst.AugAssign)):
        targets = [stmt.target]
    for t in targets:
        for n in iter_nodes(t):
            if isinstance(n, cst.Name):
                names.add(n.value)
            if isinstance(n, (cst.Attribute, cst.Subscript)):
                break  # `buf[i] = v`, `self.x = v`: stored, not a name of the loop
    return names


def _value(stmt: cst.CSTNode) -> Optional[cst.BaseExpression]:
    if isinstance(stmt, (cst.Assign, cst.AugAssign)):
        return stmt.value
    if isinstance(stmt, cst.AnnAssign):
        return stmt.value
    return None


def _uses(expr: cst.CSTNode) -> List[str]:
    """The names an expression reads (not the attribute names after a dot)."""
    out: List[str] = []
    todo: List[cst.CSTNode] = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, cst.Name):
            out.append(node.value)
        elif isinstance(node, cst.Attribute):
            todo.append(node.value)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            todo.extend(node.children)
    return out


def _reads(expr: cst.CSTNode, names: Set[str]) -> bool:
    return any(n in names for n in _uses(expr))


def _through_call(expr: cst.CSTNode, names: Set[str], is_library: Callable[[cst.Call], bool]) -> bool:
    """`expr` passes one of `names` to a call that is neither torch's nor a builtin."""
    for n in iter_nodes(expr):
        if isinstance(n, cst.Call) and is_library(n) and any(_reads(a.value, names) for a in n.args):
            return True
    return False


def _fed_to_call(stmt: cst.CSTNode, names: Set[str], is_input: Callable[[cst.Call], bool]) -> bool:
    """`stmt` passes one of `names` to a call that makes model input of it (`torch.Tensor(obs)`,
    `agent.act(obs)`)."""
    for n in iter_nodes(stmt):
        if isinstance(n, cst.Call) and is_input(n) and any(_reads(a.value, names) for a in n.args):
            return True
    return False


def feeds_next_iteration(
    read: cst.CSTNode,
    loop: cst.CSTNode,
    statement_of: Callable[[cst.CSTNode], Optional[cst.CSTNode]],
    is_library: Callable[[cst.Call], bool],
    is_input: Callable[[cst.Call], bool],
) -> bool:
    """Whether the host read `read` inside `loop` becomes the input of the loop's next iteration
    (see the module docstring). `statement_of`: the small statement holding a node;
    `is_library`: a call that is neither torch's nor a builtin (an environment's `step`);
    `is_input`: a call that makes model input of its arguments (a torch call, a model's method)."""
    stmt = statement_of(read)
    if stmt is None:
        return False
    stmts = _simple_statements(loop)
    try:
        at = next(i for i, s in enumerate(stmts) if s is stmt)
    except StopIteration:
        return False
    carried = _targets(stmt)
    if not carried:
        return False
    value = _value(stmt)
    through = value is not None and _through_call(value, _names_in(read), is_library)
    for later in stmts[at + 1:]:
        value = _value(later)
        if value is None or not _reads(value, carried):
            continue
        through = through or _through_call(value, carried, is_library)
        carried = carried | _targets(later)
    if not through:
        return False
    # read earlier in the loop before the iteration binds it anew (the loop's own target, an
    # assignment above the read): the value of the previous iteration
    rebound = set(_uses(loop.target)) if isinstance(loop, cst.For) else set()
    for earlier in stmts[:at]:
        if _fed_to_call(earlier, carried - rebound, is_input):
            return True
        rebound |= _targets(earlier)
    return False


def _names_in(read: cst.CSTNode) -> Set[str]:
    """The names a read's own expression holds, as a stand-in for its value inside the statement
    (`envs.step(action.cpu().numpy())`: `action`)."""
    return set(_uses(read))


__all__: Tuple[str, ...] = ("feeds_next_iteration",)
