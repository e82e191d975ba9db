"""The read-only, compact form of a per-file summary (`compact`): lists become tuples, dicts
`FrozenDict`s, calls `Call`s, equal parts one object, strings interned.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple

from speedlint.analyzer.program.schema import C_HOST, Call


class FrozenDict(dict):
    """A dict of a compact summary: read-only (the summaries of a run are shared by everything
    that reads them), hashable, so that equal ones are one object (`{}` is most keyword maps)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __reduce__(self) -> Tuple[Any, ...]:  # pickled to and from the workers
        return (FrozenDict, (dict(self),))

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a summary is read-only")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _read_only  # type: ignore[assignment]


#: `Call(*fields)` without the checks of `Call._make` (the fields are the summarizer's own).
_new_call = tuple.__new__

def compact(summary: Dict[str, Any], shared: Optional[Dict[Any, Any]] = None) -> Dict[str, Any]:
    """A summary in its read-only, compact form: lists become tuples and dicts `FrozenDict`s,
    equal ones of names and whole numbers are one object (`["n", "self"]` and `{}` are written
    thousands of times in a big file), strings are interned. A third of the memory of the plain
    form (the whole program holds the summaries of every file at once: about 8x the source as
    lists). Applied to summaries made here and to those read back from the cache (JSON gives
    lists again). The summary itself stays a plain dict (a notebook's cells are added to it).
    `shared`: the parts already made for other files, to share theirs too (a worker passes one
    per batch of files, which pickling keeps shared)."""
    memo: Dict[Any, Any] = {} if shared is None else shared
    intern = sys.intern
    empty = memo.setdefault(FrozenDict(), FrozenDict())  # (most keyword maps)
    _typed_calls(summary)

    def go(obj: Any) -> Tuple[Any, bool]:
        # (compact form, whether it may be shared: `True == 1` and `1.0 == 1`, so only containers
        # of strings, None, ints that are not bools, and shareable containers are shared).
        # Strings, numbers and None inside a container are taken in place (most items are
        # names): one call per container, not per item.
        kind = obj.__class__
        if kind is str:
            return intern(obj), True
        if kind is list or kind is tuple or kind is Call:
            if not obj:
                return (), True
            items = []
            shareable = True
            for item in obj:
                k = item.__class__
                if k is str:
                    items.append(intern(item))
                elif k is int or item is None:
                    items.append(item)
                elif k is list or k is tuple or k is dict or k is FrozenDict or k is Call:
                    value, ok = go(item)
                    items.append(value)
                    shareable = shareable and ok
                else:  # a bool, a float, ...: kept, and the container is not shared
                    items.append(item)
                    shareable = False
            out: Any = _new_call(Call, items) if kind is Call else tuple(items)
        elif kind is dict or kind is FrozenDict:
            if not obj:
                return empty, True
            shareable = True
            entries = {}
            for key, v in obj.items():
                k = v.__class__
                if k is str:
                    value, ok = intern(v), True
                elif k is int or v is None:
                    value, ok = v, True
                elif k is list or k is tuple or k is dict or k is FrozenDict:
                    value, ok = go(v)
                else:
                    value, ok = v, False
                entries[intern(key) if key.__class__ is str else key] = value
                shareable = shareable and ok and key.__class__ is not bool
            out = FrozenDict(entries)
        else:
            return obj, kind is int or obj is None
        if shareable:
            got = memo.setdefault(out, out)
            if got.__class__ is out.__class__:  # (a call equals the plain tuple of its fields)
                return got, True
        return out, False

    try:
        return {k: go(v)[0] for k, v in summary.items()}
    finally:
        # `go` refers to itself through its closure: a cycle that would keep `memo` (tens of MiB
        # for a batch of files) until the cyclic collector runs, which rests while summarising
        go = None  # type: ignore[assignment]


def _typed_calls(summary: Dict[str, Any]) -> None:
    """The calls of a summary as `Call`s (the summarizer's lists, or JSON's from the cache); a
    summary already compact has them."""
    for body in (summary.get("module"), *summary.get("functions", ())):
        if body.__class__ is dict and "calls" in body:
            body["calls"] = [c if c.__class__ is Call else _new_call(Call, c if len(c) > C_HOST else (*c, ())) for c in body["calls"]]
