"""SPD201 host-sync-in-training-step."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple, cast

import libcst as cst

from speedlint.analyzer.frameworks.hf_accelerate import placed_by_framework
from speedlint.analyzer.providers.narrowing import tensor_test
from speedlint.analyzer.providers.branches import off_gpu_path
from speedlint.analyzer.providers.feedback import feeds_next_iteration
from speedlint.analyzer.providers.frameworks import metric_sync
from speedlint.analyzer.providers.host_use import DECISION, LIBRARY, HostUse, host_use
from speedlint.analyzer.providers.intervals import Branches, branches, is_modulo, predicate_of
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, LOW, MEDIUM, Fix, Impact, Rule
from speedlint.analyzer.vocabulary import COUNTER_NAME
from speedlint.analyzer.providers.flow import CPU, Flow, flow

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.providers.training import TorchFacts

_SYNC_METHODS = ("item", "cpu", "tolist", "numpy")
_CONVERSIONS = ("float", "int", "bool", "str", "repr")
_LOGGER = re.compile(r"log", re.I)
_RARE_NAME = re.compile(r"should_|(^|_)(log_now|is_log|do_log|log_step|is_logging_step|print_now|do_print)", re.I)
_STATEMENTS = (cst.BaseSmallStatement, cst.BaseCompoundStatement)
_ANOMALY = ("isnan", "isinf", "isfinite")
_BUILTINS = frozenset({"min", "max", "sum", "abs", "round", "float", "int", "bool", "str", "len", "list", "tuple", "dict", "sorted", "print"})
_TIME = ("time.time", "time.perf_counter", "time.monotonic", "time.process_time", "datetime.datetime.now")
ADVICE = "Accumulate on the device (`running += loss.detach()`) and read the value every N steps"
#: When the value feeds a host-only library (per step; per evaluation batch or evaluation), or a
#: Python decision (`providers.host_use`), and for other reads in an evaluation.
LIBRARY_ADVICE = (
    "{what} needs the values on the host: batch it (one copy for all of them, not one per item),"
    " move that computation to the device (a torch equivalent), or do it every N steps"
)
EVAL_LIBRARY_ADVICE = (
    "{what} needs the values on the host: batch it (keep the outputs on the device and copy them once"
    " after the loop, `torch.cat(outputs).cpu()`), or compute it on the device"
)
DECISION_ADVICE = (
    "The value decides Python control flow ({what}): make that check every N steps, or keep the"
    " decision on the device (`torch.where`, a flag tensor read every N steps)"
)
EVAL_ADVICE = (
    "Keep the values on the device (`total += loss.detach()`, `outputs.append(out)`) and read them once"
    " after the loop"
)
#: Reads that are not a value read for its own sake: a shape that depends on the data, a size.
MASK_ADVICE = (
    "Keep the shape fixed: `torch.where(mask, x, fill)`, a multiply by the mask, or a fixed-size gather"
    " (`index_select` on indices known on the host) instead of a data-dependent selection"
)
SIZE_ADVICE = "Pass a Python int: keep the size on the host (from the batch's metadata or its shape), not as a device tensor"
POOL_ADVICE = "Pass `size=` (the number of graphs in the batch, e.g. `batch.num_graphs`, known on the host)"
BUFFER_ADVICE = "Allocate the buffer on the device (`device=t.device`), or copy once after the loop"
SYNCHRONIZE_ADVICE = "Remove it from the step; to time a step, use CUDA events (`torch.cuda.Event(enable_timing=True)`) read every N steps"
EPOCH_WHEN = "GPU; once per epoch (an evaluation run once per epoch)"


#: Comparisons that give a boolean tensor (not `is`/`in`).
_ORDER_OPS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
#: torch functions and tensor methods that return a boolean mask.
_MASK_FUNCS = frozenset({
    "torch.isnan", "torch.isinf", "torch.isfinite", "torch.eq", "torch.ne", "torch.gt", "torch.ge", "torch.lt",
    "torch.le", "torch.logical_and", "torch.logical_or", "torch.logical_not", "torch.logical_xor", "torch.isin",
})
_MASK_METHODS = frozenset({"eq", "ne", "gt", "ge", "lt", "le", "isnan", "isinf", "isfinite", "logical_not", "bool"})

#: torch factories whose positional arguments are sizes (Python ints; a tensor is read on the host).
_SIZED_FACTORIES = frozenset({
    "torch.arange", "torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn", "torch.randperm",
})
#: Graph pooling that counts the graphs with `int(batch.max()) + 1` unless given `size`.
_POOLS_WITHOUT_SIZE = frozenset({
    f"torch_geometric.nn.{name}" for name in ("global_add_pool", "global_mean_pool", "global_max_pool")
} | {f"torch_geometric.nn.pool.{name}" for name in ("global_add_pool", "global_mean_pool", "global_max_pool")})


class HostSyncInTrainingStep(Rule):
    """
    ## What it does
    Flags reads of a device tensor from the host that run on every training step: `.item()`,
    `.cpu()`, `.tolist()`, `float(t)` / `int(t)` / `bool(t)` / `str(t)`, `print(t)`, `f"{t}"`,
    `"...".format(t)`, `"%f" % t`, `if t:` / `assert t`, and logging calls that convert tensors
    (`logger.info("%f", t)`, `writer.add_scalar(..., t)`, `wandb.log({...: t})`,
    `pbar.set_postfix(loss=t)`), also through same-file helpers called
    from the step. Reads behind `if step % log_every == 0` (or any branch that is not taken every
    step: counter equality, time-based logging, anomaly handlers, `except` blocks) are not flagged;
    reads in an evaluation loop are reported with low impact. Interval guards are read by what
    they test: the body of `if step % N != 0:` (or `if step % N:`) runs on most steps and is
    flagged, its `else` and the code after `if step % N != 0: continue` run one step in N; a
    same-file helper whose whole body returns such a test (`def should_log(i): return i % 10 ==
    0`) guards its callers' branches whatever its name; `if batch is not None:` is dead when every
    caller leaves `batch` to its `None` default. An evaluation run every N steps from inside the
    training loop is an evaluation loop (low), not the training step.

    A helper that only synchronizes (`def sync(device): if device.type == "cuda":
    torch.cuda.synchronize(device)`) is reported at each same-file call that runs it per step
    (the call is what to remove), leaving out the calls that pass a CPU device. A read whose value
    becomes the loop's next input (an agent's action handed to a CPU environment whose observation
    the next forward reads) is the loop's own data dependence: nothing can be done, not flagged.

    A metric object updated per step counts when the library reads a value on the host inside
    its update: a torchmetrics `MeanMetric`/`SumMetric`/`MaxMetric`/`MinMetric`/`CatMetric` with its
    default NaN check (`nan_strategy="warn"`), a classification metric with its default input
    validation (`validate_args=True`), called as `self.metric(...)` or `self.metric.update(...)` in
    a training step (a Lightning `training_step` counts as one; see docs/frameworks.md).

    A read under a type test in a helper (`if isinstance(v, torch.Tensor): v = v.item()`, also
    `torch.is_tensor(v)`, `x.item() if isinstance(x, torch.Tensor) else x`), where `v` is a
    parameter or a value of its `**kwargs` / `*args`, is flagged only when some call site that
    runs the helper every step or evaluation batch may pass a tensor there (the whole program
    is asked): a metric logger's `update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"])`
    never takes the branch, `update(**loss_dict)` does. Anything else passed (a name whose
    value is not known to be a Python number) counts as a possible tensor.

    A whole-set evaluation run once per epoch (a function the epoch loop calls that runs under
    `no_grad` or after `.eval()` with no loop over batches, such as a full-graph `test()`) is
    reported with low impact, once per epoch. After a loop over evaluation batches, one copy of
    the gathered results is what the advice asks for, and is not flagged.

    Reads of host values are not syncs: `.cpu()` results a helper returns (also unpacked from a
    tuple), comparisons and `.values` of them, code under `if x.device.type == "cpu":` (or the
    `else` of `== "cuda"`) and under `hasattr(self, "name") and ...` for an attribute nothing sets.

    ## Why is this slow?
    CUDA runs asynchronously: the host queues kernels and moves on. Reading a value on the host
    makes it wait until every queued kernel has finished, so the GPU idles while the host prepares
    the next step (data loading, Python overhead, kernel launches). One sync per step is often
    5-30% of the step time for small and medium models.

    ## Example
    ```python
    model = nn.Linear(10, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        loss = F.mse_loss(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
    ```

    ## Use instead
    ```python
    model = nn.Linear(10, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    running = torch.zeros((), device="cuda")
    for step, (x, y) in enumerate(loader):
        loss = F.mse_loss(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.detach()
        if step % 100 == 0:
            print(f"step {step}: loss {running.item() / 100:.4f}")
            running.zero_()
    ```

    The advice follows what the value is used for (the analyzer's `host_use` fact): a value
    handed to a host-only library (numpy, scipy, scikit-learn, pandas, OpenCV ..., also through a
    name, a list it is appended to, or a loop over it) gets "batch it, move that computation to
    the device, or do it every N steps"; a value that decides Python control flow (`if`, `while`,
    `assert`, `math.isfinite`) gets "check every N steps or keep the decision on the device"; an
    evaluation's reads get "keep the values on the device and read them once after the loop".

    ## Fix safety
    No automatic fix (display-only): where to accumulate and how often to read depends on what
    the value is used for (logging, early stopping, a scheduler). Values that are already Python
    numbers (`loss_value = loss.item()` read again, `int(args.steps)`), CPU tensors
    (`m = torch.from_numpy(a)`, `torch.as_tensor(np_array)`, `t.cpu()`, and what their methods
    give: `m.eq(i).sum().item()`, unless moved with `.to(device)` / `.cuda()`) and CPU-only
    scripts are not flagged.

    ## References
    - PyTorch performance tuning guide, "Avoid unnecessary CPU-GPU synchronization"
    """

    code = "SPD201"
    name = "host-sync-in-training-step"
    impact = Impact(
        wastes="host-device sync (the host waits for the GPU queue to drain)",
        when="GPU; on every training step",
        typical="5-30% steps/s for small and medium models",
        evidence="PyTorch performance tuning guide",
        level=HIGH,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = ("item(", "cpu(", "tolist(", "float(", "int(", "bool(", "str(", "print(", "if ", "assert ", "add_scalar", "log", "set_postfix", "{", "%", "[", "range(", "_pool(")

    ast_precondition = staticmethod(
        lambda facts: facts.may_use_gpu and (facts.may_have_training_step or facts.may_have_eval_loop)
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._flow: Optional[Flow] = None
        self._reported: Set[cst.CSTNode] = set()
        self._synced_statements: Set[cst.CSTNode] = set()
        self._synced_units: Set[Optional[cst.CSTNode]] = set()
        self._masks: Dict[Optional[cst.CSTNode], List[cst.Subscript]] = {}
        self._epoch_candidates: Dict[cst.FunctionDef, bool] = {}

    @property
    def flow(self) -> Flow:
        if self._flow is None:
            self._flow = flow(self.ctx)
        return self._flow

    # -- what syncs ---------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if not self._maybe_hot(node):
            return
        func = node.func
        library = metric_sync(self.ctx, node) if isinstance(func, cst.Attribute) else None
        if library is not None:  # a metric object whose update reads a value on the host
            self._sync(node, f"`{self.ctx.code(func)}(...)` ({library})")
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "synchronize" and (
            self.ctx.matches(func, "torch.cuda.synchronize") or self.flow.is_accelerator_module(func.value)
        ):
            self._synchronize(node)
        elif isinstance(func, cst.Attribute) and func.attr.value in _SYNC_METHODS:
            self._method(node, func)
        elif isinstance(func, cst.Name) and func.value in _CONVERSIONS and len(node.args) == 1 and not node.args[0].star:
            value = node.args[0].value
            if self._cheap_candidate(value) and self.flow.is_tensor(value):
                self._sync(node, f"`{func.value}()` of a tensor")
        elif isinstance(func, cst.Name) and func.value == "print":
            for arg in node.args:
                if not arg.star and self._cheap_candidate(arg.value) and self.flow.is_tensor(arg.value):
                    self._sync(arg.value, "`print()` of a tensor")
                    break
        elif isinstance(func, cst.Attribute) and func.attr.value in ("add_scalar", "set_postfix", "log_metric", "log_metrics") or self.ctx.matches(func, "wandb.log") or _wandb_run_log(func):
            self._logging(node)
        elif isinstance(func, cst.Attribute) and func.attr.value == "format" and isinstance(func.value, (cst.SimpleString, cst.ConcatenatedString)):
            self._first_tensor([a.value for a in node.args if not a.star], "`str.format()` of a tensor")
        elif (
            isinstance(func, cst.Attribute)
            and func.attr.value in ("info", "warning", "error")
            and _LOGGER.search((dotted(func.value) or "").rsplit(".", 1)[-1])
        ):
            # `logger.info("loss %f", loss)`: the message is formatted when the record is emitted
            self._first_tensor([a.value for a in node.args[1:] if not a.star and a.keyword is None], "a logging call that formats a tensor")
        elif isinstance(func, (cst.Name, cst.Attribute)):
            self._sizes(node, func)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`x[mask]`, `x[mask] = 0`, `x[:, a != b]`: a boolean mask sizes the result by counting
        its true elements on the host (a `nonzero()` sync). `x[:, :n]` with a tensor `n`: the
        bound is converted to a Python int on the host."""
        for e in node.slice:
            if isinstance(e.slice, cst.Slice):
                for bound in (e.slice.lower, e.slice.upper, e.slice.step):
                    if bound is not None and self._maybe_hot(bound) and self._cheap_candidate(bound) and self.flow.is_tensor(bound):
                        self._sync(bound, "a tensor used as a slice bound (it is converted to an int on the host)", SIZE_ADVICE)
                        break
        if not any(isinstance(e.slice, cst.Index) and self._is_mask(e.slice.value) for e in node.slice):
            return
        if not self._maybe_hot(node) or self.ctx.torch.step_of(node) is None or not self.flow.is_tensor(node.value):
            return  # (per training step only: per evaluation batch it is rarely what costs)
        # one finding per function: the cure (`torch.where`, a fixed-size gather) is the same
        # for every masked read of the function, and a finding per line would bury the others
        self._masks.setdefault(self.ctx.torch.enclosing_function(node), []).append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        """`buf[:, :n] = t` where `buf` was made on the CPU (`torch.zeros(shape)`) and `t` lives
        on the device: a blocking device-to-host copy."""
        for t in node.targets:
            target = t.target
            if (
                isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and self._maybe_hot(node)
                and self._cheap_candidate(node.value) and self.flow.is_tensor(node.value) and self.flow.is_cpu_buffer(target.value)
            ):
                self._sync(target, "a device tensor written into a CPU tensor (a blocking device-to-host copy)", BUFFER_ADVICE)
                return

    def leave_Module(self, node: cst.Module) -> None:
        for sites in self._masks.values():
            hot = [s for s in sites if self._context(s) is not None]
            if not hot:
                continue
            more = ""
            if len(hot) > 1:
                lines = sorted({self.ctx.position(s).start.line for s in hot[1:]})
                more = f" ({len(hot) - 1} more in this function, line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})"
            self._sync(hot[0], "boolean-mask indexing of a tensor (it counts the mask on the host)" + more, MASK_ADVICE)

    def _is_mask(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A boolean tensor: a comparison of tensors, `~m`, `m & n`, `torch.isnan(t)` ..., or a
        name bound to one."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Comparison):
            if any(not isinstance(t.operator, _ORDER_OPS) for t in expr.comparisons):
                return False
            sides = [expr.left] + [t.comparator for t in expr.comparisons]  # `a < b + m`: either side
            return any(self._cheap_candidate(x) and self.flow.is_tensor(x) for x in sides)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return self._is_mask(expr.expression, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
            return self._is_mask(expr.left, depth + 1) or self._is_mask(expr.right, depth + 1)
        if isinstance(expr, cst.Call):
            q = self.ctx.qualname(expr.func) if isinstance(expr.func, (cst.Name, cst.Attribute)) else None
            if q in _MASK_FUNCS:
                return True
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _MASK_METHODS:
                return self.flow.is_tensor(expr.func.value)
            return False
        if isinstance(expr, cst.Name):
            b = self.flow.binding(expr)
            if b is not None and b.kind == "assign":
                value = self.flow.value_at(b)
                return value is not None and self._is_mask(value, depth + 1)
        return False

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Modulo) and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString)):
            if not self._maybe_hot(node):
                return
            right = node.right
            values = [e.value for e in right.elements] if isinstance(right, cst.Tuple) else [right]
            self._first_tensor(values, "`%`-formatting a tensor")

    def _sizes(self, node: cst.Call, func: cst.BaseExpression) -> None:
        """A tensor where a Python int is needed: `torch.arange(n)`, `torch.zeros(n, d)`,
        `range(n)` with a tensor `n` (`n = lengths.max()`) reads it on the host; so does a graph
        pooling call that works out the number of graphs from `batch.max()` (no `size=`)."""
        q = self.ctx.qualname(func) or ""
        if not q and isinstance(func, cst.Attribute):  # `self.pool = global_mean_pool`, then `self.pool(h, batch)`
            # (set to one of several poolings by a config switch: any of them may run)
            written = {self.ctx.qualname(w) for w in self.flow.self_writes(func) if isinstance(w, (cst.Name, cst.Attribute))}
            q = min(cast("Set[str]", written & _POOLS_WITHOUT_SIZE), default="")  # (an intersection with names: no None)
        if (isinstance(func, cst.Name) and func.value == "range" and q in ("range", "builtins.range")) or q in _SIZED_FACTORIES:
            self._first_tensor([a.value for a in node.args if a.keyword is None and not a.star], f"a tensor used as a size in `{dotted(func)}()`", SIZE_ADVICE)
        elif q in _POOLS_WITHOUT_SIZE and not any(a.keyword is not None and a.keyword.value == "size" for a in node.args):
            positional = [a for a in node.args if a.keyword is None and not a.star]
            batch = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "batch"), None)
            if batch is None and len(positional) > 1:
                batch = positional[1].value
            if len(positional) < 3 and batch is not None and self._cheap_candidate(batch) and self.flow.is_tensor(batch):
                self._sync(node, f"`{dotted(func)}()` without `size=` (it reads `int(batch.max()) + 1`)", POOL_ADVICE)

    def _first_tensor(self, values: List[cst.BaseExpression], what: str, advice: Optional[str] = None) -> None:
        for value in values:
            if self._cheap_candidate(value) and self.flow.is_tensor(value):
                self._sync(value, what, advice)
                return

    def _synchronize(self, node: cst.Call) -> None:
        fn = self.ctx.torch.enclosing_function(node)
        sites = self._wrapper_sites(fn, node) if fn is not None else []
        if sites:
            # a helper that only synchronizes (`def sync(device): torch.cuda.synchronize(device)`):
            # each call that runs it per step is a sync of its own, removed where it is called
            for call in sites:
                self._sync(call, f"`{dotted(call.func) or 'helper'}()` (it calls `torch.cuda.synchronize()`)", SYNCHRONIZE_ADVICE)
            return
        self._sync(node, "`torch.cuda.synchronize()`", SYNCHRONIZE_ADVICE)

    def _wrapper_sites(self, fn: cst.FunctionDef, sync: cst.Call) -> List[cst.Call]:
        """The same-file calls of `fn` that run on every step or evaluation batch, when `fn` does
        nothing but synchronize (a device test, a clock read may come with it), leaving out the
        calls whose device argument is the CPU where the sync sits under `if device.type ==
        "cuda":`."""
        facts = self.ctx.torch
        info = facts.units.get(fn)
        if info is None or len(info.calls) > 4:
            return []
        for call in info.calls:
            q = self.ctx.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
            if call is not sync and q not in _TIME and q != "torch.cuda.is_available":
                return []
        guard = self._device_guard(fn, sync)
        sites = []
        for call in self.flow.callers(fn):
            if self._context(call) is None:
                continue
            if guard is not None:
                arg = _argument(call, fn, guard)
                if arg is not None and self.flow.device_kind(arg) == CPU:
                    continue  # `sync(loss_device)` with `loss_device = torch.device("cpu")`: no sync
            sites.append(call)
        return sites

    def _device_guard(self, fn: cst.FunctionDef, sync: cst.Call) -> Optional[str]:
        """The parameter `p` of `if p.type == "cuda":` around the sync, if any."""
        params = {p.name.value for p in fn.params.params}
        for a in self.ctx.torch.ancestors(sync):
            if a is fn:
                break
            if isinstance(a, cst.If) and isinstance(a.test, cst.Comparison) and len(a.test.comparisons) == 1:
                left, comp = a.test.left, a.test.comparisons[0]
                if (
                    isinstance(comp.operator, cst.Equal) and isinstance(left, cst.Attribute) and left.attr.value == "type"
                    and isinstance(left.value, cst.Name) and left.value.value in params
                    and isinstance(comp.comparator, cst.SimpleString) and comp.comparator.evaluated_value == "cuda"
                ):
                    return left.value.value
        return None

    def _method(self, node: cst.Call, func: cst.Attribute) -> None:
        method = func.attr.value
        receiver = func.value
        if self._inner_sync(receiver):
            return  # `x.cpu().numpy()`: the inner call is the sync, reported once
        info = self.flow
        if method == "numpy":
            forced = any(a.keyword is not None and a.keyword.value == "force" for a in node.args)
            if not forced or not info.is_tensor(receiver):
                return  # `.numpy()` fails on a device tensor unless `force=True`: host data
        elif method == "tolist":
            if node.args or not info.is_tensor(receiver) or info.is_host_value(receiver):
                return
        elif method == "item":
            if node.args or info.is_host_value(receiver) or self._host_batch(receiver):
                return
        elif method == "cpu":
            if any(a.keyword is None for a in node.args) or info.is_host_value(receiver) or self._host_batch(receiver):
                return
            if info.is_model(receiver):
                return  # a module moved to the host, not a tensor read
        self._sync(node, f"`.{method}()`")

    def _logging(self, node: cst.Call) -> None:
        values: List[cst.BaseExpression] = []
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else "log"
        if name == "add_scalar":
            for i, arg in enumerate(node.args):
                if (arg.keyword is None and i == 1) or (arg.keyword is not None and arg.keyword.value == "scalar_value"):
                    values.append(arg.value)
        elif name == "set_postfix":
            values.extend(a.value for a in node.args if a.keyword is not None)
            for a in node.args:
                if a.keyword is None and isinstance(a.value, cst.Dict):
                    values.extend(e.value for e in a.value.elements if isinstance(e, cst.DictElement))
        elif name == "log_metric":
            if len(node.args) > 1:
                values.append(node.args[1].value)
        else:  # wandb.log({...}) / log_metrics({...})
            for a in node.args:
                if a.keyword is None and isinstance(a.value, cst.Dict):
                    values.extend(e.value for e in a.value.elements if isinstance(e, cst.DictElement))
        for value in values:
            if self._cheap_candidate(value) and self.flow.is_tensor(value):
                self._sync(value, f"`{dotted(func) or name}()` of a tensor (it converts it on the host)")

    def visit_FormattedStringExpression(self, node: cst.FormattedStringExpression) -> None:
        expr = node.expression
        if not self._maybe_hot(expr):
            return
        if self._cheap_candidate(expr) and self.flow.is_tensor(expr):
            self._sync(expr, "formatting a tensor in an f-string")

    def visit_If(self, node: cst.If) -> None:
        self._test(node.test, "`if` on a tensor")

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._test(node.test, "a conditional expression on a tensor")

    def visit_Assert(self, node: cst.Assert) -> None:
        self._test(node.test, "`assert` on a tensor")

    def visit_While(self, node: cst.While) -> None:
        self._test(node.test, "`while` on a tensor")

    def _test(self, test: cst.BaseExpression, what: str) -> None:
        if not self._maybe_hot(test):
            return
        for operand in _bool_operands(test):
            if self._cheap_candidate(operand) and self.flow.is_tensor(operand):
                self._sync(operand, what + " (it calls `bool()`)")
                return

    # -- reporting ----------------------------------------------------------------------------
    def _maybe_hot(self, node: cst.CSTNode) -> bool:
        """Cheap pre-check: GPU script, and the node runs per step or per evaluation batch."""
        if not self.ctx.may_use_gpu:
            return False
        facts = self.ctx.torch
        if facts.step_of(node) is not None or facts.eval_loop_of(node) is not None or facts.eval_function_of(node) is not None:
            return True
        fn = facts.epoch_of(node)  # an evaluation run once per epoch (`_evaluation_per_epoch`)
        if not isinstance(fn, cst.FunctionDef):
            return False
        if fn not in self._epoch_candidates:
            self._epoch_candidates[fn] = not facts.reaches_backward(fn) and not self._cpu_only(fn)
        return self._epoch_candidates[fn]

    def _cheap_candidate(self, expr: cst.BaseExpression) -> bool:
        """Expressions worth asking `is_tensor` about (literals and strings never are)."""
        return not isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Integer, cst.Float, cst.Lambda))

    def _sync(self, node: cst.CSTNode, what: str, advice: Optional[str] = None) -> None:
        """Report a sync (`advice`: what fits this kind of read, when it is not a value read for
        its own sake; else the advice follows what the value is used for, `_advice`)."""
        if node in self._reported or not self.ctx.may_use_gpu:
            return
        if self._tensor_branch_never_runs(node):
            return
        where = self._context(node)
        if where is None or self._feeds_next_iteration(node):
            return
        level, text = where
        self._reported.add(node)
        statement = next((a for a in self.ctx.torch.ancestors(node) if isinstance(a, _STATEMENTS)), None)
        if statement is not None:
            # `a, b = x.cpu(), y.cpu()`: the first sync drains the queue, the second finds it
            # (nearly) empty; one finding per statement
            if statement in self._synced_statements:
                return
            self._synced_statements.add(statement)
        if level == HIGH:
            # the first sync of a step drains the whole queue; later ones in the same step
            # mostly wait for what was queued in between: rank them below the first
            unit = self.ctx.torch.step_of(node)
            if unit in self._synced_units:
                level = MEDIUM
            self._synced_units.add(unit)
        use = host_use(self.ctx, node)
        message = f"{what} waits for the GPU {text}: a host-device sync"
        if use is not None and use.kind == LIBRARY:
            message += f" (the values go to {use.what}, which needs them on the host)"
        if level != LOW:
            when = None
        elif text.startswith("once per epoch"):
            when = EPOCH_WHEN
        else:
            when = "GPU; once per evaluation batch"
        self.report(
            node,
            message,
            fix=Fix.advice(advice or _advice(use, level == LOW)),
            impact=self.impact if level == HIGH else self.impact.with_level(level, when),
        )

    def _feeds_next_iteration(self, node: cst.CSTNode) -> bool:
        """The value read becomes the loop's next input (an action handed to an environment
        whose observation the next forward reads): a sync nothing can avoid
        (`providers.feedback`)."""
        facts = self.ctx.torch
        loop = facts.step_of(node)
        if not isinstance(loop, (cst.For, cst.While)):
            loop = facts.eval_loop_of(node)
        if loop is None:
            return False
        return feeds_next_iteration(
            node, loop,
            lambda n: next((a for a in facts.ancestors(n) if isinstance(a, cst.BaseSmallStatement)), None),
            self._library_call, self._input_call,
        )

    def _library_call(self, call: cst.Call) -> bool:
        """A call that is neither torch's nor a builtin (an environment's `step`, a simulator)."""
        func = call.func
        if isinstance(func, cst.Name) and func.value in _BUILTINS:
            return False
        q = self.ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        return not (q or "").startswith("torch")

    def _input_call(self, call: cst.Call) -> bool:
        """A call that makes model input of its arguments: a torch call, a model or its method."""
        func = call.func
        q = self.ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if (q or "").startswith("torch."):
            return True
        return self.flow.is_model(func) or (isinstance(func, cst.Attribute) and self.flow.is_model(func.value))

    def _tensor_branch_never_runs(self, node: cst.CSTNode) -> bool:
        """`if isinstance(v, torch.Tensor): v = v.item()` in a helper (a metric logger's
        `update(**kwargs)`) where `v` is a parameter, or a value of its `**kwargs` / `*args`, to
        which no call site that runs the helper every step or evaluation batch may pass a tensor
        (the whole program: `TorchFacts.host_parameter`): the branch does not run there."""
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        if fn is None:
            return False
        child: cst.CSTNode = node
        for a in facts.ancestors(node):
            if a is fn:
                break
            subject = None
            if isinstance(a, (cst.If, cst.IfExp)) and child is a.body:
                subject = tensor_test(self.ctx, a.test, True)
            elif isinstance(a, (cst.If, cst.IfExp)) and child is a.orelse and not isinstance(child, cst.If):
                subject = tensor_test(self.ctx, a.test, False)  # `if not isinstance(v, torch.Tensor): ... else:`
            if subject is not None:
                source = self.flow.parameter_source(subject)
                if source is not None and source[0] is fn and facts.host_parameter(fn, source[1]):
                    return True
            child = a
        return False

    # -- where it runs ------------------------------------------------------------------------
    def _context(self, node: cst.CSTNode) -> Optional[Tuple[int, str]]:
        facts = self.ctx.torch
        loop = facts.eval_loop_of(node)
        if loop is not None and not self._per_step(loop):
            # an evaluation loop (also one run every N steps from inside the training loop); in a
            # function that runs per evaluation batch, a guard above the loop counts too
            fn = facts.enclosing_function(loop)
            if fn is not None and (fn in facts.step_functions or fn in facts.eval_functions) and self._rarely_run(loop, fn):
                return None
            if not self._cpu_only(loop) and not self._rarely_run(node, loop):
                return LOW, "on every evaluation batch"
            return None
        unit = facts.step_of(node)
        if unit is not None and not self._cpu_only(unit) and self._every_step(node, unit, set()):
            return HIGH, "on every training step"
        fn = facts.eval_function_of(node)
        if fn is not None and not self._rarely_run(node, fn):
            return LOW, "on every evaluation batch"  # a function an evaluation loop elsewhere calls
        if self._evaluation_per_epoch(node):
            return LOW, "once per epoch (in an evaluation)"
        return None

    def _evaluation_per_epoch(self, node: cst.CSTNode) -> bool:
        """`node` runs once per epoch in a whole-set evaluation: a function the epoch loop calls
        that runs without backward under `no_grad` or after `.eval()`, in one go (a full-graph
        `test()`: no loop over evaluation batches, `node` in no loop or comprehension). After a
        loop over batches, one copy of the gathered results is the cure, not the cost."""
        facts = self.ctx.torch
        fn = facts.epoch_of(node)
        if not isinstance(fn, cst.FunctionDef) or not self._epoch_candidates.get(fn):
            return False
        if any(isinstance(a, (cst.For, cst.While, *_COMPREHENSIONS)) for a in _ancestors_within(facts, node, fn)):
            return False
        if any(facts.contains(fn, loop) for loop in facts.eval_loops):
            return False
        evaluating = facts.grad_disabled_at(node) is not None or any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "eval" and not c.args and facts.is_before(c, node)
            for c in facts.units[fn].calls
        )
        return evaluating and not self._rarely_run(node, fn)

    def _per_step(self, node: cst.CSTNode) -> bool:
        unit = self.ctx.torch.step_of(node)
        return unit is not None and self._every_step(node, unit, set())

    def _every_step(self, node: cst.CSTNode, unit: cst.CSTNode, seen: Set[cst.CSTNode]) -> bool:
        if self._rarely_run(node, unit):
            return False
        if isinstance(unit, (cst.For, cst.While)):
            return True
        if unit in seen:
            return False
        seen.add(unit)
        assert isinstance(unit, cst.FunctionDef)
        facts = self.ctx.torch
        if facts.program_hot(unit, "step"):
            return True  # called every step from another module (the program follows only such calls)
        for call in self.flow.callers(unit):
            caller_unit = facts.step_of(call)
            if caller_unit is not None and self._every_step(call, caller_unit, seen):
                return True
        return False

    def _cpu_only(self, unit: cst.CSTNode) -> bool:
        """The function running this step moves tensors, and only ever to the CPU."""
        facts = self.ctx.torch
        fn = unit if isinstance(unit, cst.FunctionDef) else facts.enclosing_function(unit)
        if fn is None:
            return False
        kinds = set()
        for call in facts.units[fn].calls:
            move = self.flow.parse_move(call) if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("to", "cuda") else None
            if move is not None and move.kind != "dtype":
                kinds.add(move.kind)
        return kinds == {CPU}

    def _rarely_run(self, node: cst.CSTNode, boundary: cst.CSTNode) -> bool:
        """A branch between `node` and `boundary` that is not taken on every iteration (or never
        on the CUDA path: `if x.device.type == "cpu":`, `if hasattr(self, "never_set") and ...`)."""
        facts = self.ctx.torch
        if off_gpu_path(self.ctx, node, boundary):
            return True
        child: cst.CSTNode = node
        for a in facts.ancestors(node):
            if a is boundary:
                break
            if isinstance(a, (cst.ExceptHandler, cst.ExceptStarHandler)):
                return True
            if isinstance(a, cst.If) and child is a.body and (self._rare_condition(a.test, a) or self._never_true(a.test)):
                return True
            if isinstance(a, (cst.If, cst.IfExp)) and child is a.orelse and self._branches(a.test)[1]:
                return True  # the `else` of `if step % N != 0:`: one step in N
            if isinstance(a, cst.IfExp) and child is a.body and self._rare_condition(a.test, None):
                return True
            if isinstance(a, cst.BooleanOperation) and child is a.right and self._rare_condition(a.left, None):
                return True
            if isinstance(a, (cst.IndentedBlock, cst.Module)) and isinstance(child, cst.BaseStatement):
                if self._skipped_before(a, child):
                    return True
            child = a
        return False

    def _never_true(self, test: cst.BaseExpression) -> bool:
        """`if self.autobalance:` where the attribute only ever holds a parameter that every call
        site in the program leaves to its `False` default (or a false constant): the branch
        never runs. Not for command-line options or config values, which the user sets at run
        time."""
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and _is_none(test.comparisons[0].comparator):
            # `if batch is not None:` where every caller leaves `batch` to its None default
            op = test.comparisons[0].operator
            if isinstance(op, cst.IsNot) and isinstance(test.left, (cst.Name, cst.Attribute)):
                value = self.ctx.values.resolve(test.left)
                return (
                    value is not None and value.certain and value.kind in ("literal", "constant", "default", "attribute")
                    and bool(value.options) and value.all(lambda o: o is None)
                )
            return False
        if not isinstance(test, (cst.Name, cst.Attribute)):
            return False
        value = self.ctx.values.resolve(test)
        return (
            value is not None
            and value.certain
            and value.kind in ("literal", "constant", "default", "attribute")
            and bool(value.options)
            and not value.any(bool)
        )

    def _skipped_before(self, block: cst.CSTNode, stmt: cst.CSTNode) -> bool:
        """`if step % N != 0: continue` (or return) earlier in the same block."""
        for other in getattr(block, "body", ()):
            if other is stmt:
                return False
            if isinstance(other, cst.If) and other.orelse is None and _only_jumps(other.body):
                if self._rare_condition(other.test, None, negated=True):
                    return True
        return False

    def _rare_condition(self, test: cst.BaseExpression, if_node: Optional[cst.If], negated: bool = False) -> bool:
        """A condition that holds on some steps only (periodic, counter-based, time-based, anomaly)."""
        facts = self.ctx.torch
        if if_node is not None and any(
            facts.is_optimizer_step(c) for c in _calls_in(if_node.body)
        ):
            return False  # the gradient-accumulation boundary: runs once per optimizer step
        found = branches(test, self._predicate)
        if found is not None and found[1 if negated else 0]:
            return True  # `if step % N == 0:`; `if step % N != 0: continue` before it; `should_log(step)`
        for sub in _walk(test):
            if found is not None and (is_modulo(sub) or (isinstance(sub, cst.Call) and self._predicate(sub) is not None)):
                continue  # an interval term, decided above (`if step % N != 0:` runs on most steps)
            if isinstance(sub, cst.BinaryOperation) and isinstance(sub.operator, cst.Modulo):
                return True
            if isinstance(sub, cst.Call):
                q = self.ctx.qualname(sub.func) or ""
                tail = q.rsplit(".", 1)[-1] if q else (dotted(sub.func) or "").rsplit(".", 1)[-1]
                # time-based logging and anomaly checks hold now and then: a body run then is
                # rare, but a `continue` taken then skips the rest of the step only rarely
                if (q in _TIME or tail in _ANOMALY) and not negated:
                    return True
                if isinstance(sub.func, cst.Attribute) and sub.func.attr.value in ("item", "any", "all") + _ANOMALY and not negated:
                    return True
                if any(self._counter(a.value) for a in sub.args):
                    return True  # `should_log(step)`
            if isinstance(sub, (cst.Name, cst.Attribute)):
                last = (dotted(sub) or "").rsplit(".", 1)[-1]
                if last and _RARE_NAME.search(last):
                    return True
                if isinstance(sub, cst.Name):
                    b = self.flow.binding(sub)
                    value = self.flow.value_at(b) if b is not None and b.kind == "assign" else None
                    if value is not None and any(
                        isinstance(s, cst.BinaryOperation) and isinstance(s.operator, cst.Modulo) for s in _walk(value)
                    ):
                        return True  # `log_now = step % 100 == 0`
            if isinstance(sub, cst.Comparison):
                left = sub.left
                for t in sub.comparisons:
                    op = t.operator
                    pair = (left, t.comparator)
                    if isinstance(op, _ORDER_OPS[2:]) and any(self.flow.is_epoch_counter(x) for x in pair):
                        left = t.comparator
                        continue  # `if epoch >= warmup_epochs:`: every step of the epochs it holds in
                    if isinstance(op, (cst.Equal, cst.In)) and not negated and any(self._counter(x) for x in pair):
                        return True
                    if isinstance(op, (cst.NotEqual, cst.NotIn)) and negated and any(self._counter(x) for x in pair):
                        return True
                    if isinstance(op, (cst.LessThan, cst.LessThanEqual)) and self._counter(left) and not negated:
                        return True  # only the first N steps
                    if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)) and self._counter(t.comparator) and not negated:
                        return True
                    left = t.comparator
            if not negated and isinstance(sub, (cst.Call, cst.Comparison)) and self.flow.is_tensor(sub):
                return True  # an anomaly check on a tensor: the body is the exception
        return False

    def _predicate(self, call: cst.Call) -> Optional[Branches]:
        """A same-file helper whose whole body returns an interval test (`def should_log(i):
        return i % 10 == 0`): what a branch on its result runs."""
        for fn in self.ctx.torch.resolve_call(call):
            found = predicate_of(fn)
            if found is not None:
                return found
        return None

    def _branches(self, test: cst.BaseExpression) -> Branches:
        found = branches(test, self._predicate)
        return found if found is not None else (False, False)

    def _counter(self, expr: cst.BaseExpression) -> bool:
        """A value that changes every step: a loop counter, a `+= 1` step count, `global_step`."""
        if isinstance(expr, cst.BinaryOperation):
            return self._counter(expr.left) or self._counter(expr.right)
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        b = self.flow.binding(expr) if isinstance(expr, cst.Name) else None
        if b is not None and b.kind == "for" and isinstance(b.site, (cst.For, cst.While)):
            facts = self.ctx.torch
            if b.site not in facts.step_loops and facts.step_of(b.site) is not None:
                return False  # the counter of a loop inside the step (over layers, over the batch)
        last = (dotted(expr) or "").rsplit(".", 1)[-1]
        if last and COUNTER_NAME.search(last):
            return True
        if isinstance(expr, cst.Name):
            if b is not None and b.kind == "augassign":
                return True
            if b is not None and b.kind == "for" and self.flow.is_host_value(expr):
                return True
        return False

    def _inner_sync(self, expr: cst.BaseExpression) -> bool:
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("item", "cpu", "tolist")
            for c in _inner_sync_chain(expr)
        )

    def _host_batch(self, expr: cst.BaseExpression) -> bool:
        """A batch straight from a DataLoader, never moved: a CPU tensor.

        Also a loop target that the loop itself moves elsewhere (`y.to(device)` in the body):
        the unmoved name still refers to the host copy.
        """
        if self.flow.loader_of_batch(expr) is not None:
            return not placed_by_framework(self.ctx, expr)  # accelerate's `prepare` put it on the device
        root = expr
        while isinstance(root, (cst.Subscript, cst.Attribute)):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        b = self.flow.binding(root)
        if b is None or b.kind != "for":
            return False
        for call in _calls_in(cast(cst.For, b.site).body):  # (a "for" binding's site is its For)
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value in ("to", "cuda")
                and isinstance(func.value, cst.Name)
                and func.value.value == root.value
            ):
                move = self.flow.parse_move(call)
                if move is not None and move.moves_to_device:
                    return True
        return False


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _ancestors_within(facts: TorchFacts, node: cst.CSTNode, boundary: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for a in facts.ancestors(node):
        if a is boundary:
            return
        yield a


def _advice(use: Optional[HostUse], evaluation: bool) -> str:
    """The advice that fits what the value is used for (`providers.host_use`) and where it runs."""
    if use is None:
        return EVAL_ADVICE if evaluation else ADVICE
    if use.kind == LIBRARY:
        return (EVAL_LIBRARY_ADVICE if evaluation else LIBRARY_ADVICE).format(what=use.what)
    assert use.kind == DECISION
    return DECISION_ADVICE.format(what=use.what)


def _inner_sync_chain(expr: cst.BaseExpression) -> Iterator[cst.Call]:
    while True:
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute):
                yield expr
                expr = expr.func.value
                continue
            return
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
            continue
        return


def _argument(call: cst.Call, fn: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
    """What `call` passes to parameter `name` of `fn` (None: left to its default, or unknown)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    names = [p.name.value for p in fn.params.params]
    if names and names[0] == "self":
        names = names[1:]
    positional = [a for a in call.args if a.keyword is None]
    if name in names and any(a.star for a in positional[: names.index(name) + 1]):
        return None
    k = names.index(name) if name in names else -1
    return positional[k].value if 0 <= k < len(positional) else None


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _wandb_run_log(func: cst.BaseExpression) -> bool:
    """`wandb_run.log({...})`, `self.wandb.log(...)`: the `log` of a W&B run object (`wandb.init()`
    returns one; it is usually passed around under a name that says so)."""
    if not (isinstance(func, cst.Attribute) and func.attr.value == "log"):
        return False
    return "wandb" in (dotted(func.value) or "").lower()


def _bool_operands(test: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation):
        yield from _bool_operands(test.left)
        yield from _bool_operands(test.right)
    elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from _bool_operands(test.expression)
    else:
        yield test


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _calls_in(node: cst.CSTNode) -> Iterator[cst.Call]:
    for sub in _walk(node):
        if isinstance(sub, cst.Call):
            yield sub


def _only_jumps(body: cst.BaseSuite) -> bool:
    stmts = body.body
    smalls: List[cst.BaseSmallStatement] = []
    for s in stmts:
        if isinstance(s, cst.SimpleStatementLine):
            smalls.extend(s.body)
        elif isinstance(s, cst.BaseSmallStatement):
            smalls.append(s)
        else:
            return False
    return bool(smalls) and all(isinstance(s, (cst.Continue, cst.Return)) for s in smalls)

