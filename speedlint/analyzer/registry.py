"""The rule registry: discovered by walking `speedlint.rules`, never kept by hand."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache
from typing import Dict, Iterable, List, Sequence, Tuple, Type

from speedlint.analyzer.rule import Rule, Status


class SelectionError(ValueError):
    """A --select/--ignore entry that names no rule."""


@lru_cache(maxsize=1)
def all_rules() -> Tuple[Type[Rule], ...]:
    import speedlint.rules as pkg

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


def rule_by_code_or_name(key: str) -> Type[Rule]:
    for rule in all_rules():
        if key.upper() == rule.code or key.lower() == rule.name:
            return rule
    raise KeyError(key)


def _matches(rule: Type[Rule], selector: str) -> bool:
    if selector.upper() == "ALL":
        return True
    return rule.code.startswith(selector.upper()) or rule.name == selector.lower()


def _exact(rule: Type[Rule], selector: str) -> bool:
    return selector.upper() == rule.code or selector.lower() == rule.name


def validate_selectors(selectors: Iterable[str]) -> None:
    rules = all_rules()
    for s in selectors:
        if not any(_matches(r, s) for r in rules):
            raise SelectionError(f"unknown rule selector `{s}` (expected a code prefix like SPD1, a rule name, or ALL)")


def select_rules(
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    extend_select: Sequence[str] = (),
    preview: bool = False,
) -> List[Type[Rule]]:
    """The enabled rules.

    Default: every stable, default-enabled rule (preview rules too with `preview`). A rule that is
    off by default or in preview is enabled by naming it exactly (its code or name).
    """
    validate_selectors([*select, *ignore, *extend_select])
    chosen: List[Type[Rule]] = []
    selectors = list(select) or ["ALL"]
    selectors += list(extend_select)
    for rule in all_rules():
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
        chosen.append(rule)
    return chosen
