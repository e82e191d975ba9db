"""The engine: files -> pre-filter -> `ast` pre-look -> one parse -> one batched traversal -> findings.

1. A file is looked at only when one of the enabled rules' trigger tokens occurs in its text.
2. Each rule's `ast_precondition` is asked (`AstFacts`: text checks first, then one `ast` parse
   and walk when needed); LibCST runs only for the rules whose precondition holds.
3. The file is parsed once; those rules run in one batched traversal (`providers.walk`, which
   does not rebuild the tree like LibCST's `visit`); the shared facts (`FileContext`) are
   computed on first use and at most once.
4. A per-file failure (syntax error, bad encoding, unreadable) becomes a `Diagnostic`; the run goes on.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Type

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.walk import indexed, visitor_methods
from speedlint.analyzer.providers.walk import visit_batched as fast_visit_batched
from speedlint.analyzer.findings import FileResult, Profile  # noqa: F401 - re-exported
from speedlint.analyzer.rule import Diagnostic, Edit, Finding, Rule
from speedlint.analyzer.sources import Source
from speedlint.analyzer.program import USED_ELSEWHERE
from speedlint.analyzer.textscan import FIRST_ARG_GROWERS, has_word, has_word_then, may_grow, may_use_gpu, word_ends

if TYPE_CHECKING:  # pragma: no cover - `ast` is imported lazily where it is needed
    import ast

    from speedlint.analyzer.program import FileSeeds


@dataclass
class Analysis:
    """A parsed file with its findings, still tied to the tree (for the fix engine)."""

    ctx: Optional[FileContext]
    findings: List[Finding]
    diagnostics: List[Diagnostic] = field(default_factory=list)


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
#: The last parts of what `TorchFacts.is_grad_off` accepts (`torch.no_grad`, `torch.inference_mode`).
_GRAD_OFF = frozenset({"no_grad", "inference_mode"})


#: `ast` class -> the fields that may hold child nodes (`AstFacts._scan`)
_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def _reads_whole(loop, name: str, meta_attrs: frozenset) -> bool:  # type: ignore[no-untyped-def]
    """Whether the `ast` subtree `loop` uses the variable `name` whole: an argument of a call
    other than `len`, an operand, a subscripted value, a returned value, or the owner of an
    attribute not in `meta_attrs` (see `AstFacts.grows_only`)."""
    import ast

    def is_it(node) -> bool:  # type: ignore[no-untyped-def]
        return node.__class__ is ast.Name and node.id == name  # type: ignore[no-any-return]

    for node in ast.walk(loop):
        kind = node.__class__
        if kind is ast.Call:
            f = node.func
            if f.__class__ is ast.Name and f.id == "len":
                continue
            args = node.args
            fname = f.attr if f.__class__ is ast.Attribute else f.id if f.__class__ is ast.Name else None
            if fname in FIRST_ARG_GROWERS and args and is_it(args[0]):
                args = args[1:]  # `x = np.append(x, y)`: the grow itself
            if any(is_it(a) for a in args) or any(is_it(k.value) for k in node.keywords):
                return True
        elif kind is ast.BinOp:
            if is_it(node.left) or is_it(node.right):
                return True
        elif kind is ast.Subscript or kind is ast.Return:
            if node.value is not None and is_it(node.value):
                return True
        elif kind is ast.Attribute:
            if is_it(node.value) and node.attr not in meta_attrs:
                return True
    return False


def _runtime_length(loop) -> bool:  # type: ignore[no-untyped-def]
    """A `while` loop, or `for _ in range(n)` with a length known at run time only: SPD404 reports
    a value grown there even when the loop reads it whole (a decode loop)."""
    import ast

    if loop.__class__ is ast.While:
        return True
    it = getattr(loop, "iter", None)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and it.args:
        return not all(isinstance(a, (ast.Constant, ast.UnaryOp)) for a in it.args)
    return False


def _is_eval_name(name: str) -> bool:
    from speedlint.analyzer.providers.training import EVAL_NAME

    return EVAL_NAME.search(name) is not None


def _last_name(node) -> Optional[str]:  # type: ignore[no-untyped-def]
    """`a.b.c` -> "c", `c` -> "c" (an `ast` Name/Attribute), else None."""
    kind = node.__class__.__name__
    if kind == "Attribute":
        return node.attr  # type: ignore[no-any-return]
    if kind == "Name":
        return node.id  # type: ignore[no-any-return]
    return None


def _dotted(node) -> Optional[str]:  # type: ignore[no-untyped-def]
    """`a.b.c` for an `ast` Name/Attribute chain, else None (like `providers.names.dotted`)."""
    import ast

    parts = []
    while node.__class__ is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class AstFacts:
    """A cheap first look at a file with the standard library's `ast` (5-7x faster than LibCST).

    A rule may declare a conservative precondition on these facts::

        ast_precondition = staticmethod(lambda facts: facts.calls_any("backward") and facts.has_loop)

    It must answer True whenever the rule *could* fire (it may answer True too often, never too
    rarely). When every rule left after the text pre-filter declares one, the file is parsed with
    `ast` first and LibCST runs only for the rules whose precondition holds (none: the file is
    done). A file `ast` cannot parse goes to LibCST as usual (it reports the syntax error).

    The facts come from one walk over the tree (an explicit stack: several times faster than
    `ast.walk`). Names are syntactic: `from torch.utils.data import DataLoader as DL` puts both
    `DataLoader` and `DL` in `names` (and `DataLoader` in `imported`), so a rule that resolves
    `DataLoader` through any import spelling can test `uses_any("DataLoader")`.
    """

    #: what the walk over the tree sets (the first use of one of them parses the text)
    _FROM_TREE = frozenset({
        "names", "_mentions", "calls", "imported", "aliases", "functions", "classes", "loop_functions",
        "iter_functions", "moved", "grows", "_grow_sites", "calls_eval_mode", "loop_in_grad_off", "nested_grad_off",
        "has_loop", "has_stmt_loop", "eval_before_loop", "eval_call_scopes", "loop_scopes", "no_grad_scopes",
    })

    #: set from the whole program (`seeded_facts`): a call here passes the worker count of a
    #: loader that a helper in another module builds (`loader_helpers`)
    passes_loader_workers = False

    def __init__(self, tree: Optional["ast.Module"] = None, text: str = "") -> None:
        #: the source text (the tree is parsed from it when `tree` is None, on first need only:
        #: a precondition that a text check already answers costs no parse)
        self.text = text
        self._tree = tree
        self._text_checks = tree is None or bool(text)  # a bare tree: no text to look at

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        if name in AstFacts._FROM_TREE and "_scanned" not in self.__dict__:
            self._scan()
            return getattr(self, name)
        raise AttributeError(name)

    def _scan(self) -> None:
        """One walk over the tree (parsed from the text when needed: SyntaxError propagates)."""
        import ast

        tree = self._tree
        if tree is None:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # invalid escape sequences etc.: LibCST's business
                tree = ast.parse(self.text)
        self._tree = None  # not kept: only the facts are
        self._scanned = True
        names: Dict[str, int] = {}  # identifier -> number of mentions
        calls: set = set()
        imported: set = set()
        aliases: Dict[str, str] = {}
        functions: set = set()
        classes: set = set()
        moved: set = set()
        grows: set = set()
        grow_sites: List[Tuple[str, Optional[str], "ast.AST"]] = []  # (call name, plain-name target, loop)
        open_loops: list = []  # the for/while statements around it
        open_scopes: List[int] = [0]  # id() of the functions around it (0: the module)
        # per scope (innermost function, or the module): where the first `.eval()`/`.train(False)`
        # call starts, and where the last for/while loop starts (line, column)
        first_eval: Dict[int, Tuple[int, int]] = {}
        last_loop: Dict[int, Tuple[int, int]] = {}
        loop_functions: set = set()  # functions with a for/while inside (at any depth)
        iter_functions: set = set()  # functions with a for/while or a comprehension inside
        # context of the node being looked at (restored by the markers popped after a subtree)
        open_functions: List[str] = []  # the functions around it
        eval_call_scopes: set = set()  # innermost function ("" at module level) with an eval/train call
        loop_scopes: set = set()  # innermost function ("" at module level) with a for/while loop
        no_grad_scopes: set = set()  # innermost function of a `with no_grad()`; a decorated function
        saved: List[Tuple[int, int]] = []  # (loop_depth, grad_loops) of the enclosing functions
        loop_depth = 0  # for/while loops around it, in its function
        grad_level = 0  # `with no_grad()`/`inference_mode()` and decorated functions around it
        grad_loops = 0  # loops around it in its function that are inside a grad-off region
        nested_grad_off = loop_in_grad_off = eval_mode = False
        loops = stmt_loops = False
        get = names.get
        Call, Name, Attribute, alias, keyword, BinOp = ast.Call, ast.Name, ast.Attribute, ast.alias, ast.keyword, ast.BinOp
        Assign, Constant, ClassDef, ImportFrom = ast.Assign, ast.Constant, ast.ClassDef, ast.ImportFrom
        With, AsyncWith = ast.With, ast.AsyncWith
        defs = (ast.FunctionDef, ast.AsyncFunctionDef)
        stmt_loop_kinds = (ast.For, ast.AsyncFor, ast.While)
        comp_kinds = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
        sequences = (ast.List, ast.Tuple)
        AST = ast.AST
        # nothing to learn below these (list elements may be None or str: `Dict.keys`, `Global.names`)
        leaves = {type(None), str, Constant, ast.Load, ast.Store, ast.Del}
        child_fields = _CHILD_FIELDS
        END_FN, END_GRAD, END_LOOP, END_GRAD_LOOP = object(), object(), object(), object()
        stack: list = [tree]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            kind = node.__class__
            if kind in leaves:
                continue
            if kind is object:  # a marker: a subtree is done, restore the context
                if node is END_LOOP:
                    loop_depth -= 1
                    open_loops.pop()
                elif node is END_GRAD_LOOP:
                    loop_depth -= 1
                    grad_loops -= 1
                    open_loops.pop()
                elif node is END_GRAD:
                    grad_level -= 1
                elif node is END_FN:
                    open_functions.pop()
                    open_scopes.pop()
                    loop_depth, grad_loops = saved.pop()
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
                f = node.func
                fk = f.__class__
                if fk is Attribute:
                    attr = f.attr
                    calls.add(attr)
                    if attr == "to" or attr == "cuda":
                        v = f.value
                        while (
                            v.__class__ is Call and v.func.__class__ is Attribute and v.func.attr in _CAST_METHODS
                            and not v.args and not v.keywords
                        ):
                            v = v.func.value
                        if v.__class__ is BinOp:  # `(torch.ones(n) * i).long().to(device)`
                            v = v.left if v.left.__class__ is Call else v.right
                        if v.__class__ is Call:
                            vf = v.func
                            if vf.__class__ is Attribute:
                                moved.add(vf.attr)
                            elif vf.__class__ is Name:
                                moved.add(vf.id)
                    elif attr == "eval":
                        eval_call_scopes.add(open_functions[-1] if open_functions else "")
                        if not node.args and not node.keywords:
                            at = (node.lineno, node.col_offset)
                            first_eval[open_scopes[-1]] = min(at, first_eval.get(open_scopes[-1], at))
                    elif attr == "train" and any(
                        a.__class__ is Constant and a.value is False for a in [*node.args, *(k.value for k in node.keywords)]
                    ):
                        eval_mode = True  # `model.train(False)`
                        eval_call_scopes.add(open_functions[-1] if open_functions else "")
                        at = (node.lineno, node.col_offset)
                        first_eval[open_scopes[-1]] = min(at, first_eval.get(open_scopes[-1], at))
                elif fk is Name:
                    calls.add(f.id)
            elif kind is Assign:
                # `x = f([x, y])` / `x = f((y, x))` (also in a conditional expression) in a loop:
                # what SPD404 grows
                if loop_depth and len(node.targets) == 1:
                    target = _dotted(node.targets[0])
                    if target is not None:
                        value = node.value
                        for v in (value.body, value.orelse) if value.__class__ is ast.IfExp else (value,):
                            if v.__class__ is not Call:
                                continue
                            vf = v.func
                            fname = vf.attr if vf.__class__ is Attribute else vf.id if vf.__class__ is Name else None
                            if fname is None:
                                continue
                            if fname in FIRST_ARG_GROWERS:  # `x = np.append(x, y)`
                                grown = len(v.args) >= 2 and _dotted(v.args[0]) == target
                            else:
                                grown = any(
                                    a.__class__ in sequences and len(a.elts) >= 2 and (_dotted(a.elts[0]) == target or _dotted(a.elts[-1]) == target)
                                    for a in [*v.args, *(k.value for k in v.keywords)]
                                )
                            if grown:
                                grows.add(fname)
                                plain = target if node.targets[0].__class__ is Name else None
                                grow_sites.append((fname, plain, open_loops[-1]))
            elif kind is keyword:
                if node.arg:
                    names[node.arg] = get(node.arg, 0) + 1
            elif kind is alias:
                parts = node.name.split(".")
                for n in parts:
                    names[n] = get(n, 0) + 1
                imported.update(parts)
                if node.asname:
                    names[node.asname] = get(node.asname, 0) + 1
                    aliases[node.asname] = parts[-1]
                continue
            elif kind in stmt_loop_kinds:
                loops = stmt_loops = True
                loop_functions.update(open_functions)
                iter_functions.update(open_functions)
                loop_scopes.add(open_functions[-1] if open_functions else "")
                at = (node.lineno, node.col_offset)
                last_loop[open_scopes[-1]] = max(at, last_loop.get(open_scopes[-1], at))
                loop_depth += 1
                open_loops.append(node)
                if grad_level:
                    loop_in_grad_off = True
                    grad_loops += 1
                    push(END_GRAD_LOOP)
                else:
                    push(END_LOOP)
            elif kind in comp_kinds:
                loops = True
                iter_functions.update(open_functions)
            elif kind is With or kind is AsyncWith:
                grad_off = [_last_name(item.context_expr.func) for item in node.items if item.context_expr.__class__ is Call]
                if "no_grad" in grad_off:
                    no_grad_scopes.add(open_functions[-1] if open_functions else "")
                if "no_grad" in grad_off or "inference_mode" in grad_off:
                    if grad_loops:
                        nested_grad_off = True  # a grad-off `with` in a loop that is under grad-off
                    grad_level += 1
                    push(END_GRAD)
            elif kind in defs:
                n = node.name
                names[n] = get(n, 0) + 1
                functions.add(n)
                open_functions.append(n)
                open_scopes.append(id(node))
                saved.append((loop_depth, grad_loops))
                loop_depth = grad_loops = 0
                push(END_FN)
                decorators = [_last_name(d.func if d.__class__ is Call else d) for d in node.decorator_list]
                if "no_grad" in decorators:
                    no_grad_scopes.add(n)
                if "no_grad" in decorators or "inference_mode" in decorators:
                    grad_level += 1
                    push(END_GRAD)
            elif kind is ClassDef:
                names[node.name] = get(node.name, 0) + 1
                classes.add(node.name)
            elif kind is ImportFrom and node.module:
                for n in node.module.split("."):
                    names[n] = get(n, 0) + 1
            fields = child_fields.get(kind)
            if fields is None:
                fields = child_fields[kind] = tuple(f for f in kind._fields if f not in ("ctx", "type_comment"))
            for f in fields:
                value = getattr(node, f, None)
                if value.__class__ is list:
                    extend(value)
                elif isinstance(value, AST):
                    push(value)
        aliased_grad_off = any(target in _GRAD_OFF and local not in _GRAD_OFF for local, target in aliases.items())
        if aliased_grad_off:
            # `from torch import no_grad as ng`: the structure above only knows the literal names
            nested_grad_off = True
            loop_in_grad_off = stmt_loops

        def resolved(found: set) -> frozenset:
            return frozenset(found | {aliases[n] for n in found if n in aliases})

        #: every identifier used in code: names, attribute names, imported names and modules,
        #: keywords, definitions; never comments or strings
        self.names = frozenset(names)
        self._mentions = names
        #: the last part of every called expression (`opt.step()` -> "step", `len(x)` -> "len"),
        #: plus what an import alias stands for (`DL(...)` after `import DataLoader as DL` -> "DataLoader")
        self.calls = resolved(calls)
        #: every part of every imported name (`from torch.autograd import backward as bw` -> "backward")
        self.imported = frozenset(imported)
        #: `import x as y` / `from m import x as y`: y -> last part of x
        self.aliases = aliases
        #: names of functions/methods and classes defined in the file
        self.functions = frozenset(functions)
        self.classes = frozenset(classes)
        #: functions (by name) with a `for`/`while` inside; with any loop or comprehension inside
        self.loop_functions = frozenset(loop_functions)
        self.iter_functions = frozenset(iter_functions)
        #: the last part of each call whose result is moved with `.to(...)`/`.cuda(...)` (through
        #: argument-less casts), aliases resolved: `torch.zeros(3).cuda()` -> "zeros"
        self.moved = resolved(moved)
        #: the last part of each call `f` in `x = f([x, ...])` or `x = f([..., x])`, aliases resolved
        self.grows = resolved(grows)
        self._grow_sites = grow_sites
        #: an `x.eval()` or `x.train(False)` call
        self.calls_eval_mode = "eval" in calls or eval_mode
        #: a `for`/`while` loop inside a `no_grad()`/`inference_mode()` block or a function decorated
        #: with one (an evaluation loop for `TorchFacts`), at any depth
        self.loop_in_grad_off = loop_in_grad_off
        #: a `with no_grad()/inference_mode()` inside such a loop (in the loop's own function)
        self.nested_grad_off = nested_grad_off
        #: innermost functions (by name; "" for module level) with an `x.eval()`/`x.train(False)` call, with a
        #: `for`/`while` loop, with a `with no_grad()` (or decorated with `no_grad`; None: unknown,
        #: `no_grad` is imported under an alias)
        self.eval_call_scopes = frozenset(eval_call_scopes)
        #: in some function (or at module level), an argument-less `.eval()` (or `.train(False)`)
        #: call starts before one of its own for/while loops
        self.eval_before_loop = any(at < last_loop[s] for s, at in first_eval.items() if s in last_loop)
        self.loop_scopes = frozenset(loop_scopes)
        self.no_grad_scopes: Optional[frozenset] = None if aliased_grad_off else frozenset(no_grad_scopes)
        #: whether the file has any loop or comprehension
        self.has_loop = loops
        #: whether the file has a `for`/`while` statement (what step, epoch and eval loops are)
        self.has_stmt_loop = stmt_loops

    def grows_only(self, meta_attrs: frozenset) -> frozenset:
        """`grows`, less the sites whose accumulator (a plain name) the loop also reads whole: as
        an argument (not of `len`), an operand, subscripted, returned, or through an attribute not
        in `meta_attrs`. SPD404 reports only a value that is only grown; such a read stops it,
        unless the loop's length is known at run time only (`_runtime_length`)."""
        found: set = set()
        consumed: Dict[Tuple[int, str], bool] = {}
        for fname, target, loop in self._grow_sites:
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
        return sum(c for n, c in self._mentions.items() if n in wanted or self.aliases.get(n) in wanted)

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
        (`TorchFacts.step_loops`, hence also epoch loops and step functions) needs."""
        if not self.text_has_word("step", "optimizer_step") or not self.may_call_backward:
            return False
        return self.has_stmt_loop and ("step" in self.calls or "optimizer_step" in self.calls)

    @cached_property
    def defines_eval_function(self) -> bool:
        """A function whose name says eval/valid/test/predict/infer (`TorchFacts.is_eval_function`)."""
        from speedlint.analyzer.providers.training import EVAL_NAME

        return self.defines_any(EVAL_NAME)

    @cached_property
    def may_have_eval_loop(self) -> bool:
        """What an evaluation loop (`TorchFacts.eval_loops`) needs: a `for`/`while` loop under
        `no_grad`/`inference_mode`, an `.eval()`/`.train(False)` call, or a loop inside a function
        whose name says eval/valid/test/predict/infer."""
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
        from speedlint.analyzer.providers.training import EVAL_NAME

        return self._defines_name_like(EVAL_NAME)

    @cached_property
    def _inference_named_def(self) -> bool:
        """Text check: a `def` whose name `INFERENCE_VERB` matches."""
        from speedlint.analyzer.providers.training import INFERENCE_VERB

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
        or a `__call__` in a class whose name says collate."""
        if "__getitem__" in self.names or "__getitems__" in self.names or "collate_fn" in self.names:
            return True
        return "__call__" in self.functions and any("collat" in c.lower() for c in self.classes)

    @cached_property
    def may_have_hook(self) -> bool:
        """A framework per-batch hook (`speedlint.analyzer.providers.hot.hook_of`): a method named like one
        and a mention of one of the framework base classes."""
        from speedlint.analyzer.providers.hot import EVAL_HOOKS, HOOK_BASES, STEP_HOOKS

        if self.functions.isdisjoint(STEP_HOOKS) and self.functions.isdisjoint(EVAL_HOOKS):
            return False
        return any(base.rsplit(".", 1)[-1] in self.names for base in HOOK_BASES)

    @cached_property
    def may_run_hot(self) -> bool:
        """Some code may run per training step, per evaluation batch or per sample
        (`speedlint.analyzer.providers.hot.hot_context`, framework hooks aside)."""
        return self.may_have_training_step or self.may_have_eval_loop or self.may_have_sample_function

    @cached_property
    def run_per_eval_batch(self) -> bool:
        """The whole program says some function here runs on every evaluation batch of a loop in
        another module (`seeded_facts`); the file's own text cannot tell."""
        return False

    @cached_property
    def may_use_gpu(self) -> bool:
        """Exactly `FileContext.may_use_gpu` (the same test on the same text)."""
        return may_use_gpu(self.text)


_AST_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def summarize_and_prelook(
    text: str, rules: Sequence[Type[Rule]], shared: Optional[Dict[Any, Any]] = None
) -> Tuple[Optional[dict], Optional[List[Type[Rule]]]]:
    """One `ast` parse for both the whole-program summary of `text` and the rules that survive
    the text pre-filter and the pre-look (None: they cannot be decided without LibCST).
    `shared`: see `program.compact`."""
    import ast
    import warnings

    from speedlint.analyzer.program import summarize

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, "<speedlint>", "exec", ast.PyCF_ONLY_AST)
    except _AST_ERRORS:
        return None, None  # LibCST decides (and reports the syntax error)
    summary = summarize(text, tree, shared)
    enabled = [r for r in rules if r.can_fire_on(text)]
    if enabled and all(getattr(r, "ast_precondition", None) is not None for r in enabled):
        enabled = _prelook(AstFacts(tree, text), enabled)
    return summary, enabled


def ast_prelook(text: str, rules: Sequence[Type[Rule]]) -> List[Type[Rule]]:
    """The rules whose `ast_precondition` holds on `text` (all of them when `ast` cannot parse it)."""
    return _prelook(AstFacts(None, text), rules)


def _prelook(facts: AstFacts, rules: Sequence[Type[Rule]]) -> List[Type[Rule]]:
    try:  # the text is parsed on first need only: text checks may answer first
        return [r for r in rules if r.ast_precondition(facts)]  # type: ignore[attr-defined]
    except _AST_ERRORS:
        return list(rules)  # `ast` cannot parse it: LibCST decides (and reports the error)


def _is_valid_python(facts: AstFacts) -> bool:
    """Whether `ast` parses the text (the pre-look's or the program phase's parse counts; else it
    is parsed here)."""
    if "_scanned" in facts.__dict__ or "_valid" in facts.__dict__:
        return True
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(facts.text, "<speedlint>", "exec", ast.PyCF_ONLY_AST)
    except _AST_ERRORS:
        return False
    return True


def _skip_validation(self: cst.CSTNode) -> None:
    return None


def parse_valid_module(text: str) -> cst.Module:
    """`cst.parse_module` for a text known to be valid Python (`ast` parsed it).

    LibCST validates every node it builds (`CSTNode.__post_init__` -> `_validate`): about a
    quarter of the parse time, re-checking what the grammar already guarantees for parsed code.
    Here that check is skipped for the nodes the parser builds, and only for them (it is put
    back before this returns). The tree is the same (`deep_equals`, tested).
    """
    base = cst.CSTNode
    saved = base.__dict__.get("__post_init__")
    if saved is None:  # pragma: no cover - another LibCST: parse as usual
        return cst.parse_module(text)
    base.__post_init__ = _skip_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        base.__post_init__ = saved  # type: ignore[method-assign]


def syntax_error_message(exc: Exception) -> str:
    if isinstance(exc, cst.ParserSyntaxError):
        return f"syntax error at {exc.raw_line}:{exc.raw_column + 1}: {exc.message}"
    return f"cannot parse: {exc}"


def analyze_text(
    text: str,
    path: str,
    rules: Sequence[Type[Rule]],
    settings: Settings,
    profile: Optional[Profile] = None,
    prelook: bool = True,
    seeds: "Optional[FileSeeds]" = None,
    enabled: Optional[Sequence[Type[Rule]]] = None,
    module: Optional[cst.Module] = None,
    valid: bool = False,
) -> Analysis:
    """Lint source text. Never raises for bad input: failures become diagnostics.

    `prelook=False` skips the `ast` pre-look (tests use it to prove the preconditions lose nothing).
    `seeds`: what the whole program says about this file (hot functions and their chains).
    `enabled`: the rules left after the pre-filter and pre-look, when already decided
    (`summarize_and_prelook`, which shares its `ast` parse with the program summary).
    `module`: the text's LibCST tree, when already parsed (`fix` parses each round's result to
    check it before the next round analyses it).
    `valid`: `ast` is known to parse the text (the program phase summarised it).
    """
    t0 = time.perf_counter()
    decided = enabled is not None
    enabled = list(enabled) if enabled is not None else [r for r in rules if r.can_fire_on(text, seeds)]
    t1 = time.perf_counter()
    if profile is not None:
        profile.add("pre-filter", t1 - t0)
        profile.files += 1
    facts = AstFacts(None, text)
    if valid:
        facts.__dict__["_valid"] = True
    if seeds is not None:
        seeded_facts(facts, seeds)
        if any(seeds.project.get(k) for k in USED_ELSEWHERE):
            prelook = False  # used from elsewhere: the text of this file alone cannot tell
    if decided:
        facts.__dict__["_scanned"] = True  # valid Python: `ast` parsed it before
    elif prelook and enabled and all(getattr(r, "ast_precondition", None) is not None for r in enabled):
        enabled = _prelook(facts, enabled)
        t1b = time.perf_counter()
        if profile is not None:
            profile.add("ast pre-look", t1b - t1)
        t1 = t1b
    if not enabled:
        return Analysis(None, [])
    try:
        if module is None:
            module = parse_valid_module(text) if _is_valid_python(facts) else cst.parse_module(text)
    except Exception as exc:  # ParserSyntaxError, and anything LibCST chokes on
        return Analysis(None, [], [Diagnostic(path, syntax_error_message(exc))])
    t2 = time.perf_counter()
    if profile is None:
        ctx = FileContext(path, text, module, settings, seeds)
        ctx.wrapper = _Wrapper(module, unsafe_skip_copy=True)
        visitors: List[cst.BatchableCSTVisitor] = [_Batched(rule(ctx)) for rule in enabled]
    else:
        profile.add("parse", t2 - t1)
        profile.parsed += 1
        ctx = _ProfiledContext(path, text, module, settings, seeds)
        ctx.wrapper = _Wrapper(module, unsafe_skip_copy=True)
        ctx._profile = profile
        visitors = [_Timed(rule(ctx), profile) for rule in enabled]
    try:
        t_index = time.perf_counter()
        with indexed(module):  # the tree is read once: every pass of the rules and providers reuses it
            if profile is not None:  # reading the tree is shared metadata: billed to "providers"
                read = time.perf_counter() - t_index
                profile.add("providers", read)
                ctx._provider_time += read  # type: ignore[attr-defined]
            if not fast_visit_batched(module, [v.get_visitors() for v in visitors]):
                cst.visit_batched(module, visitors)
    except RecursionError:
        return Analysis(None, [], [Diagnostic(path, "file too deeply nested to analyse")])
    t3 = time.perf_counter()
    findings: List[Finding] = []
    edit_time = 0.0
    ctx.prefetch_positions([
        node
        for visitor in visitors
        for report in visitor.rule.reports  # type: ignore[attr-defined]
        for node in (report.node, *(old for old, _ in (report.fix.replacements if report.fix is not None else ())))
    ])
    for visitor in visitors:
        rule = visitor.rule  # type: ignore[attr-defined]
        for report in rule.reports:
            finding, spent = _finding(ctx, rule, report, profile is not None)
            findings.append(finding)
            edit_time += spent
    findings.sort(key=Finding.sort_key)
    if profile is not None:
        providers = getattr(ctx, "_provider_time", 0.0)
        profile.add("rules", t3 - t2 - providers)
        profile.add("positions", time.perf_counter() - t3 - edit_time)
        if edit_time:
            profile.add("fixes", edit_time)
    return Analysis(ctx, findings)


#: How each kind of hotness reads in a message.
_HOT_WORDS = {
    "step": "on every training step",
    "sample": "for every sample",
    "eval": "on every evaluation batch",
    "epoch": "once per epoch",
}


def seeded_facts(facts: "AstFacts", seeds: "FileSeeds") -> None:
    """The pre-look's answers for a file the whole program makes hot: its own text may show no
    training step, evaluation loop or dataset, yet its functions run in one elsewhere."""
    kinds = seeds.kinds
    if seeds.gpu:
        facts.__dict__["may_use_gpu"] = True
    if "step" in kinds or "epoch" in kinds:
        facts.__dict__["may_have_training_step"] = True
    if "eval" in kinds:
        facts.__dict__["may_have_eval_loop"] = True
        facts.__dict__["run_per_eval_batch"] = True
    if "sample" in kinds:
        facts.__dict__["may_have_sample_function"] = True
    if kinds:
        facts.__dict__["may_run_hot"] = True
    if seeds.project.get("loader_helper_calls"):  # (loader_helpers.KEY)
        facts.__dict__["passes_loader_workers"] = True


#: Rules whose cost is "once per epoch": the only ones an epoch chain explains.
_EPOCH_RULES = frozenset({"SPD104", "SPD402"})


def _chain(ctx: FileContext, node: cst.CSTNode, code: str) -> Tuple[str, Tuple[Tuple[str, int, str], ...]]:
    """The message suffix and related locations naming the call chain that makes `node` hot
    through other modules (nothing when it is hot in its own file, or not hot)."""
    if ctx.seeds is None or "torch" not in ctx.__dict__:
        return "", ()
    kind, chain = ctx.torch.chain_of(node)
    if not chain or (kind == "epoch" and code not in _EPOCH_RULES):
        return "", ()
    here = ctx.position(node).start.line
    hops = " -> ".join(h.text() for h in chain)
    return f" (runs {_HOT_WORDS.get(kind, kind)}: {hops} -> {ctx.path}:{here})", tuple(h.related() for h in chain)


def _finding(ctx: FileContext, rule: Rule, report, timed: bool = False) -> Tuple[Finding, float]:  # type: ignore[no-untyped-def]
    if report.at is not None:
        return _config_finding(ctx, rule, report), 0.0
    pos = ctx.position(report.node)
    suffix, related = _chain(ctx, report.node, rule.code)
    edits: Tuple[Edit, ...] = ()
    fix = report.fix
    spent = 0.0
    if fix is not None and fix.replacements:
        t = time.perf_counter() if timed else 0.0
        edits = tuple(_edit(ctx, node, new) for node, new in fix.replacements)
        spent = time.perf_counter() - t if timed else 0.0
    return Finding(
        code=rule.code,
        name=rule.name,
        message=report.message + suffix,
        path=ctx.path,
        line=pos.start.line,
        column=pos.start.column + 1,
        end_line=pos.end.line,
        end_column=pos.end.column + 1,
        impact=report.impact,
        fix=fix,
        edits=edits,
        status=rule.status,
        related=related or report.related,
    ), spent


def _config_finding(ctx: FileContext, rule: Rule, report) -> Finding:  # type: ignore[no-untyped-def]
    """A finding on the config-file line that holds the value (`Rule.report(..., at=site)`):
    the code that reads it is the first related location, then the hot chain, if any."""
    from speedlint.analyzer.providers.configs import display_path

    site = report.at
    pos = ctx.position(report.node)
    suffix, related = _chain(ctx, report.node, rule.code)
    code = ctx.module.code_for_node(report.node).strip().splitlines()[0][:60]
    here = (ctx.path, pos.start.line, code)
    edits = tuple(Edit(e.line, e.col, e.line, e.end_col, e.new) for e in report.fix.config_edits) if report.fix is not None else ()
    return Finding(
        code=rule.code,
        name=rule.name,
        message=f"{report.message} (read at {ctx.path}:{pos.start.line}){suffix}",
        path=display_path(site.path),
        line=site.line,
        column=site.col + 1,
        end_line=site.line,
        end_column=site.end_col + 1,
        impact=report.impact,
        fix=report.fix,
        edits=edits,
        status=rule.status,
        related=(here, *related),
    )


def _edit(ctx: FileContext, node: cst.CSTNode, new) -> Edit:  # type: ignore[no-untyped-def]
    pos = ctx.position(node)
    if isinstance(new, cst.CSTNode):
        content = ctx.module.code_for_node(new)
    elif isinstance(new, cst.FlattenSentinel):
        content = "".join(ctx.module.code_for_node(n) for n in new.nodes)
    else:
        content = ""
    return Edit(pos.start.line, pos.start.column, pos.end.line, pos.end.column, content)


def _timed_provider(name: str):  # type: ignore[no-untyped-def]
    compute = getattr(FileContext, name).func

    def get(self):  # type: ignore[no-untyped-def]
        self._provider_depth += 1
        t = time.perf_counter()
        try:
            return compute(self)
        finally:
            self._provider_depth -= 1
            if self._provider_depth == 0:  # nested providers are counted once, by the outermost
                spent = time.perf_counter() - t
                self._provider_time += spent
                self._profile.add("providers", spent)

    get.__name__ = name
    return cached_property(get)


class _ProfiledContext(FileContext):
    """A FileContext that bills the first use of each shared provider to the "providers" phase."""

    _profile: Profile
    _provider_time = 0.0
    _provider_depth = 0

    imports = _timed_provider("imports")
    torch = _timed_provider("torch")
    values = _timed_provider("values")


class _Wrapper(MetadataWrapper):
    """`MetadataWrapper` that computes positions without LibCST's empty traversal.

    LibCST's resolver runs a batched traversal of the whole tree after the non-batchable
    providers even when no batchable provider is asked for (`PositionProvider` is not one): as
    costly as the position codegen itself. Positions are generated directly here (the same
    provider, the same result); anything else goes through LibCST as usual.
    """

    def resolve(self, key):  # type: ignore[no-untyped-def,override]
        if key is PositionProvider and key not in self._metadata:
            self._metadata[key] = PositionProvider()._gen(self)
        return super().resolve(key)


class _Batched(cst.BatchableCSTVisitor):
    """A rule in the batched traversal (its visit methods found by `visitor_methods`)."""

    def __init__(self, rule: Rule) -> None:
        super().__init__()
        self.rule = rule

    def get_visitors(self):  # type: ignore[no-untyped-def]
        return visitor_methods(self.rule)


class _Timed(cst.BatchableCSTVisitor):
    """Wraps a rule to time its visit methods (only with --profile-rules)."""

    def __init__(self, rule: Rule, profile: Profile) -> None:
        super().__init__()
        self.rule = rule
        self.profile = profile

    def get_visitors(self):  # type: ignore[no-untyped-def]
        code = self.rule.code
        rules = self.profile.rules
        ctx = self.rule.ctx

        def timed(fn):  # type: ignore[no-untyped-def]
            def run(node):  # type: ignore[no-untyped-def]
                before = getattr(ctx, "_provider_time", 0.0)
                t = time.perf_counter()
                try:
                    return fn(node)
                finally:
                    # the first use of a shared provider is billed to "providers", not the rule
                    spent = time.perf_counter() - t - (getattr(ctx, "_provider_time", 0.0) - before)
                    rules[code] = rules.get(code, 0.0) + spent

            return run

        return {name: timed(fn) for name, fn in visitor_methods(self.rule).items()}


def check_source(
    source: Source,
    path: str,
    rules: Sequence[Type[Rule]],
    settings: Settings,
    profile: Optional[Profile] = None,
) -> FileResult:
    from speedlint.analyzer.suppress import apply_suppressions

    analysis = analyze_text(source.text, path, rules, settings, profile)
    findings = apply_suppressions(analysis.findings, source.text, settings, path)
    return FileResult(path, findings, analysis.diagnostics, source.text, analysis.ctx is not None)
