"""SPD107 dataloader-oversubscribed (preview)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.providers.loaders import (
    DISTRIBUTED,
    is_dataloader,
    kwarg,
    loader_facts,
    may_build_loader,
)
from speedlint.analyzer.providers.worker_counts import uncapped_cpu_count
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, Fix, Impact, Rule, Status

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

CAP = "min(8, (os.cpu_count() or 1) // local_world_size)"


class DataLoaderOversubscribed(Rule):
    """
    ## What it does
    Flags `num_workers=os.cpu_count()` (also `multiprocessing.cpu_count()`, `psutil.cpu_count()`,
    `len(os.sched_getaffinity(0))`, through a variable, an argparse default or `or 1`) that is not
    capped, where it multiplies: in a script that runs one process per GPU (DDP, `torchrun`,
    `mp.spawn`, accelerate), or for several loaders of the same script. A capped value
    (`min(8, os.cpu_count())`) or one divided among the processes (`os.cpu_count() // world_size`)
    is not flagged, nor is a single loader in a single-process script.

    ## Why is this slow?
    Every training process starts its own workers: with 8 GPUs on a 64-core node, `os.cpu_count()`
    workers per process is 512 worker processes, each with its copy of the dataset, all
    competing with the training processes (and their CUDA launch threads, NCCL and the pin-memory
    threads) for 64 cores. Two loaders that each take every core double that. Past a few workers
    per GPU, more workers only add context switches, memory and start-up time; the training
    process itself gets starved and the GPU waits.

    ## Example
    ```python
    import os
    import torch.distributed as dist
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("nccl")
    loader = DataLoader(dataset, batch_size=64, sampler=DistributedSampler(dataset), num_workers=os.cpu_count())
    ```

    ## Use instead
    ```python
    import os
    import torch.distributed as dist
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("nccl")
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    workers = min(8, (os.cpu_count() or 1) // local_world_size)
    loader = DataLoader(dataset, batch_size=64, sampler=DistributedSampler(dataset), num_workers=workers)
    ```

    ## Fix safety
    No automatic fix (display-only advice): the right number depends on the machine and on how
    many processes share it. Cap the count and divide it among the processes of a node, e.g.
    `min(8, (os.cpu_count() or 1) // local_world_size)`. This rule is in preview.

    ## References
    - PyTorch docs, `torch.utils.data`: "Multi-process data loading"
    - PyTorch performance tuning guide: "Enable async data loading and augmentation"
    """

    code = "SPD107"
    name = "dataloader-oversubscribed"
    status = Status.PREVIEW
    impact = Impact(
        wastes="CPU time and memory (more worker processes than cores, starving the training process)",
        when="multi-GPU (one process per GPU) or several loaders at once",
        typical="1.1-2x steps/s on CPU-bound input pipelines; host out-of-memory with large datasets",
        evidence="PyTorch docs, Multi-process data loading",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = ("cpu_count", "sched_getaffinity")
    ast_precondition = staticmethod(lambda facts: may_build_loader(facts) and facts.calls_any("cpu_count", "sched_getaffinity"))

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._uncapped: Optional[List[Tuple[cst.Call, cst.CSTNode, cst.Call]]] = None

    def visit_Call(self, node: cst.Call) -> None:
        for call, site, count in self._loaders():
            if call is not node:
                continue
            ctx = self.ctx
            distributed = bool(DISTRIBUTED.search(ctx.source)) or bool(ctx.seeds is not None and ctx.seeds.project.get("distributed"))
            others = len(self._loaders()) - 1
            if distributed:
                why = "in every training process (the script runs one per GPU)"
            elif others:
                why = f"for each of {others + 1} loaders of this script"
            else:
                return
            self.report(
                site if any(a is site for a in call.args) else call,  # via `**kwargs`: on the call
                f"`num_workers` is the CPU count (`{ctx.code(count)}`), uncapped, {why}: "
                "the workers outnumber the cores and starve the training process",
                fix=Fix.advice(f"Cap the workers and share the cores among the processes: `{CAP}`"),
            )

    def _loaders(self) -> List[Tuple[cst.Call, cst.CSTNode, cst.Call]]:
        """(loader, where its workers are set, the CPU count call) for every loader of the file
        whose `num_workers` may be the uncapped CPU count."""
        if self._uncapped is None:
            found: List[Tuple[cst.Call, cst.CSTNode, cst.Call]] = []
            for call in loader_facts(self.ctx).calls:
                if not is_dataloader(self.ctx, call):
                    continue
                kw = kwarg(self.ctx, call, "num_workers")
                site = kw.node
                if not isinstance(site, (cst.Arg, cst.DictElement)):
                    continue
                count = uncapped_cpu_count(self.ctx, site.value)
                if count is not None:
                    found.append((call, site, count))
            self._uncapped = found
        return self._uncapped
