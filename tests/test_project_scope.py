"""The files a user names are not the program (`speedlint.analyzer.project_scope`).

`speedlint check FILE` reports for FILE exactly what `speedlint check .` reports for it, in every
fixture project, with and without a warm cache: the program is the project around the named
files, and only the named files are reported. A sibling folder outside the project is not
pulled in; a named file outside any project behaves as before.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from conftest import FIXTURES
from speedlint.analyzer.config import declared_torch_range
from speedlint.analyzer.project_scope import marker_folder, project_roots
from speedlint.analyzer.rewrite import fix_paths, fix_stdin
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths, check_stdin

PROJECTS = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir())

Key = Tuple[int, int, str, str, Tuple]


def _resolver(project: Path) -> SettingsResolver:
    target, _ = declared_torch_range(project)
    return SettingsResolver(Overrides(select=("ALL",), preview=True, target_torch_version=target), isolated=True)


def _by_file(result) -> Dict[str, Set[Key]]:
    out: Dict[str, Set[Key]] = {}
    for f in result.findings:
        out.setdefault(Path(f.path).as_posix(), set()).add((f.line, f.column, f.code, f.message, tuple(f.related)))
    return out


def _python_files(project: Path) -> List[str]:
    return sorted(p.relative_to(project).as_posix() for p in project.rglob("*.py") if ".speedlint_cache" not in p.parts)


def _each_file_alone(project: Path, use_cache: bool) -> Dict[str, Set[Key]]:
    resolver = _resolver(project)
    out: Dict[str, Set[Key]] = {}
    for rel in _python_files(project):
        result = check_paths([rel], resolver, use_cache=use_cache, jobs=1)
        assert not result.diagnostics, (rel, result.diagnostics)
        out[rel] = _by_file(result).get(rel, set())
    return out


def _whole(project: Path, use_cache: bool) -> Dict[str, Set[Key]]:
    result = check_paths(["."], _resolver(project), use_cache=use_cache, jobs=1)
    return {rel: _by_file(result).get(rel, set()) for rel in _python_files(project)}


def _differences(alone: Dict[str, Set[Key]], whole: Dict[str, Set[Key]]) -> List[str]:
    out = []
    for rel in sorted(whole):
        if alone[rel] != whole[rel]:
            out.append(f"{rel}: alone only {sorted(alone[rel] - whole[rel])}, with the project only {sorted(whole[rel] - alone[rel])}")
    return out


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_a_file_named_alone_gets_its_findings_with_the_project(project, monkeypatch):
    """Cold (no cache), in place: the fixture projects sit inside this repository (a project
    root above the current folder), so the current folder bounds each one."""
    monkeypatch.chdir(project)
    whole = _whole(project, use_cache=False)
    assert not _differences(_each_file_alone(project, use_cache=False), whole)


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_a_buffer_on_stdin_gets_what_its_file_gets(project, monkeypatch):
    """`speedlint check - --stdin-filename FILE` (an editor's buffer): the same findings as
    the file on disk in `check .`, the rest of the project read from disk."""
    monkeypatch.chdir(project)
    whole = _whole(project, use_cache=False)
    resolver = _resolver(project)
    alone = {}
    for rel in _python_files(project):
        result = check_stdin((project / rel).read_text(encoding="utf-8"), rel, resolver, use_cache=False)
        alone[rel] = _by_file(result).get(rel, set())
    assert not _differences(alone, whole)


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_fix_of_a_buffer_on_stdin_writes_what_fix_writes_for_its_file(project, monkeypatch):
    """`speedlint fix - --stdin-filename FILE` (an editor's format-on-save): the fixed text is
    what `fix .` would write for the file, the program's seeds included (in
    `pinned_loader_elsewhere` the SPD202 fix needs the pinned loader of `data.py`)."""
    monkeypatch.chdir(project)
    resolver = _resolver(project)
    whole = {o.path: o.fixed for o in fix_paths(["."], resolver, apply=False, use_cache=False).outcomes if o.changed}
    for rel in _python_files(project):
        text = (project / rel).read_text(encoding="utf-8")
        assert fix_stdin(text, rel, resolver, use_cache=False).fixed == whole.get(rel, text), rel


def test_fix_of_a_buffer_sees_the_pinned_loader_of_another_module(monkeypatch):
    project = FIXTURES / "projects" / "pinned_loader_elsewhere"
    monkeypatch.chdir(project)
    text = (project / "train.py").read_text(encoding="utf-8")
    fixed = fix_stdin(text, "train.py", _resolver(project), use_cache=False).fixed
    assert "x = x.to(device, non_blocking=True)  # expect: SPD202" in fixed
    assert fix_stdin(text, "-", _resolver(project), use_cache=False).fixed == text  # must not fire: no file name, no program


def test_the_same_with_a_warm_cache(tmp_path, monkeypatch):
    """Every fixture project in a checkout of its own (a `.git` above them): each file named
    alone on a fresh cache (the first one fills it), then `check .` on the warm cache, then each
    file again (link and results answered from the cache): always what `check .` reports."""
    top = tmp_path / "checkout"
    shutil.copytree(FIXTURES / "projects", top / "projects")
    (top / ".git").mkdir()
    for original in PROJECTS:
        project = top / "projects" / original.name
        monkeypatch.chdir(project)
        expected = _whole(project, use_cache=False)
        assert not _differences(_each_file_alone(project, use_cache=True), expected), original.name
        assert _whole(project, use_cache=True) == expected, original.name
        assert not _differences(_each_file_alone(project, use_cache=True), expected), original.name
        shutil.rmtree(project / ".speedlint_cache", ignore_errors=True)


def test_the_cuda_net_in_another_module_makes_the_named_script_a_conv_net(monkeypatch):
    """The issue's case: `check train.py` keeps the cuDNN finding whose conv net sits in `models/`,
    `check losses/focal.py` the `.item()` that `train.py` makes hot."""
    project = FIXTURES / "projects" / "loss_in_another_module"
    monkeypatch.chdir(project)
    resolver = _resolver(project)
    assert {(f.line, f.code) for f in check_paths(["losses/focal.py"], resolver, use_cache=False, jobs=1).findings} == {(15, "SPD201")}
    assert (29, "SPD701") in {(f.line, f.code) for f in check_paths(["train.py"], resolver, use_cache=False, jobs=1).findings}
    only = check_paths(["losses/focal.py"], resolver, use_cache=False, jobs=1)
    assert {f.path for f in only.findings} == {"losses/focal.py"}  # only the named file is reported


def test_fix_of_a_named_file_sees_its_project_and_fixes_only_it(tmp_path, monkeypatch):
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "loss_in_another_module", project)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    monkeypatch.chdir(project)
    resolver = _resolver(project)
    whole = fix_paths(["."], resolver, apply=False, use_cache=False)
    alone = fix_paths(["train.py"], resolver, apply=False, use_cache=False)
    assert [o.path for o in alone.outcomes] == ["train.py"]
    (mine,) = [o for o in whole.outcomes if o.path == "train.py"]
    assert alone.outcomes[0].fixed == mine.fixed


def _write(root: Path, files: Dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


LOSS_WITH_ITEM = """import torch


class DiceLoss(torch.nn.Module):
    def forward(self, out, y):
        return (out - y).abs().mean() * out.max().item()
"""

TRAIN_WITH = """import torch
from {module} import DiceLoss


def main(loader):
    model = torch.nn.Linear(4, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = DiceLoss()
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _no_marker_above(folder: Path) -> None:
    if marker_folder(str(folder)) is not None:
        pytest.skip("the temporary folder lies inside a project")


def test_a_sibling_folder_outside_the_project_is_not_pulled_in(tmp_path, monkeypatch):
    """must not fire: `proj/dice.py` is hot only through `sibling/train.py`, which is not part of
    the project (`proj/pyproject.toml`): naming `proj/dice.py` reports nothing, while checking
    the common parent (which is no project: all of it is one program) does report it."""
    _no_marker_above(tmp_path)
    _write(tmp_path, {
        "proj/pyproject.toml": "[project]\nname = 'proj'\n",
        "proj/dice.py": LOSS_WITH_ITEM,
        "proj/readme_example.py": "print('hello')  # must not fire\n",
        "sibling/train.py": TRAIN_WITH.format(module="proj.dice"),
    })
    monkeypatch.chdir(tmp_path)
    resolver = _resolver(tmp_path)
    assert project_roots(["proj/dice.py"]) == [str(tmp_path / "proj")]
    assert not check_paths(["proj/dice.py"], resolver, use_cache=False, jobs=1).findings
    everything = check_paths(["."], resolver, use_cache=False, jobs=1)
    assert ("proj/dice.py", 6, "SPD201") in {(f.path, f.line, f.code) for f in everything.findings}


def test_a_named_file_outside_any_project_behaves_as_before(tmp_path, monkeypatch):
    """must not fire: a file with no project marker above it: its folder is the program (the
    named files' common folder), never the folder above it, nor the home folder."""
    _no_marker_above(tmp_path)
    _write(tmp_path, {
        "loose/dice.py": LOSS_WITH_ITEM,
        "other/train.py": TRAIN_WITH.format(module="loose.dice"),
    })
    monkeypatch.chdir(tmp_path)
    resolver = _resolver(tmp_path)
    assert project_roots(["loose/dice.py"]) == [str(tmp_path / "loose")]
    assert not check_paths(["loose/dice.py"], resolver, use_cache=False, jobs=1).findings
    monkeypatch.setenv("HOME", str(tmp_path))
    assert project_roots(["loose/dice.py", "other/train.py"]) == []  # their common folder is the home folder: not walked
    assert not check_paths(["loose/dice.py"], resolver, use_cache=False, jobs=1).findings


def test_a_named_file_pulls_in_its_project_and_respects_its_excludes(tmp_path, monkeypatch):
    """The project's `.gitignore` and excludes apply to the program as to `check .`: a training
    script in an ignored folder does not make the named loss hot; one in the project does."""
    _no_marker_above(tmp_path)
    _write(tmp_path, {
        "proj/.gitignore": "scratch/\n",
        "proj/dice.py": LOSS_WITH_ITEM,
        "proj/scratch/train.py": TRAIN_WITH.format(module="dice"),
        "proj/build/train.py": TRAIN_WITH.format(module="dice"),
    })
    (tmp_path / "proj" / ".git").mkdir()
    monkeypatch.chdir(tmp_path / "proj")
    resolver = _resolver(tmp_path)
    assert not check_paths(["dice.py"], resolver, use_cache=False, jobs=1).findings
    assert not check_paths(["."], resolver, use_cache=False, jobs=1).findings
    _write(tmp_path, {"proj/train.py": TRAIN_WITH.format(module="dice")})
    found = {(f.path, f.line, f.code) for f in check_paths(["dice.py"], resolver, use_cache=False, jobs=1).findings}
    assert found == {("dice.py", 6, "SPD201")}


def test_stdin_and_whole_projects_need_no_scope(tmp_path, monkeypatch):
    _write(tmp_path, {"proj/setup.cfg": "[metadata]\nname = proj\n", "proj/a.py": "x = 1\n"})
    monkeypatch.chdir(tmp_path / "proj")
    assert project_roots(["-"]) == []
    assert project_roots(["."]) == [os.path.normpath(str(tmp_path / "proj"))]
    assert project_roots(["a.py", "."]) == [os.path.normpath(str(tmp_path / "proj"))]
