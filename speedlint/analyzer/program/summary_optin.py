"""Autocasts an on/off option switches on, in a module's `ast` (SPD301's opt-in AMP, whole program).

`if self.args.use_amp: with torch.cuda.amp.autocast(): ...` and `autocast(enabled=args.amp)` run
in mixed precision only when a namespace attribute (`use_amp`, `amp`) is true. The summary
records, per such autocast, the attribute, the autocast's line and the class (or module-level
function) that holds it: `amp_gates` [[attribute, line, class or None, function or None]]. The
link (`program.optin_seeds`) gives the module that declares an option of that name, with its
namespace passed to that class or function, the gate in its seeds: SPD301 reports the option's
default there. An attribute the module itself sets to a constant (`args.use_amp = True`) is no
opt-in gate.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Set

from speedlint.analyzer.ast_fields import FieldTable

#: (seeds and summary key)
KEY = "amp_gates"


def _is_autocast(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "autocast"


def _namespace_attr(test: Optional[ast.AST]) -> Optional[str]:
    """`args.use_amp`, `self.args.use_amp`, `cfg.train.amp`: the attribute (not `self.x`: a
    field of the object itself is not a namespace's option)."""
    if not isinstance(test, ast.Attribute):
        return None
    base = test.value
    if isinstance(base, ast.Name) and base.id == "self":
        return None
    return test.attr


#: Fields that hold no node, or only a context or an operator (no statement, no call below it).
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "asname", "module", "level", "kind", "type_comment", "conversion", "is_async"})
#: node class -> the fields `_children` reads
_CHILD_FIELDS = FieldTable(_LEAF_FIELDS, {ast.Constant: ()})


def _children(node: ast.AST) -> List[ast.AST]:
    """`ast.iter_child_nodes(node)` as a list, in its order, without the contexts and operators
    (nodes with nothing below them that `amp_gate_facts` looks for)."""
    out: List[ast.AST] = []
    for name in _CHILD_FIELDS[node.__class__]:
        value = getattr(node, name, None)
        if value.__class__ is list:
            out += [c for c in value if isinstance(c, ast.AST)]
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


def amp_gate_facts(tree: ast.Module) -> Dict[str, Any]:
    """`{KEY: gates}` for a module with autocasts behind a namespace attribute, else `{}`."""
    gates: List[List[Any]] = []
    constants: Set[str] = set()  # attributes set to a constant here (`args.use_amp = True`)

    def walk(node: ast.AST, cls: Optional[str], fn: Optional[str], tests: List[Optional[str]]) -> None:
        for child in _children(node):
            if isinstance(child, ast.ClassDef):
                walk(child, child.name if cls is None and fn is None else cls, fn, [])
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, cls, fn or child.name, [])
                continue
            if isinstance(child, ast.Assign) and isinstance(child.value, ast.Constant):
                for t in child.targets:
                    if isinstance(t, ast.Attribute):
                        constants.add(t.attr)
            if isinstance(child, ast.If):
                gate = _namespace_attr(child.test)
                for stmt in child.body:
                    walk_stmt(stmt, cls, fn, [*tests, gate])
                for stmt in child.orelse:
                    walk_stmt(stmt, cls, fn, tests)
                continue
            if isinstance(child, (ast.With, ast.AsyncWith)):
                for item in child.items:
                    if _is_autocast(item.context_expr):
                        note(item.context_expr, cls, fn, tests)  # type: ignore[arg-type]
            walk(child, cls, fn, tests)

    def walk_stmt(stmt: ast.stmt, cls: Optional[str], fn: Optional[str], tests: List[Optional[str]]) -> None:
        holder = ast.Module(body=[stmt], type_ignores=[])
        walk(holder, cls, fn, tests)

    def note(call: ast.Call, cls: Optional[str], fn: Optional[str], tests: List[Optional[str]]) -> None:
        enabled = next((k.value for k in call.keywords if k.arg == "enabled"), None)
        attr = _namespace_attr(enabled) or next((t for t in reversed(tests) if t is not None), None)
        if attr is not None:
            gates.append([attr, call.lineno, cls, fn])

    walk(tree, None, None, [])
    kept = [g for g in gates if g[0] not in constants]
    return {KEY: kept} if kept else {}
