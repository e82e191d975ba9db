"""SPD704 unused-performance-setting over the whole program (`speedlint.analyzer.settings_use`):
every way a program may read a setting without naming it makes the settings unknown (silent);
logging or saving the namespace reads nothing (still reported)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Set, Tuple

import pytest

from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths
from speedlint.analyzer.settings_use import settings_summary

HEAD = """import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--fp16", action="store_true")
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
"""

CONFIG_HEAD = """import yaml
import torch

with open("train.yaml") as fh:
    cfg = yaml.safe_load(fh)
"""


def _spd704(tmp_path: Path, files: Dict[str, str], monkeypatch) -> Set[Tuple[str, int]]:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    resolver = SettingsResolver(Overrides(select=("SPD704",), preview=True), isolated=True)
    result = check_paths(["."], resolver, use_cache=False, jobs=1)
    assert not result.diagnostics, result.diagnostics
    return {(Path(f.path).as_posix(), f.line) for f in result.findings}


WHOLE = {
    "vars": "print(vars(args))\n",
    "spread_vars": "def run(lr, **rest):\n    return lr\nrun(**vars(args))\n",
    "computed_getattr": "for name in ['lr']:\n    print(getattr(args, name))\n",
    "dunder_dict": "for k, v in args.__dict__.items():\n    print(k, v)\n",
    "setattr_loop": "for k, v in {'fp16': True}.items():\n    setattr(args, k, v)\n",
    "library_reads_args": "import deepspeed\nengine = deepspeed.initialize(args=args, model=torch.nn.Linear(2, 2))\n",
    "lightning_from_args": "import pytorch_lightning as pl\ntrainer = pl.Trainer.from_argparse_args(args)\n",
}


@pytest.mark.parametrize("tail", list(WHOLE.values()), ids=list(WHOLE))
def test_options_handed_over_whole_are_unknown(tail, tmp_path, monkeypatch):
    assert not _spd704(tmp_path, {"train.py": HEAD + tail}, monkeypatch)


STILL_UNUSED = {
    "printed": "print(args)\n",
    "logged": "import logging\nlogging.info(args)\n",
    "saved": "torch.save({'args': args}, 'ckpt.pt')\n",
    "wandb": "import wandb\nwandb.init(config=args)\n",
    "project_function": "from helpers import main\nmain(args)\n",
    "stored_by_name": "args.fp16 = True\n",  # a write is no read
}


@pytest.mark.parametrize("tail", list(STILL_UNUSED.values()), ids=list(STILL_UNUSED))
def test_options_only_logged_or_passed_in_the_project_are_still_unused(tail, tmp_path, monkeypatch):
    files = {"train.py": HEAD + tail, "helpers.py": "def main(opt):\n    return opt.lr\n"}
    assert _spd704(tmp_path, files, monkeypatch) == {("train.py", 5)}


def test_a_read_in_another_module_counts(tmp_path, monkeypatch):
    files = {"train.py": HEAD + "from helpers import main\nmain(args)\n", "helpers.py": "def main(opt):\n    return opt.fp16\n"}
    assert not _spd704(tmp_path, files, monkeypatch)


CONFIG = "train:\n  use_amp: true\n  workers: 4\n"
CONFIG_WHOLE = {
    "spread": "def build(**kw):\n    return kw\nbuild(**cfg['train'])\n",
    "hydra_instantiate": "from hydra.utils import instantiate\ntrainer = instantiate(cfg['train'])\n",
    "items": "for k, v in cfg['train'].items():\n    print(k, v)\n",
}


@pytest.mark.parametrize("tail", list(CONFIG_WHOLE.values()), ids=list(CONFIG_WHOLE))
def test_configs_handed_over_whole_are_unknown(tail, tmp_path, monkeypatch):
    assert not _spd704(tmp_path, {"train.py": CONFIG_HEAD + tail, "train.yaml": CONFIG}, monkeypatch)


def test_config_keys_nobody_reads_are_reported_on_their_line(tmp_path, monkeypatch):
    tail = "workers = cfg['train'].get('workers', 2)\n"
    assert _spd704(tmp_path, {"train.py": CONFIG_HEAD + tail, "train.yaml": CONFIG}, monkeypatch) == {("train.yaml", 2)}


def test_a_config_nobody_loads_is_not_reported(tmp_path, monkeypatch):
    files = {"train.py": "import torch\nprint(torch.zeros(1))\n", "train.yaml": CONFIG}
    assert not _spd704(tmp_path, files, monkeypatch)


def test_the_summary_reads_calls_with_every_namespace_of_the_file_known():
    """`settings_summary` reads the calls after its walk of the whole file: a namespace bound
    below the function that hands it over (`opts = parser.parse_args()` at the end) and a
    `**kwargs` parameter of a function defined after the call both count."""
    whole = '''import argparse
def run(o):
    return train(**vars(opts))
parser = argparse.ArgumentParser()
parser.add_argument("--fp16", action="store_true")
opts = parser.parse_args()
'''
    got = settings_summary(ast.parse(whole), whole)
    assert got is not None and got.get("whole") is True
    assert got["options"] == [[5, 0, "fp16", "--fp16"]]
    assert "fp16" not in got.get("reads", ())  # the option's own string is not a read
    forwarded = '''import argparse
def outer(x):
    return inner(**kw)
def inner(**kw):
    return kw
parser = argparse.ArgumentParser()
parser.add_argument("--fp16", action="store_true")
'''
    got = settings_summary(ast.parse(forwarded), forwarded)
    assert got is not None and "whole" not in got  # `**kw` is a `**kwargs` parameter of the file
    hidden = forwarded.replace("def inner(**kw)", "def inner(*kw)")
    got = settings_summary(ast.parse(hidden), hidden)
    assert got is not None and got.get("whole") is True
