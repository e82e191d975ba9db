#!/usr/bin/env python
"""speedlint at scale, against TorchFix, hotpath-ai and ruff, on the same tree in the same run.

NOT part of the test suite (speed claims never live in timed tests). Run it from the repository
root with the project's virtual environment active:

    python benchmarks/bench_scale.py                 # the default corpus, every tool
    python benchmarks/bench_scale.py --skip torchfix # TorchFix alone takes many minutes
    python benchmarks/bench_scale.py --skip torchfix-library --training-corpus DIR  # TorchFix on DIR only
    python benchmarks/bench_scale.py --packages diffusers==0.30.0 timm==1.0.9

What it does:

1. Corpus: `pip download --no-deps` of pinned wheels (real code nobody here wrote), unpacking only
   their `.py` files into `benchmarks/.corpus/tree/<name>-<version>/` (gitignored). The corpus
   root and the tree each get an empty `.git` folder so that every tool treats the tree as a
   checkout of its own (this repository's `.gitignore`, which ignores `benchmarks/.corpus/`, must
   not hide it from the linters), and speedlint's program is the tree alone: a run names the tree
   from the corpus root, and without a marker of its own the project around it would be the
   corpus root, with the training corpus's copy and the `fix --apply` scratch copy beside it.
2. Tools: TorchFix, hotpath-ai and ruff are installed into `benchmarks/.venv-bench` (a separate
   virtual environment: TorchFix pins an older LibCST). A package that cannot be installed is
   reported and its tool skipped.
3. Runs, one after the other on the same tree: `speedlint check` cold (`--no-cache`), a
   cache-filling run, `speedlint check` warm (unchanged tree; repeated, the median counts, also
   per 1,000 files), `speedlint fix` (the diff only, `--no-cache`, like the cold check) and `fix
   --apply` on a scratch copy of the tree, `torchfix --jobs N` (its default rules, all cores),
   `hotpath analyze`, `ruff check --select ALL --no-cache`; with `--training-corpus`, the same
   cold/warm/fix runs, hotpath-ai and TorchFix on that tree too. Each run's output goes to /dev/null;
   the script measures wall seconds, CPU seconds and the peak memory of the whole process tree
   (the sum of RSS over the process and all its descendants, sampled from /proc every 50 ms).
   speedlint runs with bytecode written, as an installed package has it.
4. Prints a table with files/s and the ratios against each tool, then speedlint's per-phase
   profile (`--profile-rules`, a separate cold run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
CORPUS = HERE / ".corpus"
WHEELS = CORPUS / "_wheels"
BENCH_VENV = HERE / ".venv-bench"

DEFAULT_PACKAGES = (
    "transformers==4.44.2",
    "diffusers==0.30.0",
    "timm==1.0.9",
    "pytorch-lightning==2.4.0",
)
TOOLS = {  # package to install -> the command it provides
    "torchfix==0.7.0": "torchfix",
    "hotpath-ai==0.1.0": "hotpath",
    "ruff": "ruff",
}
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- corpus ----------------------------------------------------------------------------------------
def _dist_name(spec: str) -> Tuple[str, str]:
    name, _, version = spec.partition("==")
    return name.strip(), version.strip()


def build_corpus(packages: Sequence[str]) -> Path:
    """Unpack the `.py` files of each pinned wheel; returns the corpus root (reused when present)."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    (CORPUS / ".git").mkdir(exist_ok=True)  # a checkout of its own (see the module docstring)
    tree = CORPUS / "tree"
    (tree / ".git").mkdir(parents=True, exist_ok=True)  # a project of its own (see the module docstring)
    wanted = [tree / ".git"]
    for spec in packages:
        name, version = _dist_name(spec)
        target = tree / f"{name}-{version or 'latest'}"
        wanted.append(target)
        if target.is_dir() and any(target.rglob("*.py")):
            continue
        WHEELS.mkdir(parents=True, exist_ok=True)
        log(f"downloading {spec} ...")
        before = set(WHEELS.iterdir())
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(WHEELS), spec],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            log(f"  cannot download {spec}: {proc.stderr.strip().splitlines()[-1:]}; skipped")
            continue
        norm = name.lower().replace("-", "_")
        wheels = [w for w in WHEELS.glob("*.whl") if w.name.lower().startswith(norm + "-") and (not version or f"-{version}-" in w.name)]
        wheels = wheels or sorted(set(WHEELS.iterdir()) - before)
        if not wheels:
            log(f"  no wheel found for {spec}; skipped")
            continue
        with zipfile.ZipFile(wheels[0]) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".py") and ".dist-info/" not in info.filename:
                    zf.extract(info, target)
    # only the pinned packages count: remove trees of packages no longer asked for
    for old in tree.iterdir() if tree.is_dir() else []:
        if old not in wanted:
            shutil.rmtree(old)
    return tree


def corpus_stats(tree: Path) -> Tuple[int, int]:
    files = list(tree.rglob("*.py"))
    return len(files), sum(f.stat().st_size for f in files)


# -- tools -----------------------------------------------------------------------------------------
def bench_bin(name: str) -> Path:
    return BENCH_VENV / ("Scripts" if os.name == "nt" else "bin") / name


def install_tools(skip: Sequence[str]) -> Dict[str, Optional[Path]]:
    """Install each competitor into the benchmark venv; None for a tool that is not available."""
    found: Dict[str, Optional[Path]] = {}
    wanted = {spec: cmd for spec, cmd in TOOLS.items() if cmd not in skip}
    if not wanted:
        return found
    if not bench_bin("python").exists():
        log(f"creating {BENCH_VENV} ...")
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    for spec, cmd in wanted.items():
        exe = bench_bin(cmd)
        if not exe.exists():
            log(f"installing {spec} into {BENCH_VENV.name} ...")
            proc = subprocess.run([str(bench_bin("python")), "-m", "pip", "install", "-q", spec], capture_output=True, text=True)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                log(f"  {spec} is not available ({last}); its run is skipped")
        found[cmd] = exe if exe.exists() else None
    return found


# -- measuring -------------------------------------------------------------------------------------
def _children_map() -> Dict[int, List[int]]:
    kids: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree_rss(root: int) -> int:
    """The RSS of `root` and all its descendants, in bytes."""
    kids = _children_map()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
        todo.extend(kids.get(pid, ()))
    return total


class Result:
    def __init__(self, name: str, wall: Optional[float], peak: int, rc: Optional[int], note: str = "", stderr: str = "", cpu: Optional[float] = None) -> None:
        self.name, self.wall, self.peak, self.rc, self.note, self.stderr = name, wall, peak, rc, note, stderr
        self.cpu = cpu  # user + system seconds of the process and its (waited-for) descendants


def measure(name: str, cmd: List[str], cwd: Path, timeout: float, env: Optional[Dict[str, str]] = None) -> Result:
    log(f"running {name}: {' '.join(cmd)}")
    peak = 0
    stop = threading.Event()
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=str(cwd), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    have_proc = os.path.isdir("/proc")

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            if have_proc:
                peak = max(peak, tree_rss(proc.pid))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    note = ""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        note = f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stop.set()
    sampler.join()
    text = err.decode("utf-8", "replace") if err else ""
    if not note and proc.returncode not in (0, 1):
        note = f"exit code {proc.returncode}: {(text.strip().splitlines() or [''])[-1][:120]}"
    log(f"  {wall:.2f} s wall, {cpu:.2f} s CPU, peak {peak / 2**20:.0f} MiB {note}")
    return Result(name, None if note.startswith("timed out") else wall, peak, proc.returncode, note, text, cpu)


def measure_median(name: str, cmd: List[str], cwd: Path, timeout: float, env: Optional[Dict[str, str]] = None, repeats: int = 5) -> Result:
    """`measure` `repeats` times (a warm run is short: one sample is mostly noise on a shared
    machine); the median wall and CPU seconds, the largest peak."""
    runs = [measure(f"{name} ({i + 1}/{repeats})", cmd, cwd, timeout, env) for i in range(repeats)]
    walls = sorted(r.wall for r in runs if r.wall is not None)
    cpus = sorted(r.cpu for r in runs if r.cpu is not None)
    last = runs[-1]
    wall = walls[len(walls) // 2] if walls else None
    cpu = cpus[len(cpus) // 2] if cpus else None
    note = f"median of {len(walls)}" + (f"; {last.note}" if last.note else "")
    return Result(name, wall, max(r.peak for r in runs), last.rc, note, last.stderr, cpu)


def bench_fix(target: Path, cwd: Path, speedlint: List[str], env, args, label: str = "") -> Dict[str, Result]:  # type: ignore[no-untyped-def]
    """`speedlint fix` on `target` (checked from `cwd` before, so `check`'s cache is there): the
    diff only (writes nothing), without the cache like the cold check, then with `check`'s cache
    (files it answers with nothing to fix are not analysed again), then `--apply` on a scratch
    copy (the tree itself is never modified), without the cache."""
    jobs = ["--jobs", str(args.jobs)]
    out: Dict[str, Result] = {}
    out[f"{label}speedlint fix (diff)"] = measure(f"{label}speedlint fix (diff)", [*speedlint, "fix", str(target), "--no-cache", *jobs], cwd, args.timeout, env)
    out[f"{label}fix (diff), check's cache"] = measure(f"{label}fix (diff), check's cache", [*speedlint, "fix", str(target), *jobs], cwd, args.timeout, env)
    scratch = CORPUS / "_fix_scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(cwd / target, scratch, ignore=shutil.ignore_patterns(".speedlint_cache"))
    out[f"{label}speedlint fix --apply"] = measure(f"{label}speedlint fix --apply", [*speedlint, "fix", str(scratch), "--apply", "--no-cache", *jobs], CORPUS, args.timeout, env)
    shutil.rmtree(scratch, ignore_errors=True)
    return out


def _load() -> str:
    """The 1-minute load average (other jobs on the machine inflate wall times)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (OSError, AttributeError):
        return "?"


def bench_training_corpus(root: Path, tools, speedlint: List[str], env, args) -> str:  # type: ignore[no-untyped-def]
    """speedlint on training projects (the whole-program analysis at work), against hotpath-ai;
    then one module edited in a copy: how many files the warm re-check analyses again."""
    work = CORPUS / "_training"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(root, work)
    (work / ".git").mkdir(exist_ok=True)
    n_files, n_bytes = corpus_stats(work)
    jobs = ["--jobs", str(args.jobs)]
    cold = measure("training: speedlint cold", [*speedlint, "check", ".", "--no-cache", "--exit-zero", "--output-format", "concise", *jobs], work, args.timeout, env)
    measure("training: filling the cache", [*speedlint, "check", ".", "--exit-zero", "--output-format", "concise", *jobs], work, args.timeout, env)
    warm = measure_median("training: speedlint warm", [*speedlint, "check", ".", "--exit-zero", "--output-format", "concise", *jobs], work, args.timeout, env, args.repeats)
    warm_full = measure_median("training: warm, full report", [*speedlint, "check", ".", "--exit-zero", *jobs], work, args.timeout, env, args.repeats)
    fixes = bench_fix(Path("."), work, speedlint, env, args, "training: ") if "fix" not in args.skip else {}
    hp = measure("training: hotpath-ai", [str(tools["hotpath"]), "analyze", "."], work, args.timeout) if tools.get("hotpath") else None
    tf = measure("training: torchfix 0.7.0", [str(tools["torchfix"]), *jobs, "."], work, args.timeout) if tools.get("torchfix") else None
    lines = [f"\nTraining corpus: {n_files} files, {n_bytes / 1e6:.1f} MB ({root})"]
    for r in (cold, warm, warm_full, *fixes.values(), hp, tf):
        if r is not None and r.wall:
            lines.append(f"  {r.name:<36} {r.wall:7.2f} s wall  {r.cpu or 0:7.2f} s CPU  peak {r.peak / 2**20:4.0f} MiB  {r.note}")
    if hp is not None and hp.wall and cold.wall:
        lines.append(f"  speedlint cold takes {cold.wall / hp.wall:.2f}x the time of hotpath-ai on training code (goal <= 2x, moonshot 1x)")
    if tf is not None and tf.wall and cold.wall:
        lines.append(f"  speedlint cold is {tf.wall / cold.wall:.1f}x faster than TorchFix on training code (goal >= 25x)")
    for r in (warm, warm_full):
        if r.wall:
            lines.append(f"  {r.name}: {1000 * r.wall / n_files:.3f} s wall, {1000 * (r.cpu or 0) / n_files:.3f} s CPU per 1,000 files (goal <= 0.3 s)")
    for r in fixes.values():
        if r.wall and cold.wall:
            lines.append(f"  {r.name} takes {r.wall / cold.wall:.2f}x the wall time of the cold check (CPU {(r.cpu or 0) / (cold.cpu or 1):.2f}x)")
    edit = next((p for p in sorted(work.rglob("*.py")) if args.edit and p.relative_to(work).as_posix().endswith(args.edit)), None)
    if edit is not None:
        with open(edit, "a", encoding="utf-8") as fh:
            fh.write("\n# edited by bench_scale.py\n")
        r = subprocess.run([*speedlint, "check", ".", "--exit-zero", "--output-format", "concise", "--profile-rules", *jobs], cwd=str(work), capture_output=True, text=True, env=env)
        head = next((line for line in r.stderr.splitlines() if line.startswith("Profile:")), "(no profile)")
        lines.append(f"  after editing {edit.relative_to(work)}: {head}")
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------------
def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", nargs="+", default=list(DEFAULT_PACKAGES), help="pinned wheels for the corpus")
    ap.add_argument("--skip", nargs="*", default=[], choices=["torchfix", "torchfix-library", "hotpath", "ruff", "profile", "fix"],
                    help="runs to leave out (torchfix-library: TorchFix on the library corpus only, which takes many minutes; it still runs on --training-corpus)")
    ap.add_argument("--repeats", type=int, default=5, help="warm runs (the median counts)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes for speedlint and TorchFix")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run before it is stopped")
    ap.add_argument("--prepare-only", action="store_true", help="build the corpus and install the tools, run nothing")
    ap.add_argument("--json", type=Path, default=CORPUS / "results.json", help="also write the figures here")
    ap.add_argument(
        "--training-corpus", type=Path, default=None,
        help="also measure a tree of training projects (e.g. the development corpus written by "
        "../shared/accuracy/materialize.sh): cold, warm, hotpath-ai, and the re-check after editing one module",
    )
    ap.add_argument("--edit", default=None, help="with --training-corpus: the file (relative to it) to edit for the re-check")
    args = ap.parse_args(argv)

    tree = build_corpus(args.packages)
    n_files, n_bytes = corpus_stats(tree)
    log(f"corpus: {n_files} files, {n_bytes / 1e6:.1f} MB in {tree}")
    tools = install_tools(args.skip)
    if args.prepare_only:
        log(f"tools: {tools}")
        return 0
    load_before = _load()
    speedlint = [sys.executable, "-m", "speedlint"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # any value, even "0", disables bytecode
    target = str(tree)
    results: Dict[str, Result] = {}

    subprocess.run([*speedlint, "clean"], cwd=str(CORPUS), capture_output=True)
    results["speedlint cold"] = measure(
        "speedlint cold", [*speedlint, "check", target, "--no-cache", "--exit-zero", "--output-format", "concise", "--jobs", str(args.jobs)], CORPUS, args.timeout, env
    )
    measure("speedlint (filling the cache)", [*speedlint, "check", target, "--exit-zero", "--output-format", "concise", "--jobs", str(args.jobs)], CORPUS, args.timeout, env)
    results["speedlint warm"] = measure_median(
        "speedlint warm", [*speedlint, "check", target, "--exit-zero", "--output-format", "concise", "--jobs", str(args.jobs)], CORPUS, args.timeout, env, args.repeats
    )
    if "fix" not in args.skip:
        results.update(bench_fix(Path(target), CORPUS, speedlint, env, args))
    if tools.get("torchfix") and "torchfix-library" not in args.skip:
        results["torchfix 0.7.0"] = measure("torchfix 0.7.0", [str(tools["torchfix"]), "--jobs", str(args.jobs), target], CORPUS, args.timeout)
    elif "torchfix" not in args.skip and "torchfix-library" not in args.skip:
        results["torchfix 0.7.0"] = Result("torchfix 0.7.0", None, 0, None, "not available")
    if tools.get("hotpath"):
        results["hotpath-ai 0.1.0"] = measure("hotpath-ai 0.1.0", [str(tools["hotpath"]), "analyze", target], CORPUS, args.timeout)
    elif "hotpath" not in args.skip:
        results["hotpath-ai 0.1.0"] = Result("hotpath-ai 0.1.0", None, 0, None, "not available")
    if tools.get("ruff"):
        results["ruff --select ALL"] = measure(
            "ruff", [str(tools["ruff"]), "check", "--select", "ALL", "--no-cache", "--exit-zero", "--output-format", "concise", "--isolated", target], CORPUS, args.timeout
        )
    elif "ruff" not in args.skip:
        results["ruff --select ALL"] = Result("ruff --select ALL", None, 0, None, "not available")
    profile = None
    if "profile" not in args.skip:
        profile = measure(
            "speedlint --profile-rules", [*speedlint, "check", target, "--no-cache", "--exit-zero", "--output-format", "concise", "--profile-rules", "--jobs", str(args.jobs)], CORPUS, args.timeout, env
        )

    training = bench_training_corpus(args.training_corpus, tools, speedlint, env, args) if args.training_corpus else None

    # -- report
    cold = results["speedlint cold"].wall
    cold_cpu = results["speedlint cold"].cpu
    load_after = _load()
    print(f"\nCorpus: {n_files} files, {n_bytes / 1e6:.1f} MB ({', '.join(args.packages)}); {os.cpu_count()} cores, --jobs {args.jobs}")
    print(f"Load average (1 min) before the runs: {load_before}, after: {load_after} (other jobs inflate wall times; CPU seconds are steadier)\n")
    print(f"{'run':<22}{'wall s':>10}{'CPU s':>10}{'files/s':>10}{'peak MiB':>10}{'vs speedlint cold':>20}  note")
    for name, r in results.items():
        wall = f"{r.wall:.2f}" if r.wall is not None else "-"
        fps = f"{n_files / r.wall:.0f}" if r.wall else "-"
        peak = f"{r.peak / 2**20:.0f}" if r.peak else "-"
        ratio = ""
        if r.wall and cold and name != "speedlint cold":
            ratio = f"{r.wall / cold:.2f}x"
        cpu = f"{r.cpu:.2f}" if r.cpu is not None else "-"
        print(f"{name:<22}{wall:>10}{cpu:>10}{fps:>10}{peak:>10}{ratio:>20}  {r.note}")
    print()
    if cold:
        def cpu_ratio(other: Optional[Result], inverse: bool = False) -> str:
            if other is None or not other.cpu or not cold_cpu:
                return ""
            value = cold_cpu / other.cpu if inverse else other.cpu / cold_cpu
            return f"; in CPU seconds {value:.2f}x"

        tf = results.get("torchfix 0.7.0")
        if tf is not None and tf.wall:
            print(f"speedlint cold is {tf.wall / cold:.1f}x faster than TorchFix (goal >= 25x){cpu_ratio(tf)}")
        elif tf is not None and tf.note.startswith("timed out"):
            print(f"speedlint cold is more than {args.timeout / cold:.1f}x faster than TorchFix (it timed out; goal >= 25x)")
        hp = results.get("hotpath-ai 0.1.0")
        if hp is not None and hp.wall:
            print(f"speedlint cold takes {cold / hp.wall:.2f}x the time of hotpath-ai (goal <= 2x){cpu_ratio(hp, inverse=True)}")
        rf = results.get("ruff --select ALL")
        if rf is not None and rf.wall:
            print(f"speedlint cold takes {cold / rf.wall:.2f}x the time of ruff (stretch goal <= 3x){cpu_ratio(rf, inverse=True)}")
        warm = results["speedlint warm"]
        if warm.wall:
            print(f"speedlint warm re-run: {warm.wall:.2f} s (goal < 1 s for ~2,000 files); {1000 * warm.wall / n_files:.3f} s wall, "
                  f"{1000 * (warm.cpu or 0) / n_files:.3f} s CPU per 1,000 files (goal <= 0.3 s)")
        for name in ("speedlint fix (diff)", "fix (diff), check's cache", "speedlint fix --apply"):
            r = results.get(name)
            if r is not None and r.wall:
                print(f"{name} takes {r.wall / cold:.2f}x the wall time of the cold check (goal <= 1.3x); in CPU seconds {(r.cpu or 0) / (cold_cpu or 1):.2f}x")
        peak = max(results["speedlint cold"].peak, warm.peak)
        print(f"speedlint peak memory of the process tree: {peak / 2**20:.0f} MiB (goal < 400 MiB)")
    if training is not None:
        print(training)
    if profile is not None:
        print("\nspeedlint per-phase profile (a separate cold run, --profile-rules):")
        lines = profile.stderr.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("Profile:")), None)
        print("\n".join(lines[start:]) if start is not None else "(no profile printed)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "files": n_files, "bytes": n_bytes, "packages": args.packages, "jobs": args.jobs,
            "load_before": load_before, "load_after": load_after,
            "runs": {k: {"wall": r.wall, "cpu": r.cpu, "peak_bytes": r.peak, "rc": r.rc, "note": r.note} for k, r in results.items()},
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
