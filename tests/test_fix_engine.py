"""`speedlint fix`: never breaks or loses a file; keeps encoding, BOM, line endings, permissions."""

from __future__ import annotations

import os
import stat

import libcst as cst

from speedlint.analyzer.config import Settings
from speedlint.analyzer.fixing import fix_text
from speedlint.analyzer.registry import select_rules
from speedlint.analyzer.rule import SAFE, Fix, Impact, Rule

BAD = (
    "import gc\n"
    "from torch.utils.data import Dataset\n"
    "\n"
    "\n"
    "class Frames(Dataset):\n"
    "    def __getitem__(self, i):\n"
    "        gc.collect()\n"
    "        return i\n"
)
FIXED = BAD.replace("        gc.collect()\n", "")


def test_diff_by_default_writes_nothing_and_exits_one(cli, tmp_path):
    f = tmp_path / "train.py"
    f.write_text(BAD)
    before = f.stat().st_mtime_ns
    res = cli("fix", f, cwd=tmp_path)
    assert res.returncode == 1
    assert "-        gc.collect()" in res.stdout and res.stdout.startswith("--- a/")
    assert f.read_text() == BAD and f.stat().st_mtime_ns == before
    assert "SPD401" in res.stderr


def test_the_compiler_s_warnings_about_the_user_s_code_are_not_printed(cli, tmp_path):
    """`fix` compiles the text before and after each round (a fix must not break it); Python's
    warnings about the code (`x is not ""`) are not a linter's to print, least of all at the
    lines of a text the user never sees."""
    f = tmp_path / "train.py"
    f.write_text(BAD.replace("        return i\n", '        if i is not "":\n            return i\n        return 0\n'))
    res = cli("fix", f, cwd=tmp_path)
    assert res.returncode == 1 and "-        gc.collect()" in res.stdout
    assert "Warning" not in res.stderr, res.stderr


def test_apply_writes_and_second_run_changes_nothing(cli, tmp_path):
    f = tmp_path / "train.py"
    f.write_text(BAD)
    res = cli("fix", f, "--apply", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f.read_text() == FIXED
    assert "Fixed 1" in res.stderr
    mtime = f.stat().st_mtime_ns
    again = cli("fix", f, "--apply", cwd=tmp_path)
    assert again.returncode == 0 and "Nothing to fix" in again.stderr
    assert f.stat().st_mtime_ns == mtime
    assert cli("fix", f).returncode == 0  # no diff left


def test_file_without_findings_is_never_rewritten(cli, tmp_path):
    f = tmp_path / "clean.py"
    data = b"import torch\r\nx = torch.zeros(3)\r\n"
    f.write_bytes(data)
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    res = cli("fix", f, "--apply", "--unsafe-fixes")
    assert res.returncode == 0
    assert f.read_bytes() == data
    assert f.stat().st_mtime_ns == 1_000_000_000


def test_crlf_line_endings_are_kept(cli, tmp_path):
    f = tmp_path / "train.py"
    f.write_bytes(BAD.replace("\n", "\r\n").encode())
    assert cli("fix", f, "--apply").returncode == 0
    assert f.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_utf8_bom_is_kept(cli, tmp_path):
    f = tmp_path / "train.py"
    f.write_bytes(b"\xef\xbb\xbf" + BAD.encode())
    assert cli("fix", f, "--apply").returncode == 0
    assert f.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


def test_latin1_coding_cookie_is_kept(cli, tmp_path):
    f = tmp_path / "train.py"
    header = "# -*- coding: latin-1 -*-\n# auteur: Andr\xe9\n"
    f.write_bytes((header + BAD).encode("latin-1"))
    res = cli("fix", f, "--apply")
    assert res.returncode == 0, res.stderr
    assert f.read_bytes() == (header + FIXED).encode("latin-1")


def test_permissions_are_kept(cli, tmp_path):
    f = tmp_path / "train.py"
    f.write_text(BAD)
    f.chmod(0o750)
    assert cli("fix", f, "--apply").returncode == 0
    assert stat.S_IMODE(f.stat().st_mode) == 0o750
    assert f.read_text() == FIXED


def test_read_only_file_is_reported_and_untouched(cli, tmp_path, monkeypatch):
    f = tmp_path / "train.py"
    f.write_text(BAD)
    f.chmod(0o444)
    other = tmp_path / "other.py"
    other.write_text(BAD)
    try:
        # root ignores permission bits; the write path checks os.access, so simulate for root too
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            import subprocess
            import sys

            code = (
                "import os, sys\n"
                "real = os.access\n"
                f"os.access = lambda p, m, **k: False if str(p).endswith('train.py') and m == os.W_OK else real(p, m, **k)\n"
                "from speedlint.cli import main\n"
                f"sys.argv = ['speedlint', 'fix', {str(f)!r}, {str(other)!r}, '--apply']\n"
                "main()\n"
            )
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
            rc, err = res.returncode, res.stderr
        else:
            res = cli("fix", f, other, "--apply", cwd=tmp_path)
            rc, err = res.returncode, res.stderr
        assert rc == 2
        assert "read-only" in err and "train.py" in err
        assert f.read_text() == BAD, "nothing the user wrote may be lost"
        assert other.read_text() == FIXED, "the run goes on for the other files"
        assert not [p for p in tmp_path.iterdir() if "speedlint-tmp" in p.name], "no temp file left behind"
    finally:
        f.chmod(0o644)


def test_syntax_error_file_is_reported_and_untouched(cli, tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("import gc\ndef f(:\n    gc.collect()\n")
    ok = tmp_path / "train.py"
    ok.write_text(BAD)
    res = cli("fix", tmp_path, "--apply", cwd=tmp_path)
    assert "syntax error" in res.stderr
    assert f.read_text() == "import gc\ndef f(:\n    gc.collect()\n"
    assert ok.read_text() == FIXED


def test_stdin_fix_writes_fixed_code_to_stdout(cli):
    res = cli("fix", "-", "--stdin-filename", "train.py", input=BAD)
    assert res.returncode == 0
    assert res.stdout == FIXED


# -- engine-level guarantees, with purpose-built rules -------------------------------------------

class _Breaks(Rule):
    """A rule whose fix produces invalid code: the engine must revert it and say so."""

    code = "SPD998"
    name = "test-breaks"
    impact = Impact("nothing", "never", "none")
    fixes = (SAFE,)
    triggers = ("collect",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "collect":
            broken = cst.Name("x")
            object.__setattr__(broken, "value", "gc.collect(")  # skip validation: renders unparsable code
            self.report(node, "breaks", fix=Fix.replace(node, broken, "break it"))


class _Overlaps(Rule):
    """Two fixes on nested nodes: applied in separate rounds, both end up in the output."""

    code = "SPD997"
    name = "test-overlaps"
    impact = Impact("nothing", "never", "none")
    fixes = (SAFE,)
    triggers = ("f(",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "f":
            self.report(node, "rename f", fix=Fix.replace(node, node.with_changes(func=cst.Name("g")), "f -> g"))


def test_fix_that_breaks_parsing_is_reverted_and_reported():
    outcome = fix_text(BAD, "x.py", [_Breaks], Settings())
    assert outcome.fixed == BAD
    assert any(d.kind == "internal-error" and "SPD998" in d.message for d in outcome.diagnostics)


def test_overlapping_fixes_converge_over_rounds():
    outcome = fix_text("y = f(f(1))\n", "x.py", [_Overlaps], Settings())
    assert outcome.fixed == "y = g(g(1))\n"
    assert len(outcome.applied) == 2
    cst.parse_module(outcome.fixed)


def test_unsafe_fixes_need_the_flag_and_are_counted():
    rules = select_rules(("SPD401",))
    safe_only = fix_text(BAD, "x.py", rules, Settings(), unsafe=False)
    assert safe_only.fixed == FIXED  # SPD401's removal is safe


LOADER_LOOP = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "\n"
    "\n"
    "def train(model, data, opt):\n"
    "    loader = DataLoader(data, batch_size=32)\n"
    "    model.cuda()\n"
    "    for x, y in loader:\n"
    "        x, y = x.cuda(), y.cuda()\n"
    "        opt.zero_grad()\n"
    "        loss = torch.nn.functional.mse_loss(model(x), y)\n"
    "        loss.backward()\n"
    "        opt.step()\n"
)


def test_each_round_s_trees_are_freed_before_the_next_round(monkeypatch):  # type: ignore[no-untyped-def]
    """A big file's fix must not hold several rounds' trees at once: the analysis of a round (its
    tree, facts, fixes) is gone when the next round's analysis starts, and the applied findings
    are kept without their nodes."""
    import gc
    import weakref

    import speedlint.analyzer.fixing as fixing
    from speedlint.analyzer.findings import FixSummary

    contexts: list = []
    alive_at_start: list = []
    real = fixing.analyze_text

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        gc.collect()
        alive_at_start.append(sum(1 for ref in contexts if ref() is not None))
        result = real(*args, **kwargs)
        if result.ctx is not None:
            contexts.append(weakref.ref(result.ctx))
        return result

    monkeypatch.setattr(fixing, "analyze_text", spy)
    outcome = fix_text(LOADER_LOOP, "train.py", select_rules(("SPD101", "SPD102", "SPD202")), Settings(), unsafe=True)
    assert outcome.changed and len(outcome.applied) >= 2 and len(contexts) >= 3  # several rounds
    assert alive_at_start == [0] * len(alive_at_start)
    assert all(isinstance(f.fix, FixSummary) for f in outcome.applied)


def test_only_the_user_s_text_is_parsed(monkeypatch):  # type: ignore[no-untyped-def]
    """A round's result is compiled to check it, and the next round analyses the tree the round
    rewrote (its code is the new text): no round after the first parses."""
    import speedlint.analyzer.fixing as fixing

    texts: list = []
    analysed: list = []
    real_parse, real_analyze = cst.parse_module, fixing.analyze_text

    def parse(text, *args, **kwargs):  # type: ignore[no-untyped-def]
        texts.append(text)
        return real_parse(text, *args, **kwargs)

    def analyze(text, *args, **kwargs):  # type: ignore[no-untyped-def]
        analysed.append(text)
        return real_analyze(text, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", parse)
    monkeypatch.setattr(fixing, "analyze_text", analyze)
    outcome = fix_text(LOADER_LOOP, "train.py", select_rules(("SPD101", "SPD102", "SPD202")), Settings(), unsafe=True)
    assert outcome.changed and len(outcome.applied) >= 2
    assert len(analysed) >= 3 and analysed[-1] == outcome.fixed  # several rounds
    assert texts == [LOADER_LOOP]


def _fixable_samples() -> list:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "fixtures"
    fixed = sorted(root.glob("rules/SPD*.fixed.py"))  # the rule fixtures that have fixes
    paths = sorted(root.glob("fixers/*/before.py")) + [p.with_name(p.name.replace(".fixed", "")) for p in fixed]
    return [(p.parent.name if p.name == "before.py" else p.stem, p.read_text()) for p in paths]


def test_the_rewritten_tree_is_analysed_as_its_text_would_be(monkeypatch):  # type: ignore[no-untyped-def]
    """Every fixer fixture and rule fixture with fixes, every fix applied: analysing each round's rewritten tree gives
    what parsing that round's text again gives (the same fixed text, applied and remaining
    findings, at the same places)."""
    from speedlint.analyzer.providers import walk
    from speedlint.analyzer.registry import all_rules

    every = list(all_rules())

    def outcomes() -> list:
        out = []
        for name, text in _fixable_samples():  # a rule's fixture with its rule, a fixer's with all
            rules = select_rules((name.split(".")[0],)) if name.startswith("SPD") else every
            o = fix_text(text, f"{name}.py", rules, Settings(), unsafe=True)
            out.append((name, o.fixed, [(f.code, f.line, f.column) for f in o.applied], sorted((f.code, f.line, f.column, f.message) for f in o.remaining)))
        return out

    as_rewritten = outcomes()
    assert sum(1 for _, _, applied, _ in as_rewritten if len(applied) >= 2) >= 5  # later rounds ran
    monkeypatch.setattr(walk.TreeIndex, "holds_each_node_once", lambda self: False)  # read again from the text
    assert outcomes() == as_rewritten


class _Twice(Rule):
    """A fix that puts one new node in two places and reuses a node that stays in the tree."""

    code = "SPD997"
    name = "test-twice"
    impact = Impact("nothing", "never", "none")
    fixes = (SAFE,)
    triggers = ("f(",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "f":
            arg = node.args[0].value
            twice = cst.Name("k")
            new = cst.Call(cst.Name("g"), [cst.Arg(twice, comma=cst.Comma()), cst.Arg(twice), cst.Arg(arg, keyword=cst.Name("n"))])
            self.report(node, "f -> g", fix=Fix.replace(node, new, "f -> g"))


def test_a_fixed_tree_holds_each_node_once():
    """The replacements are copied in: the tree the next round analyses never holds a node twice
    (where one did, each place would not have its own position and parent)."""
    import speedlint.analyzer.fixing as fixing
    from speedlint.analyzer.providers.walk import TreeIndex

    text = "x = 1\ny = f(x)\n"
    analysis = fixing.analyze_text(text, "x.py", [_Twice], Settings())
    assert analysis.ctx is not None
    module, applied = fixing.apply_round(analysis.ctx.module, analysis.ctx, analysis.findings)
    assert module.code == "x = 1\ny = g(k,k, n = x)\n" and applied
    assert TreeIndex(module).holds_each_node_once()


def test_a_given_tree_holding_a_node_twice_is_read_again_from_its_text(monkeypatch):  # type: ignore[no-untyped-def]
    import speedlint.analyzer.fixing as fixing
    from speedlint.analyzer.providers.walk import TreeIndex

    name = cst.Name("k")
    module = cst.Module([cst.SimpleStatementLine([cst.Expr(cst.Call(cst.Name("f"), [cst.Arg(name, comma=cst.Comma()), cst.Arg(name)]))])])
    assert not TreeIndex(module).holds_each_node_once()
    texts: list = []
    real = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda text, *a, **k: texts.append(text) or real(text, *a, **k))
    analysis = fixing.analyze_text(module.code, "x.py", [_Twice], Settings(), module=module)
    assert texts == ["f(k,k)\n"]
    assert analysis.ctx is not None and analysis.ctx.module is not module
    assert [(f.line, f.column) for f in analysis.findings] == [(1, 1)]


def test_a_text_the_parser_does_not_reproduce_is_left_whole():
    """LibCST drops a line that holds only a `\\` continuation: writing its tree back would lose
    it, so such a file is not fixed, and says why."""
    text = BAD.replace("import gc\n", "import gc\n\\\n")
    assert cst.parse_module(text).code != text  # (the parser's limit this guards against)
    compile(text, "x.py", "exec")
    out = fix_text(text, "x.py", select_rules(select=["SPD401"]), Settings())
    assert out.fixed == text and not out.applied
    assert [f.code for f in out.remaining] == ["SPD401"]
    assert any(d.kind == "warning" and "cannot reproduce" in d.message and "line 2" in d.message for d in out.diagnostics)
    # the same fix applies where nothing would be lost
    assert fix_text(BAD, "x.py", select_rules(select=["SPD401"]), Settings()).fixed == FIXED


# -- a round's rewrite: only what a fix touches is rebuilt; imports as LibCST adds them ------------
from libcst.codemod import CodemodContext  # noqa: E402
from libcst.codemod.visitors import AddImportsVisitor  # noqa: E402

import speedlint.analyzer.fixing as fixing  # noqa: E402
from speedlint.analyzer.findings import ImportSpec  # noqa: E402
from speedlint.analyzer.add_imports import add_imports  # noqa: E402

_HAS = [
    ("import torch\nx = 1\n", [ImportSpec("torch")]),
    ('"""Doc."""\nimport torch\n', [ImportSpec("torch")]),
    ("__strict__ = True\nimport torch\n", [ImportSpec("torch")]),
    ("import os, torch\n", [ImportSpec("torch")]),
    ("from torch import nn\n", [ImportSpec("torch", "nn")]),
    ("from torch import *\n", [ImportSpec("torch", "nn")]),
    ("import torch\nfrom torch.amp import autocast\n", [ImportSpec("torch"), ImportSpec("torch.amp", "autocast")]),
]
_LACKS = [
    ("x = 1\nimport torch\n", [ImportSpec("torch")]),  # not in the opening block
    ("import torch as t\n", [ImportSpec("torch")]),
    ("import torch.nn\n", [ImportSpec("torch")]),
    ("from torch import nn as n\n", [ImportSpec("torch", "nn")]),
    ("from . import torch\n", [ImportSpec("torch")]),
    ("from .torch import nn\n", [ImportSpec("torch", "nn")]),
    ("import os; import torch\n", [ImportSpec("torch")]),
    ("if x:\n    import torch\n", [ImportSpec("torch")]),
    ("from torch.amp import autocast\n", [ImportSpec("torch", "amp")]),
    ('"""Doc."""\n', [ImportSpec("torch")]),
    ("import torch\n", [ImportSpec("torch"), ImportSpec("torch", "nn")]),
]


def _libcst_adds(module: cst.Module, imports: list) -> str:
    context = CodemodContext()
    for spec in imports:
        AddImportsVisitor.add_needed_import(context, spec.module, spec.obj)
    return AddImportsVisitor(context).transform_module(module).code


def test_an_import_already_at_the_top_is_not_added_again():
    """When every import a fix needs opens the module already, the module is kept as it is (no
    copy, no walk), exactly what LibCST's `AddImportsVisitor` gives back."""
    for text, imports in _HAS:
        module = cst.parse_module(text)
        assert add_imports(module, imports) is module, text
        assert _libcst_adds(module, imports) == text, text


def test_an_import_missing_from_the_top_is_added_as_libcst_adds_it():
    for text, imports in _LACKS:
        module = cst.parse_module(text)
        added = add_imports(module, imports).code
        assert added != text and added == _libcst_adds(module, imports), text


def test_a_round_rebuilds_only_the_statements_its_fixes_touch():
    """The rewrite enters only the subtrees that hold a fixed node: every other statement comes
    back as the same object, and the fixed ones are rewritten wherever they are nested."""
    text = "a = f(1)\n\n\ndef h():\n    for i in range(3):\n        b = [f(i), 2]\n    return 3\n\n\nc = 4\n"
    analysis = fixing.analyze_text(text, "x.py", [_Overlaps], Settings())
    assert analysis.ctx is not None
    module, applied = fixing.apply_round(analysis.ctx.module, analysis.ctx, analysis.findings)
    assert len(applied) == 2
    assert module.code == text.replace("f(", "g(")
    old, new = analysis.ctx.module.body, module.body
    assert new[2] is old[2]  # `c = 4`: untouched, not rebuilt
    loop = new[1].body.body[0]  # type: ignore[attr-defined]
    assert new[1].body.body[1] is old[1].body.body[1]  # `return 3`
    assert loop is not old[1].body.body[0]  # type: ignore[attr-defined]


def test_whitespace_shared_by_two_places_does_not_count_as_a_node_held_twice():
    """A codemod's line breaks may share one whitespace node or comma between places: nobody asks
    for their position or parent. A shared name is a node held twice."""
    from speedlint.analyzer.providers.walk import TreeIndex

    space, comma = cst.SimpleWhitespace("  "), cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [cst.Arg(cst.Name("a"), comma=comma, whitespace_after_arg=space), cst.Arg(cst.Name("b"), comma=comma), cst.Arg(cst.Name("c"))]
    shared = cst.Module([cst.SimpleStatementLine([cst.Expr(cst.Call(cst.Name("f"), args))])])
    assert shared.code == "f(a,   b, c)\n"
    assert TreeIndex(shared).holds_each_node_once()
    name = cst.Name("a")
    twice = shared.with_changes(body=[cst.SimpleStatementLine([cst.Expr(cst.Call(cst.Name("f"), [cst.Arg(name, comma=comma), cst.Arg(name)]))])])
    assert not TreeIndex(twice).holds_each_node_once()
