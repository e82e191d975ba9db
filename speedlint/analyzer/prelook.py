"""The `ast` pre-look (`AstFacts`): a cheap first look at a file with the standard library's `ast`
(5-7x faster than LibCST), before any rule runs.

A rule declares a conservative precondition on these facts (`Rule.ast_precondition`)::

    ast_precondition = staticmethod(lambda facts: facts.calls_any("backward") and facts.has_loop)

It must answer True whenever the rule *could* fire (it may answer True too often, never too
rarely). When every rule left after the text pre-filter declares one, the file is parsed with
`ast` first and LibCST runs only for the rules whose precondition holds (none: the file is done).
A file `ast` cannot parse goes to LibCST as usual (it reports the syntax error).

Text checks come first (no parse); the facts of the tree (`TreeFacts`) come from one walk over it
(`_Walk`, an explicit stack: several times faster than `ast.walk`), on first need only.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple

from speedlint.analyzer.ast_fields import FIELDS, LEAVES
from speedlint.analyzer.frameworks.hooks import BATCH_HOOKS, HOOK_CLASSES
from speedlint.analyzer.prelook_batch import BatchLoops, batch_loop_candidates
from speedlint.analyzer.pyparse import parse_quietly
from speedlint.analyzer.program.schema import EVAL, STEP
from speedlint.analyzer.textscan import FIRST_ARG_GROWERS, has_word, has_word_then, may_grow, may_use_gpu, word_ends
from speedlint.analyzer.vocabulary import EVAL_NAME, INFERENCE_VERB
from speedlint.analyzer.vocabulary import GRAD_OFF_NAMES as _GRAD_OFF
from speedlint.analyzer.vocabulary import dotted_name as _dotted

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program.seeds import FileSeeds

#: Methods that convert a tensor without arguments (`torch.tensor(x).long().cuda()`): looked
#: through when recording which calls are moved with `.to()`/`.cuda()` (SPD203).
_CAST_METHODS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte", "char"})


#: A call's result (or a parenthesized expression) followed by `.to`/`.cuda`. (Each alternative
#: in the repeated group starts with a different character and a comment runs to its newline:
#: one way to match, no catastrophic backtracking.)
_MOVE = re.compile(r"\)(?:\s|\\|#[^\n]*\n)*\.(?:\s|\\)*(?:to|cuda)\b")
#: What may follow a called name: `(` (whitespace, comments and line continuations between), or
#: `as` (an import alias).
_CALL_OR_ALIAS = re.compile(r"(?:\s|\\|#[^\n]*\n)*(?:\(|as\b)")
#: After `def` (also `async def`, and across a line continuation): the function's name.
_DEF_NAME = re.compile(r"[\s\\]+(\w+)")
_ALIAS = re.compile(r"(?:\s|\\)+as\b")
#: What follows a called name: `(`, with whitespace, comments and line continuations between.
_CALL = re.compile(r"(?:\s|\\|#[^\n]*\n)*\(")


def _reads_whole(loop: ast.AST, name: str, meta_attrs: FrozenSet[str]) -> bool:
    """Whether the `ast` subtree `loop` uses the variable `name` whole: an argument of a call
    other than `len`, an operand, a subscripted value, a returned value, or the owner of an
    attribute not in `meta_attrs` (see `AstFacts.grows_only`)."""

    def is_it(node: Optional[ast.AST]) -> bool:
        return node.__class__ is ast.Name and node.id == name

    for node in ast.walk(loop):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "len":
                continue
            args = node.args
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if fname in FIRST_ARG_GROWERS and args and is_it(args[0]):
                args = args[1:]  # `x = np.append(x, y)`: the grow itself
            if any(is_it(a) for a in args) or any(is_it(k.value) for k in node.keywords):
                return True
        elif isinstance(node, ast.BinOp):
            if is_it(node.left) or is_it(node.right):
                return True
        elif isinstance(node, (ast.Subscript, ast.Return)):
            if node.value is not None and is_it(node.value):
                return True
        elif isinstance(node, ast.Attribute):
            if is_it(node.value) and node.attr not in meta_attrs:
                return True
    return False


def _runtime_length(loop: ast.AST) -> bool:
    """A `while` loop, or `for _ in range(n)` with a length known at run time only: SPD404 reports
    a value grown there even when the loop reads it whole (a decode loop)."""
    if loop.__class__ is ast.While:
        return True
    it = getattr(loop, "iter", None)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args:
        return not all(isinstance(a, (ast.Constant, ast.UnaryOp)) for a in it.args)
    return False


def _is_eval_name(name: str) -> bool:
    return EVAL_NAME.search(name) is not None


def _last_name(node: ast.AST) -> Optional[str]:
    """`a.b.c` -> "c", `c` -> "c" (an `ast` Name/Attribute), else None."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


#: A grow site: (the grower's name, the accumulator when it is a plain name, the loop around it).
GrowSite = Tuple[str, Optional[str], ast.AST]


@dataclass(frozen=True)
class TreeFacts:
    """What one walk over a file's tree finds (`_Walk`). Names are syntactic: `from
    torch.utils.data import DataLoader as DL` puts both `DataLoader` and `DL` in `names` (and
    `DataLoader` in `imported`), so a rule that resolves `DataLoader` through any import spelling
    can test `uses_any("DataLoader")`."""

    #: every identifier used in code: names, attribute names, imported names and modules,
    #: keywords, definitions; never comments or strings
    names: FrozenSet[str]
    #: identifier -> number of mentions
    mentions: Dict[str, int]
    #: the last part of every called expression (`opt.step()` -> "step", `len(x)` -> "len"),
    #: plus what an import alias stands for (`DL(...)` after `import DataLoader as DL` -> "DataLoader")
    calls: FrozenSet[str]
    #: every part of every imported name (`from torch.autograd import backward as bw` -> "backward")
    imported: FrozenSet[str]
    #: `import x as y` / `from m import x as y`: y -> last part of x
    aliases: Dict[str, str]
    #: names of functions/methods and classes defined in the file
    functions: FrozenSet[str]
    classes: FrozenSet[str]
    #: functions (by name) with a `for`/`while` inside; with any loop or comprehension inside
    loop_functions: FrozenSet[str]
    iter_functions: FrozenSet[str]
    #: the last part of each call whose result is moved with `.to(...)`/`.cuda(...)` (through
    #: argument-less casts), aliases resolved: `torch.zeros(3).cuda()` -> "zeros"
    moved: FrozenSet[str]
    #: the last part of each call `f` in `x = f([x, ...])` or `x = f([..., x])`, aliases resolved
    grows: FrozenSet[str]
    grow_sites: List[GrowSite]
    #: an `x.eval()` or `x.train(False)` call
    calls_eval_mode: bool
    #: a `for`/`while` loop inside a `no_grad()`/`inference_mode()` block or a function decorated
    #: with one (an evaluation loop for `TorchFacts`), at any depth
    loop_in_grad_off: bool
    #: a `with no_grad()/inference_mode()` inside such a loop (in the loop's own function)
    nested_grad_off: bool
    #: innermost functions (by name; "" for module level) with an `x.eval()`/`x.train(False)` call, with a
    #: `for`/`while` loop, with a `with no_grad()` (or decorated with `no_grad`; None: unknown,
    #: `no_grad` is imported under an alias)
    eval_call_scopes: FrozenSet[str]
    loop_scopes: FrozenSet[str]
    no_grad_scopes: Optional[FrozenSet[str]]
    #: in some function (or at module level), an argument-less `.eval()` (or `.train(False)`)
    #: call starts before one of its own for/while loops
    eval_before_loop: bool
    #: whether the file has any loop or comprehension
    has_loop: bool
    #: whether the file has a `for`/`while` statement (what step, epoch and eval loops are)
    has_stmt_loop: bool


# Markers on the walk's stack: the subtree of a loop, a grad-off region or a function is done.
_END_FN, _END_GRAD, _END_LOOP, _END_GRAD_LOOP = object(), object(), object(), object()
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_STMT_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SEQUENCES = (ast.List, ast.Tuple)


class _Walk:
    """One walk over a tree (an explicit stack of nodes and markers) -> `TreeFacts`. Names and
    attributes, the most frequent nodes, are counted in the loop itself; the other kinds that
    say something go to their own method."""

    def __init__(self) -> None:
        self.names: Dict[str, int] = {}  # identifier -> number of mentions
        self.calls: Set[str] = set()
        self.imported: Set[str] = set()
        self.aliases: Dict[str, str] = {}
        self.functions: Set[str] = set()
        self.classes: Set[str] = set()
        self.moved: Set[str] = set()
        self.grows: Set[str] = set()
        self.grow_sites: List[GrowSite] = []
        self.open_loops: List[ast.AST] = []  # the for/while statements around the node
        self.open_scopes: List[int] = [0]  # id() of the functions around it (0: the module)
        # per scope (innermost function, or the module): where the first `.eval()`/`.train(False)`
        # call starts, and where the last for/while loop starts (line, column)
        self.first_eval: Dict[int, Tuple[int, int]] = {}
        self.last_loop: Dict[int, Tuple[int, int]] = {}
        self.loop_functions: Set[str] = set()  # functions with a for/while inside (at any depth)
        self.iter_functions: Set[str] = set()  # functions with a for/while or a comprehension inside
        # context of the node being looked at (restored by the markers popped after a subtree)
        self.open_functions: List[str] = []  # the functions around it
        self.eval_call_scopes: Set[str] = set()  # innermost function ("" at module level) with an eval/train call
        self.loop_scopes: Set[str] = set()  # innermost function ("" at module level) with a for/while loop
        self.no_grad_scopes: Set[str] = set()  # innermost function of a `with no_grad()`; a decorated function
        self.saved: List[Tuple[int, int]] = []  # (loop_depth, grad_loops) of the enclosing functions
        self.loop_depth = 0  # for/while loops around it, in its function
        self.grad_level = 0  # `with no_grad()`/`inference_mode()` and decorated functions around it
        self.grad_loops = 0  # loops around it in its function that are inside a grad-off region
        self.nested_grad_off = self.loop_in_grad_off = self.eval_mode = False
        self.loops = self.stmt_loops = False

    def run(self, tree: ast.AST) -> TreeFacts:
        self._walk(tree)
        return self._facts()

    def _walk(self, tree: ast.AST) -> None:
        names = self.names
        get = names.get
        Name, Attribute, Call, alias, keyword = ast.Name, ast.Attribute, ast.Call, ast.alias, ast.keyword
        AST = ast.AST
        leaves = LEAVES
        child_fields = FIELDS
        stack: list = [tree]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            kind = node.__class__
            if kind in leaves:
                continue
            if kind is object:
                self._close(node)
                continue
            if kind is Name:
                n = node.id
                names[n] = get(n, 0) + 1
                continue  # only a context below
            if kind is Attribute:
                n = node.attr
                names[n] = get(n, 0) + 1
                push(node.value)
                continue
            if kind is Call:
                self._call(node)
            elif kind is ast.Assign:
                if self.loop_depth and len(node.targets) == 1:
                    self._assign_in_loop(node)
            elif kind is keyword:
                if node.arg:
                    names[node.arg] = get(node.arg, 0) + 1
            elif kind is alias:
                self._alias(node)
                continue
            elif kind in _STMT_LOOPS:
                push(self._open_loop(node))
            elif kind in _COMPREHENSIONS:
                self.loops = True
                self.iter_functions.update(self.open_functions)
            elif kind is ast.With or kind is ast.AsyncWith:
                marker = self._open_with(node)
                if marker is not None:
                    push(marker)
            elif kind in _DEFS:
                extend(self._open_function(node))
            elif kind is ast.ClassDef:
                names[node.name] = get(node.name, 0) + 1
                self.classes.add(node.name)
            elif kind is ast.ImportFrom and node.module:
                for n in node.module.split("."):
                    names[n] = get(n, 0) + 1
            for f in child_fields[kind]:
                value = getattr(node, f, None)
                if value.__class__ is list:
                    extend(value)
                elif isinstance(value, AST):
                    push(value)

    def _count(self, name: str) -> None:
        self.names[name] = self.names.get(name, 0) + 1

    def _scope(self) -> str:
        """The innermost function around the node ("" at module level)."""
        return self.open_functions[-1] if self.open_functions else ""

    def _close(self, marker: object) -> None:
        """A subtree is done: restore the context around it."""
        if marker is _END_LOOP:
            self.loop_depth -= 1
            self.open_loops.pop()
        elif marker is _END_GRAD_LOOP:
            self.loop_depth -= 1
            self.grad_loops -= 1
            self.open_loops.pop()
        elif marker is _END_GRAD:
            self.grad_level -= 1
        elif marker is _END_FN:
            self.open_functions.pop()
            self.open_scopes.pop()
            self.loop_depth, self.grad_loops = self.saved.pop()

    def _call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute):
            attr = f.attr
            self.calls.add(attr)
            if attr == "to" or attr == "cuda":
                self._moved_call(f.value)
            elif attr == "eval":
                self.eval_call_scopes.add(self._scope())
                if not node.args and not node.keywords:
                    self._eval_starts(node)
            elif attr == "train" and any(
                a.__class__ is ast.Constant and a.value is False for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                self.eval_mode = True  # `model.train(False)`
                self.eval_call_scopes.add(self._scope())
                self._eval_starts(node)
        elif isinstance(f, ast.Name):
            self.calls.add(f.id)

    def _moved_call(self, v: ast.expr) -> None:
        """`<v>.to(...)` / `<v>.cuda(...)`: the call whose result `v` is, through argument-less casts."""
        while (
            isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _CAST_METHODS
            and not v.args and not v.keywords
        ):
            v = v.func.value
        if isinstance(v, ast.BinOp):  # `(torch.ones(n) * i).long().to(device)`
            v = v.left if v.left.__class__ is ast.Call else v.right
        if isinstance(v, ast.Call):
            vf = v.func
            if isinstance(vf, ast.Attribute):
                self.moved.add(vf.attr)
            elif isinstance(vf, ast.Name):
                self.moved.add(vf.id)

    def _eval_starts(self, node: ast.Call) -> None:
        scope = self.open_scopes[-1]
        at = (node.lineno, node.col_offset)
        self.first_eval[scope] = min(at, self.first_eval.get(scope, at))

    def _assign_in_loop(self, node: ast.Assign) -> None:
        """`x = f([x, y])` / `x = f((y, x))` (also in a conditional expression) in a loop: what
        SPD404 grows."""
        target = _dotted(node.targets[0])
        if target is None:
            return
        value = node.value
        for v in (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,):
            if not isinstance(v, ast.Call):
                continue
            vf = v.func
            fname = vf.attr if isinstance(vf, ast.Attribute) else vf.id if isinstance(vf, ast.Name) else None
            if fname is None:
                continue
            if fname in FIRST_ARG_GROWERS:  # `x = np.append(x, y)`
                grown = len(v.args) >= 2 and _dotted(v.args[0]) == target
            else:
                grown = any(
                    isinstance(a, _SEQUENCES) and len(a.elts) >= 2 and (_dotted(a.elts[0]) == target or _dotted(a.elts[-1]) == target)
                    for a in [*v.args, *(k.value for k in v.keywords)]
                )
            if grown:
                self.grows.add(fname)
                plain = target if node.targets[0].__class__ is ast.Name else None
                self.grow_sites.append((fname, plain, self.open_loops[-1]))

    def _alias(self, node: ast.alias) -> None:
        parts = node.name.split(".")
        for n in parts:
            self._count(n)
        self.imported.update(parts)
        if node.asname:
            self._count(node.asname)
            self.aliases[node.asname] = parts[-1]

    def _open_loop(self, node: ast.AST) -> object:
        """A for/while statement: its marker (pushed below its children)."""
        self.loops = self.stmt_loops = True
        self.loop_functions.update(self.open_functions)
        self.iter_functions.update(self.open_functions)
        self.loop_scopes.add(self._scope())
        scope = self.open_scopes[-1]
        at = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        self.last_loop[scope] = max(at, self.last_loop.get(scope, at))
        self.loop_depth += 1
        self.open_loops.append(node)
        if self.grad_level:
            self.loop_in_grad_off = True
            self.grad_loops += 1
            return _END_GRAD_LOOP
        return _END_LOOP

    def _open_with(self, node: ast.AST) -> Optional[object]:
        """A `with` statement: the marker of a grad-off region it opens, if it opens one."""
        grad_off = [_last_name(item.context_expr.func) for item in node.items if isinstance(item.context_expr, ast.Call)]  # type: ignore[attr-defined]
        if "no_grad" in grad_off:
            self.no_grad_scopes.add(self._scope())
        if "no_grad" in grad_off or "inference_mode" in grad_off:
            if self.grad_loops:
                self.nested_grad_off = True  # a grad-off `with` in a loop that is under grad-off
            self.grad_level += 1
            return _END_GRAD
        return None

    def _open_function(self, node: ast.AST) -> List[object]:
        """A `def`: the markers to push below its children (the function's, then a grad-off
        region's when it is decorated with one)."""
        n = node.name  # type: ignore[attr-defined]
        self._count(n)
        self.functions.add(n)
        self.open_functions.append(n)
        self.open_scopes.append(id(node))
        self.saved.append((self.loop_depth, self.grad_loops))
        self.loop_depth = self.grad_loops = 0
        markers = [_END_FN]
        decorators = [_last_name(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]  # type: ignore[attr-defined]
        if "no_grad" in decorators:
            self.no_grad_scopes.add(n)
        if "no_grad" in decorators or "inference_mode" in decorators:
            self.grad_level += 1
            markers.append(_END_GRAD)
        return markers

    def _facts(self) -> TreeFacts:
        aliases = self.aliases
        nested_grad_off, loop_in_grad_off = self.nested_grad_off, self.loop_in_grad_off
        aliased_grad_off = any(target in _GRAD_OFF and local not in _GRAD_OFF for local, target in aliases.items())
        if aliased_grad_off:
            # `from torch import no_grad as ng`: the structure above only knows the literal names
            nested_grad_off = True
            loop_in_grad_off = self.stmt_loops

        def resolved(found: Set[str]) -> FrozenSet[str]:
            return frozenset(found | {aliases[n] for n in found if n in aliases})

        last_loop = self.last_loop
        return TreeFacts(
            names=frozenset(self.names),
            mentions=self.names,
            calls=resolved(self.calls),
            imported=frozenset(self.imported),
            aliases=aliases,
            functions=frozenset(self.functions),
            classes=frozenset(self.classes),
            loop_functions=frozenset(self.loop_functions),
            iter_functions=frozenset(self.iter_functions),
            moved=resolved(self.moved),
            grows=resolved(self.grows),
            grow_sites=self.grow_sites,
            calls_eval_mode="eval" in self.calls or self.eval_mode,
            loop_in_grad_off=loop_in_grad_off,
            nested_grad_off=nested_grad_off,
            eval_call_scopes=frozenset(self.eval_call_scopes),
            loop_scopes=frozenset(self.loop_scopes),
            no_grad_scopes=None if aliased_grad_off else frozenset(self.no_grad_scopes),
            eval_before_loop=any(at < last_loop[s] for s, at in self.first_eval.items() if s in last_loop),
            has_loop=self.loops,
            has_stmt_loop=self.stmt_loops,
        )


class AstFacts:
    """The pre-look's answers for one file: text checks first (no parse), then the facts of one
    walk over its `ast` (`TreeFacts`, on first need: parsed from the text when no tree was given;
    a SyntaxError propagates). `seed` adds what the whole program says about the file."""

    def __init__(self, tree: Optional[ast.Module] = None, text: str = "") -> None:
        #: the source text (the tree is parsed from it when `tree` is None, on first need only:
        #: a precondition that a text check already answers costs no parse)
        self.text = text
        self._tree = tree
        self._text_checks = tree is None or bool(text)  # a bare tree: no text to look at
        self._facts: Optional[TreeFacts] = None
        #: `ast` is known to parse the text (an earlier phase parsed it)
        self.known_valid = False
        #: hotness kinds the whole program gives the file's functions; its code runs on a GPU
        self._seeded_kinds: FrozenSet[str] = frozenset()
        #: the ordinals of the functions the whole program runs per step or evaluation batch
        self._seeded_batch_functions: FrozenSet[int] = frozenset()
        self._seeded_gpu = False
        self._passes_loader_workers = False
        #: the keys of `FileSeeds.project` the whole program gives the file
        self.seeded_keys: FrozenSet[str] = frozenset()

    def seed(self, seeds: "FileSeeds") -> None:
        """The pre-look's answers for a file the whole program makes hot: its own text may show no
        training step, evaluation loop or dataset, yet its functions run in one elsewhere. (Before
        any question is asked.)"""
        self._seeded_kinds = frozenset(seeds.kinds)
        self._seeded_batch_functions = frozenset(i for i, kinds in seeds.functions.items() if STEP in kinds or EVAL in kinds)
        self._seeded_gpu = seeds.gpu
        self.seeded_keys = frozenset(seeds.project)
        self._passes_loader_workers = bool(seeds.project.get("loader_helper_calls"))  # (loader_helpers.KEY)

    @property
    def passes_loader_workers(self) -> bool:
        """From the whole program: a call here passes the worker count of a loader that a helper in
        another module builds (`loader_helpers`)."""
        return self._passes_loader_workers

    # -- the tree ---------------------------------------------------------------------------------
    @property
    def scanned(self) -> bool:
        """Whether the tree was walked (the text is valid Python)."""
        return self._facts is not None

    @property
    def tree(self) -> TreeFacts:
        """The facts of the tree (one walk, on first use)."""
        facts = self._facts
        if facts is None:
            tree = self._tree
            if tree is None:
                tree = parse_quietly(self.text)
            self._tree = tree  # kept for the questions one walk does not answer (`release_tree`)
            facts = self._facts = _Walk().run(tree)
        return facts

    def release_tree(self) -> None:
        """Forget the `ast` tree once the pre-look is decided (only the facts are kept)."""
        self._tree = None

    @cached_property
    def _batch_loops(self) -> BatchLoops:
        self.tree  # parsed (or given) on first need
        tree = self._tree
        if tree is None:  # asked after `release_tree`
            tree = parse_quietly(self.text)
        return batch_loop_candidates(tree, self.text if self._text_checks else None, self._seeded_batch_functions)

    def may_loop_over_batch(self, everywhere: bool) -> bool:
        """Some loop has the shape of a Python loop over a batch (`prelook_batch`): (`everywhere`)
        in code that may run hot (a training step or evaluation loop of the file, what it calls,
        a framework hook, model code, a function the whole program runs hot: `seed`), or
        (`everywhere` False) in model code (a `forward`, a loss function, what they call in the
        file)."""
        found = self._batch_loops
        return found.hot if everywhere else found.in_model

    @property
    def names(self) -> FrozenSet[str]:
        return self.tree.names

    @property
    def calls(self) -> FrozenSet[str]:
        return self.tree.calls

    @property
    def imported(self) -> FrozenSet[str]:
        return self.tree.imported

    @property
    def aliases(self) -> Dict[str, str]:
        return self.tree.aliases

    @property
    def functions(self) -> FrozenSet[str]:
        return self.tree.functions

    @property
    def classes(self) -> FrozenSet[str]:
        return self.tree.classes

    @property
    def loop_functions(self) -> FrozenSet[str]:
        return self.tree.loop_functions

    @property
    def iter_functions(self) -> FrozenSet[str]:
        return self.tree.iter_functions

    @property
    def moved(self) -> FrozenSet[str]:
        return self.tree.moved

    @property
    def grows(self) -> FrozenSet[str]:
        return self.tree.grows

    @property
    def calls_eval_mode(self) -> bool:
        return self.tree.calls_eval_mode

    @property
    def loop_in_grad_off(self) -> bool:
        return self.tree.loop_in_grad_off

    @property
    def nested_grad_off(self) -> bool:
        return self.tree.nested_grad_off

    @property
    def eval_call_scopes(self) -> FrozenSet[str]:
        return self.tree.eval_call_scopes

    @property
    def loop_scopes(self) -> FrozenSet[str]:
        return self.tree.loop_scopes

    @property
    def no_grad_scopes(self) -> Optional[FrozenSet[str]]:
        return self.tree.no_grad_scopes

    @property
    def eval_before_loop(self) -> bool:
        return self.tree.eval_before_loop

    @property
    def has_loop(self) -> bool:
        return self.tree.has_loop

    @property
    def has_stmt_loop(self) -> bool:
        return self.tree.has_stmt_loop

    def grows_only(self, meta_attrs: FrozenSet[str]) -> FrozenSet[str]:
        """`grows`, less the sites whose accumulator (a plain name) the loop also reads whole: as
        an argument (not of `len`), an operand, subscripted, returned, or through an attribute not
        in `meta_attrs`. SPD404 reports only a value that is only grown; such a read stops it,
        unless the loop's length is known at run time only (`_runtime_length`)."""
        found: Set[str] = set()
        consumed: Dict[Tuple[int, str], bool] = {}
        for fname, target, loop in self.tree.grow_sites:
            if fname in found:
                continue
            if target is not None and not _runtime_length(loop):
                key = (id(loop), target)
                if key not in consumed:
                    consumed[key] = _reads_whole(loop, target, meta_attrs)
                if consumed[key]:
                    continue
            found.add(fname)
        return frozenset(found | {self.aliases[n] for n in found if n in self.aliases})

    def mentions(self, *names: str) -> int:
        """How often the names (or import aliases of them) occur in the code."""
        wanted = set(names)
        aliases = self.aliases
        return sum(c for n, c in self.tree.mentions.items() if n in wanted or aliases.get(n) in wanted)

    # -- text checks (no parse) -------------------------------------------------------------------
    def text_has_word(self, *names: str) -> bool:
        """Whether one of the identifiers occurs in the text as a whole word (no parse)."""
        if not self._text_checks:
            return True
        return has_word(self.text, *names)

    def text_may_call(self, *names: str) -> bool:
        """Text check (no parse) for `calls_any`: one of the names followed by `(` (whitespace,
        comments and line continuations allowed between) or by `as` (an import alias)."""
        if not self._text_checks:
            return True
        return has_word_then(self.text, _CALL_OR_ALIAS, *names)

    def text_may_grow(self, *names: str) -> bool:
        """Text check (no parse) for `grows`: see `textscan.may_grow`."""
        return not self._text_checks or may_grow(self.text, names)

    # -- questions of the preconditions ---------------------------------------------------------
    def moves_any(self, *names: str) -> bool:
        """Whether the result of a call of one of the names is moved with `.to()`/`.cuda()`
        (`moved`), after a text check: a `)` followed by `.to`/`.cuda`."""
        if self._text_checks and _MOVE.search(self.text) is None:
            return False
        return not self.moved.isdisjoint(names)

    def calls_any(self, *names: str) -> bool:
        # a called name (or the import an alias comes from) is spelled out in the text
        return self.text_may_call(*names) and any(n in self.calls for n in names)

    def uses_any(self, *names: str) -> bool:
        return self.text_has_word(*names) and any(n in self.names for n in names)

    def defines_any(self, pattern: "re.Pattern[str]") -> bool:
        """Whether a function or method defined in the file has a name `pattern` searches."""
        return any(pattern.search(n) for n in self.functions)

    @cached_property
    def may_call_backward(self) -> bool:
        """A `x.backward()`/`manual_backward()` call, or `torch.autograd.backward` imported by name
        (what `TorchFacts.is_backward` accepts)."""
        if not self.text_has_word("backward", "manual_backward"):
            return False
        return "backward" in self.calls or "manual_backward" in self.calls or "backward" in self.imported

    @cached_property
    def may_have_training_step(self) -> bool:
        """A `for`/`while` loop, a backward and an optimizer step call: what a training-step loop
        (`TorchFacts.step_loops`, hence also epoch loops and step functions) needs. Seeded: the
        whole program runs a function here on every training step or once per epoch."""
        if "step" in self._seeded_kinds or "epoch" in self._seeded_kinds:
            return True
        if not self.text_has_word("step", "optimizer_step") or not self.may_call_backward:
            return False
        return self.has_stmt_loop and ("step" in self.calls or "optimizer_step" in self.calls)

    @cached_property
    def defines_eval_function(self) -> bool:
        """A function whose name says eval/valid/test/predict/infer (`TorchFacts.is_eval_function`)."""
        return self.defines_any(EVAL_NAME)

    @cached_property
    def may_have_eval_loop(self) -> bool:
        """What an evaluation loop (`TorchFacts.eval_loops`) needs: a `for`/`while` loop under
        `no_grad`/`inference_mode`, an `.eval()`/`.train(False)` call, or a loop inside a function
        whose name says eval/valid/test/predict/infer. Seeded: the whole program runs a function
        here on every evaluation batch."""
        if "eval" in self._seeded_kinds:
            return True
        if not self._eval_words and not self.text_has_word(*_GRAD_OFF):
            return False
        return self.has_stmt_loop and (self.loop_in_grad_off or self.may_have_named_eval_loop)

    @cached_property
    def may_have_named_eval_loop(self) -> bool:
        """An evaluation loop by name or by `.eval()` (not only by `no_grad`): a `for`/`while` loop
        after an argument-less `.eval()` (or `.train(False)`) call in the same function (or both at
        module level), or a loop in a function named eval/valid/test/... (what SPD602 looks at:
        evaluation loops that do *not* turn gradients off)."""
        if not self._eval_words or not self._eval_loop_words:
            return False
        return self.has_stmt_loop and (self.eval_before_loop or any(_is_eval_name(n) for n in self.loop_scopes if n))

    @cached_property
    def may_have_grad_off_inference(self) -> bool:
        """SPD601's candidates: a `no_grad` block or decorator in evaluation code (an `.eval()` /
        `.train(False)` call, an eval-named function, a training step, or a grad-off block in a loop
        that is itself under grad-off). Text checks first: most files need no parse."""
        if not self.text_has_word("no_grad"):
            return False
        if self._inference_named_def and "no_grad" in self.names:
            return True  # `@torch.no_grad()` on `decode()` / `recognize()` ...
        if self.run_per_eval_batch and "no_grad" in self.names:
            return True  # a helper an evaluation loop elsewhere calls on every batch
        if not (self._eval_words or self._nested_grad_off_words or self.may_have_training_step):
            return False
        if "no_grad" not in self.names:
            return False
        if self.may_have_training_step or self.nested_grad_off:
            return True  # per-epoch evaluation between steps; a grad-off loop around the block
        scopes = self.no_grad_scopes
        if scopes is None:
            return self.calls_eval_mode or self.defines_eval_function
        # the block's own function is eval-named, or calls `.eval()`/`.train(...)` itself
        return not scopes.isdisjoint(self.eval_call_scopes) or any(_is_eval_name(n) for n in scopes if n)

    @cached_property
    def _nested_grad_off_words(self) -> bool:
        """Text check for `nested_grad_off`: two grad-off mentions, or one imported under an alias."""
        if not self._text_checks:
            return True
        text = self.text
        ends = [end for word in _GRAD_OFF if word in text for end in islice(word_ends(text, word), 2)]
        return len(ends) >= 2 or any(_ALIAS.match(text, end) for end in ends)

    @cached_property
    def _eval_words(self) -> bool:
        """Text check (no parse) for `calls_eval_mode` / an eval-named function: the word `eval` or
        `train`, or a `def` whose name `EVAL_NAME` matches."""
        if not self._text_checks:
            return True
        return self.text_has_word("eval", "train") or self._eval_named_def

    @cached_property
    def _eval_named_def(self) -> bool:
        """Text check: a `def` whose name `EVAL_NAME` matches."""
        return self._defines_name_like(EVAL_NAME)

    @cached_property
    def _inference_named_def(self) -> bool:
        """Text check: a `def` whose name `INFERENCE_VERB` matches."""
        return self._defines_name_like(INFERENCE_VERB)

    def _defines_name_like(self, pattern: "re.Pattern[str]") -> bool:
        text = self.text
        for end in word_ends(text, "def"):
            name = _DEF_NAME.match(text, end)
            if name is not None and pattern.search(name.group(1)):
                return True
        return False

    @cached_property
    def _eval_loop_words(self) -> bool:
        """Text check for `may_have_named_eval_loop`: a `for`/`while`, and an `eval(...)` call, a
        `train(...)` call and a `False`, or an eval-named `def`."""
        if not self._text_checks:
            return True
        text = self.text
        if not has_word(text, "for", "while"):
            return False
        if has_word_then(text, _CALL, "eval") or ("False" in text and has_word_then(text, _CALL, "train")):
            return True
        return self._eval_named_def

    @cached_property
    def may_have_sample_function(self) -> bool:
        """What `TorchFacts.sample_functions` needs: `__getitem__`/`__getitems__`, a `collate_fn=`,
        or a `__call__` in a class whose name says collate. Seeded: the whole program runs a
        function here for every sample."""
        if "sample" in self._seeded_kinds:
            return True
        if "__getitem__" in self.names or "__getitems__" in self.names or "collate_fn" in self.names:
            return True
        return "__call__" in self.functions and any("collat" in c.lower() for c in self.classes)

    @cached_property
    def may_have_hook(self) -> bool:
        """A framework per-batch hook (`speedlint.analyzer.providers.hot.hook_of`): a method named like one
        and a mention of one of the framework base classes."""
        if self.functions.isdisjoint(BATCH_HOOKS):
            return False
        return not self.names.isdisjoint(HOOK_CLASSES)

    @cached_property
    def may_run_hot(self) -> bool:
        """Some code may run per training step, per evaluation batch or per sample
        (`speedlint.analyzer.providers.hot.hot_context`, framework hooks aside); seeded: the whole
        program makes some function here hot."""
        if self._seeded_kinds:
            return True
        return self.may_have_training_step or self.may_have_eval_loop or self.may_have_sample_function

    @cached_property
    def run_per_eval_batch(self) -> bool:
        """The whole program says some function here runs on every evaluation batch of a loop in
        another module (`seed`); the file's own text cannot tell."""
        return "eval" in self._seeded_kinds

    @cached_property
    def may_use_gpu(self) -> bool:
        """Exactly `FileContext.may_use_gpu` (the same test on the same text); seeded: the code
        that makes the file hot may run on a GPU."""
        return self._seeded_gpu or may_use_gpu(self.text)
