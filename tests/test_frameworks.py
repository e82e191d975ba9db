"""The framework layer (`speedlint.analyzer.frameworks`): hook tables, Lightning's knobs, the
whole-program facts it adds (hooks as steps, loader hooks, `self.hparams`, trainer configs,
inference-only `no_grad` functions). Framework packages are not installed: only source is read."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from speedlint.analyzer.frameworks import lightning
from speedlint.analyzer.frameworks.hooks import class_hooks, framework_runs_without_grad
from speedlint.analyzer.program.facts import link
from speedlint.analyzer.program.summary import summarize


def _link(tmp_path: Path, files: dict, configs: dict = None):
    entries = []
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(text)
        path.write_text(text, encoding="utf-8")
        entries.append((str(path), name, summarize(text)))
    config_paths = []
    for name, text in (configs or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        config_paths.append(str(path))
    return link(entries, config_paths)


@pytest.mark.parametrize(
    "base",
    ["pytorch_lightning.LightningModule", "lightning.LightningModule", "lightning.pytorch.LightningModule", "pytorch_lightning.core.lightning.LightningModule"],
)
def test_module_hooks_in_every_spelling(base):
    methods = {"training_step": 0, "validation_step": 1, "on_train_epoch_end": 2, "train_dataloader": 3, "forward": 4, "optimizer_step": 5}
    assert class_hooks({base}, methods) == {"training_step": "step", "optimizer_step": "step", "validation_step": "eval", "train_dataloader": "loader"}
    assert framework_runs_without_grad({base}, "validation_step")
    assert not framework_runs_without_grad({base}, "training_step")


def test_callback_hooks_and_foreign_bases():
    methods = {"on_train_batch_end": 0, "on_validation_batch_end": 1, "training_step": 2, "on_train_epoch_start": 3}
    assert class_hooks({"pytorch_lightning.callbacks.Callback"}, methods) == {"on_train_batch_end": "step", "on_validation_batch_end": "eval"}
    # a Keras or Hugging Face callback, or a class merely named like Lightning's, is not Lightning's
    assert class_hooks({"keras.callbacks.Callback"}, methods) == {}
    assert class_hooks({"LightningModule"}, {"training_step": 0}) == {}


@pytest.mark.parametrize(
    "value, full",
    [(None, True), (32, True), ("32", True), ("32-true", True), (64, True), (16, False), ("bf16", False), ("16-mixed", False), ("bf16-mixed", False), ("transformer-engine", False), ("nonsense", None), (True, None)],
)
def test_precision_spellings(value, full):
    assert lightning.is_full_precision(value) is full


def test_mixed_spelling_follows_the_version():
    assert lightning.mixed_spelling(2) == '"bf16-mixed"'
    assert lightning.mixed_spelling(1) == "16"
    assert lightning.mixed_spelling(None) == "16"  # accepted by 1.x and 2.x


def test_torchmetrics_syncs():
    assert "NaN" in lightning.metric_sync("torchmetrics.MeanMetric", {})
    assert lightning.metric_sync("torchmetrics.MeanMetric", {"nan_strategy": "disable"}) is None
    assert lightning.metric_sync("torchmetrics.aggregation.SumMetric", {"nan_strategy": 0.0}) is None
    assert "validates" in lightning.metric_sync("torchmetrics.classification.MulticlassAccuracy", {})
    assert lightning.metric_sync("torchmetrics.Accuracy", {"validate_args": False}) is None
    assert lightning.metric_sync("pytorch_lightning.metrics.Accuracy", {}) is None  # 1.x metrics do not validate
    assert lightning.metric_sync("torchmetrics.text.BLEUScore", {}) is None


def test_hooks_are_steps_across_modules(tmp_path):
    """A LightningModule subclass in another module: its `training_step` and the helpers it
    calls run every step; `validation_step` every evaluation batch; epoch hooks are not hot."""
    seeds = _link(
        tmp_path,
        {
            "base.py": """
                import lightning as L

                class Base(L.LightningModule):
                    def helper(self, batch):
                        return self(batch)
            """,
            "model.py": """
                from base import Base

                class Model(Base):
                    def training_step(self, batch, batch_idx):
                        return self.helper(batch)

                    def validation_step(self, batch, batch_idx):
                        return self(batch)

                    def on_train_epoch_end(self):
                        pass
            """,
        },
    )
    model = seeds["model.py"]
    kinds = {i: set(k) for i, k in model.functions.items()}
    assert kinds[0] == {"step"} and kinds[1] == {"eval"} and 2 not in kinds
    assert model.gpu
    assert "step" in seeds["base.py"].functions[0]
    assert model.project["framework_hooks"]["1"] == ["eval", "validation_step", True]


def test_loader_hooks_and_hparams_from_a_namespace(tmp_path):
    seeds = _link(
        tmp_path,
        {
            "data.py": """
                import pytorch_lightning as pl
                from torch.utils.data import DataLoader

                class Data(pl.LightningDataModule):
                    def __init__(self, args):
                        super().__init__()
                        self.hparams = args

                    def train_dataloader(self):
                        return DataLoader(self.ds, num_workers=self.hparams.num_workers)

                    def test_dataloader(self):
                        return DataLoader(self.ds, num_workers=self.hparams.num_workers)
            """,
            "train.py": """
                from argparse import ArgumentParser
                from data import Data

                def main(args):
                    Data(args)

                if __name__ == "__main__":
                    parser = ArgumentParser()
                    parser.add_argument("--num_workers", type=int, default=6)
                    main(parser.parse_args())
            """,
        },
    )
    data = seeds["data.py"]
    loaders = data.project["loaders"]
    assert set(loaders["11"]) == {"moved", "epoch"}  # the train loader: every epoch
    assert set(loaders["14"]) == {"moved"}  # the test loader: once
    assert data.project["hparams"]["Data"]["options"]["num_workers"] == [6]


def test_hydra_targets_and_trainer_configs(tmp_path):
    seeds = _link(
        tmp_path,
        {
            "src/__init__.py": "",
            "src/dm.py": """
                import lightning as L

                class MNISTDataModule(L.LightningDataModule):
                    def __init__(self, num_workers: int = 4):
                        super().__init__()
                        self.save_hyperparameters()
            """,
            "src/train.py": """
                import hydra

                @hydra.main(config_path="../configs", config_name="train")
                def main(cfg):
                    trainer = hydra.utils.instantiate(cfg.trainer)
                    trainer.fit(hydra.utils.instantiate(cfg.model), hydra.utils.instantiate(cfg.data))
            """,
        },
        {
            "configs/data/mnist.yaml": "_target_: src.dm.MNISTDataModule\nnum_workers: 0\n",
            "configs/trainer/default.yaml": "_target_: lightning.pytorch.trainer.Trainer\naccelerator: cpu\n",
            "configs/trainer/gpu.yaml": "defaults:\n  - default\n\naccelerator: gpu\n",
        },
    )
    config = seeds["src/dm.py"].project["hparams"]["MNISTDataModule"]["config"]["num_workers"]
    assert config[0].endswith("mnist.yaml") and config[1] == 2 and config[3] == 0
    entries = {Path(e[0]).name: e for e in seeds["src/train.py"].project["trainer_configs"]}
    assert entries["gpu.yaml"][1] == 4 and entries["gpu.yaml"][3]["accelerator"][0] == "gpu"
    assert entries["default.yaml"][3]["accelerator"][0] == "cpu"
    assert "precision" not in entries["gpu.yaml"][2]


def test_inference_only_no_grad_functions(tmp_path):
    """`no_grad` functions reached only from sampling code are inference; weight initialisation
    under `no_grad`, or a frozen encoder inside the training step, is not."""
    seeds = _link(
        tmp_path,
        {
            "gen.py": """
                import torch

                class Diffusion(torch.nn.Module):
                    @torch.no_grad()
                    def p_sample(self, x, t):
                        return self.model(x, t)

                    @torch.no_grad()
                    def sample(self, x):
                        for t in range(10):
                            x = self.p_sample(x, t)
                        return x

                    @torch.no_grad()
                    def encode(self, x):
                        return self.encoder(x)

                    @torch.no_grad()
                    def init_weights(self):
                        self.model.weight.fill_(0.0)

                    def setup(self):
                        self.init_weights()

                def train(model, loader, opt):
                    for x in loader:
                        loss = model(model.encode(x)).mean()
                        loss.backward()
                        opt.step()
            """,
        },
    )
    assert seeds["gen.py"].project["inference_only"] == [0]  # p_sample only
