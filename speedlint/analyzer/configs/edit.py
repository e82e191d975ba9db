"""Fixes in config files: one value changed in place, comments and formatting kept.

`value_edit(site, value)` makes the edit (None when the place cannot be edited safely: a value
reached through a YAML alias or merge, a block scalar, a value whose place is not known, or a
file kind whose spelling of the new value is not known). `apply_edits(path, text, edits)`
applies edits to a file's text and checks the result: it must still be read (by the same reader)
as the same structure, with only the edited values changed, to the new values. Otherwise the
file is left alone and the reason is given.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from speedlint.analyzer.configs.reader import Mapping, Node, Scalar, Sequence as Seq, plain, read_config


@dataclass(frozen=True)
class ConfigEdit:
    path: str  # absolute path of the config file
    line: int  # 1-based
    col: int  # 0-based
    end_col: int
    old: str  # the text replaced
    new: str  # the text written
    keys: Tuple[Any, ...]  # the key path of the value in that file
    value: Any  # what the file must read there afterwards


_BOOL_SPELLINGS = {
    "false": "true", "False": "True", "FALSE": "TRUE", "no": "yes", "No": "Yes", "NO": "YES",
    "off": "on", "Off": "On", "OFF": "ON", "0": "1", "n": "y", "N": "Y",
}


def spelling(site: Any, value: Any) -> Optional[str]:
    """How `value` is written where `site` is (keeping its quotes and its way of writing booleans)."""
    raw = site.raw
    quoted = site.style in ("single", "double")
    if isinstance(value, bool):
        if site.kind == "ini" or site.style in ("plain",):
            inner = raw.strip("'\"") if quoted else raw
            if value and inner in _BOOL_SPELLINGS:
                text = _BOOL_SPELLINGS[inner]
            elif value:
                text = "True" if site.kind == "ini" else "true"
            else:
                return None
        elif site.kind in ("json", "toml"):
            text = "true" if value else "false"
        else:
            return None
        if quoted:
            return None  # a quoted boolean is a string the code converts itself: leave it
        return text
    if isinstance(value, int):
        if site.kind == "json" and site.style != "json":
            return None
        text = str(value)
        if quoted:
            q = raw[0]
            return f"{q}{text}{q}"
        return text
    return None


def value_edit(site: Any, value: Any) -> Optional[ConfigEdit]:
    """The edit that makes the config file hold `value` where `site` is."""
    if not site.editable:
        return None
    new = spelling(site, value)
    if new is None or new == site.raw:
        return None
    return ConfigEdit(site.path, site.line, site.col, site.end_col, site.raw, new, tuple(site.keys), _reads_as(site, new))


def _reads_as(site: Any, new: str) -> Any:
    """What the file's reader makes of the new text at that place."""
    if site.style in ("single", "double") or site.kind == "ini":
        return new[1:-1] if site.style in ("single", "double") else new
    if site.kind == "json":
        import json

        return json.loads(new)
    if site.kind == "toml":
        from speedlint.analyzer.configs.reader import _toml_value

        return _toml_value(new)
    from speedlint.analyzer.configs.reader import yaml_scalar_value

    return yaml_scalar_value(new)


def apply_edits(path: str, text: str, edits: Sequence[ConfigEdit]) -> Tuple[Optional[str], str]:
    """(new text, "") or (None, why it is left alone)."""
    unique: List[ConfigEdit] = []
    for e in edits:
        if e in unique:
            continue
        if any(u.line == e.line and u.col < e.end_col and e.col < u.end_col for u in unique):
            return None, "two fixes change the same value differently"
        unique.append(e)
    before = read_config(path, text)
    if not before.understood:
        return None, f"not understood ({before.problem})"
    lines = text.split("\n")
    for e in sorted(unique, key=lambda e: (e.line, -e.col)):
        if not 0 < e.line <= len(lines) or lines[e.line - 1][e.col:e.end_col] != e.old:
            return None, "the file changed since it was checked"
    for e in sorted(unique, key=lambda e: (e.line, e.col), reverse=True):
        line = lines[e.line - 1]
        lines[e.line - 1] = line[: e.col] + e.new + _keep_comment_column(line[e.end_col:], len(e.new) - len(e.old))
    new_text = "\n".join(lines)
    after = read_config(path, new_text)
    if not after.understood:
        return None, f"the edited file would not be understood ({after.problem})"
    expected = copy.deepcopy(plain(before.root))
    for e in unique:
        if not _set(expected, e.keys, e.value):
            return None, "the edited value is not where it was expected"
    if not _same(plain(after.root), expected):
        return None, "the edited file would not read as the same structure"
    return new_text, ""


def _keep_comment_column(rest: str, grown: int) -> str:
    """The text after an edited value, with the spaces before a trailing comment adjusted so
    the comment stays in its column (aligned comments stay aligned; at least one space)."""
    stripped = rest.lstrip(" ")
    spaces = len(rest) - len(stripped)
    if not stripped.startswith(("#", ";")) or spaces == 0:
        return rest
    return " " * max(1, spaces - grown) + stripped


def _set(data: Any, keys: Tuple[Any, ...], value: Any) -> bool:
    for key in keys[:-1]:
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        else:
            return False
    last = keys[-1] if keys else None
    if isinstance(data, dict) and last in data:
        data[last] = value
        return True
    if isinstance(data, list) and isinstance(last, int) and 0 <= last < len(data):
        data[last] = value
        return True
    return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # nan
    return type(a) is type(b) and a == b


def node_at(root: Optional[Node], keys: Tuple[Any, ...]) -> Optional[Node]:
    node = root
    for key in keys:
        if isinstance(node, Mapping):
            node = node.get(str(key))
        elif isinstance(node, Seq) and isinstance(key, int) and 0 <= key < len(node.items):
            node = node.items[key]
        else:
            return None
    return node


__all__ = ["ConfigEdit", "apply_edits", "node_at", "spelling", "value_edit", "Scalar"]
