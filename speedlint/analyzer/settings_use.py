"""Performance settings the user sets and no code reads (SPD704), over the whole program.

A file's summary (`settings_summary`, from its `ast`) says which performance options it declares
with argparse (`--fp16`, `--amp`, `--num_workers`, `--accumulation_steps`, `--compile`), which
setting names it reads (an attribute `args.fp16`, a string key `cfg["use_amp"]`,
`cfg.get("workers")`, `getattr(args, "fp16")`), and whether it hands a namespace or config over
whole: `vars(args)`, `args.__dict__`, `**cfg`, `getattr(args, name)` with a computed name,
`cfg.items()`, `hydra.utils.instantiate(cfg.trainer)`, or `args` passed to a library (which may
read any attribute: `Trainer.from_argparse_args(args)`, `deepspeed.initialize(args=args)`).

The link (`program.settings_seeds.add_unused_setting_seeds`) puts together what the program reads; when anything is
handed over whole, every setting may be read and nothing is reported. Otherwise a declared
option whose name no code reads, and a performance key of a config file the program loads
(`configs.flow`) that no code reads (nor a framework node, a mapping with Hydra's `_target_`),
go into the seeds of the file that declares the option or loads the config
(`project["unused_settings"]`).
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Set, Tuple

from speedlint.analyzer.ast_fields import FieldTable
from speedlint.analyzer.configs.summary import walk
from speedlint.analyzer.pyparse import AST_ERRORS, parse_quietly

#: Setting names that only change speed (precision, accumulation, loading, compilation).
PRECISION = frozenset({
    "fp16", "bf16", "amp", "use_amp", "use_fp16", "use_bf16", "mixed_precision", "half", "apex", "autocast", "use_autocast",
})
ACCUMULATION = frozenset({
    "accumulation_steps", "accum_steps", "grad_accum", "grad_accum_steps", "gradient_accumulation_steps",
    "accumulate_grad_batches", "accum_iter", "grad_accumulation_steps",
})
LOADING = frozenset({"num_workers", "workers", "n_workers", "pin_memory", "persistent_workers", "prefetch_factor"})
COMPILE = frozenset({"compile", "torch_compile", "use_compile", "channels_last", "cudnn_benchmark", "allow_tf32", "tf32"})
PERFORMANCE_SETTINGS = PRECISION | ACCUMULATION | LOADING | COMPILE

#: Names that usually hold the parsed options or a config (`args.fp16`, `cfg["amp"]`).
NAMESPACE_NAMES = frozenset({
    "args", "opt", "opts", "options", "hparams", "hps", "hp", "flags", "FLAGS", "cfg", "config", "conf", "configs",
    "params", "arguments", "parsed_args", "cmd_args", "train_args", "training_args", "train_cfg", "train_config",
})
#: Libraries that take a namespace only to print, log or save it: they read no setting.
HARMLESS_RECEIVERS = frozenset({
    "logging", "logger", "log", "wandb", "json", "pprint", "yaml", "pickle", "mlflow", "neptune", "torch", "os", "sys",
    "copy", "print", "str", "repr", "dict", "tensorboard", "tb", "writer", "np", "numpy",
})
#: Calls that read every key of a config (Hydra, OmegaConf): the config is handed over whole.
WHOLE_READERS = frozenset({"instantiate", "to_container", "to_object", "to_yaml", "asdict", "from_argparse_args", "parse_obj", "model_validate"})

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
#: Fields that hold only a context or an operator (`ast.Load()`, `ast.Add()`), or no node at all
#: (names, numbers, flags; a constant's value), or only nodes that read nothing (`alias`es): the
#: walk skips them (`Name` and `Constant` nodes, a third of a tree, have nothing else).
_UNREAD_FIELDS = frozenset({
    "ctx", "op", "ops", "id", "attr", "arg", "name", "names", "asname", "module", "level", "kind", "type_comment",
    "conversion", "is_async", "kwd_attrs", "rest", "tag",
})
#: node class -> the fields the walk of `settings_summary` follows
_WALKED = FieldTable(_UNREAD_FIELDS, {ast.Constant: ()})
#: (the most frequent first: `any` stops at the first one found, and a text without one is scanned for each)
_TEXT_HINTS = ("**", "amp", ".items(", "getattr(", "instantiate") + tuple(sorted(PERFORMANCE_SETTINGS - {"amp"})) + ("vars(", "__dict__", "setattr(")


def _dest(call: ast.Call) -> Optional[Tuple[str, str]]:
    """(dest, option string) of an `add_argument` call, or None (positionals too)."""
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not flags or not all(f.startswith("-") for f in flags):
        return None
    for kw in call.keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value, flags[0]
        if kw.arg == "action" and isinstance(kw.value, ast.Constant) and kw.value.value in ("help", "version"):
            return None
    long = [f for f in flags if f.startswith("--")]
    flag = long[0] if long else flags[0]
    return flag.lstrip("-").replace("-", "_"), flag


def _last(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _root(node: ast.AST) -> Optional[str]:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def settings_summary(tree: ast.Module, text: str) -> Optional[Dict[str, Any]]:
    """The file's settings facts (None when it has none): `options` [[line, col, dest, flag]],
    `reads` [names], `whole` (hands a namespace or config over whole), `receivers` [names of
    imported modules or objects that a namespace is passed to]."""
    if not any(h in text for h in _TEXT_HINTS):
        return None
    namespaces: Set[str] = set(NAMESPACE_NAMES)
    kwarg_params: Set[str] = set()
    options: List[List[Any]] = []
    option_strings: Set[int] = set()  # ids of the constants that name an option (not reads)
    reads: Set[str] = set()
    whole = False
    calls: List[Tuple[ast.Call, Optional[str]]] = []  # (read once every namespace is known)
    # One breadth-first walk (`ast.walk`'s order: a call before its arguments, so an option's
    # strings are known before they are met); what needs every namespace and `**kwargs`
    # parameter of the file (the calls) is read after it.
    nodes: List[Any] = [tree]  # (read by class: each node's fields are those of its class)
    append = nodes.append
    AST = ast.AST
    for node in nodes:
        kind = node.__class__
        if kind is ast.Name:  # (the most nodes; none of its fields is walked)
            if node.id in PERFORMANCE_SETTINGS and isinstance(node.ctx, ast.Load):
                reads.add(node.id)  # a local of that name (`fp16 = args.fp16` reads it too; a parameter filled by `**`)
            continue
        if kind is ast.Call:
            name = _last(node.func)
            if name == "add_argument":
                got = _dest(node)
                for a in node.args:
                    option_strings.add(id(a))
                for kw in node.keywords:
                    if kw.arg == "dest":
                        option_strings.add(id(kw.value))
                if got is not None and got[0] in PERFORMANCE_SETTINGS:
                    options.append([node.lineno, node.col_offset, got[0], got[1]])
            else:
                calls.append((node, name))
        elif kind is ast.Attribute:
            if node.attr in PERFORMANCE_SETTINGS and not isinstance(node.ctx, ast.Store):
                reads.add(node.attr)
            elif node.attr == "__dict__":
                whole = True
        elif kind is ast.Constant:
            if isinstance(node.value, str) and node.value in PERFORMANCE_SETTINGS and id(node) not in option_strings:
                reads.add(node.value)
            continue  # (none of its fields is walked)
        elif kind is ast.arg:
            if node.arg in PERFORMANCE_SETTINGS:
                reads.add(node.arg)  # a parameter of that name: filled by keyword or `**` from the setting
        elif kind is ast.Assign:
            if node.value.__class__ is ast.Call and _last(node.value.func) in ("parse_args", "parse_known_args"):
                for target in node.targets:
                    for t in walk(target):
                        if t.__class__ is ast.Name:
                            namespaces.add(t.id)
        elif kind in _FUNCTIONS and node.args.kwarg is not None:
            kwarg_params.add(node.args.kwarg.arg)
        for field in _WALKED[kind]:  # (the walk: `configs.summary.walk`, inlined, without the fields that hold no name)
            value = getattr(node, field, None)
            if value.__class__ is list:
                for child in value:
                    if isinstance(child, AST):
                        append(child)
            elif isinstance(value, AST):
                append(value)

    def is_namespace(node: ast.AST) -> bool:
        if isinstance(node, ast.Call) and _last(node.func) == "vars":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return True
        name = _last(node)
        return name is not None and name in namespaces

    receivers: Set[str] = set()
    for node, name in calls:
        func = node.func
        if name == "vars" or name in WHOLE_READERS:
            whole = whole or name in WHOLE_READERS or any(is_namespace(a) for a in node.args)
        elif name in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
            key = node.args[1]
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) and is_namespace(node.args[0]):
                whole = True
        elif name in ("items", "keys", "values") and isinstance(func, ast.Attribute) and (is_namespace(func.value) or _root(func.value) in namespaces):
            whole = True  # `cfg["train"].items()`: every key of a (sub-)config
        for value in [*node.args, *(kw.value for kw in node.keywords)]:
            if isinstance(value, ast.Starred):
                value = value.value
            if is_namespace(value):
                root = _root(func)
                if root is not None and root not in HARMLESS_RECEIVERS:
                    receivers.add(root)
        for kw in node.keywords:
            if kw.arg is None:  # `f(**x)`: every key of x reaches f's parameters
                spread = kw.value
                if not (isinstance(spread, ast.Name) and spread.id in kwarg_params) and not isinstance(spread, ast.Dict):
                    whole = True
    if not (options or reads or whole or receivers):
        return None
    out: Dict[str, Any] = {}
    if options:
        out["options"] = options
    if reads:
        out["reads"] = sorted(reads)
    if whole:
        out["whole"] = True
    if receivers:
        out["receivers"] = sorted(receivers)
    return out


#: (seeds key) what a file's rules get: [kind, line, col, name, flag or config path, key path]
SEEDS_KEY = "unused_settings"


def unused_options_alone(text: str) -> List[List[Any]]:
    """The unused options of a file checked without the program phase (stdin, an editor
    buffer): the file is the whole program; a namespace passed to anything imported may be
    read there (silent)."""
    try:
        tree = parse_quietly(text)
    except AST_ERRORS:
        return []
    f = settings_summary(tree, text) or {}
    if not f.get("options") or f.get("whole"):
        return []
    imported: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
    if imported & set(f.get("receivers", ())):
        return []
    reads = set(f.get("reads", ()))
    out: List[List[Any]] = []
    for line, col, dest, flag in f["options"]:
        if dest not in reads and all(e[3] != dest for e in out):
            out.append(["option", line, col, dest, flag, []])
    return out
