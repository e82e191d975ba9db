"""The walks of the summary phase (`program.summary.summarize`, `configs.summary`, `program.loader_summary`):
each visits what the plain `ast` walk it replaces visited, in the same order."""

import ast
import sys
from pathlib import Path

import pytest

from speedlint.analyzer.configs.summary import all_statements, block_statements, walk
from speedlint.analyzer.program.loader_summary import _MOVES
from speedlint.analyzer.program.schema import CONDITIONAL, GUARDED
from speedlint.analyzer.program import summary, summary_text
from speedlint.analyzer.program.summary import summarize

ROOT = Path(__file__).resolve().parent.parent
#: Real code with every kind of statement and expression: speedlint's own sources and fixtures.
SOURCES = sorted([*ROOT.glob("speedlint/**/*.py"), *ROOT.glob("fixtures/projects/**/*.py")])

ODD = '''
try:
    import a
except ImportError as e:
    b = 1
else:
    c = 2
finally:
    d = 3
for i in x:
    pass
else:
    e = 4
with open(p) as f, g() as (h, k):
    while f():
        class C:
            def m(self):
                async def inner():
                    async with z:
                        async for q in r:
                            yield q
                return [y for y in self if y] or (lambda: 0)
'''
MATCH = '''
match v:
    case [1, *rest] if rest:
        w = 5
    case {"k": kk, **more}:
        pass
'''


def _trees():
    yield ast.parse(ODD)
    if sys.version_info >= (3, 10):
        yield ast.parse(MATCH)
    for path in SOURCES:
        yield ast.parse(path.read_text())


def _all_statements_reference(tree):
    """`all_statements` as it was: a generator over an explicit stack."""
    todo = [(s, None) for s in reversed(tree.body)]
    while todo:
        stmt, fn = todo.pop()
        yield stmt, fn
        inner = stmt if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                for child in reversed(block):
                    if isinstance(child, ast.stmt):
                        todo.append((child, inner))
                    elif isinstance(child, ast.excepthandler):
                        todo.extend((c, inner) for c in reversed(child.body))
        if isinstance(stmt, getattr(ast, "Match", ())):
            for case in stmt.cases:
                todo.extend((c, inner) for c in reversed(case.body))


def _block_statements_reference(body):
    out = []
    todo = list(reversed(body))
    while todo:
        stmt = todo.pop()
        out.append(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                todo.extend(reversed([s for s in inner if isinstance(s, (ast.stmt, ast.excepthandler))]))
    return [s for s in out if isinstance(s, ast.stmt)]


def test_walk_is_ast_walk_as_a_list():
    assert len(SOURCES) > 100
    for tree in _trees():
        got, want = walk(tree), list(ast.walk(tree))
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))


def test_statement_walks_keep_their_order():
    for tree in _trees():
        got = all_statements(tree)
        want = list(_all_statements_reference(tree))
        assert [(id(s), id(f)) for s, f in got] == [(id(s), id(f)) for s, f in want]
        for body in [tree.body, *(s.body for s, _ in got if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
            assert [id(s) for s in block_statements(body)] == [id(s) for s in _block_statements_reference(body)]


def test_statement_blocks_are_the_bodies_ast_walk_finds():
    for tree in _trees():
        want = {id(b) for node in ast.walk(tree) if isinstance(getattr(node, "body", None), list)
                for b in (node.body, getattr(node, "orelse", None) or [], getattr(node, "finalbody", None) or []) if b}
        assert {id(b) for b in summary._statement_blocks(tree) if b} == want


@pytest.mark.parametrize("text", [
    "x.cuda()", "x.to(d)", "x.type(torch.cuda.FloatTensor)", "x.type(\nt.cuda.F)", "x.type(a) + cuda", "x.to\n(d)",
    "x.type(a\r, cuda)", "x.type(a\x0c, cuda)", "nothing here",
])
def test_moves_in_joined_lines_is_moves_in_each_line(text):
    """`_moved_parameters` searches a function's lines joined by newlines."""
    lines = text.splitlines()
    each = any(_MOVES.search(line) for line in lines)
    assert bool(_MOVES.search("\n".join(lines))) == each


@pytest.mark.parametrize("text", [
    "nn.Conv2d(3, 8, 3)", "ConvTranspose1d", "LazyConv3d(8)", "F.conv2d(x, w)", "import torchvision.models as m",
    "timm.create_model('resnet18')", "import segmentation_models_pytorch as smp",
])
def test_conv_text_hints_are_in_every_match(text):
    match = summary_text.CONV_TEXT.search(text)
    hint = next(h for h in summary_text._CONV_WORDS if h in match.group(0))
    assert match.group(0) in summary_text._CONV_WORDS[hint]  # the words looked for where the hint occurs
    assert summary_text.text_facts(text)["conv"]


@pytest.mark.parametrize("text", [
    "T.Resize(224)", "RandomResizedCrop(224)", "RandomCrop(32)", "CenterCrop(224)", "CIFAR10(root)", "CIFAR100",
    "MNIST", "FashionMNIST", "ImageFolder(root)",
])
def test_fixed_shape_hints_are_in_every_match(text):
    match = summary_text.FIXED_SHAPES.search(text)
    parts = {**summary_text._SHAPE_CALLS, **summary_text._SHAPE_DATASETS}
    hint = next(h for h in parts if h in match.group(0))
    assert (match.group(1) or match.group(2)) in parts[hint]  # the words looked for where the hint occurs
    assert summary_text.text_facts(text)["fixed_shapes"]


@pytest.mark.parametrize("path", SOURCES[::7])
def test_text_facts_are_their_regexes(path):
    """`text_facts` finds exactly what its regexes find (it searches the literals they hold)."""
    text = path.read_text()
    for part in (text, *(line for line in text.splitlines() if line.strip())):
        got = summary_text.text_facts(part)
        assert got["conv"] == bool(summary_text.CONV_TEXT.search(part))
        assert got["fixed_shapes"] == bool(summary_text.FIXED_SHAPES.search(part))


FLAGS = '''
def step(model, x, i):
    y = model.a(x) if i % 10 == 0 else (model.b(x) or model.c(x) and model.d(model.e(x) if i else model.f(x)))
    z = model.g(x) or (model.h(x) if model.k(x) else model.m(x))
    if model.n(x):
        w = [model.p(v) for v in x] if model.q(x) else model.r(x)
'''


def test_conditional_and_short_circuit_flags_of_calls():
    """IfExp / BoolOp flags in `_exprs` (marked on its stack): a branch after an interval test and
    the operands that `and`/`or` may skip are GUARDED, and the rest of the expression is not."""
    calls = {c[1][-1]: c[5] for c in summarize(FLAGS)["functions"][0]["calls"]}
    assert "".join(calls) == "dfecbamhkgnrpq"  # depth first, the last operand first
    assert calls["a"] == GUARDED  # the body after an interval test
    assert calls["b"] == 0  # the `else` and the first operand of an `or`
    assert calls["c"] == calls["d"] == calls["e"] == calls["f"] == GUARDED
    assert calls["g"] == 0 and calls["h"] == calls["k"] == calls["m"] == GUARDED
    assert calls["n"] == 0
    assert calls["p"] == calls["q"] == calls["r"] == CONDITIONAL  # under the `if`
