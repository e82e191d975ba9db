"""The whole program: per-file summaries, a link step, and how hot each function is.

Real training projects split the step across modules (the loop in `train.py`, the cost in
`losses/`, `models/`, `data/`, `utils/`). This module follows the step wherever it goes:

1. **Summaries** (`summarize`): per file, from the stdlib `ast` (fast, cacheable by content
   hash): imports, classes and their bases, functions in source order with their parameters,
   their calls in a symbolic form (`self.criterion(...)`, `model(x)`, `Cls(...)`), loops, what
   they bind to names and `self` attributes, what they return, and whether they call
   `backward()` / an optimizer step directly. Tuples and dicts of JSON values (they go to the
   cache as JSON), made compact (`compact`): equal sub-expressions shared, names interned.
2. **Link** (`Program`): module names from the layout (packages, `src/`, a script's siblings),
   imports and re-exports resolved to project modules, classes with bases across files, and a
   flow-insensitive type inference of the values that matter for calls (instances of project
   classes, project functions, modules) through assignments, `self` attributes, parameters (from
   every call site) and return values. Calls resolve through them: `obj(...)` runs `forward` (or
   `__call__`), `obj.meth()` the method found along the bases, `Cls(...)` its `__init__`.
3. **Hotness**: roots are training-step loops (a loop that reaches `backward()` and an optimizer
   step through anything it calls), epoch loops around them (not a loop that runs a whole
   training run, i.e. a function with its own epoch loop: that loop goes over runs, and the
   run's code outside its loops is cold), evaluation loops and per-sample
   entry points (`__getitem__`, an `IterableDataset`'s `__iter__`, `collate_fn`s). Hotness flows
   along the call graph from the roots through calls that run every time (not behind
   `if step % N == 0`, not in an exception handler), keeping the shortest chain of call sites
   that explains it. Whatever cold code alone reaches stays cold.

Unresolvable calls, star imports, `importlib` and recursion end quietly: no guess.

`FileSeeds` is what a file's rules get from all this: which of its functions are hot, how, and
why (the chain), which of its loops are training steps because of a callee in another module,
and whether the code that makes it hot may run on a GPU.
"""

from __future__ import annotations

import ast
import itertools
import os
import re
import sys
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from speedlint.analyzer.configs.summary import dotted_name as _dotted
from speedlint.analyzer.configs.summary import walk
from speedlint.analyzer.textscan import may_use_gpu, says_grad_off
from speedlint.analyzer.records import RECORD_CALLS, record_field, record_type

#: The summary format (bump when `summarize` changes what it records).
SUMMARY_FORMAT = 11

#: In `passed_constants`: a call site that does not pass the parameter (its default applies).
DEFAULT = "\x00default"

#: A value known to be some Python int (a `range` loop counter), not a tensor.
INT = "\x00int"

#: In a call's keyword arguments, under the keys "*" and "**": the call unpacks a sequence
#: (`f(*xs)`) or a mapping (`f(**d)`) whose contents are not followed.
SPLAT = ("k", "\x00splat")

#: Hotness kinds, hottest first.
STEP, SAMPLE, EVAL, EPOCH = "step", "sample", "eval", "epoch"
KINDS = (STEP, SAMPLE, EVAL, EPOCH)

EVAL_NAME = re.compile(
    r"(^|_)(eval|evaluate|evaluation|valid|validate|validation|val|test|testing|predict|prediction|infer|inference)(_|$)|^(eval|valid|test|predict|infer)",
    re.I,
)
SCHEDULER_HINT = re.compile(r"sched|(^|_)lr(_|$)|warmup", re.I)
#: Names in an `if` test that say the branch runs now and then, not every time.
#: A value that changes every step: a loop counter, a step count (`i`, `step`, `batch_idx`).
COUNTER_NAME = re.compile(
    r"(^|_)(step|steps|it|iter|iters|iteration|iterations|idx|index|i|j|n|batch_idx|batch_i|batch_num|"
    r"batch_nb|batch_id|nb|count|counter|cnt|epoch|tick)$",
    re.I,
)
_INTERVAL_WORDS = re.compile(r"log|interval|every|freq|period|print|verbose|debug|display|save|ckpt|checkpoint|vis|summary|report|plot|sample_|dump", re.I)
#: Containers whose calls give back what they hold (`nn.ModuleList([Block(), ...])`).
_CONTAINERS = frozenset({"ModuleList", "Sequential", "ModuleDict", "ParameterList", "list", "tuple", "dict", "set", "sorted", "reversed", "iter", "enumerate", "zip", "tqdm", "cycle", "chain"})
_NOTHING: FrozenSet[str] = frozenset()  # the type of most names and attributes of a big program
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
#: Text that says a module builds convolutions (SPD701's "conv net"), and that it switches the
#: cuDNN autotuner (to anything: the explicit settings are judged where they are written).
_CONV_TEXT = re.compile(r"\b(Conv[123]d|ConvTranspose[123]d|LazyConv[123]d|conv[123]d|torchvision\.models|timm\.create_model|segmentation_models_pytorch)\b")
#: Substrings one of which every match of `_CONV_TEXT` holds (a `\b` pattern scans slowly: most
#: files have none; many say "convert").
_CONV_HINTS = ("onv1d", "onv2d", "onv3d", "onvTranspose", "torchvision.models", "timm.create_model", "segmentation_models_pytorch")
#: Evidence of fixed input shapes (where the autotuner pays off): resize/crop transforms, the
#: standard fixed-size image datasets.
_FIXED_SHAPES = re.compile(r"\b(Resize|RandomResizedCrop|RandomCrop|CenterCrop)\(|\b(CIFAR10|CIFAR100|MNIST|FashionMNIST|ImageFolder)\b")
_FIXED_SHAPE_HINTS = ("Resize(", "Crop(", "CIFAR10", "MNIST", "ImageFolder")  # (one is in every match)
_BENCHMARK_ON = re.compile(r"cudnn\.benchmark\s*=(?!=)")

#: `torch.<name>` dtypes (a `.to()` with one of these casts, it does not move).
_DTYPE_NAMES = frozenset({
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "uint8", "int16", "short",
    "int32", "int", "int64", "long", "bool", "complex64", "complex128", "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
})
#: Base classes (last dotted part) that make a class a torch module.
_MODULE_BASES = frozenset({"Module", "Sequential", "ModuleList", "ModuleDict", "LightningModule", "MessagePassing"})
#: `nn.Module` methods that return the module itself.
_RETURNS_SELF = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16", "type", "requires_grad_", "share_memory", "apply", "to_empty"})
#: Loader classes: torch's, and the loaders built on it (torch_geometric, DGL, MONAI, webdataset).
LOADER_NAMES = frozenset({
    "DataLoader", "DataListLoader", "DenseDataLoader", "NeighborLoader", "NeighborSampler", "ClusterLoader",
    "GraphSAINTRandomWalkSampler", "GraphSAINTNodeSampler", "GraphSAINTEdgeSampler", "LinkNeighborLoader", "GraphDataLoader",
    "WebLoader",
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
            attrs.append(node.attr)  # type: ignore[attr-defined]
            node = node.value  # type: ignore[attr-defined]
            depth += 1
            kind = node.__class__
        base = ["n", node.id] if kind is ast.Name and depth <= 12 else _expr(node, depth)  # type: ignore[attr-defined]
        if base is None:
            return None
        for attr in reversed(attrs):
            base = ["a", base, attr]
        return base
    if kind is ast.Call:
        func = node.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Name) and func.id == "super":
            return ["super"]
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
        name = _callee_text(_expr(d.func if d.__class__ is ast.Call else d))  # type: ignore[attr-defined]
        if name in ("dataclass", "dataclasses.dataclass"):
            return True
    return any(_callee_tail(b) == "NamedTuple" for b in (_expr(b) for b in node.bases) if b is not None)


def _init_false(value: Optional[ast.AST]) -> bool:
    """`field(init=False)`: not a parameter of the generated `__init__`."""
    return value.__class__ is ast.Call and any(
        k.arg == "init" and k.value.__class__ is ast.Constant and k.value.value is False for k in value.keywords  # type: ignore[attr-defined]
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


def _is_interval_test(nodes: List[ast.AST]) -> bool:
    """`if step % N == 0`, `if i == 0`, `if args.log_every and ...`: a branch taken now and then
    (`nodes`: the test's, from `walk`)."""
    for sub in nodes:
        kind = sub.__class__
        if kind is ast.Name:
            if _INTERVAL_WORDS.search(sub.id):  # type: ignore[attr-defined]
                return True
        elif kind is ast.Attribute:
            if _INTERVAL_WORDS.search(sub.attr):  # type: ignore[attr-defined]
                return True
        elif kind is ast.BinOp:
            if sub.op.__class__ is ast.Mod:  # type: ignore[attr-defined]
                return True
        elif kind is ast.Compare:
            if any(c.__class__ is ast.Constant and c.value == 0 and not isinstance(c.value, bool) for c in [sub.left, *sub.comparators]):  # type: ignore[attr-defined]
                if any(op.__class__ is ast.Eq for op in sub.ops):  # type: ignore[attr-defined]
                    return True
    return False


#: `Program._forwarded_elements`: a callee's returned positions are not known yet.
_NOT_YET = object()

#: A call that may run more functions than this, or a value that may be more things than this,
#: is not followed further: that is a guess, not an analysis.
MAX_TARGETS, MAX_TYPES = 4, 8

#: A call in a summary: [line, callee expression, positional args, keyword args, loop index, flags]
#: and, when some are, the arguments known to be Python values in the caller (`_host_args`).
C_LINE, C_FUNC, C_ARGS, C_KWS, C_LOOP, C_FLAGS, C_HOST = range(7)

#: Call-site flags: behind an interval guard, in an exception handler, under no_grad, only when
#: training (`if self.training:`), only when evaluating (its `else`).
GUARDED, HANDLER, GRAD_OFF, TRAIN_ONLY, EVAL_ONLY, CONDITIONAL, PROPERTY = 1, 2, 4, 8, 16, 32, 64
#: Call-site flag (`cache_fill_lines`): the call fills a cache file on a miss; later epochs load it.
CACHE_FILL = 128
#: Call-site flag: the call runs on one iteration of its innermost loop, under a test of that
#: loop's counter for equality (`if i == len(loader) - 1:`). Rare when that loop is the step loop.
ONE_ITERATION = 256
#: Call-site flag: the call is the context expression of a `with` (`with MemoryTrace():`): the
#: object's `__enter__` and `__exit__` run there too.
WITH_ITEM = 512


def _compares_counter(nodes: List[ast.AST], counter: Optional[str]) -> bool:
    """`i == len(loader) - 1`, `i + 1 == n`: the test holds on one value of `counter`
    (`nodes`: the test's, from `walk`)."""
    if counter is None:
        return False
    for sub in nodes:
        if sub.__class__ is ast.Compare and any(op.__class__ is ast.Eq for op in sub.ops):  # type: ignore[attr-defined]
            for side in (sub.left, *sub.comparators):  # type: ignore[attr-defined]
                while side.__class__ is ast.BinOp:
                    side = side.left if side.left.__class__ in (ast.Name, ast.BinOp) else side.right  # type: ignore[attr-defined]
                if side.__class__ is ast.Name and side.id == counter:  # type: ignore[attr-defined]
                    return True
    return False


def _loop_counter(target: ast.AST, it: ast.AST) -> Optional[str]:
    """The counter a `for` loop binds: `for i in range(n)`, `for i, batch in enumerate(loader)`,
    `for step, batch in pbar`."""
    enumerated = it.__class__ is ast.Call and it.func.__class__ is ast.Name and it.func.id in ("enumerate", "range")  # type: ignore[attr-defined]
    if target.__class__ is ast.Tuple and target.elts and target.elts[0].__class__ is ast.Name:  # type: ignore[attr-defined]
        name = target.elts[0].id  # type: ignore[attr-defined]
    elif target.__class__ is ast.Name:
        name = target.id  # type: ignore[attr-defined]
    else:
        return None
    return name if enumerated or COUNTER_NAME.search(name) else None


def _always_taken(nodes: List[ast.AST]) -> bool:
    """`if __name__ == "__main__":`, `if torch.cuda.is_available():`: not a user's switch
    (`nodes`: the test's, from `walk`)."""
    return any(
        (n.__class__ is ast.Name and n.id == "__name__") or (n.__class__ is ast.Attribute and n.attr == "is_available")  # type: ignore[attr-defined]
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


def _start(node: ast.AST) -> Tuple[int, int]:
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        first = decorators[0]
        return (first.lineno, first.col_offset - 1)  # the `@` is one column to the left
    return (node.lineno, node.col_offset)  # type: ignore[attr-defined]


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
        order = sorted(range(len(self.functions)), key=lambda i: _start(self._fn_nodes[i]))
        rank = {old: new for new, old in enumerate(order)}
        self.functions = [self.functions[i] for i in order]
        loop_order = sorted(range(len(self._loop_nodes)), key=lambda i: _start(self._loop_nodes[i]))
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
            lp["targets"] = [n.id for n in walk(target) if n.__class__ is ast.Name]  # type: ignore[attr-defined]
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
        g = guarded | (GUARDED if _is_interval_test(nodes) else 0)
        if loop >= 0 and _compares_counter(nodes, fn["loops"][loop].get("counter")):
            g |= ONE_ITERATION
        optional = 0 if _always_taken(nodes) else CONDITIONAL
        self._block(node.body, fn, cls, loop, g | optional, handler, grad_off)
        self._block(node.orelse, fn, cls, loop, guarded | optional, handler, grad_off)

    def _with(self, node: Any, fn: Dict[str, Any], cls: Optional[str], loop: int, guarded: int, handler: bool, grad_off: bool) -> None:
        off = grad_off
        for item in node.items:
            before = len(fn["calls"])
            self._exprs(item.context_expr, fn, loop, guarded, handler, grad_off)
            if item.context_expr.__class__ is ast.Call:  # its `__enter__` / `__exit__` run here
                head = _expr(item.context_expr.func)  # type: ignore[attr-defined]
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
                if sub.func.__class__ not in _INERT:  # type: ignore[attr-defined]
                    push(sub.func)  # type: ignore[attr-defined]
                for child in sub.args:  # type: ignore[attr-defined]
                    if child.__class__ not in _INERT:
                        push(child)
                for keyword in sub.keywords:  # type: ignore[attr-defined]
                    if keyword.value.__class__ not in _INERT:
                        push(keyword.value)  # (what a keyword node would push)
                continue
            elif kind is ast.Attribute:
                if sub.attr in properties:  # type: ignore[attr-defined]
                    base = sub.value  # type: ignore[attr-defined]
                    if base.__class__ is ast.Name and base.id == fn["params"][0] and sub.ctx.__class__ is ast.Load:  # type: ignore[attr-defined]
                        # reading a property runs its getter: a call with no arguments
                        flags = g | (HANDLER if handler else 0) | (GRAD_OFF if grad_off else 0) | PROPERTY
                        fn["calls"].append([sub.lineno, ["a", ["n", base.id], sub.attr], [], {}, loop, flags])  # type: ignore[attr-defined]
            elif kind is ast.IfExp:  # the else, the body (flagged after an interval test), the test
                push(sub.test)  # type: ignore[attr-defined]
                push(g)
                push(sub.body)  # type: ignore[attr-defined]
                push(g | (GUARDED if _is_interval_test(walk(sub.test)) else 0))  # type: ignore[attr-defined]
                push(sub.orelse)  # type: ignore[attr-defined]
                continue
            elif kind is ast.BoolOp:  # the other operands (short-circuited: may not run), the first
                values = sub.values  # type: ignore[attr-defined]
                push(values[0])
                push(g)
                todo += values[1:]
                push(g | GUARDED)
                continue
            elif kind is ast.NamedExpr:
                self._bound(fn, sub.target, None)  # type: ignore[attr-defined]
            elif kind in _COMPREHENSIONS:  # (their own scope: a call in one sees its variables)
                for gen in sub.generators:  # type: ignore[attr-defined]
                    self._bound(fn, gen.target, None)
            fields = _EXPR_FIELDS.get(kind)
            if fields is None:
                fields = _expr_fields(kind)
            for field in fields:
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
                for b in binds
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
                b is not None and b[0] == "for" and isinstance(b[1], ast.Attribute) and b[1].attr == "param_groups" for b in binds
            )
        return False

    def _bound(self, fn: Dict[str, Any], target: ast.AST, how: Any) -> None:
        """Note that `fn` binds the names of `target`: `how` (("=", value) for `x = value`,
        `x += value`; ("for", iterable) for `for x in iterable`; ("int", ...) for the counter of
        `enumerate`) for a plain name, None (some value not followed) for the names of a tuple
        target or any other binding."""
        if target.__class__ is ast.Name:
            self._binds.setdefault(id(fn), {}).setdefault(target.id, []).append(how)  # type: ignore[attr-defined]
        elif target.__class__ in (ast.Tuple, ast.List, ast.Starred):
            for sub in walk(target):
                if sub.__class__ is ast.Name:
                    self._bound_name(fn, sub.id)  # type: ignore[attr-defined]

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
        action = kws.get("action")
        action = action.value if isinstance(action, ast.Constant) else None
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

    def _function(self, node: ast.FunctionDef, outer: Dict[str, Any], cls: Optional[str]) -> None:
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
    import warnings

    if tree is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None
    try:
        summary = _Summarizer(tree).run()
    except RecursionError:
        return None
    if any(w in text for w in _EXISTS) and any(w in text for w in _SAVES):
        _mark_cache_fills(summary, cache_fill_lines(tree))
    summary["gpu"] = may_use_gpu(text)
    summary["conv"] = any(w in text for w in _CONV_HINTS) and bool(_CONV_TEXT.search(text))
    summary["cudnn_text"] = "cudnn" in text
    summary["cfgnode"] = "CfgNode" in text  # a yacs-style config may be defined here
    summary["benchmark_on"] = summary["cudnn_text"] and bool(_BENCHMARK_ON.search(text))
    summary["fixed_shapes"] = any(w in text for w in _FIXED_SHAPE_HINTS) and bool(_FIXED_SHAPES.search(text))
    _data_facts(summary, text, tree)
    # frameworks (speedlint.analyzer.frameworks): TF32 switched on, accelerate used
    from speedlint.analyzer.frameworks._knobs_hf import summary_facts

    fw = summary_facts(text)
    if fw:
        summary["fw"] = fw
    return compact(summary, shared)


class FrozenDict(dict):  # type: ignore[type-arg]
    """A dict of a compact summary: read-only (the summaries of a run are shared by everything
    that reads them), hashable, so that equal ones are one object (`{}` is most keyword maps)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __reduce__(self) -> Tuple[Any, ...]:  # pickled to and from the workers
        return (FrozenDict, (dict(self),))

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a summary is read-only")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _read_only  # type: ignore[assignment]


def compact(summary: Dict[str, Any], shared: Optional[Dict[Any, Any]] = None) -> Dict[str, Any]:
    """A summary in its read-only, compact form: lists become tuples and dicts `FrozenDict`s,
    equal ones of names and whole numbers are one object (`["n", "self"]` and `{}` are written
    thousands of times in a big file), strings are interned. A third of the memory of the plain
    form (the whole program holds the summaries of every file at once: about 8x the source as
    lists). Applied to summaries made here and to those read back from the cache (JSON gives
    lists again). The summary itself stays a plain dict (a notebook's cells are added to it).
    `shared`: the parts already made for other files, to share theirs too (a worker passes one
    per batch of files, which pickling keeps shared)."""
    memo: Dict[Any, Any] = {} if shared is None else shared
    intern = sys.intern
    empty = memo.setdefault(FrozenDict(), FrozenDict())  # (most keyword maps)

    def go(obj: Any) -> Tuple[Any, bool]:
        # (compact form, whether it may be shared: `True == 1` and `1.0 == 1`, so only containers
        # of strings, None, ints that are not bools, and shareable containers are shared).
        # Strings, numbers and None inside a container are taken in place (most items are
        # names): one call per container, not per item.
        kind = obj.__class__
        if kind is str:
            return intern(obj), True
        if kind is list or kind is tuple:
            if not obj:
                return (), True
            items = []
            shareable = True
            for item in obj:
                k = item.__class__
                if k is str:
                    items.append(intern(item))
                elif k is int or item is None:
                    items.append(item)
                elif k is list or k is tuple or k is dict or k is FrozenDict:
                    value, ok = go(item)
                    items.append(value)
                    shareable = shareable and ok
                else:  # a bool, a float, ...: kept, and the container is not shared
                    items.append(item)
                    shareable = False
            out: Any = tuple(items)
        elif kind is dict or kind is FrozenDict:
            if not obj:
                return empty, True
            shareable = True
            entries = {}
            for key, v in obj.items():
                k = v.__class__
                if k is str:
                    value, ok = intern(v), True
                elif k is int or v is None:
                    value, ok = v, True
                elif k is list or k is tuple or k is dict or k is FrozenDict:
                    value, ok = go(v)
                else:
                    value, ok = v, False
                entries[intern(key) if key.__class__ is str else key] = value
                shareable = shareable and ok and key.__class__ is not bool
            out = FrozenDict(entries)
        else:
            return obj, kind is int or obj is None
        return (memo.setdefault(out, out), True) if shareable else (out, False)

    return {k: go(v)[0] for k, v in summary.items()}


def _data_facts(summary: Dict[str, Any], text: str, tree: ast.Module) -> None:
    """Data-loading and config-file facts (`speedlint.analyzer.configs.summary`, `loader_program`)."""
    from speedlint.analyzer.configs.summary import config_summary
    from speedlint.analyzer.loader_program import loader_summary

    configs = config_summary(tree, text)
    if configs:
        summary["configs"] = configs
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
#: node class -> the fields `_exprs` looks into (`_expr_fields`); none in a lambda or a constant.
_EXPR_FIELDS: Dict[type, Tuple[str, ...]] = {ast.Lambda: (), ast.Constant: ()}


def _expr_fields(kind: type) -> Tuple[str, ...]:
    fields = _EXPR_FIELDS[kind] = tuple(f for f in getattr(kind, "_fields", ()) if f not in _NO_CALL_FIELDS)
    return fields


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


# -- the link step --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hop:
    """One call site on a hot chain."""

    path: str
    line: int
    label: str
    cell: Optional[int] = None  # in a notebook: the cell, and `line` is a line of it

    def text(self) -> str:
        where = f"cell {self.cell}:{self.line}" if self.cell is not None else str(self.line)
        return f"{self.path}:{where} `{self.label}`"

    def related(self) -> Tuple[Any, ...]:
        """As `Finding.related` holds it."""
        return (self.path, self.line, self.label) if self.cell is None else (self.path, self.line, self.label, self.cell)


#: Project facts that say a file's loaders or functions are used from elsewhere: its own text
#: cannot tell what they do there (no pre-look).
USED_ELSEWHERE = ("loaders", "called", "pinned_loops", "loader_classes")


@dataclass
class FileSeeds:
    """What the program model says about one file, for its rules."""

    #: function ordinal (source order) -> {kind: chain}; the chain's last hop is the call that runs it
    functions: Dict[int, Dict[str, Tuple[Hop, ...]]] = field(default_factory=dict)
    #: loop ordinals (source order) that are training-step loops through a callee elsewhere
    step_loops: Tuple[int, ...] = ()
    #: the code that makes this file hot may run on a GPU
    gpu: bool = False
    #: other facts the rules ask about the project (see `Program.project_facts`)
    project: Dict[str, Any] = field(default_factory=dict)
    #: `digest()`, once known (the program cache keeps it next to the seeds)
    known_digest: Optional[str] = field(default=None, compare=False, repr=False)

    @property
    def kinds(self) -> Set[str]:
        return {k for kinds in self.functions.values() for k in kinds} | ({STEP} if self.step_loops else set())

    def changes_prelook(self, seed_triggers: Iterable[str] = ()) -> bool:
        """Whether a file's `ast` pre-look may answer differently with these seeds than from its
        text alone (`engine.seeded_facts`; `seed_triggers`: the project keys its rules' text
        pre-filter reads). Passed constants, option defaults and model makers do not."""
        if self.gpu or self.step_loops or any(self.functions.values()):
            return True
        return any(self.project.get(k) for k in USED_ELSEWHERE) or any(k in self.project for k in seed_triggers)

    def digest(self) -> str:
        """What the file's findings depend on (part of its cache key)."""
        if self.known_digest is None:
            import hashlib

            import json

            self.known_digest = hashlib.sha1(json.dumps(self.to_json(), sort_keys=True, default=repr).encode()).hexdigest()[:16]
        return self.known_digest

    def to_json(self) -> List[Any]:
        return [
            [[i, {k: [list(h.related()) for h in c] for k, c in sorted(v.items())}] for i, v in sorted(self.functions.items())],
            list(self.step_loops), self.gpu, self.project,
        ]

    @classmethod
    def from_json(cls, data: List[Any]) -> "FileSeeds":
        fns = {int(i): {k: tuple(Hop(*h) for h in c) for k, c in v.items()} for i, v in data[0]}
        return cls(fns, tuple(data[1]), bool(data[2]), dict(data[3]))


class _Module:
    __slots__ = ("id", "path", "folder", "shown", "name", "root", "summary", "is_package", "fids", "cids", "fids_by_q", "globals_env")

    def __init__(self, mid: int, path: str, shown: str, summary: Dict[str, Any]) -> None:
        self.id = mid
        self.path = path
        self.folder = os.path.dirname(path)
        self.shown = shown
        self.summary = summary
        self.name = ""
        self.root = ""
        self.is_package = os.path.basename(path) == "__init__.py"
        self.fids: List[int] = []
        self.cids: Dict[str, int] = {}
        self.fids_by_q: Dict[str, List[int]] = {}  # qualified name -> its functions (redefinitions too)
        self.globals_env: Dict[str, Set[str]] = {}


def module_names(paths: Iterable[str]) -> Dict[str, Tuple[str, str]]:
    """path -> (dotted module name, the folder it is importable from), from the package layout."""
    known = set(paths)
    out: Dict[str, Tuple[str, str]] = {}
    folder_is_package: Dict[str, bool] = {}

    def is_package(folder: str) -> bool:
        got = folder_is_package.get(folder)
        if got is None:
            init = os.path.join(folder, "__init__.py")
            got = folder_is_package[folder] = init in known or os.path.isfile(init)
        return got

    for path in known:
        folder, base = os.path.split(path)
        stem = base[:-3] if base.endswith(".py") else base
        parts = [] if stem == "__init__" else [stem]
        while is_package(folder):
            folder, pkg = os.path.split(folder)
            parts.insert(0, pkg)
            if not pkg:
                break
        out[path] = (".".join(parts), folder)
    return out


class Program:
    """The linked project: resolution, types and hotness over every file's summary."""

    ROUNDS = 4
    #: classes with more subclasses than this are taken as themselves in their methods (`_selves`)
    MAX_SUBCLASSES = 32

    def __init__(self, files: Sequence[Tuple[str, str, Dict[str, Any]]]) -> None:
        """`files`: (absolute path, display path, summary) for every parsable file of the run."""
        self.modules: List[_Module] = []
        self.functions: List[Tuple[int, Dict[str, Any]]] = []  # fid -> (module id, summary)
        self.classes: List[Tuple[int, str, Dict[str, Any]]] = []  # cid -> (module id, qualname, summary)
        names = module_names(p for p, _, _ in files)
        self.by_name: Dict[str, List[int]] = {}
        self.by_path: Dict[str, int] = {}
        for path, shown, summary in files:
            m = _Module(len(self.modules), path, shown, summary)
            m.name, m.root = names[path]
            self.modules.append(m)
            self.by_name.setdefault(m.name, []).append(m.id)
            self.by_path[path] = m.id
            for fn in summary["functions"]:
                m.fids.append(len(self.functions))
                m.fids_by_q.setdefault(fn["q"], []).append(len(self.functions))
                self.functions.append((m.id, fn))
            for q, c in summary["classes"].items():
                m.cids[q] = len(self.classes)
                self.classes.append((m.id, q, c))
        n = len(self.functions)
        self.local_index: List[int] = [0] * n  # fid -> its ordinal in its module
        for m in self.modules:
            for k, fid in enumerate(m.fids):
                self.local_index[fid] = k
        self.fn_class: List[Optional[int]] = [None] * n
        for fid, (mid, fn) in enumerate(self.functions):
            if fn["cls"] is not None:
                self.fn_class[fid] = self.modules[mid].cids.get(fn["cls"])
        #: the memoised types, read-only and shared: equal ones are one frozenset (`_shared`)
        self._symbol_memo: Dict[Tuple[int, str], FrozenSet[str]] = {}
        self._sets: Dict[FrozenSet[str], FrozenSet[str]] = {}
        self._mro: Dict[int, List[int]] = {}
        self._used: Dict[int, FrozenSet[str]] = {}
        self._method_memo: Dict[Tuple[int, str, bool], Optional[int]] = {}
        self._attr_memo: Dict[Tuple[str, str], FrozenSet[str]] = {}
        #: (module id, name, level) of a relative import, (folder, root, name) of an absolute one
        self._module_memo: Dict[Tuple[Any, str, Any], Optional[int]] = {}
        self._module_class_memo: Dict[int, bool] = {}
        self.bases: List[List[int]] = [self._resolve_bases(cid) for cid in range(len(self.classes))]
        self.base_names: List[Set[str]] = [self._external_bases(cid) for cid in range(len(self.classes))]
        self.subclasses: Dict[int, Set[int]] = {}
        self._selves_memo: Dict[int, Tuple[FrozenSet[str], FrozenSet[str]]] = {}
        self._outer_memo: Dict[int, Dict[str, Set[str]]] = {}  # per round: enclosing functions' names
        for cid in range(len(self.classes)):
            for anc in self.mro(cid)[1:]:
                self.subclasses.setdefault(anc, set()).add(cid)
        self.param_types: List[Dict[str, Set[str]]] = [dict() for _ in range(n)]
        #: fid -> parameter -> the types of each position of the literal sequence every call gives
        #: it (None: some call gives something else)
        self.param_elems: Dict[int, Dict[str, Optional[List[Set[str]]]]] = {}
        #: fid -> the types of each position of the literal tuple it always returns (None: not one)
        self.ret_elems: Dict[int, Optional[List[Set[str]]]] = {}
        self.attr_types: Dict[int, Dict[str, Set[str]]] = {}
        self.ret_types: List[FrozenSet[str]] = [_NOTHING] * n
        self.edges: List[List[Tuple[int, int, Any]]] = [[] for _ in range(n)]  # fid -> [(call index, callee fid, ...)]
        self.module_edges: List[List[Tuple[int, int]]] = [[] for _ in self.modules]
        #: what each function read in its latest visit of the rounds, flat: kind, key, key, value
        #: for each (`_inputs_unchanged`)
        self._inputs: List[Tuple[Any, ...]] = [()] * n
        #: what the visit under way reads: (kind, key, key) -> the value (`_input`)
        self._reads: Optional[Dict[Tuple[str, Any, Any], Any]] = None
        self._param_version: List[int] = [0] * n  # counts the changes of `param_types[fid]`
        self._ret_elems_version: List[int] = [0] * n  # and of `ret_elems[fid]`
        self._infer()

    # -- names and modules ----------------------------------------------------------------------
    def _find_module(self, mid: int, name: str, level: int) -> Optional[int]:
        m = self.modules[mid]
        # an absolute import is found the same from every module of a folder
        key = (mid, name, level) if level else (m.folder, m.root, name)
        if key in self._module_memo:
            return self._module_memo[key]
        found: Optional[int] = None
        if level:
            package = m.name.split(".") if m.is_package else m.name.split(".")[:-1]
            if level > 1:
                package = package[: len(package) - (level - 1)]
            full = ".".join([*package, name] if name else package)
            found = self._by_name_in(full, m.root)
        else:
            found = self._by_name_in(name, m.root)
            if found is None and name:  # a namespace package (a folder without __init__.py)
                base = m.folder
                for _ in range(5):  # the importing file's folder and the ones above it
                    stem = os.path.join(base, *name.split("."))
                    found = self.by_path.get(stem + ".py", self.by_path.get(os.path.join(stem, "__init__.py")))
                    if found is not None:
                        break
                    base = os.path.dirname(base)
            if found is None:
                candidates = self.by_name.get(name, [])
                if len(candidates) == 1:
                    found = candidates[0]
                elif candidates:  # the closest one to the importing file
                    best = max(candidates, key=lambda c: len(os.path.commonpath([m.folder, self.modules[c].path])))
                    found = best
        self._module_memo[key] = found
        return found

    def _by_name_in(self, name: str, root: str) -> Optional[int]:
        for c in self.by_name.get(name, ()):
            if self.modules[c].root == root:
                return c
        return None

    def symbol(self, mid: int, name: str, depth: int = 0) -> Set[str]:
        """What a module-level name of module `mid` may be: F:fid, C:cid, M:mid, or instances."""
        key = (mid, name)
        got = self._symbol_memo.get(key)
        if got is not None:
            return got
        if depth > 12:
            return set()
        self._symbol_memo[key] = _NOTHING  # cycles end quietly
        m = self.modules[mid]
        s = m.summary
        out: Set[str] = set()
        for fid in m.fids_by_q.get(name, ()):
            out.add(f"F:{fid}")
        cid = m.cids.get(name)
        if cid is not None:
            out.add(f"C:{cid}")
        if not out:
            imp = s["imports"].get(name)
            if imp is not None:
                if imp[0] == "mod":
                    target = self._find_module(mid, imp[1], 0)
                    if target is not None:
                        out.add(f"M:{target}")
                else:
                    _, module, level, orig = imp
                    target = self._find_module(mid, module, level)
                    if target is not None:
                        out |= self.symbol(target, orig, depth + 1)
                        if not out:  # `from pkg import submodule`
                            sub = self._find_module(mid, f"{module}.{orig}" if module else orig, level)
                            if sub is not None:
                                out.add(f"M:{sub}")
                    elif level or module:
                        sub = self._find_module(mid, f"{module}.{orig}" if module else orig, level)
                        if sub is not None:
                            out.add(f"M:{sub}")
            elif name in s["module"]["assign"]:
                out |= m.globals_env.get(name, set())
            elif s["star"] and not name.startswith("_"):
                # `from m import *` of a project module: the names it defines (its literal
                # `__all__` when it has one), exactly as Python binds them; nothing for others
                for module, level in s["star"]:
                    target = self._find_module(mid, module, level)
                    if target is not None and self._exports(target, name):
                        out |= self.symbol(target, name, depth + 1)
        got = self._symbol_memo[key] = self._shared(out)
        return got

    def _shared(self, types: Set[str]) -> FrozenSet[str]:
        """`types` as the one read-only set equal to it: a program of 40,000 functions memoises
        about 150,000 types, of which 10% differ and 60% are empty."""
        if not types:
            return _NOTHING
        frozen = frozenset(types)
        return self._sets.setdefault(frozen, frozen)

    def _exports(self, mid: int, name: str) -> bool:
        """Whether `from <module mid> import *` binds `name`."""
        declared = self.modules[mid].summary["module"]["assign"].get("__all__")
        if declared:
            names = {e[1] for v in declared if v and v[0] == "t" for e in v[1] if e and e[0] == "k"}
            return name in names
        return True

    def _external_name(self, mid: int, expr: Any) -> str:
        """The dotted name an expression stands for, through this module's imports."""
        if expr is None:
            return ""
        if expr[0] == "n":
            imp = self.modules[mid].summary["imports"].get(expr[1])
            if imp is None:
                return expr[1]
            if imp[0] == "mod":
                return imp[1]
            return f"{imp[1]}.{imp[3]}" if imp[1] else imp[3]
        if expr[0] == "a":
            base = self._external_name(mid, expr[1])
            return f"{base}.{expr[2]}" if base else ""
        return ""

    def _resolve_bases(self, cid: int) -> List[int]:
        mid, q, c = self.classes[cid]
        out = []
        for b in c["bases"]:
            for obj in sorted(self._eval_static(mid, b)):
                if obj.startswith("C:"):
                    out.append(int(obj[2:]))
        return out

    def _external_bases(self, cid: int) -> Set[str]:
        mid, q, c = self.classes[cid]
        return {self._external_name(mid, b) for b in c["bases"]} - {""}

    def _eval_static(self, mid: int, expr: Any) -> Set[str]:
        """Names and attributes of modules only (class bases, decorators)."""
        if expr is None:
            return set()
        if expr[0] == "n":
            return self.symbol(mid, expr[1])
        if expr[0] == "a":
            out: Set[str] = set()
            for o in self._eval_static(mid, expr[1]):
                if o.startswith("M:"):
                    out |= self.symbol(int(o[2:]), expr[2])
            return out
        return set()

    def mro(self, cid: int) -> List[int]:
        got = self._mro.get(cid)
        if got is not None:
            return got
        out: List[int] = []
        todo = [cid]
        while todo:
            c = todo.pop(0)
            if c in out:
                continue
            out.append(c)
            todo.extend(self.bases[c])
        self._mro[cid] = out
        return out

    def is_loader_class(self, cid: int) -> bool:
        """A project subclass of a data loader (GraphSAINT-style samplers are DataLoaders)."""
        return any(name.rsplit(".", 1)[-1] in LOADER_NAMES for name in self.all_base_names(cid))

    def loader_modules(self) -> Set[int]:
        """The modules that call a data loader class by its name (torch's, the graph libraries',
        a project subclass), or make a `functools.partial` of one."""
        names = set(LOADER_NAMES) | {q.rsplit(".", 1)[-1] for cid, (_, q, _) in enumerate(self.classes) if self.is_loader_class(cid)}

        def builds(call: Any) -> bool:
            tail = _callee_tail(call[C_FUNC])
            args = call[C_ARGS]
            return tail in names or (tail == "partial" and bool(args) and args[0] is not None and _callee_tail(args[0]) in names)

        out: Set[int] = set()
        for m in self.modules:
            if any(builds(c) for body in (m.summary["module"], *m.summary["functions"]) for c in body["calls"]):
                out.add(m.id)
        return out

    def is_module_class(self, cid: int) -> bool:
        """A project subclass of `torch.nn.Module` (directly or through any `torch.nn` class)."""
        got = self._module_class_memo.get(cid)
        if got is None:
            got = self._module_class_memo[cid] = any(
                name.rsplit(".", 1)[-1] in _MODULE_BASES or name.startswith(("torch.nn.", "nn."))
                for name in self.all_base_names(cid)
            )
        return got

    def all_base_names(self, cid: int) -> Set[str]:
        names: Set[str] = set()
        for c in self.mro(cid):
            names |= self.base_names[c]
        return names

    def method(self, cid: int, name: str, skip_self: bool = False) -> Optional[int]:
        key = (cid, name, skip_self)
        if key in self._method_memo:
            return self._method_memo[key]
        found = None
        for c in self.mro(cid)[1 if skip_self else 0:]:
            mid, q, summ = self.classes[c]
            idx = summ["methods"].get(name)
            if idx is not None:
                found = self.modules[mid].fids[idx]
                break
        self._method_memo[key] = found
        return found

    # -- type inference -------------------------------------------------------------------------
    def _infer(self) -> None:
        for m in self.modules:  # module globals first (no parameters there)
            m.globals_env = {}
        for round_ in range(self.ROUNDS):
            changed = False
            for m in self.modules:
                env = self._local_env(m.id, None, m.summary["module"])
                for k, v in env.items():
                    if not v <= m.globals_env.get(k, set()):
                        m.globals_env.setdefault(k, set()).update(v)
                        changed = True
            self._symbol_memo.clear()  # module globals may have grown
            self._outer_memo.clear()
            self._attr_memo.clear()  # attribute types grow from round to round
            self._sets.clear()
            for fid, (mid, fn) in enumerate(self.functions):
                if round_ and self._inputs_unchanged(fid):
                    continue  # its visit would give what it gave last time: nothing new
                if self._visit_function(fid, mid, fn):
                    changed = True
            if not changed:
                break  # the edges of this round are final
        # what only the rounds needed (asked again later, it is computed again)
        self._inputs = []
        self._used.clear()
        self._attr_memo.clear()
        self._outer_memo.clear()
        self._sets.clear()
        self.callers: List[List[Tuple[int, int]]] = [[] for _ in self.functions]
        for fid, edges in enumerate(self.edges):
            for call_index, callee in edges:
                self.callers[callee].append((fid, call_index))

    def _inputs_unchanged(self, fid: int) -> bool:
        """Whether every input of the latest visit of `fid` (the types it read: its parameters',
        the returns, attributes and module names it used, ...) reads the same now. Then a visit
        would compute what that one did, and what it would add (unions) is there already. The
        inputs are read again in the order the visit first read them, up to the first that
        differs: the round's memos (attribute types, module names, closures' names), which
        whatever asks first fills, are filled at the same points and with the same values as a
        visit of every function would fill them, and each round ends as evaluating every
        function would end it."""
        inputs = iter(self._inputs[fid])
        for kind, a, b, seen in zip(inputs, inputs, inputs, inputs):
            got = self._input(fid, kind, a, b)
            if got is not seen and got != seen:
                return False
        return True

    def _input(self, fid: int, kind: str, a: Any, b: Any) -> Any:
        """What the input `kind` `a` `b` of a visit of `fid` is now (`_reads`)."""
        if kind == "a":  # an attribute of an object
            return self._attr(a, b)
        if kind == "s":  # a module-level name of a module
            return self.symbol(a, b)
        if kind == "r":  # what a function returns
            return self.ret_types[a]
        if kind == "p":  # the function's parameters (a version)
            return self._param_version[fid]
        if kind == "e":  # each position of the literal tuple a function returns (a version)
            return self._ret_elems_version[a]
        if kind == "o":  # a name of an enclosing function (a copy: the set may grow after)
            return frozenset(self._outer_name(a, b))
        if kind == "q":  # a position of the literal sequence a parameter is given (a copy)
            got = self._param_element(fid, a, b)
            return None if got is None else frozenset(got)
        if kind == "x":  # some call does not give a parameter a literal sequence
            known = self.param_elems.get(a, {})
            return b in known and known[b] is None
        if kind == "m":  # a parameter may be many things already
            got = self.param_types[a].get(b)
            return got is not None and len(got) > MAX_TYPES
        raise ValueError(kind)

    def _read(self, fid: int, kind: str, a: Any, b: Any) -> Any:
        got = self._input(fid, kind, a, b)
        if self._reads is not None:
            self._reads.setdefault((kind, a, b), got)
        return got

    def _local_env(self, mid: int, fid: Optional[int], fn: Dict[str, Any]) -> Dict[str, Set[str]]:
        env: Dict[str, Set[str]] = {}
        if fid is not None:
            if self._reads is not None:
                self._reads.setdefault(("p", None, None), self._param_version[fid])
            for p, t in self.param_types[fid].items():
                env[p] = set(t)
            cid = self.fn_class[fid]
            if cid is not None and fn["params"] and not fn.get("static"):
                kinds = self._selves(cid)
                is_classmethod = any(d == ("n", "classmethod") for d in fn["dec"])
                env[fn["params"][0]] = set(kinds[1] if is_classmethod else kinds[0])
        assigns = fn["assign"]
        for _ in range(2):  # a = B(); c = a  (flow-insensitive, two passes settle most chains)
            for name, values in assigns.items():
                got = env.setdefault(name, set())
                for v in values:
                    got |= self.eval(mid, fid, v, env)
        return env

    def _selves(self, cid: int) -> Tuple[FrozenSet[str], FrozenSet[str]]:
        """What `self` (and `cls`) may be in a method of class `cid`: an instance of it or of any
        subclass, so that `self.step()` reaches the overrides. A class with more than
        `MAX_SUBCLASSES` subclasses (a library base such as `PreTrainedModel`, with 1,354 in
        transformers) is taken as itself alone: every attribute read in its methods would
        otherwise be evaluated once per subclass."""
        got = self._selves_memo.get(cid)
        if got is None:
            subs = self.subclasses.get(cid, ())
            family = (cid, *subs) if len(subs) <= self.MAX_SUBCLASSES else (cid,)
            got = self._selves_memo[cid] = (frozenset(f"I:{c}" for c in family), frozenset(f"C:{c}" for c in family))
        return got

    def _outer_env(self, mid: int, fid: int, fn: Dict[str, Any]) -> Dict[str, Set[str]]:
        """The names of a function that closures defined in it read (once per round)."""
        got = self._outer_memo.get(fid)
        if got is None:
            self._outer_memo[fid] = {}  # a closure read while it is computed: nothing yet
            reads, self._reads = self._reads, None  # its reader notes the value it reads
            try:
                got = self._outer_memo[fid] = self._local_env(mid, fid, fn)
            finally:
                self._reads = reads
        return got

    def _outer_name(self, ofid: int, name: str) -> Set[str]:
        """What `name` of the enclosing function `ofid` may be, for a closure."""
        omid, ofn = self.functions[ofid]
        got = self._outer_env(omid, ofid, ofn).get(name, set())
        if self._reads is not None:
            self._reads.setdefault(("o", ofid, name), frozenset(got))
        return got

    def eval(self, mid: int, fid: Optional[int], expr: Any, env: Dict[str, Set[str]], depth: int = 0) -> Set[str]:
        if expr is None or depth > 10:
            return set()
        tag = expr[0]
        if tag == "n":
            name = expr[1]
            if name in env:
                return env[name]
            if fid is not None:
                fn = self.functions[fid][1]
                outer = fn.get("outer")
                if outer is not None:  # a closure reads its enclosing function's names
                    for ofid in self.modules[mid].fids_by_q.get(outer, ()):
                        ofn = self.functions[ofid][1]
                        if name in ofn["assign"]:
                            return self._outer_name(ofid, name)
            got = self.symbol(mid, name)
            if self._reads is not None:
                self._reads.setdefault(("s", mid, name), got)
            return got
        if tag == "a":
            out: Set[str] = set()
            reads = self._reads
            for o in self.eval(mid, fid, expr[1], env, depth + 1):
                got = self._attr(o, expr[2])
                if reads is not None:
                    reads.setdefault(("a", o, expr[2]), got)
                out |= got
            return out
        if tag == "c":
            out = set()
            func = expr[1]
            for o in self.eval(mid, fid, func, env, depth + 1):
                out |= self._call_result(o)
                if o[0] in "FB":  # a generator that yields the items of an argument (`log_every(loader)`)
                    index = self.functions[int(o[2:])][1].get("yields")
                    if index is not None and 0 <= index - (o[0] == "B") < len(expr[2]):
                        out |= self.eval(mid, fid, expr[2][index - (o[0] == "B")], env, depth + 1)
            tail = _callee_tail(func)
            if len(expr) > 4 and (tail in LOADER_NAMES or any(o[0] == "C" and self.is_loader_class(int(o[2:])) for o in out)):
                out.add(f"L:{mid}:{expr[4]}")  # a data loader built here
            if func[0] == "a" and tail in _RETURNS_SELF:  # `Net(...).to(device)` is the Net
                out |= {o for o in self.eval(mid, fid, func[1], env, depth + 1) if o[0] == "I"}
            if tail in RECORD_CALLS and len(expr) > 4 and expr[3]:
                out.add(record_type(self, mid, fid, expr))  # `Munch(encoder=enc, ...)`: fields by name
            if tail in _CONTAINERS or tail == "partial":
                for a in expr[2]:
                    out |= self.eval(mid, fid, a, env, depth + 1)
                out |= self.eval(mid, fid, expr[3].get("*"), env, depth + 1)
            return out
        if tag in ("s", "e"):
            return self.eval(mid, fid, expr[1], env, depth + 1)
        if tag == "i":
            inner = expr[1]
            if inner is not None and inner[0] == "t" and expr[2] < len(inner[1]):
                return self.eval(mid, fid, inner[1][expr[2]], env, depth + 1)
            element = self._element_types(fid, inner, expr[2], mid, env)
            if element is not None:
                return element
            return self.eval(mid, fid, inner, env, depth + 1)
        if tag == "t":
            out = set()
            for e in expr[1]:
                out |= self.eval(mid, fid, e, env, depth + 1)
            return out
        if tag == "super" and fid is not None:
            cid = self.fn_class[fid]
            return {f"S:{cid}"} if cid is not None else set()
        return set()

    def _attr(self, obj: str, name: str) -> Set[str]:
        key = (obj, name)
        got = self._attr_memo.get(key)
        if got is None:
            got = self._attr_memo[key] = self._shared(self._attr_uncached(obj, name))
        return got

    def _attr_uncached(self, obj: str, name: str) -> Set[str]:
        kind, _, rest = obj.partition(":")
        if kind == "M":
            return self.symbol(int(rest), name)
        if kind == "R":
            return record_field(self, obj, name)
        if kind in ("I", "C", "S"):
            cid = int(rest)
            meth = self.method(cid, name, skip_self=kind == "S")
            if meth is not None:
                return {f"B:{meth}"} if kind in ("I", "S") else {f"F:{meth}"}
            if kind == "I":
                out: Set[str] = set()
                for c in self.mro(cid):
                    out |= self.attr_types.get(c, {}).get(name, _NOTHING)
                return out
        return set()

    def _call_result(self, obj: str) -> Set[str]:
        kind, _, rest = obj.partition(":")
        if kind == "C":
            return {f"I:{rest}"}
        if kind in ("F", "B"):
            target = int(rest)
        elif kind == "I":
            found = self._instance_call_target(int(rest))
            if found is None:
                return _NOTHING
            target = found
        else:
            return set()
        got = self.ret_types[target]
        if self._reads is not None:
            self._reads.setdefault(("r", target, None), got)
        return got

    def _instance_call_target(self, cid: int) -> Optional[int]:
        target = self.method(cid, "__call__")
        if target is None:
            target = self.method(cid, "forward")
        return target

    def callees_of(self, obj: str) -> List[Tuple[int, int]]:
        """(callee fid, how many leading parameters the call skips) for calling `obj`."""
        kind, _, rest = obj.partition(":")
        if kind == "F":
            return [(int(rest), 0)]
        if kind == "B":
            return [(int(rest), 1)]
        if kind == "C":
            init = self.method(int(rest), "__init__")
            return [(init, 1)] if init is not None else []
        if kind == "I":
            target = self._instance_call_target(int(rest))
            return [(target, 1)] if target is not None else []
        return []

    def _visit_function(self, fid: int, mid: int, fn: Dict[str, Any]) -> bool:
        """Evaluate a function once more; whether that added anything. What it reads is kept for
        the next round (`_inputs_unchanged`)."""
        self._reads = {}
        try:
            changed = self._visit(fid, mid, fn)
            self._inputs[fid] = tuple(itertools.chain.from_iterable((*key, got) for key, got in self._reads.items()))
        finally:
            self._reads = None
        return changed

    def _visit(self, fid: int, mid: int, fn: Dict[str, Any]) -> bool:
        env = self._local_env(mid, fid, fn)
        changed = False
        cid = self.fn_class[fid]
        if cid is not None and fn["attrs"]:
            attrs = self.attr_types.setdefault(cid, {})
            for name, values in fn["attrs"].items():
                for v in values:
                    new = self.eval(mid, fid, v, env)
                    if new and not new <= attrs.get(name, _NOTHING):
                        attrs.setdefault(name, set()).update(new)
                        changed = True
        ret = set()
        for r in fn["returns"]:
            ret |= self.eval(mid, fid, r, env)
        if not ret <= self.ret_types[fid]:
            self.ret_types[fid] = self.ret_types[fid] | ret
            changed = True
        if fn["returns"] and self._note_returned_elements(fid, mid, fn, env):
            self._ret_elems_version[fid] += 1
            changed = True
        edges = []
        for i, call in enumerate(fn["calls"]):
            objs = self.eval(mid, fid, call[C_FUNC], env)
            for o in objs:
                if o[0] == "C" and self._bind_fields(int(o[2:]), call, mid, fid, env):
                    changed = True
            callees = self._callees(objs)
            if call[C_FLAGS] & WITH_ITEM:
                callees = callees + self._context_methods(objs)
            for callee, skip in callees:
                edges.append((i, callee))
                params = self.functions[callee][1]["params"]
                used = self._used_names(callee)
                ptypes = self.param_types[callee]
                pairs = [(params[k + skip], a) for k, a in enumerate(call[C_ARGS]) if k + skip < len(params)]
                pairs += [(kw, a) for kw, a in call[C_KWS].items() if kw in params]
                for name, a in pairs:
                    if name not in used or name.startswith("*"):
                        continue
                    if self._note_elements(callee, name, mid, fid, a, env):
                        changed = True
                    if self._read(fid, "m", callee, name):
                        continue  # already many things: stop refining it
                    new = self.eval(mid, fid, a, env)
                    got = ptypes.get(name)
                    if new and (got is None or not new <= got):
                        ptypes.setdefault(name, set()).update(new)
                        self._param_version[callee] += 1
                        changed = True
        self.edges[fid] = edges
        return changed

    def _context_methods(self, objs: Set[str]) -> List[Tuple[int, int]]:
        """`__enter__` and `__exit__` of the project classes a `with` constructs."""
        out: List[Tuple[int, int]] = []
        for o in sorted(objs):
            if o[0] == "C":
                for name in ("__enter__", "__exit__"):
                    m = self.method(int(o[2:]), name)
                    if m is not None:
                        out.append((m, 1))
        return out

    def _bind_fields(self, cid: int, call: List[Any], mid: int, fid: int, env: Dict[str, Set[str]]) -> bool:
        """`DataInfo(loader, sampler)` of a dataclass (or NamedTuple): the types of its fields, from
        the arguments (by position only when it has no bases, whose fields would come first)."""
        c = self.classes[cid][2]
        fields = c.get("init")
        if not fields:
            return False
        pairs = list(zip(fields, call[C_ARGS])) if not c["bases"] or self._named_tuple(c) else []
        pairs += [(k, a) for k, a in call[C_KWS].items() if k in fields]
        attrs = self.attr_types.setdefault(cid, {})
        changed = False
        for name, a in pairs:
            if a is None:
                continue
            new = self.eval(mid, fid, a, env)
            if new and not new <= attrs.get(name, _NOTHING):
                attrs.setdefault(name, set()).update(new)
                changed = True
        return changed

    @staticmethod
    def _named_tuple(c: Dict[str, Any]) -> bool:
        return all(b is not None and _callee_tail(b) == "NamedTuple" for b in c["bases"])

    def _note_elements(self, callee: int, name: str, mid: int, fid: int, arg: Any, env: Dict[str, Set[str]]) -> bool:
        """A parameter that every call site gives a literal tuple or list (`[train_loader,
        val_loader]`): the types of each position, so that `a, b = loaders` stays precise."""
        if arg is None or arg[0] != "t" or len(arg) < 3:
            if self._input(fid, "x", callee, name):
                return False  # some call does not give it a literal sequence
            self.param_elems.setdefault(callee, {})[name] = None
            return True
        if self._read(fid, "x", callee, name):  # an input: it decides what this visit evaluates
            return False
        known = self.param_elems.setdefault(callee, {})
        elems = [self.eval(mid, fid, e, env) for e in arg[1]]
        have = known.get(name)
        if have is None:
            known[name] = elems
            return True
        if len(have) != len(elems):
            known[name] = None
            return True
        changed = False
        for h, e in zip(have, elems):
            if not e <= h:
                h |= e
                changed = True
        return changed

    def _note_returned_elements(self, fid: int, mid: int, fn: Dict[str, Any], env: Dict[str, Set[str]]) -> bool:
        """A function that always returns a literal tuple (`return train_loader, val_loader`), or
        what such a function returns (`def build_model(args): return build(args)`): the types of
        each position, so that `train_dl, val_dl = make_loaders()` stays precise."""
        if fid in self.ret_elems and self.ret_elems[fid] is None:
            return False
        rows: List[List[Set[str]]] = []
        for r in fn["returns"]:
            if r[0] == "t" and len(r) >= 3:
                rows.append([self.eval(mid, fid, e, env) for e in r[1]])
                continue
            got = self._forwarded_elements(r, mid, fid, env) if r[0] == "c" else None
            if got is _NOT_YET:
                return False  # visited again once the callee's are known (a read of them is noted)
            if got is None:
                rows = []
                break
            rows.append(got)
        if not rows or len({len(row) for row in rows}) != 1:
            had = self.ret_elems.get(fid) is not None
            self.ret_elems[fid] = None
            return had  # (known positions that are no more: the readers fall back to the union)
        have = self.ret_elems.get(fid)
        changed = have is None
        if have is None:
            have = self.ret_elems[fid] = [set() for _ in rows[0]]
        for row in rows:
            for h, new in zip(have, row):
                if not new <= h:
                    h |= new
                    changed = True
        return changed

    def _forwarded_elements(self, call: Any, mid: int, fid: int, env: Dict[str, Set[str]]) -> Any:
        """The positions of what `return build(args)` returns: the callees' (None: not a tuple of
        known positions; `_NOT_YET`: a callee's are not known yet)."""
        objs = self.eval(mid, fid, call[1], env, 1)
        if not objs or any(o[0] not in "FB" for o in objs):
            return None
        out: Optional[List[Set[str]]] = None
        for o in sorted(objs):
            callee = int(o[2:])
            if callee == fid:
                return None
            if self._reads is not None:
                self._reads.setdefault(("e", callee, None), self._ret_elems_version[callee])
            if callee not in self.ret_elems:
                return _NOT_YET
            elems = self.ret_elems[callee]
            if elems is None or (out is not None and len(out) != len(elems)):
                return None
            out = [set(e) for e in elems] if out is None else [a | b for a, b in zip(out, elems)]
        return out

    def _element_types(self, fid: Optional[int], inner: Any, index: int, mid: int = -1, env: Optional[Dict[str, Set[str]]] = None) -> Optional[Set[str]]:
        """`loaders[1]` / `a, b = loaders` for a parameter given literal sequences, `a, b = f()`
        for a function returning one (None: not known)."""
        if inner is not None and inner[0] == "c" and env is not None:
            out: Set[str] = set()
            for o in self.eval(mid, fid, inner[1], env, 1):
                if o[0] not in "FB":
                    return None
                callee = int(o[2:])
                if self._reads is not None:
                    self._reads.setdefault(("e", callee, None), self._ret_elems_version[callee])
                elems = self.ret_elems.get(callee)
                if not elems or index >= len(elems):
                    return None
                out |= elems[index]
            return out or None
        if fid is None or inner is None or inner[0] != "n":
            return None
        fn = self.functions[fid][1]
        if inner[1] in fn["assign"] or inner[1] not in fn["params"]:
            return None
        got = self._param_element(fid, inner[1], index)
        if self._reads is not None:
            self._reads.setdefault(("q", inner[1], index), None if got is None else frozenset(got))
        return got

    def _param_element(self, fid: int, name: str, index: int) -> Optional[Set[str]]:
        elems = self.param_elems.get(fid, {}).get(name)
        return elems[index] if elems and index < len(elems) else None

    def _callees(self, objs: Set[str]) -> List[Tuple[int, int]]:
        """What calling a value that may be any of `objs` runs. A value that may be many plain
        functions (a callback parameter fed from everywhere) is not followed: that would be a
        guess. Instances and classes are (a model zoo: `net = get_network(args)`)."""
        functions = [o for o in objs if o[0] in "FB"]
        if len(functions) > MAX_TARGETS:
            objs = {o for o in objs if o[0] not in "FB"}
        return [c for obj in sorted(objs) for c in self.callees_of(obj)]  # sorted: the same order every run

    def _used_names(self, fid: int) -> FrozenSet[str]:
        """Names whose types can matter in a function: the roots of what it calls, returns,
        iterates or stores (a parameter's type is inferred only when it is one of them)."""
        got = self._used.get(fid)
        if got is None:
            fn = self.functions[fid][1]
            got = set()
            exprs = [c[C_FUNC] for c in fn["calls"]] + list(fn["returns"]) + [v for vs in fn["attrs"].values() for v in vs]
            exprs += [v for vs in fn["assign"].values() for v in vs]
            exprs += [a for c in fn["calls"] for a in (*c[C_ARGS], *c[C_KWS].values())]  # passed along
            todo = [e for e in exprs if e is not None]
            while todo:
                e = todo.pop()
                if e is None:
                    continue
                tag = e[0]
                if tag == "n":
                    got.add(e[1])
                elif tag in ("a", "s", "e"):
                    todo.append(e[1])
                elif tag == "i":
                    todo.append(e[1])
                elif tag == "t":
                    todo.extend(e[1])
                elif tag == "c":
                    todo.append(e[1])
                    todo.extend(e[2])
            got = self._used[fid] = self._shared(got)
        return got

    # -- module-level code: calls at the top of a script ----------------------------------------
    def module_calls(self, mid: int) -> List[Tuple[int, int]]:
        m = self.modules[mid]
        fn = m.summary["module"]
        env = m.globals_env
        out = []
        for i, call in enumerate(fn["calls"]):
            out.extend((i, callee) for callee, _ in self._callees(self.eval(mid, None, call[C_FUNC], env)))
        return out


# -- hotness --------------------------------------------------------------------------------------
#: Call-site flags that stop each kind of hotness from flowing through a call.
_SKIP = {STEP: GUARDED | HANDLER | EVAL_ONLY, SAMPLE: GUARDED | HANDLER | CACHE_FILL, EVAL: GUARDED | HANDLER | TRAIN_ONLY, EPOCH: HANDLER}
@dataclass
class _Unit:
    """A function (loop -1) or a loop of a function, or of a module's top level (fid None)."""

    mid: int
    fid: Optional[int]
    loop: int


class Hotness:
    """Roots and propagation over a linked `Program`."""

    def __init__(self, program: Program) -> None:
        self.p = program
        p = program
        self._deps: Optional[List[Set[int]]] = None
        self._kws_memo: Dict[int, Dict[int, Dict[str, Any]]] = {}
        #: (module, fid or None) -> the calls its epoch loops run once per epoch (seeded by `_roots`)
        self.epoch_sites: Dict[Tuple[int, Optional[int]], Set[int]] = {}
        #: module -> {line of a loop: [where its loader is built, with a collate_fn?]} for loops
        #: over a pinned-memory loader built in another module (filled by `loader_uses`)
        self.pinned_loops: Dict[int, Dict[str, List[Any]]] = {}
        n = len(p.functions)
        self.mod_edges = [p.module_calls(m.id) for m in p.modules]
        self._reach = {
            what: self._reaching(fid for fid, (_, fn) in enumerate(p.functions) if fn[what]) for what in ("backward", "step")
        }
        self._step_holders = self._reaching(
            fid for fid, (mid, fn) in enumerate(p.functions)
            if fid in self._reach["backward"] and fid in self._reach["step"]
            and any(self._is_step_candidate(mid, fid, i) for i in range(len(fn["loops"])))
        )
        self.hot: List[Dict[str, Tuple[Hop, ...]]] = [dict() for _ in range(n)]
        self.step_loops: Set[Tuple[int, Optional[int], int]] = set()  # (mid, fid, loop index)
        #: fid -> the call sites that run it on every training step or evaluation batch:
        #: (caller's module, caller's fid or None, index of the call)
        self.hot_sites: Dict[int, Set[Tuple[int, Optional[int], int]]] = {}
        self._by_shown: Optional[Dict[str, int]] = None
        self._roots()

    # calls of a function or module body, with the callee fids
    def _body(self, mid: int, fid: Optional[int]) -> Dict[str, Any]:
        return self.p.functions[fid][1] if fid is not None else self.p.modules[mid].summary["module"]

    def _edges(self, mid: int, fid: Optional[int]) -> List[Tuple[int, int]]:
        return self.p.edges[fid] if fid is not None else self.mod_edges[mid]

    def _reaching(self, direct: Iterable[int]) -> Set[int]:
        """The functions that run one of `direct` (themselves included), along the call graph
        backwards: linear in the graph, cycles included."""
        found = set(direct)
        todo = list(found)
        callers = self.p.callers
        while todo:
            fid = todo.pop()
            for caller, _ in callers[fid]:
                if caller not in found:
                    found.add(caller)
                    todo.append(caller)
        return found

    def reaches(self, fid: int, what: str) -> bool:
        return fid in self._reach[what]

    def _has_step_loop(self, fid: int) -> bool:
        """`fid` (or something it calls) holds a training-step loop."""
        return fid in self._step_holders

    def _loop_calls(self, body: Dict[str, Any], loop: int) -> List[int]:
        """Indices of the calls inside loop `loop` (nested loops included)."""
        inside = self._loops_within(body, loop)
        return [i for i, c in enumerate(body["calls"]) if c[C_LOOP] in inside]

    @staticmethod
    def _loops_within(body: Dict[str, Any], loop: int) -> Set[int]:
        loops = body["loops"]
        inside = {loop}
        for j in range(loop + 1, len(loops)):
            if loops[j]["parent"] in inside:
                inside.add(j)
        return inside

    def _is_step_candidate(self, mid: int, fid: Optional[int], loop: int) -> bool:
        body = self._body(mid, fid)
        calls = set(self._loop_calls(body, loop))
        inside = self._loops_within(body, loop)
        direct = [d for j in inside for d in body["loops"][j].get("direct", ())]
        callees = [c for i, c in self._edges(mid, fid) if i in calls]
        backward = "b" in direct or any(self.reaches(c, "backward") for c in callees)
        step = "s" in direct or any(self.reaches(c, "step") for c in callees)
        return backward and step

    def _runs_backward_itself(self, mid: int, fid: Optional[int], loop: int) -> bool:
        """Loop `loop` runs a backward at its own level (not only in the loops inside it): a
        direct `backward()`, or a call of a function holding no training-step loop that reaches
        one. Such a loop is a training step too (a GAN's generator update around the critic's
        inner loop), not an epoch loop."""
        body = self._body(mid, fid)
        if "b" in body["loops"][loop].get("direct", ()):
            return True
        calls = body["calls"]
        return any(
            calls[ci][C_LOOP] == loop and self.reaches(c, "backward") and not self._has_step_loop(c)
            for ci, c in self._edges(mid, fid)
        )

    def _roots(self) -> None:
        p = self.p
        queue: deque = deque()
        units: List[Tuple[int, Optional[int]]] = [(m.id, None) for m in p.modules] + [(mid, fid) for fid, (mid, _) in enumerate(p.functions)]
        epoch_loops: List[Tuple[int, Optional[int], int]] = []
        for mid, fid in units:
            body = self._body(mid, fid)
            loops = body["loops"]
            if not loops:
                continue
            cands = [i for i in range(len(loops)) if self._is_step_candidate(mid, fid, i)]
            cand_set = set(cands)
            edges = self._edges(mid, fid)
            for i in cands:
                inner = self._loops_within(body, i) - {i}
                if inner & cand_set:
                    epoch_loops.append((mid, fid, i))  # a smaller loop inside is the step
                    continue
                calls = set(self._loop_calls(body, i))
                if any(self._has_step_loop(c) for ci, c in edges if ci in calls):
                    epoch_loops.append((mid, fid, i))  # the step loop is in a callee
                    continue
                self.step_loops.add((mid, fid, i))
                self._seed_loop(queue, mid, fid, i, STEP)
        # A function with an epoch loop of its own is a whole training run (its code outside its
        # loops runs once per run): a loop that calls it, or anything that runs it, is a loop over
        # runs (hyper-parameter evolution, a sweep, repeated experiments), not over epochs.
        self._run_holders = self._reaching(
            fid for mid, fid, i in epoch_loops if fid is not None and not self._runs_backward_itself(mid, fid, i)
        )
        trains = self.step_loops | set(epoch_loops)
        for mid, fid, i in epoch_loops:
            body = self._body(mid, fid)
            calls = set(self._loop_calls(body, i))
            if any(c in self._run_holders for ci, c in self._edges(mid, fid) if ci in calls):
                continue  # a loop over training runs: nothing in it runs once per epoch
            self._seed_loop(queue, mid, fid, i, EPOCH, exclude_steps=True)
        for mid, fid in units:
            body = self._body(mid, fid)
            loops = body["loops"]
            if not loops:
                continue
            for i in range(len(loops)):
                if (mid, fid, i) in trains:
                    continue
                if fid is not None and self._is_eval_loop(mid, fid, i):
                    parent = loops[i]["parent"]
                    if parent < 0 or not self._is_eval_loop(mid, fid, parent):
                        self._seed_loop(queue, mid, fid, i, EVAL)
        for cid, (mid, q, c) in enumerate(p.classes):
            for name in ("__getitem__", "__getitems__"):
                idx = c["methods"].get(name)
                if idx is not None:
                    self._seed(queue, p.modules[mid].fids[idx], SAMPLE, ())
            if "__iter__" in c["methods"] and any("IterableDataset" in b for b in p.all_base_names(cid)):
                self._seed(queue, p.modules[mid].fids[c["methods"]["__iter__"]], SAMPLE, ())
            if "__call__" in c["methods"] and re.search(r"collat", q, re.I):
                self._seed(queue, p.modules[mid].fids[c["methods"]["__call__"]], SAMPLE, ())
        self._hand_written_loaders(queue, units)
        # functions passed as collate_fn=
        for mid, fid in units:
            body = self._body(mid, fid)
            env = None
            for call in body["calls"]:
                ref = call[C_KWS].get("collate_fn")
                if ref is None:
                    continue
                if env is None:
                    env = p._local_env(mid, fid, body) if fid is not None else p.modules[mid].globals_env
                for obj in sorted(p.eval(mid, fid, ref, env)):
                    for callee, _ in p.callees_of(obj) if obj[0] in "IC" else [(int(obj[2:]), 0)] if obj[0] in "FB" else []:
                        self._seed(queue, callee, SAMPLE, (Hop(p.modules[mid].shown, call[0], "collate_fn"),))
        self._propagate(queue)

    def _hand_written_loaders(self, queue: deque, units: List[Tuple[int, Optional[int]]]) -> None:
        """Per-sample entry points of a data loader written by hand: a loop that runs once per
        element of a batch (`for _ in range(self.batch_size):`) and fetches each sample through a
        method of a project `Dataset` subclass (`self.dataset.get_item(i)`) runs that method once
        per sample, every epoch, like `__getitem__` (the call site is the chain)."""
        p = self.p
        for mid, fid in units:
            body = self._body(mid, fid)
            edges = None
            for i, lp in enumerate(body["loops"]):
                if not _batch_size_range(lp.get("iter")):
                    continue
                if edges is None:
                    edges = self._edges(mid, fid)
                inside = set(self._loop_calls(body, i))
                for ci, callee in edges:
                    call = body["calls"][ci]
                    cid = p.fn_class[callee]
                    if ci not in inside or cid is None or call[C_FLAGS] & _SKIP[SAMPLE]:
                        continue
                    name = p.functions[callee][1]["q"].rsplit(".", 1)[-1]
                    if name.startswith("__") or not any(b.rsplit(".", 1)[-1].endswith("Dataset") for b in p.all_base_names(cid)):
                        continue  # `__init__`, `__len__`; or not a dataset
                    self._seed(queue, callee, SAMPLE, (Hop(p.modules[mid].shown, call[C_LINE], label(call[C_FUNC])),))

    def _is_eval_loop(self, mid: int, fid: int, loop: int) -> bool:
        fn = self.p.functions[fid][1]
        lp = fn["loops"][loop]
        if self.reaches(fid, "backward"):
            body_calls = set(self._loop_calls(fn, loop))
            inside = self._loops_within(fn, loop)
            if any("b" in fn["loops"][j].get("direct", ()) for j in inside):
                return False
            if any(self.reaches(c, "backward") for i, c in self.p.edges[fid] if i in body_calls):
                return False
        if lp["grad_off"] or fn["grad_off"]:
            return True
        # a model put in eval mode before the loop; a name alone (`test_*` in a test suite) is
        # no evidence of a model here: the file's own analysis still looks at such loops
        return 0 < fn["eval_call"] <= lp["line"]

    def _seed_loop(self, queue: deque, mid: int, fid: Optional[int], loop: int, kind: str, exclude_steps: bool = False) -> None:
        body = self._body(mid, fid)
        calls = set(self._loop_calls(body, loop))
        if exclude_steps:
            steps = set()
            for (m2, f2, l2) in self.step_loops:
                if m2 == mid and f2 == fid:
                    steps |= set(self._loop_calls(body, l2))
            calls -= steps
        shown = self.p.modules[mid].shown
        for i, callee in self._edges(mid, fid):
            if i not in calls:
                continue
            call = body["calls"][i]
            if call[C_FLAGS] & _SKIP[kind]:  # guarded, in an exception handler, or another mode's branch
                continue
            if call[C_FLAGS] & ONE_ITERATION and call[C_LOOP] == loop and kind in (STEP, EVAL):
                continue  # `if i == len(loader) - 1:` in the step loop: once per epoch
            if kind in (STEP, EVAL):
                self.hot_sites.setdefault(callee, set()).add((mid, fid, i))
            elif kind == EPOCH:
                self.epoch_sites.setdefault((mid, fid), set()).add(i)
            self._seed(queue, callee, kind, (Hop(shown, call[0], label(call[C_FUNC], call[C_FLAGS] & PROPERTY)),))

    def _seed(self, queue: deque, fid: int, kind: str, chain: Tuple[Hop, ...]) -> None:
        known = self.hot[fid].get(kind)
        if known is not None and len(known) <= len(chain):
            return
        self.hot[fid][kind] = chain
        queue.append((fid, kind))

    def _propagate(self, queue: deque) -> None:
        p = self.p
        while queue:
            fid, kind = queue.popleft()
            chain = self.hot[fid][kind]
            if len(chain) > 12:
                continue
            mid, fn = p.functions[fid]
            shown = p.modules[mid].shown
            for i, callee in p.edges[fid]:
                call = fn["calls"][i]
                if call[C_FLAGS] & _SKIP[kind]:
                    continue
                if kind == EPOCH and call[C_LOOP] >= 0:
                    continue  # a loop in a per-epoch function: its own roots decide
                if kind in (STEP, EVAL):
                    self.hot_sites.setdefault(callee, set()).add((mid, fid, i))
                self._seed(queue, callee, kind, chain + (Hop(shown, call[0], label(call[C_FUNC], call[C_FLAGS] & PROPERTY)),))

    # -- values and loaders across modules ---------------------------------------------------------
    def passed_constants(self) -> Dict[int, Dict[str, Optional[List[Any]]]]:
        """fid -> parameter -> the constants every call site in *another* module passes (None: a
        call site passes something else; the default counts where a call passes nothing).
        Only for functions called from other modules alone: same-file calls are the file's own
        value tracer's business."""
        p = self.p
        out: Dict[int, Dict[str, Optional[List[Any]]]] = {}
        self.scalars: Dict[int, Set[str]] = {}
        calls = list(self._all_calls())
        # per call: how many scalar parameters its caller had when it was last noted; what a call
        # notes depends on those alone, and they only grow
        noted_with = [-1] * len(calls)
        for _ in range(4):  # a step index passed on from forward to forward
            before = sum(len(v) for v in self.scalars.values())
            for k, (caller_fid, callee, call, skip, caller_mid) in enumerate(calls):
                mine = len(self.scalars.get(caller_fid, ())) if caller_fid is not None else 0
                if mine == noted_with[k]:
                    continue  # it would note what it noted then
                noted_with[k] = mine
                self._note_scalars(caller_fid, callee, p.functions[callee][1], call, skip, self._body(caller_mid, caller_fid)["assign"])
            if sum(len(v) for v in self.scalars.values()) == before:
                break
        for caller_fid, callee, call, skip, caller_mid in calls:
            callee_mid, fn = p.functions[callee]
            if callee_mid == caller_mid:
                out[callee] = {}  # a same-file caller: the file's own tracer decides
                continue
            got = out.setdefault(callee, {"__cross__": []})
            if "__cross__" not in got:
                continue
            params = [q for q in fn["params"] if not q.startswith("*")]
            passed = set()
            local = self._body(caller_mid, caller_fid)["assign"]
            for k, a in enumerate(call[C_ARGS]):
                if k + skip < len(params):
                    self._note_constant(got, params[k + skip], self._constant_of(a, local))
                    passed.add(params[k + skip])
            for kw, a in call[C_KWS].items():
                if kw in params:
                    self._note_constant(got, kw, self._constant_of(a, local))
                    passed.add(kw)
            for name in params[skip:]:
                if name not in passed and got.get(name, ()) is not None:
                    got.setdefault(name, []).append(DEFAULT)  # this call leaves it to the default
        for got in out.values():
            got.pop("__cross__", None)
        return {fid: got for fid, got in out.items() if got}

    def host_parameters(self) -> Dict[int, List[str]]:
        """fid -> the parameters of a function that tests a value for being a tensor
        (`isinstance(v, torch.Tensor)`, `summary["typed"]`) to which no call site running it on
        every training step or evaluation batch may pass a tensor: each such site passes a Python
        value there (`C_HOST`), or leaves it to its default. `*args` / `**kwargs` are named as
        written ("*args", "**kwargs"): what the extra arguments of the calls fill. A call that
        unpacks (`f(**d)`) may pass anything. Functions with no such call site are left out."""
        out: Dict[int, List[str]] = {}
        for callee, sites in self.hot_sites.items():
            fn = self.p.functions[callee][1]
            if not fn.get("typed"):
                continue
            skip = self._skip_of(callee)
            params = list(fn["params"])
            named = [q for q in params if not q.startswith("*")]
            npos = fn.get("npos", len(named))
            left = set(named[skip:]) | {q for q in params if q.startswith("*")}
            if fn.get("varkw"):
                left.add("**" + fn["varkw"])
            for mid, fid, i in sorted(sites, key=lambda s: (s[0], -1 if s[1] is None else s[1], s[2])):
                left -= _may_pass_tensor(fn, named, npos, skip, self._body(mid, fid)["calls"][i])
                if not left:
                    break
            if left:
                out[callee] = sorted(left)
        return out

    def _note_scalars(self, caller: Optional[int], callee: int, fn: Dict[str, Any], call: Any, skip: int, local: Dict[str, List[Any]]) -> None:
        """Parameters some call site passes a Python number or string (a step index, a flag):
        not tensors, whatever else they receive."""
        params = [q for q in fn["params"] if not q.startswith("*")]
        pairs = [(params[k + skip], a) for k, a in enumerate(call[C_ARGS]) if k + skip < len(params)]
        pairs += [(kw, a) for kw, a in call[C_KWS].items() if kw in params]
        mine = self.scalars.get(caller, ()) if caller is not None else ()
        for name, a in pairs:
            if a is not None and a[0] == "n" and a[1] in mine and a[1] not in local:
                self.scalars.setdefault(callee, set()).add(name)
                continue
            a = self._constant_of(a, local)
            if a is not None and a[0] == "k" and a[1] is not None:
                self.scalars.setdefault(callee, set()).add(name)

    @staticmethod
    def _constant_of(expr: Any, local: Dict[str, List[Any]]) -> Any:
        """`x` where every assignment of `x` in the caller is one constant: that constant."""
        if expr is not None and expr[0] == "n":
            values = local.get(expr[1], ())
            if len(values) == 1 and values[0] is not None and values[0][0] == "k":
                return values[0]
        return expr

    @staticmethod
    def _note_constant(got: Dict[str, Any], name: str, expr: Any) -> None:
        if name in got and got[name] is None:
            return
        if expr is not None and expr[0] == "k":
            got.setdefault(name, []).append(expr[1])
        else:
            got[name] = None

    def _all_calls(self) -> Iterable[Tuple[Optional[int], int, Any, int, int]]:
        """(caller fid or None, callee fid, the call, parameters skipped, caller module)."""
        p = self.p
        for m in p.modules:
            body = m.summary["module"]
            for i, callee in self.mod_edges[m.id]:
                call = body["calls"][i]
                yield None, callee, call, self._skip_of(callee), m.id
        for fid, edges in enumerate(p.edges):
            mid, fn = p.functions[fid]
            for i, callee in edges:
                call = fn["calls"][i]
                yield fid, callee, call, self._skip_of(callee), mid

    def _skip_of(self, callee: int) -> int:
        """How many leading parameters a call skips: `self` when it runs a method (through an
        instance, `self.meth()`, or a constructor); `Cls.meth(obj, ...)` is rare enough to ignore."""
        fn = self.p.functions[callee][1]
        return 1 if self.p.fn_class[callee] is not None and not fn.get("static") else 0

    def _env(self, mid: int, fid: Optional[int]) -> Dict[str, Set[str]]:
        """The types of a function's (or a module's) names; not kept: the program is large."""
        return self.p._local_env(mid, fid, self._body(mid, fid)) if fid is not None else self.p.modules[mid].globals_env

    def loader_uses(self) -> Dict[Tuple[int, int], Dict[str, str]]:
        """(module, line of the loader's construction) -> how loops elsewhere use it: "epoch" (it
        is iterated again every epoch: where) and "moved" (its batches go to the GPU: where)."""
        p = self.p
        out: Dict[Tuple[int, int], Dict[str, str]] = {}
        units = [(m.id, None) for m in p.modules] + [(mid, fid) for fid, (mid, _) in enumerate(p.functions)]
        envs: Dict[int, Dict[str, Set[str]]] = {}  # the functions' names, asked once each
        for mid, fid in units:
            body = self._body(mid, fid)
            loops = body["loops"]
            if not loops or not any(lp.get("iter") for lp in loops):
                continue
            env = self._env(mid, fid)
            if fid is not None:
                envs[fid] = env
            gpu = bool(p.modules[mid].summary.get("gpu"))
            hot = self.hot[fid] if fid is not None else {}
            for i, lp in enumerate(loops):
                if lp.get("iter") is None:
                    continue
                loaders = sorted(o for o in p.eval(mid, fid, lp["iter"], env) if o.startswith("L:"))
                if not loaders:
                    continue
                where = f"{p.modules[mid].shown}:{lp['line']}"
                # iterated again every epoch: the training-step loop inside an epoch loop, or a loop
                # in a function run once per epoch when this loader gets there once per epoch too
                is_step = (mid, fid, i) in self.step_loops
                outer = loops[lp["parent"]] if lp["parent"] >= 0 else None
                in_epoch_loop = is_step and outer is not None and not outer.get("once")
                moved_names: Set[str] = set()
                for j in self._loops_within(body, i):
                    moved_names.update(loops[j].get("moved", ()))
                if gpu and not moved_names & set(lp.get("targets", ())):
                    from speedlint.analyzer.loader_program import moved_by_callees

                    moved_names |= moved_by_callees(self, mid, fid, body, i, lp.get("targets", ()))  # `model(batch)` moving it in `forward`
                moved = gpu and bool(moved_names & set(lp.get("targets", ())))
                for obj in loaders:
                    _, lmid, line = obj.split(":")
                    facts = out.setdefault((int(lmid), int(line)), {})
                    if in_epoch_loop or (fid is not None and EPOCH in hot and self.reaches_per_epoch(mid, fid, lp["iter"], obj, envs)):
                        facts.setdefault("epoch", where)
                    if moved:
                        facts.setdefault("moved", where)
                # a loader built in another module that pins memory: its batches here are in
                # pinned memory (what `non_blocking=True` needs), unless a loader may not pin
                built = [tuple(map(int, o.split(":")[1:])) for o in loaders]
                if all(lmid != mid for lmid, _ in built):
                    kws = [self._loader_kws(lmid, line) for lmid, line in built]
                    if kws and all(k.get("pin_memory") == ("k", True) for k in kws):
                        lmid, line = built[0]
                        self.pinned_loops.setdefault(mid, {})[str(lp["line"])] = [
                            f"{p.modules[lmid].shown}:{line}", any("collate_fn" in k for k in kws),
                        ]
        return out

    def reaches_per_epoch(self, mid: int, fid: int, expr: Any, loader: str, envs: Dict[int, Dict[str, Set[str]]]) -> bool:
        """Whether `loader` ("L:module:line") reaches `expr` of function `fid` (a function run once
        per epoch) once per epoch: the hotness of `fid` alone does not say so when `fid` is a helper
        that other code also calls once with another loader (`log_every(loader)` run per epoch from
        `train_one_epoch`, and once from a feature-extraction pass). Followed back from the
        expression: a loader built in `fid` itself is built again on every call (SPD104's business,
        persistent workers would not outlive it); one that comes in as a parameter does so once per
        epoch only when some call site passing it does: one in an epoch loop, or one run once per
        epoch that itself gets it that way. Anything else (a `self` attribute, a global, a helper's
        return value) keeps what the hotness says."""
        return self._carried_per_epoch(mid, fid, expr, loader, envs, 0, set())

    def _fn_env(self, mid: int, fid: int, envs: Dict[int, Dict[str, Set[str]]]) -> Dict[str, Set[str]]:
        env = envs.get(fid)
        if env is None:
            env = envs[fid] = self._env(mid, fid)
        return env

    def _carried_per_epoch(self, mid: int, fid: int, expr: Any, loader: str, envs: Dict[int, Dict[str, Set[str]]], depth: int, seen: Set[Tuple[int, str]]) -> bool:
        p = self.p
        if expr is None or depth > 12:
            return True  # not followed: as the function's hotness says
        if loader not in p.eval(mid, fid, expr, self._fn_env(mid, fid, envs)):
            return False  # this part of the expression is not the loader
        fn = p.functions[fid][1]
        tag = expr[0]
        if tag == "n":
            name = expr[1]
            values = fn["assign"].get(name)
            if name not in fn["params"]:
                if not values:
                    return True  # a global, or a closure's enclosing name
                return any(self._carried_per_epoch(mid, fid, v, loader, envs, depth + 1, seen) for v in values)
            if values and any(self._carried_per_epoch(mid, fid, v, loader, envs, depth + 1, seen) for v in values):
                return True
            return self._passed_per_epoch(fid, name, loader, envs, depth, seen)
        if tag == "c":
            if len(expr) > 4 and loader == f"L:{mid}:{expr[4]}":
                return False  # built here, on every call
            carrying = [a for a in (*expr[2], *expr[3].values()) if a is not None]
            carrying = [a for a in carrying if loader in p.eval(mid, fid, a, self._fn_env(mid, fid, envs))]
            if not carrying:
                return True  # a helper's return value
            return any(self._carried_per_epoch(mid, fid, a, loader, envs, depth + 1, seen) for a in carrying)  # a wrapper: `log_every(loader)`
        if tag in ("s", "e", "i"):
            return self._carried_per_epoch(mid, fid, expr[1], loader, envs, depth + 1, seen)
        if tag == "t":
            return any(self._carried_per_epoch(mid, fid, e, loader, envs, depth + 1, seen) for e in expr[1])
        return True  # an attribute (`self.loader`): kept between calls

    def _passed_per_epoch(self, fid: int, name: str, loader: str, envs: Dict[int, Dict[str, Set[str]]], depth: int, seen: Set[Tuple[int, str]]) -> bool:
        """Some call of `fid` passes `loader` to parameter `name` once per epoch."""
        if (fid, name) in seen:
            return False  # a cycle: the other call sites decide
        seen.add((fid, name))
        p = self.p
        params = [q for q in p.functions[fid][1]["params"] if not q.startswith("*")]
        if name not in params:
            return False
        skip = self._skip_of(fid)
        position = params.index(name) - skip
        for caller, index in p.callers[fid]:
            cmid, cfn = p.functions[caller]
            call = cfn["calls"][index]
            in_epoch_loop = index in self.epoch_sites.get((cmid, caller), ())
            if not in_epoch_loop and (call[C_LOOP] >= 0 or call[C_FLAGS] & _SKIP[EPOCH] or EPOCH not in self.hot[caller]):
                continue  # a call that does not run once per epoch
            arg = call[C_KWS].get(name)
            if arg is None and 0 <= position < len(call[C_ARGS]):
                arg = call[C_ARGS][position]
            if arg is None or loader not in p.eval(cmid, caller, arg, self._fn_env(cmid, caller, envs)):
                continue  # it passes another loader
            if in_epoch_loop or self._carried_per_epoch(cmid, caller, arg, loader, envs, depth + 1, seen):
                return True
        return False

    def _loader_kws(self, mid: int, line: int) -> Dict[str, Any]:
        """The keyword arguments of the loader built at `line` of module `mid`."""
        table = self._kws_memo.get(mid)
        if table is None:
            table = self._kws_memo[mid] = {}
            m = self.p.modules[mid]
            for fid in (None, *m.fids):
                for call in self._body(mid, fid)["calls"]:
                    if call[C_KWS]:
                        got = table.setdefault(call[C_LINE], {})
                        for k, v in call[C_KWS].items():
                            got.setdefault(k, v)
            # keywords read out of `**kwargs` dicts (`loader_program._splat_keywords`)
            for at, kws in ((m.summary.get("loaders") or {}).get("splat_kws") or {}).items():
                got = table.setdefault(int(at), {})
                for k, v in kws.items():
                    got.setdefault(k, v)
        return table.get(line, {})

    def _called_from_other_modules(self) -> Set[int]:
        """Functions some other module calls unconditionally (not behind an `if`, not in a handler)."""
        out: Set[int] = set()
        for caller_fid, callee, call, _, caller_mid in self._all_calls():
            if self.p.functions[callee][0] != caller_mid and not call[C_FLAGS] & (GUARDED | HANDLER | CONDITIONAL):
                out.add(callee)
        return out

    # -- per file --------------------------------------------------------------------------------
    def seeds(self) -> Dict[str, FileSeeds]:
        """Display path -> what its rules need to know."""
        p = self.p
        out: Dict[str, FileSeeds] = {}
        for fid, params in self.passed_constants().items():
            mid = p.functions[fid][0]
            m = p.modules[mid]
            seeds = out.setdefault(m.shown, FileSeeds())
            seeds.project.setdefault("params", {})[str(p.local_index[fid])] = params
        for fid, names in self.host_parameters().items():
            m = p.modules[p.functions[fid][0]]
            out.setdefault(m.shown, FileSeeds()).project.setdefault("host_params", {})[str(p.local_index[fid])] = names
        for fid, names in self.scalars.items():
            if self.hot[fid]:  # asked about hot functions only
                mid = p.functions[fid][0]
                m = p.modules[mid]
                seeds = out.setdefault(m.shown, FileSeeds())
                seeds.project.setdefault("scalars", {})[str(p.local_index[fid])] = sorted(names)
        # cuDNN facts (SPD701), for the files that train or touch cudnn settings: whether the
        # program a file belongs to (it and the project modules it imports, or that import it)
        # builds convolutions; and, project-wide, whether the autotuner is switched on anywhere
        benchmark_on = any(m.summary.get("benchmark_on") for m in p.modules)
        fixed_shapes = any(m.summary.get("fixed_shapes") for m in p.modules)
        step_modules = {mid for mid, _, _ in self.step_loops}
        called = self._called_from_other_modules()
        conv_of = self._conv_reach()
        for m in p.modules:
            if m.id in step_modules or m.summary.get("cudnn_text"):
                seeds = out.setdefault(m.shown, FileSeeds())
                seeds.project["cudnn"] = [conv_of[m.id], benchmark_on, bool(step_modules), fixed_shapes]
        for fid in called:
            mid = p.functions[fid][0]
            if p.modules[mid].summary.get("cudnn_text"):
                seeds = out.setdefault(p.modules[mid].shown, FileSeeds())
                seeds.project.setdefault("called", []).append(p.local_index[fid])
        uses = self.loader_uses()
        for mid, loops in self.pinned_loops.items():
            out.setdefault(p.modules[mid].shown, FileSeeds()).project["pinned_loops"] = loops
        for (mid, line), facts in uses.items():
            if facts:
                seeds = out.setdefault(p.modules[mid].shown, FileSeeds())
                seeds.project.setdefault("loaders", {})[str(line)] = facts
                if "moved" in facts:
                    seeds.gpu = True  # its batches go to the GPU elsewhere
        gpu_of = [bool(m.summary.get("gpu")) for m in p.modules]
        for fid, kinds in enumerate(self.hot):
            if not kinds:
                continue
            mid, fn = p.functions[fid]
            m = p.modules[mid]
            local = p.local_index[fid]
            seeds = out.setdefault(m.shown, FileSeeds())
            seeds.functions[local] = dict(kinds)
            for chain in kinds.values():
                root = self._root_module(chain) if chain else mid
                if root is not None and gpu_of[root]:
                    seeds.gpu = True
        for mid, fid, loop in self.step_loops:
            m = p.modules[mid]
            body = self._body(mid, fid)
            seeds = out.setdefault(m.shown, FileSeeds())
            seeds.step_loops = tuple(sorted({*seeds.step_loops, body["loops"][loop]["g"]}))
        for m in p.modules:
            makers = self._module_makers(m.id)
            if makers:
                out.setdefault(m.shown, FileSeeds()).project["models"] = sorted(makers)
        # command-line option defaults declared in another module of the same program
        # (`main.py` parses, `exp/trainer.py` reads `self.args.use_amp`), for the files with seeds
        options_of = self._program_options()
        for m in p.modules:
            seeds = out.get(m.shown)
            if seeds is not None and options_of[m.id]:
                seeds.project["options"] = options_of[m.id]
        return out

    def _program_options(self) -> List[Dict[str, Any]]:
        """Per module: the on/off options declared elsewhere in its program (the modules connected
        to it by imports) with one known default each; a name declared with different defaults,
        or in the module itself (its own parser is read directly), is left out. One pass per
        connected component (a library is one component of thousands of modules)."""
        p = self.p
        component, members = self._components()
        declared: List[Dict[str, Set[str]]] = []  # per component: option -> the defaults written
        for mids in members:
            found: Dict[str, Set[str]] = {}
            for cur in mids:
                for dest, values in (p.modules[cur].summary.get("options") or {}).items():
                    found.setdefault(dest, set()).update(map(repr, values))
            declared.append(found)
        switches: List[Dict[str, bool]] = []  # per component: the options with one on/off default
        for found in declared:
            known = ((d, _literal(next(iter(vs)))) for d, vs in sorted(found.items()) if len(vs) == 1)
            switches.append({d: v for d, v in known if isinstance(v, bool)})
        out: List[Dict[str, Any]] = []
        for m in p.modules:
            own = m.summary.get("options") or {}
            out.append({d: v for d, v in switches[component[m.id]].items() if d not in own})
        return out

    def _components(self) -> Tuple[List[int], List[List[int]]]:
        """The modules connected by imports: each module's component, and each component's modules."""
        deps = self._import_deps()
        neighbours: List[Set[int]] = [set(d) for d in deps]
        for mid, targets in enumerate(deps):
            for t in targets:
                neighbours[t].add(mid)
        component = [-1] * len(self.p.modules)
        members: List[List[int]] = []
        for start in range(len(self.p.modules)):
            if component[start] >= 0:
                continue
            component[start] = len(members)
            mids = [start]
            for cur in mids:  # (the modules appended meanwhile are visited too)
                for nxt in neighbours[cur]:
                    if component[nxt] < 0:
                        component[nxt] = component[start]
                        mids.append(nxt)
            members.append(mids)
        return component, members

    def config_defaults(self, config_files: Sequence[str] = ()) -> Dict[int, Dict[str, List[Any]]]:
        """Per module: the keys of the yacs-style configs of its program (`_C = CN()`,
        `_C.DATA.NUM_WORKERS = 8` in a module that uses `CfgNode`) -> every literal value the
        program gives them (the default, and each `config.DATA.NUM_WORKERS = 0` elsewhere, matched
        by the end of its path). A key that some code sets to something else, or that a YAML
        config file of the run holds (`DATA: {NUM_WORKERS: 0}`: a config merged in may set it), is
        left out: its value is not known; so is every key when a YAML file of the run cannot be
        read as a tree. Only for the components that hold such a config."""
        p = self.p
        if not any(m.summary.get("cfgnode") and m.summary.get("config_writes") for m in p.modules):
            return {}
        component, members = self._components()
        yaml_roots: Any = ()  # (not read yet)
        out: Dict[int, Dict[str, List[Any]]] = {}
        for mids in members:
            keys = {
                key for mid in mids if p.modules[mid].summary.get("cfgnode")
                for key in p.modules[mid].summary.get("config_writes") or {}
            }
            if not keys:
                continue
            if yaml_roots == ():
                yaml_roots = _yaml_roots(config_files)
            if yaml_roots is None:
                continue
            writes = [w for mid in mids for w in (p.modules[mid].summary.get("config_writes") or {}).items()]
            known: Dict[str, List[Any]] = {}
            for key in sorted(keys):
                entries = [e for path, es in writes if path == key or path.endswith("." + key) for e in es]
                if any(len(e) < 2 for e in entries):
                    continue  # set from an expression somewhere
                if any(_holds(root, key.split(".")) for root in yaml_roots):
                    continue
                values: List[Any] = []
                for e in entries:
                    if e[1] not in values:
                        values.append(e[1])
                known[key] = values
            if known:
                for mid in mids:
                    out[mid] = known
        return out

    def _import_deps(self) -> List[Set[int]]:
        """Per module: the project modules it imports (`import x`, `from x import y`, `from . import sub`)."""
        if self._deps is not None:
            return self._deps
        p = self.p
        deps: List[Set[int]] = [set() for _ in p.modules]
        for m in p.modules:
            for imp in m.summary["imports"].values():
                if imp[0] == "mod":
                    target = p._find_module(m.id, imp[1], 0)
                else:
                    target = p._find_module(m.id, imp[1], imp[2])
                    sub = p._find_module(m.id, f"{imp[1]}.{imp[3]}" if imp[1] else imp[3], imp[2])
                    if sub is not None and sub != m.id:
                        deps[m.id].add(sub)
                if target is not None and target != m.id:
                    deps[m.id].add(target)
        self._deps = deps
        return deps

    def _conv_reach(self) -> List[bool]:
        """Per module: it, a project module it imports (transitively), or one importing it builds
        convolutions. A folder of independent scripts (one MLP agent next to conv agents) is not
        one program."""
        p = self.p
        deps = self._import_deps()
        reach: List[bool] = []
        for m in p.modules:
            seen, todo, found = {m.id}, [m.id], False
            while todo and not found:
                cur = todo.pop()
                found = bool(p.modules[cur].summary.get("conv"))
                for nxt in deps[cur]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            reach.append(found)
        importers: List[Set[int]] = [set() for _ in p.modules]
        for mid, targets in enumerate(deps):
            for t in targets:
                importers[t].add(mid)
        # a seeding helper in `utils.py` belongs to the scripts that import it
        return [r or any(reach[i] for i in importers[mid]) for mid, r in enumerate(reach)]

    def _module_makers(self, mid: int) -> Set[str]:
        """The callees (as written in this file: `Tacotron`, `build_model`, `models.resnet50`)
        whose calls give a torch module: a project subclass of `nn.Module`, or what a project
        function returns. A file's rules cannot see a class defined in another file."""
        p = self.p
        m = p.modules[mid]
        found: Set[str] = set()
        seen: Set[str] = set()
        for fid in (None, *m.fids):
            body = self._body(mid, fid)
            env: Optional[Dict[str, Set[str]]] = None
            for call in body["calls"]:
                text = _callee_text(call[1])
                if text is None or text in seen:
                    continue
                seen.add(text)
                if env is None:
                    env = self._env(mid, fid)
                if any(self._makes_module(o) for o in p.eval(mid, fid, call[1], env)):
                    found.add(text)
        return found

    def _makes_module(self, obj: str) -> bool:
        kind, _, rest = obj.partition(":")
        if kind == "C":
            return self.p.is_module_class(int(rest))
        if kind in ("F", "B"):
            return any(o[0] == "I" and self.p.is_module_class(int(o[2:])) for o in self.p.ret_types[int(rest)])
        return False

    def _root_module(self, chain: Tuple[Hop, ...]) -> Optional[int]:
        if self._by_shown is None:
            self._by_shown = {m.shown: m.id for m in self.p.modules}
        return self._by_shown.get(chain[0].path)


def _may_pass_tensor(fn: Dict[str, Any], named: List[str], npos: int, skip: int, call: List[Any]) -> Set[str]:
    """The parameters of `fn` (as `Hotness.host_parameters` names them) that `call` may pass
    something other than a Python value: what it passes there is not known to be one (`C_HOST`),
    or an unpacked sequence or mapping may fill them."""
    args, kws = call[C_ARGS], call[C_KWS]
    host = set(call[C_HOST]) if len(call) > C_HOST else set()
    star, dstar = "*" in kws, "**" in kws
    may: Set[str] = set()
    positional = named[skip:npos]
    for j, name in enumerate(positional):
        if name in kws:
            if name not in host:
                may.add(name)
        elif star or (j >= len(args) and dstar) or (j < len(args) and j not in host):
            may.add(name)
    for name in named[npos:]:  # keyword-only
        if (name in kws and name not in host) or (name not in kws and dstar):
            may.add(name)
    vararg = next((q for q in fn["params"] if q.startswith("*")), None)
    if vararg is not None and (star or any(j not in host for j in range(len(positional), len(args)))):
        may.add(vararg)
    varkw = fn.get("varkw")
    if varkw and (dstar or any(k not in host for k in kws if k not in named and k not in ("*", "**"))):
        may.add("**" + varkw)
    return may


def _yaml_roots(config_files: Sequence[str]) -> Optional[List[Any]]:
    """The top-level mappings of the run's YAML config files (`configs.sources.load`, cached);
    None when one of them cannot be read as a tree (it may set any key)."""
    from speedlint.analyzer.configs.reader import Mapping
    from speedlint.analyzer.configs.sources import load

    roots = []
    for path in config_files:
        if not path.endswith((".yaml", ".yml")):
            continue
        doc, _ = load(path)
        if doc is None:
            continue  # not readable as UTF-8: not a config a program merges either
        if not doc.understood:
            return None
        if isinstance(doc.root, Mapping):
            roots.append(doc.root)
    return roots


def _holds(root: Any, keys: List[str]) -> bool:
    """Whether the mapping `root` has the key path `keys` (`DATA: {NUM_WORKERS: ...}`)."""
    node = root
    for key in keys:
        get = getattr(node, "get", None)  # (a Mapping; a scalar or a list holds no keys)
        node = get(key) if get is not None else None
        if node is None:
            return False
    return True


def link(files: Sequence[Tuple[str, str, Dict[str, Any]]], config_files: Sequence[str] = ()) -> Dict[str, FileSeeds]:
    """Summaries of every file of a run -> the seeds of each file that the whole program makes hot.
    `config_files`: the config files the run found (absolute paths), which code may read."""
    files = [f for f in files if f[2] is not None]
    if not files:
        return {}
    program = Program(files)
    hot = Hotness(program)
    seeds = hot.seeds()
    from speedlint.analyzer.loader_program import add_data_seeds

    add_data_seeds(hot, seeds, FileSeeds, config_files)
    # frameworks (speedlint.analyzer.frameworks): TF32 anywhere, accelerate's repository config
    from speedlint.analyzer.frameworks._repo_hf import add_seeds as add_framework_seeds

    add_framework_seeds([(m.path, m.shown, m.summary) for m in program.modules], seeds, FileSeeds, config_files)
    # loader-building helpers whose worker count each call site passes (SPD101 at the call)
    from speedlint.analyzer.loader_helpers import add_helper_seeds

    add_helper_seeds(hot, seeds, FileSeeds, LOADER_NAMES)
    for mid, known in hot.config_defaults(config_files).items():
        m = program.modules[mid]
        if m.summary.get("loaders") or m.shown in seeds:  # (files that build or use a loader)
            seeds.setdefault(m.shown, FileSeeds()).project["config_defaults"] = known
    return seeds
