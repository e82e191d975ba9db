"""SPD302 deprecated-cuda-amp-api."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.rule import LOW, SAFE, Fix, Impact, ImportSpec, Rule
from speedlint.analyzer.providers.amp_api import deprecated_sites


class DeprecatedCudaAmpApi(Rule):
    """
    ## What it does
    Flags calls of `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`, and
    `from torch.cuda.amp import autocast, GradScaler` when those names are called, and
    `from torch.cuda import amp` (then `amp.autocast()` / `amp.GradScaler()`).

    ## Why is this slow?
    It is not slow today: these spellings are deprecated since torch 2.4 and warn on every call
    (`FutureWarning`), which floods training logs when autocast is entered once per step, and they
    tie the code to CUDA. The device-generic `torch.amp` API is the same machinery and also runs
    on CPU (bfloat16) and other backends, which is what the other precision fixes emit.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x).sum()
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda"):
        loss = model(x).sum()
    ```

    ## Fix safety
    Safe: `torch.amp.autocast("cuda", ...)` and `torch.amp.GradScaler("cuda", ...)` are the
    objects the old names forward to (same defaults: float16, same scaler settings). Positional
    arguments of the old `autocast(enabled, dtype, cache_enabled)` become keywords. An import is
    rewritten together with every call of the names it imports. A name used only in a type
    annotation is not a runtime call and is not flagged. The new API needs torch >= 2.3.

    ## References
    - PyTorch AMP docs: "torch.cuda.amp.autocast(args...) is deprecated. Please use
      torch.amp.autocast("cuda", args...) instead."
    """

    code = "SPD302"
    name = "deprecated-cuda-amp-api"
    impact = Impact(
        wastes="nothing measurable (a deprecation warning per call; CUDA-only code)",
        when="torch >= 2.4",
        typical="no speed change; removes FutureWarning spam and unblocks CPU/bfloat16 AMP",
        evidence="torch/cuda/amp/autocast_mode.py deprecation",
        level=LOW,
    )
    fixes = (SAFE,)
    triggers = ("cuda.amp", "cuda import amp")
    ast_precondition = staticmethod(
        lambda facts: facts.uses_any("cuda") and facts.uses_any("amp")
        and (facts.calls_any("autocast", "GradScaler") or "amp" in facts.imported)
    )

    def visit_Module(self, node: cst.Module) -> None:
        for site in deprecated_sites(self.ctx):
            if site.kind == "import":
                message = "`torch.cuda.amp` is deprecated: import `autocast`/`GradScaler` from `torch.amp`"
                title = "Import from `torch.amp` (and pass \"cuda\" to the calls)"
            else:
                short = site.old.rsplit(".", 1)[-1]
                message = f"`{site.old}(...)` is deprecated: use `torch.amp.{short}(\"cuda\", ...)`"
                title = f"Use `torch.amp.{short}(\"cuda\", ...)`"
            fix = None
            if site.pairs is not None:
                fix = Fix.many(site.pairs, title, SAFE, [ImportSpec(m, o) for m, o in site.imports])
            self.report(site.node, message, fix=fix)
