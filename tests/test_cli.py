"""The command line as a user meets it: exit codes, per-file errors, rules, explain."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import ROOT
from speedlint.analyzer.registry import all_rules

BAD = """\
import gc
from torch.utils.data import Dataset


class Frames(Dataset):
    def __getitem__(self, i):
        gc.collect()
        return i
"""

CLEAN = """\
import torch


def add(a, b):
    return torch.add(a, b)
"""


def test_example_project_reports_the_costly_findings_first(cli):
    res = cli("check", "examples/", "--output-format", "concise", cwd=ROOT)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    codes = {line.split(": ", 1)[1].split()[0] for line in lines if ": SPD" in line}
    assert {"SPD101", "SPD401"} <= codes
    assert all("clean_train.py" not in line for line in lines), "the hand-optimised twin must be clean"
    full = cli("check", "examples/", cwd=ROOT)
    assert full.returncode == 1
    summary = full.stdout.split("Ranked by expected impact", 1)[1]
    first_row = [line for line in summary.splitlines() if "SPD" in line][0]
    assert first_row.split()[0] == "high"


def test_clean_file_exits_zero(cli, tmp_path):
    f = tmp_path / "clean.py"
    f.write_text(CLEAN)
    res = cli("check", f)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "All checks passed" in res.stdout


def test_findings_exit_one_with_location_code_and_impact(cli, tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(BAD)
    res = cli("check", f, cwd=tmp_path)
    assert res.returncode == 1
    assert "bad.py:7:9" in res.stdout
    assert "SPD401" in res.stdout and "gc-collect-in-hot-path" in res.stdout
    assert "gc.collect()" in res.stdout  # the snippet
    assert "high impact" in res.stdout


def test_missing_path_exits_two_with_one_line(cli, tmp_path):
    res = cli("check", tmp_path / "nope.py")
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert "nope.py" in res.stderr and "no such file" in res.stderr


def test_missing_path_does_not_stop_other_files(cli, tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(BAD)
    res = cli("check", tmp_path / "nope.py", f, "--output-format", "concise")
    assert res.returncode == 2
    assert "SPD401" in res.stdout


def test_syntax_error_is_a_per_file_diagnostic(cli, tmp_path):
    (tmp_path / "broken.py").write_text("import gc\ndef f(:\n    gc.collect()\n")
    (tmp_path / "bad.py").write_text(BAD)
    res = cli("check", tmp_path, "--output-format", "concise", cwd=tmp_path)
    assert res.returncode == 1
    assert "broken.py" in res.stdout and "syntax error" in res.stdout
    assert "bad.py:7:9: SPD401" in res.stdout


def test_undecodable_file_is_a_per_file_diagnostic(cli, tmp_path):
    (tmp_path / "latin.py").write_bytes(b"import gc\nname = '\xe9t\xe9'  # no coding cookie\ngc.collect()\n")
    (tmp_path / "bad.py").write_text(BAD)
    res = cli("check", tmp_path, "--output-format", "concise", cwd=tmp_path)
    assert res.returncode == 1
    assert "latin.py" in res.stdout and "decode" in res.stdout
    assert "SPD401" in res.stdout


def test_unreadable_file_is_a_per_file_diagnostic(tmp_path):
    """Permission bits do not stop root, so the read itself is made to fail as it would for a user."""
    import subprocess

    secret = tmp_path / "secret.py"
    secret.write_text(BAD)
    (tmp_path / "bad.py").write_text(BAD)
    code = (
        "import builtins, io, sys\n"
        "real_open = io.open\n"
        "def deny(file, *args, **kwargs):\n"
        "    if str(file).endswith('secret.py'):\n"
        "        raise PermissionError(13, 'Permission denied', str(file))\n"
        "    return real_open(file, *args, **kwargs)\n"
        "builtins.open = io.open = deny\n"
        "from speedlint.cli import main\n"
        "sys.argv = ['speedlint', 'check', '.', '--no-cache', '--jobs', '1', '--output-format', 'concise']\n"
        "main()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "secret.py" in res.stdout and "permission denied" in res.stdout
    assert "bad.py:7:9: SPD401" in res.stdout


def test_unknown_selector_is_a_usage_error(cli, tmp_path):
    res = cli("check", tmp_path, "--select", "XYZ9")
    assert res.returncode == 2
    assert "unknown rule selector" in res.stderr


def test_unknown_option_is_a_usage_error(cli):
    res = cli("check", "--no-such-option")
    assert res.returncode == 2


def test_select_ignore_prefixes_and_names(cli, tmp_path):
    f = tmp_path / "bad.py"
    f.write_text(BAD)
    assert cli("check", f, "--ignore", "SPD4").returncode == 0
    assert cli("check", f, "--ignore", "gc-collect-in-hot-path").returncode == 0
    assert cli("check", f, "--select", "SPD1").returncode == 0
    assert cli("check", f, "--select", "ALL").returncode == 1
    assert cli("check", f, "--select", "SPD40").returncode == 1


def test_default_path_is_current_directory(cli, tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    res = cli("check", "--output-format", "concise", cwd=tmp_path)
    assert res.returncode == 1 and "bad.py" in res.stdout


def test_gitignore_and_default_excludes_are_respected(cli, tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("generated/\n")
    for folder in ("generated", ".venv", "build", "src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "bad.py").write_text(BAD)
    res = cli("check", ".", "--output-format", "concise", cwd=tmp_path)
    assert res.returncode == 1
    flagged = {line.split(":")[0] for line in res.stdout.splitlines()}
    assert flagged == {os.path.join("src", "bad.py")}


def test_rules_lists_every_rule(cli):
    res = cli("rules")
    assert res.returncode == 0
    for rule in all_rules():
        assert rule.code in res.stdout
        assert rule.name in res.stdout


def test_explain_renders_the_docs(cli):
    res = cli("explain", "SPD401")
    assert res.returncode == 0
    assert "What it does" in res.stdout and "Fix safety" in res.stdout
    assert cli("explain", "gc-collect-in-hot-path").returncode == 0


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_explain_works_for_every_rule(rule):
    from typer.testing import CliRunner

    from speedlint.cli import app

    res = CliRunner().invoke(app, ["explain", rule.code])
    assert res.exit_code == 0 and "Why is this slow?" in res.output


def test_explain_unknown_rule_exits_two(cli):
    res = cli("explain", "SPD999")
    assert res.returncode == 2 and "unknown rule" in res.stderr


def test_version(cli):
    res = cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("speedlint ")


def test_internal_error_exits_two_not_one(tmp_path):
    """An uncaught exception must not look like 'findings' (exit 1)."""
    import subprocess

    f = tmp_path / "bad.py"
    f.write_text(BAD)
    code = (
        "import sys, speedlint.analyzer.engine as e\n"
        "def boom(*a, **k): raise RuntimeError('boom')\n"
        "e.analyze_text = boom\n"
        "from speedlint.cli import main\n"
        f"sys.argv = ['speedlint', 'check', {str(f)!r}, '--no-cache']\n"
        "main()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "internal error" in res.stdout + res.stderr
