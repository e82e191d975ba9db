"""The GPU scenarios (`benchmarks/gpu/`) still get the fixes they were measured with.

`benchmarks/bench_gpu.py` runs them on a GPU (never here); the speedups in docs/verify.md hold
only while each scenario's `speedlint fix` applies exactly the rules its `scenario.json` names.
Planning the fixes needs no GPU and no torch: this checks it on every run of the suite.
"""

from __future__ import annotations

import importlib.util
import sys

from conftest import ROOT

GPU = ROOT / "benchmarks" / "gpu"


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_gpu", module)
    spec.loader.exec_module(module)
    return module


def test_each_gpu_scenario_gets_exactly_its_fixes():
    bench = _bench()
    scenarios = bench.load_scenarios(GPU, None)
    assert sorted(s["name"] for s in scenarios) == sorted(p.parent.name for p in GPU.glob("*/scenario.json"))
    assert len(scenarios) >= 6
    for scen in scenarios:
        got = bench.fixes_only(scen)
        assert got["expected_rules"], scen["name"]  # every scenario names what it measures
        assert got["fixes"] == got["expected_rules"], (scen["name"], got)
