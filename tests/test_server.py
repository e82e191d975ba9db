"""`speedlint server`, driven over stdio by a small JSON-RPC client (tests/server_client.py), on
fixture projects copied to a temporary folder.

The diagnostics must be what `speedlint check --output-format json` reports for the same files;
a quick fix must give the text `speedlint fix --apply` gives for that finding, as minimal text
edits; an edit in one module must change the diagnostics of another. One server is started per
module (and one more with a rule broken on purpose). No timing is asserted: the tests wait for
notifications with a generous timeout.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

pytest.importorskip("pygls")
pytest.importorskip("lsprotocol")

from conftest import FIXTURES, run_cli  # noqa: E402
from server_client import REPO, LspClient, apply_text_edits  # noqa: E402

from speedlint.server.edits import apply_changes, minimal_changes, suppression  # noqa: E402

PROJECT = FIXTURES / "projects" / "server_session"
OPTIONS = {"debounceMs": 10, "cache": False}


def utf16(line: str, column: int) -> int:
    """A 0-based code point column -> UTF-16 units."""
    return len(line[:column].encode("utf-16-le")) // 2


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("server") / "server_session"
    shutil.copytree(PROJECT, root)
    return root


@pytest.fixture(scope="module")
def client(project: Path) -> Iterator[LspClient]:
    c = LspClient(project)
    c.initialize(project, OPTIONS)
    yield c
    assert c.shutdown() == 0


@pytest.fixture(scope="module")
def opened(client: LspClient, project: Path) -> Dict[str, str]:
    """Every Python file of the project open, by relative path -> URI (first diagnostics in)."""
    uris = {}
    for path in sorted(project.rglob("*.py")):
        mark = client.mark()
        uris[path.relative_to(project).as_posix()] = uri = client.open(path)
        client.diagnostics(uri, mark)
    return uris


def check_json(cwd: Path, *args: str) -> Dict[str, Any]:
    res = run_cli("check", "--no-cache", "--output-format", "json", *args, cwd=cwd)
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


def as_lsp(finding: Dict[str, Any], text: str) -> Tuple[Any, ...]:
    """A finding of `check`'s JSON as the LSP diagnostic should show it (0-based, UTF-16)."""
    lines = text.splitlines()
    start, end = finding["location"], finding["end_location"]
    return (
        finding["code"],
        finding["message"],
        start["row"] - 1, utf16(lines[start["row"] - 1], start["column"] - 1),
        end["row"] - 1, utf16(lines[end["row"] - 1], end["column"] - 1),
    )


def of_lsp(d: Dict[str, Any]) -> Tuple[Any, ...]:
    r = d["range"]
    return (d["code"], d["message"], r["start"]["line"], r["start"]["character"], r["end"]["line"], r["end"]["character"])


def current(client: LspClient, uri: str, text: str, version: int) -> List[Dict[str, Any]]:
    """Send `text` as the document's new content; its diagnostics for that version."""
    mark = client.mark()
    client.change(uri, text, version)
    return client.diagnostics(uri, mark, version)


_versions: Dict[str, int] = {}


def edit(client: LspClient, uri: str, text: str) -> List[Dict[str, Any]]:
    _versions[uri] = _versions.get(uri, 1) + 1
    return current(client, uri, text, _versions[uri])


# -- diagnostics ----------------------------------------------------------------------------------
def test_diagnostics_match_check(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    report = check_json(project, ".")
    assert report["findings"], "the fixture project has findings"
    for rel, uri in opened.items():
        text = (project / rel).read_text(encoding="utf-8")
        expected = sorted(as_lsp(f, text) for f in report["findings"] if f["filename"] == rel)
        got = sorted(of_lsp(d) for d in edit(client, uri, text) if d["source"] == "speedlint")
        assert got == expected, rel


def test_chain_is_related_information(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    text = (project / "losses/focal.py").read_text(encoding="utf-8")
    (spd201,) = [d for d in edit(client, opened["losses/focal.py"], text) if d["code"] == "SPD201"]
    related = spd201["relatedInformation"]
    assert [r["location"]["uri"] for r in related] == [(project / "train.py").as_uri()]
    assert related[0]["location"]["range"]["start"]["line"] == 18  # train.py:19, the call of focal_loss


def test_edit_in_one_module_changes_another(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    train, focal = opened["train.py"], opened["losses/focal.py"]
    text = (project / "train.py").read_text(encoding="utf-8")
    mark = client.mark()
    cold = text.replace("loss = focal_loss(model(x), y)", "loss = model(x).sum()")
    assert cold != text
    edit(client, train, cold)  # the step no longer calls the loss: `.item()` there is not hot
    assert not [d for d in client.diagnostics(focal, mark) if d["code"] == "SPD201"]
    mark = client.mark()
    edit(client, train, text)  # the unsaved buffer counts, not the file: back as it was
    assert [d["code"] for d in client.diagnostics(focal, mark)] == ["SPD201"]


def test_closing_a_buffer_brings_back_the_file_on_disk(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    train, focal = opened["train.py"], opened["losses/focal.py"]
    text = (project / "train.py").read_text(encoding="utf-8")
    mark = client.mark()
    edit(client, train, text.replace("loss = focal_loss(model(x), y)", "loss = model(x).sum()"))
    assert not [d for d in client.diagnostics(focal, mark) if d["code"] == "SPD201"]
    mark = client.mark()
    client.close(train)  # unsaved changes dropped: train.py on disk calls the loss again
    assert client.diagnostics(train, mark) == []
    assert [d["code"] for d in client.diagnostics(focal, mark)] == ["SPD201"]
    mark = client.mark()
    _versions[train] = 1
    client.open(project / "train.py")
    assert "SPD202" in {d["code"] for d in client.diagnostics(train, mark)}


def test_config_file_changes_are_picked_up(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    train = opened["train.py"]
    config = project / "speedlint.toml"
    config.write_text('ignore = ["SPD202"]\n', encoding="utf-8")
    try:
        mark = client.mark()
        client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 1}]})
        assert "SPD202" not in {d["code"] for d in client.diagnostics(train, mark)}
    finally:
        config.unlink()
    mark = client.mark()
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 3}]})
    assert "SPD202" in {d["code"] for d in client.diagnostics(train, mark)}


def test_a_bad_config_file_is_logged_and_the_server_goes_on(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    train = opened["train.py"]
    config = project / "speedlint.toml"
    config.write_text("select = 5\n", encoding="utf-8")
    try:
        mark = client.mark()
        client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 1}]})
        client.wait_for(lambda m: m.get("method") == "window/logMessage" and "speedlint.toml" in m["params"]["message"], mark)
    finally:
        config.unlink()
    mark = client.mark()
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 3}]})
    assert "SPD202" in {d["code"] for d in client.diagnostics(train, mark)}


def test_baseline_and_selection_from_the_client(client: LspClient, project: Path, opened: Dict[str, str], tmp_path: Path) -> None:
    train = opened["train.py"]
    baseline = tmp_path / "baseline.json"
    res = run_cli("check", "--no-cache", "--write-baseline", str(baseline), "train.py", cwd=project)
    assert res.returncode == 0, res.stderr
    mark = client.mark()
    client.notify("workspace/didChangeConfiguration", {"settings": {"speedlint": {"baseline": str(baseline), "debounceMs": 10, "cache": False}}})
    assert client.diagnostics(train, mark) == []  # every finding of train.py is in the baseline
    mark = client.mark()
    client.notify("workspace/didChangeConfiguration", {"settings": {"speedlint": {"ignore": ["SPD2"], "debounceMs": 10, "cache": False}}})
    assert {d["code"] for d in client.diagnostics(train, mark)} == {"SPD301", "SPD304", "SPD401"}
    mark = client.mark()
    client.notify("workspace/didChangeConfiguration", {"settings": {"speedlint": OPTIONS}})
    assert "SPD202" in {d["code"] for d in client.diagnostics(train, mark)}


def test_save_checks_the_document_again(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    """didSave publishes the document's diagnostics again at once (no edit debounce), the same
    as the ones it got when it was opened."""
    uri = opened["train.py"]
    mark = client.mark()
    edit(client, uri, (project / "train.py").read_text(encoding="utf-8"))  # the text on disk
    before = sorted(of_lsp(d) for d in client.diagnostics(uri, mark))
    mark = client.mark()
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert sorted(of_lsp(d) for d in client.diagnostics(uri, mark)) == before
    assert "SPD202" in {d[0] for d in before}


def test_unsaved_buffer_is_analysed(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    uri = opened["evaluate.py"]
    text = (project / "evaluate.py").read_text(encoding="utf-8")
    extra = text + "\n\ndef tune(model, loader, opt):\n    import gc\n    for x, y in loader:\n        model(x).sum().backward()\n        opt.step()\n        gc.collect()\n"
    got = {d["code"] for d in edit(client, uri, extra)}
    assert "SPD401" in got
    assert "SPD401" not in {d["code"] for d in edit(client, uri, text)}


def test_syntax_error_gives_one_diagnostic_and_the_server_goes_on(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    uri = opened["evaluate.py"]
    text = (project / "evaluate.py").read_text(encoding="utf-8")
    broken = text.replace("def evaluate(model, dataset):", "def evaluate(model, dataset)")
    (diag,) = edit(client, uri, broken)
    assert diag["severity"] == 1 and "syntax error" in diag["message"]
    row = int(re.search(r"at (\d+):", diag["message"]).group(1))  # type: ignore[union-attr]
    assert diag["range"]["start"]["line"] == row - 1
    train = opened["train.py"]
    assert "SPD202" in {d["code"] for d in edit(client, train, (project / "train.py").read_text(encoding="utf-8"))}
    assert {d["code"] for d in edit(client, uri, text)} == {"SPD101", "SPD102", "SPD601"}


def test_hover_shows_the_rule_docs_shortened(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    uri = opened["train.py"]
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 15, "character": 18}})
    value = hover["contents"]["value"]
    explain = run_cli("explain", "SPD202").stdout
    assert value.startswith("# SPD202 (blocking-host-to-device-copy)")
    assert "What it does" in value and "impact" in value
    assert len(value) < len(explain)
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}) is None


# -- code actions -----------------------------------------------------------------------------------
def actions_at(client: LspClient, uri: str, line: int, only: Any = None) -> List[Dict[str, Any]]:
    context: Dict[str, Any] = {"diagnostics": []}
    if only is not None:
        context["only"] = only
    rng = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}
    return client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": rng, "context": context})


def fix_apply(project: Path, tmp_path: Path, rel: str, *args: str) -> str:
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    res = run_cli("fix", "--apply", "--no-cache", *args, rel, cwd=copy)
    assert res.returncode in (0, 1), res.stderr
    return (copy / rel).read_text(encoding="utf-8")


def assert_minimal(edits: List[Dict[str, Any]], text: str) -> None:
    lines = text.count("\n")
    for e in edits:
        r = e["range"]
        assert r["end"]["line"] - r["start"]["line"] < lines // 2, e
        assert len(e["newText"]) < len(text) // 2, e


@pytest.mark.parametrize(
    "rel, line, code, unsafe",
    [
        ("train.py", 16, "SPD202", False),
        ("train.py", 22, "SPD401", False),
        ("train.py", 23, "SPD203", False),
        ("evaluate.py", 7, "SPD102", False),
        ("evaluate.py", 7, "SPD101", True),
        ("evaluate.py", 10, "SPD601", True),
    ],
)
def test_quick_fix_gives_what_fix_apply_gives(client: LspClient, project: Path, opened: Dict[str, str], tmp_path: Path, rel: str, line: int, code: str, unsafe: bool) -> None:
    uri = opened[rel]
    text = (project / rel).read_text(encoding="utf-8")
    edit(client, uri, text)
    fixes = [a for a in actions_at(client, uri, line - 1) if a["title"].startswith(f"{code}:")]
    assert len(fixes) == 1, fixes
    action = fixes[0]
    assert action["kind"] == "quickfix"
    assert ("unsafe" in action["title"]) is unsafe
    assert action.get("isPreferred", False) is not unsafe
    edits = action["edit"]["changes"][uri]
    assert_minimal(edits, text)
    expected = fix_apply(project, tmp_path, rel, "--select", code, *(["--unsafe-fixes"] if unsafe else []))
    assert expected != text
    assert apply_text_edits(text, edits) == expected


def test_suppress_action(client: LspClient, project: Path, opened: Dict[str, str]) -> None:
    uri = opened["train.py"]
    text = (project / "train.py").read_text(encoding="utf-8")
    edit(client, uri, text)
    (action,) = [a for a in actions_at(client, uri, 15) if a["title"].startswith("Suppress SPD202")]
    (change,) = action["edit"]["changes"][uri]
    assert change["range"]["start"]["line"] == 15 and change["newText"] == "  # noqa: SPD202"
    suppressed = apply_text_edits(text, [change])
    assert "SPD202" not in {d["code"] for d in edit(client, uri, suppressed)}
    edit(client, uri, text)


def test_fix_all_is_fix_apply(client: LspClient, project: Path, opened: Dict[str, str], tmp_path: Path) -> None:
    uri = opened["train.py"]
    text = (project / "train.py").read_text(encoding="utf-8")
    edit(client, uri, text)
    (action,) = actions_at(client, uri, 0, only=["source.fixAll"])
    assert action["kind"] == "source.fixAll.speedlint"
    edits = action["edit"]["changes"][uri]
    assert_minimal(edits, text)
    expected = fix_apply(project, tmp_path, "train.py")
    assert apply_text_edits(text, edits) == expected
    # from the menu: a command, whose edit the server sends with workspace/applyEdit
    (menu,) = [a for a in actions_at(client, uri, 0) if a["kind"] == "source.fixAll.speedlint"]
    assert "edit" not in menu or menu["edit"] is None
    before = len(client.applied_edits)
    assert client.request("workspace/executeCommand", menu["command"]) == {"applied": True}
    sent = client.applied_edits[before]
    assert apply_text_edits(text, sent["changes"][uri]) == expected


def test_fix_command_for_one_finding(client: LspClient, project: Path, opened: Dict[str, str], tmp_path: Path) -> None:
    uri = opened["train.py"]
    text = (project / "train.py").read_text(encoding="utf-8")
    edit(client, uri, text)
    before = len(client.applied_edits)
    assert client.request("workspace/executeCommand", {"command": "speedlint.applyFix", "arguments": [uri, "SPD401", 22, 13]}) == {"applied": True}
    assert apply_text_edits(text, client.applied_edits[before]["changes"][uri]) == fix_apply(project, tmp_path, "train.py", "--select", "SPD401")


# -- notebooks ---------------------------------------------------------------------------------------
def test_notebook_document(client: LspClient, project: Path, tmp_path: Path) -> None:
    nb = (project / "explore.ipynb").as_uri()
    cells = [
        ("markdown", "# Explore\n"),
        ("python", "import gc\nimport torch\n"),
        ("python", "for x, y in loader:\n    loss = model(x.cuda()).sum()\n    loss.backward()\n    opt.step()\n    gc.collect()\n"),
    ]
    cell_uris = [f"{nb}#cell{i}" for i in range(len(cells))]
    mark = client.mark()
    client.notify("notebookDocument/didOpen", {
        "notebookDocument": {
            "uri": nb, "notebookType": "jupyter-notebook", "version": 1,
            "cells": [{"kind": 1 if lang == "markdown" else 2, "document": u} for (lang, _), u in zip(cells, cell_uris)],
        },
        "cellTextDocuments": [{"uri": u, "languageId": lang, "version": 1, "text": t} for (lang, t), u in zip(cells, cell_uris)],
    })
    got = client.diagnostics(cell_uris[2], mark)
    assert "SPD401" in {d["code"] for d in got}
    (gc_diag,) = [d for d in got if d["code"] == "SPD401"]
    assert gc_diag["range"]["start"]["line"] == 4  # line 5 of the cell
    (suppress,) = [a for a in actions_at(client, cell_uris[2], 4) if a["title"].startswith("Suppress SPD401")]
    assert suppress["edit"]["changes"][cell_uris[2]][0]["newText"] == "  # noqa: SPD401"
    # fix all: what `fix --apply` writes in the .ipynb file, cell by cell
    (fix_all,) = actions_at(client, cell_uris[2], 0, only=["source.fixAll"])
    edits = fix_all["edit"]["changes"]
    notebook = {
        "cells": [{"cell_type": "markdown" if lang == "markdown" else "code", "metadata": {}, "source": text, **({} if lang == "markdown" else {"outputs": [], "execution_count": None})} for lang, text in cells],
        "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5,
    }
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    (copy / "explore.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    res = run_cli("fix", "--apply", "--no-cache", "explore.ipynb", cwd=copy)
    assert res.returncode in (0, 1), res.stderr
    fixed = json.loads((copy / "explore.ipynb").read_text(encoding="utf-8"))["cells"]
    for (lang, text), uri, cell in zip(cells, cell_uris, fixed):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        assert apply_text_edits(text, edits.get(uri, [])) == source
    assert cell_uris[2] in edits
    client.notify("notebookDocument/didClose", {"notebookDocument": {"uri": nb}, "cellTextDocuments": [{"uri": u} for u in cell_uris]})


# -- a rule that crashes ----------------------------------------------------------------------------
def test_a_crashing_rule_is_logged_and_skipped(project: Path) -> None:
    c = LspClient(project, command=[sys.executable, str(REPO / "tests" / "server_crash.py"), "SPD401"])
    try:
        c.initialize(project, OPTIONS)
        mark = c.mark()
        uri = c.open(project / "train.py")
        codes = {d["code"] for d in c.diagnostics(uri, mark)}
        assert "SPD202" in codes and "SPD203" in codes  # the other rules still speak
        assert "SPD401" not in codes
        c.wait_for(lambda m: m.get("method") == "window/logMessage" and "SPD401" in m["params"]["message"], mark)
        mark = c.mark()
        c.change(uri, (project / "train.py").read_text(encoding="utf-8") + "\n", 2)
        assert "SPD202" in {d["code"] for d in c.diagnostics(uri, mark, 2)}  # still serving
    finally:
        assert c.shutdown() == 0


def test_server_without_pygls_says_how_to_install() -> None:
    code = "import sys; sys.modules['pygls'] = None; sys.argv = ['speedlint', 'server']; from speedlint.cli import main; main()"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert 'pip install "speedlint[server]"' in res.stderr


# -- the edits, without a server -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "old, new",
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc\n", "a\nc\n"),
        ("a\nb\nc", "a\nb\nc\nd\n"),
        ("x = f(a)\n", "x = f(a, non_blocking=True)\n"),
        ("import torch\n\nx = 1\n", "import os\n\nimport torch\n\nx = 1\n"),
        ("a\r\nb\r\n", "a\r\nbb\r\n"),
        ("é 😀 x\n", "é 😀 y\n"),
        ("", "x\n"),
        ("x\n", ""),
    ],
)
def test_minimal_changes_round_trip(old: str, new: str) -> None:
    changes = minimal_changes(old, new)
    assert apply_changes(old, changes) == new
    assert sum(len(c.text) for c in changes) <= len(new)


def test_suppression_edits() -> None:
    text = "x = f()\ny = g()  # noqa: E501 long line\ns = '''\nabc'''\n"
    assert apply_changes(text, [suppression(text, (1,), "SPD401")]).splitlines()[0] == "x = f()  # noqa: SPD401"  # type: ignore[list-item]
    assert "# noqa: SPD401, E501 long line" in apply_changes(text, [suppression(text, (2,), "SPD401")])  # type: ignore[list-item]
    assert suppression(text, (3,), "SPD401") is None  # line 3 ends in a string: a comment there is not one
    assert apply_changes(text, [suppression(text, (3, 4), "SPD401")]).splitlines()[3] == "abc'''  # noqa: SPD401"  # type: ignore[list-item]


# -- the state, in-process: what is published is what a fresh server would say ----------------------
def _codes_by_doc(state: Any) -> Dict[str, List[Tuple[str, int, int, str]]]:
    return {uri: sorted((f.code, f.line, f.column, f.message) for f in doc.result.findings) for uri, doc in state.documents.items()}


def test_incremental_state_equals_a_fresh_one(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Edits one after the other (some relink, some publish first with the last link's seeds):
    after each, every open document's last published findings are those of a new state that
    sees the same buffers at once."""
    from speedlint.server.state import Document, Options, State

    root = tmp_path / "p"
    shutil.copytree(project, root)
    monkeypatch.chdir(root)
    texts = {rel: (root / rel).read_text(encoding="utf-8") for rel in ("train.py", "losses/focal.py", "evaluate.py")}
    steps = [
        ("train.py", texts["train.py"].replace("loss = focal_loss(model(x), y)", "loss = model(x).sum()")),
        ("losses/focal.py", texts["losses/focal.py"].replace("    return loss\n", "    loss = loss * 1.0\n    return loss\n", 1)),
        ("train.py", texts["train.py"]),
        ("losses/focal.py", texts["losses/focal.py"].replace("HISTORY.append(loss.item())", "HISTORY.append(loss)")),
        ("evaluate.py", texts["evaluate.py"].replace("):", ")", 1)),
        ("losses/focal.py", texts["losses/focal.py"]),
        ("evaluate.py", texts["evaluate.py"]),
    ]

    def fresh(buffers: Dict[str, str]) -> State:
        state = State(Options(cache=False), [root])
        for rel, text in buffers.items():
            path = root / rel
            state.documents[path.as_uri()] = Document(path.as_uri(), path, text, 1)
        state.refresh(None, lambda doc: None)
        return state

    live = fresh(texts)
    published: Dict[str, List[Any]] = {}
    buffers = dict(texts)
    for rel, text in steps:
        buffers[rel] = text
        doc = live.documents[(root / rel).as_uri()]
        doc.text = text
        live.refresh(doc, lambda d: published.__setitem__(d.uri, sorted((f.code, f.line, f.column, f.message) for f in d.result.findings)))
        want = _codes_by_doc(fresh(buffers))
        now = _codes_by_doc(live)
        assert now == want, rel
        for uri, findings in published.items():
            assert findings == want[uri], (rel, uri)
