"""The tuned-DataLoader codemod (SPD101): goldens, idempotence, and before/after runs on CPU.

Each `fixtures/fixers/tuned_dataloader_<shape>/before.py` is a small seeded training script over a
custom `Dataset` (so SPD101 applies); `after.py` is the codemod's output (`--update-goldens`
rewrites it). Both are run in subprocesses and must print the same final loss: worker processes
load the same samples in the same order. The fixtures use `shuffle=False` for multi-epoch runs,
because persistent workers draw one fewer seed per epoch from the RNG (a different, equally
random, shuffle order: one reason the rewrite is unsafe).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES
from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.fixing import fix_text
from speedlint.analyzer.registry import select_rules
from speedlint.fixers.dataloader import tune_source

SHAPES = sorted(p for p in (FIXTURES / "fixers").glob("tuned_dataloader_*") if p.is_dir())
IDS = [p.name.replace("tuned_dataloader_", "") for p in SHAPES]


def _lint(text: str, *codes: str):
    settings = Settings(select=codes)
    return analyze_text(text, "script.py", select_rules(settings.select), settings).findings


def test_at_least_four_shapes():
    assert len(SHAPES) >= 4


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_after_is_the_codemod_output(shape: Path, update_goldens):
    before = (shape / "before.py").read_text(encoding="utf-8")
    out = tune_source(before)
    cst.parse_module(out)
    compile(out, "after.py", "exec")
    if update_goldens:
        (shape / "after.py").write_text(out, encoding="utf-8")
    assert out == (shape / "after.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_fix_engine_applies_the_same_rewrite(shape: Path):
    before = (shape / "before.py").read_text(encoding="utf-8")
    settings = Settings(select=("SPD101",))
    outcome = fix_text(before, "before.py", select_rules(settings.select), settings, unsafe=True)
    assert not [d for d in outcome.diagnostics if d.kind != "warning"], outcome.diagnostics
    assert outcome.fixed == (shape / "after.py").read_text(encoding="utf-8")
    safe_only = fix_text(before, "before.py", select_rules(settings.select), settings, unsafe=False)
    assert safe_only.fixed == before  # the rewrite is unsafe: never applied without --unsafe-fixes


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_idempotent_and_rule_no_longer_fires(shape: Path):
    after = (shape / "after.py").read_text(encoding="utf-8")
    assert tune_source(after) == after
    before = (shape / "before.py").read_text(encoding="utf-8")
    remaining = _lint(after, "SPD101")
    if after == before:  # the rewrite was refused: the finding stays, as advice saying why
        assert remaining and all(not f.fix.applicable for f in remaining)
        assert "not rewritten" in remaining[0].message
    else:
        assert not remaining, [f.message for f in remaining]
        assert not _lint(after, "SPD102", "SPD103"), "pin_memory/persistent_workers should be set too"


def _run(path: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    return subprocess.Popen(
        [sys.executable, path.name], cwd=path.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _final(proc: subprocess.Popen, name: str) -> str:
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, f"{name} failed:\n{err[-3000:]}"
    lines = [l for l in out.splitlines() if l.startswith("final loss")]
    assert lines, f"{name} printed no final loss:\n{out}"
    return lines[-1]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_rewritten_script_runs_and_matches(shape: Path):
    procs = {name: _run(shape / f"{name}.py") for name in ("before", "after")}
    results = {name: _final(proc, name) for name, proc in procs.items()}
    assert results["before"] == results["after"]


# -- behaviour the fixtures do not show -----------------------------------------------------------

SCRIPT_HEAD = '''\
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((2,), float(i))
'''


def test_cpu_only_script_gets_no_pin_memory():
    source = SCRIPT_HEAD + textwrap.dedent('''
        def main():
            loader = DataLoader(Rows(), batch_size=4)
            for x in loader:
                print(x.sum())


        if __name__ == "__main__":
            main()
        ''')
    out = tune_source(source)
    assert "num_workers=min(8, os.cpu_count() or 1)" in out
    assert "pin_memory" not in out
    assert not _lint(source, "SPD102")


def test_existing_os_import_is_reused_and_guard_not_duplicated():
    source = "import os\n" + SCRIPT_HEAD + textwrap.dedent('''
        loader = DataLoader(Rows(), batch_size=4)
        for x in loader:
            print(x.sum())
        ''')
    out = tune_source(source)
    assert out.count("import os") == 1
    assert out.count('if __name__ == "__main__":') == 1
    assert tune_source(out) == out


def test_guard_refused_when_dataset_reads_a_global_set_by_training_code():
    source = SCRIPT_HEAD.replace("float(i))", "float(i) * SCALE)") + textwrap.dedent('''
        SCALE = 2.0
        loader = DataLoader(Rows(), batch_size=4)
        for x in loader:
            print(x.sum())
        ''')
    assert tune_source(source) == source
    [finding] = _lint(source, "SPD101")
    assert "SCALE" in finding.message and not finding.fix.applicable


def test_unresolvable_kwargs_are_left_alone():
    source = SCRIPT_HEAD + textwrap.dedent('''
        def build(opts):
            return DataLoader(Rows(), batch_size=4, **opts)
        ''')
    assert tune_source(source) == source
    assert not _lint(source, "SPD101", "SPD102", "SPD103")


def test_prefetch_factor_only_on_request_and_only_with_workers():
    source = SCRIPT_HEAD + textwrap.dedent('''
        def main(args):
            fixed = DataLoader(Rows(), batch_size=4)
            knob = DataLoader(Rows(), batch_size=4, num_workers=args.workers)
            return fixed, knob


        if __name__ == "__main__":
            import argparse
            parser = argparse.ArgumentParser()
            parser.add_argument("--workers", type=int, default=0)
            main(parser.parse_args())
        ''')
    assert "prefetch_factor" not in tune_source(source)
    out = tune_source(source, Settings(fix_options=(("prefetch_factor", 4),)))
    assert out.count("prefetch_factor=4") == 1  # on the loader with a known positive worker count
    assert "persistent_workers=args.workers > 0" in out


def test_in_memory_and_peeked_loaders_are_not_rewritten():
    source = SCRIPT_HEAD + textwrap.dedent('''
        from torch.utils.data import TensorDataset


        def main():
            fast = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
            first = next(iter(DataLoader(Rows(), batch_size=4)))
            for (x,) in fast:
                print(x.sum(), first.shape)
        ''')
    assert tune_source(source) == source


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_codemod_does_not_copy_the_tree(shape: Path, monkeypatch):
    """The codemod works on the tree it is given (LibCST's entry point copies all of it first, for
    metadata the codemod does not use, and so did the `import os` it adds): the result is what the
    copies gave (the goldens), and no module is copied."""
    from speedlint.fixers.dataloader import tune_module

    copied = []
    real = cst.Module.deep_clone
    monkeypatch.setattr(cst.Module, "deep_clone", lambda self: copied.append(self) or real(self))
    module = cst.parse_module((shape / "before.py").read_text(encoding="utf-8"))
    assert tune_module(module).code == (shape / "after.py").read_text(encoding="utf-8")
    assert copied == []
