"""The user's Python parsed (`parse_quietly`) or compiled (`compile_quietly`) without the
compiler's warnings about the code (an invalid escape sequence, `x is not ""`): they are the
user's to see when the code runs, not speedlint's to print (once per parse, at lines of texts
the user may never see). The exceptions are `ast.parse`'s and `compile`'s."""

from __future__ import annotations

import ast
import warnings

#: What parsing a text may raise besides nothing: bad syntax, a NUL byte, nesting too deep, too big.
AST_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


def parse_quietly(text: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(text, filename)`, silent."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename)


def compile_quietly(text: str, filename: str) -> None:
    """`compile(text, filename, "exec")` of a module (its code is not kept), silent."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(text, filename, "exec", dont_inherit=True)
