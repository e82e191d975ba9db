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

from typing import Any, Optional

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


# -- knobs ------------------------------------------------------------------------------------------
#: `precision` values that train in FP32/FP64 (Lightning's default is 32).
FULL_PRECISION = frozenset({32, 64, "32", "64", "32-true", "64-true"})
#: Mixed or reduced precision, in every version's spelling.
REDUCED_PRECISION = frozenset(
    {16, "16", "bf16", "16-mixed", "bf16-mixed", "16-true", "bf16-true", "transformer-engine", "transformer-engine-float16"}
)
#: Keywords or calls that exist only in Lightning 1.x.
ONE_X_ONLY = frozenset({"gpus", "tpu_cores", "weights_summary", "checkpoint_callback", "progress_bar_refresh_rate", "resume_from_checkpoint", "amp_backend", "from_argparse_args", "add_argparse_args"})
#: Trainer knobs besides precision that rules read.
OTHER_KNOBS = ("benchmark", "deterministic", "detect_anomaly", "profiler")
#: Trainer keywords that name the devices.
DEVICE_KEYWORDS = ("accelerator", "gpus", "devices")


def is_full_precision(value: Any) -> Optional[bool]:
    """True for FP32/FP64 spellings, False for mixed/reduced ones, None when not a precision."""
    if value is None:
        return True
    if isinstance(value, bool):
        return None
    if value in FULL_PRECISION:
        return True
    if value in REDUCED_PRECISION:
        return False
    return None


def mixed_spelling(major: Optional[int]) -> str:
    """The `precision` value the fix writes: `"bf16-mixed"` on Lightning 2.x, `16` on 1.x (bf16
    needs 1.5+ and an Ampere GPU there) or when the version is not known (2.x accepts it too)."""
    return '"bf16-mixed"' if major == 2 else "16"


#: Accelerators where CUDA mixed precision does not apply.
NOT_CUDA = frozenset({"cpu", "mps", "tpu", "ipu", "hpu", "xla"})


def is_cpu_accelerator(value: Any) -> bool:
    """An accelerator that is not a CUDA GPU (`"cpu"`, `"mps"`, `"tpu"` ...)."""
    return isinstance(value, str) and value.lower() in NOT_CUDA


def trainer_class(qualname: Optional[str]) -> Optional[str]:
    """"Trainer" / "Fabric" when `qualname` names Lightning's `Trainer` or `Fabric` class."""
    if not qualname:
        return None
    head, _, rest = qualname.partition(".")
    if head not in PACKAGES or not rest:
        return None
    tail = rest.rsplit(".", 1)[-1]
    return tail if tail in ("Trainer", "Fabric") else None


# -- torchmetrics (Lightning's metrics library) -------------------------------------------------------
#: Aggregation metrics whose `update` checks its input for NaN (`nan_strategy="warn"` by default:
#: `isnan(x).any()` read on the host; "ignore" drops NaNs with a boolean mask, also a sync).
#: `nan_strategy="disable"` or a float replacement value avoids it.
NAN_CHECKED = frozenset({"MeanMetric", "SumMetric", "MaxMetric", "MinMetric", "CatMetric", "RunningMean", "RunningSum"})
#: Classification metrics whose `update` validates its inputs (`validate_args=True` by default:
#: value-range and `unique` checks read on the host). `validate_args=False` avoids it.
_TASKS = ("Accuracy", "Precision", "Recall", "F1Score", "FBetaScore", "AUROC", "AveragePrecision", "ConfusionMatrix",
          "Specificity", "StatScores", "JaccardIndex", "MatthewsCorrCoef", "CohenKappa", "CalibrationError",
          "HammingDistance", "ExactMatch", "ROC", "PrecisionRecallCurve", "Dice")
VALIDATED = frozenset({*_TASKS, *(p + t for p in ("Binary", "Multiclass", "Multilabel") for t in _TASKS)})


def metric_sync(qualname: Optional[str], keywords: Any) -> Optional[str]:
    """Why calling (updating) a metric built by `qualname(**keywords)` syncs with the host, or None.
    `keywords`: name -> the literal value written (absent keys: the default)."""
    if not qualname or not qualname.startswith("torchmetrics"):
        return None  # (`pytorch_lightning.metrics` of Lightning 1.x does not validate)
    name = qualname.rsplit(".", 1)[-1]
    if name in NAN_CHECKED:
        strategy = keywords.get("nan_strategy", "warn")
        if strategy == "disable" or (isinstance(strategy, float) and not isinstance(strategy, bool)):
            return None
        return f"torchmetrics `{name}` checks the input for NaN (`nan_strategy={strategy!r}`)"
    if name in VALIDATED:
        if keywords.get("validate_args", True) is False:
            return None
        return f"torchmetrics `{name}` validates its inputs (`validate_args=True`)"
    return None
