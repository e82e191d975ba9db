"""SPD703 data-parallel (preview)."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, Fix, Impact, Rule, Status


class DataParallel(Rule):
    """
    ## What it does
    Flags models wrapped in `nn.DataParallel(...)` (any spelling: `torch.nn.DataParallel`,
    `torch.nn.parallel.DataParallel`, an imported alias). Type checks such as
    `isinstance(model, nn.DataParallel)` and `model.module` unwrapping are not flagged, and
    neither are CPU-only scripts.

    ## Why is this slow?
    `DataParallel` runs one Python process that, on every step, scatters the batch from GPU 0,
    replicates the whole model to every GPU, gathers the outputs back on GPU 0 and reduces the
    gradients there. The replication and the single Python thread (GIL) driving all devices
    make it scale poorly: GPU 0 does more work and holds more memory than the others, and
    adding GPUs often gives far less than linear speedup. `DistributedDataParallel` runs one
    process per GPU, keeps a replica per process, and overlaps the gradient all-reduce with the
    backward pass; PyTorch recommends it even on a single machine.

    ## Example
    ```python
    model = nn.DataParallel(nn.Linear(128, 10).cuda())
    ```

    ## Use instead
    ```python
    # launched with `torchrun --nproc_per_node=NUM_GPUS train.py`
    torch.distributed.init_process_group("nccl")
    local_rank = torch.distributed.get_rank() % torch.cuda.device_count()
    torch.cuda.set_device(local_rank)
    model = nn.parallel.DistributedDataParallel(nn.Linear(128, 10).cuda(), device_ids=[local_rank])
    ```

    ## Fix safety
    Display-only: moving to `DistributedDataParallel` changes how the script is launched
    (`torchrun`), needs a `DistributedSampler` for the loaders, per-rank logging and
    checkpointing, and changes the effective batch size per process. It is a migration, not
    a rewrite speedlint can make on its own.

    ## References
    - PyTorch docs, `torch.nn.DataParallel`: "It is recommended to use DistributedDataParallel,
      instead of this class, to do multi-GPU training, even if there is only a single node."
    - PyTorch tutorial, "Getting Started with Distributed Data Parallel"
    """

    code = "SPD703"
    name = "data-parallel"
    status = Status.PREVIEW
    impact = Impact(
        wastes="device time (model replication and gather/scatter each step, one Python thread for all GPUs)",
        when="multi-GPU training",
        typical="1.2-2x steps/s on 2-8 GPUs",
        evidence="PyTorch docs: DataParallel vs DistributedDataParallel",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = ("DataParallel",)
    ast_precondition = staticmethod(lambda facts: facts.may_use_gpu and facts.calls_any("DataParallel"))

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.matches(node.func, "torch.nn.DataParallel"):
            return
        if not self.ctx.may_use_gpu:
            return
        self.report(
            node,
            "`nn.DataParallel` replicates the model and gathers outputs on one GPU every step",
            fix=Fix.advice("Use `torch.nn.parallel.DistributedDataParallel` (one process per GPU, launched with torchrun)"),
        )
