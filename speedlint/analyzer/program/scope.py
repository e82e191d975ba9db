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

from typing import List, Optional, Sequence, Set


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
    reaches = [bool(f) for f in flags]  # imports a flagged module (or is one)
    todo = [mid for mid in range(n) if reaches[mid]]
    while todo:
        cur = todo.pop()
        for up in importers[cur]:
            if not reaches[up]:
                reaches[up] = True
                todo.append(up)
    holds = list(reaches)  # ... and everything those modules import
    todo = [mid for mid in range(n) if holds[mid]]
    while todo:
        cur = todo.pop()
        for down in deps[cur]:
            if not holds[down]:
                holds[down] = True
                todo.append(down)
    return holds
