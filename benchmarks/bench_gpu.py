r"""The GPU check: how much faster do speedlint's automatic fixes make CUDA training scripts?

For every scenario folder under benchmarks/gpu/ (a `train.py` and a `scenario.json`, as in
fixtures/harness/) this runs `speedlint verify` with the scenario's selection flags, through the
same Python API as benchmarks/harness_scenarios.py (whose `resolver_for` it reuses), and records
the verdict, the speedup, steps/s before and after, the data-wait share, the largest loss
deviation and the fixes applied, with the GPU's name and the torch version. Results are written
after every scenario, so a run cut short still leaves them:

    OUT/gpu_verify.json   everything, including each scenario's full `verify --json` result
    OUT/gpu_verify.md     a table to paste into an issue or docs/

    python3 benchmarks/bench_gpu.py --out DIR [--only NAME ...] [--repeats 3] [--steps N]
                                    [--warmup N] [--timeout S] [--budget S] [--scenarios DIR]

A scenario that fails (an exception, a crash, a timeout) is recorded and the next one runs.
`--budget` bounds the whole run: a scenario that no longer fits is skipped (recorded as such),
and the per-run timeout shrinks to what is left. `--fixes-only` runs nothing: it lists the
fixes each scenario gets (a quick check that needs no GPU).

On a GPU machine without libcst or network: carry the wheels folder `.whl/` (libcst for
CPython 3.12 manylinux x86_64, typer 0.28 and their pure-Python dependencies; ignored through
.git/info/exclude) and run from the repository's root:

    test -d .whl || echo 'MISSING .whl/ (carry it)'; python3 -m pip install -q --no-index --no-deps \
      --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD \
      && ... PYTHONUNBUFFERED=1 timeout -s TERM -k 20 390 python3 benchmarks/bench_gpu.py --out $OUT --budget 320

The scripts call `.item()` every step (as most training scripts do, SPD201 advice only): that
sync keeps the shim's host-side step timestamps honest on an asynchronous GPU.

scenario.json keys: script, args, unsafe_fixes, preview, select, accumulation_steps (the flags,
as in fixtures/harness/), rules (the fix codes expected), expect (`faster`: verified-faster),
order (run order, lowest first), steps/warmup (defaults for this scenario; --steps/--warmup win).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import speedlint  # noqa: E402
from harness_scenarios import fmt, resolver_for  # noqa: E402  (the selection flags, as there)
from speedlint.harness.verify import VERIFIED_FASTER, VerifyOptions, verify  # noqa: E402

SCENARIOS = HERE / "gpu"
EXPECT = {"faster": VERIFIED_FASTER}  # scenario.json's `expect` -> the verdict it means
ENV_PROBE = r"""
import json, sys
out = {"python": sys.version.split()[0]}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda_runtime"] = torch.version.cuda
    out["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        out["gpu_count"] = torch.cuda.device_count()
        out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        out["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        out["cudnn"] = torch.backends.cudnn.version()
except Exception as exc:
    out["torch_error"] = repr(exc)
try:
    import numpy
    out["numpy"] = numpy.__version__
except Exception:
    pass
print(json.dumps(out))
"""


def say(msg: str) -> None:
    print(msg, flush=True)


def environment() -> Dict[str, Any]:
    """The machine: GPU, torch, CUDA (probed in a child process, so this one never holds a
    CUDA context while the scenarios run), the driver (nvidia-smi) and the tools' versions."""
    env: Dict[str, Any] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python_executable": sys.executable,
        "speedlint": getattr(speedlint, "__version__", None),
    }
    try:
        from importlib.metadata import version

        env["libcst"] = version("libcst")
        env["typer"] = version("typer")
    except Exception:
        pass
    try:
        probe = subprocess.run([sys.executable, "-c", ENV_PROBE], capture_output=True, text=True, timeout=120)
        env.update(json.loads(probe.stdout.strip().splitlines()[-1]))
    except Exception as exc:
        env["probe_error"] = repr(exc)
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )
        if smi.returncode == 0:
            env["nvidia_smi"] = smi.stdout.strip()
    except Exception:
        pass
    return env


def load_scenarios(folder: Path, only: Optional[List[str]]) -> List[Dict[str, Any]]:
    found = []
    for cfg_path in sorted(folder.glob("*/scenario.json")):
        name = cfg_path.parent.name
        if only and name not in only:
            continue
        cfg = json.loads(cfg_path.read_text())
        found.append({"name": name, "folder": cfg_path.parent, "cfg": cfg})
    missing = sorted(set(only or ()) - {s["name"] for s in found})
    if missing:
        say(f"warning: no such scenario: {', '.join(missing)}")
    return sorted(found, key=lambda s: (s["cfg"].get("order", 100), s["name"]))


def cli_line(cfg: Dict[str, Any], steps: int, warmup: int, repeats: int, timeout: float) -> str:
    """The equivalent command, run from the scenario's folder."""
    parts = ["python3 -m speedlint verify", cfg["script"], "--isolated", "--json"]
    if cfg.get("unsafe_fixes"):
        parts.append("--unsafe-fixes")
    if cfg.get("preview"):
        parts.append("--preview")
    if cfg.get("select"):
        parts.append("--select " + ",".join(cfg["select"]))
    if cfg.get("accumulation_steps"):
        parts.append(f"--accumulation-steps {cfg['accumulation_steps']}")
    parts.append(f"--steps {steps} --warmup {warmup} --repeats {repeats} --timeout {timeout:g}")
    if cfg.get("args"):
        parts.append("-- " + " ".join(cfg["args"]))
    return " ".join(parts)


def summary(name: str, cfg: Dict[str, Any], result: Any) -> Dict[str, Any]:
    data = result.to_dict()
    fixes = sorted({f.code for f in result.fixes})
    expected = sorted(cfg.get("rules", []))
    b, a = result.before, result.after
    failed = [r for r in result.runs if r.failed]
    return {
        "verdict": result.verdict,
        "expected_verdict": EXPECT.get(cfg.get("expect", ""), cfg.get("expect")),
        "as_expected": result.verdict == EXPECT.get(cfg.get("expect", ""), cfg.get("expect")),
        "reason": result.reason,
        "speedup": result.speedup,
        "steps_per_s_before": b.median if b else None,
        "steps_per_s_before_range": [b.low, b.high] if b else None,
        "steps_per_s_after": a.median if a else None,
        "steps_per_s_after_range": [a.low, a.high] if a else None,
        "data_wait_before": b.data_wait_share if b else None,
        "data_wait_after": a.data_wait_share if a else None,
        "loss_max_deviation": result.loss_max_deviation,
        "loss_max_deviation_step": result.loss_max_deviation_step,
        "loss_steps_compared": result.loss_steps_compared,
        "tolerance": result.tolerance,
        "tolerance_kind": result.tolerance_kind,
        "fixes": fixes,
        "fixes_detail": [{"code": f.code, "line": f.line, "applicability": f.applicability, "title": f.title} for f in result.fixes],
        "expected_rules": expected,
        "missing_rules": sorted(set(expected) - set(fixes)),
        "unexpected_rules": sorted(set(fixes) - set(expected)),
        "runs": [
            {"label": r.label, "repeat": r.repeat, "status": r.status, "rate": r.rate, "steps": r.steps,
             "measured_steps": r.measured_steps, "data_wait_share": r.data_wait_share, "wall_s": round(r.wall_s, 2),
             "error": r.error}
            for r in result.runs
        ],
        "failed_runs": [{"label": r.label, "repeat": r.repeat, "status": r.status, "error": r.error, "stderr_tail": r.stderr_tail} for r in failed],
        "notes": result.notes,
        "verify": data,
    }


def fixes_only(scen: Dict[str, Any]) -> Dict[str, Any]:
    from speedlint.analyzer.fixdriver import compute_fixes

    cfg, folder = scen["cfg"], scen["folder"]
    cwd = os.getcwd()
    os.chdir(folder)  # the project of the script is its folder (as harness_scenarios does)
    try:
        plan = compute_fixes([str(folder / cfg["script"])], resolver_for(cfg))
    finally:
        os.chdir(cwd)
    codes = sorted({f.code for change in plan.changes for f in change.outcome.applied})
    expected = sorted(cfg.get("rules", []))
    return {"fixes": codes, "expected_rules": expected, "as_expected": codes == expected}


def run_scenario(scen: Dict[str, Any], ns: argparse.Namespace, timeout: float) -> Dict[str, Any]:
    name, cfg, folder = scen["name"], scen["cfg"], scen["folder"]
    steps = ns.steps if ns.steps is not None else int(cfg.get("steps", 30))
    warmup = ns.warmup if ns.warmup is not None else int(cfg.get("warmup", 5))
    row: Dict[str, Any] = {
        "scenario": name,
        "description": _description(folder / cfg["script"]),
        "flags": {k: cfg[k] for k in ("unsafe_fixes", "preview", "select", "accumulation_steps", "args") if cfg.get(k)},
        "settings": {"steps": steps, "warmup": warmup, "repeats": ns.repeats, "timeout": timeout},
        "cli": f"cd {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder} && " + cli_line(cfg, steps, warmup, ns.repeats, timeout),
    }
    script = folder / cfg["script"]
    opts = VerifyOptions(
        script=script, args=tuple(cfg.get("args", ())), steps=steps, warmup=warmup, repeats=ns.repeats,
        timeout=timeout, fix_files=[script],
    )
    started = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(folder)  # as harness_scenarios: the scenario's folder bounds its project
    try:
        result = verify(opts, resolver_for(cfg), progress=lambda m: say(f"  [{name}] {m}"))
        row.update(summary(name, cfg, result))
    except KeyboardInterrupt:  # the runs' process groups are already killed by verify
        row.update({"verdict": "interrupted", "error": "interrupted (time limit or Ctrl-C)", "interrupted": True})
    except BaseException as exc:  # never stop the whole check for one scenario
        row.update({"verdict": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
    finally:
        os.chdir(cwd)
        row["wall_s"] = round(time.perf_counter() - started, 1)
    return row


def _description(script: Path) -> str:
    try:
        import ast

        doc = ast.get_docstring(ast.parse(script.read_text())) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""
    except Exception:
        return ""


def pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def rate(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(env: Dict[str, Any], rows: List[Dict[str, Any]], settings: Dict[str, Any], total: float, finished: bool) -> str:
    gpu = env.get("gpu") or "no CUDA device"
    lines = [
        "# speedlint verify on a GPU",
        "",
        f"{gpu}; torch {env.get('torch', '?')} (CUDA {env.get('cuda_runtime', '?')}), Python {env.get('python', '?')}, "
        f"speedlint {env.get('speedlint', '?')}, libcst {env.get('libcst', '?')}; {env.get('date', '')}.",
        f"Settings: {settings['repeats']} alternating runs per version, warm-up and timed optimizer steps per "
        f"scenario as listed in gpu_verify.json; total wall time {total:.0f} s" + ("" if finished else " (cut short)") + ".",
    ]
    if env.get("nvidia_smi"):
        lines.append(f"nvidia-smi: {env['nvidia_smi']}")
    lines += [
        "",
        "| scenario | fixes applied | verdict | speedup | steps/s before -> after | data wait before -> after | max loss deviation (tolerance) | wall |",
        "|---|---|---|---:|---|---|---|---:|",
    ]
    for r in rows:
        verdict = r.get("verdict", "?")
        if r.get("expected_verdict") and not r.get("as_expected"):
            verdict += f" (expected {r['expected_verdict']})"
        dev = r.get("loss_max_deviation")
        tol = r.get("tolerance")
        dev_s = "-" if dev is None else f"{dev:.2g}" + (f" ({tol:g})" if tol is not None else "")
        fixes = ", ".join(r.get("fixes") or []) or "-"
        if r.get("missing_rules"):
            fixes += f" (missing {', '.join(r['missing_rules'])})"
        lines.append(
            f"| {r['scenario']} | {fixes} | {verdict} | {fmt(r.get('speedup'))} | "
            f"{rate(r.get('steps_per_s_before'))} -> {rate(r.get('steps_per_s_after'))} | "
            f"{pct(r.get('data_wait_before'))} -> {pct(r.get('data_wait_after'))} | {dev_s} | {r.get('wall_s', 0):.0f} s |"
        )
    notes = []
    for r in rows:
        if r.get("verdict") != VERIFIED_FASTER:
            notes.append(f"- **{r['scenario']}**: {r.get('reason') or r.get('error') or r.get('verdict')}")
            for f in r.get("failed_runs", [])[:1]:
                tail = (f.get("stderr_tail") or "").strip().splitlines()[-3:]
                if tail:
                    notes.append("  ```\n  " + "\n  ".join(tail) + "\n  ```")
    if notes:
        lines += ["", "Not verified faster:", "", *notes]
    lines += ["", "Scenarios:", ""]
    for r in rows:
        lines.append(f"- `{r['scenario']}`: {r.get('description', '')} Reproduce: `{r.get('cli', '')}`")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("gpu-results"), help="Folder for gpu_verify.json and gpu_verify.md.")
    parser.add_argument("--only", nargs="*", default=None, help="Scenario names to run (default: all).")
    parser.add_argument("--repeats", type=int, default=3, help="Alternating runs per version.")
    parser.add_argument("--steps", type=int, default=None, help="Timed optimizer steps per run (default: the scenario's, else 30).")
    parser.add_argument("--warmup", type=int, default=None, help="Warm-up optimizer steps per run (default: the scenario's, else 5).")
    parser.add_argument("--timeout", type=float, default=90.0, help="Seconds per run (its process group is killed past it).")
    parser.add_argument("--budget", type=float, default=None, help="Seconds for the whole check: scenarios that no longer fit are skipped.")
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS, help="Folder of scenario folders (default: benchmarks/gpu).")
    parser.add_argument("--fixes-only", action="store_true", help="Run nothing: list the fixes each scenario gets.")
    ns = parser.parse_args()
    start = time.perf_counter()
    scenarios = load_scenarios(ns.scenarios.resolve(), ns.only)
    if ns.fixes_only:
        bad = 0
        for scen in scenarios:
            try:
                got = fixes_only(scen)
            except Exception as exc:
                got = {"error": f"{type(exc).__name__}: {exc}", "as_expected": False}
            bad += not got.get("as_expected")
            say(f"{scen['name']}: {json.dumps(got)}")
        return 1 if bad else 0

    def stop(signum, frame):  # type: ignore[no-untyped-def]  # `timeout` sends SIGTERM: end like Ctrl-C (the runs' process groups are killed)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    ns.out.mkdir(parents=True, exist_ok=True)
    say(f"speedlint GPU check: {len(scenarios)} scenarios ({', '.join(s['name'] for s in scenarios)}), results in {ns.out}")
    env = environment()
    say("environment: " + json.dumps(env))
    if not env.get("cuda_available"):
        say("WARNING: torch sees no CUDA device: every scenario will fail (`device = \"cuda\"`).")
    settings = {"repeats": ns.repeats, "steps": ns.steps, "warmup": ns.warmup, "timeout": ns.timeout, "budget": ns.budget}
    rows: List[Dict[str, Any]] = []
    finished = False
    per_scenario: List[float] = []

    def write() -> None:
        total = time.perf_counter() - start
        doc = {"environment": env, "settings": settings, "total_wall_s": round(total, 1), "finished": finished, "scenarios": rows}
        (ns.out / "gpu_verify.json").write_text(json.dumps(doc, indent=2, default=str))
        (ns.out / "gpu_verify.md").write_text(markdown(env, rows, settings, total, finished))

    try:
        for i, scen in enumerate(scenarios):
            name = scen["name"]
            timeout = ns.timeout
            if ns.budget is not None:
                left = ns.budget - (time.perf_counter() - start)
                guess = max(per_scenario) if per_scenario else 20.0
                if left < min(guess, 60.0):
                    say(f"[{i + 1}/{len(scenarios)}] {name}: skipped, {left:.0f} s left of the {ns.budget:g} s budget")
                    rows.append({"scenario": name, "verdict": "skipped", "reason": f"time budget ({ns.budget:g} s) spent"})
                    write()
                    continue
                timeout = min(ns.timeout, max(15.0, left / (2 * ns.repeats)))
            say(f"[{i + 1}/{len(scenarios)}] {name}: expect {scen['cfg'].get('expect', '?')} with {', '.join(scen['cfg'].get('rules', [])) or '-'} "
                f"(t={time.perf_counter() - start:.0f} s)")
            row = run_scenario(scen, ns, timeout)
            rows.append(row)
            if row.get("interrupted"):
                raise KeyboardInterrupt
            per_scenario.append(row.get("wall_s", 0.0))
            extra = ""
            if row.get("missing_rules") or row.get("unexpected_rules"):
                extra = f"; fixes {row.get('fixes')} vs expected {row.get('expected_rules')}"
            say(
                f"[{i + 1}/{len(scenarios)}] {name}: {row.get('verdict')} {fmt(row.get('speedup'))} "
                f"({rate(row.get('steps_per_s_before'))} -> {rate(row.get('steps_per_s_after'))} steps/s, "
                f"data wait {pct(row.get('data_wait_before'))} -> {pct(row.get('data_wait_after'))}, "
                f"loss dev {row.get('loss_max_deviation')}, tol {row.get('tolerance')}) in {row.get('wall_s')} s{extra}"
            )
            if row.get("verdict") != VERIFIED_FASTER:
                say(f"  reason: {row.get('reason') or row.get('error')}")
                for f in row.get("failed_runs", [])[:1]:
                    say("  stderr tail:\n    " + "\n    ".join((f.get("stderr_tail") or "").splitlines()[-8:]))
            write()
        finished = True
    except KeyboardInterrupt:
        say("interrupted: writing what was measured so far")
    write()
    total = time.perf_counter() - start
    say("")
    say((ns.out / "gpu_verify.md").read_text())
    say(f"total wall time: {total:.1f} s")
    return 0 if finished and all(r.get("verdict") not in ("error",) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
