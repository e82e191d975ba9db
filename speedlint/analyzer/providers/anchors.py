"""Where a DataLoader-setting finding is anchored (rules.md, "Where a finding is anchored"): on
the keyword's line when the keyword is written in the loader call itself (`pin_memory=False`,
`num_workers=get_num_workers()`: what the user edits), on the `DataLoader(` line when it is
missing or comes through `**kwargs` (a dict built elsewhere, `kwargs.update(...)`)."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.providers.loaders import KwArg


def keyword_anchor(kw: KwArg, call: cst.Call) -> cst.CSTNode:
    """The keyword argument of `call` that holds the setting, else `call`."""
    node = kw.node
    if isinstance(node, cst.Arg) and node.keyword is not None and any(a is node for a in call.args):
        return node
    return call
