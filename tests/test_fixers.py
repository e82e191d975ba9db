"""Golden before/after pairs of the training-loop codemods (AMP, gradient accumulation).

Each `fixtures/fixers/<shape>/` holds `before.py`, `after.py` and `meta.toml`:

    select = ["SPD301", "SPD303"]   # the rules whose fixes are applied (unsafe fixes on)
    accumulation_steps = 1          # fixer option (optional)
    rtol = 5e-2                     # loss tolerance after the rewrite, or
    exact = true                    # the rewritten script must print exactly the same losses

The scripts make tiny seeded data, run on CPU in a second or two and print `LOSS <float...>` lines
and a final `FINAL_LOSS <float>`. Fixtures named `tuned_dataloader_*` belong to another fixer and
are skipped here. `pytest --update-goldens` rewrites after.py; review the diff.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Tuple

import libcst as cst
import pytest

from conftest import FIXTURES
from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.fixing import fix_text
from speedlint.analyzer.registry import select_rules

CASES = sorted(
    p for p in (FIXTURES / "fixers").glob("*") if (p / "meta.toml").is_file() and not p.name.startswith("tuned_dataloader_")
)
IDS = [p.name for p in CASES]


def _meta(case: Path) -> Dict:
    with (case / "meta.toml").open("rb") as fh:
        return tomllib.load(fh)


def _settings(case: Path) -> Settings:
    meta = _meta(case)
    options = (("accumulation_steps", int(meta["accumulation_steps"])),) if "accumulation_steps" in meta else ()
    return Settings(select=tuple(meta["select"]), fix_options=options)


def _fix(case: Path, text: str) -> str:
    settings = _settings(case)
    outcome = fix_text(text, str(case / "before.py"), select_rules(settings.select), settings, unsafe=True)
    assert not [d for d in outcome.diagnostics if d.kind != "warning"], outcome.diagnostics
    return outcome.fixed


def test_enough_shapes():
    assert len(CASES) >= 8


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_codemod_matches_golden(case, update_goldens):
    before = (case / "before.py").read_text(encoding="utf-8")
    fixed = _fix(case, before)
    assert fixed != before, "the codemod changed nothing"
    golden = case / "after.py"
    if update_goldens:
        golden.write_text(fixed, encoding="utf-8")
    assert golden.exists(), f"missing {golden}: run pytest --update-goldens and review it"
    assert fixed == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_codemod_is_idempotent_and_clears_findings(case):
    after = (case / "after.py").read_text(encoding="utf-8")
    cst.parse_module(after)
    assert _fix(case, after) == after, "rewriting twice differs from rewriting once"
    settings = _settings(case)
    again = analyze_text(after, str(case / "after.py"), select_rules(settings.select), settings)
    left = [(f.line, f.code, f.message) for f in again.findings if f.code in settings.select]
    assert not left, left
    before = (case / "before.py").read_text(encoding="utf-8")
    found = analyze_text(before, str(case / "before.py"), select_rules(settings.select), settings)
    assert {f.code for f in found.findings} == set(settings.select), "before.py must show every selected finding"


# -- running the scripts ------------------------------------------------------------------------------
# Each side (all before.py, all after.py) runs in one fresh interpreter: torch is imported once per
# side instead of once per script, which keeps this module fast on a 2-core CI machine. Every script
# seeds itself and runs as `__main__` with its own folder as the working directory.
_RUNNER = r"""
import contextlib, io, json, os, runpy, sys, traceback, warnings
warnings.simplefilter("ignore")
results = {}
for path in sys.argv[1:]:
    sys.argv = [path]
    out = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(os.path.dirname(path))
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        results[path] = [0, out.getvalue(), ""]
    except BaseException:
        results[path] = [1, out.getvalue(), traceback.format_exc()]
    finally:
        os.chdir(cwd)
sys.stdout.write(json.dumps(results))
"""


def _run_side(scripts: List[Path]) -> Dict[str, List]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, *map(str, scripts)], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@lru_cache(maxsize=1)
def _all_runs() -> Dict[Path, Tuple[int, str, str]]:
    sides = [[case / name for case in CASES if (case / name).exists()] for name in ("before.py", "after.py")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        merged: Dict[str, List] = {}
        for part in pool.map(_run_side, sides):
            merged.update(part)
    return {Path(k): tuple(v) for k, v in merged.items()}  # type: ignore[misc]


def _losses(stdout: str) -> Tuple[List[List[float]], float]:
    steps = [[float(v) for v in line.split()[1:]] for line in stdout.splitlines() if line.startswith("LOSS ")]
    final = [float(line.split()[1]) for line in stdout.splitlines() if line.startswith("FINAL_LOSS ")]
    assert final, "the script must print FINAL_LOSS <float>"
    return steps, final[-1]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rewritten_script_runs_and_matches(case):
    runs = _all_runs()
    results = {}
    for name in ("before.py", "after.py"):
        rc, out, err = runs[case / name]
        assert rc == 0, f"{name} failed:\n{err[-3000:]}"
        results[name] = _losses(out)
    (steps_b, final_b), (steps_a, final_a) = results["before.py"], results["after.py"]
    assert len(steps_a) == len(steps_b) > 0
    meta = _meta(case)
    if meta.get("exact"):
        assert steps_a == steps_b and final_a == final_b, "N=1 accumulation must leave every loss unchanged"
        return
    rtol = float(meta["rtol"])
    assert math.isclose(final_a, final_b, rel_tol=rtol, abs_tol=rtol), (final_b, final_a)
    first_b, first_a = steps_b[0], steps_a[0]
    assert all(math.isclose(a, b, rel_tol=rtol, abs_tol=rtol) for a, b in zip(first_a, first_b)), (first_b, first_a)


# -- SPD301 cases that need a file of their own -----------------------------------------------------
_CPU_ONLY = """
import torch
import torch.nn.functional as F

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in [(torch.randn(8, 4), torch.randint(0, 2, (8,)))] * 4:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
"""

_FORWARD_AUTOCAST = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.float16):
            return self.fc(x)


model = Net().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x.cuda()).float(), y.cuda())
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("source", [_CPU_ONLY, _FORWARD_AUTOCAST], ids=["cpu-only-script", "autocast-in-forward"])
def test_spd301_must_not_fire(source):
    settings = Settings(select=("SPD301",))
    found = analyze_text(source, "train.py", select_rules(settings.select), settings).findings
    assert not found, [(f.line, f.message) for f in found]


def test_accumulation_option_from_settings_changes_only_the_knob():
    case = FIXTURES / "fixers" / "per_batch_scheduler"
    settings = Settings(select=("SPD303",), fix_options=(("accumulation_steps", 4),))
    text = (case / "before.py").read_text(encoding="utf-8")
    fixed = fix_text(text, "before.py", select_rules(settings.select), settings, unsafe=True).fixed
    golden = (case / "after.py").read_text(encoding="utf-8")
    assert fixed == golden.replace("ACCUMULATION_STEPS = 1 ", "ACCUMULATION_STEPS = 4 ")
