"""The hooks of the Hugging Face `transformers.Trainer` and its callbacks (no LibCST: the program
model and the `ast` pre-look read them too).

A `Trainer` subclass's `training_step` and `compute_loss` run once per training step, its
`prediction_step` once per evaluation batch; a `TrainerCallback`'s `on_step_begin`,
`on_step_end` and `on_substep_end` once per step (per micro-batch for the last), its
`on_prediction_step` once per evaluation batch. The Trainer's own loop is not read: only the
methods a project overrides are hot.
"""

from __future__ import annotations

from speedlint.analyzer.frameworks import HookTable

PACKAGES = frozenset({"transformers"})

#: `transformers.Trainer` (and `Seq2SeqTrainer`) subclasses.
TRAINER_HOOKS = HookTable(
    framework="Hugging Face Trainer",
    packages=PACKAGES,
    classes=frozenset({"Trainer", "Seq2SeqTrainer"}),
    step=frozenset({"training_step", "compute_loss"}),
    eval=frozenset({"prediction_step"}),
)
#: `transformers.TrainerCallback` subclasses.
CALLBACK_HOOKS = HookTable(
    framework="Hugging Face Trainer",
    packages=PACKAGES,
    classes=frozenset({"TrainerCallback"}),
    step=frozenset({"on_step_begin", "on_step_end", "on_substep_end"}),
    eval=frozenset({"on_prediction_step"}),
)
