"""What one Python file says about config files, from its `ast` (part of the file's summary).

Recorded per file (lists and dicts of JSON values: they go to the cache as JSON; the whole
summary is then made read-only, lists as tuples, by `program.compact`), functions named by the
line of their `def` (0: the module's top level):

* `loads`: `[def line, target, format, path, line]`: a config loaded into a name (`cfg = yaml.safe_load(f)`
  with `f` from `with open(path) as f`, `json.load(open(path))`, `json.loads(f.read())`,
  `OmegaConf.load(path)`, `toml.load(path)`, `tomllib.load(f)`, `parser = ConfigParser();
  parser.read(path)`), or returned (target `"<return>"`);
* `hydra`: `[def line, config folder, config name]` for a function decorated with `@hydra.main`
  (its first parameter is the composed config);
* `fills`: `[def line, target, source access, overlay]`: `args = Namespace(**cfg)`,
  `HParams(**cfg["train"])` (not an overlay: the object is the config), `vars(args).update(cfg)`,
  `args.__dict__.update(cfg)`, `for k, v in cfg.items(): setattr(args, k, v)`,
  `parser.set_defaults(**cfg)` (an overlay: keys the config lacks keep their argparse default);
* `consts` / `argparse`: module-level names and argparse options (`dest`) whose value is a path.

A path is `["cwd", "configs/a.yaml"]` (relative to where the script runs), `["here", "../a.yaml"]`
(relative to this file, from `__file__`), `["abs", "/etc/a.yaml"]`, or a path that another part
of the program gives: `["param", name, suffix]`, `["arg", dest, suffix]`, `["import", module,
level, name, suffix]`; an argparse option that is required, with no default (or a positional),
is `["choice", dest]`: one of the project's config files (`configs.candidates`). An access is `[root, key, key, ...]` where root is a name or `self.<attr>`.
"""

from __future__ import annotations

import ast
import posixpath
from typing import Any, Dict, List, Optional, Tuple

from speedlint.analyzer.vocabulary import dotted_name

#: Calls that read a config from a file object, a string or a path: qualified name -> format.
_READERS = {
    "yaml.safe_load": "yaml", "yaml.load": "yaml", "yaml.full_load": "yaml", "yaml.unsafe_load": "yaml",
    "json.load": "json", "json.loads": "json",
    "toml.load": "toml", "toml.loads": "toml", "tomllib.load": "toml", "tomllib.loads": "toml",
    "tomli.load": "toml", "tomli.loads": "toml",
    "omegaconf.OmegaConf.load": "yaml",
}
_PARSERS = ("configparser.ConfigParser", "configparser.RawConfigParser", "configparser.SafeConfigParser")
#: Wrappers that make an object with the same keys as a config (`EasyDict(cfg)`).
WRAPPERS = frozenset({
    "EasyDict", "edict", "AttrDict", "Munch", "munchify", "Box", "DictConfig", "create", "deepcopy", "copy",
    "dict", "DotMap", "Dict", "ConfigDict", "to_container", "OrderedDict", "namedtuple_from",
})
_PATH_WRAPPERS = frozenset({"abspath", "realpath", "normpath", "expanduser", "str", "Path", "PurePath", "PosixPath", "resolve", "absolute", "fspath"})
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".ini", ".cfg", ".conf")


def walk(node: ast.AST) -> List[ast.AST]:
    """`list(ast.walk(node))`: the same nodes in the same (breadth-first) order, about twice as
    fast (one list, no generators)."""
    out = [node]
    append = out.append
    AST = ast.AST
    for sub in out:  # (the nodes appended meanwhile are visited too)
        for name in sub._fields:
            value = getattr(sub, name, None)
            if value.__class__ is list:
                for child in value:
                    if isinstance(child, AST):
                        append(child)
            elif isinstance(value, AST):
                append(value)
    return out


class _ConfigFacts:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.imports: Dict[str, str] = {}
        self.loads: List[List[Any]] = []
        self.hydra: List[List[Any]] = []
        self.fills: List[List[Any]] = []
        self.consts: Dict[str, Any] = {}
        self.argparse: Dict[str, Any] = {}
        self.imported: Dict[str, List[Any]] = {}  # name -> [module, level, original name]

    # names -----------------------------------------------------------------------------------
    def qualname(self, node: ast.AST) -> str:
        d = dotted_name(node)
        if d is None:
            return ""
        head, _, rest = d.partition(".")
        target = self.imports.get(head)
        if target is None:
            return d
        return f"{target}.{rest}" if rest else target

    def run(self) -> Optional[Dict[str, Any]]:
        everything = list(all_statements(self.tree))
        for node, _ in everything:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        self.imports.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        self.imported[alias.asname or alias.name] = [node.module or "", node.level, alias.name]
        module_statements = block_statements(self.tree.body)
        module_binds = _binds(module_statements)
        for name, values in module_binds.items():
            if len(values) == 1:
                spec = self.path(values[0], module_binds, (), 0)
                if spec is not None:
                    self.consts[name] = spec
        for node, _ in everything:
            call = node.value if isinstance(node, ast.Expr) else None
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
                self._argparse(call, module_binds)
        self._scope(0, module_statements, module_binds, ())
        for node, _ in everything:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                statements = block_statements(node.body)
                binds = _binds(statements)
                params = tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
                self._scope(node.lineno, statements, {**module_binds, **binds} if binds else module_binds, params, node)
        if not (self.loads or self.hydra or self.fills or self.consts or self.argparse):
            return None
        out: Dict[str, Any] = {}
        for key in ("loads", "hydra", "fills", "consts", "argparse"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.consts or self.loads or self.hydra:
            wanted = {s[3] for s in self.loads if s[3] and s[3][0] == "import"} | {s[1] for s in self.hydra if s[1] and s[1][0] == "import"}
            if wanted:
                out["imported"] = {k: v for k, v in self.imported.items()}
        return out

    def _argparse(self, call: ast.Call, binds: Dict[str, List[ast.AST]]) -> None:
        dest = None
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        for kw in call.keywords:
            if kw.arg == "dest" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                dest = kw.value.value
        if dest is None:
            longs = [f for f in flags if f.startswith("--")]
            chosen = longs[0] if longs else (flags[0] if flags else None)
            if chosen is None:
                return
            dest = chosen.lstrip("-").replace("-", "_")
        for kw in call.keywords:
            if kw.arg == "default":
                spec = self.path(kw.value, binds, (), 0)
                if spec is not None:
                    self.argparse[dest] = spec
                return
        # no default: a path the command line must give; a required one (or a positional) is
        # one of the project's config files (`configs.candidates`)
        required = any(kw.arg == "required" and isinstance(kw.value, ast.Constant) and kw.value.value is True for kw in call.keywords)
        positional = bool(flags) and not any(f.startswith("-") for f in flags)
        self.argparse.setdefault(dest, ["choice", dest] if required or positional else None)

    # paths -----------------------------------------------------------------------------------
    def path(self, node: ast.AST, binds: Dict[str, List[ast.AST]], params: Tuple[str, ...], depth: int) -> Optional[List[Any]]:
        """The path an expression is, as far as this file shows (see the module docstring)."""
        if depth > 8:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if not text or "\n" in text or len(text) > 300 or text.startswith("~"):
                return None
            return ["abs", posixpath.normpath(text)] if text.startswith("/") else ["cwd", text]
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return ["file"]
            if node.id in params:
                return ["param", node.id, ""]
            values = binds.get(node.id, [])
            if len(values) == 1:
                return self.path(values[0], binds, params, depth + 1)
            if not values and node.id in self.imported:
                module, level, orig = self.imported[node.id]
                return ["import", module, level, orig, ""]
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == "parent":
                return _dirname(self.path(node.value, binds, params, depth + 1))
            base = dotted_name(node.value)
            if base is not None and "." not in base and base not in self.imports:  # `args.config`, `opt.cfg`
                return ["arg", node.attr, ""]
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # Path(...) / "a.yaml"
            return _join(self.path(node.left, binds, params, depth + 1), self.path(node.right, binds, params, depth + 1))
        if isinstance(node, ast.Call):
            q = self.qualname(node.func)
            tail = q.rsplit(".", 1)[-1]
            args = node.args
            if q in ("os.path.join", "posixpath.join") or tail == "joinpath":
                parts = ([node.func.value] if tail == "joinpath" and isinstance(node.func, ast.Attribute) else []) + list(args)
                spec = self.path(parts[0], binds, params, depth + 1) if parts else None
                for part in parts[1:]:
                    spec = _join(spec, self.path(part, binds, params, depth + 1))
                return spec
            if q in ("os.path.dirname", "posixpath.dirname") and len(args) == 1:
                return _dirname(self.path(args[0], binds, params, depth + 1))
            if tail in _PATH_WRAPPERS:
                if isinstance(node.func, ast.Attribute) and tail in ("resolve", "absolute") and not args:
                    return self.path(node.func.value, binds, params, depth + 1)
                if len(args) == 1:
                    return self.path(args[0], binds, params, depth + 1)
        return None

    # loads -----------------------------------------------------------------------------------
    def _scope(self, line: int, statements: List[ast.stmt], binds: Dict[str, List[ast.AST]], params: Tuple[str, ...], fn: Optional[ast.AST] = None) -> None:
        """The loads, fills and parsers of a module's or a function's `statements` (its
        `block_statements`)."""
        opened: Dict[str, Any] = {}  # file object name -> path (`with open(p) as f`)
        read: Dict[str, Any] = {}  # text name -> path (`data = f.read()`)
        parsers: Dict[str, bool] = {}
        if fn is not None:
            for dec in getattr(fn, "decorator_list", []):
                if isinstance(dec, ast.Call) and self.qualname(dec.func) in ("hydra.main",):
                    self._hydra(line, dec, binds, params)
        for stmt in statements:
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    spec = self._opened(item.context_expr, binds, params)
                    if spec is not None and isinstance(item.optional_vars, ast.Name):
                        opened[item.optional_vars.id] = spec
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
                name = target.id if isinstance(target, ast.Name) else dotted_name(target) if isinstance(target, ast.Attribute) else None
                if name is None:
                    continue
                keys: List[Any] = []  # `json.load(f)["train"]`: the part of the file kept
                while isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, (str, int)):
                    keys.insert(0, value.slice.value)
                    value = value.value
                if keys and not isinstance(value, ast.Call):
                    value = stmt.value
                    keys = []
                if isinstance(value, ast.Call):
                    q = self.qualname(value.func)
                    fmt, spec = self._load(value, q, binds, params, opened, read)
                    if fmt is not None:
                        self.loads.append([line, name, fmt, spec, stmt.lineno, *([keys] if keys else [])])
                        continue
                    if keys:
                        continue  # a subscript of another call's result
                    if q in _PARSERS:
                        parsers[name] = True
                        continue
                    if isinstance(value.func, ast.Attribute) and value.func.attr in ("read", "read_text") and not value.args:
                        base = value.func.value
                        if isinstance(base, ast.Name) and base.id in opened:
                            read[name] = opened[base.id]
                        elif isinstance(base, ast.Call):
                            spec = self._opened(base, binds, params) or (self.path(base.args[0], binds, params, 0) if base.args and self.qualname(base.func).rsplit(".", 1)[-1] in ("Path",) else None)
                            if spec is not None:
                                read[name] = spec
                        continue
                    splat = _splat_source(value)
                    if splat is not None:
                        self.fills.append([line, name, splat, False])
            elif isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
                fmt, spec = self._load(stmt.value, self.qualname(stmt.value.func), binds, params, opened, read)
                if fmt is not None:
                    self.loads.append([line, "<return>", fmt, spec, stmt.lineno])
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._call_statement(line, stmt.value, binds, params, parsers)
            elif isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call):
                self._setattr_loop(line, stmt)

    def _call_statement(self, line: int, call: ast.Call, binds: Dict[str, List[ast.AST]], params: Tuple[str, ...], parsers: Dict[str, bool]) -> None:
        func = call.func
        if not isinstance(func, ast.Attribute):
            return
        owner = dotted_name(func.value)
        if func.attr in ("read", "read_file") and owner in parsers and call.args:  # parser.read(path)
            spec = self.path(call.args[0], binds, params, 0) if func.attr == "read" else self._opened(call.args[0], binds, params)
            self.loads.append([line, owner, "ini", spec, call.lineno])
        elif func.attr == "update" and len(call.args) == 1:
            base = func.value
            target = None
            if isinstance(base, ast.Call) and dotted_name(base.func) == "vars" and len(base.args) == 1:
                target = dotted_name(base.args[0])  # vars(args).update(cfg)
            elif isinstance(base, ast.Attribute) and base.attr == "__dict__":
                target = dotted_name(base.value)  # args.__dict__.update(cfg)
            source = _access(call.args[0])
            if target is not None and source is not None:
                self.fills.append([line, target, source, True])
        elif func.attr == "set_defaults":  # parser.set_defaults(**cfg): what parse_args() gives
            for kw in call.keywords:
                if kw.arg is None:
                    source = _access(kw.value)
                    if source is not None:
                        self.fills.append([line, "<argparse>", source, True])

    def _setattr_loop(self, line: int, loop: ast.For) -> None:
        """`for k, v in cfg.items(): setattr(args, k, v)`."""
        it = loop.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items" and not it.args):
            return
        source = _access(it.func.value)
        if source is None:
            return
        for stmt in loop.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and dotted_name(stmt.value.func) == "setattr" and len(stmt.value.args) == 3:
                target = dotted_name(stmt.value.args[0])
                if target is not None:
                    self.fills.append([line, target, source, True])

    def _opened(self, node: ast.AST, binds: Dict[str, List[ast.AST]], params: Tuple[str, ...]) -> Optional[List[Any]]:
        """`open(path, ...)` / `path.open()` / `io.open(...)` -> the path."""
        if not isinstance(node, ast.Call):
            return None
        q = self.qualname(node.func)
        if q in ("open", "io.open", "codecs.open") and node.args:
            return self.path(node.args[0], binds, params, 0)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "open":
            return self.path(node.func.value, binds, params, 0)
        return None

    def _load(self, call: ast.Call, q: str, binds: Dict[str, List[ast.AST]], params: Tuple[str, ...], opened: Dict[str, Any], read: Dict[str, Any]) -> Tuple[Optional[str], Optional[List[Any]]]:
        """A config read by `call` (`q`: its function's qualified name): (format, path)."""
        fmt = _READERS.get(q)
        if fmt is None and q.endswith("OmegaConf.load"):
            fmt = "yaml"
        if fmt is None or not call.args:
            return None, None
        arg = call.args[0]
        spec: Optional[List[Any]] = None
        if isinstance(arg, ast.Name) and arg.id in opened:
            spec = opened[arg.id]
        elif isinstance(arg, ast.Name) and arg.id in read:
            spec = read[arg.id]
        elif isinstance(arg, ast.Call):
            spec = self._opened(arg, binds, params)
            if spec is None and isinstance(arg.func, ast.Attribute) and arg.func.attr in ("read", "read_text"):
                inner = arg.func.value
                if isinstance(inner, ast.Name) and inner.id in opened:
                    spec = opened[inner.id]
                else:
                    spec = self._opened(inner, binds, params)
                    if spec is None and isinstance(inner, ast.Call) and inner.args and self.qualname(inner.func).rsplit(".", 1)[-1] == "Path":
                        spec = self.path(inner.args[0], binds, params, 0)
        elif not q.endswith(("load", "loads")) or q.endswith("OmegaConf.load") or q in ("toml.load",):
            spec = self.path(arg, binds, params, 0)
        if spec is None and (q.endswith("OmegaConf.load") or q == "toml.load"):
            spec = self.path(arg, binds, params, 0)
        return fmt, spec

    def _hydra(self, line: int, dec: ast.Call, binds: Dict[str, List[ast.AST]], params: Tuple[str, ...]) -> None:
        path = dec.args[0] if dec.args else None
        name = dec.args[1] if len(dec.args) > 1 else None
        for kw in dec.keywords:
            if kw.arg == "config_path":
                path = kw.value
            elif kw.arg == "config_name":
                name = kw.value
        if path is None or name is None or not isinstance(name, ast.Constant) or not isinstance(name.value, str):
            return
        spec = self.path(path, binds, (), 0)
        if spec is not None and spec[0] == "cwd":  # Hydra: relative to the file that declares it
            spec = ["here", spec[1]]
        if spec is not None and params:
            # (`config_name="train.yaml"` and `config_name="train"` name the same file)
            self.hydra.append([line, spec, name.value[: -len(".yaml")] if name.value.endswith(".yaml") else name.value])


#: The fields of a statement that hold blocks, in the order `all_statements` and
#: `block_statements` take them (`_block_fields`, per class).
_BLOCKS = ("body", "orelse", "finalbody", "handlers")
_BLOCK_FIELDS: Dict[type, Tuple[str, ...]] = {}
_MATCH = getattr(ast, "Match", None)  # (Python 3.10+)


def _block_fields(kind: type) -> Tuple[str, ...]:
    fields = _BLOCK_FIELDS.get(kind)
    if fields is None:
        fields = _BLOCK_FIELDS[kind] = tuple(f for f in _BLOCKS if f in kind._fields)  # type: ignore[attr-defined]
    return fields


def all_statements(tree: ast.Module) -> List[Tuple[ast.stmt, Optional[ast.AST]]]:
    """(statement, the function it is in) for every statement of a module, nested function and
    class bodies included: no expression is visited (a tenth of a full `ast.walk`)."""
    out: List[Tuple[ast.stmt, Optional[ast.AST]]] = []
    todo: List[Tuple[ast.stmt, Optional[ast.AST]]] = [(s, None) for s in reversed(tree.body)]
    while todo:
        item = todo.pop()
        out.append(item)
        stmt, fn = item
        kind = stmt.__class__
        fields = _block_fields(kind)
        if not fields and kind is not _MATCH:
            continue
        inner = stmt if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef else fn
        for name in fields:
            for child in reversed(getattr(stmt, name)):
                if isinstance(child, ast.stmt):
                    todo.append((child, inner))
                elif isinstance(child, ast.ExceptHandler):  # (the one kind of `ast.excepthandler`)
                    todo.extend((c, inner) for c in reversed(child.body))
        if kind is _MATCH:  # pragma: no cover - rare in training code
            for case in stmt.cases:  # type: ignore[attr-defined]
                todo.extend((c, inner) for c in reversed(case.body))
    return out


def block_statements(body: List[ast.stmt]) -> List[ast.stmt]:
    """The statements of a body, nested blocks included (not nested functions or classes)."""
    out: List[ast.stmt] = []
    todo: List[Any] = list(reversed(body))
    while todo:
        stmt = todo.pop()
        kind = stmt.__class__
        if kind is ast.ExceptHandler:
            todo.extend(reversed(stmt.body))  # (its body only: a handler is no statement)
            continue
        out.append(stmt)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            continue
        for name in _block_fields(kind):
            todo.extend(reversed(getattr(stmt, name)))
    return out


def _binds(statements: List[ast.stmt]) -> Dict[str, List[ast.AST]]:
    """name -> the values assigned to it in a body (its `block_statements`)."""
    out: Dict[str, List[ast.AST]] = {}
    for stmt in statements:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            out.setdefault(stmt.target.id, []).append(stmt.value)
    return out


def _splat_source(call: ast.Call) -> Optional[List[Any]]:
    """`Cls(**cfg)`, `Cls(**cfg["train"])`, `EasyDict(cfg)`: the access the object is made from."""
    for kw in call.keywords:
        if kw.arg is None and len(call.keywords) == 1 and not call.args:
            return _access(kw.value)
    return None


def _access(node: ast.AST) -> Optional[List[Any]]:
    """`cfg["train"].opt` -> ["cfg", "train", "opt"]; `self.cfg.x` -> ["self.cfg", "x"]."""
    keys: List[Any] = []
    while True:
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return [f"self.{node.attr}", *reversed(keys)]
            keys.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, (str, int)):
            keys.append(node.slice.value)
            node = node.value
        elif isinstance(node, ast.Name):
            return [node.id, *reversed(keys)]
        else:
            return None


def _join(base: Optional[List[Any]], part: Optional[List[Any]]) -> Optional[List[Any]]:
    if base is None or part is None:
        return None
    if part[0] == "abs":
        return part
    if part[0] != "cwd":
        return None  # only literal parts after the first
    rel = part[1]
    if base[0] == "file":
        return None
    if base[0] in ("cwd", "here", "abs"):
        return [base[0], posixpath.normpath(posixpath.join(base[1], rel))] if base[1] else [base[0], posixpath.normpath(rel)]
    return [*base[:-1], posixpath.join(base[-1], rel) if base[-1] else rel]


def _dirname(spec: Optional[List[Any]]) -> Optional[List[Any]]:
    if spec is None:
        return None
    if spec[0] == "file":
        return ["here", ""]
    if spec[0] in ("cwd", "here", "abs"):
        parent = posixpath.dirname(spec[1].rstrip("/"))
        if spec[0] == "here" and (not spec[1] or spec[1].endswith("..")):
            parent = posixpath.join(spec[1], "..") if spec[1] else ".."
        return [spec[0], parent]
    return None


#: Words without which a module neither reads a config file nor names a config path.
_WORDS = ("yaml", "json", "toml", "OmegaConf", "onfigParser", "hydra", "add_argument", ".cfg", ".ini", ".conf")


def config_summary(tree: ast.Module, text: str = "") -> Optional[Dict[str, Any]]:
    """The config facts of one module (None: it reads no config and names no config path)."""
    if text and not any(word in text for word in _WORDS):
        return None
    try:
        return _ConfigFacts(tree).run()
    except RecursionError:  # pragma: no cover - pathological nesting
        return None


def looks_like_config(path: str) -> bool:
    return path.lower().endswith(_CONFIG_SUFFIXES)
