"""The rule registry: discovered by walking `speedlint.rules`, never kept by hand.

Selection (`--select`, `--ignore`, config files) reads only the `catalogue`: each rule's code,
name, status and whether it is on by default. A run answered from the cache needs nothing else
of the rules, so it can be given the catalogue as remembered by an earlier run of the same code
(`use_catalogue`, see `cache.load_catalogue`) and never import a rule module (nor LibCST).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from speedlint.analyzer.findings import Status

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.rule import Rule


class SelectionError(ValueError):
    """A --select/--ignore entry that names no rule."""


@lru_cache(maxsize=1)
def all_rules() -> Tuple[Type[Rule], ...]:
    import speedlint.rules as pkg
    from speedlint.analyzer.rule import Rule

    found: Dict[str, Type[Rule]] = {}
    for info in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Rule)
                and obj is not Rule
                and obj.__module__ == module.__name__
                and getattr(obj, "code", None)
            ):
                found[obj.code] = obj
    return tuple(sorted(found.values(), key=lambda r: r.code))


@dataclass(frozen=True)
class RuleInfo:
    """What selection needs to know of a rule."""

    code: str
    name: str
    status: Status
    default_enabled: bool

    def to_json(self) -> List[object]:
        return [self.code, self.name, self.status.value, self.default_enabled]

    @classmethod
    def from_json(cls, data: Sequence[object]) -> "RuleInfo":
        code, name, status, default_enabled = data
        return cls(str(code), str(name), Status(status), bool(default_enabled))


_CATALOGUE: List[Tuple[RuleInfo, ...]] = []  # at most one: the rules' own, or a remembered one


def catalogue() -> Tuple[RuleInfo, ...]:
    """Every rule's code, name, status and default, in code order."""
    if not _CATALOGUE:
        _CATALOGUE.append(tuple(RuleInfo(r.code, r.name, r.status, r.default_enabled) for r in all_rules()))
    return _CATALOGUE[0]


def use_catalogue(infos: Sequence[RuleInfo]) -> None:
    """Select from `infos` (remembered by an earlier run of this very code) instead of importing
    the rules; ignored once the catalogue is known."""
    if not _CATALOGUE:
        _CATALOGUE.append(tuple(infos))


def imported_catalogue() -> Optional[Tuple[RuleInfo, ...]]:
    """The catalogue when it was read from the rules in this process (worth remembering), else None."""
    return catalogue() if all_rules.cache_info().currsize else None


def rule_by_code_or_name(key: str) -> Type[Rule]:
    for rule in all_rules():
        if key.upper() == rule.code or key.lower() == rule.name:
            return rule
    raise KeyError(key)


def _matches(rule: RuleInfo, selector: str) -> bool:
    if selector.upper() == "ALL":
        return True
    return rule.code.startswith(selector.upper()) or rule.name == selector.lower()


def _exact(rule: RuleInfo, selector: str) -> bool:
    return selector.upper() == rule.code or selector.lower() == rule.name


def validate_selectors(selectors: Iterable[str]) -> None:
    for s in selectors:
        if not any(_matches(r, s) for r in catalogue()):
            raise SelectionError(f"unknown rule selector `{s}` (expected a code prefix like SPD1, a rule name, or ALL)")


def select_rules(
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    extend_select: Sequence[str] = (),
    preview: bool = False,
) -> List[Type[Rule]]:
    """The enabled rules (`select_codes`)."""
    by_code = {r.code: r for r in all_rules()}
    return [by_code[code] for code in select_codes(select, ignore, extend_select, preview)]


def select_codes(
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    extend_select: Sequence[str] = (),
    preview: bool = False,
) -> Tuple[str, ...]:
    """The codes of the enabled rules, in code order.

    Default: every stable, default-enabled rule (preview rules too with `preview`). A rule that is
    off by default or in preview is enabled by naming it exactly (its code or name).
    """
    validate_selectors([*select, *ignore, *extend_select])
    chosen: List[str] = []
    selectors = list(select) or ["ALL"]
    selectors += list(extend_select)
    for rule in catalogue():
        exact = any(_exact(rule, s) for s in selectors)
        if not (exact or any(_matches(rule, s) for s in selectors)):
            continue
        if not exact:
            if not rule.default_enabled:
                continue
            if rule.status is Status.PREVIEW and not preview:
                continue
        if any(_matches(rule, s) for s in ignore):
            continue
        chosen.append(rule.code)
    return tuple(chosen)
