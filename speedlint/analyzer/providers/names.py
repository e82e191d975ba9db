"""Qualified names through every import spelling.

`import torch as t; t.utils.data.DataLoader` and `from torch.utils.data import DataLoader as DL`
both resolve to `torch.utils.data.DataLoader`. This is a single cheap pass over the import
statements of a module (much cheaper than full scope analysis), which is all the torch-aware
rules need: names that a file binds itself to something else are rare, and a false match costs a
silent rule, not a wrong fix.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

#: Public and internal spellings of the same object, mapped to one canonical name.
CANONICAL = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.dataset.Dataset": "torch.utils.data.Dataset",
    "torch.utils.data.dataset.IterableDataset": "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.TensorDataset": "torch.utils.data.TensorDataset",
    "torch.autograd.grad_mode.no_grad": "torch.no_grad",
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.grad_mode.inference_mode": "torch.inference_mode",
    "torch.autograd.inference_mode": "torch.inference_mode",
    "torch.amp.autocast_mode.autocast": "torch.autocast",
    "torch.amp.autocast": "torch.autocast",
    "torch.cpu.amp.autocast": "torch.cpu.amp.autocast",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
}


def dotted(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while node.__class__ is cst.Attribute:  # (LibCST's node classes have no subclasses)
        parts.append(node.attr.value)
        node = node.value
    if node.__class__ is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _import_name(node: cst.BaseExpression) -> str:
    return dotted(node) or ""


class ImportMap:
    """Local name -> qualified name, from every import in the module (any nesting level)."""

    def __init__(self, module: cst.Module) -> None:
        self.aliases: Dict[str, str] = {}
        collector = _ImportCollector(self.aliases)
        collector.collect(module)

    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        """The qualified, canonical name of a Name/Attribute expression, when it is imported."""
        if isinstance(node, cst.Call):
            return None
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        target = self.aliases.get(head)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        return CANONICAL.get(full, full)

    def matches(self, node: cst.BaseExpression, *names: str) -> bool:
        q = self.qualname(node)
        return q is not None and q in names

class _ImportCollector(cst.CSTVisitor):
    def __init__(self, aliases: Dict[str, str]) -> None:
        super().__init__()
        self.aliases = aliases

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = _import_name(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self.aliases.setdefault(head, head)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return False
        base = _import_name(node.module)
        for alias in node.names:
            name = _import_name(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{base}.{name}"
        return False

    # Imports never live inside expressions; skipping them keeps the pass cheap.
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in node.body)

    def collect(self, module: cst.Module) -> None:
        """What `module.visit(self)` does, in source order, without LibCST's node rebuilding
        (`walk.children`) and without descending into expressions (no import lives there)."""
        from speedlint.analyzer.providers.walk import children

        stack: List[cst.CSTNode] = [module]
        pop, extend = stack.pop, stack.extend
        Import, ImportFrom, Line, Expression = cst.Import, cst.ImportFrom, cst.SimpleStatementLine, cst.BaseExpression
        while stack:
            node = pop()
            kind = node.__class__
            if kind is Import:
                self.visit_Import(node)  # type: ignore[arg-type]
                continue
            if kind is ImportFrom:
                self.visit_ImportFrom(node)  # type: ignore[arg-type]
                continue
            if kind is Line and not self.visit_SimpleStatementLine(node):  # type: ignore[arg-type]
                continue
            if isinstance(node, Expression):
                continue
            kids = children(node)
            if kids:
                extend(reversed(kids))
