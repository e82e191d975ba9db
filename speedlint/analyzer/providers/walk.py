"""A read-only traversal of LibCST trees, several times faster than `CSTNode.visit`.

LibCST's `visit` (and `CSTNode.children`) run each node's `_visit_and_replace_children`, which
rebuilds (and re-validates) every node of the tree even when the visitor changes nothing: a
read-only pass over a module costs about as much as parsing it again. The analyzer's passes are
all read-only, so they walk the tree here instead: each node's children are read from its fields
directly, in the order `_visit_and_replace_children` visits them (learned once per node class from
its source, and checked against LibCST's own `children` on the first node of each class; a class
that does not match, or whose source cannot be read, falls back to `children`). The nodes, and
their order, are exactly the ones LibCST's visit reaches.
"""

from __future__ import annotations

import inspect
import re
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import libcst as cst

_FIELD = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")
#: node class -> the fields holding its children, in visiting order (None: use `node.children`)
_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}
_Node = cst.CSTNode


def _learn(node: cst.CSTNode) -> Optional[Tuple[str, ...]]:
    cls = node.__class__
    try:
        source = inspect.getsource(cls._visit_and_replace_children)
    except (OSError, TypeError):
        fields: Optional[Tuple[str, ...]] = None
    else:
        names: List[str] = []
        for name in _FIELD.findall(source):
            if name not in names:
                names.append(name)
        fields = tuple(names)
    if fields is not None and [id(c) for c in _read(node, fields)] != [id(c) for c in node.children]:
        fields = None  # not what LibCST visits: trust LibCST
    _FIELDS[cls] = fields
    return fields


#: value class -> whether it is a node (`isinstance` on LibCST's abstract base is slow)
_IS_NODE: Dict[type, bool] = {tuple: False, list: False, type(None): False, cst.ImportStar: False}


def _read(node: cst.CSTNode, fields: Tuple[str, ...]) -> List[cst.CSTNode]:
    out: List[cst.CSTNode] = []
    is_node = _IS_NODE
    for name in fields:
        value = getattr(node, name)
        kind = value.__class__
        if kind is tuple or kind is list:
            out.extend(value)
            continue
        known = is_node.get(kind)
        if known is None:
            known = is_node[kind] = isinstance(value, _Node)
        if known:  # (`from m import *`: LibCST does not visit the star, nor do we)
            out.append(value)
    return out


def children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """`node.children`, without rebuilding the node."""
    try:
        fields = _FIELDS[node.__class__]
    except KeyError:
        fields = _learn(node)
    if fields is None:
        return node.children
    return _read(node, fields)


_ATTRIBUTE_HOOK = re.compile(r"^(visit|leave)_[A-Za-z]+_\w+$")


def visit_batched(module: cst.CSTNode, visitors: Sequence[Mapping[str, Callable[[cst.CSTNode], object]]]) -> bool:
    """Run the `visit_<Node>`/`leave_<Node>` methods of batched visitors over the tree, like
    `libcst.visit_batched` (same nodes, same order, return values ignored).

    `visitors` are the `get_visitors()` mappings. Returns False, doing nothing, when one of them
    has an attribute hook (`visit_<Node>_<field>`): the caller must use LibCST then.
    """
    visit: Dict[str, List[Callable[[cst.CSTNode], object]]] = {}
    leave: Dict[str, List[Callable[[cst.CSTNode], object]]] = {}
    for methods in visitors:
        for name, fn in methods.items():
            if _ATTRIBUTE_HOOK.match(name):
                return False
            kind, _, node_type = name.partition("_")
            (visit if kind == "visit" else leave).setdefault(node_type, []).append(fn)
    end = object()
    stack: List[object] = [module]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        if item is end:
            node = pop()
            for fn in leave.get(node.__class__.__name__, ()):  # type: ignore[union-attr]
                fn(node)  # type: ignore[arg-type]
            continue
        node = item  # type: ignore[assignment]
        for fn in visit.get(node.__class__.__name__, ()):
            fn(node)
        push(node)
        push(end)
        kids = children(node)
        if kids:
            extend(reversed(kids))
    return True


_HOOKS: Dict[type, bool] = {}


def _has_attribute_hooks(cls: type) -> bool:
    found = _HOOKS.get(cls)
    if found is None:
        found = False
        for name in dir(cls):
            if _ATTRIBUTE_HOOK.match(name) and not getattr(getattr(cls, name), "_is_no_op", False):
                found = True
                break
        _HOOKS[cls] = found
    return found


def visit(root: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`root.visit(visitor)` for a read-only `CSTVisitor`: the same `on_visit`/`on_leave` calls
    (so the same `visit_*`/`leave_*` calls, a False from `visit_*` skipping the children), in the
    same order, without rebuilding the tree. A visitor with attribute hooks
    (`visit_<Node>_<field>`) is run by LibCST itself."""
    if _has_attribute_hooks(type(visitor)):
        root.visit(visitor)
        return
    on_visit, on_leave = visitor.on_visit, visitor.on_leave
    end = object()
    stack: List[object] = [root]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        if item is end:
            on_leave(pop())  # type: ignore[arg-type]
            continue
        node: cst.CSTNode = item  # type: ignore[assignment]
        if on_visit(node):
            push(node)
            push(end)
            kids = children(node)
            if kids:
                extend(reversed(kids))
        else:
            on_leave(node)
