"""What `self.hparams.name` holds in a Lightning class, for the value tracer (`providers.values`).

Lightning stores a module's constructor arguments as `self.hparams`: `self.save_hyperparameters()`
keeps every `__init__` parameter (2.x, and 1.x from 1.3), `self.hparams = args` (1.x) keeps a
namespace. The value is, in order: the value of a Hydra config whose `_target_` names the class
(it builds the object), the option defaults of the namespace every constructor call passes (the
whole program: `FileSeeds.project["hparams"]`), or the `__init__` parameter itself.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.frameworks import Knob
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.training import TorchFacts

#: How `hparam` found the value: "config" (a `Knob` naming the config line), "option" (command-line
#: defaults), "param" (the `__init__` function and parameter: the caller traces it).
HParam = Tuple[str, Any]


def hparam(facts: TorchFacts, expr: cst.Attribute) -> Optional[HParam]:
    """`self.hparams.name` in a class that saved its hyper-parameters; None when not known."""
    if dotted(expr.value) != "self.hparams":
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
            path, line, raw, value, col, end_col, _style, _shared = config
            return "config", Knob(attr, value, "config", path, line, raw, col=col, end_col=end_col)
        options = (known.get("options") or {}).get(attr)
        if options:
            return "option", tuple(options)
    init = next(iter(facts.methods.get((cls.name.value, "__init__"), ())), None)
    if init is None or not _saves_all(facts, init):
        return None
    for param in (*init.params.params, *init.params.kwonly_params):
        if param.name.value == attr:
            return "param", (init, param)
    return None


def _saves_all(facts: TorchFacts, init: cst.FunctionDef) -> bool:
    """`self.save_hyperparameters()` (no arguments, or parameter names as strings) in `__init__`."""
    for node in facts.units[init].calls:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "save_hyperparameters" and dotted(func.value) == "self":
            return all(a.keyword is not None or isinstance(a.value, cst.SimpleString) for a in node.args)
    return False
