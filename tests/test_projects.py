"""Multi-file fixture projects (`fixtures/projects/<scenario>/`), checked as a whole.

Each project is checked the way `speedlint check .` checks it (every rule, preview included, no
config file, no cache; the torch version a `requirements.txt` of the project declares is its
target, as `check` reads it). The findings must be exactly the `# expect: CODE` markers in its files,
wherever they sit: the whole-program analysis follows the training step into other modules, and
a finding sits where the cost occurs. Each project also holds code that must not fire (marked
with a `# must not fire` comment): a new project needs no new test code.

Training config files next to the code carry markers too: a `# expect: CODE` comment on the
line of a YAML or TOML file. INI files have no comments at the end of a line (configparser reads
them as part of the value): a `; expect: CODE` (or `#`) comment line there marks the line after
it. JSON has no comments at all: a sidecar file `<name>.json.expect` next to `<name>.json` lists
`LINE: CODE[, CODE]` per line (`#` starts a comment there).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Set, Tuple

import pytest

from conftest import FIXTURES
from fixture_support import EXPECT
from speedlint.analyzer.config import declared_torch_range
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths

PROJECTS = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir())
MUST_NOT_FIRE = re.compile(r"#\s*must not fire", re.I)


#: Config files whose comments may carry `# expect:` markers.
MARKED_CONFIGS = ("*.yaml", "*.yml", "*.toml", "*.ini", "*.cfg", "*.conf")
INI_EXPECT = re.compile(r";\s*expect:\s*(?P<codes>SPD\d{3}(?:\s*,\s*SPD\d{3})*)")
SIDECAR = re.compile(r"^\s*(?P<line>\d+)\s*:\s*(?P<codes>SPD\d{3}(?:\s*,\s*SPD\d{3})*)\s*(?:#.*)?$")


def _expected(project: Path) -> Set[Tuple[str, int, str]]:
    found = set()
    files = sorted(project.rglob("*.py")) + sorted(p for g in MARKED_CONFIGS for p in project.rglob(g))
    for path in files:
        rel = path.relative_to(project).as_posix()
        ini = path.suffix in (".ini", ".cfg", ".conf")
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            m = (INI_EXPECT.search(line) or EXPECT.search(line)) if ini else EXPECT.search(line)
            if m:
                for code in re.split(r"\s*,\s*", m.group("codes")):
                    found.add((rel, lineno + 1 if ini else lineno, code))  # INI: the line after the comment
    for sidecar in sorted(project.rglob("*.json.expect")):  # JSON has no comments
        rel = sidecar.relative_to(project).as_posix()[: -len(".expect")]
        for line in sidecar.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = SIDECAR.match(line)
            assert m, f"{sidecar}: expected `LINE: CODE`, got {line!r}"
            for code in re.split(r"\s*,\s*", m.group("codes")):
                found.add((rel, int(m.group("line")), code))
    return found


def _check(project: Path, monkeypatch, use_cache: bool = False, jobs: int = 1):
    monkeypatch.chdir(project)
    target, _ = declared_torch_range(project)
    resolver = SettingsResolver(Overrides(select=("ALL",), preview=True, target_torch_version=target), isolated=True)
    return check_paths(["."], resolver, use_cache=use_cache, jobs=jobs)


def _found(result) -> Set[Tuple[str, int, str]]:
    return {(Path(f.path).as_posix(), f.line, f.code) for f in result.findings}


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_project_findings(project, monkeypatch):
    result = _check(project, monkeypatch)
    assert not result.diagnostics, result.diagnostics
    expected, found = _expected(project), _found(result)
    assert not sorted(expected - found), f"expected findings not reported: {sorted(expected - found)}"
    assert not sorted(found - expected), f"findings without an `# expect:` marker: {sorted(found - expected)}"


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_project_has_positives_and_must_not_fire_cases(project):
    texts = [p.read_text(encoding="utf-8") for p in project.rglob("*.py")]
    assert any(MUST_NOT_FIRE.search(t) for t in texts), "a project needs must-not-fire code"
    if project.name != "cycles_and_dynamic_imports":  # that one is all must-not-fire
        assert _expected(project), "a project needs `# expect:` markers"


def test_projects_cover_every_category():
    codes = {code for p in PROJECTS for _, _, code in _expected(p)}
    assert {"SPD201", "SPD301", "SPD401", "SPD402", "SPD404"} <= codes
    assert {code[:4] for code in codes} >= {"SPD1", "SPD2", "SPD3", "SPD4", "SPD5", "SPD6", "SPD7"}  # every category


def test_findings_in_a_callee_name_the_chain(monkeypatch):
    project = FIXTURES / "projects" / "loss_in_another_module"
    result = _check(project, monkeypatch)
    (loss,) = [f for f in result.findings if f.path.endswith("focal.py")]
    assert [(p, line) for p, line, _ in loss.related] == [("train.py", 33), ("train.py", 24)]
    assert loss.related[-1][2] == "self.criterion(...)"
    assert "train.py:24 `self.criterion(...)` -> losses/focal.py:15" in loss.message
    assert "on every training step" in loss.message


def _cli(*args, cwd):
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "speedlint", *args], cwd=cwd, capture_output=True, text=True, env=env)


def test_json_and_sarif_carry_the_chain(tmp_path):
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "loss_in_another_module", project)
    r = _cli("check", ".", "--isolated", "--no-cache", "--output-format", "json", cwd=project)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    (item,) = [f for f in doc["findings"] if f["filename"].endswith("focal.py")]
    assert item["chain"][0] == {"filename": "train.py", "location": {"row": 33}, "call": "self.train_step(...)"}
    (local,) = [f for f in doc["findings"] if f["filename"].endswith("net.py")]
    assert local["chain"][-1]["call"] == "self.model(...)"
    r = _cli("check", ".", "--isolated", "--no-cache", "--output-format", "sarif", cwd=project)
    sarif = json.loads(r.stdout)
    (res,) = [x for x in sarif["runs"][0]["results"] if x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("focal.py")]
    related = res["relatedLocations"]
    assert [loc["physicalLocation"]["region"]["startLine"] for loc in related] == [33, 24]
    assert related[0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"


def test_editing_the_caller_rechecks_the_callee(tmp_path, monkeypatch):
    """A cached finding in a loss module goes away when the training script stops calling it
    every step, although the loss module itself did not change."""
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "loss_in_another_module", project)
    first = _found(_check(project, monkeypatch, use_cache=True))
    assert ("losses/focal.py", 15, "SPD201") in first
    again = _found(_check(project, monkeypatch, use_cache=True))
    assert again == first  # answered from the cache
    train = project / "train.py"
    text = train.read_text(encoding="utf-8")
    train.write_text(text.replace("loss = self.criterion(out, y)", "loss = out.float().mean()"), encoding="utf-8")
    after = _found(_check(project, monkeypatch, use_cache=True))
    assert ("losses/focal.py", 15, "SPD201") not in after
    assert ("models/net.py", 12, "SPD201") in after


def test_yacs_defaults_stay_unknown_beside_a_yaml_file_not_read_as_a_tree(tmp_path, monkeypatch):
    """A YAML config of the run that cannot be read as a tree may set any key of a yacs config:
    the defaults say nothing then (and the same project without it reports them)."""
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "yacs_config", project)
    reported = {("data/build.py", 6, "SPD103"), ("data/build.py", 17, "SPD101")}  # SPD101 on its `num_workers=` line
    assert reported <= _found(_check(project, monkeypatch))
    (project / "experiment.yaml").write_text("MODEL:\n  NAME: [swin\n", encoding="utf-8")  # (no worker key in sight)
    assert not reported & _found(_check(project, monkeypatch))


def test_parallel_run_matches_serial(monkeypatch):
    """The same findings whoever analyses the files (in-process or the worker pool)."""
    import speedlint.analyzer.parallel as parallel

    monkeypatch.setattr(parallel, "MIN_PARALLEL_FILES", 1)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 1)
    for project in PROJECTS:
        serial = _found(_check(project, monkeypatch, jobs=1))
        pooled = _found(_check(project, monkeypatch, jobs=2))
        assert pooled == serial, project.name


def test_same_report_whatever_the_hash_seed(tmp_path):
    """Chains and cache keys do not depend on set iteration order (PYTHONHASHSEED)."""
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects", project)
    outputs = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, NO_COLOR="1", PYTHONHASHSEED=seed)
        r = subprocess.run(
            [sys.executable, "-m", "speedlint", "check", ".", "--isolated", "--no-cache", "--preview", "--select", "ALL", "--output-format", "json"],
            cwd=project, capture_output=True, text=True, env=env,
        )
        assert r.returncode == 1, r.stderr
        outputs.add(r.stdout)
    assert len(outputs) == 1


def test_program_linked_in_a_child_process_matches(tmp_path, monkeypatch):
    """A large tree is summarised and linked in a child process (its memory goes back to the
    system when it exits): the same findings and chains as in-process, and what the child learnt
    is in the cache for the next run."""
    import speedlint.analyzer.parallel as parallel

    monkeypatch.setattr(parallel, "MIN_PARALLEL_FILES", 1)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 1)
    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "loss_in_another_module", project)
    here = _check(project, monkeypatch, jobs=2)
    monkeypatch.setattr(parallel, "MIN_LINK_APART_FILES", 1)
    calls = []
    real = parallel._in_child
    monkeypatch.setattr(parallel, "_in_child", lambda *a: calls.append(real(*a)) or calls[-1])
    apart = _check(project, monkeypatch, jobs=2)
    assert calls and calls[0] is not None, "the program phase did not run in a child, or failed there"
    assert _found(apart) == _found(here) and ("losses/focal.py", 15, "SPD201") in _found(apart)
    assert [f.message for f in apart.findings] == [f.message for f in here.findings]  # chains included
    first = _check(project, monkeypatch, jobs=2, use_cache=True)
    cache = project / ".speedlint_cache"
    assert list(cache.glob("summaries-*.json")) and list(cache.glob("program-*.json"))
    calls.clear()
    again = _check(project, monkeypatch, jobs=2, use_cache=True)
    assert not calls  # the link came from the cache
    assert _found(again) == _found(first) == _found(here)


def _family(subclasses: int) -> str:
    lines = [
        "class Base:",
        "    def fit(self, loader, opt):",
        "        for x, y in loader:",
        "            loss = self.loss(x, y)",
        "            loss.backward()",
        "            opt.step()",
        "    def loss(self, x, y):",
        "        return x.sum()",
    ]
    for k in range(subclasses):
        lines += [f"class Sub{k}(Base):", "    def loss(self, x, y):", "        return x.sum() * y.item()"]
    return "\n".join(lines) + "\n"


def test_self_reaches_the_overrides_of_a_small_family_only():
    """`self.loss(...)` in a training step runs the subclasses' overrides too; a family larger
    than `Program.MAX_SUBCLASSES` (a library base such as `PreTrainedModel`) is taken as the base
    alone, so that its methods are not evaluated once per subclass."""
    from speedlint.analyzer.program.facts import link
    from speedlint.analyzer.program.link import Program
    from speedlint.analyzer.program.summary import summarize

    small = link([("/p/train.py", "train.py", summarize(_family(3)))])["train.py"]
    assert sorted(small.functions) == [1, 2, 3, 4]  # Base.loss and the three overrides (source order)
    large = Program.MAX_SUBCLASSES + 1
    big = link([("/p/train.py", "train.py", summarize(_family(large)))])["train.py"]
    assert sorted(big.functions) == [1]  # Base.loss only
