"""The fields of `ast` node classes that may hold child nodes, for the explicit-stack walks of
the pre-look (`prelook._Walk`, `prelook_batch._Index`): several times faster than `ast.walk`."""

from __future__ import annotations

import ast
from typing import Dict, Tuple

#: Values a walk never looks into: nothing to learn below them (a list's elements may be None or
#: a str: `Dict.keys`, `Global.names`).
LEAVES = frozenset({type(None), str, ast.Constant, ast.Load, ast.Store, ast.Del})
#: `ast` class -> the fields that may hold child nodes (filled on first need: `child_fields`)
FIELDS: Dict[type, Tuple[str, ...]] = {}


def child_fields(kind: type) -> Tuple[str, ...]:
    """The fields of `kind` that may hold child nodes (not its context or type comment)."""
    got = FIELDS.get(kind)
    if got is None:
        got = FIELDS[kind] = tuple(f for f in kind._fields if f not in ("ctx", "type_comment"))  # type: ignore[attr-defined]
    return got
