"""SPD401 gc-collect-in-hot-path."""


from __future__ import annotations

from typing import List, Optional

import libcst as cst

from speedlint.analyzer.providers import hot
from speedlint.analyzer.fixes import remove_fix
from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, MEDIUM, SAFE, Fix, Impact, Rule


class GcCollectInHotPath(Rule):
    """
    ## What it does
    Flags `gc.collect()` that runs once per sample (in `Dataset.__getitem__` or a `collate_fn`),
    once per training step, or once per batch element, directly or through a helper function of the
    same file called from such a place.

    ## Why is this slow?
    A full garbage collection walks every tracked Python object: with a model, an optimizer and a
    dataset in memory that is tens of milliseconds to seconds per call. Per sample it can dominate
    the whole epoch; inside DataLoader workers it runs in every worker. It also frees nothing that
    reference counting would not already free, unless the code has reference cycles.

    ## Example
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            frame = torch.from_numpy(self.frames[i])
            gc.collect()
            return frame
    ```

    ## Use instead
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            return torch.from_numpy(self.frames[i])
    ```

    ## Fix safety
    Safe: the call is removed (a `pass` is left where the block would be empty). Collection still
    happens automatically. When the call sits in a helper that does nothing else, the call of the
    helper at the hot site is removed instead; when the helper does more or is also called from cold
    code, the finding is advice only. Calls in out-of-memory handlers, once per epoch or validation,
    and top-level script code are not flagged.

    ## References
    - Python docs, `gc` module: collection cost grows with the number of tracked objects
    """

    code = "SPD401"
    name = "gc-collect-in-hot-path"
    impact = Impact(
        wastes="Python overhead (full garbage collection)",
        when="always; worst per sample in DataLoader workers",
        typical="10-500 ms per call; 1.5-20x epoch time per sample",
        evidence="benchmarks/scenarios: gc_per_sample",
        level=HIGH,
    )
    fixes = (SAFE, DISPLAY_ONLY)
    triggers = ("collect",)
    ast_precondition = staticmethod(lambda facts: facts.calls_any("collect") and facts.may_run_hot)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.ctx.matches(node.func, "gc.collect"):
            return
        where = self._hot(node)
        if where is None:
            return
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        if fn is not None and not self._direct(node) and _only_collects(fn):
            sites = [c for c in facts.calls if fn in facts.resolve_call(c) and self._hot(c)]
            if sites:
                for site in sites:
                    self.report(
                        site,
                        f"`{fn.name.value}()` only runs `gc.collect()`, and it is called {self._hot(site)}",
                        fix=remove_fix(self.ctx, site, f"Remove the call of `{fn.name.value}()` here")
                        or Fix.advice("Remove this call"),
                    )
                return
        fix: Optional[Fix] = None
        if self._direct(node) or (fn is not None and self._all_callers_hot(fn)):
            fix = remove_fix(self.ctx, node, "Remove `gc.collect()`")
        self.report(
            node,
            f"`gc.collect()` runs {where}: a full collection each time",
            fix=fix or Fix.advice("Call `gc.collect()` once per epoch at most, outside the hot path"),
            impact=self.impact if "sample" in where or "step" in where else self.impact.with_level(MEDIUM),
        )

    # -- context (shared with SPD402: speedlint.analyzer.providers.hot) --------------------------------
    def _hot(self, node: cst.CSTNode) -> Optional[str]:
        return hot.hot_context(self.ctx, node)

    def _direct(self, node: cst.CSTNode) -> bool:
        """The hot context is visible in this function (a loop here, or a per-sample root)."""
        return hot.is_direct(self.ctx, node)

    def _callers(self, fn: cst.FunctionDef) -> List[cst.Call]:
        return hot.callers(self.ctx, fn)

    def _all_callers_hot(self, fn: cst.FunctionDef) -> bool:
        return hot.all_callers_hot(self.ctx, fn)


def _only_collects(fn: cst.FunctionDef) -> bool:
    """The function body is only gc/cache-clearing calls (and a docstring / pass)."""
    return hot.only_cleanup(fn, ("collect", "empty_cache"))
