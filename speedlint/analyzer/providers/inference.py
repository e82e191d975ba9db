"""Shared analysis for the SPD6xx rules (not a rule module).

* Which expressions are models (things with parameters) and which calls run a model forward.
* Whether a region updates parameters (EMA, SGD by hand, `copy_` into weights).
* What leaves a region (returns, names read afterwards, stores into `self`/outer buffers) and
  whether it is only host values (Python numbers, strings, `.item()`, `.cpu()`, `.tolist()`):
  that decides whether `torch.inference_mode()` is safe there. Inference tensors cannot be saved
  for backward, nor updated in place outside inference mode, so anything that may reach autograd
  makes the change unsafe.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.providers.walk import preorder
from speedlint.analyzer.rule import ImportSpec

MODEL_WORDS = {
    "model", "net", "network", "encoder", "decoder", "backbone", "classifier", "generator", "discriminator",
    "policy", "actor", "critic", "teacher", "student", "ema", "detector", "segmenter", "transformer", "unet",
}
MODEL_SUFFIXES = ("net", "model", "coder", "former")
#: How the name of a sub-module ends (`aligner`, `predictor`, `head`, `block`): a thing, not an action.
_SUBMODULE_ENDINGS = ("er", "or", "net", "model", "head", "layer", "layers", "block", "blocks", "proj", "embedding", "embeddings")
VERBS = {
    "get", "build", "load", "make", "create", "lower", "init", "save", "to", "from", "set", "compute", "run",
    "update", "train", "eval", "is", "has", "copy", "export", "prepare", "convert", "apply", "wrap", "check",
    "validate", "print", "log", "count", "freeze", "unfreeze", "reset", "register", "setup", "parse",
}


def _words(name: str) -> List[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w.lower() for w in spaced.split("_") if w]


def looks_like_model(name: str) -> bool:
    """`model`, `self.netG`, `ema_model`, `resnet`, `teacher`; not `build_model`, `SchemaError`, `factor`."""
    words = _words(name)
    if not words or words[0] in VERBS:
        return False
    return any(w in MODEL_WORDS or w.endswith(MODEL_SUFFIXES) for w in words)


FORWARD_ATTRS = {
    "forward", "generate", "predict", "sample", "encode", "decode", "infer", "inference",
    "extract_features", "forward_features", "embed", "detect", "predict_step",
}
NOT_FORWARD = {
    "eval", "train", "to", "cuda", "cpu", "half", "float", "double", "parameters", "named_parameters",
    "state_dict", "load_state_dict", "zero_grad", "apply", "modules", "children", "buffers",
    "named_buffers", "named_modules", "requires_grad_", "register_buffer", "register_forward_hook",
}
HOST_METHODS = {"item", "tolist", "numpy", "cpu", "size", "numel", "dim", "nelement", "__len__", "keys"}
HOST_FUNCS = {"float", "int", "bool", "len", "round", "str", "abs", "repr", "format", "range"}
HOST_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda"}
HOST_MODULES = ("numpy", "math", "time", "statistics", "sklearn", "scipy")
STORE_METHODS = {"append", "extend", "insert", "add", "push", "put", "appendleft", "store", "enqueue", "add_", "put_nowait"}
LOG_METHODS = {
    "add_scalar", "add_scalars", "add_image", "add_images", "add_histogram", "add_figure", "add_text",
    "log", "log_dict", "info", "debug", "warning", "write", "print", "set_postfix", "set_description",
    "add_audio", "add_video", "add_embedding", "add_pr_curve", "add_mesh",
}
#: Writing tensors out (`torch.save`, `np.save`, `json.dump`): a file does not keep inference
#: tensors (`torch.load` gives ordinary ones back), so these calls are no reason for caution.
SERIALIZE_METHODS = {"save", "savez", "savez_compressed", "dump", "write", "imwrite", "imsave", "savefig", "save_image"}
PARAM_ITER = {"parameters", "named_parameters", "buffers", "named_buffers", "state_dict"}
PARAM_HINT = re.compile(r"param|weight|bias|ema|shadow|(^|\.)data$|running_|target_net|momentum", re.I)
INPLACE = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")


def is_test_file(path: str) -> bool:
    base = os.path.basename(path)
    return base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"


_DEFS = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def iter_nodes(root: cst.CSTNode, skip_defs: bool = True) -> Iterator[cst.CSTNode]:
    """`root` and its descendants, without entering nested function/class/lambda bodies."""
    return preorder(root, _DEFS if skip_defs else ())


def torch_spelling(ctx: FileContext, func: cst.BaseExpression, attr: str) -> Tuple[cst.BaseExpression, Tuple[ImportSpec, ...]]:
    """`<torch>.attr` spelled the way the file spells torch (keeps `import torch as T`)."""
    name = dotted(func) or ""
    head = name.split(".")[0]
    aliases = ctx.imports.aliases
    if head and aliases.get(head) in ("torch", "torch.autograd") and "." in name:
        return cst.Attribute(value=cst.Name(head), attr=cst.Name(attr)), ()
    if isinstance(func, cst.Name):  # `from torch import no_grad`: import the new name the same way
        if attr not in aliases or ctx.imports.qualname(cst.Name(attr)) == f"torch.{attr}":
            return cst.Name(attr), (ImportSpec("torch", attr),)
    for alias, target in sorted(aliases.items(), key=lambda kv: kv[0] != "torch"):
        if target == "torch":
            return cst.Attribute(value=cst.Name(alias), attr=cst.Name(attr)), ()
    return cst.Attribute(value=cst.Name("torch"), attr=cst.Name(attr)), (ImportSpec("torch"),)


def torch_attr(ctx: FileContext, attr: str) -> Tuple[cst.BaseExpression, Tuple[ImportSpec, ...]]:
    """`<torch>.attr` with the file's alias of torch (`import torch as T`), importing torch if needed."""
    for alias, target in sorted(ctx.imports.aliases.items(), key=lambda kv: kv[0] != "torch"):
        if target == "torch":
            return cst.Attribute(value=cst.Name(alias), attr=cst.Name(attr)), ()
    return cst.Attribute(value=cst.Name("torch"), attr=cst.Name(attr)), (ImportSpec("torch"),)


# -- models and forwards ---------------------------------------------------------------------
class Models:
    """Expressions that are models: receivers of `.parameters()`/`.eval()`/`.train()`, results of
    `nn.*`/torchvision/timm constructors and of same-file `nn.Module` subclasses, and names that say so."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.known: Set[str] = set()
        self._writes: Optional[Dict[str, List[Optional[cst.BaseExpression]]]] = None
        self._runs_forward: Dict[Tuple[cst.CSTNode, int], bool] = {}  # memo: every loop asks again
        module_classes = {name for name, defs in ctx.torch.class_defs.items() if any(self._is_module_class(c) for c in defs)}
        for node in iter_nodes(ctx.module, skip_defs=False):
            # (LibCST's node classes have no subclasses: an exact class test)
            if node.__class__ is cst.Call and node.func.__class__ is cst.Attribute:
                if node.func.attr.value in ("parameters", "named_parameters", "eval", "train") and not node.args:
                    d = dotted(node.func.value)
                    if d:
                        self.known.add(d)
            elif node.__class__ is cst.Assign and node.value.__class__ is cst.Call:
                func = node.value.func
                q = ctx.qualname(func) or ""
                fname = dotted(func) or ""
                if (
                    (q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper())
                    or q.startswith("torchvision.models.")
                    or q in ("timm.create_model",)
                    or fname in module_classes
                ):
                    for t in node.targets:
                        d = dotted(t.target)
                        if d:
                            self.known.add(d)

    def attribute_writes(self) -> Dict[str, List[Optional[cst.BaseExpression]]]:
        """`self.x` -> every value assigned to it anywhere in the file."""
        if self._writes is None:
            self._writes = {}
            for node in iter_nodes(self.ctx.module, skip_defs=False):
                if node.__class__ is cst.Assign or node.__class__ is cst.AugAssign or node.__class__ is cst.AnnAssign:
                    targets = (
                        [t.target for t in node.targets]
                        if node.__class__ is cst.Assign
                        else [cast(Union[cst.AugAssign, cst.AnnAssign], node).target]
                    )
                    for t in targets:
                        d = dotted(t) if isinstance(t, cst.Attribute) else None
                        if d:
                            self._writes.setdefault(d, []).append(node.value)
        return self._writes

    def _is_module_class(self, cls: cst.ClassDef) -> bool:
        for base in cls.bases:
            q = self.ctx.qualname(base.value) or ""
            if q.startswith("torch.nn.") or (dotted(base.value) or "").endswith("Module"):
                return True
        return False

    def is_model(self, expr: cst.BaseExpression) -> bool:
        d = dotted(expr)
        if not d or self.ctx.qualname(expr) is not None:
            return False
        return d in self.known or looks_like_model(d.rsplit(".", 1)[-1])

    def is_forward(self, call: cst.Call) -> bool:
        func = call.func
        if self.is_model(func):
            return True
        if isinstance(func, cst.Attribute) and func.attr.value not in NOT_FORWARD:
            if func.attr.value in FORWARD_ATTRS:
                return self.is_model(func.value)
            # a sub-module of a model called (`model.text_encoder(x)`, `model.pitch_extractor(x)`),
            # named as a thing, not one of its methods (`model.recognize(x)`, `model.get_loss()`)
            words = _words(func.attr.value)
            return (
                bool(words) and words[0] not in VERBS and words[-1].endswith(_SUBMODULE_ENDINGS)
                and isinstance(func.value, cst.Name) and self.is_model(func.value)
            )
        return False

    def runs_forward(self, root: cst.CSTNode, depth: int = 2) -> bool:
        """Whether `root` calls a model, directly or through same-file functions (2 levels)."""
        key = (root, depth)
        found = self._runs_forward.get(key)
        if found is None:
            found = self._runs_forward[key] = self._scan_forward(root, depth)
        return found

    def _scan_forward(self, root: cst.CSTNode, depth: int) -> bool:
        facts = self.ctx.torch
        for node in iter_nodes(root):
            if isinstance(node, cst.Call):
                if self.is_forward(node):
                    return True
                if depth > 0:
                    for fn in facts.resolve_call(node):
                        if self.runs_forward(fn.body, depth - 1):
                            return True
        return False


def updates_parameters(ctx: FileContext, root: cst.CSTNode, depth: int = 1) -> bool:
    """EMA / hand-written SGD / weight copies: `p_ema.mul_(d)`, `p.copy_(q)`, `param -= lr * param.grad`
    (here or in a same-file function called from here)."""
    for node in iter_nodes(root):
        # (LibCST's node classes have no subclasses: an exact class test)
        if depth > 0 and node.__class__ is cst.Call:
            if any(updates_parameters(ctx, fn.body, depth - 1) for fn in ctx.torch.resolve_call(node)):
                return True
        if node.__class__ is cst.For:
            for sub in iter_nodes(node.iter):
                if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute) and sub.func.attr.value in PARAM_ITER:
                    return True
        elif node.__class__ is cst.Attribute and node.attr.value == "grad":
            return True
        elif node.__class__ is cst.Call:
            func = node.func
            q = ctx.qualname(func) or ""
            if q.startswith("torch._foreach_") or q == "torch.nn.utils.vector_to_parameters":
                return True
            if isinstance(func, cst.Attribute):
                attr = func.attr.value
                if attr in ("copy_", "load_state_dict"):
                    return True
                if INPLACE.match(attr) and _names_parameters(ctx, func.value):
                    return True
        elif isinstance(node, (cst.AugAssign, cst.Assign)):
            targets = [node.target] if isinstance(node, cst.AugAssign) else [t.target for t in node.targets]
            for t in targets:
                if isinstance(t, (cst.Attribute, cst.Subscript)) and _names_parameters(ctx, t if isinstance(t, cst.Attribute) else t.value):
                    return True
    return False


def _names_parameters(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """`ema.shadow`, `p.data`, `self.weight`, `params[k]`: named like parameters (by the last name:
    `coco_eval.params.imgIds` is a field of a config object), and not a host buffer
    (`weight_accumulator = np.zeros(n)`)."""
    d = dotted(expr) or ""
    last = d.rsplit(".", 1)[-1]
    if not (PARAM_HINT.search(last) or d.endswith(".data")):
        return False
    return not (isinstance(expr, cst.Name) and flow(ctx).is_host_value(expr))


# -- what leaves a region --------------------------------------------------------------------
@dataclass
class Binding:
    name: str
    node: cst.CSTNode  # the statement or call that binds
    value: Optional[cst.BaseExpression]  # None: unknown (loop target, unpacking)


@dataclass
class Flow:
    """Bindings and reads of local names in one scope (a function body or the module)."""

    bindings: Dict[str, List[Binding]] = field(default_factory=dict)
    reads: Dict[str, List[cst.Name]] = field(default_factory=dict)
    params: Set[str] = field(default_factory=set)


def target_names(t: cst.BaseExpression) -> List[cst.Name]:
    if isinstance(t, cst.Name):
        return [t]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for el in t.elements for n in target_names(el.value)]
    if isinstance(t, cst.StarredElement):
        return target_names(t.value)
    return []


def build_flow(scope: cst.CSTNode) -> Flow:
    flow = Flow()
    targets: Set[cst.Name] = set()

    def bind(name: cst.Name, node: cst.CSTNode, value: Optional[cst.BaseExpression]) -> None:
        targets.add(name)
        flow.bindings.setdefault(name.value, []).append(Binding(name.value, node, value))

    root = scope.body if isinstance(scope, cst.FunctionDef) else scope
    if isinstance(scope, cst.FunctionDef):
        for p in [*scope.params.params, *scope.params.posonly_params, *scope.params.kwonly_params]:
            flow.params.add(p.name.value)
    skip: Set[int] = set()  # ids of Name nodes that are not reads (attribute names, keywords)
    for node in iter_nodes(root):
        # (LibCST's node classes have no subclasses: an exact class test)
        if node.__class__ is cst.Assign:
            for t in node.targets:
                tgt, val = t.target, node.value
                if (
                    isinstance(tgt, (cst.Tuple, cst.List))
                    and isinstance(val, (cst.Tuple, cst.List))
                    and len(tgt.elements) == len(val.elements)
                    and all(isinstance(e.value, cst.Name) for e in tgt.elements)
                ):  # `correct, total = 0, 0`
                    for te, ve in zip(tgt.elements, val.elements):
                        bind(te.value, node, ve.value)  # type: ignore[arg-type]
                    continue
                # `n, c, h = points.size()`: each name holds a part of the value (host when it is)
                for n in target_names(tgt):
                    bind(n, node, val)
                if isinstance(t.target, cst.Subscript) and isinstance(t.target.value, cst.Name):
                    bind(t.target.value, node, node.value)
                    targets.discard(t.target.value)
        elif node.__class__ is cst.AugAssign:
            if isinstance(node.target, cst.Name):
                bind(node.target, node, node.value)
                targets.discard(node.target)  # `x += 1` also reads x
        elif node.__class__ is cst.AnnAssign and isinstance(node.target, cst.Name):
            bind(node.target, node, node.value)
        elif node.__class__ is cst.For or node.__class__ is cst.CompFor:
            for n in target_names(node.target):
                bind(n, node, node.iter)  # an element of the iterable: host when the iterable is
        elif node.__class__ is cst.WithItem and node.asname is not None:
            for n in target_names(node.asname.name):
                bind(n, node, None)
        elif node.__class__ is cst.NamedExpr and isinstance(node.target, cst.Name):
            bind(node.target, node, node.value)
        elif node.__class__ is cst.Call and isinstance(node.func, cst.Attribute):
            recv = node.func.value
            if node.func.attr.value in STORE_METHODS and isinstance(recv, cst.Name):
                for arg in node.args:
                    flow.bindings.setdefault(recv.value, []).append(Binding(recv.value, node, arg.value))
        if node.__class__ is cst.Attribute:
            skip.add(id(node.attr))
        elif node.__class__ is cst.Arg and node.keyword is not None:
            skip.add(id(node.keyword))
        elif (node.__class__ is cst.FunctionDef or node.__class__ is cst.ClassDef) and node is not root:
            skip.add(id(node.name))
            bind(node.name, node, None)
    for node in iter_nodes(root):
        if node.__class__ is cst.Name and node not in targets and id(node) not in skip:
            flow.reads.setdefault(node.value, []).append(node)
    return flow


class Escapes:
    """What leaves `region` (a `with` body or a whole function) inside `scope`."""

    def __init__(self, ctx: FileContext, models: Models, scope: cst.CSTNode, region: cst.CSTNode, whole_function: bool) -> None:
        self.ctx = ctx
        self.models = models
        self.flow = build_flow(scope)
        self.region = region
        self.training_bound: List[str] = []  # silent: the result feeds a buffer/attribute training may read
        self.unsafe: List[str] = []  # the fix may change behaviour
        #: the part of `unsafe` through which tensors of the block may reach autograd: not a
        #: name whose later reads all run with grad off (another `no_grad` block, an outer one)
        #: or between the training steps, not an in-place call on a tensor the block made
        self.reach_autograd: List[str] = []
        self._analyse(whole_function)

    # hostness ---------------------------------------------------------------------------
    def is_host(self, expr: Union[cst.BaseExpression, cst.From, None], seen: Optional[Set[str]] = None) -> bool:
        if expr is None:
            return False
        seen = seen if seen is not None else set()
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return True
            if expr.value in seen:
                return True  # cycles (x = x + ...) are decided by the other bindings
            bindings = self.flow.bindings.get(expr.value)
            if not bindings or expr.value in self.flow.params:
                return False
            seen.add(expr.value)
            # what leaves the block was bound in it: the bindings elsewhere in the function
            # (the training loop's `correct = ...`) do not reach a read right after it
            inside = [b for b in bindings if self._inside(b.node)]
            return all(self.is_host(b.value, seen) for b in (inside or bindings))
        if isinstance(expr, cst.Call):
            func = expr.func
            q = self.ctx.qualname(func) or ""
            if q.split(".")[0] in HOST_MODULES:
                return True
            if isinstance(func, cst.Attribute) and func.attr.value in HOST_METHODS:
                return True
            if isinstance(func, cst.Attribute) and _host_call(func.value):
                return True  # `t.cpu().numpy().squeeze()`: a method of a NumPy array / Python value
            if isinstance(func, cst.Name) and func.value in HOST_FUNCS and q == "":
                return True
            if isinstance(func, cst.Name) and func.value in ("sum", "max", "min") and q == "":
                return all(self.is_host(a.value, seen) for a in expr.args)
            return False
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in HOST_ATTRS:
                return True
            d = dotted(expr)
            if d is None or not d.startswith("self.") or d in seen:
                return d is not None and d in seen
            writes = self.models.attribute_writes().get(d)
            if not writes:
                return False
            seen.add(d)
            return all(self.is_host(v, seen) for v in writes)
        if isinstance(expr, cst.Subscript):
            return self.is_host(expr.value, seen)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_host(expr.left, seen) and self.is_host(expr.right, seen)
        if isinstance(expr, cst.BooleanOperation):
            return self.is_host(expr.left, seen) and self.is_host(expr.right, seen)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_host(expr.expression, seen)
        if isinstance(expr, cst.Comparison):
            return self.is_host(expr.left, seen) and all(self.is_host(c.comparator, seen) for c in expr.comparisons)
        if isinstance(expr, cst.IfExp):
            return self.is_host(expr.body, seen) and self.is_host(expr.orelse, seen)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return all(self.is_host(el.value, seen) for el in expr.elements)
        if isinstance(expr, cst.Dict):
            return all(isinstance(el, cst.DictElement) and self.is_host(el.value, seen) for el in expr.elements)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self.is_host(expr.elt, seen)
        return False

    # analysis ---------------------------------------------------------------------------
    def _inside(self, node: cst.CSTNode) -> bool:
        return self.ctx.torch.contains(self.region, node)

    def _analyse(self, whole_function: bool) -> None:
        for node in iter_nodes(self.region):
            if isinstance(node, (cst.Return, cst.Yield)) and node.value is not None:
                if not self.is_host(node.value):
                    self.unsafe.append("it returns tensors computed here")
                    self.reach_autograd.append(self.unsafe[-1])
            elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for t in targets:
                    base = t.value if isinstance(t, cst.Subscript) else t
                    if isinstance(base, cst.Attribute) and not self.is_host(node.value) and not self._made_here(base):
                        self.training_bound.append(f"it stores tensors into `{dotted(base) or 'an attribute'}`")
                    elif isinstance(base, cst.Name) and isinstance(t, cst.Subscript) and base.value not in self._local_names():
                        if not self.is_host(node.value):
                            self.training_bound.append(f"it writes tensors into `{base.value}`")
            elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Attribute):
                call = node.value
                attr = cast(cst.Attribute, call.func).attr.value
                recv = cast(cst.Attribute, call.func).value
                tensor_args = [a for a in call.args if not self.is_host(a.value)]
                if not tensor_args or self.models.is_forward(call):
                    continue
                if attr in STORE_METHODS:
                    if not isinstance(recv, cst.Name) or recv.value not in self._local_names():
                        self.training_bound.append(f"it stores tensors into `{dotted(recv) or 'a buffer'}`")
                elif attr not in LOG_METHODS and attr not in SERIALIZE_METHODS:
                    self.unsafe.append(f"it passes tensors to `{dotted(call.func) or attr}()`")
                    if not (isinstance(recv, cst.Name) and self._bound_inside(recv.value)):
                        self.reach_autograd.append(self.unsafe[-1])
        if whole_function:
            return
        facts = self.ctx.torch
        bound_here = {name for name, bs in self.flow.bindings.items() if any(self._inside(b.node) for b in bs)}
        for name in sorted(bound_here):
            if self.models.is_model(cst.Name(name)):
                continue  # `model = model.eval()` in the block: a module, not a tensor computed here
            later = [r for r in self.flow.reads.get(name, ()) if not self._inside(r) and facts.is_before(self.region, r)]
            later = [r for r in later if not self._rebound_between(name, r) and not self._host_use(r)]
            if later and not self.is_host(cst.Name(name)):
                self.unsafe.append(f"`{name}` is used after the block")
                # a read with grad off, or between the training steps (the epoch loop's own level,
                # after the run), records nothing for a backward
                if any(facts.grad_disabled_at(r) is None and not self._between_steps_only(r) for r in later):
                    self.reach_autograd.append(self.unsafe[-1])

    def _between_steps_only(self, read: cst.Name, hops: int = 1) -> bool:
        """`read` runs between the training steps (the epoch loop's own level, after the run)
        and its value stays there: not the iterable of a loop (a training loop over it), not
        assigned to a name that a training step reads (one hop followed)."""
        facts = self.ctx.torch
        if facts.between_steps(read) is None:
            return False
        child: cst.CSTNode = read
        for a in facts.ancestors(read):
            if isinstance(a, (cst.For, cst.CompFor)) and child is a.iter:
                return False
            if isinstance(a, (cst.Return, cst.Yield)):
                return False
            if isinstance(a, cst.Arg):  # passed on: only to a logger or a host conversion
                call = facts.parent(a)
                func = call.func if isinstance(call, cst.Call) else None
                if isinstance(func, cst.Attribute):
                    if func.attr.value not in LOG_METHODS | SERIALIZE_METHODS:
                        return False
                elif not (isinstance(func, cst.Name) and func.value in HOST_FUNCS | {"print"}):
                    return False
            if isinstance(a, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]
                if hops <= 0 or not all(isinstance(t, cst.Name) for t in targets):
                    return False
                return all(
                    self._between_steps_only(r, hops - 1) or facts.grad_disabled_at(r) is not None
                    for t in targets
                    for r in self.flow.reads.get(cast(cst.Name, t).value, ())
                )
            if isinstance(a, cst.BaseSmallStatement) or isinstance(a, cst.BaseCompoundStatement):
                return True
            child = a
        return True

    def _bound_inside(self, name: str) -> bool:
        return any(self._inside(b.node) for b in self.flow.bindings.get(name, ()))

    def _made_here(self, target: cst.Attribute) -> bool:
        """`coco_eval.params.imgIds = ...` where `coco_eval` is built in the block: a local object."""
        root: cst.BaseExpression = target
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            root = root.value
        return isinstance(root, cst.Name) and any(
            self._inside(b.node) and isinstance(b.value, cst.Call) for b in self.flow.bindings.get(root.value, ())
        )

    def _host_use(self, read: cst.BaseExpression) -> bool:
        """`x.item()`, `x.tolist()`, `float(x)`, `print(x)`, `f"{x}"`: the read only takes a host value."""
        facts = self.ctx.torch
        parent = facts.parent(read)
        while isinstance(parent, cst.Subscript) and parent.value is read:  # `x[0].cpu()`
            read, parent = parent, facts.parent(parent)
        if isinstance(parent, cst.Attribute) and parent.value is read:
            call = facts.parent(parent)
            return parent.attr.value in HOST_METHODS and isinstance(call, cst.Call) and call.func is parent
        if isinstance(parent, cst.FormattedStringExpression):
            return True
        if isinstance(parent, cst.Arg) and parent.value is read:
            call = facts.parent(parent)
            return (
                isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name)
                and call.func.value in HOST_FUNCS | {"print"}
                and self.ctx.qualname(call.func) is None
            )
        return False

    def _local_names(self) -> Set[str]:
        return {n for n, bs in self.flow.bindings.items() if any(isinstance(b.node, (cst.Assign, cst.AnnAssign)) for b in bs)}

    def _rebound_between(self, name: str, read: cst.Name) -> bool:
        facts = self.ctx.torch
        for b in self.flow.bindings.get(name, ()):
            if not self._inside(b.node) and facts.is_before(self.region, b.node) and facts.is_before(b.node, read):
                return True
        return False


def _host_call(expr: cst.BaseExpression) -> bool:
    """`t.numpy()`, `t.cpu().numpy()`, `t.tolist()`, `t.item()`: a call that gives a host value
    (not `.cpu()` alone: a CPU tensor is still a tensor)."""
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in ("numpy", "tolist", "item")
    )


def eval_receivers_before(ctx: FileContext, scope: Optional[cst.FunctionDef], node: cst.CSTNode) -> bool:
    """An unconditional `x.eval()` (or `x.train(False)`) in the same function (or at module level)
    before `node`, and no `x.train()` before it at all (a train/eval switch says nothing)."""
    facts = ctx.torch
    root = scope.body if scope is not None else ctx.module
    seen_eval = False
    for sub in iter_nodes(root):
        if not (isinstance(sub, cst.Call) and isinstance(sub.func, cst.Attribute)) or not facts.is_before(sub, node):
            continue
        kind = sub.func.attr.value
        if kind == "eval" and sub.args:
            continue
        if kind == "train" and sub.args:
            arg = sub.args[0].value
            kind = "eval" if isinstance(arg, cst.Name) and arg.value == "False" else "train"
        if kind == "train":
            return False
        guards = [
            g for g in facts.guarding_ifs(sub, scope)
            if not (isinstance(g, cst.If) and "__name__" in ctx.code(g.test))
        ]
        if kind == "eval" and not guards:
            seen_eval = True
    return seen_eval
