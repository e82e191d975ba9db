"""The baseline: findings keyed on rule, file and line content survive edits; new findings fail; stale entries are a note."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from speedlint.analyzer.baseline import code_lines

TRAIN = '''import gc

import torch
from torch.utils.data import Dataset


class Frames(Dataset):
    def __getitem__(self, index):
        frame = torch.from_numpy(self.frames[index])
        gc.collect()
        return frame


def collate(batch):
    gc.collect()
    return torch.stack(batch)
'''


def speedlint(*args, cwd):
    env = dict(os.environ, COLUMNS="40")
    return subprocess.run([sys.executable, "-m", "speedlint", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "speedlint.toml").write_text('select = ["SPD401"]\n')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    return tmp_path


def concise(project, *extra):
    return speedlint("check", "src", "--output-format", "concise", "--baseline", "speedlint-baseline.json", *extra, cwd=project)


def test_write_baseline_records_rule_file_and_content(project):
    r = speedlint("check", "src", "--write-baseline", "speedlint-baseline.json", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "wrote 1 finding" in r.stderr  # only __getitem__ is hot: collate is not passed to a DataLoader here
    data = json.loads((project / "speedlint-baseline.json").read_text())
    assert data["speedlint-baseline"] == 1
    assert data["findings"] == [
        {"code": "SPD401", "name": "gc-collect-in-hot-path", "path": "src/train.py", "content": "gc.collect()", "count": 1}
    ]
    assert "line" not in json.dumps(data["findings"])
    r = concise(project)
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_a_finding_moved_by_an_edit_above_stays_baselined_and_a_new_one_fails(project):
    assert speedlint("check", "src", "--write-baseline", "speedlint-baseline.json", cwd=project).returncode == 0
    path = project / "src" / "train.py"
    # lines added above, the flagged line re-indented and given a comment: still the same finding
    edited = '"""Frames for the video model."""\nimport os\n\n' + TRAIN.replace(
        "        gc.collect()\n        return frame",
        "        if True:\n            gc.collect()   # TODO remove\n        return frame",
    )
    path.write_text(edited)
    r = concise(project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""
    # a new finding (another hot gc.collect with different content) fails, and only it is reported
    path.write_text(edited.replace("        return frame", "        gc.collect(generation=2)\n        return frame", 1))
    r = concise(project)
    assert r.returncode == 1
    (line,) = r.stdout.splitlines()
    assert line.startswith("src/train.py:") and "SPD401" in line
    assert int(line.split(":")[1]) == edited.splitlines().index("        return frame") + 1


def test_a_duplicate_of_a_baselined_line_is_new(project):
    speedlint("check", "src", "--write-baseline", "speedlint-baseline.json", cwd=project)
    path = project / "src" / "train.py"
    path.write_text(TRAIN.replace("        gc.collect()\n", "        gc.collect()\n        gc.collect()\n", 1))
    r = concise(project)
    assert r.returncode == 1
    (line,) = r.stdout.splitlines()
    assert line.startswith("src/train.py:11:")  # the second one in file order


def test_another_file_with_the_same_line_is_new(project):
    speedlint("check", "src", "--write-baseline", "speedlint-baseline.json", cwd=project)
    (project / "src" / "other.py").write_text(TRAIN)
    r = concise(project)
    assert r.returncode == 1
    assert [line.split(":")[0] for line in r.stdout.splitlines()] == ["src/other.py"]


def test_stale_entries_are_a_note_not_a_failure(project):
    speedlint("check", "src", "--write-baseline", "speedlint-baseline.json", cwd=project)
    path = project / "src" / "train.py"
    path.write_text(TRAIN.replace("        gc.collect()\n        return frame", "        return frame"))
    r = concise(project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""
    assert "1 baseline entry" in r.stderr and "no longer match" in r.stderr
    assert "stale: src/train.py: SPD401 `gc.collect()`" in r.stderr
    # checking only another file does not call the entries of unchecked files stale
    (project / "src" / "clean.py").write_text("x = 1\n")
    r = speedlint("check", "src/clean.py", "--baseline", "speedlint-baseline.json", cwd=project)
    assert r.returncode == 0 and "no longer match" not in r.stderr


def test_baseline_from_another_folder_and_formats(project):
    (project / "ci").mkdir()
    assert speedlint("check", "src", "--write-baseline", "ci/baseline.json", cwd=project).returncode == 0
    data = json.loads((project / "ci" / "baseline.json").read_text())
    assert data["findings"][0]["path"] == "../src/train.py"  # relative to the baseline file
    r = speedlint("check", "train.py", "--baseline", "../ci/baseline.json", "--output-format", "sarif", cwd=project / "src")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["runs"][0]["results"] == []


def test_bad_baseline_files_are_exit_2(project):
    r = speedlint("check", "src", "--baseline", "missing.json", cwd=project)
    assert r.returncode == 2 and "baseline file not found" in r.stderr
    (project / "bad.json").write_text("{not json")
    r = speedlint("check", "src", "--baseline", "bad.json", cwd=project)
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    (project / "other.json").write_text('{"version": 1}')
    r = speedlint("check", "src", "--baseline", "other.json", cwd=project)
    assert r.returncode == 2 and "not a speedlint baseline" in r.stderr


def test_code_lines_normalization():
    text = 'x  =  f( a,b )   # comment\ns = "# not a comment"\n\tgc.collect()\n'
    assert code_lines(text) == ["x = f( a,b )", 's = "# not a comment"', "gc.collect()"]
