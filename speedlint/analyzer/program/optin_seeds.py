"""The link half of opt-in AMP (SPD301): an option declared in one module that switches on an
autocast in another (`main.py` declares `--use_amp` and passes `args` to `Exp(args)`; the class
runs `if self.args.use_amp: with autocast(): ...`).

The module that declares the option gets, under `KEY` in its seeds, `{dest: [[path, line], ...]}`:
the autocasts gated by a namespace attribute of the option's name (`summary_optin`) in a class
(or its subclass), function or module that the declaring module passes a namespace to (its
`settings` summary's `receivers`). The rule decides from the option's own default (off, on, set
in code) in that file; a sibling script that declares the same option but never hands its
namespace to the gated code gets nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Set

from speedlint.analyzer.program.link import Program
from speedlint.analyzer.program.summary_optin import KEY


def _reached(p: Program, mid: int, receivers: List[str]) -> Set[str]:
    """What module `mid` hands a namespace to: "C:cid" (with its bases), "F:fid", "M:mid"."""
    out: Set[str] = set()
    for name in receivers:
        for t in p.symbol(mid, name):
            if t.startswith("C:"):
                out.update(f"C:{c}" for c in p.mro(int(t[2:])))
            elif t[:2] in ("F:", "M:"):
                out.add(t)
    return out


def _holder(p: Program, mid: int, cls: Any, fn: Any) -> str:
    """The class, module-level function or module that holds a gate."""
    m = p.modules[mid]
    if cls is not None and cls in m.cids:
        return f"C:{m.cids[cls]}"
    fids = m.fids_by_q.get(fn) if cls is None and fn is not None else None
    return f"F:{fids[0]}" if fids else f"M:{mid}"


def add_amp_gate_seeds(p: Program, project: Callable[[str], Dict[str, Any]]) -> None:
    """The gated autocasts each option-declaring module's namespace reaches, into its seeds."""
    gates: Dict[str, List[List[Any]]] = {}  # attribute -> [[holder, module id, line]]
    for m in p.modules:
        for attr, line, cls, fn in m.summary.get(KEY) or ():
            gates.setdefault(attr, []).append([_holder(p, m.id, cls, fn), m.id, line])
    if not gates:
        return
    for m in p.modules:
        settings = m.summary.get("settings") or {}
        declared = m.summary.get("options") or {}  # option -> its defaults (on by default: no opt-in)
        dests = {d for d, values in declared.items() if d in gates and True not in values}
        dests |= {o[2] for o in settings.get("options", ()) if o[2] in gates and o[2] not in declared}
        if not dests or not settings.get("receivers"):
            continue
        reached = _reached(p, m.id, settings["receivers"])
        found: Dict[str, List[List[Any]]] = {}
        for dest in sorted(dests):
            for holder, gmid, line in gates[dest]:
                if gmid != m.id and (holder in reached or f"M:{gmid}" in reached):
                    found.setdefault(dest, []).append([p.modules[gmid].shown, line])
        if found:
            project(m.shown)[KEY] = found
