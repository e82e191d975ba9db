"""One fix driver: `fix`, `fix --apply`, `fix --verify` and `verify` compute the same fixes.

`verify` patches its temporary copy with exactly what `fix --apply` writes: the program's seeds
(a loader pinned in another module), the config-file pass (YAML, JSON, TOML, INI values, and the
code fixes a changed config value calls for). The script runs are replaced here by a recorder of
the copies (these tests are about which edits are verified, not about timing real runs, which
`test_harness.py` does on its scenarios), so nothing here imports torch.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from typer.testing import CliRunner

import speedlint.harness.verify as hv
from speedlint.analyzer.fixdriver import CONFIG, PYTHON, compute_fixes
from speedlint.analyzer.rewrite import fix_paths
from speedlint.analyzer.runner import Overrides, SettingsResolver
from speedlint.cli import app

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "fixtures" / "projects"

#: (fixture project, script, --unsafe-fixes, a fix the script's verification must include)
CASES = [
    ("config_yaml", "train.py", False, ("configs/train.yaml", "SPD102")),
    ("pinned_loader_elsewhere", "train.py", False, ("train.py", "SPD202")),
    ("config_formats", "train_json.py", True, ("train_json.py", "SPD103")),  # after the config pass
]
NOTHING_TO_FIX = "yacs_config_in_yaml"  # a YAML config read by the code, nothing to fix


def tree(root: Path) -> Dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def resolver(unsafe: bool = False) -> SettingsResolver:
    return SettingsResolver(Overrides(unsafe_fixes=True if unsafe else None), isolated=True)


class Recorder:
    """Stands in for `run_once`: records each side's copy of the project, reports a run whose
    losses match and whose speed is `rates[label]`."""

    def __init__(self, rates: Optional[Dict[str, float]] = None, after_losses: Optional[List[float]] = None) -> None:
        self.trees: Dict[str, Dict[str, bytes]] = {}
        self.rates = rates or {"before": 10.0, "after": 20.0}
        self.after_losses = after_losses

    def __call__(self, script, args, cwd, env, workdir, label, repeat, opts):  # type: ignore[no-untyped-def]
        top = next(p for p in Path(script).parents if p.parent.name == label)
        self.trees[label] = tree(top)
        losses = [1.0, 0.9, 0.8, 0.7, 0.6]
        if label == "after" and self.after_losses is not None:
            losses = self.after_losses
        return hv.RunResult(label, repeat, "stopped", 0, None, len(losses), 4, 1, self.rates[label], 0.1, 1.0, list(losses))


@pytest.fixture
def recorder(monkeypatch) -> Recorder:  # type: ignore[no-untyped-def]
    rec = Recorder()
    monkeypatch.setattr(hv, "run_once", rec)
    return rec


def copies(tmp_path: Path, name: str):  # type: ignore[no-untyped-def]
    """Two copies of a fixture project: one for `verify`, one for `fix --apply`."""
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    shutil.copytree(PROJECTS / name, a)
    shutil.copytree(PROJECTS / name, b)
    return a, b


def fix_apply(folder: Path, unsafe: bool, monkeypatch) -> Dict[str, bytes]:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(folder)
    fix_paths(["."], resolver(unsafe), apply=True, jobs=1)
    return tree(folder)


@pytest.mark.parametrize("name,script,unsafe,expected", CASES, ids=[c[0] for c in CASES])
def test_verify_patches_exactly_what_fix_writes(name, script, unsafe, expected, tmp_path, monkeypatch, recorder):  # type: ignore[no-untyped-def]
    a, b = copies(tmp_path, name)
    original = tree(a)
    written = fix_apply(b, unsafe, monkeypatch)
    assert written != original
    monkeypatch.chdir(a)
    result = hv.verify(hv.VerifyOptions(script=Path(script), steps=3, warmup=1, repeats=1), resolver(unsafe))
    assert result.verdict == hv.VERIFIED_FASTER, result.reason
    assert recorder.trees["before"] == original
    assert recorder.trees["after"] == written  # Python files and config files alike
    assert expected in {(f.path, f.code) for f in result.fixes}
    assert tree(a) == original  # the user's files are never modified


def test_fix_apply_verify_writes_what_was_verified(tmp_path, monkeypatch, recorder):  # type: ignore[no-untyped-def]
    a, b = copies(tmp_path, "config_yaml")
    written = fix_apply(b, False, monkeypatch)
    monkeypatch.chdir(a)
    res = CliRunner().invoke(app, ["fix", ".", "--apply", "--isolated", "--verify", "train.py", "--verify-repeats", "1", "--verify-steps", "3"])
    assert res.exit_code == 0, res.output
    assert "configs/train.yaml:6 SPD102" in res.output
    assert recorder.trees["after"] == written
    assert tree(a) == written
    assert b"pin_memory: true    # expect: SPD102" in (a / "configs" / "train.yaml").read_bytes()


def test_fix_verify_without_apply_shows_the_config_diff_and_writes_nothing(tmp_path, monkeypatch, recorder):  # type: ignore[no-untyped-def]
    a, _ = copies(tmp_path, "config_yaml")
    original = tree(a)
    monkeypatch.chdir(a)
    res = CliRunner().invoke(app, ["fix", ".", "--isolated", "--verify", "train.py", "--verify-repeats", "1", "--verify-steps", "3"])
    assert res.exit_code == 1, res.output
    assert "+++ b/configs/train.yaml" in res.output and "+  pin_memory: true" in res.output
    assert tree(a) == original


def test_a_refused_verdict_writes_nothing(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(hv, "run_once", Recorder(after_losses=[1.0, 0.9, 0.5, 0.7, 0.6]))
    a, _ = copies(tmp_path, "config_yaml")
    original = tree(a)
    monkeypatch.chdir(a)
    res = CliRunner().invoke(app, ["fix", ".", "--apply", "--isolated", "--verify", "train.py", "--verify-repeats", "1", "--verify-steps", "3"])
    assert res.exit_code == hv.EXIT_CODES[hv.DIVERGED], res.output
    assert tree(a) == original


def test_nothing_to_fix_is_said_and_nothing_runs(tmp_path, monkeypatch, recorder):  # type: ignore[no-untyped-def]
    """Must not fire: a project whose code reads a YAML config and has nothing to fix. `verify`
    exits 6 (inconclusive: no fixes apply) without running anything; `fix --apply --verify`
    says so too, writes nothing and exits 0 (nothing to write)."""
    a, _ = copies(tmp_path, NOTHING_TO_FIX)
    original = tree(a)
    monkeypatch.chdir(a)
    result = hv.verify(hv.VerifyOptions(script=Path("config.py"), steps=3, warmup=1, repeats=1), resolver())
    assert result.verdict == hv.INCONCLUSIVE and "no fixes apply" in result.reason
    assert result.exit_code == 6 and not result.runs and not recorder.trees
    res = CliRunner().invoke(app, ["verify", "config.py", "--isolated", "--repeats", "1"])
    assert res.exit_code == 6 and "no fixes apply" in res.output
    res = CliRunner().invoke(app, ["fix", ".", "--apply", "--isolated", "--verify", "config.py", "--verify-repeats", "1"])
    assert res.exit_code == 0 and "no fixes apply" in res.output
    assert not recorder.trees and tree(a) == original


def test_compute_fixes_writes_nothing_and_gives_the_new_texts(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The driver's public entry point (the editor server's): texts and findings, no writes."""
    a, b = copies(tmp_path, "config_yaml")
    original = tree(a)
    monkeypatch.chdir(a)
    run = compute_fixes(["."], resolver(), jobs=1)
    assert tree(a) == original and not run.written
    kinds = {Path(c.path).resolve().relative_to(a.resolve()).as_posix(): c.kind for c in run.files}
    assert kinds["train.py"] == kinds["data.py"] == PYTHON and kinds["configs/train.yaml"] == CONFIG
    [change] = run.changes
    assert change.shown == "configs/train.yaml" and [f.code for f in change.outcome.applied] == ["SPD102"]
    assert run.new_texts() == {change.path: change.outcome.fixed}
    written = fix_apply(b, False, monkeypatch)
    assert change.new_bytes() == written["configs/train.yaml"]
    remaining = {(f.code, f.path, f.line) for c in run.files for f in c.outcome.remaining}
    assert ("SPD101", "configs/train.yaml", 5) in remaining  # its fix is unsafe: left, and counted
    assert sum(c.outcome.unsafe_available for c in run.files) == 1
