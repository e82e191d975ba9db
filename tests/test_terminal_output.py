"""Human output where ML engineers read it: a terminal, a pipe, a CI log (GitHub Actions).

Outside a terminal no line is wrapped and there is no colour unless FORCE_COLOR asks for it;
NO_COLOR turns colour off everywhere (no-color.org, force-color.org).
"""

from __future__ import annotations

import io
import sys

import pytest

from speedlint.analyzer.report import emit_check, emit_explain, emit_rules
from speedlint.analyzer.report.terminal import Terminal
from speedlint.analyzer.report.verify import progress_printer
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths

LONG_NAME = "a_rather_long_dataloader_variable_name_that_nobody_would_shorten"
SOURCE = (
    "from torch.utils.data import DataLoader\n"
    "\n"
    "\n"
    "def train(model, dataset, optimizer):\n"
    f"    {LONG_NAME} = DataLoader(dataset, batch_size=256, shuffle=True, drop_last=True, collate_fn=None, sampler=None, timeout=0)\n"
    "    for epoch in range(10):\n"
    f"        for x, y in {LONG_NAME}:\n"
    "            loss = model(x).sum()\n"
    "            loss.backward()\n"
    "            optimizer.step()\n"
)
LONG_LINE = SOURCE.splitlines()[4].rstrip()
ESC = "\x1b["


class TTY(io.StringIO):
    """A stream that says it is a terminal (as a console's stdout does)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def env(monkeypatch):  # type: ignore[no-untyped-def]
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    return monkeypatch


@pytest.fixture
def result(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    (tmp_path / "train.py").write_text(SOURCE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    res = check_paths(["train.py"], SettingsResolver(Overrides(), isolated=True), use_cache=False)
    assert res.findings
    return res


def full_report(result, out) -> str:  # type: ignore[no-untyped-def]
    real = sys.stdout
    sys.stdout = out
    try:
        emit_check(result)
    finally:
        sys.stdout = real
    return out.getvalue()


def test_a_log_gets_every_line_whole_and_no_colour(env, result):  # type: ignore[no-untyped-def]
    env.setenv("GITHUB_ACTIONS", "true")
    text = full_report(result, io.StringIO())
    assert ESC not in text
    lines = text.splitlines()
    assert f"    | {LONG_LINE}" in lines  # the source line, whole
    for f in result.findings:  # each finding's head line, message included, whole
        assert any(line.startswith(f"{f.location}  {f.code} ") and line.endswith(f.message) for line in lines), f.message
    assert max(len(line) for line in lines) > 80  # nothing was folded at 80 columns


def test_a_terminal_wraps_and_colours(env, result):  # type: ignore[no-untyped-def]
    text = full_report(result, TTY())
    assert ESC in text  # the tests below could fail
    assert not any(line.endswith(LONG_LINE) for line in text.splitlines())  # wrapped at 80 columns


def test_no_color_on_a_terminal(env, result):  # type: ignore[no-untyped-def]
    env.setenv("NO_COLOR", "1")
    assert ESC not in full_report(result, TTY())


def test_no_color_wins_over_force_color(env, result):  # type: ignore[no-untyped-def]
    env.setenv("NO_COLOR", "1")
    env.setenv("FORCE_COLOR", "1")
    assert ESC not in full_report(result, io.StringIO())


def test_force_color_through_a_pipe(env, result):  # type: ignore[no-untyped-def]
    env.setenv("FORCE_COLOR", "1")
    text = full_report(result, io.StringIO())
    assert ESC in text
    assert any(line.endswith(LONG_LINE) for line in text.splitlines())  # still unwrapped


def test_empty_variables_mean_unset(env, result):  # type: ignore[no-untyped-def]
    env.setenv("FORCE_COLOR", "")
    assert ESC not in full_report(result, io.StringIO())
    env.setenv("NO_COLOR", "")
    assert ESC in full_report(result, TTY())


def test_cli_in_github_actions(cli, tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "train.py").write_text(SOURCE, encoding="utf-8")
    res = cli("check", "train.py", "--no-cache", cwd=tmp_path, env={"GITHUB_ACTIONS": "true", "NO_COLOR": "", "FORCE_COLOR": ""})
    assert res.returncode == 1
    assert ESC not in res.stdout
    assert any(line.endswith(LONG_LINE.strip()) for line in res.stdout.splitlines()), res.stdout
    coloured = cli("check", "train.py", "--no-cache", cwd=tmp_path, env={"GITHUB_ACTIONS": "true", "FORCE_COLOR": "1", "NO_COLOR": ""})
    assert ESC in coloured.stdout


def test_rules_table_in_a_pipe_is_one_row_per_line(env, capsys):  # type: ignore[no-untyped-def]
    from speedlint.analyzer.registry import all_rules

    rules = all_rules()
    emit_rules(rules)
    out = capsys.readouterr().out
    assert ESC not in out
    for r in rules:
        rows = [line for line in out.splitlines() if r.code in line]
        assert len(rows) == 1 and r.name in rows[0] and r.status.value in rows[0], rows


def test_explain_in_a_pipe_is_the_markdown_as_written(env, capsys):  # type: ignore[no-untyped-def]
    from speedlint.analyzer.registry import rule_by_code_or_name

    rule = rule_by_code_or_name("SPD101")
    emit_explain(rule)
    out = capsys.readouterr().out
    assert out.startswith("# SPD101 (")
    assert rule.docs() in out  # code blocks and paragraphs intact, nothing re-wrapped


def test_fix_messages_and_verify_progress_are_not_wrapped(env, capsys, tmp_path):  # type: ignore[no-untyped-def]
    say = progress_printer()
    message = "run 1 of 6 (before) " + "x" * 150
    say(message)
    assert f"speedlint verify: {message}\n" in capsys.readouterr().err
    term = Terminal(io.StringIO())
    assert not term.wrap and not term.colour
    term.line([("y" * 300, "bold")])
    assert term.out.getvalue() == "y" * 300 + "\n"


def test_output_file_is_always_plain(env, result, tmp_path):  # type: ignore[no-untyped-def]
    env.setenv("FORCE_COLOR", "1")
    target = tmp_path / "report.txt"
    emit_check(result, output_file=target)
    text = target.read_text(encoding="utf-8")
    assert ESC not in text and any(line.endswith(LONG_LINE) for line in text.splitlines())


def test_snippet_counts_lines_as_python_does():
    """A form feed or a Unicode line separator inside a line does not end it (`str.splitlines`
    would, and show the wrong line for every finding below it)."""
    from speedlint.analyzer.report.text import snippet

    text = "import torch\n\x0c\nx = '\u2028'\nloader = DataLoader(ds)\n"
    assert snippet(text, 4) == "loader = DataLoader(ds)"
    assert snippet(text, 3) == "x = '\u2028'"
