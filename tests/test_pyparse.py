"""The user's code is parsed and compiled without printing the compiler's warnings about it
(`pyparse`): an invalid escape sequence or `x is not ""` is the user's to see when the code runs."""

from __future__ import annotations

import json
import warnings

import pytest

from speedlint.analyzer.pyparse import AST_ERRORS, compile_quietly, parse_quietly

NOISY = 'import re\n\n\ndef f(x):\n    if x is not "":\n        return re.match("\\d", x)\n'


def _warned(call) -> list:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return [w for w in seen if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]


def test_parse_and_compile_are_silent_where_python_warns():
    assert _warned(lambda: compile(NOISY, "x.py", "exec"))  # (this text does make Python warn)
    assert not _warned(lambda: parse_quietly(NOISY))
    assert not _warned(lambda: compile_quietly(NOISY, "x.py"))
    assert parse_quietly(NOISY).body[1].name == "f"  # type: ignore[attr-defined]


def test_what_cannot_be_parsed_raises_one_of_the_errors_callers_catch():
    for bad in ("def f(:\n", "x = 1\x00\n", "(" * 300 + ")" * 300 + "\n"):
        with pytest.raises(AST_ERRORS):
            parse_quietly(bad)
    with pytest.raises(SyntaxError):
        compile_quietly("return 1\n", "x.py")  # (parses; does not compile)


def test_every_parse_of_the_user_s_code_is_silent():
    """The places that parse the user's code on their own: the summary, the pre-look, the
    unused-option check of a lone file, a notebook's cells (their syntax, their imports)."""
    from speedlint.analyzer import notebook
    from speedlint.analyzer.prelook import AstFacts
    from speedlint.analyzer.program.summary import summarize
    from speedlint.analyzer.settings_use import unused_options_alone

    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": NOISY}]
    doc = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()
    nb = notebook.Notebook.parse(doc)
    calls = {
        "summary": lambda: summarize(NOISY),
        "pre-look": lambda: AstFacts(None, NOISY).tree,
        "unused options": lambda: unused_options_alone(NOISY),
        "notebook": lambda: notebook.Notebook.parse(doc),
        "notebook imports": lambda: notebook._top_level_imports(nb.cells[0]),
    }
    assert {name: _warned(call) for name, call in calls.items()} == {name: [] for name in calls}
