"""Every framework's hook table, and the hooks a class has: what the program model asks.

The framework modules describe their base classes and hooks (`lightning.HOOKS`, ...); this module
lists them once so that the program model needs one call whatever the framework.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Tuple

from speedlint.analyzer.frameworks import HookTable, hook_kind, runs_without_grad
from speedlint.analyzer.frameworks import lightning

#: The hook tables of the frameworks speedlint knows.
TABLES: Tuple[HookTable, ...] = (lightning.HOOKS, lightning.CALLBACK_HOOKS)


def class_hooks(base_names: Iterable[str], methods: Mapping[str, int]) -> Dict[str, str]:
    """Method name -> "step" / "eval" / "loader" for the methods of a class (with these base
    names, its whole ancestry) that a framework's own loop calls."""
    names = set(base_names)
    if not names:
        return {}
    out: Dict[str, str] = {}
    for name in methods:
        kind = hook_kind(TABLES, names, name)
        if kind is not None:
            out[name] = kind
    return out


def framework_runs_without_grad(base_names: Iterable[str], name: str) -> bool:
    """The framework runs this method of a class with these base names without autograd."""
    return runs_without_grad(TABLES, base_names, name)
