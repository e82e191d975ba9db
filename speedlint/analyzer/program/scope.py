"""Which program a module belongs to: facts "set somewhere in the project", per entry script.

A repository is often many programs: `train.py` and `examples/dreambooth.py` share the library
package but not each other's settings. A fact a module sets (`cudnn.benchmark = True`,
`torch.set_float32_matmul_precision("high")`, a fixed-size `Resize` in a dataset) holds for
the programs that import it: an entry script that imports the module (transitively, through
`import`, `from ... import` and plugin loads), and every module such an entry imports. A
sibling script that imports neither is another program, and the fact does not hold there.

`program_holds(deps, flags)` computes this for every module at once, in time linear in the
import graph: the modules that reach a flagged module through imports, then everything those
modules import.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Set


def program_holds(deps: Sequence[Set[int]], flags: Sequence[bool], entries: Optional[Sequence[bool]] = None) -> List[bool]:
    """Per module: some program it belongs to holds the fact `flags` marks (module -> it sets it).

    `deps`: per module, the project modules it imports. A module holds the fact when it sets it,
    imports (transitively) a module that sets it, or is imported (transitively) by one of those:
    the modules of every entry whose program contains a flagged module.

    `entries`: per module, whether it is an entry of its own (a `__main__` guard, a training
    loop). A flagged module that no project module imports and that is not an entry (`data.py`
    holding the transforms, used by a runner outside the checked code) belongs to no program we
    can see: its fact holds everywhere, as for a project of one program."""
    n = len(flags)
    if not any(flags):
        return [False] * n
    if entries is not None:
        imported = [False] * n
        for targets in deps:
            for t in targets:
                imported[t] = True
        if any(f and not imported[m] and not entries[m] for m, f in enumerate(flags)):
            return [True] * n
    importers: List[List[int]] = [[] for _ in range(n)]
    for mid, targets in enumerate(deps):
        for t in targets:
            importers[t].append(mid)
    reaches = _closure([bool(f) for f in flags], importers)  # imports a flagged module (or is one)
    return _closure(reaches, deps)  # ... and everything those modules import


def _closure(marked: List[bool], edges: Sequence[Iterable[int]]) -> List[bool]:
    """`marked` and every node reachable from a marked one along `edges` (node -> next nodes)."""
    out = list(marked)
    todo = [i for i, m in enumerate(out) if m]
    while todo:
        for nxt in edges[todo.pop()]:
            if not out[nxt]:
                out[nxt] = True
                todo.append(nxt)
    return out
