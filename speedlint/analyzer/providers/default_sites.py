"""Where a setting's default is written: the [config-source] line of a value the code reads.

A finding on code that reads a setting (`torch.backends.cudnn.deterministic =
args.torch_deterministic`, `if self.args.use_amp:`, `num_workers=args.num_workers`) says what
is slow; the line the user edits to change it is where the default is written:
- an `argparse` option's `default=` (or its `add_argument` call for a `store_true` flag) in this
  file (an option declared in another module of the program, `main.py` parses and
  `exp/trainer.py` reads, is not reported there; SPD301 reports it in `main.py` from the whole
  program's seeds, `program.optin_seeds`, which say what the option gates);
- a field of a config dataclass (`@dataclass class Args: torch_deterministic: bool = True`) that
  `tyro.cli(Args)`, `simple_parsing`, `HfArgumentParser` or a plain `Args()` fills.

`default_site` answers from the traced `Value` (`providers.values`): its `origin`. Rules report the default's line as a second finding next to
the one on the code (`report_default`), once per default and rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from speedlint.analyzer.providers.configs import ConfigSite
from speedlint.analyzer.providers.names import dotted

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.providers.values import Value

#: Decorators and bases that make a class a config record whose field defaults are settings.
_RECORD_DECORATORS = frozenset({"dataclass", "dataclasses.dataclass", "attr.s", "attrs.define", "define", "frozen"})
_RECORD_BASES = frozenset({"BaseModel", "pydantic.BaseModel", "BaseSettings", "Serializable", "TypedArgs"})


@dataclass(frozen=True)
class DefaultSite:
    """The written default of a setting: a node of this file."""

    node: Optional[cst.CSTNode]
    at: Optional[ConfigSite]  # (a config-file line; not used for Python defaults yet)
    #: how the message names it (`--use_amp`, `Args.torch_deterministic`)
    name: str
    value: Any

    @property
    def key(self) -> Any:
        return (self.at.path, self.at.line) if self.at is not None else id(self.node)


def default_site(ctx: "FileContext", value: Optional["Value"], reader: Optional[cst.BaseExpression] = None) -> Optional[DefaultSite]:
    """Where the single default of `value` is written, when it is an option's or a config
    record's default (None otherwise: literals, locals, config files, several values). With
    `reader` (the expression the code reads): None when its namespace is also filled from a
    config file (`vars(args).update(cfg)`): the file is where its settings live."""
    if value is None or len(value.options) != 1:
        return None
    if reader is not None and _filled_from_a_file(ctx, reader):
        return None
    shown = value.options[0]
    origin = value.origin
    if origin is None:
        return None
    facts = ctx.torch
    if value.kind == "argparse":
        call = origin if isinstance(origin, cst.Call) else facts.parent(origin)
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute) or call.func.attr.value != "add_argument":
            return None
        flags = [a.value.value.strip("\"'") for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)]
        longs = [f for f in flags if f.startswith("--")]
        return DefaultSite(origin, None, (longs or flags or ["the option"])[0], shown)
    # a field of a config record: its statement sits directly in the class body
    stmt = facts.parent(origin)
    if not isinstance(stmt, (cst.AnnAssign, cst.Assign)) or stmt.value is not origin:
        return None
    cls = next((a for a in facts.ancestors(stmt) if isinstance(a, (cst.ClassDef, cst.FunctionDef))), None)
    if not isinstance(cls, cst.ClassDef) or not _is_record(cls):
        return None
    target = stmt.target if isinstance(stmt, cst.AnnAssign) else stmt.targets[0].target
    field = dotted(target)
    if field is None:
        return None
    return DefaultSite(origin, None, f"{cls.name.value}.{field}", shown)


def _filled_from_a_file(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    lookup = ctx.config_values.configs
    if lookup is None or not lookup.active:
        return False
    node = expr
    while isinstance(node, cst.Attribute) and not (isinstance(node.value, cst.Name) and node.value.value == "self"):
        node = node.value
    return isinstance(node, (cst.Name, cst.Attribute)) and lookup.filled(node)


def _is_record(cls: cst.ClassDef) -> bool:
    for d in cls.decorators:
        expr = d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator
        if dotted(expr) in _RECORD_DECORATORS:
            return True
    return any(dotted(b.value) in _RECORD_BASES for b in cls.bases)


def report_default(rule: Any, site: Optional[DefaultSite], message: str, reader: cst.CSTNode, **kwargs: Any) -> None:
    """Report `site` (the default behind a finding on `reader`) once per rule: on its node in
    this file, or on its line in another module (`reader` shown as the code that reads it)."""
    if site is None:
        return
    done = rule.__dict__.setdefault("_default_sites_done", set())
    if site.key in done:
        return
    done.add(site.key)
    text = f"{message} (the default of `{site.name}`, {site.value!r}, decides it)"
    if site.at is not None:
        rule.report(reader, text, at=site.at, **kwargs)
        return
    ctx = rule.ctx
    line = ctx.position(reader).start.line
    code = ctx.module.code_for_node(reader).strip().splitlines()[0][:60]
    rule.report(site.node, f"{text} (read at line {line})", related=((ctx.path, line, code),), **kwargs)
