"""`speedlint verify`: run a script before and after its fixes, compare speed and losses.

Both versions run from temporary copies of the script's folder (the user's files are never
touched and never written by the runs); the "after" copy holds exactly what `speedlint fix
--apply` writes, config files included (the fixes come from `fixdriver.compute_fixes`). Each
runs in a fresh subprocess of the same interpreter with the same arguments, environment and
seeds, under the runner shim (`shim.py`). Runs alternate
(before, after, before, after, ...). A run that exceeds the timeout is killed with its whole
process group; stragglers of a finished run (DataLoader workers, helpers) are killed the same way.

A notebook (`.ipynb`) is verified when it can run as a script: its code cells are exported, in
order, to a script next to it in each copy (harmless magics such as `%matplotlib inline` left
out, `%time stmt` run as `stmt`, `%%time`/`%%capture` cells run as their body), which runs from
the notebook's folder, as Jupyter runs it. A notebook that needs IPython (shell escapes, other
magics, `%%bash` cells, `get_ipython()`) or has a cell with a syntax error is refused
(`VerifyError`, with the reason).

This module never imports torch: only the shim, in the child process, does.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

if TYPE_CHECKING:  # pragma: no cover
    from typing import TypedDict

    from speedlint.analyzer.fixdriver import FixRun
    from speedlint.analyzer.runner import SettingsResolver

    class _ResultBase(TypedDict):
        """The fields of a `VerifyResult` that `verify` knows before the runs."""

        script: str
        args: List[str]
        mode: str
        after_file: Optional[str]
        fixes: List["AppliedFix"]
        tolerance: float
        tolerance_kind: str
        min_speedup: float
        settings: Dict[str, object]

SHIM = Path(__file__).with_name("shim.py")

# verdicts and their exit codes (documented in `speedlint verify --help` and docs/verify.md)
VERIFIED_FASTER = "verified-faster"
EQUIVALENT_NOT_FASTER = "equivalent-not-faster"
DIVERGED = "diverged"
CRASHED = "crashed"
INCONCLUSIVE = "inconclusive"
EXIT_CODES: Dict[str, int] = {
    VERIFIED_FASTER: 0,
    EQUIVALENT_NOT_FASTER: 3,
    DIVERGED: 4,
    CRASHED: 5,
    INCONCLUSIVE: 6,
}

# relative loss tolerance per kind of change
TOLERANCES: Dict[str, float] = {
    "safe": 1e-5,  # safe fixes keep the program's results: only float noise is allowed
    "unsafe": 1e-3,  # unsafe fixes other than AMP (tuned DataLoader, ...): reordering noise
    "manual": 1e-3,  # `--after FILE`: a hand rewrite without precision changes
    "amp": 0.1,  # mixed precision: bfloat16/float16 rounding, per step
}
AMP_CODES = {"SPD301"}
MIN_MEASURED_STEPS = 3
HEAVY_DIRS = {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache", ".tox", ".ruff_cache", ".speedlint_cache"}
LINK_ABOVE_BYTES = 8 * 1024 * 1024  # big data files are symlinked into the copy, not copied


class VerifyError(Exception):
    """A usage problem (missing script, files outside the copied folder); exit code 2."""


@dataclass
class VerifyOptions:
    script: Path
    args: Tuple[str, ...] = ()
    steps: int = 30
    warmup: int = 5
    repeats: int = 3
    timeout: float = 300.0  # per run, seconds
    tolerance: Optional[float] = None  # overrides the tolerance of the kind of change
    min_speedup: float = 1.05
    seed: int = 0
    after: Optional[Path] = None  # compare with this file instead of the fixes
    #: the paths to fix, files or folders, as `speedlint fix` is given them (default: the
    #: script's folder, and the script)
    fix_files: Optional[Sequence[Path]] = None
    #: the fixes to verify, already computed by the fix driver (`fixdriver.compute_fixes`, as
    #: `fix --verify` does before writing them); default: computed here for `fix_files`
    fixes: "Optional[FixRun]" = None


@dataclass
class AppliedFix:
    path: str
    code: str
    title: str
    applicability: str
    line: int


@dataclass
class RunResult:
    label: str  # before | after
    repeat: int
    status: str  # completed | stopped | error | exit | timeout | killed
    exit_code: Optional[int]
    error: Optional[str]
    steps: int  # optimizer steps seen
    measured_steps: int
    warmup_used: int
    rate: Optional[float]  # optimizer steps per second after warm-up
    data_wait_share: Optional[float]
    wall_s: float
    losses: List[Optional[float]] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def failed(self) -> bool:
        return self.status not in ("completed", "stopped")


@dataclass
class Side:
    rates: List[float]
    median: Optional[float]
    low: Optional[float]
    high: Optional[float]
    data_wait_share: Optional[float]
    steps: int


@dataclass
class VerifyResult:
    verdict: str
    reason: str
    script: str
    args: List[str]
    mode: str  # fixes | after
    after_file: Optional[str]
    fixes: List[AppliedFix]
    tolerance: float
    tolerance_kind: str
    speedup: Optional[float]
    min_speedup: float
    before: Optional[Side]
    after: Optional[Side]
    loss_steps_compared: int
    loss_max_deviation: Optional[float]
    loss_max_deviation_step: Optional[int]
    runs: List[RunResult]
    settings: Dict[str, object]
    notes: List[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def slower(self) -> bool:
        """Measurably slower: the verdict said so (not merely a ratio below 1 inside the noise)."""
        return self.verdict == EQUIVALENT_NOT_FASTER and "slower" in self.reason

    @property
    def allows_write(self) -> bool:
        """`fix --apply --verify` writes on verified-faster, or on equal results that are not slower."""
        return self.verdict == VERIFIED_FASTER or (self.verdict == EQUIVALENT_NOT_FASTER and not self.slower)

    def to_dict(self) -> Dict[str, object]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        data["allows_write"] = self.allows_write
        data["slower"] = self.slower
        for run in data["runs"]:
            run["losses"] = [None if (v is None or not math.isfinite(v)) else v for v in run["losses"]]
        return data


Progress = Callable[[str], None]


# -- preparing the two copies ------------------------------------------------------------------
def _copy_tree(src: Path, dst: Path) -> None:
    def ignore(folder: str, names: List[str]) -> List[str]:
        return [n for n in names if n in HEAVY_DIRS or n.endswith(".speedlint-tmp")]

    def copy(s: str, d: str) -> str:
        try:
            if os.path.getsize(s) > LINK_ABOVE_BYTES:
                os.symlink(os.path.abspath(s), d)
                return d
        except OSError:
            pass
        return shutil.copy2(s, d)

    shutil.copytree(src, dst, ignore=ignore, copy_function=copy, symlinks=True)


def _tolerance_kind_for_fixes(fixes: Sequence[AppliedFix]) -> str:
    if any(f.code in AMP_CODES or "autocast" in f.title.lower() or "mixed precision" in f.title.lower() for f in fixes):
        return "amp"
    if any(f.applicability == "unsafe" for f in fixes):
        return "unsafe"
    return "safe"


def _fix_paths(script: Path, resolver: "SettingsResolver") -> List[str]:
    """What `verify SCRIPT` fixes by default: the script's folder, and the script even when the
    excludes leave it out."""
    from speedlint.analyzer.runner import collect_files

    paths = [str(script.parent)]
    if script not in {Path(f).resolve() for f in collect_files(paths, resolver).files}:
        paths.append(str(script))
    return paths


def _apply_fixes(root: Path, copy_root: Path, plan: "FixRun") -> List[AppliedFix]:
    """Write what `fix --apply` would write for `plan` (Python files, notebooks, config files:
    the same bytes, `FileChange.new_bytes`) into the copy `copy_root` of `root`; the fixes
    applied. A file whose fixed text cannot be encoded is left as it is, as `fix` leaves it."""
    from speedlint.analyzer.fixdriver import NOTEBOOK
    from speedlint.analyzer.notebook import Notebook

    applied: List[AppliedFix] = []
    for change in plan.changes:
        try:
            data = change.new_bytes()
        except UnicodeEncodeError:
            continue
        target = copy_root / Path(change.path).resolve().relative_to(root)
        if target.is_symlink():  # a big file linked into the copy: never write through the link
            target.unlink()
        where = Notebook.parse(Path(change.path).read_bytes()).cell_of if change.kind == NOTEBOOK else None
        target.write_bytes(data)
        for f in change.outcome.applied:
            fx = f.fix
            place, line = change.shown, f.line
            got = where(f.line) if where is not None else None
            if got is not None:  # a notebook: the cell and its line (for fixes of the first round)
                place, line = f"{change.shown}:cell {got[0].number}", got[1]
            applied.append(AppliedFix(place, f.code, fx.title if fx else "", str(getattr(fx.applicability, "value", fx.applicability)).lower() if fx else "", line))
    return applied


def _exported(top: Path, rel: Path) -> Path:
    """Export the notebook `top/rel` to a script next to it (`.NAME.ipynb.py`); its path."""
    from speedlint.analyzer.notebook import Notebook, NotebookError

    notebook = top / rel
    target = notebook.with_name(f".{notebook.name}.py")
    try:
        target.write_text(Notebook.parse(notebook.read_bytes()).script(), encoding="utf-8")
    except NotebookError as exc:
        raise VerifyError(f"{rel}: cannot run this notebook as a script: {exc}") from None
    return target


# -- one run -----------------------------------------------------------------------------------
def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_once(
    script: Path,
    args: Sequence[str],
    cwd: Path,
    env: Dict[str, str],
    workdir: Path,
    label: str,
    repeat: int,
    opts: VerifyOptions,
) -> RunResult:
    tag = f"{label}-{repeat}"
    out = workdir / f"{tag}.json"
    cfg = workdir / f"{tag}.config.json"
    cfg.write_text(json.dumps({"out": str(out), "seed": opts.seed, "warmup": opts.warmup, "steps": opts.steps}))
    out_log, err_log = workdir / f"{tag}.stdout", workdir / f"{tag}.stderr"
    start = time.perf_counter()
    timed_out = False
    with out_log.open("wb") as fo, err_log.open("wb") as fe:
        proc = subprocess.Popen(
            [sys.executable, str(SHIM), str(cfg), str(script), *args],
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fo,
            stderr=fe,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
        except BaseException:  # Ctrl-C in the parent: take the whole group down, then propagate
            _kill_group(proc.pid)
            proc.wait()
            raise
        finally:
            _kill_group(proc.pid)  # stragglers: DataLoader workers, helper processes
    wall = time.perf_counter() - start
    stderr_tail = _tail(err_log)
    data: Dict[str, Any] = {}  # the shim's measurements (JSON)
    if out.is_file():
        try:
            data = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
    error: Optional[str]  # (the shim records a message or None)
    if timed_out:
        status, error = "timeout", f"timed out after {opts.timeout:g} s (process group killed)"
    elif not data:
        status = "killed"
        rc = proc.returncode
        error = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with code {rc} without measurements"
    else:
        status = str(data.get("status"))
        error = data.get("error")
    times: List[float] = list(data.get("step_times") or [])
    waits: List[float] = list(data.get("data_wait") or [])
    losses = [None if v is None else float(v) for v in (data.get("losses") or [])]
    n = len(times)
    warm = opts.warmup
    if n - warm < MIN_MEASURED_STEPS and n >= MIN_MEASURED_STEPS + 1:
        warm = max(1, n // 4)  # a short script: measure what there is
    rate = share = None
    measured = 0
    if n - warm >= 1 and (warm >= 1 or data.get("start")):
        t0 = times[warm - 1] if warm >= 1 else float(data["start"])
        w0 = waits[warm - 1] if warm >= 1 else 0.0
        span = times[-1] - t0
        measured = n - warm
        if span > 0:
            rate = measured / span
            share = max(0.0, min(1.0, (waits[-1] - w0) / span))
    return RunResult(
        label, repeat, status, proc.returncode if not timed_out else None, error, n, measured, warm, rate, share, wall, losses, stderr_tail
    )


# -- comparison --------------------------------------------------------------------------------
def loss_deviation(before: Sequence[Optional[float]], after: Sequence[Optional[float]]) -> Tuple[float, Optional[int], int]:
    """Largest relative deviation between two loss trajectories: (deviation, 1-based step, compared)."""
    finite = [abs(v) for v in before if v is not None and math.isfinite(v)]
    floor = max(1e-2 * (sum(finite) / len(finite)) if finite else 0.0, 1e-12)
    worst, where, compared = 0.0, None, 0
    for k, (a, b) in enumerate(zip(before, after)):
        if a is None and b is None:
            continue
        compared += 1
        if a is None or b is None:
            dev = math.inf
        elif not (math.isfinite(a) and math.isfinite(b)):
            dev = 0.0 if (math.isnan(a) and math.isnan(b)) or a == b else math.inf
        else:
            dev = abs(a - b) / max(abs(a), floor)
        if dev > worst or where is None:
            if dev > worst:
                worst, where = dev, k + 1
            elif where is None and dev == worst:
                pass
    return worst, where, compared


def _side(runs: Sequence[RunResult]) -> Optional[Side]:
    if not runs:
        return None
    rates = [r.rate for r in runs if r.rate is not None]
    shares = [r.data_wait_share for r in runs if r.data_wait_share is not None]
    return Side(
        rates=rates,
        median=statistics.median(rates) if rates else None,
        low=min(rates) if rates else None,
        high=max(rates) if rates else None,
        data_wait_share=statistics.median(shares) if shares else None,
        steps=min(r.measured_steps for r in runs),
    )


def decide(
    before: Sequence[RunResult], after: Sequence[RunResult], tolerance: float, min_speedup: float, target_steps: int
) -> Tuple[str, str, Optional[float], Tuple[float, Optional[int], int], List[str]]:
    """The verdict, its reason, the speedup, the loss deviation and notes."""
    notes: List[str] = []
    dev: Tuple[float, Optional[int], int] = (0.0, None, 0)
    failed_before = [r for r in before if r.failed]
    if failed_before:
        r = failed_before[0]
        return INCONCLUSIVE, f"the script as it is fails ({r.error or r.status}): nothing to compare with", None, dev, notes
    failed_after = [r for r in after if r.failed]
    if failed_after:
        r = failed_after[0]
        return CRASHED, f"the run after the changes fails: {r.error or r.status}", None, dev, notes
    b0, a0 = before[0], after[0]
    if not any(v is not None for v in b0.losses) and not any(v is not None for v in a0.losses):
        notes.append("no losses were recorded (no backward pass with a scalar loss): results not compared")
    else:
        if b0.steps != a0.steps:
            return DIVERGED, f"different number of optimizer steps: {b0.steps} before, {a0.steps} after", None, dev, notes
        dev = loss_deviation(b0.losses, a0.losses)
        if dev[0] > tolerance:
            return DIVERGED, f"losses differ by up to {dev[0]:.3g} (relative) at step {dev[1]}; tolerance {tolerance:g}", None, dev, notes
        if len(before) >= 2:
            self_dev = loss_deviation(b0.losses, before[1].losses)
            if before[1].steps != b0.steps or self_dev[0] > tolerance:
                return INCONCLUSIVE, f"the script's losses differ between two identical runs (up to {self_dev[0]:.3g}): its results are not reproducible under fixed seeds", None, dev, notes
    if b0.steps == 0:
        return INCONCLUSIVE, "the script made no optimizer steps: nothing to time", None, dev, notes
    too_few = [r for r in (*before, *after) if r.measured_steps < MIN_MEASURED_STEPS or r.rate is None]
    if too_few:
        r = too_few[0]
        return INCONCLUSIVE, f"too few steps to time: {r.steps} optimizer steps ({r.measured_steps} after warm-up); need {MIN_MEASURED_STEPS}", None, dev, notes
    if any(r.warmup_used != before[0].warmup_used for r in (*before, *after)):
        notes.append("warm-up shortened: the script makes fewer steps than warm-up + steps")
    sb, sa = _side(before), _side(after)
    assert sb and sa and sb.median and sa.median
    speedup = sa.median / sb.median
    # (a side with a median has a low and a high too: all three come from the same rates)
    noise = max((cast(float, s.high) - cast(float, s.low)) / cast(float, s.median) for s in (sb, sa))
    overlap = not (cast(float, sa.low) > cast(float, sb.high) or cast(float, sa.high) < cast(float, sb.low))
    within_noise = len(before) >= 2 and overlap and abs(max(speedup, 1.0 / speedup) - 1.0) <= noise
    if len(before) < 2:
        notes.append("one run each: the speedup has no spread; use --repeats 3 for a firmer number")
    if speedup >= min_speedup:
        if within_noise:
            return INCONCLUSIVE, f"too noisy: {speedup:.2f}x is within the run-to-run spread ({noise:.0%}); use more --repeats or --steps, on a quieter machine", speedup, dev, notes
        return VERIFIED_FASTER, f"{speedup:.2f}x the optimizer steps per second, same results", speedup, dev, notes
    if speedup < 1.0 / min_speedup and not within_noise:
        return EQUIVALENT_NOT_FASTER, f"same results, but slower: {speedup:.2f}x", speedup, dev, notes
    if speedup < 1.0 / min_speedup:
        notes.append(f"the runs are noisy (spread {noise:.0%}): {speedup:.2f}x is within it")
    return EQUIVALENT_NOT_FASTER, f"same results, speed unchanged ({speedup:.2f}x; needs {min_speedup:g}x to count as faster)", speedup, dev, notes


# -- the whole verification --------------------------------------------------------------------
def _common_root(script: Path, files: Sequence[Path]) -> Path:
    folders = [str(script.parent)] + [str(f.parent) for f in files]
    return Path(os.path.commonpath(folders))


def verify(opts: VerifyOptions, resolver: "Optional[SettingsResolver]" = None, progress: Optional[Progress] = None) -> VerifyResult:
    say = progress or (lambda _msg: None)
    script = opts.script.resolve()
    if not script.is_file():
        raise VerifyError(f"{opts.script}: no such file")
    from speedlint.analyzer.notebook import Notebook, NotebookError, is_notebook

    notebook = is_notebook(script)
    if notebook:  # refuse before copying anything when it cannot run as a script
        try:
            Notebook.parse(script.read_bytes()).script()
        except (NotebookError, OSError) as exc:
            raise VerifyError(f"{opts.script}: cannot run this notebook as a script: {exc}") from None
    after_file = opts.after.resolve() if opts.after is not None else None
    if after_file is not None and not after_file.is_file():
        raise VerifyError(f"{opts.after}: no such file")
    plan: "Optional[FixRun]" = None
    if after_file is None:
        plan = opts.fixes
        if plan is None:  # the fixes `speedlint fix` would write, from the same driver
            if resolver is None:
                raise VerifyError("no settings to select fixes with")
            from speedlint.analyzer.fixdriver import compute_fixes

            paths = [str(f) for f in opts.fix_files] if opts.fix_files is not None else _fix_paths(script, resolver)
            plan = compute_fixes(paths, resolver)
    files = [Path(c.path).resolve() for c in plan.files] if plan is not None else []
    root = _common_root(script, files)
    cwd = Path.cwd().resolve()
    tmp = Path(tempfile.mkdtemp(prefix="speedlint-verify-"))
    try:
        before_root, after_root = tmp / "before" / root.name, tmp / "after" / root.name
        _copy_tree(root, before_root)
        _copy_tree(root, after_root)
        rel = script.relative_to(root)
        fixes: List[AppliedFix] = []
        runs_of = {"before": before_root / rel, "after": after_root / rel}
        if notebook:
            runs_of["before"] = _exported(before_root, rel)
        if after_file is not None:
            if notebook and not is_notebook(after_file):  # a script to compare the notebook with
                runs_of["after"] = after_root / rel.with_name(f".{rel.name}.py")
                runs_of["after"].write_bytes(after_file.read_bytes())
            else:
                (after_root / rel).write_bytes(after_file.read_bytes())
            kind = "manual"
            try:
                if after_file.read_text(errors="replace").count("autocast") > script.read_text(errors="replace").count("autocast"):
                    kind = "amp"
            except OSError:
                pass
        else:
            assert plan is not None
            fixes = _apply_fixes(root, after_root, plan)
            kind = _tolerance_kind_for_fixes(fixes)
        if notebook and runs_of["after"].suffix != ".py":
            runs_of["after"] = _exported(after_root, rel)
        tolerance = opts.tolerance if opts.tolerance is not None else TOLERANCES[kind]
        if opts.tolerance is not None:
            kind = "given"
        settings = {
            "steps": opts.steps, "warmup": opts.warmup, "repeats": opts.repeats, "timeout": opts.timeout,
            "seed": opts.seed, "min_speedup": opts.min_speedup, "python": sys.executable,
        }
        base: _ResultBase = dict(
            script=str(opts.script), args=list(opts.args), mode="after" if after_file else "fixes",
            after_file=str(opts.after) if opts.after else None, fixes=fixes, tolerance=tolerance,
            tolerance_kind=kind, min_speedup=opts.min_speedup, settings=settings,
        )
        if after_file is None and not fixes:
            return VerifyResult(
                verdict=INCONCLUSIVE, reason="no fixes apply to this script with the selected rules: nothing to verify",
                speedup=None, before=None, after=None, loss_steps_compared=0, loss_max_deviation=None,
                loss_max_deviation_step=None, runs=[], **base,
            )
        try:
            inside = cwd.relative_to(root)
        except ValueError:
            inside = None
        env = dict(os.environ)
        env.setdefault("PYTHONHASHSEED", str(opts.seed))
        work = tmp / "runs"
        work.mkdir()
        before_runs: List[RunResult] = []
        after_runs: List[RunResult] = []
        for i in range(opts.repeats):
            for label, top, bucket in (("before", before_root, before_runs), ("after", after_root, after_runs)):
                say(f"run {i + 1}/{opts.repeats}: {label} ...")
                run_cwd = top / inside if inside is not None else cwd
                if notebook:
                    run_cwd = runs_of[label].parent  # a notebook runs from its folder, as in Jupyter
                r = run_once(runs_of[label], opts.args, run_cwd, env, work, label, i, opts)
                r.stderr_tail = r.stderr_tail.replace(str(top), str(root))  # show the user's paths
                if r.error:
                    r.error = r.error.replace(str(top), str(root))
                bucket.append(r)
                rate = f"{r.rate:.2f} steps/s" if r.rate is not None else "no rate"
                say(f"run {i + 1}/{opts.repeats}: {label}: {r.status}, {r.steps} steps, {rate}")
                if r.failed:
                    break
            if any(r.failed for r in before_runs + after_runs):
                break
        verdict, reason, speedup, dev, notes = decide(before_runs, after_runs, tolerance, opts.min_speedup, opts.warmup + opts.steps)
        return VerifyResult(
            verdict=verdict, reason=reason, speedup=speedup,
            before=_side([r for r in before_runs if not r.failed]), after=_side([r for r in after_runs if not r.failed]),
            loss_steps_compared=dev[2], loss_max_deviation=dev[0] if dev[2] else None, loss_max_deviation_step=dev[1],
            runs=before_runs + after_runs, notes=notes, **base,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
