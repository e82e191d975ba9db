"""Suppressions: every form, by code, prefix and rule name; a suppressed finding is neither reported nor fixed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import check_source
from speedlint.analyzer.fixing import fix_text
from speedlint.analyzer.registry import select_rules
from speedlint.analyzer.rule import Finding, Impact
from speedlint.analyzer.sources import Source
from speedlint.analyzer.suppress import apply_suppressions, line_suppressions

TEMPLATE = '''{header}import gc

from torch.utils.data import Dataset


class Frames(Dataset):
    def __getitem__(self, index):
        frame = self.frames[index]
{before}        gc.collect(){trailing}
        return frame
'''
GC_LINE = 9  # without header / before lines


def src(trailing="", before="", header=""):
    return TEMPLATE.format(trailing=trailing, before=before, header=header)


SETTINGS = Settings(select=("SPD401",))
RULES = select_rules(("SPD401",))


def findings(text, settings=SETTINGS, path="train.py"):
    return check_source(Source(text, "utf-8"), path, RULES, settings).findings


def fixed(text, settings=SETTINGS, path="train.py"):
    return fix_text(text, path, RULES, settings).fixed


def test_unsuppressed_baseline():
    (f,) = findings(src())
    assert (f.code, f.line) == ("SPD401", GC_LINE)
    assert "gc.collect()" not in fixed(src())


SUPPRESSED = {
    "bare noqa": dict(trailing="  # noqa"),
    "noqa code": dict(trailing="  # noqa: SPD401"),
    "noqa no space, lower case": dict(trailing="  #noqa:spd401"),
    "noqa prefix": dict(trailing="  # noqa: SPD4"),
    "noqa list with another linter's code": dict(trailing="  # noqa: E501, SPD401"),
    "noqa rule name": dict(trailing="  # noqa: gc-collect-in-hot-path"),
    "noqa with a reason after the codes": dict(trailing="  # noqa: SPD401 collected on purpose, see #123"),
    "noqa after another comment": dict(trailing="  # keep it  # noqa: SPD401"),
    "ignore on the line": dict(trailing="  # speedlint: ignore[SPD401]"),
    "ignore all on the line": dict(trailing="  # speedlint: ignore"),
    "ignore by name": dict(trailing="  # speedlint: ignore[gc-collect-in-hot-path]"),
    "ignore several": dict(trailing="  # speedlint: ignore[SPD101, SPD401]"),
    "ignore on the line before": dict(before="        # speedlint: ignore[SPD401]\n"),
    "bare ignore on the line before": dict(before="        # speedlint: ignore\n"),
    "file-ignore": dict(header="# speedlint: file-ignore[SPD401]\n"),
    "file-ignore by name": dict(header="# speedlint: file-ignore[gc-collect-in-hot-path]\n"),
    "file-ignore all": dict(header="# speedlint: file-ignore\n"),
    "file-ignore prefix at the end": dict(header="", trailing="\n# speedlint: file-ignore[SPD4]"),
}

NOT_SUPPRESSED = {
    "noqa for another code": dict(trailing="  # noqa: E501"),
    "noqa for another rule of ours": dict(trailing="  # noqa: SPD101"),
    "noqa-like word": dict(trailing="  # noqab"),
    "ignore for another rule": dict(trailing="  # speedlint: ignore[SPD101]"),
    "ignore two lines before": dict(before="        # speedlint: ignore[SPD401]\n        pass\n"),
    "ignore as a trailing comment of the line before": dict(before="        x = 1  # speedlint: ignore[SPD401]\n"),
    "file-ignore for another rule": dict(header="# speedlint: file-ignore[SPD1]\n"),
    "noqa inside a string": dict(trailing='; s = "# noqa"'),
}


@pytest.mark.parametrize("kind", list(SUPPRESSED))
def test_suppressed_is_neither_reported_nor_fixed(kind):
    text = src(**SUPPRESSED[kind])
    assert findings(text) == []
    assert fixed(text) == text


@pytest.mark.parametrize("kind", list(NOT_SUPPRESSED))
def test_not_suppressed(kind):
    text = src(**NOT_SUPPRESSED[kind])
    assert [f.code for f in findings(text)] == ["SPD401"]
    assert "gc.collect()" not in fixed(text).replace('"# noqa"', "")


def test_per_file_ignores_setting():
    settings = Settings(select=("SPD401",), per_file_ignores=(("legacy/*.py", ("SPD401",)),), root=os.getcwd())
    assert findings(src(), settings, path="legacy/train.py") == []
    assert fixed(src(), settings, path="legacy/train.py") == src()
    assert len(findings(src(), settings, path="src/train.py")) == 1


def test_only_the_suppressed_one_of_two():
    text = src(trailing="  # noqa: SPD401").replace("        return frame\n", "        gc.collect()\n        return frame\n")
    (f,) = findings(text)
    assert f.line == GC_LINE + 1
    out = fixed(text)
    assert out.count("gc.collect()") == 1 and "gc.collect()  # noqa: SPD401" in out


def _finding(line, end_line):
    return Finding("SPD401", "gc-collect-in-hot-path", "m", "x.py", line, 1, end_line, 2, Impact("w", "always", "1x"))


def test_multi_line_finding_suppressed_on_its_first_or_last_line():
    """Documented choice: a comment on the first or the last line of a finding's span suppresses it
    (black moves the trailing comment of a statement it splits to the closing line); the lines in
    between do not."""
    text = "a = f(\n    x,\n    y,\n)\n"
    span = _finding(1, 4)
    for n, suppressed in ((1, True), (2, False), (3, False), (4, True)):
        lines = text.splitlines()
        lines[n - 1] += "  # noqa: SPD401"
        result = apply_suppressions([span], "\n".join(lines) + "\n", Settings(), "x.py")
        assert (result == []) is suppressed, n


def test_line_suppressions_parsing():
    text = "a = 1  # noqa\nb = 2  # noqa: SPD401,SPD1 reason\n# speedlint: ignore[SPD4]\nc = 3\n"
    assert line_suppressions(text) == {1: {"*"}, 2: {"SPD401", "SPD1"}, 3: {"SPD4"}, 4: {"SPD4"}}


def test_suppressions_survive_a_file_that_does_not_tokenize():
    text = 'x = """unterminated  # noqa: SPD401\n'
    assert line_suppressions(text) == {1: {"SPD401"}}


def test_cli_fix_apply_leaves_suppressed_code(tmp_path):
    path = tmp_path / "train.py"
    text = src(trailing="  # speedlint: ignore[gc-collect-in-hot-path]")
    path.write_text(text)
    env = dict(os.environ, COLUMNS="40")
    r = subprocess.run([sys.executable, "-m", "speedlint", "fix", "train.py", "--apply", "--select", "SPD401"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert path.read_text() == text
    r = subprocess.run([sys.executable, "-m", "speedlint", "check", "train.py", "--select", "SPD401"],
                       cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "All checks passed" in r.stdout


def test_own_line_comment_after_a_form_feed():
    """A form feed (`\\f`, between sections of older code) does not end a line for Python: the
    comment line is found where the tokenizer puts it, and covers the line after it."""
    text = "import gc\n\x0c\n\ndef step():\n    # speedlint: ignore[SPD401]\n    gc.collect()\n"
    assert line_suppressions(text) == {5: {"SPD401"}, 6: {"SPD401"}}
