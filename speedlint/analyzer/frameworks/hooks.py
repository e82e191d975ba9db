"""Every framework's hook table, and the hooks a class has: what the program model asks.

The framework modules describe their base classes and hooks (`lightning.HOOKS`, ...); this module
lists them once so that the program model needs one call whatever the framework.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Tuple

from speedlint.analyzer.frameworks import EVAL_HOOK, STEP_HOOK, HookTable, hook_kind, runs_without_grad
from speedlint.analyzer.frameworks import hf_hooks, lightning

#: The hook tables of the frameworks speedlint knows.
TABLES: Tuple[HookTable, ...] = (lightning.HOOKS, lightning.CALLBACK_HOOKS, hf_hooks.TRAINER_HOOKS, hf_hooks.CALLBACK_HOOKS)
#: Every hook name that runs once per training step or evaluation batch, whatever the framework.
BATCH_HOOKS = frozenset().union(*(t.step | t.eval for t in TABLES))
#: The framework base class names (`LightningModule`, `TrainerCallback` ...), however imported.
HOOK_CLASSES = frozenset().union(*(t.classes for t in TABLES))


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


def batch_hook(base_names: Iterable[str], name: str) -> Optional[str]:
    """"step" / "eval" when a method `name` of a class with these base names runs once per
    training step / evaluation batch in a framework's own loop."""
    kind = hook_kind(TABLES, base_names, name)
    return kind if kind in (STEP_HOOK, EVAL_HOOK) else None
