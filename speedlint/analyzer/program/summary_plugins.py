"""Plugins: modules a file loads by a name computed at run time, as its summary records them.

`importlib.import_module("losses." + name)`, `import_module(f"models.{arch}")`,
`importlib.import_module(args.model)` and `__import__(name)` load a module the code cannot name
statically, but the project's files say which modules can be loaded: every module of the
package named by the literal prefix, or, for a name with no literal part, the top-level modules
of the folders the script puts on `sys.path` (its own folder is always there). The summary
records such a call as the expression `["imp", spec]`, where `spec` is

* `"a.b"`: a literal name (`import_module("models.resnet")`);
* `"a.b.*"`: a submodule of the package `a.b` (`"a.b." + name`, `f"a.b.{name}"`);
* `"*"`: any top-level module (`import_module(args.model)`).

and, per file, `plugins` (the specs it loads, for the import graph), `sys_path` (the folders
it adds to `sys.path`, relative to the file's folder: `sys.path.append(os.path.join(BASE_DIR,
"models"))` gives `"models"`) and `script` (a `__main__` guard: an entry of its own, `scope`). The link step (`program.plugins`) turns a spec into modules.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional

#: A dotted module name, as a literal prefix may spell it.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")


def _is_loader(func: ast.AST) -> str:
    """"import_module" / "__import__" for the calls that load a module by name, else ""."""
    if func.__class__ is ast.Attribute and func.attr == "import_module":
        value = func.value
        return "import_module" if value.__class__ is ast.Name and value.id == "importlib" else ""
    if func.__class__ is ast.Name:
        name = func.id
        return name if name in ("import_module", "__import__") else ""
    return ""


def _literal_prefix(node: ast.AST) -> Optional[str]:
    """The literal text a module-name expression starts with ("" for none); None when the
    expression is not a name built at run time from a literal prefix and one dynamic part."""
    if node.__class__ is ast.Constant:
        value = node.value
        return value if isinstance(value, str) else None
    if node.__class__ is ast.BinOp and isinstance(node.op, ast.Add):
        left = node.left
        if left.__class__ is ast.Constant and isinstance(left.value, str):
            return left.value + "\x00"
        return None
    if node.__class__ is ast.JoinedStr:
        values = node.values
        if values and values[0].__class__ is ast.Constant and len(values) == 2:
            return str(values[0].value) + "\x00"
        return None
    if node.__class__ in (ast.Name, ast.Attribute, ast.Subscript):
        return "\x00"  # `args.model`, `cfg["arch"]`: no literal part
    return None


def plugin_expr(node: ast.Call) -> Optional[List[Any]]:
    """`["imp", spec]` for a call that loads a module by a computed or literal name, else None."""
    kind = _is_loader(node.func)
    if not kind or not node.args:
        return None
    if kind == "__import__" and len(node.args) < 4 and not any(k.arg == "fromlist" for k in node.keywords):
        # `__import__("a.b")` gives the top package `a`: only a bare name is the module itself
        text = _literal_prefix(node.args[0])
        if text is None or text != "\x00" and "." in text:
            return None
    else:
        text = _literal_prefix(node.args[0])
    if text is None:
        return None
    if not text.endswith("\x00"):  # a literal name
        return ["imp", text] if text and set(text) <= _NAME_CHARS and not text.startswith(".") else None
    prefix = text[:-1]
    if prefix == "":
        return ["imp", "*"]
    if prefix.endswith(".") and set(prefix) <= _NAME_CHARS and not prefix.startswith("."):
        return ["imp", prefix + "*"]
    return None  # `"model_" + name`: a name pattern, not a package


def _path_tail(node: ast.AST) -> Optional[str]:
    """The folder (relative to the script's folder) a `sys.path` entry names: the literal parts of
    `os.path.join(<base>, "models", "x")` after its first argument, or a relative literal."""
    if node.__class__ is ast.Constant and isinstance(node.value, str):
        value = node.value.strip()
        if not value or value.startswith(("/", "~")):
            return None
        return value[2:] if value.startswith("./") else value
    if node.__class__ is ast.Call and _dotted(node.func) in ("os.path.join", "join"):
        parts = node.args[1:]
        if parts and all(p.__class__ is ast.Constant and isinstance(p.value, str) for p in parts):
            tail = "/".join(p.value.strip("/") for p in parts)  # type: ignore[attr-defined]
            return tail if tail and ".." not in tail.split("/") else None
    return None


def _dotted(node: ast.AST) -> str:
    parts: List[str] = []
    while node.__class__ is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _is_script(tree: ast.AST) -> bool:
    """A module-level `if __name__ == "__main__":`: the file is run as a program of its own."""
    for stmt in getattr(tree, "body", ()):
        test = stmt.test if stmt.__class__ is ast.If else None
        if test.__class__ is ast.Compare and any(
            n.__class__ is ast.Name and n.id == "__name__" for n in (test.left, *test.comparators)
        ):
            return True
    return False


def plugin_facts(tree: ast.AST, text: str) -> Dict[str, Any]:
    """`plugins` (the specs the file loads), `sys_path` (the folders it adds to `sys.path`,
    relative to its own folder) and `script` (it has a `__main__` guard), when it has any."""
    out: Dict[str, Any] = {"script": True} if "__main__" in text and _is_script(tree) else {}
    if "import_module" not in text and "__import__" not in text and "sys.path" not in text:
        return out
    specs: List[str] = []
    folders: List[str] = []
    for node in ast.walk(tree):
        if node.__class__ is not ast.Call:
            continue
        func = node.func
        if func.__class__ is ast.Attribute and func.attr in ("append", "insert") and _dotted(func.value) == "sys.path":
            args = node.args
            arg = args[-1] if args else None
            tail = _path_tail(arg) if arg is not None else None
            if tail is not None and tail not in folders:
                folders.append(tail)
            continue
        got = plugin_expr(node)
        if got is not None and got[1] not in specs:
            specs.append(got[1])
    if specs:
        out["plugins"] = specs
    if folders:
        out["sys_path"] = folders
    return out
