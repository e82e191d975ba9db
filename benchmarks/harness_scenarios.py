"""How much of the possible speedup do speedlint's automatic fixes capture?

For every scenario in fixtures/harness/ this runs `speedlint verify` twice:
- with speedlint's automatic fixes (the scenario's selection flags, from scenario.json), and
- with the hand-optimised twin (`--after optimized.py`),
and prints per scenario both speedups and the share of the possible gain the fix captured:
(fix - 1) / (twin - 1). Speed numbers depend on the machine and its load: run it on a quiet one.

    python benchmarks/harness_scenarios.py [--steps 20] [--warmup 3] [--repeats 3] [--only NAME ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from speedlint.analyzer.runner import Overrides, SettingsResolver  # noqa: E402
from speedlint.harness.verify import VerifyOptions, verify  # noqa: E402

SCENARIOS = ROOT / "fixtures" / "harness"


def resolver_for(cfg: dict) -> SettingsResolver:
    options = (("accumulation_steps", cfg["accumulation_steps"]),) if cfg.get("accumulation_steps") else ()
    return SettingsResolver(
        Overrides(
            select=tuple(cfg["select"]) if cfg.get("select") else None,
            unsafe_fixes=bool(cfg.get("unsafe_fixes")),
            preview=True if cfg.get("preview") else None,
            fix_options=options,
        ),
        isolated=True,
    )


def fmt(x, spec=".2f", suffix="x"):  # type: ignore[no-untyped-def]
    return "-" if x is None else f"{x:{spec}}{suffix}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows as JSON here.")
    ns = parser.parse_args()
    rows = []
    names = sorted(p.name for p in SCENARIOS.iterdir() if (p / "scenario.json").is_file())
    for name in names:
        if ns.only and name not in ns.only:
            continue
        folder = SCENARIOS / name
        cfg = json.loads((folder / "scenario.json").read_text())
        common = dict(script=folder / cfg["script"], args=tuple(cfg.get("args", ())), steps=ns.steps, warmup=ns.warmup, repeats=ns.repeats)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            fixed = verify(VerifyOptions(fix_files=[folder / cfg["script"]], **common), resolver_for(cfg))
            twin = verify(VerifyOptions(after=folder / cfg["twin"], **common))
        finally:
            os.chdir(cwd)
        share = None
        if fixed.speedup is not None and twin.speedup is not None and twin.speedup - 1.0 > 0.05:
            share = (fixed.speedup - 1.0) / (twin.speedup - 1.0)
        row = {
            "scenario": name,
            "fixes": sorted({f.code for f in fixed.fixes}),
            "fix_verdict": fixed.verdict,
            "fix_speedup": fixed.speedup,
            "twin_verdict": twin.verdict,
            "twin_speedup": twin.speedup,
            "share": share,
            "data_wait_before": twin.before.data_wait_share if twin.before else None,
        }
        rows.append(row)
        print(f"{name}: fix {fmt(fixed.speedup)} ({fixed.verdict}), twin {fmt(twin.speedup)} ({twin.verdict})", file=sys.stderr, flush=True)
    header = f"| {'scenario':<20} | {'fixes applied':<16} | {'fix speedup':>11} | {'fix verdict':<22} | {'twin speedup':>12} | {'twin verdict':<22} | {'gain captured':>13} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for r in rows:
        print(
            f"| {r['scenario']:<20} | {', '.join(r['fixes']) or '(none)':<16} | {fmt(r['fix_speedup']):>11} | {r['fix_verdict']:<22} "
            f"| {fmt(r['twin_speedup']):>12} | {r['twin_verdict']:<22} | {fmt(None if r['share'] is None else 100 * r['share'], '.0f', '%'):>13} |"
        )
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
