"""Loader-building helpers called with a worker count: the call site decides.

A project function that builds a `DataLoader` with `num_workers=<one of its parameters>`
(`build_dataloader(paths, num_workers=1, ...)` in `data.py`) gets its worker count from each
call: `build_dataloader(train, num_workers=2)` and `build_dataloader(val, num_workers=0)` build
two loaders, one of which loads in the training process. The loader line in the helper holds
both values, so the finding belongs on the call site that passes 0: the whole program records,
per calling module, the lines of such calls and which parameter (name, position) carries the
count (`FileSeeds.project["loader_helper_calls"]`); SPD101 reads the value passed there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

#: `context.FileContext` (not imported: the program imports this module, and the context the program)
FileContext = Any

#: A call in a summary is `[line, callee expression, positional args, keyword args, ...]`
#: (`program.C_LINE`, `C_FUNC`, `C_ARGS`, `C_KWS`; not imported: the program imports this module).
C_LINE, C_FUNC, C_ARGS, C_KWS = range(4)

#: The project key SPD101 reads.
KEY = "loader_helper_calls"
#: The loader keyword whose value the helper takes from a parameter.
WORKERS = "num_workers"


def _tail(expr: Any) -> str:
    """The last name a call's function is written with (`DataLoader`)."""
    return str(expr[2]) if expr[0] == "a" else str(expr[1]) if expr[0] == "n" else ""


def _helpers(program: Any, loader_names: FrozenSet[str]) -> Dict[int, Tuple[str, int, int, int]]:
    """fid -> (parameter, its position among the parameters, line of the loader, position of the
    parameter that is the loader's dataset or -1) for functions building a loader whose
    `num_workers` is one of their parameters."""
    out: Dict[int, Tuple[str, int, int, int]] = {}
    for fid, (_, fn) in enumerate(program.functions):
        params = fn["params"]
        for call in fn["calls"]:
            if _tail(call[C_FUNC]) not in loader_names:
                continue
            value = call[C_KWS].get(WORKERS)
            if value is not None and value[0] == "n" and value[1] in params:
                dataset = call[C_KWS].get("dataset") or (call[C_ARGS][0] if call[C_ARGS] else None)
                data_at = params.index(dataset[1]) if dataset is not None and dataset[0] == "n" and dataset[1] in params else -1
                out[fid] = (value[1], params.index(value[1]), call[C_LINE], data_at)
                break
    return out


def add_helper_seeds(hot: Any, seeds: Dict[str, Any], new_seeds: Callable[[], Any], loader_names: FrozenSet[str]) -> None:
    """Record the calls of loader-building helpers (see the module docstring); `loader_names`:
    the names loader classes are called by (`program.LOADER_NAMES`)."""
    program = hot.p
    helpers = _helpers(program, loader_names)
    if not helpers:
        return
    # (module id, function id or None for the module's own code, call edges, summary)
    units: List[Tuple[Any, Optional[int], Any, Any]] = [
        (m.id, None, hot.mod_edges[m.id], m.summary["module"]) for m in program.modules
    ]
    units += [(mid, fid, program.edges[fid], fn) for fid, (mid, fn) in enumerate(program.functions)]
    for mid, fid, edges, body in units:
        for index, callee in edges:
            found = helpers.get(callee)
            if found is None or callee == fid:
                continue
            name, position, line, data_at = found
            call = body["calls"][index]
            skip = 1 if program.fn_class[callee] is not None else 0  # a method's `self`
            passed: Optional[Any] = call[C_KWS].get(name)
            if passed is None and 0 <= position - skip < len(call[C_ARGS]):
                passed = call[C_ARGS][position - skip]
            if passed is None:
                continue
            helper_mid = program.functions[callee][0]
            shown = program.modules[helper_mid].shown
            project = seeds.setdefault(program.modules[mid].shown, new_seeds()).project
            dataset = program.functions[callee][1]["params"][data_at] if data_at >= 0 else ""
            project.setdefault(KEY, {})[str(call[C_LINE])] = [name, position - skip, shown, line, dataset, data_at - skip]


@dataclass(frozen=True)
class HelperCall:
    """A call that passes a loader-building helper its worker count."""

    arg: cst.Arg  # the argument carrying the count
    workers: int
    helper: str  # where the loader is built: "data.py:42"
    param: str
    dataset: Optional[cst.BaseExpression] = None  # what the call passes as the loader's dataset


def helper_call(ctx: FileContext, call: cst.Call) -> Optional[HelperCall]:
    """`call` passes the `num_workers` of a loader built in another module's helper, and the
    value passed is known (a single int)."""
    seeds = ctx.seeds
    table = seeds.project.get(KEY) if seeds is not None else None
    if not table:
        return None
    entry = table.get(str(ctx.position(call).start.line))
    if entry is None:
        return None
    name, position, shown, line, dataset_name, dataset_at = entry
    arg = _argument(call, name, position)
    if arg is None:
        return None
    value = ctx.values.resolve(arg.value)
    if value is None or value.single is None or not isinstance(value.single, int) or isinstance(value.single, bool):
        return None
    data = _argument(call, dataset_name, dataset_at) if dataset_name else None
    return HelperCall(arg, value.single, f"{shown}:{line}", name, data.value if data is not None else None)


def _argument(call: cst.Call, name: str, position: int) -> Optional[cst.Arg]:
    """The argument of `call` for parameter `name` (by keyword, else at `position`)."""
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    if arg is None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        arg = positional[position] if 0 <= position < len(positional) else None
    return arg
