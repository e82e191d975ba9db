"""What training frameworks do for the user's code: shared types for one module per framework.

A framework calls some of the user's methods itself: once per training step (`training_step` of a
LightningModule), once per evaluation batch (`validation_step`), once per epoch or per run (`*_epoch_end`,
`*_dataloader()`). It also holds the run's knobs (precision, cuDNN settings, debug tools) whose values
come from code, command-line defaults or config files. Each framework module (`lightning`, ...)
describes its hooks with a `HookTable` and reads its knobs into `Knob`s; the program model and the
rules read these facts and never name a framework class. Nothing here imports a framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, FrozenSet, Iterable, Optional, Tuple

#: How often the framework runs a hook.
STEP_HOOK, EVAL_HOOK, ONCE_HOOK, LOADER_HOOK = "step", "eval", "once", "loader"


@dataclass(frozen=True)
class HookTable:
    """The hooks of one family of framework base classes."""

    framework: str
    #: top-level packages (`pytorch_lightning`, `lightning`) and the class names in them whose
    #: subclasses' hooks the framework calls (`LightningModule`, `Callback`), however imported
    packages: FrozenSet[str]
    classes: FrozenSet[str]
    step: FrozenSet[str]
    eval: FrozenSet[str]
    #: hooks that return a data loader the framework iterates every epoch (built once per fit)
    loader: FrozenSet[str] = frozenset()
    #: eval hooks the framework itself runs without autograd (`inference_mode`/`no_grad`)
    grad_off: FrozenSet[str] = frozenset()

    def matches(self, base_names: Iterable[str]) -> bool:
        for name in base_names:
            head, _, rest = name.partition(".")
            if rest and head in self.packages and rest.rsplit(".", 1)[-1] in self.classes:
                return True
        return False

    def kind(self, name: str) -> Optional[str]:
        if name in self.step:
            return STEP_HOOK
        if name in self.eval:
            return EVAL_HOOK
        if name in self.loader:
            return LOADER_HOOK
        return None


def hook_kind(tables: Iterable[HookTable], base_names: Iterable[str], name: str) -> Optional[str]:
    """"step" / "eval" / "loader" when a class with these base names (its whole ancestry) has a
    method `name` that a framework calls at that rate; None otherwise."""
    names = set(base_names)
    for table in tables:
        if table.matches(names):
            kind = table.kind(name)
            if kind is not None:
                return kind
    return None


def runs_without_grad(tables: Iterable[HookTable], base_names: Iterable[str], name: str) -> bool:
    """The framework already runs this hook without autograd (Lightning's `validation_step`)."""
    names = set(base_names)
    return any(table.matches(names) and name in table.grad_off for table in tables)


@dataclass(frozen=True)
class Knob:
    """The value of one framework knob, and where it is written.

    `source`: "literal" (a keyword in code), "default" (the framework's default: the keyword is
    absent), "option" (a command-line option's default), "config" (a config file line), "unknown".
    `path`/`line` say where a finding about it goes (the keyword, the constructor, the config line);
    `code_path`/`code_line` name the code that reads it when the value is in a config file.
    """

    name: str
    value: Any
    source: str
    path: str
    line: int
    raw: str = ""
    code_path: str = ""
    code_line: int = 0
    #: column span of the value on its line (config files: what a fix replaces)
    col: int = -1
    end_col: int = -1

    @property
    def known(self) -> bool:
        return self.source != "unknown"


def position(knob: Knob) -> Tuple[str, int]:
    return knob.path, knob.line
