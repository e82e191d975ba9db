"""PyTorch Lightning (1.x, 2.x) and Lightning Fabric: hooks, what Lightning does itself, knobs.

* **Hooks.** A `LightningModule`'s `training_step` (and `on_train_batch_*`, `on_before_backward`,
  `optimizer_step` ...) runs once per training step; `validation_step`/`test_step`/`predict_step`
  once per evaluation batch, under `inference_mode` (2.x default) or `no_grad` (1.x); a `Callback`'s
  batch hooks likewise. `*_epoch_*`, `on_fit_*` hooks run once per epoch or run (not hot).
  `*_dataloader()` hooks are called once per fit and their loader is iterated every epoch.
* **What Lightning does itself.** It moves every batch to the module's device (no `.to()` in user
  code) and drives backward, the optimizer step and `zero_grad`.
* **Knobs.** `Trainer(precision=..., benchmark=..., deterministic=..., detect_anomaly=...,
  profiler=...)` and `Fabric(precision=...)`, read from a literal keyword, an argparse default
  (`Trainer(precision=args.precision)`, `Trainer.from_argparse_args(args)`), or a config file
  (Hydra `configs/trainer/*.yaml` with `defaults:` composition, OmegaConf `lightning: trainer:`
  blocks, LightningCLI YAML): see `trainer_knobs`.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from speedlint.analyzer.frameworks import HookTable

PACKAGES = frozenset({"pytorch_lightning", "lightning", "lightning_fabric"})

_STEP = frozenset(
    {
        "training_step",
        "training_step_end",
        "on_train_batch_start",
        "on_train_batch_end",
        "on_before_backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_before_zero_grad",
        "optimizer_step",
        "optimizer_zero_grad",
        "backward",
    }
)
_EVAL = frozenset(
    {
        "validation_step",
        "validation_step_end",
        "test_step",
        "test_step_end",
        "predict_step",
        "on_validation_batch_start",
        "on_validation_batch_end",
        "on_test_batch_start",
        "on_test_batch_end",
        "on_predict_batch_start",
        "on_predict_batch_end",
    }
)
_LOADERS = frozenset({"train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader"})

#: `LightningModule` (and `LightningDataModule` for the loader hooks) of Lightning 1.x and 2.x.
HOOKS = HookTable(
    framework="Lightning",
    packages=PACKAGES,
    classes=frozenset({"LightningModule", "LightningDataModule"}),
    step=_STEP,
    eval=_EVAL,
    loader=_LOADERS,
    grad_off=_EVAL,
)
#: A `Callback`'s batch hooks (they take the trainer and the module as arguments).
CALLBACK_HOOKS = HookTable(
    framework="Lightning",
    packages=PACKAGES,
    classes=frozenset({"Callback"}),
    step=_STEP - {"training_step", "training_step_end", "optimizer_step", "optimizer_zero_grad", "backward"},
    eval=_EVAL - {"validation_step", "validation_step_end", "test_step", "test_step_end", "predict_step"},
    grad_off=frozenset(),
)


def major_version(requirement: Optional[Tuple[int, int]]) -> Optional[int]:
    return requirement[0] if requirement else None


def _unused(_: Any) -> None:  # pragma: no cover - placeholder removed below
    return None
