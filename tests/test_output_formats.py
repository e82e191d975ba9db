"""Output formats, each run as a user would: a subprocess whose stdout is a pipe, at a narrow
terminal width (COLUMNS=40). Machine formats must never be wrapped or coloured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from speedlint.analyzer.report.github import escape_data, escape_property, github_lines
from speedlint.analyzer.rule import HIGH, LOW, Finding, Impact

DATA = Path(__file__).resolve().parent / "data"
SCHEMA = DATA / "sarif-schema-2.1.0.json"

BAD = '''import gc

import torch
from torch.utils.data import Dataset


class Frames(Dataset):
    def __init__(self, frames):
        self.frames = frames

    def __len__(self):
        return len(self.frames)

    def __getitem__(self, index):
        frame = torch.from_numpy(self.frames[index]).float()
        gc.collect()
        return frame
'''
BAD_LINE, BAD_COL = 16, 9


def speedlint(*args, cwd, input=None, columns=40, env=None):
    """The CLI in a subprocess; stdout and stderr are pipes; narrow terminal by default."""
    full_env = dict(os.environ)
    full_env.update({"COLUMNS": str(columns), "LINES": "20", "TERM": "xterm-256color", "FORCE_COLOR": ""})
    full_env.pop("FORCE_COLOR")
    full_env.pop("NO_COLOR", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "speedlint", *map(str, args)],
        cwd=cwd, input=input, capture_output=True, text=True, env=full_env, timeout=300,
    )


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "data.py").write_text(BAD)
    (tmp_path / "src" / "clean.py").write_text("import torch\n\nx = torch.zeros(3)\n")
    (tmp_path / "speedlint.toml").write_text('select = ["SPD401"]\n')
    return tmp_path


def _no_ansi(text):
    assert "\x1b[" not in text, "output contains ANSI escapes"


# -- concise -------------------------------------------------------------------------------------
def test_concise_one_line_per_finding_unwrapped(project):
    r = speedlint("check", "src", "--output-format", "concise", cwd=project)
    assert r.returncode == 1, r.stderr
    _no_ansi(r.stdout)
    lines = r.stdout.splitlines()
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith(f"src/data.py:{BAD_LINE}:{BAD_COL}: SPD401 ")
    assert len(line) > 40  # longer than the terminal: not wrapped
    assert "gc.collect()" in line


def test_concise_clean_is_empty_and_exit_zero(project):
    r = speedlint("check", "src/clean.py", "--output-format", "concise", cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


# -- json ----------------------------------------------------------------------------------------
def test_json_schema_is_stable(project):
    r = speedlint("check", "src", "--output-format", "json", cwd=project)
    assert r.returncode == 1, r.stderr
    _no_ansi(r.stdout)
    doc = json.loads(r.stdout)
    assert doc["version"] == 1
    assert doc["errors"] == []
    (f,) = doc["findings"]
    assert set(f) == {"code", "name", "message", "filename", "location", "end_location", "status", "impact", "fix", "chain"}
    assert f["chain"] == []  # hot in its own file: no call chain through other modules
    assert f["code"] == "SPD401" and f["name"] == "gc-collect-in-hot-path"
    assert f["filename"] == "src/data.py"
    assert f["location"] == {"row": BAD_LINE, "column": BAD_COL}
    assert f["end_location"] == {"row": BAD_LINE, "column": BAD_COL + len("gc.collect()")}
    assert set(f["impact"]) == {"level", "wastes", "when", "typical", "evidence"}
    assert f["impact"]["level"] == "high"
    fix = f["fix"]
    assert fix["applicability"] == "safe"
    assert fix["title"]
    (edit,) = fix["edits"]
    assert set(edit) == {"location", "end_location", "content"}
    assert edit["location"]["row"] == BAD_LINE


def test_json_reports_file_errors(project):
    (project / "src" / "broken.py").write_text("def f(:\n    gc.collect()\n")
    r = speedlint("check", "src/broken.py", "--output-format", "json", cwd=project)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["findings"] == []
    (err,) = doc["errors"]
    assert err["filename"] == "src/broken.py" and err["kind"] == "error" and "syntax" in err["message"]


# -- sarif ---------------------------------------------------------------------------------------
def _validate_sarif(doc):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_sarif_validates_against_the_schema_and_fits_github(project):
    r = speedlint("check", "src", "--output-format", "sarif", cwd=project)
    assert r.returncode == 1, r.stderr
    _no_ansi(r.stdout)
    doc = json.loads(r.stdout)
    _validate_sarif(doc)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "speedlint"
    rules = driver["rules"]
    ids = [rule["id"] for rule in rules]
    assert len(ids) == len(set(ids))
    (result,) = run["results"]
    rule = rules[result["ruleIndex"]]
    assert rule["id"] == result["ruleId"] == "SPD401"
    assert rule["name"] == "gc-collect-in-hot-path"
    assert rule["shortDescription"]["text"].startswith("Flags `gc.collect()`")
    assert rule["fullDescription"]["text"] and rule["help"]["text"] and rule["help"]["markdown"]
    assert rule["defaultConfiguration"]["level"] in ("note", "warning", "error")
    assert result["level"] == "warning"
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "src/data.py", "uriBaseId": "%SRCROOT%"}
    assert not loc["artifactLocation"]["uri"].startswith(("/", "file:"))
    assert loc["region"] == {"startLine": BAD_LINE, "startColumn": BAD_COL, "endLine": BAD_LINE, "endColumn": BAD_COL + 12}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")
    fp = result["partialFingerprints"]["speedlintFingerprint/v1"]
    assert fp.endswith(":1")


def test_sarif_fingerprint_survives_moving_the_line(project):
    first = json.loads(speedlint("check", "src", "--output-format", "sarif", cwd=project).stdout)
    moved = BAD.replace("class Frames(Dataset):", "# a comment\n\n\nclass Frames(Dataset):")
    (project / "src" / "data.py").write_text(moved)
    second = json.loads(speedlint("check", "src", "--output-format", "sarif", cwd=project).stdout)
    (a,) = first["runs"][0]["results"]
    (b,) = second["runs"][0]["results"]
    assert b["locations"][0]["physicalLocation"]["region"]["startLine"] == BAD_LINE + 3
    assert a["partialFingerprints"] == b["partialFingerprints"]


def test_sarif_with_no_findings_and_a_file_error_validates(project):
    (project / "src" / "broken.py").write_text("def f(:\n    gc.collect()\n")
    r = speedlint("check", "src/clean.py", "src/broken.py", "--output-format", "sarif", cwd=project)
    doc = json.loads(r.stdout)
    _validate_sarif(doc)
    run = doc["runs"][0]
    assert run["results"] == []
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["level"] == "error" and "broken.py" in note["message"]["text"]


def test_sarif_uri_is_percent_encoded(project):
    odd = project / "my dir"
    odd.mkdir()
    (odd / "data%1.py").write_text(BAD)
    doc = json.loads(speedlint("check", "my dir", "--output-format", "sarif", cwd=project).stdout)
    _validate_sarif(doc)
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "my%20dir/data%251.py"


# -- github --------------------------------------------------------------------------------------
def test_github_annotations(project):
    r = speedlint("check", "src", "--output-format", "github", cwd=project)
    assert r.returncode == 1, r.stderr
    _no_ansi(r.stdout)
    (line,) = r.stdout.splitlines()
    assert line.startswith(
        f"::warning file=src/data.py,line={BAD_LINE},col={BAD_COL},endLine={BAD_LINE},endColumn={BAD_COL + 12},"
        "title=speedlint SPD401 (gc-collect-in-hot-path)::SPD401 "
    )


def _finding(message, path="a,b:c.py", level=HIGH):
    impact = Impact("x", "always", "1x", level=level)
    return Finding("SPD999", "test-rule", message, path, 3, 5, 4, 2, impact)


def test_github_escaping():
    assert escape_data("100%\r\nnext") == "100%25%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    (line,) = github_lines([_finding("50% of time:\nwaiting, really")], [])
    assert line == (
        "::warning file=a%2Cb%3Ac.py,line=3,col=5,endLine=4,endColumn=2,title=speedlint SPD999 (test-rule)"
        "::SPD999 50%25 of time:%0Awaiting, really"
    )
    (low,) = github_lines([_finding("m", path="x.py", level=LOW)], [])
    assert low.startswith("::notice file=x.py,")


def test_github_reports_file_errors(project):
    (project / "src" / "broken.py").write_text("def f(:\n    gc.collect()\n")
    r = speedlint("check", "src/broken.py", "--output-format", "github", cwd=project)
    assert r.returncode == 1
    assert r.stdout.startswith("::error file=src/broken.py,title=speedlint error::syntax error")


# -- full ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("columns", [40, 12])
def test_full_format_at_narrow_width_through_a_pipe(project, columns):
    r = speedlint("check", "src", cwd=project, columns=columns)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    _no_ansi(r.stdout)
    assert "SPD401" in r.stdout
    assert "Found 1 finding" in " ".join(r.stdout.split())


def test_full_quiet_prints_only_the_summary(project):
    r = speedlint("check", "src", "--quiet", cwd=project)
    assert r.returncode == 1
    assert "src/data.py" not in r.stdout
    assert "Found 1 finding" in " ".join(r.stdout.split())


# -- options shared by every format ------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github", "markdown"])
def test_every_format_through_a_pipe_at_narrow_width(project, fmt):
    r = speedlint("check", "src", "--output-format", fmt, cwd=project, columns=40)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    _no_ansi(r.stdout)
    if fmt in ("json", "sarif"):
        json.loads(r.stdout)
        wide = speedlint("check", "src", "--output-format", fmt, cwd=project, columns=300)
        assert wide.stdout == r.stdout  # the terminal width changes nothing
    if fmt in ("concise", "github"):
        assert len(r.stdout.splitlines()) == 1
    if fmt == "markdown":  # a document: the terminal width changes nothing either
        assert speedlint("check", "src", "--output-format", fmt, cwd=project, columns=300).stdout == r.stdout


@pytest.mark.parametrize("fmt", ["full", "concise", "json", "sarif", "github", "markdown"])
def test_output_file(project, fmt):
    out = project / "reports" / f"report.{fmt}"
    r = speedlint("check", "src", "--output-format", fmt, "--output-file", out, cwd=project)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    text = out.read_text(encoding="utf-8")
    _no_ansi(text)
    assert "SPD401" in text
    if fmt in ("json", "sarif"):
        json.loads(text)


def test_exit_zero(project):
    r = speedlint("check", "src", "--output-format", "concise", "--exit-zero", cwd=project)
    assert r.returncode == 0
    assert "SPD401" in r.stdout


def test_exit_zero_keeps_usage_errors(project):
    r = speedlint("check", "src", "--output-format", "yaml", "--exit-zero", cwd=project)
    assert r.returncode == 2
    assert "unknown output format" in r.stderr


def test_statistics(project):
    (project / "src" / "more.py").write_text(BAD)
    r = speedlint("check", "src", "--statistics", cwd=project)
    assert r.returncode == 1
    assert r.stdout.split() == ["2", "SPD401", "[*]", "gc-collect-in-hot-path"]
    r = speedlint("check", "src", "--statistics", "--output-format", "json", cwd=project)
    assert json.loads(r.stdout) == [{"code": "SPD401", "name": "gc-collect-in-hot-path", "count": 2, "fixable": 2}]


# -- stdin ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["concise", "json", "sarif", "github", "markdown", "full"])
def test_check_stdin(project, fmt):
    r = speedlint("check", "-", "--stdin-filename", "train.py", "--output-format", fmt, cwd=project, input=BAD)
    assert r.returncode == 1, r.stderr
    _no_ansi(r.stdout)
    assert "train.py" in r.stdout
    if fmt == "concise":
        assert r.stdout.startswith(f"train.py:{BAD_LINE}:{BAD_COL}: SPD401 ")
    if fmt == "markdown":  # the stdin file name in the findings and in the commands
        assert f"`train.py:{BAD_LINE}:{BAD_COL}`" in r.stdout and "speedlint fix train.py --apply" in r.stdout
    if fmt == "sarif":
        doc = json.loads(r.stdout)
        _validate_sarif(doc)
        assert doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"


def test_check_stdin_clean_and_suppressed(project):
    r = speedlint("check", "-", "--stdin-filename", "train.py", "--output-format", "concise", cwd=project,
                  input=BAD.replace("gc.collect()", "gc.collect()  # noqa: SPD401"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""


def test_check_stdin_uses_the_config_for_the_stdin_filename(project):
    (project / "legacy").mkdir()
    (project / "legacy" / "speedlint.toml").write_text('ignore = ["SPD401"]\n')
    r = speedlint("check", "-", "--stdin-filename", "legacy/train.py", "--output-format", "concise", cwd=project, input=BAD)
    assert r.returncode == 0, r.stdout
    r = speedlint("check", "-", "--stdin-filename", "src/train.py", "--output-format", "concise", cwd=project, input=BAD)
    assert r.returncode == 1


def test_check_stdin_force_exclude(project):
    (project / "speedlint.toml").write_text('select = ["SPD401"]\nextend-exclude = ["generated"]\n')
    args = ("check", "-", "--stdin-filename", "generated/train.py", "--output-format", "concise")
    assert speedlint(*args, cwd=project, input=BAD).returncode == 1
    r = speedlint(*args, "--force-exclude", cwd=project, input=BAD)
    assert r.returncode == 0 and r.stdout == ""


def test_fix_stdin_writes_the_fixed_code(project):
    r = speedlint("fix", "-", "--stdin-filename", "train.py", cwd=project, input=BAD, columns=40)
    assert r.returncode == 0, r.stderr
    assert "gc.collect()" not in r.stdout
    assert "frame = torch.from_numpy(self.frames[index]).float()\n        return frame\n" in r.stdout
    # line endings and encoding are kept, byte for byte
    crlf = BAD.replace("\n", "\r\n").encode("utf-8")
    r = subprocess.run([sys.executable, "-m", "speedlint", "fix", "-", "--stdin-filename", "train.py"],
                       cwd=project, input=crlf, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == crlf.replace(b"        gc.collect()\r\n", b"")
    clean = "# -*- coding: latin-1 -*-\r\nname = 'caf\xe9'\r\n".encode("latin-1")
    r = subprocess.run([sys.executable, "-m", "speedlint", "fix", "-", "--stdin-filename", "train.py"],
                       cwd=project, input=clean, capture_output=True, timeout=300)
    assert r.returncode == 0 and r.stdout == clean


def test_fix_stdin_respects_suppressions_and_reports_syntax_errors(project):
    kept = BAD.replace("gc.collect()", "gc.collect()  # speedlint: ignore[gc-collect-in-hot-path]")
    r = speedlint("fix", "-", "--stdin-filename", "train.py", cwd=project, input=kept)
    assert r.returncode == 0 and r.stdout == kept
    r = speedlint("fix", "-", "--stdin-filename", "train.py", cwd=project, input="def f(:\n    gc.collect()\n")
    assert r.stdout == "def f(:\n    gc.collect()\n"
    assert r.returncode == 1 and "syntax error" in r.stderr
