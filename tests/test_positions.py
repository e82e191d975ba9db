"""`providers.positions` gives exactly what LibCST's `PositionProvider` gives, node for node."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.positions import node_positions
from speedlint.analyzer.providers.walk import children

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    [*(ROOT / "fixtures").rglob("*.py"), *(ROOT / "examples").rglob("*.py"), *(ROOT / "speedlint" / "analyzer").glob("*.py")]
)
#: Syntax whose ranges LibCST narrows or hoists (decorators, comments, `elif`, CRLF, lone CR...)
TRICKY = [
    "@dec\n# lead\n@other(1)\ndef f(a, *, b=2) -> int:  # c\n    '''doc'''\n    return (a\n        + b)\n",
    "if a:\n    pass\nelif b:\n    x = 1\nelse:\n    y = [1,\n 2]\n",
    "x = 1\r\ny = f(\r\n  2)\r\n",
    "class C(B, metaclass=M):\n\n    # comment\n    @property\n    def p(self): return self._p\n",
    "try:\n    a()\nexcept (E, F) as e:\n    raise\nelse:\n    b()\nfinally:\n    c()\n",
    "with a as b, c() as d:\n    x = f'{y!r:>{w}}'\nasync def g():\n    async for i in h():\n        await i\n",
    "lambda x, *a, **k: (x, *a)\nx = [i for i in range(3) if i]\ndel x[0], y\n",
    "",
    "# only a comment",
]


def _all_nodes(module: cst.Module):
    """Every node, in visiting order (preorder)."""
    out, stack = [], [module]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children(node)))
    return out


def _sources():
    for p in SOURCES:
        yield pytest.param(p.read_text(encoding="utf-8"), id=str(p.relative_to(ROOT)))
    for i, text in enumerate(TRICKY):
        yield pytest.param(text, id=f"tricky-{i}")


@pytest.mark.parametrize("text", list(_sources()))
def test_every_node_at_once_and_some_alone(text):
    module = cst.parse_module(text)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)
    got = node_positions(module, nodes)
    assert got is not None
    assert {id(n): got[id(n)] for n in nodes} == {id(n): expected[n] for n in nodes}
    # asked for alone, a node gets the same range (hoisted ranges included)
    for node in random.Random(len(text)).sample(nodes, min(40, len(nodes))):
        alone = node_positions(module, [node])
        assert alone is not None and alone[id(node)] == expected[node]


def test_context_position_falls_back_to_all_positions_after_a_few_passes():
    text = (ROOT / "examples" / "cifar_like" / "train.py").read_text(encoding="utf-8")
    module = cst.parse_module(text)
    ctx = FileContext("train.py", text, module, Settings(root="."))
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)[::97]
    for node in nodes:
        assert ctx.position(node) == expected[node]
    assert ctx._all_positions is not None  # one-off passes stopped: one full pass instead
    with pytest.raises(KeyError):
        ctx.position(cst.Name("not_in_the_tree"))


def test_tree_index_reads_a_very_deep_tree_too():
    from speedlint.analyzer.providers.walk import TreeIndex

    deep = cst.parse_module("x = " + " + ".join(["a"] * 1500) + "\n")  # too deep for one call per level
    index = TreeIndex(deep)
    assert [id(n) for n in index.nodes] == [id(n) for n in _all_nodes(deep)]
    assert index.ends[0] == len(index.nodes) and index.parents[0] == -1
    shallow = cst.parse_module("x = a + b\n")
    small = TreeIndex(shallow)
    assert [id(n) for n in small.nodes] == [id(n) for n in _all_nodes(shallow)]
    assert all(small.nodes[p] is small.parent(n) for n, p in zip(small.nodes[1:], small.parents[1:]))


@pytest.mark.parametrize("text", list(_sources()))
def test_tree_index_builders_match_the_stack_reading(text):
    from speedlint.analyzer.providers.walk import TreeIndex

    module = cst.parse_module(text)
    built = TreeIndex(module)
    stacked = object.__new__(TreeIndex)
    stacked._read_with_a_stack(module)
    assert [id(n) for n in built.nodes] == [id(n) for n in stacked.nodes] == [id(n) for n in _all_nodes(module)]
    assert built.ends == stacked.ends and built.parents == stacked.parents
