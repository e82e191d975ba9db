"""Adding the imports a fix needs, as LibCST's `AddImportsVisitor` adds them, at less cost.

`AddImportsVisitor`, run through LibCST's entry point (`transform_module`), first copies the
whole tree (to attach metadata it does not use), gathers the module's imports, then rebuilds the
tree, even when every import is there already (`import torch` opens almost every training file).
`add_imports` gives the module back as it is when the opening import block has them all (exactly
when the visitor changes nothing), and otherwise runs the visitor on the tree without the copy.
The fix engine's rounds and the codemods (`speedlint.fixers`) add their imports here.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Union

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor
from libcst.helpers import get_full_name_for_node

from speedlint.analyzer.findings import ImportSpec


def add_imports(module: cst.Module, imports: Iterable[ImportSpec]) -> cst.Module:
    """`module` with `imports` added where `AddImportsVisitor` adds them (the same text)."""
    needed = list(dict.fromkeys(imports))
    if all(imported_at_top(module, spec) for spec in needed):
        return module  # what `AddImportsVisitor` would give back, without its copy and walk of the tree
    context = CodemodContext()
    for spec in needed:
        AddImportsVisitor.add_needed_import(context, spec.module, spec.obj)
    return AddImportsVisitor(context).transform_module_impl(module)  # (its entry point would copy the tree first)


def _import_block(module: cst.Module) -> Iterator[Union[cst.Import, cst.ImportFrom]]:
    """The imports `AddImportsVisitor` counts as already there: the one-import lines that open the
    module, after its docstring or `__strict__` flag."""
    body = module.body
    start = 0
    if body and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1:
        first = body[0].body[0]
        if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString):
            start = 1
        elif (
            isinstance(first, cst.Assign) and len(first.targets) == 1
            and isinstance(first.targets[0].target, cst.Name) and first.targets[0].target.value == "__strict__"
        ):
            start = 1
    for statement in body[start:]:
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
            return
        line = statement.body[0]
        if not isinstance(line, (cst.Import, cst.ImportFrom)):
            return
        yield line


def imported_at_top(module: cst.Module, spec: ImportSpec) -> bool:
    """Whether `spec` is imported, unaliased, in the module's opening import block (then
    `AddImportsVisitor` leaves the module as it is; anything less certain answers False)."""
    for line in _import_block(module):
        if isinstance(line, cst.Import):
            if spec.obj is None and any(a.asname is None and a.evaluated_name == spec.module for a in line.names):
                return True
        elif spec.obj is not None and not line.relative and line.module is not None:
            if get_full_name_for_node(line.module) != spec.module:
                continue
            if isinstance(line.names, cst.ImportStar):
                return True
            if any(a.asname is None and a.evaluated_name == spec.obj for a in line.names):
                return True
    return False
