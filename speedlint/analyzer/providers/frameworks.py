"""Framework facts for one file, for the rules (`speedlint.analyzer.frameworks`).

* `framework_hook(facts, fn)`: (kind, hook name, runs without grad) when a framework's own loop
  calls `fn` ("step": once per training step, "eval": once per evaluation batch, "loader": a
  `*_dataloader()` hook whose loader the framework iterates every epoch). The whole program says
  it (`FileSeeds.project["framework_hooks"]`, subclasses across modules included); without seeds
  the class's written bases decide.
* `hparam(facts, expr)`: what `self.hparams.name` holds in a Lightning class: a Hydra config's
  value for the class, the option defaults of the namespace it was given, or the `__init__`
  parameter (`save_hyperparameters()`).
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.frameworks.hooks import TABLES, class_hooks, framework_runs_without_grad
from speedlint.analyzer.frameworks.seeds import hook_entry
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.training import TorchFacts


def _written_bases(facts: TorchFacts, cls: cst.ClassDef) -> List[str]:
    out = []
    for base in cls.bases:
        name = facts.imports.qualname(base.value)
        if name:
            out.append(name)
    return out


def framework_hook(facts: TorchFacts, fn: Optional[cst.FunctionDef]) -> Optional[Tuple[str, str, bool]]:
    if fn is None:
        return None
    seeds = facts.seeds
    if seeds is not None and seeds.project.get("framework_hooks"):
        ordinal = facts._function_ordinal.get(fn, -1)
        return hook_entry(seeds.project, ordinal)
    cls = facts.function_class.get(fn)
    if cls is None:
        return None
    bases = _written_bases(facts, cls)
    kind = class_hooks(bases, {fn.name.value: 0}).get(fn.name.value)
    return (kind, fn.name.value, framework_runs_without_grad(bases, fn.name.value)) if kind else None


def hook_of_node(facts: TorchFacts, node: cst.CSTNode) -> Optional[Tuple[str, str, bool]]:
    """The framework hook whose body holds `node` (the innermost function only)."""
    return framework_hook(facts, facts.enclosing_function(node))


def is_framework_class(facts: TorchFacts, cls: cst.ClassDef) -> bool:
    return any(t.matches(_written_bases(facts, cls)) for t in TABLES)


#: How `hparam` found the value: "config" (a config file's value, with its place), "option"
#: (command-line defaults), "param" (the `__init__` parameter: the caller traces it).
HParam = Tuple[str, Any]


def hparam(facts: TorchFacts, expr: cst.Attribute) -> Optional[HParam]:
    """`self.hparams.name` (or `self.hparams["name"]`) in a class that saved its hyper-parameters."""
    base = dotted(expr.value)
    if base != "self.hparams":
        return None
    attr = expr.attr.value
    cls = facts.enclosing_class(expr)
    if cls is None:
        return None
    seeds = facts.seeds
    known = (seeds.project.get("hparams") or {}).get(cls.name.value) if seeds is not None else None
    if known:
        config = (known.get("config") or {}).get(attr)
        if config is not None:
            return "config", config
        options = (known.get("options") or {}).get(attr)
        if options:
            return "option", tuple(options)
    init = next((f for f in facts.methods.get((cls.name.value, "__init__"), ())), None)
    if init is None or not _saves_all(init):
        return None
    for param in (*init.params.params, *init.params.kwonly_params):
        if param.name.value == attr:
            return "param", (init, param)
    return None


def _saves_all(init: cst.FunctionDef) -> bool:
    """`self.save_hyperparameters()` (no arguments, or parameter names as strings) in `__init__`."""
    for node in _calls(init):
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "save_hyperparameters" and dotted(func.value) == "self":
            return all(a.keyword is not None or isinstance(a.value, cst.SimpleString) for a in node.args)
    return False


def _calls(fn: cst.FunctionDef) -> List[cst.Call]:
    out: List[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            out.append(node)

    fn.body.visit(_V())
    return out
