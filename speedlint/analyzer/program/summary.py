"""Per-file summaries of the program model (`summarize`), from the stdlib `ast` (fast, cacheable
by content hash): imports, classes and their bases, functions in source order with their
parameters, their calls in a symbolic form (`self.criterion(...)`, `model(x)`, `Cls(...)`), loops,
what they bind to names and `self` attributes, what they return, and whether they call
`backward()` / an optimizer step directly. Tuples and dicts of JSON values (they go to the cache as
JSON), made compact (`compact`): equal sub-expressions shared, names interned. The data-loading and
config-file facts of a file (`loader_summary`, `configs.summary`) are part of its summary.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union, cast

from speedlint.analyzer.ast_fields import FieldTable, source_start
from speedlint.analyzer.configs.summary import config_summary, walk
from speedlint.analyzer.program.loader_summary import loader_summary
from speedlint.analyzer.program.summary_guards import branches, interval_predicates, skips_rest
from speedlint.analyzer.program.summary_plugins import plugin_expr, plugin_facts
from speedlint.analyzer.program.summary_optin import amp_gate_facts
from speedlint.analyzer.program.summary_text import text_facts
from speedlint.analyzer.frameworks.hf_facts import summary_facts
from speedlint.analyzer.settings_use import settings_summary
from speedlint.analyzer.program.compact import FrozenDict, compact  # noqa: F401  (FrozenDict: where readers look for it)
from speedlint.analyzer.program.schema import (
    C_FLAGS, C_FUNC, C_KWS, C_LINE, CACHE_FILL, CONDITIONAL, EVAL_ONLY, GRAD_OFF, GUARDED, HANDLER, INT, ONE_ITERATION, PROPERTY, SPLAT,
    SUMMARY_FORMAT, TRAIN_ONLY, WITH_ITEM,
)
from speedlint.analyzer.pyparse import AST_ERRORS, parse_quietly
from speedlint.analyzer.textscan import says_grad_off
from speedlint.analyzer.vocabulary import COUNTER_NAME, SCHEDULER_HINT
from speedlint.analyzer.vocabulary import DTYPES as _DTYPE_NAMES
from speedlint.analyzer.vocabulary import dotted_name as _dotted

_INTERVAL_WORDS = re.compile(r"log|interval|every|freq|period|print|verbose|debug|display|save|ckpt|checkpoint|vis|summary|report|plot|sample_|dump", re.I)
#: Builtins whose calls never run project code (unless the module rebinds the name).
_BUILTIN_CALLS = frozenset({
    "len", "range", "print", "isinstance", "issubclass", "getattr", "setattr", "hasattr", "delattr", "str", "int",
    "float", "bool", "list", "dict", "tuple", "set", "frozenset", "min", "max", "sum", "abs", "zip", "enumerate",
    "sorted", "reversed", "type", "id", "repr", "round", "any", "all", "open", "format", "hash", "divmod", "pow",
    "chr", "ord", "bytes", "bytearray", "vars", "dir", "callable", "globals", "locals", "hex", "oct", "bin", "slice",
    "object", "ValueError", "TypeError", "KeyError", "RuntimeError", "NotImplementedError", "AssertionError",
    "IndexError", "AttributeError", "Exception", "StopIteration", "ImportError", "OSError", "FileNotFoundError",
})
#: Tensor / array / str / container methods: a call of one of these never runs project code.
_TENSOR_METHODS = frozenset({
    "view", "reshape", "size", "permute", "transpose", "contiguous", "unsqueeze", "squeeze", "expand", "repeat",
    "flatten", "argmax", "argmin", "item", "cpu", "numpy", "tolist", "detach", "clone", "type_as", "view_as",
    "expand_as", "masked_fill", "masked_fill_", "fill_", "zero_", "copy_", "add_", "mul_", "sub_", "div_", "clamp",
    "clamp_", "matmul", "bmm", "softmax", "log_softmax", "index_select", "gather", "scatter", "scatter_add",
    "masked_select", "nonzero", "topk", "numel", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor",
    "startswith", "endswith", "strip", "lstrip", "rstrip", "lower", "upper", "add_argument", "add_scalar", "astype",
    "unbind", "cumsum", "requires_grad_", "register_buffer", "register_parameter", "named_parameters",
    "is_contiguous", "data_ptr", "element_size", "stride",
})



# -- summaries ------------------------------------------------------------------------------------

def _expr(node: Optional[ast.AST], depth: int = 0) -> Any:
    """The symbolic form of an expression (None when it says nothing useful for calls)."""
    if node is None or depth > 12:
        return None
    kind = node.__class__
    if kind is ast.Name:
        return ["n", node.id]  # type: ignore[attr-defined]
    if kind is ast.Attribute:  # (a chain `a.b.c` in a loop, not a call per part)
        attrs = []
        while kind is ast.Attribute:
            # (mypy does not narrow `node` through `kind`, its class kept in a local)
            attrs.append(node.attr)  # type: ignore[attr-defined, union-attr]
            node = node.value  # type: ignore[attr-defined, union-attr]
            depth += 1
            kind = node.__class__
        base = ["n", node.id] if kind is ast.Name and depth <= 12 else _expr(node, depth)  # type: ignore[union-attr]
        if base is None:
            return None
        for attr in reversed(attrs):
            base = ["a", base, attr]
        return base
    if kind is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Name) and func.id == "super":
            return ["super"]
        if func.__class__ is not ast.Name or func.id in ("import_module", "__import__"):
            plugin = plugin_expr(node)  # type: ignore[arg-type]  # a module loaded by name
            if plugin is not None:
                return plugin
        f = _expr(func, depth + 1)
        if f is None:
            return None
        args = []
        starred = []
        for a in node.args:  # type: ignore[attr-defined]
            if a.__class__ is ast.Starred:
                e = _expr(a.value, depth + 1)
                if e is not None:
                    starred.append(e)
            else:
                args.append(_expr(a, depth + 1))
        kws = {k.arg: _expr(k.value, depth + 1) for k in node.keywords if k.arg} if node.keywords else {}  # type: ignore[attr-defined]
        if starred:  # `nn.Sequential(*layers)`: what a container call holds (no parameter has this name)
            kws["*"] = ["t", starred]
        return ["c", f, args, kws, node.lineno]  # type: ignore[attr-defined]
    if kind is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
        if isinstance(value, str) and len(value) > 80:
            return None
        return ["k", value] if value is None or isinstance(value, (bool, int, float, str)) else None
    if kind is ast.UnaryOp and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):  # type: ignore[attr-defined]
        value = node.operand.value  # type: ignore[attr-defined]
        return ["k", -value] if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if kind is ast.Subscript:
        base = _expr(node.value, depth + 1)  # type: ignore[attr-defined]
        if base is None:
            return None
        key = node.slice  # type: ignore[attr-defined]
        if key.__class__ is ast.Constant and isinstance(key.value, (str, int)) and not isinstance(key.value, bool):
            return ["s", base, key.value]  # a literal key: config lookups follow it
        return ["s", base]
    if kind in (ast.Tuple, ast.List, ast.Set):
        every = [_expr(e, depth + 1) for e in node.elts]  # type: ignore[attr-defined]
        elts = [e for e in every if e is not None]
        if not elts:
            return None
        # a literal sequence whose elements keep their positions (`[train_loader, val_loader]`)
        return ["t", elts, 1] if len(elts) == len(every) and kind is not ast.Set else ["t", elts]
    if kind is ast.IfExp:
        parts = [p for p in (_expr(node.body, depth + 1), _expr(node.orelse, depth + 1)) if p is not None]  # type: ignore[attr-defined]
        return ["t", parts] if parts else None
    if kind is ast.BoolOp:
        parts = [p for p in (_expr(v, depth + 1) for v in node.values) if p is not None]  # type: ignore[attr-defined]
        return ["t", parts] if parts else None
    if kind in (ast.ListComp, ast.GeneratorExp, ast.SetComp):
        return _expr(node.elt, depth + 1)  # type: ignore[attr-defined]
    if kind is ast.DictComp:
        return _expr(node.value, depth + 1)  # type: ignore[attr-defined]
    if kind is ast.Dict:
        vals = [_expr(v, depth + 1) for v in node.values]  # type: ignore[attr-defined]
        vals = [v for v in vals if v is not None]
        return ["t", vals] if vals else None
    if kind is ast.Starred:
        return _expr(node.value, depth + 1)  # type: ignore[attr-defined]
    if kind is ast.NamedExpr:
        return _expr(node.value, depth + 1)  # type: ignore[attr-defined]
    return None


def _generates_init(node: ast.ClassDef) -> bool:
    """`@dataclass` / `@dataclasses.dataclass(...)`, or a `typing.NamedTuple` subclass: a class
    whose `__init__` takes its annotated fields."""
    for d in node.decorator_list:
        name = _callee_text(_expr(d.func if d.__class__ is ast.Call else d))
        if name in ("dataclass", "dataclasses.dataclass"):
            return True
    return any(_callee_tail(b) == "NamedTuple" for b in (_expr(b) for b in node.bases) if b is not None)


def _init_false(value: Optional[ast.AST]) -> bool:
    """`field(init=False)`: not a parameter of the generated `__init__`."""
    return value.__class__ is ast.Call and any(
        k.arg == "init" and k.value.__class__ is ast.Constant and k.value.value is False for k in value.keywords
    )


def _literal(text: str) -> Any:
    """The value of a `repr` of a literal (the summaries' option defaults)."""
    return ast.literal_eval(text)


def _callee_tail(expr: Any) -> str:
    """`DataLoader` for `DataLoader` and `torch.utils.data.DataLoader`: the last name a call's
    function is written with ("" for anything else)."""
    return str(expr[2]) if expr[0] == "a" else str(expr[1]) if expr[0] == "n" else ""


def _callee_text(expr: Any) -> Optional[str]:
    """`Net`, `models.build`: the dotted name a call's function is written as (None otherwise)."""
    if expr is None:
        return None
    if expr[0] == "n":
        return expr[1]
    if expr[0] == "a":
        base = _callee_text(expr[1])
        return f"{base}.{expr[2]}" if base else None
    return None


def label(expr: Any, attribute: bool = False) -> str:
    """How a call reads in a chain: `self.criterion(...)`, `model(...)`; a property read: `self.r`."""

    def name(e: Any) -> Optional[str]:
        if e is None:
            return None
        if e[0] == "n":
            return e[1]
        if e[0] == "a":
            base = name(e[1])
            return f"{base}.{e[2]}" if base else None
        if e[0] == "s":
            base = name(e[1])
            return f"{base}[...]" if base else None
        if e[0] == "c":
            base = name(e[1])
            return f"{base}(...)" if base else None
        return None

    return (name(expr) or "call") + ("" if attribute else "(...)")


#: name -> whether `_INTERVAL_WORDS` finds a word in it (a pure function of the name: the same
#: names are tested in every `if` of a file; the set of names of a run is small).
_INTERVAL_NAMES: Dict[str, bool] = {}


def _says_interval(name: str) -> bool:
    got = _INTERVAL_NAMES.get(name)
    if got is None:
        got = _INTERVAL_NAMES[name] = _INTERVAL_WORDS.search(name) is not None
    return got


def _is_interval_test(nodes: List[ast.AST]) -> bool:
    """`if step % N == 0`, `if i == 0`, `if args.log_every and ...`: a branch taken now and then
    (`nodes`: the test's, from `walk`)."""
    for sub in nodes:
        kind = sub.__class__
        if kind is ast.Name:
            if _says_interval(sub.id):  # type: ignore[attr-defined]
                return True
        elif kind is ast.Attribute:
            if _says_interval(sub.attr):  # type: ignore[attr-defined]
                return True
        elif kind is ast.BinOp:
            if sub.op.__class__ is ast.Mod:  # type: ignore[attr-defined]
                return True
        elif kind is ast.Compare:
            if any(c.__class__ is ast.Constant and c.value == 0 and not isinstance(c.value, bool) for c in [sub.left, *sub.comparators]):  # type: ignore[attr-defined]
                if any(op.__class__ is ast.Eq for op in sub.ops):  # type: ignore[attr-defined]
                    return True
    return False



def _compares_counter(nodes: List[ast.AST], counter: Optional[str]) -> bool:
    """`i == len(loader) - 1`, `i + 1 == n`: the test holds on one value of `counter`
    (`nodes`: the test's, from `walk`)."""
    if counter is None:
        return False
    for sub in nodes:
        if sub.__class__ is ast.Compare and any(op.__class__ is ast.Eq for op in sub.ops):
            for side in (sub.left, *sub.comparators):
                while side.__class__ is ast.BinOp:
                    side = side.left if side.left.__class__ in (ast.Name, ast.BinOp) else side.right
                if side.__class__ is ast.Name and side.id == counter:
                    return True
    return False


def _loop_counter(target: ast.AST, it: ast.AST) -> Optional[str]:
    """The counter a `for` loop binds: `for i in range(n)`, `for i, batch in enumerate(loader)`,
    `for step, batch in pbar`."""
    enumerated = it.__class__ is ast.Call and it.func.__class__ is ast.Name and it.func.id in ("enumerate", "range")
    if target.__class__ is ast.Tuple and target.elts and target.elts[0].__class__ is ast.Name:
        name = target.elts[0].id
    elif target.__class__ is ast.Name:
        name = target.id
    else:
        return None
    return name if enumerated or COUNTER_NAME.search(name) else None


def _always_taken(nodes: List[ast.AST]) -> bool:
    """`if __name__ == "__main__":`, `if torch.cuda.is_available():`: not a user's switch
    (`nodes`: the test's, from `walk`)."""
    return any(
        (n.__class__ is ast.Name and n.id == "__name__") or (n.__class__ is ast.Attribute and n.attr == "is_available")
        for n in nodes
    )


def _training_test(test: ast.AST) -> Optional[bool]:
    """True for `self.training`, False for `not self.training`, else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _training_test(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.Attribute) and test.attr == "training":
        return True
    return None


def _runs_once(loop: ast.AST) -> bool:
    """`for _ in range(1)`: a loop whose body runs once."""
    it = getattr(loop, "iter", None)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and not it.keywords:
        args = it.args
        consts = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
        if len(consts) == len(args) == 1:
            return consts[0] <= 1
        if len(consts) == len(args) == 2:
            return consts[1] - consts[0] <= 1
    return False


def _is_grad_off(expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    d = _dotted(target) or ""
    return says_grad_off(d.rsplit(".", 1)[-1])


class _Summarizer:
    """One walk of a module's `ast`: functions (with the module body as function -1), loops, calls."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions: List[Dict[str, Any]] = []
        self.classes: Dict[str, Dict[str, Any]] = {}
        self.imports: Dict[str, List[Any]] = {}
        self.star: List[List[Any]] = []  # `from m import *`: [module, level]
        self.loop_count = 0
        self.module = self._new_function("<module>", None, [], 0, [])
        self._predicates = interval_predicates(tree)  # `def should_log(i): return i % 10 == 0`
        self._loop_nodes: List[ast.AST] = []
        self._fn_nodes: List[ast.AST] = []
        #: command-line options this module declares: destination -> default(s)
        self.options: Dict[str, List[Any]] = {}
        #: `cfg.DATA.NUM_WORKERS = v` anywhere (an upper-case key of a yacs-style config, its path
        #: after the root name) -> [[line, v]] for a literal v, [[line]] for anything else
        self.config_writes: Dict[str, List[List[Any]]] = {}
        #: calls with arguments, to be told which of them pass Python values (`_host_args`)
        self._pending: List[Tuple[List[Any], ast.Call, Dict[str, Any]]] = []
        #: function summary -> name -> how the function binds it (`_bound`), for `_host_value`
        self._binds: Dict[int, Dict[str, List[Any]]] = {}
        #: `@property` methods of this module's classes: reading `self.<name>` runs them
        self.properties: Set[str] = {
            f.name
            for c in tree.body if isinstance(c, ast.ClassDef)
            for f in c.body if isinstance(f, ast.FunctionDef) and any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list)
        }

    @staticmethod
    def _new_function(q: str, cls: Optional[str], params: List[str], line: int, decorators: List[Any]) -> Dict[str, Any]:
        return {
            "q": q, "cls": cls, "params": params, "line": line, "dec": decorators,
            "calls": [], "loops": [], "assign": {}, "attrs": {}, "returns": [],
            "backward": False, "step": False, "grad_off": False, "eval_call": -1,
        }

    def run(self) -> Dict[str, Any]:
        self._block(self.tree.body, self.module, None, loop=-1, guarded=0, handler=False, grad_off=False)
        # functions and loops are numbered in source order (what LibCST's preorder gives)
        order = sorted(range(len(self.functions)), key=lambda i: source_start(self._fn_nodes[i]))
        rank = {old: new for new, old in enumerate(order)}
        self.functions = [self.functions[i] for i in order]
        loop_order = sorted(range(len(self._loop_nodes)), key=lambda i: source_start(self._loop_nodes[i]))
        loop_rank = {old: new for new, old in enumerate(loop_order)}
        for fn in [self.module, *self.functions]:
            for lp in fn["loops"]:
                lp["g"] = loop_rank[lp["g"]]
        for c in self.classes.values():
            c["methods"] = {k: rank[v] for k, v in c["methods"].items()}
        self._drop_foreign_calls()
        self._host_args()
        return {
            "format": SUMMARY_FORMAT, "module": self.module, "functions": self.functions, "options": self.options,
            "classes": self.classes, "imports": self.imports, "star": self.star, "config_writes": self.config_writes,
        }

    def _drop_foreign_calls(self) -> None:
        """Calls that can never run project code (a builtin the module does not rebind, a tensor
        method, a plain-string method) are dropped: most calls of real code, half a summary."""
        bound = set(self.imports) | set(self.module["assign"]) | {f["q"] for f in self.functions} | set(self.classes)
        builtins = _BUILTIN_CALLS - bound
        for fn in [self.module, *self.functions]:
            local = set(fn["assign"]) | set(fn["params"])
            kept = []
            for call in fn["calls"]:
                target = call[C_FUNC]
                if target[0] == "n" and target[1] in builtins and target[1] not in local:
                    continue
                if target[0] == "a" and target[2] in _TENSOR_METHODS and call[C_KWS].get("collate_fn") is None:
                    continue
                kept.append(call)
            fn["calls"] = kept

    # statements ------------------------------------------------------------------------------
    # A statement is visited with where it is: `fn` (the summary of the function it is in), `cls`
    # (the class whose body it is in, if any), `loop` (the innermost loop's index in
    # `fn["loops"]`, -1: none), `guarded` (the call-site flags of the branches around it),
    # `handler` (in an exception handler), `grad_off` (under no_grad). `_VISIT` picks the visitor
    # by the statement's class.
    def _block(self, body: Sequence[ast.stmt], fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        visit = self._VISIT
        for stmt in body:
            visit.get(stmt.__class__, _Summarizer._other)(self, stmt, fn, cls, loop, guarded, handler, grad_off)
            if stmt.__class__ is ast.If and skips_rest(stmt, self._predicates):
                guarded |= GUARDED  # after `if step % N != 0: continue`

    def _def(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        self._bound_name(fn, node.name)
        self._function(node, fn, cls)

    def _classdef(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        self._bound_name(fn, node.name)
        self._class(node, fn)

    def _imports(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        for alias in node.names:
            self._bound_name(fn, (alias.asname or alias.name).split(".")[0])
        self._import(node)  # (imports inside functions bind the same names, for our purpose)

    def _loop(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        if guarded & ONE_ITERATION:  # a whole loop run on one iteration of the enclosing one
            guarded = (guarded & ~ONE_ITERATION) | GUARDED
        index = len(fn["loops"])
        self._loop_nodes.append(node)
        lp = {"line": node.lineno, "parent": loop, "g": len(self._loop_nodes) - 1, "grad_off": grad_off, "guarded": guarded, "iter": None}
        if _runs_once(node):
            lp["once"] = True  # `for epoch in range(1)`: not an epoch loop
        fn["loops"].append(lp)
        if node.__class__ is ast.While:
            self._exprs(node.test, fn, index, guarded, handler, grad_off)
        else:
            it = node.iter
            target = node.target
            lp["iter"] = _expr(it)
            self._exprs(it, fn, loop, guarded, handler, grad_off)
            lp["targets"] = [n.id for n in walk(target) if n.__class__ is ast.Name]
            counter = _loop_counter(target, it)
            if counter is not None:
                lp["counter"] = counter
            if target.__class__ is ast.Tuple and target.elts and target.elts[0].__class__ is ast.Name and it.__class__ is ast.Call and it.func.__class__ is ast.Name and it.func.id == "enumerate":
                self._bound(fn, target.elts[0], ("int", it))  # `for i, batch in enumerate(loader)`
                for elt in target.elts[1:]:
                    self._bound(fn, elt, None)
            else:
                self._bound(fn, target, ("for", it))
            if it.__class__ is ast.Call and it.func.__class__ is ast.Name and it.func.id == "range" and target.__class__ is ast.Name:
                fn["assign"].setdefault(target.id, []).append(["k", INT])  # a loop counter
            else:
                self._bind(target, ["e", lp["iter"]] if lp["iter"] is not None else None, fn)
        self._block(node.body, fn, cls, index, guarded, handler, grad_off)
        self._block(node.orelse, fn, cls, loop, guarded, handler, grad_off)

    def _if(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        test = node.test
        self._exprs(test, fn, loop, guarded, handler, grad_off)
        mode = _training_test(test)
        if mode is not None:  # `if self.training:` / `if not self.training:`
            body_flag, else_flag = (TRAIN_ONLY, EVAL_ONLY) if mode else (EVAL_ONLY, TRAIN_ONLY)
            self._block(node.body, fn, cls, loop, guarded | body_flag, handler, grad_off)
            self._block(node.orelse, fn, cls, loop, guarded | else_flag, handler, grad_off)
            return
        # `if step % N == 0:` runs its body now and then; its `else` runs nearly every time
        nodes = walk(test)
        found = branches(test, self._predicates)  # `!= 0` / `% N` / a predicate helper: summary_guards
        g = guarded | (GUARDED if (found[0] if found is not None else _is_interval_test(nodes)) else 0)
        if loop >= 0 and _compares_counter(nodes, fn["loops"][loop].get("counter")):
            g |= ONE_ITERATION
        optional = 0 if _always_taken(nodes) else CONDITIONAL
        self._block(node.body, fn, cls, loop, g | optional, handler, grad_off)
        self._block(node.orelse, fn, cls, loop, guarded | optional | (GUARDED if found is not None and found[1] else 0), handler, grad_off)

    def _with(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        off = grad_off
        for item in node.items:
            before = len(fn["calls"])
            self._exprs(item.context_expr, fn, loop, guarded, handler, grad_off)
            if item.context_expr.__class__ is ast.Call:  # its `__enter__` / `__exit__` run here
                head = _expr(item.context_expr.func)
                for record in fn["calls"][before:]:
                    if record[C_LINE] == item.context_expr.lineno and record[C_FUNC] == head:
                        record[C_FLAGS] |= WITH_ITEM
                        break
            if _is_grad_off(item.context_expr):
                off = True
            if item.optional_vars is not None:
                self._bind(item.optional_vars, _expr(item.context_expr), fn)
                self._bound(fn, item.optional_vars, None)
        self._block(node.body, fn, cls, loop, guarded, handler, off)

    def _try(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        self._block(node.body, fn, cls, loop, guarded, handler, grad_off)
        for h in node.handlers:
            if h.name:
                self._bound_name(fn, h.name)
            self._block(h.body, fn, cls, loop, guarded, True, grad_off)
        self._block(node.orelse, fn, cls, loop, guarded, handler, grad_off)
        self._block(node.finalbody, fn, cls, loop, guarded, handler, grad_off)

    def _assign(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        value = _expr(node.value)
        self._exprs(node.value, fn, loop, guarded, handler, grad_off)
        for t in node.targets:
            self._bind(t, value, fn)
            self._bound(fn, t, ("=", node.value))
            if t.__class__ is ast.Attribute and t.attr.isupper():
                self._config_write(t, node)

    def _config_write(self, target: ast.Attribute, node: ast.Assign) -> None:
        """`_C.DATA.NUM_WORKERS = 8` (a yacs-style config's default), `config.DATA.NUM_WORKERS = 0`
        (set again in code): the key's path after the root name, and the value when it is a literal."""
        path = _dotted(target)
        if path is None or "." not in path:
            return
        value = node.value
        entry = [node.lineno, value.value] if value.__class__ is ast.Constant and isinstance(value.value, (bool, int, float, str)) else [node.lineno]
        if value.__class__ is ast.Call and _dotted(value.func) in ("CN", "CfgNode", "yacs.config.CfgNode"):
            return  # a node of the config: `_C.DATA = CN()`
        self.config_writes.setdefault(path.split(".", 1)[1], []).append(entry)

    def _update(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        """`x: T = v`, `x += v`."""
        if node.value is not None:
            self._bound(fn, node.target, ("=", node.value))  # (`x += v`: x's other bindings count too)
            self._exprs(node.value, fn, loop, guarded, handler, grad_off)
            if node.__class__ is ast.AnnAssign:
                self._bind(node.target, _expr(node.value), fn)
            elif isinstance(node.op, ast.Add) and isinstance(node.value, (ast.List, ast.Tuple)):
                self._bind(node.target, _expr(node.value), fn)  # `self.layers += [Block()]`

    def _return(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        if node.value is not None:
            self._exprs(node.value, fn, loop, guarded, handler, grad_off)
            value = _expr(node.value)
            if value is not None:
                fn["returns"].append(value)

    def _match(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:  # pragma: no cover - rare in training code
        self._exprs(node.subject, fn, loop, guarded, handler, grad_off)
        for case in node.cases:
            for sub in walk(case.pattern):
                if getattr(sub, "name", None):  # `case Point(x=x) as p`, `case [*rest]`
                    self._bound_name(fn, sub.name)  # type: ignore[attr-defined]
            self._block(case.body, fn, cls, loop, guarded | GUARDED, handler, grad_off)

    def _names(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        """`global x`, `nonlocal x`."""
        for name in node.names:
            self._bound_name(fn, name)

    def _expression(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        self._exprs(node.value, fn, loop, guarded, handler, grad_off)

    def _other(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        """`del`, `raise`, `assert`, ...: the calls in their expressions."""
        if node.__class__ is ast.Delete:
            for t in node.targets:
                self._bound(fn, t, None)
        for field in node._fields:
            value = getattr(node, field, None)
            for child in value if value.__class__ is list else (value,):
                if isinstance(child, ast.stmt):
                    self._block((child,), fn, cls, loop, guarded, handler, grad_off)
                elif isinstance(child, ast.expr):
                    self._exprs(child, fn, loop, guarded, handler, grad_off)

    _VISIT = {
        ast.FunctionDef: _def, ast.AsyncFunctionDef: _def, ast.ClassDef: _classdef, ast.Import: _imports, ast.ImportFrom: _imports,
        ast.For: _loop, ast.AsyncFor: _loop, ast.While: _loop, ast.If: _if, ast.With: _with, ast.AsyncWith: _with,
        ast.Try: _try, getattr(ast, "TryStar", ast.Try): _try, ast.Assign: _assign, ast.AnnAssign: _update, ast.AugAssign: _update,
        ast.Return: _return, ast.Global: _names, ast.Nonlocal: _names, ast.Expr: _expression,
    }
    if hasattr(ast, "Match"):  # Python 3.10+
        _VISIT[ast.Match] = _match

    def _bind(self, target: ast.AST, value: Any, fn: Dict[str, Any]) -> None:
        if value is None:
            return
        if isinstance(target, ast.Name):
            fn["assign"].setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):
                    elt = elt.value
                self._bind(elt, ["i", value, i], fn)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and fn["params"] and target.value.id == fn["params"][0] and fn["cls"]:
            fn["attrs"].setdefault(target.attr, []).append(value)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute):
            inner = target.value
            if isinstance(inner.value, ast.Name) and fn["params"] and inner.value.id == fn["params"][0] and fn["cls"]:
                fn["attrs"].setdefault(inner.attr, []).append(value)  # self.layers[k] = Block()
        elif (
            isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and value[0] == "c"
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)
        ):
            # `data["train"] = get_dataset(...)`: the dict holds what the call gives (as `{"train": ...}` would)
            fn["assign"].setdefault(target.value.id, []).append(value)

    def _exprs(self, node: ast.AST, fn: Dict[str, Any], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        """Calls inside an expression (lambdas are not followed: they run when called), depth
        first, the last child first. The branches of a conditional expression and the operands
        that `and`/`or` may skip get more flags: an int on the stack says the flags of the nodes
        taken after it (until the next one)."""
        todo: List[Any] = [node]
        pop, push = todo.pop, todo.append
        g = guarded
        properties = self.properties if fn["cls"] and fn["params"] else ()
        while todo:
            sub = pop()
            kind = sub.__class__
            if kind is int:
                g = sub
                continue
            if kind is ast.Call:
                self._call(sub, fn, loop, g, handler, grad_off)
                if sub.func.__class__ not in _INERT:
                    push(sub.func)
                for child in sub.args:
                    if child.__class__ not in _INERT:
                        push(child)
                for keyword in sub.keywords:
                    if keyword.value.__class__ not in _INERT:
                        push(keyword.value)  # (what a keyword node would push)
                continue
            elif kind is ast.Attribute:
                if sub.attr in properties:
                    base = sub.value
                    if base.__class__ is ast.Name and base.id == fn["params"][0] and sub.ctx.__class__ is ast.Load:
                        # reading a property runs its getter: a call with no arguments
                        flags = g | (HANDLER if handler else 0) | (GRAD_OFF if grad_off else 0) | PROPERTY
                        fn["calls"].append([sub.lineno, ["a", ["n", base.id], sub.attr], [], {}, loop, flags])
            elif kind is ast.IfExp:  # the else, the body (flagged after an interval test), the test
                push(sub.test)
                push(g)
                push(sub.body)
                found = branches(sub.test, self._predicates)
                push(g | (GUARDED if (found[0] if found is not None else _is_interval_test(walk(sub.test))) else 0))
                push(sub.orelse)
                push(g | (GUARDED if found is not None and found[1] else 0))  # (the else of `x if i % N else y`)
                continue
            elif kind is ast.BoolOp:  # the other operands (short-circuited: may not run), the first
                values = sub.values
                push(values[0])
                push(g)
                todo += values[1:]
                push(g | GUARDED)
                continue
            elif kind is ast.NamedExpr:
                self._bound(fn, sub.target, None)
            elif kind in _COMPREHENSIONS:  # (their own scope: a call in one sees its variables)
                for gen in sub.generators:
                    self._bound(fn, gen.target, None)
            for field in _EXPR_FIELDS[kind]:
                value = getattr(sub, field)
                if value.__class__ is list:
                    for child in value:
                        if child.__class__ not in _INERT:
                            push(child)
                elif value.__class__ not in _INERT:
                    push(value)

    def _call(self, node: ast.Call, fn: Dict[str, Any], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        func = node.func
        if func.__class__ is ast.Attribute and func.attr in _NOTED_METHODS:
            name = func.attr
            if name in ("backward", "manual_backward"):  # (`torch.autograd.backward(loss)` too)
                fn["backward"] = True
                if loop >= 0:
                    fn["loops"][loop].setdefault("direct", []).append("b")
            elif name in ("step", "optimizer_step"):
                receiver = _dotted(func.value) or ""
                if not SCHEDULER_HINT.search(receiver.rsplit(".", 1)[-1]) and not re.search(r"env", receiver, re.I):
                    fn["step"] = True
                    if loop >= 0:
                        fn["loops"][loop].setdefault("direct", []).append("s")
            elif name == "add_argument":
                self._option(node)
            elif name in ("append", "extend", "insert", "add_module") and node.args and isinstance(func.value, (ast.Name, ast.Attribute)):
                # `self.layers.append(Block())`, `blocks.extend([...])`: the container holds them
                self._bind(func.value, _expr(node.args[-1]), fn)
            elif name == "eval" and not node.args and fn["eval_call"] < 0:
                fn["eval_call"] = node.lineno
            elif name in ("cuda", "to") and loop >= 0 and (name == "cuda" or self._may_move_to_device(node, fn)):
                root = func.value
                while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                    root = root.func if isinstance(root, ast.Call) else root.value
                if isinstance(root, ast.Name):
                    fn["loops"][loop].setdefault("moved", []).append(root.id)
        elif func.__class__ is ast.Name and func.id == "__import__":
            return
        target = _expr(func)
        if target is None:
            return
        if func.__class__ is ast.Name and func.id == "isinstance" or func.__class__ is ast.Attribute and func.attr == "is_tensor":
            self._note_type_test(node, fn)
        args = [_expr(a) for a in node.args if a.__class__ is not ast.Starred] if node.args else []
        kws = {}
        if node.keywords:
            kws = {k.arg: _expr(k.value) for k in node.keywords if k.arg}
        if len(args) < len(node.args):
            kws["*"] = SPLAT
        if node.keywords and any(k.arg is None for k in node.keywords):
            kws["**"] = SPLAT
        flags = guarded | (HANDLER if handler else 0) | (GRAD_OFF if grad_off else 0)
        record = [node.lineno, target, args, kws, loop, flags]
        fn["calls"].append(record)
        if node.args or node.keywords:
            self._pending.append((record, node, fn))

    @staticmethod
    def _note_type_test(node: ast.Call, fn: Dict[str, Any]) -> None:
        """`isinstance(v, torch.Tensor)`, `torch.is_tensor(v)`: the names a function tests for
        being a tensor (the program tells it when no hot call site passes one: `host_parameters`)."""
        if not node.args or not isinstance(node.args[0], ast.Name):
            return
        if len(node.args) > 1 and not any(
            (isinstance(t, ast.Attribute) and t.attr == "Tensor") or (isinstance(t, ast.Name) and t.id == "Tensor")
            for t in walk(node.args[1])
        ):
            return
        typed = fn.setdefault("typed", [])
        if node.args[0].id not in typed:
            typed.append(node.args[0].id)

    # which arguments are Python values ----------------------------------------------------------
    def _host_args(self) -> None:
        """Mark, on every call kept, the arguments that are Python values in the caller (`C_HOST`:
        positions in the positional arguments, keyword names): a number or string, `x.item()`,
        `float(...)` / `int(...)` / `len(...)` ..., `min`/`max` of such values, an optimizer's
        hyperparameter (`optimizer.param_groups[0]["lr"]`), arithmetic on them, a name every
        binding of which in the caller is one of these. A name bound in any other way (a
        parameter, a tuple target, `with ... as`) is not a Python value here."""
        kept = {id(c) for f in (self.module, *self.functions) for c in f["calls"]}
        for record, node, fn in self._pending:
            if id(record) not in kept:
                continue
            names = self._binds.get(id(fn), {})
            host: List[Any] = []
            position = 0
            for a in node.args:
                if a.__class__ is not ast.Starred:
                    if self._host_value(a, names, ()):
                        host.append(position)
                    position += 1
            for k in node.keywords:
                if k.arg and self._host_value(k.value, names, ()):
                    host.append(k.arg)
            if host:
                record.append(host)
        self._pending = []

    def _host_value(self, node: ast.AST, names: Dict[str, List[Any]], seen: Tuple[str, ...]) -> bool:
        kind = node.__class__
        if kind is ast.Constant:
            return node.value is None or isinstance(node.value, (bool, int, float, complex, str))  # type: ignore[attr-defined]
        if kind is ast.UnaryOp:
            return self._host_value(node.operand, names, seen)  # type: ignore[attr-defined]
        if kind is ast.BinOp:
            return self._host_value(node.left, names, seen) and self._host_value(node.right, names, seen)  # type: ignore[attr-defined]
        if kind is ast.Call:
            func = node.func  # type: ignore[attr-defined]
            if isinstance(func, ast.Attribute):
                return func.attr in ("item", "tolist") and not node.args and not node.keywords  # type: ignore[attr-defined]
            if not isinstance(func, ast.Name) or func.id in self.imports or func.id in names or func.id in self._binds.get(id(self.module), ()):
                return False  # (a builtin only where nothing rebinds its name)
            if func.id in _HOST_BUILTINS:
                return True
            args = node.args  # type: ignore[attr-defined]
            return func.id in _HOST_REDUCERS and bool(args) and all(
                not isinstance(a, ast.Starred) and self._host_value(a, names, seen) for a in args
            )
        if kind is ast.Subscript:
            key = node.slice  # type: ignore[attr-defined]
            return isinstance(key, ast.Constant) and isinstance(key.value, str) and self._param_group(node.value, names)  # type: ignore[attr-defined]
        if kind is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            if name in seen:
                return True  # `max_lr = max(max_lr, ...)`: whatever its other bindings give
            binds = names.get(name)
            return bool(binds) and all(
                b is not None and (self._host_value(b[1], names, seen + (name,)) if b[0] == "=" else b[0] == "int" or _is_range(b[1]))
                for b in cast("List[Any]", binds)  # (not None: `bool(binds)` is true)
            )
        return False

    def _param_group(self, node: ast.AST, names: Dict[str, List[Any]]) -> bool:
        """A parameter group of an optimizer (a dict of Python hyperparameters): an element of
        `x.param_groups`, or a loop variable over them."""
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Attribute) and node.value.attr == "param_groups"
        if isinstance(node, ast.Name):
            binds = names.get(node.id)
            return bool(binds) and all(
                b is not None and b[0] == "for" and isinstance(b[1], ast.Attribute) and b[1].attr == "param_groups"
                for b in cast("List[Any]", binds)  # (not None: `bool(binds)` is true)
            )
        return False

    def _bound(self, fn: Dict[str, Any], target: ast.AST, how: Any) -> None:
        """Note that `fn` binds the names of `target`: `how` (("=", value) for `x = value`,
        `x += value`; ("for", iterable) for `for x in iterable`; ("int", ...) for the counter of
        `enumerate`) for a plain name, None (some value not followed) for the names of a tuple
        target or any other binding."""
        if target.__class__ is ast.Name:
            self._binds.setdefault(id(fn), {}).setdefault(target.id, []).append(how)
        elif target.__class__ in (ast.Tuple, ast.List, ast.Starred):
            for sub in walk(target):
                if sub.__class__ is ast.Name:
                    self._bound_name(fn, sub.id)

    def _bound_name(self, fn: Dict[str, Any], name: str) -> None:
        self._binds.setdefault(id(fn), {}).setdefault(name, []).append(None)

    def _option(self, call: ast.Call) -> None:
        """`parser.add_argument("--use-amp", action="store_true")`: the option's default, by its
        destination name (only literal defaults; `store_true` is False)."""
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kws = {k.arg: k.value for k in call.keywords if k.arg}
        dest_node = kws.get("dest")
        if isinstance(dest_node, ast.Constant) and isinstance(dest_node.value, str):
            dest = dest_node.value
        else:
            longs = [f for f in flags if f.startswith("--")]
            name = longs[0] if longs else (flags[0] if flags else "")
            dest = name.lstrip("-").replace("-", "_")
        if not dest.isidentifier():
            return
        action_node = kws.get("action")
        action = action_node.value if isinstance(action_node, ast.Constant) else None
        default = kws.get("default")
        if isinstance(default, ast.Constant) and isinstance(default.value, (bool, int, float, str)) and not (isinstance(default.value, str) and len(default.value) > 80):
            value: Any = default.value
        elif default is None and action in ("store_true", "store_false"):
            value = action == "store_false"
        elif default is None and action is None:
            value = None  # no default: None
        else:
            return
        self.options.setdefault(dest, []).append(value)

    @staticmethod
    def _may_move_to_device(call: ast.Call, fn: Dict[str, Any]) -> bool:
        """`x.to(...)` that may move to an accelerator: not a dtype cast (`.to(torch.float16)`,
        `.to(dtype=...)`), not to the CPU (`"cpu"`, or a local name only ever set to it)."""
        target = next((k.value for k in call.keywords if k.arg == "device"), call.args[0] if call.args else None)
        if target is None:
            return False  # `.to(dtype=...)`, `.to(memory_format=...)`
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "torch":
            return target.attr not in _DTYPE_NAMES
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            return target.value.split(":")[0] != "cpu"
        if isinstance(target, ast.Name):
            values = fn["assign"].get(target.id)
            if values and all(v and v[0] == "k" and isinstance(v[1], str) and v[1] == "cpu" for v in values):
                return False
        return True

    def _function(self, node: Union[ast.FunctionDef, ast.AsyncFunctionDef], outer: Dict[str, Any], cls: Optional[str]) -> None:
        q = node.name
        if cls is not None:
            q = f"{cls}.{node.name}"
        elif outer is not self.module:
            q = f"{outer['q']}.{node.name}"
        a = node.args
        params = [p.arg for p in (*a.posonlyargs, *a.args)]
        if a.vararg:
            params.append("*" + a.vararg.arg)
        params += [p.arg for p in a.kwonlyargs]
        decorators = [_expr(d) for d in node.decorator_list]
        is_static = any(_dotted(d) == "staticmethod" for d in node.decorator_list)
        fn = self._new_function(q, cls if not is_static else None, params, node.lineno, decorators)
        for p in (*a.posonlyargs, *a.args, a.vararg, *a.kwonlyargs, a.kwarg):
            if p is not None:
                self._bound_name(fn, p.arg)
        if a.kwarg:
            fn["varkw"] = a.kwarg.arg  # `**kwargs`
        if a.kwonlyargs:
            fn["npos"] = len(a.posonlyargs) + len(a.args)  # the parameters that take positions
        fn["grad_off"] = any(_is_grad_off(d) for d in node.decorator_list)
        fn["static"] = is_static
        if cls is None and outer is not self.module:
            fn["outer"] = outer["q"]
        index = len(self.functions)
        self.functions.append(fn)
        self._fn_nodes.append(node)
        if cls is not None:
            accessor = any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in node.decorator_list)
            if not (accessor and node.name in self.classes[cls]["methods"]):  # `@x.setter` keeps the getter
                self.classes[cls]["methods"][node.name] = index
        for default in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            self._exprs(default, outer, loop=-1, guarded=0, handler=False, grad_off=False)
        self._block(node.body, fn, None, loop=-1, guarded=0, handler=False, grad_off=fn["grad_off"])

    def _class(self, node: ast.ClassDef, outer: Dict[str, Any]) -> None:
        name = node.name if outer is self.module else f"{outer['q']}.{node.name}"
        self.classes[name] = {"bases": [_expr(b) for b in node.bases], "line": node.lineno, "methods": {}, "fields": {}}
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(stmt, outer, name)
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt, outer)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        value = _expr(stmt.value)
                        if value is not None:
                            self.classes[name]["fields"].setdefault(t.id, []).append(value)
        if "__init__" not in self.classes[name]["methods"] and _generates_init(node):
            # a dataclass or NamedTuple: calling it binds its fields, in order
            self.classes[name]["init"] = [
                s.target.id for s in node.body
                if s.__class__ is ast.AnnAssign and s.target.__class__ is ast.Name and "ClassVar" not in ast.dump(s.annotation)
                and not _init_false(s.value)
            ]

    def _import(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = ["mod", alias.name, 0]
                else:
                    top = alias.name.split(".")[0]
                    self.imports[top] = ["mod", top, 0]
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    self.star.append([node.module or "", node.level])
                    continue
                self.imports[alias.asname or alias.name] = ["from", node.module or "", node.level, alias.name]


def summarize(text: str, tree: Optional[ast.Module] = None, shared: Optional[Dict[Any, Any]] = None) -> Optional[Dict[str, Any]]:
    """The summary of one file's text (None when `ast` cannot parse it); `tree`: its `ast`, when
    already parsed."""
    if tree is None:
        try:
            tree = parse_quietly(text)
        except AST_ERRORS:
            return None
    try:
        summary = _Summarizer(tree).run()
    except RecursionError:
        return None
    if any(w in text for w in _EXISTS) and any(w in text for w in _SAVES):
        _mark_cache_fills(summary, cache_fill_lines(tree))
    summary.update(text_facts(text))  # GPU hints, a conv net, the cuDNN autotuner, fixed shapes
    _data_facts(summary, text, tree)
    summary.update(plugin_facts(tree, text))  # modules loaded by name, `sys.path` folders
    fw = summary_facts(text)  # frameworks: TF32 switched on, accelerate used
    if fw:
        summary["fw"] = fw
    return compact(summary, shared)


def _data_facts(summary: Dict[str, Any], text: str, tree: ast.Module) -> None:
    """Data-loading and config-file facts (`speedlint.analyzer.configs.summary`, `loader_summary`)."""
    configs = config_summary(tree, text)
    if configs:
        summary["configs"] = configs
    summary.update(amp_gate_facts(tree) if "autocast" in text else {})  # opt-in AMP (summary_optin)
    settings = settings_summary(tree, text)  # performance settings set and read (SPD704)
    if settings:
        summary["settings"] = settings
    loaders = loader_summary(tree, text)
    if loaders:
        summary["loaders"] = loaders
        for fn in summary["functions"]:  # generators that yield what they iterate (`log_every`)
            index = loaders.get("yields", {}).get(str(fn["line"]))
            if index is not None:
                fn["yields"] = index
            moves = loaders.get("moves", {}).get(str(fn["line"]))
            if moves:
                fn["moves"] = moves  # parameters it copies to the GPU (`x = x.to(self.device)`)


#: What a batch size is called (`for _ in range(self.batch_size):` runs once per element).
_BATCH_SIZE_NAMES = frozenset({"batch_size", "bsz", "bs"})


def _batch_size_range(expr: Any) -> bool:
    """`range(batch_size)`, `range(self.batch_size)` in a summary's loop iterable."""
    if not expr or expr[0] != "c" or tuple(expr[1] or ()) != ("n", "range") or len(expr[2]) != 1 or expr[3]:
        return False
    text = _callee_text(expr[2][0]) or ""
    return text.rsplit(".", 1)[-1] in _BATCH_SIZE_NAMES


# -- disk caches ----------------------------------------------------------------------------------
#: Tests that a cache file is there: `os.path.exists(f)`, `os.path.isfile(f)`, `Path(f).exists()`.
_EXISTS = frozenset({"exists", "isfile", "is_file"})
#: Calls that write a cache file (`torch.save`, `np.save`, `pickle.dump`, `json.dump` ...).
_SAVES = frozenset({"save", "savez", "savez_compressed", "dump"})


#: Builtins whose result is a Python value whatever they are given; and those that give one when
#: given Python values (`max(max_lr, group["lr"])`).
_HOST_BUILTINS = frozenset({"float", "int", "bool", "len", "str", "repr", "format"})
_HOST_REDUCERS = frozenset({"min", "max", "sum", "abs", "round"})


def _is_range(it: ast.AST) -> bool:
    """`range(...)`: its loop variable is an int."""
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"


_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp})
#: The methods whose calls `_Summarizer._call` notes more about than the call.
_NOTED_METHODS = frozenset({
    "backward", "manual_backward", "step", "optimizer_step", "add_argument", "append", "extend", "insert", "add_module", "eval", "cuda", "to",
})

#: What `_exprs` need not take: no call below it (a lambda's calls run when it is called).
_INERT = frozenset({
    type(None), ast.Name, ast.Constant, ast.Lambda,
    *(k for base in (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop) for k in base.__subclasses__()),
})
#: Fields that hold no node (names, numbers, flags) or no call (operators, contexts).
_NO_CALL_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "kind", "conversion", "is_async", "type_comment"})
#: node class -> the fields `_exprs` looks into; none in a lambda or a constant.
_EXPR_FIELDS = FieldTable(_NO_CALL_FIELDS, {ast.Lambda: (), ast.Constant: ()})


def cache_fill_lines(tree: ast.AST) -> Set[int]:
    """Lines of the calls that run only when a cache file is missing, in the branch that writes
    it: `if os.path.exists(f): x = load(f) else: x = compute(...); save(x, f)` (also `if not
    exists(f): ...`, and `if exists(f): return load(f)` followed by the computation). They run
    once per sample ever, not once per sample per epoch (the cache-to-disk pattern)."""
    found: Set[int] = set()
    for block in _statement_blocks(tree):
        for k, stmt in enumerate(block):
            if not isinstance(stmt, ast.If):
                continue
            test, negated = stmt.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negated = test.operand, True
            if not (isinstance(test, ast.Call) and _last_name(test.func) in _EXISTS):
                continue
            if negated:
                miss: List[ast.stmt] = stmt.body
            elif stmt.orelse:
                miss = stmt.orelse
            elif stmt.body and isinstance(stmt.body[-1], ast.Return):
                miss = block[k + 1:]  # `if exists(f): return load(f)`: the rest computes and saves
            else:
                continue
            calls = [n for m in miss for n in walk(m) if n.__class__ is ast.Call]
            if any(_last_name(c.func) in _SAVES for c in calls):
                found.update(c.lineno for c in calls)
    return found


def _statement_blocks(tree: ast.AST) -> List[List[ast.stmt]]:
    """Every list of statements in a tree: bodies, `else` and `finally` blocks, the bodies of
    exception handlers and `match` cases, nested ones included (what `ast.walk` would find,
    without going into expressions: no statement is in one)."""
    out: List[List[ast.stmt]] = []
    todo: List[Any] = [tree]
    while todo:
        node = todo.pop()
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if block.__class__ is list:
                out.append(block)
                todo += block
        todo += getattr(node, "handlers", ())
        todo += getattr(node, "cases", ())
    return out


def _last_name(func: ast.AST) -> str:
    """`os.path.exists` -> "exists", `Path(f).exists` -> "exists", `save` -> "save"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _mark_cache_fills(summary: Dict[str, Any], lines: Set[int]) -> None:
    if not lines:
        return
    for fn in [summary["module"], *summary["functions"]]:
        for call in fn["calls"]:
            if call[C_LINE] in lines:
                call[C_FLAGS] |= CACHE_FILL

