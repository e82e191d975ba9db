"""SPD702 debug-mode-in-training."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, List, Optional, Sequence, Union, cast

import libcst as cst

from speedlint.analyzer.fixes import remove_fix
from speedlint.analyzer.providers.frameworks import trainer_runs
from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, MEDIUM, UNSAFE, Fix, Impact, Rule

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.providers.training import TorchFacts
    from speedlint.analyzer.providers.values import KwArg

ANOMALY_SET = ("torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly")
ANOMALY_CM = ("torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly")
PROFILERS = (
    "torch.autograd.profiler.profile",
    "torch.autograd.profiler.emit_nvtx",
    "torch.autograd.profiler_legacy.profile",
    "torch.autograd.profile",
)
GRADCHECKS = (
    "torch.autograd.gradcheck",
    "torch.autograd.gradgradcheck",
    "torch.autograd.gradcheck.gradcheck",
    "torch.autograd.gradcheck.gradgradcheck",
)


DEBUG_NAME = re.compile(r"debug|check|verif|profil|anomal|diagnos|inspect|benchmark", re.I)


def _is_test_code(path: str, fn: Optional[cst.FunctionDef]) -> bool:
    base = os.path.basename(path)
    if base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py":
        return True
    return fn is not None and fn.name.value.startswith("test_")


def _profiler_on(ctx: FileContext, kw: KwArg) -> bool:
    """`profiler="simple"`/`"advanced"`/`"pytorch"` or a profiler object, on every path."""
    value = kw.value
    if value is not None and value.options:
        return all(isinstance(v, str) and v for v in value.options)
    expr = cast(cst.Arg, kw.node).value  # (the caller checks that it is an argument)
    return isinstance(expr, cst.Call) and (ctx.qualname(expr.func) or "").rsplit(".", 1)[-1].endswith("Profiler")


def _is_debug_helper(facts: TorchFacts, fn: Optional[cst.FunctionDef]) -> bool:
    """A function whose name says it is there to debug, check or profile: deliberate, not a leftover."""
    while fn is not None:
        if DEBUG_NAME.search(fn.name.value):
            return True
        fn = facts.enclosing_function(fn)
    return False


class DebugModeInTraining(Rule):
    """
    ## What it does
    Flags autograd debugging tools left switched on in a training path (a training step, a
    function that trains, or module-level code of a training script):
    `torch.autograd.set_detect_anomaly(True)`, `with torch.autograd.detect_anomaly():`,
    `torch.autograd.profiler.profile(...)` / `emit_nvtx(...)`, and `torch.autograd.gradcheck` /
    `gradgradcheck`.

    A Lightning `Trainer(detect_anomaly=True)` or `Trainer(profiler="simple")` (any profiler) in a
    training run is flagged on the keyword; the same knobs in an opt-in debug config are not.

    Debugging behind a switch (`if args.debug:`, `set_detect_anomaly(args.detect_anomaly)`,
    `profile(enabled=args.profile)`), `set_detect_anomaly(False)`, and test code are not flagged.

    ## Why is this slow?
    Anomaly detection records a Python stack trace for every operation of every forward and
    checks every backward result for NaN, which synchronises with the device: training runs
    several times slower. The autograd profiler records every op (and `emit_nvtx` adds NVTX
    ranges); `gradcheck` runs the function many times in double precision with finite
    differences. All of these are meant for a debugging session, not for every run.

    ## Example
    ```python
    torch.autograd.set_detect_anomaly(True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=8):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    parser = argparse.ArgumentParser()
    parser.add_argument("--detect-anomaly", action="store_true")
    args = parser.parse_args()
    torch.autograd.set_detect_anomaly(args.detect_anomaly)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(TensorDataset(torch.randn(32, 8), torch.randn(32, 1)), batch_size=8):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix removes `set_detect_anomaly(True)` (leaving `pass` where a block would be
    empty), unwraps the body of `with detect_anomaly():` and of a profiler block that binds no
    name, and removes a bare `gradcheck(...)` statement. Behaviour changes only for code that
    relied on the debugging side effects (the anomaly error with its traceback, the profile
    report). A profiler block whose result is used (`with profile() as prof:`) is advice only.

    ## References
    - PyTorch docs, "Anomaly detection" (`torch.autograd.detect_anomaly`): "should be enabled only
      for debugging as the different tests will slow down your program execution"
    """

    code = "SPD702"
    name = "debug-mode-in-training"
    impact = Impact(
        wastes="Python overhead and host-device sync (per-op tracebacks, NaN checks, profiling)",
        when="every training step while the debug tool is on",
        typical="1.5-5x steps/s",
        evidence="PyTorch docs: anomaly detection; benchmarks/scenarios: detect_anomaly",
        level=HIGH,
    )
    fixes = (UNSAFE, DISPLAY_ONLY)
    triggers = ("anomaly", "profiler", "emit_nvtx", "gradcheck")
    ast_precondition = staticmethod(
        lambda facts: facts.may_call_backward and facts.calls_any("set_detect_anomaly", "detect_anomaly", "profile", "emit_nvtx", "gradcheck", "gradgradcheck")
        or facts.calls_any("Trainer")
    )

    # -- a Lightning trainer's debug knobs (speedlint.analyzer.providers.frameworks) ----------------
    def visit_Module(self, node: cst.Module) -> None:
        if "Trainer" not in self.ctx.source or ".fit(" not in self.ctx.source:
            return
        for run in trainer_runs(self.ctx):
            if run.cls != "Trainer" or _is_debug_helper(self.ctx.torch, self.ctx.torch.enclosing_function(run.call)) or _is_test_code(self.ctx.path, None):
                continue
            anomaly, profiler = run.knobs["detect_anomaly"], run.knobs["profiler"]
            if anomaly.status == "value" and anomaly.value is not None and anomaly.value.all(lambda v: v is True):
                self.report(
                    anomaly.node or run.call,
                    "`Trainer(detect_anomaly=True)` left on in a training run: every op records a traceback and every backward checks for NaN",
                    fix=Fix.advice("Pass `detect_anomaly` only from a debug flag or config"),
                )
            if not profiler.missing and isinstance(profiler.node, cst.Arg) and _profiler_on(self.ctx, profiler):
                self.report(
                    profiler.node,
                    "a profiler is left on in this Lightning training run: it times every hook (and, with the PyTorch profiler, records every op) on every step",
                    fix=Fix.advice("Pass `profiler` only from a debug flag or config"),
                    impact=self.impact.with_level(MEDIUM),
                )

    # -- calls as statements -----------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        facts = self.ctx.torch
        parent = facts.parent(node)
        if isinstance(parent, cst.WithItem):
            return  # handled with the `with` statement
        if self.ctx.matches(node.func, *ANOMALY_SET):
            if not self._literal_true(node, "mode"):
                return
            where = self._training_path(node)
            if where is None:
                return
            self.report(
                node,
                f"`set_detect_anomaly(True)` left on {where}: every op records a traceback and every backward checks for NaN",
                fix=remove_fix(self.ctx, node, "Remove `set_detect_anomaly(True)`", UNSAFE)
                or Fix.advice("Turn anomaly detection on only behind a debug flag"),
            )
        elif self.ctx.matches(node.func, *GRADCHECKS):
            where = self._training_path(node)
            if where is None:
                return
            self.report(
                node,
                f"`gradcheck` runs {where}: finite differences in double precision on every run",
                fix=remove_fix(self.ctx, node, "Remove the gradient check", UNSAFE)
                or Fix.advice("Move the gradient check to a test"),
                impact=self.impact,
            )

    # -- context managers ---------------------------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        for index, item in enumerate(node.items):
            call = item.item
            if not isinstance(call, cst.Call):
                continue
            if self.ctx.matches(call.func, *ANOMALY_CM):
                what = "`detect_anomaly()`"  # check_nan=False still records a traceback per op
            elif self.ctx.matches(call.func, *ANOMALY_SET):
                if not self._literal_true(call, "mode"):
                    continue
                what = "`set_detect_anomaly(True)`"
            elif self.ctx.matches(call.func, *PROFILERS):
                if not self._profiler_on(call):
                    continue
                what = "the autograd profiler"
            else:
                continue
            where = self._training_path(node, body=node.body)
            if where is None:
                continue
            fix = self._unwrap(node, index) if item.asname is None else None
            self.report(
                call,
                f"{what} {where}: debugging instrumentation on every step",
                fix=fix or Fix.advice("Keep the profiler/anomaly block behind a debug flag"),
                impact=self.impact if "anomaly" in what else self.impact.with_level(MEDIUM),
            )
            return

    # -- helpers -------------------------------------------------------------------------------
    def _literal_true(self, call: cst.Call, keyword: str, position: int = 0, default: bool = False) -> bool:
        kw = self.ctx.values.kwarg(call, keyword, position=position)
        if kw.missing:
            return default
        return isinstance(kw.node, cst.Arg) and isinstance(kw.node.value, cst.Name) and kw.node.value.value == "True"

    def _profiler_on(self, call: cst.Call) -> bool:
        kw = self.ctx.values.kwarg(call, "enabled", position=0)
        if kw.missing:
            return True
        return isinstance(kw.node, cst.Arg) and isinstance(kw.node.value, cst.Name) and kw.node.value.value == "True"

    def _training_path(self, node: cst.CSTNode, body: Optional[cst.CSTNode] = None) -> Optional[str]:
        """Where `node` runs in training, or None (tests, behind a flag, not training)."""
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        if _is_test_code(self.ctx.path, fn) or _is_debug_helper(facts, fn):
            return None
        guards = [
            g for g in facts.guarding_ifs(node, fn)
            if not (isinstance(g, cst.If) and "__name__" in self.ctx.module.code_for_node(g.test))
        ]
        if guards:
            return None
        if facts.in_training_step(node):
            return "in the training step"
        if body is not None and any(facts.is_backward(c) for c in self._calls_in(body)):
            return "around the training step"
        if body is not None:
            loops = [n for n in self._nodes_in(body) if isinstance(n, (cst.For, cst.While))]
            if any(l in facts.step_loops or l in facts.epoch_loops or l in facts.run_loops for l in loops):
                return "around the training loop"
            if any(facts.reaches_backward(fn2) and facts.reaches_step(fn2) for c in self._calls_in(body) for fn2 in facts.resolve_call(c)):
                return "around the training run"
        if fn is None:
            return "at module level of a training script" if facts.step_loops else None
        if fn in facts.step_functions:
            return "in the training step"
        if facts.reaches_backward(fn) and facts.reaches_step(fn):
            return f"in `{fn.name.value}()`, which trains"
        if self._only_called_before_training(fn):
            return f"in `{fn.name.value}()`, called before training"
        return None

    def _only_called_before_training(self, fn: cst.FunctionDef) -> bool:
        """A setup helper (`def setup(): set_detect_anomaly(True)`) called unconditionally from a function that trains."""
        facts = self.ctx.torch
        for call in facts.calls:
            if fn not in facts.resolve_call(call):
                continue
            caller = facts.enclosing_function(call)
            if facts.guarding_ifs(call, caller):
                continue
            if caller is None and facts.step_loops:
                return True
            if caller is not None and facts.reaches_backward(caller) and facts.reaches_step(caller):
                return True
        return False

    def _nodes_in(self, root: cst.CSTNode) -> List[cst.CSTNode]:
        out: List[cst.CSTNode] = []
        stack = [root]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children)
        return out

    def _calls_in(self, root: cst.CSTNode) -> List[cst.Call]:
        return [n for n in self._nodes_in(root) if isinstance(n, cst.Call)]

    def _unwrap(self, node: cst.With, index: int) -> Optional[Fix]:
        """Drop one item of a `with`; with a single item, put its body in place of the statement."""
        if len(node.items) > 1:
            items = [it for i, it in enumerate(node.items) if i != index]
            last = items[-1]
            items[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return Fix.replace(node, node.with_changes(items=items), "Remove the debugging context manager", UNSAFE)
        body = node.body
        if isinstance(body, cst.SimpleStatementSuite):
            stmts: Sequence[cst.BaseStatement] = [
                cst.SimpleStatementLine(body=body.body, leading_lines=node.leading_lines)
            ]
        else:
            assert isinstance(body, cst.IndentedBlock)
            stmts = list(body.body)
            if not stmts:
                return None
            first = cast(Union[cst.SimpleStatementLine, cst.BaseCompoundStatement], stmts[0])  # (the two kinds of statement)
            stmts[0] = first.with_changes(leading_lines=[*node.leading_lines, *first.leading_lines])
        return Fix.replace(node, cst.FlattenSentinel(stmts), "Remove the debugging context manager (unwrap its body)", UNSAFE)
