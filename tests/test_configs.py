"""Config files the code reads: readers with positions, composition, edits, diagnostics, runs.

The YAML reader is compared with PyYAML where PyYAML is installed (a test-only comparison:
speedlint itself never needs it). The project fixtures under `fixtures/projects/config_*` are
checked by `test_projects.py`; here are the edge cases and the fix round trip.
"""

from __future__ import annotations

import configparser
import json
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES
from speedlint.analyzer.configs.edit import ConfigEdit, apply_edits, spelling
from speedlint.analyzer.configs.reader import plain, read_config, scalars
from speedlint.analyzer.configs.sources import ConfigView, compose
from speedlint.analyzer.rewrite import fix_paths
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

YAML_CASES = {
    "nested": """\
        # a comment
        model:
          name: resnet50   # trailing comment
          layers: [3, 4, 6, 3]
        data:
          root: '/data/x # not a comment'
          workers: 4
          pin_memory: true
          mean: {r: 0.485, g: 0.456, b: 0.406}
        """,
    "scalars": """\
        a: yes
        b: Off
        c: ~
        d:
        e: 1e-4
        f: 1.0e-4
        g: 0x1F
        h: "tab\\tand \\"quotes\\""
        i: 'it''s'
        j: -3
        k: .inf
        m: +12
        """,
    "sequences": """\
        steps:
        - name: first
          lr: 0.1
        - name: second
          lr: 0.01
        milestones:
          - 30
          - 60
        nested:
          - - 1
            - 2
          - [3, 4]
        empty: []
        """,
    "anchors": """\
        ---
        base: &base
          workers: 2
          pin_memory: false
        train:
          <<: *base
          workers: 8
        eval: *base
        """,
    "block scalar": """\
        description: |
          line one
          line two
        after: 3
        """,
}


def _norm(data):
    if isinstance(data, dict):
        return {str(k): _norm(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_norm(v) for v in data]
    return data


@pytest.mark.parametrize("name", sorted(YAML_CASES))
def test_yaml_reader_reads_what_pyyaml_reads(name):
    yaml = pytest.importorskip("yaml")
    text = textwrap.dedent(YAML_CASES[name])
    doc = read_config("c.yaml", text)
    assert doc.understood, doc.problem
    assert _norm(plain(doc.root)) == _norm(yaml.safe_load(text))
    lines = text.split("\n")
    for keys, scalar in scalars(doc.root):
        if scalar.located and scalar.style not in ("block", "empty"):
            assert lines[scalar.line - 1][scalar.col:scalar.end_col] == scalar.raw, keys


def test_yaml_positions_and_shared_values():
    text = textwrap.dedent(YAML_CASES["anchors"])
    doc = read_config("c.yaml", text)
    root = doc.root
    workers = root.get("train").get("workers")
    assert (workers.value, workers.line, workers.raw, workers.shared) == (8, 7, "8", False)
    # reached through `<<: *base` / `*base`: the anchor's scalar, marked as shared (never edited)
    assert root.get("train").get("pin_memory").shared
    assert root.get("eval").get("workers").line == 3


@pytest.mark.parametrize(
    "text, broken",
    [
        ("a: !!python/name:os.system x\n", False),  # a tag
        ("a: 1\n---\nb: 2\n", False),  # two documents
        ("a: [1,\n  2]\n", False),  # a flow collection over two lines
        ("a: 1\n\tb: 2\n", True),  # a tab in the indentation
        ("a:\n  b: 1\n c: 2\n", True),  # bad indentation
        ('a: "unterminated\n', True),
    ],
)
def test_yaml_not_understood(text, broken):
    doc = read_config("c.yaml", text)
    assert not doc.understood and doc.problem
    assert doc.broken is broken


def test_json_reader_positions():
    text = '{\n  "train": {"workers": 0, "lr": 1e-3},\n  "flags": [true, null]\n}\n'
    doc = read_config("c.json", text)
    assert plain(doc.root) == json.loads(text)
    workers = doc.root.get("train").get("workers")
    assert (workers.line, workers.col, workers.raw) == (2, 23, "0")
    broken = read_config("c.json", '{"a": 1,}')
    assert broken.broken and not broken.understood


def test_toml_reader_positions():
    text = '# top\n[loader]\nworkers = 0  # slow\nname = "a#b"\n[loader.extra]\nx.y = true\n'
    doc = read_config("c.toml", text)
    assert plain(doc.root) == tomllib.loads(text)
    workers = doc.root.get("loader").get("workers")
    assert (workers.line, workers.raw) == (3, "0")
    assert doc.root.get("loader").get("name").raw == '"a#b"'
    assert doc.root.get("loader").get("extra").get("x").get("y").line == 6


def test_ini_reader_positions_and_multiline_values():
    text = "[DEFAULT]\nseed = 1\n[loader]\nworkers = 2\nnames = a\n  b\n"
    doc = read_config("c.ini", text)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    assert plain(doc.root)["loader"] == dict(parser["loader"])
    assert doc.root.get("loader").get("workers").line == 4
    assert not doc.root.get("loader").get("names").located  # continued on the next line
    assert doc.root.get("loader").get("seed").line == 2  # from DEFAULT


def _site(path, doc, keys, kind):
    from speedlint.analyzer.providers.configs import ConfigSite

    node = doc.root
    for k in keys:
        node = node.get(k)
    return ConfigSite(path, node.line, node.col, node.end_col, node.raw, node.style, node.shared, tuple(keys), node.value, kind)


def test_edit_keeps_comments_and_alignment():
    from speedlint.analyzer.configs.edit import value_edit

    text = "data:\n  workers: 0        # per GPU\n  pin_memory: false  # host memory\n"
    doc = read_config("c.yaml", text)
    edits = [value_edit(_site("c.yaml", doc, ["data", "workers"], "yaml"), 4), value_edit(_site("c.yaml", doc, ["data", "pin_memory"], "yaml"), True)]
    new, why = apply_edits("c.yaml", text, edits)
    assert why == ""
    assert new == "data:\n  workers: 4        # per GPU\n  pin_memory: true   # host memory\n"


def test_edit_refuses_a_changed_structure_or_file():
    text = "a: 0\nb: 1\n"
    good = ConfigEdit("c.yaml", 1, 3, 4, "0", "4", ("a",), 4)
    assert apply_edits("c.yaml", text, [good])[0] == "a: 4\nb: 1\n"
    breaking = ConfigEdit("c.yaml", 1, 3, 4, "0", "4\nc: 5", ("a",), 4)
    assert apply_edits("c.yaml", text, [breaking])[0] is None
    stale = ConfigEdit("c.yaml", 1, 3, 4, "7", "4", ("a",), 4)
    assert apply_edits("c.yaml", text, [stale]) == (None, "the file changed since it was checked")
    assert apply_edits("c.yaml", "a: !tag 0\n", [good])[0] is None  # not understood: never rewritten


def test_boolean_spellings_follow_the_file():
    from speedlint.analyzer.providers.configs import ConfigSite

    def site(raw, kind, style="plain"):
        return ConfigSite("c", 1, 0, len(raw), raw, style, False, ("k",), False, kind)

    assert spelling(site("False", "yaml"), True) == "True"
    assert spelling(site("no", "yaml"), True) == "yes"
    assert spelling(site("off", "ini", "ini"), True) == "on"
    assert spelling(site("false", "json", "json"), True) == "true"
    assert spelling(site("'false'", "yaml", "single"), True) is None  # a string the code converts
    assert spelling(site('"0"', "yaml", "double"), 4) == '"4"'


def test_hydra_composition_and_self(tmp_path):
    conf = tmp_path / "conf"
    (conf / "data").mkdir(parents=True)
    (conf / "config.yaml").write_text("defaults:\n  - _self_\n  - data: small\nworkers: 1\ndata:\n  workers: 3\n")
    (conf / "data" / "small.yaml").write_text("workers: 2\n")
    (conf / "data" / "glob.yaml").write_text("# @package _global_\nworkers: 5\n")
    known = {str(p) for p in conf.rglob("*.yaml")}
    view = ConfigView(compose(str(conf / "config.yaml"), known, hydra=True))
    assert view.lookup(("data", "workers")).value == 2  # `_self_` first: the group wins
    assert view.lookup(("workers",)).value == 1
    (conf / "config.yaml").write_text("defaults:\n  - data: glob\nworkers: 1\n")
    view = ConfigView(compose(str(conf / "config.yaml"), known, hydra=True))
    assert view.lookup(("workers",)).value == 1  # no `_self_`: the primary config comes last
    assert view.lookup(("data",)).status == "missing"


# -- whole runs -----------------------------------------------------------------------------------
TRAIN = '''\
import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.load(f"{i}.pt")


def main():
    with open("{config}") as f:
        cfg = yaml.safe_load(f)
    loader = DataLoader(Files(100), batch_size=8, num_workers=cfg["data"].get("workers", 0))
    model = torch.nn.Linear(8, 2).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(model(x.cuda()), y.cuda()).backward()
            opt.step()
'''


def _run(root: Path, monkeypatch, **overrides):
    monkeypatch.chdir(root)
    resolver = SettingsResolver(Overrides(select=("SPD101",), **overrides), isolated=True)
    return check_paths(["."], resolver, use_cache=False, jobs=1)


def _found(result):
    return sorted((Path(f.path).as_posix(), f.line, f.code) for f in result.findings)


def test_the_config_line_is_reported_and_an_unread_config_never(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("data:\n  workers: 1\n")
    (tmp_path / "conf" / "unused.yaml").write_text("data:\n  workers: 0\n  pin_memory: false\n")
    result = _run(tmp_path, monkeypatch)
    assert _found(result) == [("conf/train.yaml", 2, "SPD101")]
    (finding,) = result.findings
    assert finding.related[0][:2] == ("train.py", 21)
    assert not result.diagnostics


def test_config_files_setting_turns_them_off(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("data:\n  workers: 1\n")
    (tmp_path / "speedlint.toml").write_text("config-files = []\n")
    monkeypatch.chdir(tmp_path)
    resolver = SettingsResolver(Overrides(select=("SPD101",)))
    result = check_paths(["."], resolver, use_cache=False, jobs=1)
    # the file is not read: the code's own `.get("workers", 0)` default counts (a config default)
    assert [(f.path, f.line) for f in result.findings] == [("train.py", 21)]


def test_missing_config_file_the_default_counts_and_a_warning(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/missing.yaml"))
    result = _run(tmp_path, monkeypatch)
    assert _found(result) == [("train.py", 21, "SPD101")]
    assert "falls back to 0" in result.findings[0].message
    (diag,) = result.diagnostics
    assert diag.kind == "warning" and diag.path == "train.py" and "does not exist" in diag.message


def test_broken_config_file_is_a_warning_not_a_crash(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("data:\n\tworkers: 1\n")
    result = _run(tmp_path, monkeypatch)
    # nothing is known of the file: the lookup says nothing, the `.get` default still counts
    assert _found(result) == [("train.py", 21, "SPD101")]
    assert [(Path(d.path).as_posix(), d.kind) for d in result.diagnostics] == [("conf/train.yaml", "warning")]
    assert "cannot read" in result.diagnostics[0].message


def test_value_of_the_wrong_type_is_a_warning(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("data:\n  workers: four\n")
    result = _run(tmp_path, monkeypatch)
    assert _found(result) == []
    (diag,) = result.diagnostics
    assert diag.kind == "warning" and "needs a whole number" in diag.message


def test_noqa_in_the_config_file_suppresses(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("data:\n  workers: 1  # noqa: SPD101\n")
    assert _found(_run(tmp_path, monkeypatch)) == []


def test_value_through_an_alias_is_reported_but_not_fixed(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("common: &c\n  workers: 1\ndata: *c\n")
    result = _run(tmp_path, monkeypatch, unsafe_fixes=True)
    (finding,) = result.findings
    assert (finding.path, finding.line) == (str(Path("conf/train.yaml")), 2)
    assert not finding.fix.applicable  # editing it would change `common` too


def test_text_json_and_sarif_show_the_config_line(tmp_path):
    import os
    import subprocess

    project = tmp_path / "p"
    shutil.copytree(FIXTURES / "projects" / "config_yaml", project)
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    run = lambda *a: subprocess.run([sys.executable, "-m", "speedlint", "check", ".", "--isolated", "--no-cache", *a], cwd=project, capture_output=True, text=True, env=env)  # noqa: E731
    text = run().stdout
    assert "configs/train.yaml:5:12" in text and "| " in text and "workers: 0" in text
    doc = json.loads(run("--output-format", "json").stdout)
    (item,) = [f for f in doc["findings"] if f["code"] == "SPD101"]
    assert item["filename"] == "configs/train.yaml" and item["location"]["row"] == 5
    assert item["chain"][0]["filename"] == "data.py" and item["chain"][0]["location"]["row"] == 21
    assert item["fix"]["edits"][0]["content"] == "4"
    sarif = json.loads(run("--output-format", "sarif").stdout)
    (res,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "SPD101"]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "configs/train.yaml"
    assert res["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "data.py"


def _load(path: Path):
    if path.suffix in (".yaml", ".yml"):
        yaml = pytest.importorskip("yaml")
        return yaml.safe_load(path.read_text())
    if path.suffix == ".json":
        return json.loads(path.read_text())
    if path.suffix == ".toml":
        return tomllib.loads(path.read_text())
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(path.read_text())
    return {s: dict(parser[s]) for s in parser.sections()}


def _diff(a, b, prefix=()):
    """Key paths where two loaded configs differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), prefix
        return [d for k in a for d in _diff(a[k], b[k], prefix + (k,))]
    if isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), prefix
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, prefix + (i,))]
    return [] if a == b and type(a) is type(b) else [prefix]


@pytest.mark.parametrize("name", ["config_yaml", "config_hydra", "config_formats"])
def test_fix_round_trip_on_the_config_projects(name, tmp_path, monkeypatch):
    """`fix --apply --unsafe-fixes`: Python files still compile, config files load (with the real
    parsers) to the same structure apart from the values reported, a second run changes nothing."""
    project = tmp_path / name
    shutil.copytree(FIXTURES / "projects" / name, project)
    before = {p: p.read_text() for p in project.rglob("*") if p.is_file()}
    monkeypatch.chdir(project)
    resolver = SettingsResolver(Overrides(select=("ALL",), preview=True, unsafe_fixes=True), isolated=True)
    reported = {(Path(f.path).as_posix(), f.line) for f in check_paths(["."], resolver, use_cache=False, jobs=1).findings}
    run = fix_paths(["."], resolver, apply=True)
    assert run.written and not [d for d in run.diagnostics if d.kind != "warning"]
    for path, old in before.items():
        new = path.read_text()
        if new == old:
            continue
        rel = path.relative_to(project).as_posix()
        if path.suffix == ".py":
            compile(new, str(path), "exec")
            continue
        changed = _diff(_loaded(old, path), _load(path))
        edited_lines = {i + 1 for i, (x, y) in enumerate(zip(old.splitlines(), new.splitlines())) if x != y}
        assert changed and len(changed) == len(edited_lines), (rel, changed)
        assert {(rel, line) for line in edited_lines} <= reported
    again = fix_paths(["."], resolver, apply=True)
    assert not again.written and not again.changed


def _loaded(text: str, path: Path):
    copy = path.with_name("before-" + path.name)
    copy.write_text(text)
    try:
        return _load(copy)
    finally:
        copy.unlink()


# -- what other rules can ask (SPD301, SPD701) -----------------------------------------------------
def _context(project: Path, name: str):
    """The `FileContext` of one file of a project, with what the whole program says about it."""
    import libcst as cst

    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.configs.discovery import DEFAULT_CONFIG_GLOBS
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.program.facts import link
    from speedlint.analyzer.program.summary import summarize

    files = [(str(p), p.relative_to(project).as_posix(), summarize(p.read_text())) for p in sorted(project.rglob("*.py"))]
    configs = [str(p) for g in DEFAULT_CONFIG_GLOBS for p in project.rglob(g)]
    seeds = link(files, configs)
    text = (project / name).read_text()
    return FileContext(name, text, cst.parse_module(text), Settings(), seeds.get(name))


def test_toggles_resolve_into_the_config_file(monkeypatch):
    import libcst as cst

    project = FIXTURES / "projects" / "config_toggles"
    monkeypatch.chdir(project)
    ctx = _context(project, "train.py")
    toggles = {}
    for node in ctx.torch.calls:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "enabled":
                toggles["amp"] = ctx.config_values.resolve(arg.value)
    assign = next(
        n for n in ctx.module.body[-1].body.body
        if isinstance(n, cst.SimpleStatementLine) and "deterministic" in ctx.code(n)
    )
    toggles["deterministic"] = ctx.config_values.resolve(assign.body[0].value)
    assert toggles["amp"].options == (False,) and toggles["amp"].kind == "config"
    assert [(Path(s.path).name, s.line, s.name) for s in toggles["amp"].config] == [("train.yaml", 3, "train.amp")]
    assert toggles["deterministic"].options == (True,)
    assert toggles["deterministic"].config[0].line == 4
    assert ctx.values.resolve(assign.body[0].value) is None  # the plain tracer does not read files


def test_precision_and_cudnn_toggles_are_reported_on_the_config_lines(monkeypatch):
    from test_projects import _expected

    project = FIXTURES / "projects" / "config_toggles"
    monkeypatch.chdir(project)
    resolver = SettingsResolver(Overrides(select=("SPD301", "SPD701")), isolated=True)
    found = {(Path(f.path).as_posix(), f.line, f.code) for f in check_paths(["."], resolver, use_cache=False, jobs=1).findings}
    assert found == _expected(project)


def test_cached_findings_keep_their_config_file_and_follow_its_edits(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(TRAIN.replace("{config}", "conf/train.yaml"))
    (tmp_path / "conf").mkdir()
    config = tmp_path / "conf" / "train.yaml"
    config.write_text("data:\n  workers: 1\n")
    monkeypatch.chdir(tmp_path)
    resolver = SettingsResolver(Overrides(select=("SPD101",)), isolated=True)
    first = _found(check_paths(["."], resolver, use_cache=True, jobs=1))
    again = _found(check_paths(["."], resolver, use_cache=True, jobs=1))  # from the cache
    assert first == again == [("conf/train.yaml", 2, "SPD101")]
    config.write_text("data:\n  workers: 8\n")
    assert _found(check_paths(["."], resolver, use_cache=True, jobs=1)) == []


ARGS = '''\
import argparse

import torch
import yaml
from torch.utils.data import DataLoader, Dataset


class Files(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.load(f"{i}.pt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="conf/train.yaml")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--eval-workers", type=int, default=1)
    args = parser.parse_args()
    with open(args.config) as f:
        cfg = yaml.safe_load(f)
    {fill}
    train = DataLoader(Files(), batch_size=8, num_workers=args.workers)
    evaluation = DataLoader(Files(), batch_size=8, num_workers=args.eval_workers)
    return train, evaluation
'''

FILLS = {
    "vars": "vars(args).update(cfg)",
    "dict": "args.__dict__.update(cfg)",
    "setattr": "for k, v in cfg.items():\n        setattr(args, k, v)",
}


@pytest.mark.parametrize("fill", sorted(FILLS))
def test_args_filled_from_the_config_file(fill, tmp_path, monkeypatch):
    """Keys of the file override the argparse defaults; a key it lacks keeps its default."""
    text = ARGS.replace("{fill}", FILLS[fill])
    (tmp_path / "train.py").write_text(text)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "train.yaml").write_text("workers: 0\nlr: 0.1\n")
    evaluation = next(i for i, line in enumerate(text.splitlines(), start=1) if "evaluation = " in line)
    # `workers` comes from the file (0); `eval_workers` keeps its argparse default (1)
    assert _found(_run(tmp_path, monkeypatch)) == [("conf/train.yaml", 1, "SPD101"), ("train.py", evaluation, "SPD101")]
    (tmp_path / "conf" / "train.yaml").write_text("eval_workers: 4\n")
    assert _found(_run(tmp_path, monkeypatch)) == []  # 8 by default, 4 from the file


def test_cached_finding_fields_end_where_the_config_path_is_kept():
    """The cache keeps a config finding's file after the finding's own fields: adding a field to
    `finding_to_json` must move that slot too (a notebook's cell fields once collided with it)."""
    from speedlint.analyzer import cache
    from speedlint.analyzer.rule import Finding, Impact

    f = Finding("SPD101", "x", "m", "train.py", 1, 1, 1, 2, Impact("w", "n", "t"), cell=3, cell_offset=7)
    assert len(cache.finding_to_json(f)) == cache._ELSEWHERE
    back = cache.finding_from_json(cache.finding_to_json(f) + ["/tmp/conf.yaml"], "conf.yaml")
    assert (back.cell, back.cell_offset, back.path) == (3, 7, "conf.yaml")
