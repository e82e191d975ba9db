"""Configuration: `[tool.speedlint]` / `speedlint.toml`, closest config wins, every key, errors (exit 2),
`--config`, `--isolated`, excludes in discovery and `--force-exclude`."""

from __future__ import annotations

import json

import os
import subprocess
import sys
from pathlib import Path

import pytest

from speedlint.analyzer.config import ConfigError, Settings, declared_torch_range, declared_torch_version, settings_from_table
from speedlint.analyzer.runner import load_config_file
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths, collect_files, rules_for

BAD = '''import gc

from torch.utils.data import Dataset


class Frames(Dataset):
    def __getitem__(self, index):
        frame = self.frames[index]
        gc.collect()
        return frame
'''


def speedlint(*args, cwd, input=None):
    env = dict(os.environ, COLUMNS="40")
    return subprocess.run([sys.executable, "-m", "speedlint", *map(str, args)], cwd=cwd, input=input,
                          capture_output=True, text=True, env=env, timeout=300)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes_by_file(root: Path, paths=(".",), overrides=Overrides(), **kw):
    """Run check in-process from `root`; {relative posix path: sorted codes} for files with findings."""
    old = os.getcwd()
    os.chdir(root)
    try:
        resolver = SettingsResolver(overrides, **kw)
        result = check_paths(list(paths), resolver, use_cache=False, jobs=1)
    finally:
        os.chdir(old)
    assert not result.diagnostics, result.diagnostics
    return {Path(r.path).as_posix(): sorted(f.code for f in r.findings) for r in result.files if r.findings}


def files_found(root: Path, paths=(".",), force_exclude=False, **kw):
    old = os.getcwd()
    os.chdir(root)
    try:
        found = collect_files(list(paths), SettingsResolver(Overrides(), **kw), force_exclude)
    finally:
        os.chdir(old)
    return sorted(Path(os.path.relpath(p, root)).as_posix() if p.is_absolute() else p.as_posix() for p in found.files)


# -- where settings come from ------------------------------------------------------------------------
def test_pyproject_table_and_speedlint_toml(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.speedlint]\nignore = ["SPD401"]\n')
    write(tmp_path / "a.py", BAD)
    assert codes_by_file(tmp_path) == {}
    write(tmp_path / "speedlint.toml", 'select = ["SPD4"]\n')  # speedlint.toml wins over pyproject in one folder
    assert codes_by_file(tmp_path) == {"a.py": ["SPD401"]}


def test_pyproject_without_a_speedlint_table_is_skipped(tmp_path):
    write(tmp_path / "speedlint.toml", 'ignore = ["SPD401"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", '[project]\nname = "pkg"\n')
    write(tmp_path / "pkg" / "a.py", BAD)
    assert codes_by_file(tmp_path) == {}


def test_closest_config_wins(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.speedlint]\nignore = ["SPD401"]\n')
    write(tmp_path / "top.py", BAD)
    write(tmp_path / "research" / "speedlint.toml", 'select = ["SPD401"]\n')
    write(tmp_path / "research" / "deep" / "exp.py", BAD)
    assert codes_by_file(tmp_path) == {"research/deep/exp.py": ["SPD401"]}
    # the same holds when the file is named directly, from any working folder
    assert codes_by_file(tmp_path / "research", paths=["../top.py", "deep/exp.py"]) == {"deep/exp.py": ["SPD401"]}


def test_config_option_overrides_discovery(tmp_path):
    write(tmp_path / "speedlint.toml", 'ignore = ["SPD401"]\n')
    other = write(tmp_path / "ci" / "strict.toml", 'select = ["SPD401"]\n')
    write(tmp_path / "a.py", BAD)
    assert codes_by_file(tmp_path) == {}
    assert codes_by_file(tmp_path, config=other) == {"a.py": ["SPD401"]}


def test_isolated_ignores_every_config_file(tmp_path):
    write(tmp_path / "speedlint.toml", 'ignore = ["SPD401"]\n')
    write(tmp_path / "a.py", BAD)
    assert codes_by_file(tmp_path, isolated=True) == {"a.py": ["SPD401"]}


def test_cli_config_and_isolated(tmp_path):
    write(tmp_path / "speedlint.toml", 'ignore = ["SPD401"]\n')
    write(tmp_path / "strict.toml", 'select = ["SPD401"]\n')
    write(tmp_path / "a.py", BAD)
    args = ("check", "a.py", "--output-format", "concise")
    assert speedlint(*args, cwd=tmp_path).returncode == 0
    assert speedlint(*args, "--config", "strict.toml", cwd=tmp_path).returncode == 1
    assert speedlint(*args, "--isolated", cwd=tmp_path).returncode == 1
    r = speedlint(*args, "--config", "missing.toml", cwd=tmp_path)
    assert r.returncode == 2 and "config file not found" in r.stderr


# -- each key --------------------------------------------------------------------------------------------
def test_select_ignore_extend_select(tmp_path):
    write(tmp_path / "a.py", BAD)
    cfg = tmp_path / "speedlint.toml"
    write(cfg, 'select = ["SPD1"]\n')
    assert codes_by_file(tmp_path) == {}
    write(cfg, 'select = ["SPD1"]\nextend-select = ["SPD401"]\n')
    assert codes_by_file(tmp_path) == {"a.py": ["SPD401"]}
    write(cfg, 'ignore = ["gc-collect-in-hot-path"]\n')  # rule names work like codes
    assert codes_by_file(tmp_path) == {}
    write(cfg, 'select = ["gc-collect-in-hot-path"]\n')
    assert codes_by_file(tmp_path) == {"a.py": ["SPD401"]}


def test_command_line_selection_composes_with_config(tmp_path):
    write(tmp_path / "speedlint.toml", 'select = ["SPD1"]\n')
    write(tmp_path / "a.py", BAD)
    assert codes_by_file(tmp_path, overrides=Overrides(extend_select=("SPD401",))) == {"a.py": ["SPD401"]}
    assert codes_by_file(tmp_path, overrides=Overrides(select=("SPD4",))) == {"a.py": ["SPD401"]}
    write(tmp_path / "speedlint.toml", "")
    assert codes_by_file(tmp_path, overrides=Overrides(ignore=("SPD4",))) == {}


def test_per_file_ignores(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.speedlint.per-file-ignores]\n"legacy/*" = ["SPD401"]\n"*_test.py" = ["gc-collect-in-hot-path"]\n"**/scratch/*.py" = ["SPD4"]\n')
    write(tmp_path / "legacy" / "old.py", BAD)
    write(tmp_path / "legacy" / "sub" / "older.py", BAD)
    write(tmp_path / "src" / "model_test.py", BAD)
    write(tmp_path / "src" / "deep" / "scratch" / "try.py", BAD)
    write(tmp_path / "src" / "train.py", BAD)
    assert codes_by_file(tmp_path) == {"src/train.py": ["SPD401"]}
    # relative to the config file's folder, whatever the working folder
    assert codes_by_file(tmp_path / "legacy", paths=["old.py", "../src/train.py"]) == {"../src/train.py": ["SPD401"]}


def test_exclude_and_extend_exclude_in_discovery(tmp_path):
    for name in ("src/train.py", "src/gen/model_pb2.py", "build/lib/x.py", "legacy/old.py", "notes/a.py"):
        write(tmp_path / name, BAD)
    assert files_found(tmp_path) == ["legacy/old.py", "notes/a.py", "src/gen/model_pb2.py", "src/train.py"]
    write(tmp_path / "speedlint.toml", 'extend-exclude = ["legacy", "*_pb2.py"]\n')
    assert files_found(tmp_path) == ["notes/a.py", "src/train.py"]  # build/ still excluded by default
    write(tmp_path / "speedlint.toml", 'exclude = ["legacy/old.py"]\n')  # replaces the defaults
    assert files_found(tmp_path) == ["build/lib/x.py", "notes/a.py", "src/gen/model_pb2.py", "src/train.py"]


def test_excludes_of_the_closest_config_apply(tmp_path):
    write(tmp_path / "speedlint.toml", 'extend-exclude = ["drafts"]\n')
    write(tmp_path / "drafts" / "a.py", BAD)
    write(tmp_path / "proj" / "speedlint.toml", 'extend-exclude = ["generated"]\n')
    write(tmp_path / "proj" / "generated" / "b.py", BAD)
    write(tmp_path / "proj" / "drafts" / "c.py", BAD)  # the nested config does not exclude drafts
    write(tmp_path / "proj" / "main.py", BAD)
    assert files_found(tmp_path) == ["proj/drafts/c.py", "proj/main.py"]


def test_explicit_files_are_checked_unless_force_exclude(tmp_path):
    write(tmp_path / "speedlint.toml", 'extend-exclude = ["legacy", "gen_*.py"]\n')
    paths = ["legacy/deep/old.py", "src/gen_model.py", "build/x.py", "src/train.py"]
    for name in paths:
        write(tmp_path / name, BAD)
    assert files_found(tmp_path, paths) == sorted(paths)
    assert files_found(tmp_path, paths, force_exclude=True) == ["src/train.py"]
    # from a subfolder, patterns stay relative to the config file's folder
    assert files_found(tmp_path / "src", ["gen_model.py", "train.py"], force_exclude=True) == ["train.py"]


def test_cli_force_exclude(tmp_path):
    write(tmp_path / "speedlint.toml", 'extend-exclude = ["legacy"]\n')
    write(tmp_path / "legacy" / "old.py", BAD)
    assert speedlint("check", "legacy/old.py", "--output-format", "concise", cwd=tmp_path).returncode == 1
    r = speedlint("check", "legacy/old.py", "--force-exclude", "--output-format", "concise", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    r = speedlint("fix", "legacy/old.py", "--apply", "--force-exclude", cwd=tmp_path)
    assert r.returncode == 0 and "gc.collect()" in (tmp_path / "legacy" / "old.py").read_text()


def test_unsafe_fixes_in_config_counts_for_fix(tmp_path, monkeypatch):
    import speedlint.analyzer.fixing as fixing
    import speedlint.analyzer.rewrite as rewrite

    seen = []
    real = fixing.fix_text

    def spy(*args, **kwargs):
        seen.append(kwargs.get("unsafe"))
        return real(*args, **kwargs)

    monkeypatch.setattr(fixing, "fix_text", spy)
    write(tmp_path / "a.py", BAD)
    monkeypatch.chdir(tmp_path)
    rewrite.fix_paths(["a.py"], SettingsResolver(Overrides()), apply=False)
    write(tmp_path / "speedlint.toml", "unsafe-fixes = true\n")
    rewrite.fix_paths(["a.py"], SettingsResolver(Overrides()), apply=False)
    rewrite.fix_stdin(BAD, "a.py", SettingsResolver(Overrides()))
    write(tmp_path / "speedlint.toml", "unsafe-fixes = false\n")
    rewrite.fix_paths(["a.py"], SettingsResolver(Overrides(unsafe_fixes=True)), apply=False)  # --unsafe-fixes wins
    assert seen == [False, True, True, True]


def test_preview(tmp_path, monkeypatch):
    import speedlint.analyzer.runner as runner

    write(tmp_path / "speedlint.toml", "preview = true\n")
    settings = SettingsResolver(Overrides()).for_file(tmp_path / "a.py")
    assert settings.preview is True
    calls = []
    monkeypatch.setattr(runner, "_RULES_CACHE", {})
    monkeypatch.setattr(runner, "select_rules", lambda *a: calls.append(a) or [])
    rules_for(settings)
    assert calls == [((), (), (), True)]
    assert SettingsResolver(Overrides(), isolated=True).for_file(tmp_path / "a.py").preview is False


def test_fix_table(tmp_path):
    write(tmp_path / "speedlint.toml", "[fix]\naccumulation-steps = 4\n")
    assert load_config_file(tmp_path / "speedlint.toml").fix_option("accumulation_steps") == 4


# -- target-torch-version ------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [('"1.13"', (1, 13)), ('"2.1.0"', (2, 1)), ("2", (2, 0)), ('"2.4.0+cu121"', (2, 4))])
def test_target_torch_version_key(tmp_path, value, expected):
    write(tmp_path / "speedlint.toml", f"target-torch-version = {value}\n")
    assert load_config_file(tmp_path / "speedlint.toml").target_torch_version == expected


def test_target_torch_version_from_pyproject_dependencies(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\ndependencies = ["numpy", "torchvision>=0.10", "torch>=1.12,<3"]\n\n[tool.speedlint]\n')
    write(tmp_path / "a.py", "")
    assert SettingsResolver(Overrides()).for_file(tmp_path / "a.py").target_torch_version == (1, 12)
    # the key, when present, wins over the declared requirement
    write(tmp_path / "speedlint.toml", 'target-torch-version = "2.2"\n')
    assert SettingsResolver(Overrides()).for_file(tmp_path / "a.py").target_torch_version == (2, 2)
    # and the command line wins over both
    ttv = SettingsResolver(Overrides(target_torch_version=(2, 5))).for_file(tmp_path / "a.py").target_torch_version
    assert ttv == (2, 5)


def test_target_torch_version_from_requirements(tmp_path):
    write(tmp_path / "requirements.txt", "numpy>=1.20\ntorch==1.13.1  # pinned for the cluster\n")
    write(tmp_path / "requirements-dev.txt", "pytest\ntorch-tb-profiler\n")
    write(tmp_path / "src" / "a.py", "")
    assert declared_torch_version(tmp_path) == (1, 13)
    # no config file at all: the project's declared requirement is still used
    assert SettingsResolver(Overrides()).for_file(tmp_path / "src" / "a.py").target_torch_version == (1, 13)
    # a config file beside it without the key: the same
    write(tmp_path / "speedlint.toml", 'select = ["SPD4"]\n')
    assert SettingsResolver(Overrides()).for_file(tmp_path / "src" / "a.py").target_torch_version == (1, 13)


@pytest.mark.parametrize(
    "requirement, floor, below",
    [("torch>=1.7", (1, 7), None), ("torch>=1.7,<1.9", (1, 7), (1, 9)), ("torch<=1.8.1", (0, 0), (1, 9)), ("torch==1.8.0", (1, 8), (1, 9))],
)
def test_declared_torch_range(tmp_path, requirement, floor, below):
    write(tmp_path / "requirements.txt", requirement + "\n")
    got_floor, got_below = declared_torch_range(tmp_path)
    assert got_below == below
    assert got_floor == floor or (floor == (0, 0) and got_floor is None)


EVAL = """import torch


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct
"""


def test_an_old_declared_floor_does_not_silence_inference_mode_advice(tmp_path):
    """`torch>=1.7` written years ago: SPD601 still reports, says what the fix needs, and its fix is
    unsafe; an upper bound below 1.9 or a target the user set below 1.9 silences it."""
    write(tmp_path / "ev.py", EVAL)
    write(tmp_path / "requirements.txt", "torch>=1.7\n")
    r = speedlint("check", "ev.py", "--select", "SPD601", "--no-cache", "--output-format", "json", cwd=tmp_path)
    (finding,) = json.loads(r.stdout)["findings"]
    assert "needs torch >= 1.9; your requirements allow 1.7" in finding["message"]
    assert finding["fix"]["applicability"] == "unsafe"
    assert speedlint("fix", "ev.py", "--select", "SPD601", cwd=tmp_path).returncode == 0  # nothing safe to apply
    r = speedlint("check", "ev.py", "--select", "SPD601", "--no-cache", "--target-torch-version", "1.8", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    write(tmp_path / "requirements.txt", "torch>=1.7,<1.9\n")
    assert speedlint("check", "ev.py", "--select", "SPD601", "--no-cache", cwd=tmp_path).returncode == 0
    write(tmp_path / "requirements.txt", "torch>=1.12\n")
    r = speedlint("check", "ev.py", "--select", "SPD601", "--no-cache", "--output-format", "json", cwd=tmp_path)
    (finding,) = json.loads(r.stdout)["findings"]
    assert "your requirements allow" not in finding["message"] and finding["fix"]["applicability"] == "safe"


def test_no_declared_torch_version(tmp_path):
    write(tmp_path / "requirements.txt", "torch\ntorchvision>=0.15\n")
    assert declared_torch_version(tmp_path) is None


# -- errors: exit code 2 with a clear message ----------------------------------------------------------
@pytest.mark.parametrize(
    "toml, message",
    [
        ('selct = ["SPD4"]\n', "unknown key `selct`"),
        ('select = "SPD401"\n', "`select` must be a list of strings"),
        ('ignore = [401]\n', "`ignore` must be a list of strings"),
        ('extend-select = ["SPD9999"]\n', "unknown rule selector `SPD9999`"),
        ('exclude = "build"\n', "`exclude` must be a list of strings"),
        ('extend-exclude = [1]\n', "`extend-exclude` must be a list of strings"),
        ('preview = "yes"\n', "`preview` must be true or false"),
        ('unsafe-fixes = 1\n', "`unsafe-fixes` must be true or false"),
        ('target-torch-version = 2.1\n', "`target-torch-version` must be a quoted version string"),
        ('target-torch-version = "latest"\n', "invalid torch version `latest`"),
        ('[per-file-ignores]\n"tests/*" = "SPD401"\n', "`per-file-ignores` must map glob patterns to lists of codes"),
        ('[per-file-ignores]\n"tests/*" = ["NOPE1"]\n', "unknown rule selector `NOPE1`"),
        ('[fix]\nsteps = 2\n', "unknown key `steps` in the `fix` table"),
        ('[fix]\naccumulation-steps = 0\n', "`fix.accumulation-steps` must be a positive integer"),
        ('select = [\n', "invalid TOML"),
    ],
)
def test_bad_config_is_a_clear_error_with_exit_2(tmp_path, toml, message):
    write(tmp_path / "speedlint.toml", toml)
    write(tmp_path / "a.py", BAD)
    with pytest.raises(ConfigError, match=None) as exc:
        load_config_file(tmp_path / "speedlint.toml")
    assert message in str(exc.value)
    assert "speedlint.toml" in str(exc.value)
    commands = [("check", "a.py")] + ([("fix", "a.py")] if "select" in toml else [])
    for command in commands:
        r = speedlint(*command, cwd=tmp_path)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert message in r.stderr
        assert "Traceback" not in r.stderr


def test_unknown_key_suggests_the_right_one(tmp_path):
    with pytest.raises(ConfigError, match="did you mean `extend-exclude`"):
        settings_from_table({"extend_exclude": ["x"]}, "speedlint.toml", str(tmp_path))


def test_bad_nested_config_found_during_the_run_is_exit_2(tmp_path):
    write(tmp_path / "speedlint.toml", 'select = ["SPD4"]\n')
    write(tmp_path / "a.py", BAD)
    write(tmp_path / "sub" / "pyproject.toml", '[tool.speedlint]\nselect = "SPD4"\n')
    write(tmp_path / "sub" / "b.py", BAD)
    r = speedlint("check", ".", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "sub/pyproject.toml" in r.stderr and "`select` must be a list of strings" in r.stderr
    assert "Traceback" not in r.stderr


def test_broken_pyproject_that_configures_speedlint_is_an_error(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.speedlint]\nselect = ["SPD4"\n')
    write(tmp_path / "a.py", BAD)
    r = speedlint("check", "a.py", cwd=tmp_path)
    assert r.returncode == 2 and "invalid TOML" in r.stderr


def test_settings_defaults():
    s = Settings()
    assert s.exclude is None and s.extend_exclude == () and not s.unsafe_fixes and not s.preview


def test_closest_answers_each_folder_once(tmp_path):
    from speedlint.analyzer.config import closest

    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (tmp_path / "a" / "marker").write_text("")
    asked = []

    def find(folder):
        asked.append(folder)
        return folder if (folder / "marker").exists() else None

    memo = {}
    assert closest(deep, find, memo) == tmp_path / "a"
    assert closest(tmp_path / "a" / "b", find, memo) == tmp_path / "a"  # from the memo
    assert asked == [deep, tmp_path / "a" / "b", tmp_path / "a"]
    # `stop`: no higher than a folder it accepts
    assert closest(deep, find, {}, stop=lambda f: f == tmp_path / "a" / "b") is None
