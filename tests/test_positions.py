"""`providers.positions` gives exactly what LibCST's `PositionProvider` gives, node for node."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.positions import _by_statements, _generated_text, node_positions
from speedlint.analyzer.providers.walk import TreeIndex, children

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


#: Texts LibCST does not round-trip exactly (its positions are those of the code it generates):
#: a form feed, a line holding only a backslash continuation, indented or whitespace lines at the
#: end. Positions of their nodes come from a whole-module pass.
NOT_ROUND_TRIPPED = [
    "x = 1\n\x0c\ndef f():\n    return 2\n",
    "x = (1 +\n  2)\n\\\ny = 3\n",
    "def f():\n    return 1\n\n    ",
    "def f():\n    return 1\n\n  # end",
    "x = 1\n\n\t  \r\n",
]
#: Texts that do round-trip, with endings and line breaks to get right.
ROUND_TRIPPED = [
    "x = 1\r",  # a last lone CR: LibCST says no trailing newline, yet generates it
    "class C:\n    def m(self):\n        return f(1)",  # no trailing newline, in a nested block
    "x = 1\r\nclass C:\r\n    y = g(2)\r\n# end",
    "x = 1 + \\\n    2\ny = [\n\\\n]\n",  # continuations after code
    "def f():\n    pass\n\n# end\n\n",
    "def f():\n\tif a:\n\t\tb()\n\telse:\n\t\tc()\n",
    "def f():\n    return 1\n\n\ndef g():\n    return 1\n",  # the same statement twice
]


def _chunks(nodes, rnd):
    i = 0
    while i < len(nodes):
        k = rnd.randint(1, 4)
        yield nodes[i : i + k]
        i += k


def _random_modules(rnd, pieces, count, most, valid_for_ast=False):
    """(text, LibCST module) for `count` texts of 1 to `most` random pieces that parse (and that
    `ast` parses too, with `valid_for_ast`)."""
    for _ in range(count):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, most)))
        try:
            if valid_for_ast:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    compile(text, "<text>", "exec", 0x400)  # (ast.PyCF_ONLY_AST)
            module = cst.parse_module(text)
        except Exception:
            continue
        yield text, module


@pytest.mark.parametrize("text", [*_sources(), *NOT_ROUND_TRIPPED, *ROUND_TRIPPED])
def test_statement_by_statement_a_few_nodes_at_a_time(text):
    """Given the text, only the statements holding the nodes are generated: every node (a sample
    of them in a big file), asked for a few at a time, gets PositionProvider's range."""
    module = cst.parse_module(text)
    tree = TreeIndex(module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _all_nodes(module)[1:]
    rnd = random.Random(len(text))
    rnd.shuffle(nodes)
    groups = list(_chunks(nodes[:600], rnd))
    placed = 0
    for group in groups:
        got = _by_statements(module, group, text, tree)
        if got is not None:
            placed += 1
        else:  # not proven: the caller's whole-module pass
            got = node_positions(module, group, text, tree)
            assert got is not None
        assert {id(n): got[id(n)] for n in group} == {id(n): expected[n] for n in group}
    if _generated_text(text, module, TreeIndex(module)) is None:
        assert placed == 0
    elif len(nodes) > 200:  # a real file: nearly every group is placed statement by statement
        assert placed >= 0.9 * len(groups)


def test_statement_by_statement_on_random_texts():
    """Texts built at random from statements, some repeated (ambiguous places), nested blocks,
    CRLF, tabs, comments and texts without a last newline: every node, alone or with a few others,
    gets PositionProvider's range, whether placed statement by statement or not."""
    pieces = [
        "x = 1\n", "\n", "# c\n", "if a:\n    pass\n", "def f():\n    return 1\n", "pass\n", "x = 1", "f(a,\n  # c\n b)\n",
        "class C:\n    y = 2\n\n    def m(self):\n        if b:\n            pass\n        return 3\n", "'''s\n'''\n",
        "@d\nclass D:\n    '''doc'''\n    # lead\n    def g(self): pass\n", "while x:\n    x -= 1\nelse:\n    y = 0\n",
        "try:\n    a()\nexcept E:\n    pass\n", "x = 1\r\n", "for i in r:\n    f(i)\n    f(i)\n", "with a:\n    b\n\n    # end\n",
        "def h():\n\tif a:\n\t\treturn [\n\t\t\t1]\n", "z = \\\n 3\n",
    ]  # fmt: skip
    rnd = random.Random(3)
    placed = asked = 0
    for text, module in _random_modules(rnd, pieces, 150, 8):
        tree = TreeIndex(module)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        nodes = tree.nodes[1:]
        groups = [[n] for n in nodes] + [rnd.sample(nodes, min(len(nodes), rnd.randint(2, 5))) for _ in range(10)]
        for group in groups:
            got = _by_statements(module, group, text, tree)
            asked += 1
            if got is None:
                continue
            placed += 1
            assert {id(n): got[id(n)] for n in group} == {id(n): expected[n] for n in group}, text
    assert placed > asked // 2


def test_generated_text_is_what_a_whole_module_pass_generates():
    """`_generated_text` answers only where it is sure, over texts built at random from pieces
    that LibCST gets wrong (form feeds, lone backslash lines, whitespace at the end...)."""
    from speedlint.analyzer.providers.positions import _NotingState

    pieces = [
        "x = 1", "\n", "\r\n", "\r", "  ", "\t", "# c", "\\\n", "\\\r\n", "\x0c", "if a:", "    ", "pass",
        "def f():", "class C:", "  y = (1,", "2)", " ", "'''s\n'''", ";", "\n\n", "z = \\\n 3", "\n    ", "\n  # c",
        "f(a,\n  # c\n b)", "'''\n\\x\n  # y\n'''", "    \n", "  \r\n",
    ]  # fmt: skip
    answered = refused = 0
    for text, module in _random_modules(random.Random(7), pieces, 6000, 10, valid_for_ast=True):
        state = _NotingState(module.default_indent, module.default_newline)
        module._codegen(state)
        generated = "".join(state.tokens) + state.popped
        got = _generated_text(text, module, TreeIndex(module))
        if got is None:
            refused += 1
        elif text:
            answered += 1
            assert got == generated, text
    assert answered > 500 and refused > 500


@pytest.mark.parametrize("text", NOT_ROUND_TRIPPED)
def test_texts_libcst_does_not_round_trip_are_refused(text):
    module = cst.parse_module(text)
    assert _generated_text(text, module, TreeIndex(module)) is None


def test_context_passes_the_text_and_the_reading():
    """A rule's `ctx.position` places statements: the module's code is not generated."""
    from unittest import mock

    from speedlint.analyzer.providers import positions

    text = (ROOT / "examples" / "cifar_like" / "train.py").read_text(encoding="utf-8")
    module = cst.parse_module(text)
    ctx = FileContext("train.py", text, module, Settings(root="."))
    assert ctx.torch.tree.nodes[0] is module  # (the reading passed along)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    node = _all_nodes(module)[-5]
    with mock.patch.object(positions, "_whole_module", side_effect=AssertionError("whole module")):
        assert ctx.position(node) == expected[node]


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
