#!/usr/bin/env python
"""`speedlint server`: latency of diagnostics for a changed file, and memory over many edits.

NOT part of the test suite (speed claims never live in timed tests). Run it from the repository
root with the project's virtual environment active (and the `server` extra installed):

    python benchmarks/bench_server.py                  # 500 files, 1,000 edits
    python benchmarks/bench_server.py --files 200 --edits 300

What it does:

1. Generates a project of `--files` Python files in a temporary folder (with a `.git` folder:
   its root): `--files / 10` packages of ten modules each (a model, a loss, data helpers, metrics,
   a training step and utilities that import each other), and a `train.py` whose training loop
   calls a loss and a step of every package, so the whole program is linked across all files.
2. Starts `python -m speedlint server --no-cache` (the cache would answer the unchanged files;
   without it every summary is computed once, at the first open), with `debounceMs` 0: the
   latency measured is the server's work, not the wait it is told to add (default 200 ms).
3. Opens `train.py` and the changed module (`pkg0/losses.py`, whose `.item()` is hot only
   through `train.py`), waits for their diagnostics (the warm-up: every file summarised and
   linked once), then edits the changed module `--edits` times (a full-text change each time,
   alternating between two versions of one line) and times each edit from `didChange` to its
   `publishDiagnostics` (the first one for that version), and until the refresh is over (a
   hover request sent then is answered after the link and any re-publish). Two kinds of edits
   alternate: a new statement in the hot function (the summary changes: the program is linked
   again; the module is published first with the seeds of the last link, as its functions are
   the same) and a default value (the summary does not change: no link). Prints medians and
   90th percentiles, and the server's resident memory (VmRSS from /proc) after the first edit
   and after the last.

Targets (docs/performance.md, issue 28): median <= 300 ms on 2 cores; RSS after 1,000 edits
<= 1.5x the RSS after the first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from server_client import LspClient  # noqa: E402

MODULES = ("model", "losses", "data", "metrics", "step", "utils", "schedule", "augment", "config", "export")

TEMPLATES = {
    "model": '''import torch
import torch.nn as nn

from .utils import init_weights


class Net{p}(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.conv = nn.Conv2d(3, width, 3, padding=1)
        self.head = nn.Linear(width, 10)
        init_weights(self)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        return self.head(h.mean((2, 3)))
''',
    "losses": '''import torch
import torch.nn.functional as F

HISTORY = []


def focal_loss(logits, target, gamma=2.0):
    ce = F.cross_entropy(logits, target, reduction="none")
    p = torch.exp(-ce)
    loss = ((1 - p) ** gamma * ce).mean()
    HISTORY.append(loss.item())  # hot through train.py
    return loss


def smooth_loss(logits, target, eps=0.1):
    return F.cross_entropy(logits, target, label_smoothing=eps)
''',
    "data": '''import torch
from torch.utils.data import DataLoader, Dataset


class Random{p}(Dataset):
    def __len__(self):
        return 1024

    def __getitem__(self, i):
        return torch.randn(3, 32, 32), i % 10


def make_loader(batch_size=64):
    return DataLoader(Random{p}(), batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True)
''',
    "metrics": '''import torch


def accuracy(logits, target):
    return (logits.argmax(1) == target).float().mean()


def summary(total, count):
    return round(total.item() / max(count, 1), 4)
''',
    "step": '''import torch

from .losses import focal_loss
from .metrics import accuracy


def train_step(model, x, y, optimizer):
    optimizer.zero_grad(set_to_none=True)
    out = model(x)
    loss = focal_loss(out, y)
    loss.backward()
    optimizer.step()
    return loss.detach(), accuracy(out.detach(), y)
''',
    "utils": '''import math

import torch.nn as nn


def init_weights(module):
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5))


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
''',
    "schedule": '''import math


def cosine(step, total, base=1e-3):
    return base * 0.5 * (1 + math.cos(math.pi * step / max(total, 1)))


def warmup(step, warm=100):
    return min(1.0, (step + 1) / warm)
''',
    "augment": '''import torch


def flip(x):
    return torch.flip(x, dims=(3,))


def jitter(x, scale=0.1):
    return x + scale * torch.randn_like(x)
''',
    "config": '''from dataclasses import dataclass


@dataclass
class Config{p}:
    lr: float = 1e-3
    epochs: int = 10
    batch_size: int = 64
''',
    "export": '''import torch


def export(model, path):
    model.eval()
    with torch.no_grad():
        torch.save(model.state_dict(), path)
''',
}


def generate(root: Path, files: int) -> Path:
    """The project; returns the changed module's path."""
    (root / ".git").mkdir(parents=True)
    packages = max(1, -(-(files - 1) // len(MODULES)))
    imports, calls = [], []
    for p in range(packages):
        pkg = root / f"pkg{p}"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("", encoding="utf-8")
        for name in MODULES[:-1]:  # nine modules and the package's __init__: ten files
            (pkg / f"{name}.py").write_text(TEMPLATES[name].format(p=p), encoding="utf-8")
        imports.append(f"from pkg{p}.step import train_step as step{p}\nfrom pkg{p}.model import Net{p}\n")
        calls.append(f"            loss{p}, acc{p} = step{p}(models[{p}], x, y, optimizer)\n")
    (root / "train.py").write_text(
        "import torch\n\n" + "".join(imports) + "\nfrom pkg0.data import make_loader\n\n\n"
        "def main(epochs=10):\n"
        "    torch.backends.cudnn.benchmark = True\n"
        f"    models = [{', '.join(f'Net{p}().cuda()' for p in range(packages))}]\n"
        "    optimizer = torch.optim.AdamW([q for m in models for q in m.parameters()], lr=1e-3)\n"
        "    loader = make_loader()\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in loader:\n"
        "            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)\n"
        + "".join(calls),
        encoding="utf-8",
    )
    return root / "pkg0" / "losses.py"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (load-independent, unlike wall time)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--edits", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="speedlint-bench-server-") as tmp:
        root = Path(tmp) / "project"
        changed = generate(root, args.files)
        n = sum(1 for _ in root.rglob("*.py"))
        client = LspClient(root, ["--no-cache"])
        t0 = time.perf_counter()
        client.initialize(root, {"debounceMs": 0})
        mark = client.mark()
        train = client.open(root / "train.py")
        client.diagnostics(train, mark)
        mark = client.mark()
        text = changed.read_text(encoding="utf-8")
        uri = client.open(changed, text)
        first = client.diagnostics(uri, mark)
        assert any(d["code"] == "SPD201" for d in first), first  # hot through train.py: the link works
        print(f"project: {n} files; first diagnostics (start, summaries, link) {time.perf_counter() - t0:.2f} s")
        # two kinds of edits, alternating: one that changes the module's whole-program summary
        # (a new statement in the hot function: the program is linked again) and one that does
        # not (a default value: the link is skipped)
        variants = [text.replace("    return loss\n", "    loss = loss * 1.0\n    return loss\n", 1), text, text.replace("gamma=2.0", "gamma=3.0")]
        latencies, settled = [], []
        cpu0 = cpu_seconds(client.proc.pid)
        rss_first = 0
        for i in range(args.edits):
            version = i + 2
            mark = client.mark()
            t = time.perf_counter()
            client.change(uri, variants[i % 3], version)
            client.diagnostics(uri, mark, version)
            latencies.append(time.perf_counter() - t)
            # the server answers requests once the refresh is over (the link, any re-publish)
            client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
            settled.append(time.perf_counter() - t)
            if i == 0:
                rss_first = rss_kib(client.proc.pid)
        rss_last = rss_kib(client.proc.pid)
        cpu = cpu_seconds(client.proc.pid) - cpu0
        client.shutdown()
    ms = sorted(x * 1000 for x in latencies)
    median = statistics.median(ms)
    p90 = ms[int(len(ms) * 0.9) - 1] if len(ms) >= 10 else ms[-1]
    print(f"edits: {len(ms)}; latency didChange -> publishDiagnostics: median {median:.0f} ms, p90 {p90:.0f} ms, min {ms[0]:.0f} ms (target: median <= 300 ms)")
    linked = [x * 1000 for i, x in enumerate(latencies) if i % 3 != 2]
    skipped = [x * 1000 for i, x in enumerate(latencies) if i % 3 == 2]
    print(f"  edits that change the summary (linked again): median {statistics.median(linked):.0f} ms; the others: median {statistics.median(skipped) if skipped else float('nan'):.0f} ms")
    print(f"  until the refresh is over (link, re-publish; a hover answered): median {statistics.median(settled) * 1000:.0f} ms, p90 {sorted(settled)[int(len(settled) * 0.9) - 1] * 1000:.0f} ms")
    print(f"  server CPU time per edit (all of it: publish, link, re-publish, the hover): {cpu / len(ms) * 1000:.0f} ms")
    ratio = rss_last / rss_first if rss_first else float("nan")
    print(f"RSS: after the first edit {rss_first / 1024:.0f} MiB, after {len(ms)} edits {rss_last / 1024:.0f} MiB: {ratio:.2f}x (target <= 1.5x)")
    print(f"cores available: {len(os.sched_getaffinity(0))}; load average now: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
