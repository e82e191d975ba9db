"""Jupyter notebooks: reading (magics, syntax errors, formats), positions per cell in every output
format, fixes written back into the changed cells only, the whole program through a notebook,
the cache, and `verify` of a notebook.

The fixtures in `fixtures/notebooks/` are nbformat 4.5 files as Jupyter writes them (indent 1,
sorted keys, non-ASCII kept, a trailing newline); `# expect: CODE` in a cell marks a finding on
that line of that cell, `# must not fire` marks IPython lines that look like slow code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from speedlint.analyzer.notebook import Notebook, NotebookError
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "fixtures" / "notebooks"
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"
EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*)")


def _doc(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def _write_nb(path: Path, cells, metadata=None, nbformat=4) -> Path:
    """A notebook as Jupyter writes it; `cells` are (cell_type, source) pairs."""
    doc = {
        "cells": [
            {"cell_type": kind, "id": f"cell{i}", "metadata": {}, "source": src.splitlines(True),
             **({"execution_count": None, "outputs": []} if kind == "code" else {})}
            for i, (kind, src) in enumerate(cells)
        ],
        "metadata": metadata if metadata is not None else {"language_info": {"name": "python"}},
        "nbformat": nbformat,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _expected(folder: Path) -> set:
    """(path relative to folder, cell or None, line, code) for every `# expect:` marker."""
    out = set()
    for path in sorted(folder.rglob("*.ipynb")):
        if path.name.endswith(".fixed.ipynb"):
            continue
        for index, cell in enumerate(_doc(path)["cells"]):
            if cell["cell_type"] != "code":
                continue
            for n, line in enumerate(_source(cell).splitlines(), start=1):
                m = EXPECT.search(line)
                if m:
                    for code in re.split(r"\s*,\s*", m.group(1)):
                        out.add((path.relative_to(folder).as_posix(), index + 1, n, code))
    for path in sorted(folder.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            m = EXPECT.search(line)
            if m:
                for code in re.split(r"\s*,\s*", m.group(1)):
                    out.add((path.relative_to(folder).as_posix(), None, n, code))
    return out


def _check(paths, cwd, monkeypatch, **overrides):
    monkeypatch.chdir(cwd)
    resolver = SettingsResolver(Overrides(**overrides), isolated=True)
    return check_paths([str(p) for p in paths], resolver, use_cache=False, jobs=1)


@pytest.fixture
def nbdir(tmp_path):
    """A copy of fixtures/notebooks (tests write in it)."""
    target = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, target, ignore=shutil.ignore_patterns("*.fixed.ipynb"))
    return target


# -- reading -------------------------------------------------------------------------------------
def test_findings_land_on_the_expected_cells_and_lines(nbdir, monkeypatch):
    """Every `# expect:` marker is found, nothing else is: the magics that look like slow code
    (`!python -c "import gc; gc.collect()"`, a `%%bash` cell, `%time _ = gc.collect()`) do not
    fire; findings after a CRLF cell, an empty cell and a cell with a syntax error keep their
    places; the body of a `%%time` cell is checked."""
    result = _check(["."], nbdir, monkeypatch)
    got = {(f.path, f.cell, f.line, f.code) for f in result.findings}
    assert got == _expected(nbdir)
    assert any(cell == 7 for path, cell, _, _ in got if path == "train.ipynb")  # the `%%time` cell


def test_a_cell_with_a_syntax_error_is_reported_and_the_others_are_checked(nbdir, monkeypatch):
    result = _check(["train.ipynb"], nbdir, monkeypatch)
    (diag,) = result.diagnostics
    assert diag.path == "train.ipynb" and diag.kind == "error"
    assert diag.message.startswith("cell 8:3:") and "syntax error" in diag.message
    assert "the other cells are checked" in diag.message
    cells = {f.cell for f in result.findings}
    assert {5, 7, 9} <= cells  # before and after the broken cell


def test_ipython_lines_are_recognised_only_where_ipython_sees_them():
    cells = [
        ("code", "%matplotlib inline\nx = 1\n!ls -la\nfiles = !ls\na, b = %time f()\nobj.attr?\n??obj\n/print 1\n"),
        ("code", "s = '''\n%not a magic: inside a string\n!neither\n'''\nt = f(\n    1)\n"),
        ("code", "for i in range(3):\n    %time step(i)\n    !echo \\\n        continued\n    y = i % 2\n"),
        ("code", "%%bash\necho hi\n"),
        ("code", "\n%%time\nz = 2\n"),
        ("code", "get_ipython().run_line_magic('time', 'f()')\n"),
    ]
    nb = Notebook.parse(json.dumps({"cells": [{"cell_type": k, "source": s} for k, s in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode())
    first, strings, loop, bash, timed, plain = nb.cells
    assert sorted(first.masked) == [0, 2, 3, 4, 5, 6, 7] and first.python
    assert strings.masked == {} and strings.python  # `%` and `!` inside a string are text
    assert sorted(loop.masked) == [1, 2, 3] and loop.masked[3] == "    pass"  # a continuation line
    assert not bash.python and bash.magic == "bash"
    assert timed.python and timed.head == 1 and sorted(timed.masked) == [1]
    assert plain.masked == {} and plain.python  # plain Python, analysed as such
    # the analysed text keeps every line (so positions map back) and parses
    compile(nb.text, "<nb>", "exec")
    assert "echo hi" not in nb.text and "!ls" not in nb.text and "%time" not in nb.text
    assert "get_ipython().run_line_magic('time', 'f()')" in nb.text
    assert nb.cell_of(first.start + 2) == (first, 3)


def test_invalid_notebooks_are_per_file_errors_and_the_run_goes_on(tmp_path, monkeypatch):
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    _write_nb(tmp_path / "old.ipynb", [("code", "import gc\n")], nbformat=3)
    (tmp_path / "list.ipynb").write_text("[1, 2]\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(
        "import gc\nimport torch\n\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n    gc.collect()\n",
        encoding="utf-8",
    )
    result = _check(["."], tmp_path, monkeypatch)
    errors = {d.path: d.message for d in result.diagnostics}
    assert errors["broken.ipynb"].startswith("not a Jupyter notebook: invalid JSON at line 1")
    assert "nbformat 3" in errors["old.ipynb"] and "nbformat 4 notebooks only" in errors["old.ipynb"]
    assert errors["list.ipynb"].startswith("not a Jupyter notebook")
    assert [f.code for f in result.findings] == ["SPD401"]  # the other file is still checked


def test_a_notebook_of_another_language_is_not_read_as_python(tmp_path, monkeypatch):
    _write_nb(tmp_path / "r.ipynb", [("code", "library(torch)\nx <- 1\n")], metadata={"kernelspec": {"language": "R", "name": "ir"}})
    result = _check(["r.ipynb"], tmp_path, monkeypatch)
    assert result.findings == [] and result.diagnostics == []


def test_notebooks_are_discovered_and_excludes_apply(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "nb").mkdir()
    (tmp_path / "scratch").mkdir()
    body = [("code", "import gc\nfor x in loader:\n    model(x).sum().backward()\n    opt.step()\n    gc.collect()\n")]
    _write_nb(tmp_path / "nb" / "a.ipynb", body)
    _write_nb(tmp_path / "scratch" / "b.ipynb", body)
    _write_nb(tmp_path / "ignored.ipynb", body)
    (tmp_path / ".gitignore").write_text("ignored.ipynb\n", encoding="utf-8")
    result = _check(["."], tmp_path, monkeypatch, extend_exclude=("scratch",))
    assert sorted({f.path for f in result.findings}) == ["nb/a.ipynb"]
    result = _check(["ignored.ipynb"], tmp_path, monkeypatch)  # named explicitly: checked
    assert {f.path for f in result.findings} == {"ignored.ipynb"}


# -- the whole program -----------------------------------------------------------------------------
def test_a_notebook_drives_a_loss_in_a_sibling_module(nbdir, monkeypatch):
    result = _check(["project"], nbdir, monkeypatch)
    (item,) = [f for f in result.findings if f.path.endswith("losses.py")]
    assert item.code == "SPD201" and item.cell is None and item.line == 14
    assert item.related == (("project/train.ipynb", 4, "criterion(...)", 4),)  # cell 4, line 4
    assert "project/train.ipynb:cell 4:4 `criterion(...)` -> project/losses.py:14" in item.message
    (mean,) = [i for i, line in enumerate((nbdir / "project" / "losses.py").read_text().splitlines(), 1) if "def mean" in line]
    assert not [f for f in result.findings if f.path.endswith("losses.py") and f.line > mean]


def test_a_chain_that_ends_in_a_notebook_is_placed_in_its_cell(tmp_path, monkeypatch):
    """The notebook's own function is made hot by a loop in another module: the chain's last
    step (the finding's own line) is named by cell too."""
    (tmp_path / "trainer.py").write_text(
        "def fit(model, loader, opt):\n"
        "    for x in loader:\n"
        "        loss = model(x)\n"
        "        loss.backward()\n"
        "        opt.step()\n",
        encoding="utf-8",
    )
    _write_nb(tmp_path / "nb.ipynb", [
        ("markdown", "Notes\n"),
        ("code", "import torch\nfrom trainer import fit\n"),
        ("code", "class Net(torch.nn.Module):\n    def forward(self, x):\n        out = x.sum()\n        print(out.item())\n        return out\n"),
        ("code", "def main(loader, opt):\n    fit(Net().cuda(), loader, opt)\n"),
    ])
    result = _check(["."], tmp_path, monkeypatch, select=("SPD201",))
    (item,) = result.findings
    assert (item.path, item.cell, item.line) == ("nb.ipynb", 3, 4)
    assert item.message.endswith("-> nb.ipynb:cell 3:4)"), item.message


# -- output formats ------------------------------------------------------------------------------
def test_concise_and_full_name_the_cell(nbdir, cli):
    r = cli("check", "train.ipynb", "--isolated", "--no-cache", "--output-format", "concise", cwd=nbdir)
    assert r.returncode == 1, r.stderr
    assert "train.ipynb:cell 7:9:9: SPD401 " in r.stdout
    assert "train.ipynb: error: cell 8:3:" in r.stdout
    r = cli("check", "train.ipynb", "--isolated", "--no-cache", env={"NO_COLOR": "1"}, cwd=nbdir)
    assert "train.ipynb:cell 7:9:9  SPD401" in r.stdout
    assert "    |         gc.collect()  # expect: SPD401" in r.stdout  # the cell's line, not another


def test_json_carries_the_cell_and_lines_within_it(nbdir, cli):
    r = cli("check", ".", "--isolated", "--no-cache", "--output-format", "json", cwd=nbdir)
    doc = json.loads(r.stdout)
    (item,) = [f for f in doc["findings"] if f["filename"] == "train.ipynb" and f["code"] == "SPD401"]
    assert item["cell"] == 7 and item["location"] == {"row": 9, "column": 9}
    assert item["fix"]["edits"][0]["location"]["row"] == 9
    (loss,) = [f for f in doc["findings"] if f["filename"].endswith("losses.py")]
    assert "cell" not in loss  # a module: no cell
    assert loss["chain"] == [{"filename": "project/train.ipynb", "location": {"row": 4}, "call": "criterion(...)", "cell": 4}]
    (err,) = doc["errors"]
    assert err["filename"] == "train.ipynb" and err["message"].startswith("cell 8:3:")


def test_sarif_regions_are_relative_to_the_cell_and_validate(nbdir, cli):
    jsonschema = pytest.importorskip("jsonschema")
    r = cli("check", ".", "--isolated", "--no-cache", "--output-format", "sarif", cwd=nbdir)
    doc = json.loads(r.stdout)
    validator = jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert not list(validator.iter_errors(doc))
    results = doc["runs"][0]["results"]
    (gc_result,) = [x for x in results if x["ruleId"] == "SPD401" and x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.ipynb"]
    loc = gc_result["locations"][0]
    assert loc["physicalLocation"]["region"]["startLine"] == 9
    assert loc["logicalLocations"] == [{"name": "cell 7", "fullyQualifiedName": "train.ipynb:cell 7", "kind": "notebookCell"}]
    assert loc["properties"] == {"cell": 7}
    assert gc_result["message"]["text"].startswith("cell 7:9:9: ")
    (loss,) = [x for x in results if x["ruleId"] == "SPD201"]
    (hop,) = loss["relatedLocations"]
    assert hop["physicalLocation"]["region"]["startLine"] == 4 and hop["properties"] == {"cell": 4}


def test_github_annotations_name_the_cell_on_the_file(nbdir, cli):
    r = cli("check", "train.ipynb", "--isolated", "--no-cache", "--output-format", "github", cwd=nbdir)
    (line,) = [x for x in r.stdout.splitlines() if "SPD401" in x]
    # no `line=`: GitHub would pin it to that line of the file's JSON, not of the cell
    assert line.startswith("::warning file=train.ipynb,title=speedlint SPD401 (gc-collect-in-hot-path)::cell 7:9:9: SPD401 ")


def test_baseline_keys_notebook_findings_on_their_content(nbdir, cli):
    r = cli("check", "train.ipynb", "--isolated", "--no-cache", "--write-baseline", "base.json", cwd=nbdir)
    assert r.returncode == 0, r.stderr
    entries = json.loads((nbdir / "base.json").read_text())["findings"]
    assert {"code": "SPD401", "name": "gc-collect-in-hot-path", "path": "train.ipynb", "content": "gc.collect()", "count": 1} in entries
    # lines move: a new cell on top, lines added in the training cell; the baseline still holds
    doc = _doc(nbdir / "train.ipynb")
    doc["cells"].insert(1, {"cell_type": "code", "execution_count": None, "id": "new0", "metadata": {}, "outputs": [], "source": ["seed = 0\n"]})
    training = doc["cells"][7]
    training["source"][1:1] = ["# warm-up\n", "\n"]
    (nbdir / "train.ipynb").write_text(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    r = cli("check", "train.ipynb", "--isolated", "--no-cache", "--baseline", "base.json", "--output-format", "concise", cwd=nbdir)
    assert [x for x in r.stdout.splitlines() if "SPD" in x] == [], r.stdout
    # a new slow line is new
    training["source"].insert(5, "        torch.cuda.empty_cache()\n")
    (nbdir / "train.ipynb").write_text(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    r = cli("check", "train.ipynb", "--isolated", "--no-cache", "--baseline", "base.json", "--output-format", "concise", cwd=nbdir)
    new = [x for x in r.stdout.splitlines() if "SPD" in x]
    assert len(new) == 1 and new[0].startswith("train.ipynb:cell 8:6:9: SPD402"), r.stdout


# -- fix -----------------------------------------------------------------------------------------
def test_fix_previews_a_diff_per_cell(nbdir, cli):
    before = (nbdir / "train.ipynb").read_bytes()
    r = cli("fix", "train.ipynb", "--isolated", cwd=nbdir)
    assert r.returncode == 1, r.stderr
    assert "--- a/train.ipynb:cell 7\n+++ b/train.ipynb:cell 7\n" in r.stdout
    assert "-        gc.collect()  # expect: SPD401\n" in r.stdout
    assert "--- a/train.ipynb:cell 5\n" in r.stdout and "pin_memory=torch.cuda.is_available()" in r.stdout
    assert "%%bash" not in r.stdout and "!python" not in r.stdout
    assert (nbdir / "train.ipynb").read_bytes() == before  # a preview writes nothing


def test_fix_apply_writes_only_the_changed_cells_sources(nbdir, cli, update_goldens):
    path = nbdir / "train.ipynb"
    original = _doc(path)
    r = cli("fix", "train.ipynb", "--apply", "--isolated", cwd=nbdir)
    assert r.returncode == 0, r.stderr
    golden = NOTEBOOKS / "train.fixed.ipynb"
    if update_goldens:
        golden.write_bytes(path.read_bytes())
    assert path.read_bytes() == golden.read_bytes()  # byte for byte: layout, escapes, newline
    fixed = _doc(path)
    changed = [i for i, (a, b) in enumerate(zip(original["cells"], fixed["cells"])) if a != b]
    assert changed == [4, 6, 8]  # cells 5, 7 and 9
    for i in changed:  # nothing but the source changed: outputs, ids, counts, metadata kept
        a, b = dict(original["cells"][i]), dict(fixed["cells"][i])
        assert a.pop("source") != b.pop("source") and a == b
    assert fixed["metadata"] == original["metadata"]
    crlf = fixed["cells"][4]["source"]
    assert all(line.endswith("\r\n") for line in crlf) and "pin_memory" in crlf[5]
    assert fixed["cells"][6]["source"][0] == "%%time\n" and "        %time _ = gc.collect()  # must not fire: a line magic\n" in fixed["cells"][6]["source"]
    assert not fixed["cells"][6]["source"][-1].endswith("\n")  # the last line kept without one
    # idempotent: a second run finds nothing to write, and does not write
    stamp = path.stat().st_mtime_ns
    r = cli("fix", "train.ipynb", "--apply", "--isolated", cwd=nbdir)
    assert "Nothing to fix." in r.stderr and path.stat().st_mtime_ns == stamp


def test_a_notebook_with_nothing_to_fix_is_never_written(nbdir, cli):
    path = nbdir / "clean.ipynb"
    before, stamp = path.read_bytes(), path.stat().st_mtime_ns
    r = cli("check", "clean.ipynb", "--isolated", "--no-cache", cwd=nbdir)
    assert r.returncode == 0, r.stdout + r.stderr  # `!python -c "...gc.collect()"`, `%%bash`: not code
    r = cli("fix", "clean.ipynb", "--apply", "--isolated", "--unsafe-fixes", cwd=nbdir)
    assert r.returncode == 0 and "Nothing to fix." in r.stderr
    assert path.read_bytes() == before and path.stat().st_mtime_ns == stamp


def test_unsafe_fixes_keep_imports_and_magics_in_their_cells(nbdir, cli):
    r = cli("fix", "train.ipynb", "--apply", "--unsafe-fixes", "--isolated", cwd=nbdir)
    assert r.returncode == 0, r.stderr
    cells = _doc(nbdir / "train.ipynb")["cells"]
    setup, training = "".join(cells[4]["source"]), "".join(cells[6]["source"])
    assert 'scaler = torch.amp.GradScaler("cuda")\r\n' in setup  # added in the CRLF cell: CRLF
    assert training.startswith("%%time\nfor epoch in range(3):\n")
    assert "with torch.autocast(" in training and "scaler.scale(loss).backward()" in training
    assert "        %time _ = gc.collect()  # must not fire: a line magic\n" in training
    assert "".join(cells[1]["source"]).startswith("%matplotlib inline\n")  # no import added above it
    assert sum("".join(c["source"]).count("import torch\n") for c in cells) == 1


def test_a_fix_that_would_move_a_magic_is_not_applied(tmp_path, cli):
    """The AMP codemod would re-indent the `%time` line into its `with` block: that fix is left
    out, with a warning; the other fixes are applied."""
    path = _write_nb(tmp_path / "t.ipynb", [
        ("code", "import gc\nimport torch\n"),
        ("code", "model = torch.nn.Linear(4, 2).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nloss_fn = torch.nn.MSELoss()\n"),
        ("code", "for x, y in loader:\n    out = model(x.cuda())\n    %time pass\n    loss = loss_fn(out, y)\n    loss.backward()\n    opt.step()\n    gc.collect()\n"),
    ])
    r = cli("fix", "t.ipynb", "--apply", "--unsafe-fixes", "--isolated", "--select", "SPD301,SPD401", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "SPD301 fix not applied: it would change an IPython magic line in cell 3" in " ".join(r.stderr.split())
    source = "".join(_doc(path)["cells"][2]["source"])
    assert "gc.collect()" not in source and "autocast" not in source
    assert "    %time pass\n" in source


def test_an_edit_across_two_cells_is_not_mapped_back():
    nb = Notebook.parse(json.dumps({"cells": [
        {"cell_type": "code", "source": ["a = 1\n", "b = 2"]},
        {"cell_type": "code", "source": ["c = 3\n"]},
        {"cell_type": "code", "source": "%%bash\necho\n"},
        {"cell_type": "code", "source": ["d = 4\n"]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode())
    lines = nb.text.splitlines()
    joined = "\n".join([lines[0], "b = 2; c = 3", *lines[4:]]) + "\n"  # cell 1's end and cell 2 merged
    assert nb.rebuild(joined) == ({}, ["its edit spans cells 1 and 2"])
    changed, problems = nb.rebuild(nb.text.replace("c = 3", "c = 30").replace("d = 4", "import os\nd = 4"))
    assert problems == [] and changed == {1: "c = 30\n", 3: "import os\nd = 4\n"}
    assert nb.rebuild(nb.text) == ({}, [])


def test_the_rewrite_keeps_every_other_byte():
    """Layouts other than Jupyter's: a string `source`, indent 2, escaped non-ASCII, no trailing
    newline, CRLF in the file: the changed value is written in the same style, nothing else moves."""
    raw = (
        '{\r\n  "nbformat": 4, "nbformat_minor": 2,\r\n  "metadata": {"title": "caf\\u00e9"},\r\n  "cells": [\r\n'
        '    {"cell_type": "code", "source": "import gc\\nfor x in loader:\\n    loss = model(x)\\n    loss.backward()\\n    opt.step()\\n    gc.collect()\\n", "outputs": [], "metadata": {}, "execution_count": 3},\r\n'
        '    {"cell_type": "code", "source": [], "outputs": [], "metadata": {}, "execution_count": null}\r\n  ]\r\n}'
    )
    nb = Notebook.parse(raw.encode())
    assert nb.ensure_ascii
    new_first = "import gc\nfor x in loader:\n    loss = model(x)\nprint('é')\n"
    out = nb.render({0: new_first, 1: "x = 1\ny = 2"}).decode()
    expected_first = json.dumps(new_first, ensure_ascii=True)
    assert out == raw.replace(raw[raw.index('"import gc'):raw.index(', "outputs"')], expected_first).replace(
        '"source": []', '"source": [\r\n      "x = 1\\n",\r\n      "y = 2"\r\n    ]'
    )


def test_syntax_error_cells_are_named_by_fix_and_left_alone(tmp_path, cli):
    path = _write_nb(tmp_path / "t.ipynb", [
        ("code", "import gc\nfor x in loader:\n    model(x).sum().backward()\n    opt.step()\n    gc.collect()\n"),
        ("code", "def f(:\n    gc.collect()\n"),
    ])
    r = cli("fix", "t.ipynb", "--apply", "--isolated", cwd=tmp_path)
    assert "t.ipynb: error: cell 2:1:7: syntax error" in " ".join(r.stderr.split())
    cells = _doc(path)["cells"]
    assert "gc.collect()" not in "".join(cells[0]["source"]) and cells[1]["source"] == ["def f(:\n", "    gc.collect()\n"]


def test_stdin(nbdir, cli):
    text = (nbdir / "train.ipynb").read_text(encoding="utf-8")
    r = cli("check", "-", "--stdin-filename", "train.ipynb", "--isolated", "--output-format", "concise", input=text, cwd=nbdir)
    assert "train.ipynb:cell 7:9:9: SPD401" in r.stdout
    r = cli("fix", "-", "--stdin-filename", "train.ipynb", "--isolated", input=text, cwd=nbdir)
    assert r.stdout == (NOTEBOOKS / "train.fixed.ipynb").read_text(encoding="utf-8")


# -- cache ---------------------------------------------------------------------------------------
def test_the_cache_answers_an_unchanged_notebook_and_a_changed_cell_invalidates(nbdir, monkeypatch):
    monkeypatch.chdir(nbdir)
    resolver = SettingsResolver(Overrides(), isolated=True)

    def run():
        result = check_paths(["train.ipynb"], resolver, profile=True, jobs=1)
        return result, sorted((f.cell, f.line, f.code) for f in result.findings)

    first, found = run()
    again, cached = run()
    assert again.profile.cached == 1 and cached == found
    assert [f.location for f in again.findings] == [f.location for f in first.findings]
    doc = _doc(nbdir / "train.ipynb")
    doc["cells"][6]["source"] = [line for line in doc["cells"][6]["source"] if "gc.collect()  # expect" not in line]
    (nbdir / "train.ipynb").write_text(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    changed, after = run()
    assert changed.profile.cached == 0
    assert (7, 9, "SPD401") in found and (7, 9, "SPD401") not in after


# -- verify --------------------------------------------------------------------------------------
def test_verify_runs_a_notebook_as_a_script(nbdir):
    pytest.importorskip("torch")
    from speedlint.harness.verify import CRASHED, DIVERGED, VerifyOptions, verify

    folder = nbdir / "script"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    opts = VerifyOptions(script=folder / "train.ipynb", steps=3, warmup=1, repeats=1, timeout=300.0)
    result = verify(opts, SettingsResolver(Overrides(select=("SPD401",)), isolated=True))
    assert [(f.path.endswith("train.ipynb:cell 3"), f.code, f.line) for f in result.fixes] == [(True, "SPD401", 11)]
    assert result.verdict not in (CRASHED, DIVERGED), result.reason
    assert all(r.status in ("completed", "stopped") for r in result.runs), [r.error for r in result.runs]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # the user's files untouched


@pytest.mark.parametrize("cell, why", [
    ("!pip install torch\n", "`!pip install torch` needs IPython"),
    ("%%bash\necho hi\n", "`%%bash` cell"),
    ("x = get_ipython()\n", "`get_ipython()`"),
    ("def f(:\n", "syntax error"),
])
def test_verify_refuses_a_notebook_that_needs_ipython(tmp_path, cli, cell, why):
    _write_nb(tmp_path / "t.ipynb", [("code", "%matplotlib inline\nimport torch\n"), ("code", cell)])
    r = cli("verify", "t.ipynb", "--isolated", cwd=tmp_path)
    assert r.returncode == 2
    assert "t.ipynb: cannot run this notebook as a script:" in r.stderr and why in r.stderr, r.stderr


def test_the_exported_script_leaves_out_harmless_magics_only():
    nb = Notebook.parse(json.dumps({"cells": [
        {"cell_type": "code", "source": "%matplotlib inline\n%load_ext autoreload\nimport torch\nmodel?\n"},
        {"cell_type": "markdown", "source": "text"},
        {"cell_type": "code", "source": "%%time\nfor i in range(2):\n    %time step(i)\n"},
        {"cell_type": "code", "source": "%%capture\nprint(1)"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode())
    script = nb.script()
    assert script == (
        "# %% cell 1\npass\npass\nimport torch\npass\n\n"
        "# %% cell 3\npass  # %%time\nfor i in range(2):\n    step(i)\n\n"
        "# %% cell 4\npass  # %%capture\nprint(1)\n"
    )
    compile(script, "<script>", "exec")
    with pytest.raises(NotebookError, match="timeit"):
        Notebook.parse(json.dumps({"cells": [{"cell_type": "code", "source": "%timeit f()\n"}], "metadata": {}, "nbformat": 4}).encode()).script()


def test_fixtures_are_what_jupyter_writes():
    """The fixtures are nbformat 4 JSON in Jupyter's own layout (so the byte-level tests mean
    something): re-serialising them the way Jupyter does gives the same bytes."""
    for path in sorted(NOTEBOOKS.rglob("*.ipynb")):
        doc = _doc(path)
        assert doc["nbformat"] == 4
        assert path.read_text(encoding="utf-8") == json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n", path
    assert os.path.exists(NOTEBOOKS / "train.fixed.ipynb")
