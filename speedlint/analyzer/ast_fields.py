"""The fields of `ast` node classes that a walk follows, for the explicit-stack walks of the
pre-look (`prelook._Walk`, `prelook_batch._Index`) and the summaries' own walks: several times
faster than `ast.walk`. Each walk has its `FieldTable`: the fields it skips differ. And where a
node starts in source order (`source_start`), which numbers functions and loops the way LibCST's
preorder does."""

from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Optional, Tuple


class FieldTable(Dict[type, Tuple[str, ...]]):
    """`ast` class -> the fields of it a walk follows (all but `skip`), filled on first need:
    `table[kind]`. `fixed`: classes whose fields are given (`()`: nothing below them is walked)."""

    def __init__(self, skip: FrozenSet[str], fixed: Optional[Dict[type, Tuple[str, ...]]] = None) -> None:
        super().__init__(fixed or {})
        self.skip = skip

    def __missing__(self, kind: type) -> Tuple[str, ...]:
        got = self[kind] = tuple(f for f in getattr(kind, "_fields", ()) if f not in self.skip)
        return got


#: Values a walk never looks into: nothing to learn below them (a list's elements may be None or
#: a str: `Dict.keys`, `Global.names`).
LEAVES = frozenset({type(None), str, ast.Constant, ast.Load, ast.Store, ast.Del})
#: `ast` class -> the fields that may hold child nodes (not its context or type comment)
FIELDS = FieldTable(frozenset({"ctx", "type_comment"}))


def source_start(node: ast.AST) -> Tuple[int, int]:
    """Where `node` starts in the source, its decorators included: sorting functions or loops by
    it numbers them in source order, as LibCST's preorder walk meets them (the program's
    function and loop ordinals, `FileSeeds`)."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        first = decorators[0]
        return (first.lineno, first.col_offset - 1)  # the `@` is one column to the left
    return (node.lineno, node.col_offset)  # type: ignore[attr-defined]
