"""Read-only traversals of LibCST trees, several times faster than `CSTNode.visit`.

LibCST's `visit` (and `CSTNode.children`) run each node's `_visit_and_replace_children`, which
rebuilds (and re-validates) every node of the tree even when the visitor changes nothing: a
read-only pass over a module costs about as much as parsing it again. The analyzer's passes are
all read-only, so they walk the tree here instead: each node's children are read from its fields
directly, in the order `_visit_and_replace_children` visits them (learned once per node class from
its source, and checked against LibCST's own `children` on the first node of each class; a class
that does not match, or whose source cannot be read, falls back to `children`). The nodes, and
their order, are exactly the ones LibCST's visit reaches.

A file's tree is read once: `TreeIndex` lists every node in that order (preorder) with where its
subtree ends and its parent. While `indexed(module)` is active, every pass below over that tree
(the rules' batched traversal, `visit`, `children`, `preorder`) runs over the index: a loop over
a list, no field reads.
"""

from __future__ import annotations

import inspect
import re
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, cast

import libcst as cst

_FIELD = re.compile(r"visit_\w+\(\s*self,\s*\"(\w+)\"")
#: node class -> a function listing a node's children (`_reader`), learned on first sight
_READERS: Dict[type, Callable[[cst.CSTNode], Sequence[cst.CSTNode]]] = {}
_Node = cst.CSTNode
#: value classes seen in child fields: nodes, and the others (None, `MaybeSentinel`, and the
#: `ImportStar` of `from m import *`, which LibCST does not visit) (`isinstance` on LibCST's
#: abstract base class is slow: each class is tested once)
_NODE_CLASSES: set = set()
_OTHER_CLASSES: set = {type(None), cst.ImportStar}


def _classify(kind: type, value: object) -> bool:
    if isinstance(value, _Node) and kind is not cst.ImportStar:
        _NODE_CLASSES.add(kind)
        return True
    _OTHER_CLASSES.add(kind)
    return False


def _reader(fields: Tuple[str, ...]) -> Callable[[cst.CSTNode], List[cst.CSTNode]]:
    """A function that reads these fields of a node, in this order, into a list of children
    (sequences flattened, non-nodes left out). Generated: one attribute read per field."""
    lines = ["def read(node):", "    out = []"]
    for name in fields:
        lines += [
            f"    v = node.{name}",
            "    k = v.__class__",
            "    if k is tuple or k is list:",
            "        out.extend(v)",
            "    elif k in nodes or (k not in others and classify(k, v)):",
            "        out.append(v)",
        ]
    lines.append("    return out")
    namespace = {"nodes": _NODE_CLASSES, "others": _OTHER_CLASSES, "classify": _classify}
    exec("\n".join(lines), namespace)  # field names are identifiers read from LibCST's source
    return cast(Callable[[cst.CSTNode], List[cst.CSTNode]], namespace["read"])


def _children_property(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    return node.children


#: node class -> its child fields in visiting order, as verified by `_learn` (None: LibCST's `children`)
_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}


def _learn(node: cst.CSTNode) -> Callable[[cst.CSTNode], Sequence[cst.CSTNode]]:
    cls = node.__class__
    read: Callable[[cst.CSTNode], Sequence[cst.CSTNode]] = _children_property
    fields: Optional[Tuple[str, ...]] = None
    try:
        source = inspect.getsource(cls._visit_and_replace_children)
    except (OSError, TypeError):
        pass
    else:
        names: List[str] = []
        for name in _FIELD.findall(source):
            if name not in names:
                names.append(name)
        candidate = _reader(tuple(names))
        if [id(c) for c in candidate(node)] == [id(c) for c in node.children]:
            read, fields = candidate, tuple(names)  # else: not what LibCST visits: trust LibCST
    _READERS[cls] = read
    _FIELDS[cls] = fields
    return read


def _read_children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    read = _READERS.get(node.__class__)
    if read is None:
        read = _learn(node)
    return read(node)


# -- one reading of a tree ------------------------------------------------------------------------
#: The reading being built (`TreeIndex`): the generated builders below append to these lists.
_BUILDING: Dict[str, object] = {}
#: value class -> the function that adds a value of that class, and its subtree, to the reading
_BUILDERS: Dict[type, Callable[[object, int], None]] = {}


def _skip(value: object, parent: int) -> None:
    """Builder for what is not a node (None, `MaybeSentinel`, the star of `from m import *`)."""


def _builder_of(value: object) -> Callable[[object, int], None]:
    """The builder for `value`'s class (generated on first sight, from the verified child fields:
    one attribute read per field, a direct call per child, no stack)."""
    kind = value.__class__
    found = _BUILDERS.get(kind)
    if found is not None:
        return found
    if kind in _OTHER_CLASSES or (kind not in _NODE_CLASSES and not _classify(kind, value)):
        _BUILDERS[kind] = _skip
        return _skip
    if kind not in _READERS:
        _learn(value)  # type: ignore[arg-type]
    add = "(builders.get(x.__class__) or builder_of(x))(x, i)"
    lines = [
        "def build(node, parent):",
        "    i = len(nodes)",
        "    nodes.append(node)",
        "    parents.append(parent)",
        "    ends.append(0)",
    ]
    fields = _FIELDS[kind]
    if fields is None:
        lines += ["    for x in node.children:", f"        {add}"]
    for name in fields or ():
        lines += [
            f"    value = node.{name}",
            "    if value.__class__ is tuple or value.__class__ is list:",
            "        for x in value:",
            f"            {add}",
            "    else:",
            "        x = value",
            f"        {add}",
        ]
    lines.append("    ends[i] = len(nodes)")
    exec("\n".join(lines), _BUILDING)  # field names are identifiers read from LibCST's source
    found = _BUILDERS[kind] = _BUILDING.pop("build")  # type: ignore[assignment]
    return found  # type: ignore[return-value]


_BUILDING.update(builders=_BUILDERS, builder_of=_builder_of)


#: The nodes that only hold whitespace, and the comma between two items (its whitespace around a
#: `,`) (`TreeIndex.holds_each_node_once`).
_WHITESPACE = frozenset({cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.EmptyLine, cst.Comment, cst.Comma})


class TreeIndex:
    """Every node of a tree in visiting order (preorder), read once.

    `nodes[i]`'s subtree is `nodes[i:ends[i]]`; `parents[i]` is the index of its parent (-1 for the
    root). Nodes are found by identity (`index(node)`), never by equality.
    """

    __slots__ = ("nodes", "ends", "parents", "_pos")

    def __init__(self, root: cst.CSTNode) -> None:
        # one Python call per node (generated builders); a tree too deep for that is read with a
        # stack instead
        _BUILDING.update(nodes=[], ends=[], parents=[])
        try:
            _builder_of(root)(root, -1)
            self._set(_BUILDING["nodes"], _BUILDING["ends"], _BUILDING["parents"])  # type: ignore[arg-type]
        except RecursionError:
            self._read_with_a_stack(root)
        finally:
            _BUILDING.update(nodes=None, ends=None, parents=None)

    def _set(self, nodes: List[cst.CSTNode], ends: List[int], parents: List[int]) -> None:
        self.nodes = nodes
        self.ends = ends
        self.parents = parents
        self._pos = dict(zip(map(id, nodes), range(len(nodes))))

    def _read_with_a_stack(self, root: cst.CSTNode) -> None:
        nodes: List[cst.CSTNode] = []
        ends: List[int] = []
        parents: List[int] = []
        # two stacks in step: what to visit next, and the index of its parent; a None node marks
        # the end of the subtree of the node whose index is beside it
        stack: List[Optional[cst.CSTNode]] = [root]
        owners: List[int] = [-1]
        pop, push, extend = stack.pop, stack.append, stack.extend
        owner, push_owner, extend_owners = owners.pop, owners.append, owners.extend
        add_node, add_end, add_parent = nodes.append, ends.append, parents.append
        read = _read_children
        while stack:
            node = pop()
            parent = owner()
            if node is None:  # the subtree of nodes[parent] is done
                ends[parent] = len(nodes)
                continue
            i = len(nodes)
            add_node(node)
            add_end(0)
            add_parent(parent)
            push(None)
            push_owner(i)
            kids = read(node)
            if kids:
                extend(reversed(kids))
                extend_owners([i] * len(kids))
        self._set(nodes, ends, parents)

    def holds_each_node_once(self) -> bool:
        """No node object is in the tree twice, whitespace aside (a parsed tree never; a rewritten
        one may, where a fix put one node in two places, and then that node's position or parent
        is not one). A whitespace node or comma shared by two places (a codemod's line breaks)
        has no position or parent anyone asks for."""
        if len(self._pos) == len(self.nodes):
            return True
        seen: Set[int] = set()
        for node in self.nodes:
            if node.__class__ not in _WHITESPACE:
                if id(node) in seen:
                    return False
                seen.add(id(node))
        return True

    def index(self, node: cst.CSTNode) -> Optional[int]:
        """Where `node` is in `nodes` (None: not in this tree)."""
        i = self._pos.get(id(node))
        if i is None or self.nodes[i] is not node:
            return None
        return i

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        i = self.index(node)
        if i is None:
            return None
        p = self.parents[i]
        return self.nodes[p] if p >= 0 else None

    def children_at(self, i: int) -> List[cst.CSTNode]:
        nodes, ends = self.nodes, self.ends
        out = []
        j, end = i + 1, ends[i]
        while j < end:
            out.append(nodes[j])
            j = ends[j]
        return out


_ACTIVE: Optional[TreeIndex] = None


@contextmanager
def indexed(root: cst.CSTNode, index: Optional[TreeIndex] = None) -> Iterator[TreeIndex]:
    """Read the tree once (or use `index`, its reading already made); within the block, the
    passes below over it use that reading."""
    global _ACTIVE
    saved = _ACTIVE
    _ACTIVE = index = index if index is not None else TreeIndex(root)
    try:
        yield index
    finally:
        _ACTIVE = saved


def index_of(root: cst.CSTNode) -> TreeIndex:
    """The active index when `root` is the tree it was made for, else a new reading of `root`."""
    active = _ACTIVE
    if active is not None and active.nodes[0] is root:
        return active
    return TreeIndex(root)


def _located(node: cst.CSTNode) -> Optional[Tuple[TreeIndex, int]]:
    active = _ACTIVE
    if active is None:
        return None
    i = active.index(node)
    return None if i is None else (active, i)


def children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """`node.children`, without rebuilding the node."""
    found = _located(node)
    if found is not None:
        return found[0].children_at(found[1])
    return _read_children(node)


def preorder(root: cst.CSTNode, skip: Tuple[type, ...] = ()) -> Iterator[cst.CSTNode]:
    """`root` and its descendants in visiting order, not entering nodes of the `skip` classes
    (other than `root`: they are yielded, their subtrees are not). `skip` names concrete node
    classes (`cst.FunctionDef`, not `cst.BaseCompoundStatement`): a node's class is looked up in it."""
    found = _located(root)
    if found is None:
        stack = [root]
        while stack:
            node = stack.pop()
            yield node
            if skip and node is not root and node.__class__ in skip:
                continue
            stack.extend(reversed(_read_children(node)))
        return
    index, i = found
    nodes, ends = index.nodes, index.ends
    end = ends[i]
    yield nodes[i]
    j = i + 1
    while j < end:
        node = nodes[j]
        yield node
        j = ends[j] if skip and node.__class__ in skip else j + 1


# -- visitors -------------------------------------------------------------------------------------
_ATTRIBUTE_HOOK = re.compile(r"^(visit|leave)_[A-Za-z]+_\w+$")


def visit_batched(module: cst.CSTNode, visitors: Sequence[Mapping[str, Callable[[cst.CSTNode], object]]]) -> bool:
    """Run the `visit_<Node>`/`leave_<Node>` methods of batched visitors over the tree, like
    `libcst.visit_batched` (same nodes, same order, return values ignored).

    `visitors` are the `get_visitors()` mappings. Returns False, doing nothing, when one of them
    has an attribute hook (`visit_<Node>_<field>`): the caller must use LibCST then.
    """
    tables = _tables(visitors)
    if tables is None:
        return False
    _run(index_of(module), 0, *tables, prune=False)
    return True


_Table = Dict[str, Callable[[cst.CSTNode], object]]


def _tables(visitors: Sequence[Mapping[str, Callable[[cst.CSTNode], object]]]) -> Optional[Tuple[_Table, _Table]]:
    """The visit and the leave callable per node class name, from `visit_<Node>`/`leave_<Node>`
    methods (several visitors' methods are called in turn); None when one of them is an attribute
    hook (`visit_<Node>_<field>`), which only LibCST runs."""
    found: Tuple[Dict[str, List[Callable[[cst.CSTNode], object]]], ...] = ({}, {})
    for methods in visitors:
        for name, fn in methods.items():
            if _ATTRIBUTE_HOOK.match(name):
                return None
            kind, _, node_type = name.partition("_")
            found[0 if kind == "visit" else 1].setdefault(node_type, []).append(fn)
    visit, leave = ({
        name: fns[0] if len(fns) == 1 else (lambda node, fns=tuple(fns): [fn(node) for fn in fns] and None)
        for name, fns in table.items()
    } for table in found)
    return visit, leave


def _run(
    index: TreeIndex,
    start: int,
    visit: Mapping[str, Callable[[cst.CSTNode], object]],
    leave: Mapping[str, Callable[[cst.CSTNode], object]],
    prune: bool,
) -> None:
    """Visit `nodes[start]`'s subtree: `visit[name](node)` on the way down, `leave[name](node)`
    after its subtree; with `prune`, a visit that returns False skips the node's children (its
    leave still runs), as in LibCST."""
    nodes, ends = index.nodes, index.ends
    end = ends[start]
    pending: List[Tuple[int, cst.CSTNode, Callable[[cst.CSTNode], object]]] = []  # leaves to run
    fn: Optional[Callable[[cst.CSTNode], object]]
    j = start
    while j < end:
        while pending and pending[-1][0] <= j:
            _, done, fn = pending.pop()
            fn(done)
        node = nodes[j]
        name = node.__class__.__name__
        fn = visit.get(name)
        descend = True
        if fn is not None:
            result = fn(node)
            descend = not prune or result is not False
        after = leave.get(name)
        if descend:
            if after is not None:
                pending.append((ends[j], node, after))
            j += 1
        else:
            if after is not None:
                after(node)
            j = ends[j]
    while pending:
        _, done, fn = pending.pop()
        fn(done)


#: visitor class -> the names of its own `visit_<Node>`/`leave_<Node>` methods (no-op stubs left out)
_METHOD_NAMES: Dict[object, Tuple[str, ...]] = {}


def _class_key(cls: type) -> object:
    """What decides a class's visitor methods. A class defined inside a function is a new class
    object on every call, from the same code: it is keyed by where it is defined, its bases and
    the names it defines (not kept alive, nor introspected again, once per call)."""
    if "<locals>" not in cls.__qualname__:
        return cls
    return (cls.__module__, cls.__qualname__, cls.__bases__, frozenset(vars(cls)))


def visitor_methods(visitor: object) -> Dict[str, Callable[..., object]]:
    """The visitor's `visit_*`/`leave_*` methods, bound, by name (LibCST's no-op stubs left out).

    Like `BatchableCSTVisitor.get_visitors()`, without its cost and side effects: LibCST's
    version runs `inspect.getmembers(self)`, which *evaluates every property* of the visitor (a
    rule's lazily built analysis would be built for every file, needed or not).
    """
    cls = type(visitor)
    key = _class_key(cls)
    names = _METHOD_NAMES.get(key)
    if names is None:
        found = []
        dicts = [vars(klass) for klass in cls.__mro__]
        for name in dir(cls):
            if not name.startswith(("visit_", "leave_")):
                continue
            # where the class finds it: the first in its MRO that defines it (what
            # `inspect.getattr_static` answers, at a fraction of its cost over LibCST's ~1,600 stubs)
            attr = next((d[name] for d in dicts if name in d), None)
            if inspect.isfunction(attr) and not getattr(attr, "_is_no_op", False):
                found.append(name)
        names = _METHOD_NAMES[key] = tuple(found)
    return {name: getattr(visitor, name) for name in names}


def visit(root: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`root.visit(visitor)` for a read-only `CSTVisitor`: the same `visit_*`/`leave_*` calls (a
    False from `visit_*` skipping the children), in the same order, without rebuilding the tree.
    A visitor with attribute hooks (`visit_<Node>_<field>`), or one that overrides
    `on_visit`/`on_leave`, is run by LibCST itself."""
    cls = type(visitor)
    tables = None
    if cls.on_visit is cst.CSTVisitor.on_visit and cls.on_leave is cst.CSTVisitor.on_leave:
        tables = _tables([visitor_methods(visitor)])
    if tables is None:
        root.visit(visitor)
        return
    found = _located(root)
    index, start = found if found is not None else (TreeIndex(root), 0)
    _run(index, start, *tables, prune=True)
