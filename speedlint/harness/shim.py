"""The runner shim: runs a user's training script unchanged and measures it.

    python speedlint/harness/shim.py CONFIG.json SCRIPT [ARGS...]

CONFIG.json holds {"out": path, "seed": int, "warmup": int, "steps": int}. The shim
- seeds `random`, `numpy` and `torch` with the same seed before the script starts;
- counts optimizer steps through torch's global optimizer step post-hook and timestamps each;
  on a GPU it waits for the queued work (`torch.cuda.synchronize`) at the two steps the rate is
  measured between (the last warm-up step and the last step), and at no other;
- records the loss of each backward pass (the unscaled loss when a GradScaler scaled it) and
  sums them per optimizer step (so accumulation compares per optimizer step);
- times how long the script waits on DataLoader iterators (`__next__`);
- stops the script after warm-up + N steps by raising a private BaseException from the hook,
  shuts DataLoader workers down, writes its measurements as JSON and exits.

This file is executed by path in a fresh interpreter (never imported by speedlint itself): it
needs only the standard library, plus torch and numpy when the script uses them. torch is
imported lazily (when the user's script imports it), so the shim works for any script.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
import weakref

TYPE_CHECKING = False  # (the names below are for type checkers: at run time the shim imports nothing more)
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any, Dict, List, Optional, Sequence, Tuple

STATE: Dict[str, Any] = {
    "status": "running",  # completed | stopped | error | exit
    "exit_code": 0,
    "error": None,
    "step_times": [],  # perf_counter at each optimizer step
    "data_wait": [],  # cumulative DataLoader wait at each optimizer step
    "losses": [],  # per optimizer step: the sum of the losses backpropagated since the previous step
    "backwards": [],  # per optimizer step: number of backward passes
    "start": 0.0,
    "end": 0.0,
    "torch_used": False,
    "amp_scaler": False,
}


class _StopRun(BaseException):
    """Raised from the optimizer step hook once enough steps are measured."""


_wait = [0.0]
_pending: List[Any] = []  # loss tensors (detached) since the last optimizer step
_scaled: Dict[int, Tuple[Any, Any]] = {}  # id(scaled tensor) -> (scaled tensor, unscaled detached tensor)
_iters: weakref.WeakSet[Any] = weakref.WeakSet()  # live DataLoader iterators (to shut workers down on stop)
_config: Dict[str, Any] = {}
_stopping = [False]


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except Exception:
        return float("nan")


def _install_torch_hooks() -> None:
    import torch  # noqa: F401  (only when the script imported it)

    STATE["torch_used"] = True
    seed = _config["seed"]
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except Exception:
        pass

    warmup = _config["warmup"]
    total = warmup + _config["steps"]

    def step_hook(optimizer: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        step = len(STATE["step_times"]) + 1
        if (step == warmup or step == total) and torch.cuda.is_initialized():
            # The rate is measured between these two steps' timestamps: on a GPU, the work
            # queued by then must be done, or a script that never syncs would be timed by how
            # fast it queues kernels, not by how fast they run.
            torch.cuda.synchronize()
        now = time.perf_counter()
        STATE["step_times"].append(now)
        STATE["data_wait"].append(_wait[0])
        STATE["backwards"].append(len(_pending))
        STATE["losses"].append(list(_pending))
        _pending.clear()
        if total > 0 and len(STATE["step_times"]) >= total:
            _stopping[0] = True
            raise _StopRun()

    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(step_hook)

    original_backward = torch.autograd.backward

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> None:
        t = tensors[0] if isinstance(tensors, (list, tuple)) and len(tensors) == 1 else tensors
        if isinstance(t, torch.Tensor) and t.numel() == 1:
            entry = _scaled.pop(id(t), None)
            value = entry[1] if entry is not None and entry[0] is t else t.detach()
            _pending.append(value)
        _scaled.clear()
        return original_backward(tensors, *args, **kwargs)

    torch.autograd.backward = backward

    try:
        from torch.amp.grad_scaler import GradScaler

        original_scale = GradScaler.scale

        def scale(self: Any, outputs: Any) -> Any:
            result = original_scale(self, outputs)
            if isinstance(outputs, torch.Tensor) and isinstance(result, torch.Tensor):
                STATE["amp_scaler"] = True
                _scaled[id(result)] = (result, outputs.detach())
            return result

        GradScaler.scale = scale  # type: ignore[method-assign]
    except Exception:
        pass

    from torch.utils.data import dataloader as dl

    original_next = dl._BaseDataLoaderIter.__next__

    def timed_next(self: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original_next(self)
        finally:
            _wait[0] += time.perf_counter() - t0

    dl._BaseDataLoaderIter.__next__ = timed_next  # type: ignore[method-assign]

    original_init = dl._MultiProcessingDataLoaderIter.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        _iters.add(self)

    dl._MultiProcessingDataLoaderIter.__init__ = init  # type: ignore[method-assign]


class _TorchWatcher:
    """A meta-path finder that installs the hooks right after the script imports torch."""

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None, target: Optional[ModuleType] = None) -> Optional[ModuleSpec]:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original_exec(module)
            try:
                _install_torch_hooks()
            except Exception as exc:  # never break the user's import of torch
                sys.stderr.write(f"speedlint shim: cannot install torch hooks: {exc!r}\n")

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _shutdown_workers() -> None:
    for it in list(_iters):
        try:
            it._shutdown_workers()
        except Exception:
            pass


def _finish() -> None:
    STATE["end"] = time.perf_counter()
    losses = []
    for group in STATE["losses"]:
        losses.append(sum(_to_float(v) for v in group) if group else None)
    STATE["losses"] = losses
    data = dict(STATE)
    tmp = _config["out"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, _config["out"])


def _error_text(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip()


def _print_user_traceback(exc: BaseException, script: str) -> None:
    """The traceback as `python script.py` would show it: without the shim's and runpy's frames."""
    tb = exc.__traceback__
    first = tb
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == script:
            first = tb
            break
        tb = tb.tb_next
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, first)))


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: shim.py CONFIG.json SCRIPT [ARGS...]\n")
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        _config.update(json.load(fh))
    script = os.path.abspath(argv[1])
    sys.argv = [argv[1], *argv[2:]]
    sys.path[0] = os.path.dirname(script)
    random.seed(_config["seed"])
    if "torch" in sys.modules:  # pragma: no cover - not when run by path
        _install_torch_hooks()
    else:
        sys.meta_path.insert(0, _TorchWatcher())
    try:
        import numpy as np

        np.random.seed(_config["seed"])
    except Exception:
        pass
    import runpy

    STATE["start"] = time.perf_counter()
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
        STATE["status"] = "completed"
    except _StopRun:
        STATE["status"] = "stopped"
    except SystemExit as exc:
        if _stopping[0]:
            STATE["status"] = "stopped"
        else:
            c = exc.code
            code = c if isinstance(c, int) else (0 if c is None else 1)
            STATE["status"] = "completed" if code == 0 else "exit"
            STATE["exit_code"] = code
            if code != 0:
                STATE["error"] = f"SystemExit: {c}"
    except KeyboardInterrupt:
        STATE["status"] = "error"
        STATE["error"] = "KeyboardInterrupt"
        code = 130
    except BaseException as exc:  # the script's own error: shown as Python would, recorded for the parent
        if _stopping[0] and not isinstance(exc, Exception):
            STATE["status"] = "stopped"
        else:
            _print_user_traceback(exc, script)
            STATE["status"] = "error"
            STATE["error"] = _error_text(exc)
            STATE["exit_code"] = code = 1
    _shutdown_workers()
    _finish()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    if STATE["status"] == "stopped":
        os._exit(0)  # the script's remaining threads and atexit handlers have nothing to add
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
