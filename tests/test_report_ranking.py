"""The reports rank by expected cost (impact x how hot the code is), name the dominant bottleneck
from the training code, and give figures that fit where the code runs."""

from __future__ import annotations

import json
import re

from conftest import FIXTURES
from speedlint.analyzer.engine import FileResult
from speedlint.analyzer.report.markdown import check_document, select_full
from speedlint.analyzer.report.ranking import EPOCH, EVAL, STEP, cost, from_training, is_auxiliary, places_text, runs_where, typical_text
from speedlint.analyzer.report.text import full_lines, ranked_by_rule
from speedlint.analyzer.rule import HIGH, LOW, MEDIUM, Finding, Impact
from speedlint.analyzer.runner import RunResult

from test_markdown_report import Doc


def finding(code, level, when, message="m", path="train.py", line=1, typical="5-30% steps/s", related=()):  # type: ignore[no-untyped-def]
    return Finding(code, code.lower(), message, path, line, 1, line, 2, Impact("w", when, typical, level=level), related=related)


STEP_SYNC = dict(when="GPU; on every training step", message="`.item()` waits for the GPU on every training step: a host-device sync")
EVAL_SYNC = dict(when="GPU; once per evaluation batch", message="`.cpu()` waits for the GPU on every evaluation batch: a host-device sync")
EPOCH_EMPTY = dict(when="GPU; once per epoch", message="`torch.cuda.empty_cache()` runs once per epoch", typical="5-40% step time")


def test_where_the_code_runs():
    assert runs_where(finding("SPD201", HIGH, **STEP_SYNC)) == STEP
    assert runs_where(finding("SPD201", LOW, **EVAL_SYNC)) == EVAL
    assert runs_where(finding("SPD402", MEDIUM, **EPOCH_EMPTY)) == EPOCH
    respawn = "4 worker process(es) are started again every epoch: `persistent_workers` is not set"
    assert runs_where(finding("SPD103", MEDIUM, "multi-epoch training with worker processes", respawn)) == EPOCH
    chained = "`.item()` waits for the GPU: a host-device sync (runs on every training step: train.py:3 `f(...)` -> losses.py:9)"
    assert runs_where(finding("SPD201", HIGH, "GPU", chained)) == STEP
    # must not guess: a loader setting or a deprecated API says nothing about where it runs
    assert runs_where(finding("SPD102", MEDIUM, "GPU training", "batches of this loader are copied from pageable memory")) is None
    assert runs_where(finding("SPD302", LOW, "torch >= 2.4", "`torch.cuda.amp` is deprecated")) is None


def test_expected_cost_is_impact_times_heat():
    high_step = finding("SPD201", HIGH, **STEP_SYNC)
    high_eval = finding("SPD201", HIGH, **EVAL_SYNC)
    medium_step = finding("SPD203", MEDIUM, **STEP_SYNC)
    high_epoch = finding("SPD402", HIGH, **EPOCH_EMPTY)
    unsaid = finding("SPD102", MEDIUM, "GPU training")
    assert cost(high_step) > cost(high_eval) == cost(medium_step) > cost(high_epoch)
    assert cost(unsaid) == cost(medium_step)  # not said where: the rule's level stands


def test_rules_rank_by_cost_not_by_count():
    """Five medium findings per evaluation batch do not outrank one medium per step; a high
    once-per-epoch call does not outrank a medium per-step one."""
    many_eval = [finding("SPD602", MEDIUM, "every evaluation loop", "evaluation loop records the autograd graph", line=i) for i in range(5)]
    one_step = [finding("SPD203", MEDIUM, **STEP_SYNC, line=40)]
    epoch = [finding("SPD402", HIGH, **EPOCH_EMPTY, line=50)]
    order = [fs[0].code for fs in ranked_by_rule(many_eval + epoch + one_step)]
    assert order == ["SPD203", "SPD602", "SPD402"]
    # within a rule: the costliest first, whatever the line
    mixed = [finding("SPD201", LOW, **EVAL_SYNC, line=3), finding("SPD201", HIGH, **STEP_SYNC, line=90)]
    assert [f.line for f in ranked_by_rule(mixed)[0]] == [90, 3]
    full, _ = select_full(many_eval + epoch + one_step)
    assert full[0].code == "SPD203"


def test_dominant_bottleneck_comes_from_the_training_code():
    bench = [finding("SPD201", HIGH, **STEP_SYNC, path="benchmarks/bench_sync.py", line=i) for i in range(1, 9)]
    train = [finding("SPD301", HIGH, "GPU; compute-bound training", "this training step runs forward and loss in FP32", typical="1.5-3x steps/s")]
    result = RunResult(files=[FileResult("benchmarks/bench_sync.py", bench, source="x\n" * 9), FileResult("train.py", train, source="x\n")])
    summary = Doc(check_document(result)).paragraphs()[0]
    assert "The dominant bottleneck of the training code (benchmark and test scripts left out) is Precision" in summary
    # must not fire: without benchmark or test scripts nothing is left out, and the syncs dominate
    alone = RunResult(files=[FileResult("train.py", [finding("SPD201", HIGH, **STEP_SYNC, line=i) for i in range(1, 9)], source="x\n" * 9)])
    summary = Doc(check_document(alone)).paragraphs()[0]
    assert "left out" not in summary and "The dominant bottleneck is Host-device syncs and transfers" in summary


def test_benchmark_and_test_scripts():
    for path in ("benchmarks/run.py", "tests/test_train.py", "test_model.py", "bench_speed.py", "model_test.py", "pkg/testing/x.py", "conftest.py"):
        assert is_auxiliary(path), path
    for path in ("train.py", "latest.py", "models/attention.py", "contest/train.py", "trainer/testimony.py", "benchmarking_notes/train.py"):
        assert not is_auxiliary(path), path
    chained = finding("SPD201", HIGH, **STEP_SYNC, path="models/net.py", related=(("tests/test_net.py", 4, "net(...)"),))
    kept = finding("SPD201", HIGH, **STEP_SYNC, path="models/net.py", related=(("train.py", 4, "net(...)"),))
    assert from_training([chained, kept]) == [kept]
    assert from_training([chained]) == [chained]  # nothing else: all of them


def test_figures_fit_where_the_code_runs():
    epoch = finding("SPD402", MEDIUM, **EPOCH_EMPTY)
    assert typical_text(epoch).startswith("paid once per epoch, not on every step")
    assert typical_text(finding("SPD201", LOW, **EVAL_SYNC)).startswith("slows evaluation, not the training steps")
    # must not fire: a per-step figure on per-step code, a per-epoch figure on per-epoch code
    assert typical_text(finding("SPD201", HIGH, **STEP_SYNC)) == "5-30% steps/s"
    respawn = finding("SPD103", MEDIUM, "multi-epoch training with worker processes", "started again every epoch", typical="0.1-10 s per epoch and loader")
    assert typical_text(respawn) == "0.1-10 s per epoch and loader"
    lines = ["".join(text for text, _ in line) for line in full_lines([epoch], [], {"train.py": "torch.cuda.empty_cache()\n"})]
    assert any("medium impact: paid once per epoch" in line for line in lines)


def test_once_per_epoch_code_is_not_in_the_per_step_estimate():
    epoch = finding("SPD402", MEDIUM, **EPOCH_EMPTY)
    step = finding("SPD301", HIGH, "GPU; compute-bound training", "this training step runs in FP32", typical="1.5-3x steps/s", line=2)
    doc = Doc(check_document(RunResult(files=[FileResult("train.py", [epoch, step], source="x\nx\n")])))
    rows = {row[0].split(":")[0]: row for row in doc.tables[1][1:]}
    assert "SPD402" not in rows["Compute-bound"][2] and "SPD301" in rows["Compute-bound"][2]
    assert any(re.search(r"runs once per epoch.*SPD402", p) for p in doc.paragraphs())
    assert "**Runs:** once per epoch." in doc.text


def test_places_column():
    assert places_text([finding("SPD201", HIGH, **STEP_SYNC), finding("SPD201", LOW, **EVAL_SYNC)]) == "per step 1, per eval batch 1"
    assert places_text([finding("SPD103", MEDIUM, "x", "started again every epoch")]) == "per epoch"
    assert places_text([finding("SPD102", MEDIUM, "GPU training")]) == ""


def test_equal_cost_ranks_the_larger_typical_speedup_first():
    """FP32 training (1.5-3x steps/s) before three per-step syncs (5-30% steps/s): both high on
    every step; the count does not decide."""
    syncs = [finding("SPD201", HIGH, **STEP_SYNC, line=i) for i in range(1, 4)]
    fp32 = [finding("SPD301", HIGH, "GPU; compute-bound training", "this training step runs in FP32", typical="1.5-3x steps/s", line=9)]
    assert [fs[0].code for fs in ranked_by_rule(syncs + fp32)] == ["SPD301", "SPD201"]
    # must not fire: a costlier finding still wins over a larger typical range
    cheap = [finding("SPD301", MEDIUM, "GPU; compute-bound training; once per evaluation batch", "m", typical="1.5-3x steps/s")]
    assert [fs[0].code for fs in ranked_by_rule(syncs + cheap)] == ["SPD201", "SPD301"]


def test_the_estimate_states_the_training_condition_of_a_rule_found_in_both():
    step = finding("SPD201", HIGH, **STEP_SYNC)
    evals = finding("SPD201", LOW, **EVAL_SYNC, line=2)
    doc = Doc(check_document(RunResult(files=[FileResult("train.py", [step, evals], source="x\nx\n")])))
    assert "- `SPD201`: GPU; on every training step" in doc.text
    rows = {row[0].split(":")[0]: row for row in doc.tables[1][1:]}
    assert "SPD201" in rows["Compute-bound"][2] and "SPD201" in rows["Evaluation loops"][2]


# -- the reports of a project (fixtures/projects/report_ranking) -----------------------------------
PROJECT = FIXTURES / "projects" / "report_ranking"


def _project_report(cli, fmt):  # type: ignore[no-untyped-def]
    res = cli("check", ".", "--no-cache", "--isolated", "--output-format", fmt, cwd=PROJECT)
    assert res.returncode == 1, res.stderr
    return res.stdout


def test_project_markdown_puts_the_training_scripts_costliest_problem_first(cli):
    """A benchmark full of syncs under anomaly detection (1.5-5x) and a test that syncs on every
    step: the training script's FP32 step is the dominant bottleneck and finding #1; the
    benchmark's and test's findings come after every finding of train.py."""
    doc = Doc(_project_report(cli, "markdown"))
    summary = doc.paragraphs()[0]
    assert "The dominant bottleneck of the training code (benchmark and test scripts left out) is Precision" in summary
    numbered = [t for t in doc.titles(4)]
    assert numbered[0].startswith("1. SPD301")
    where = re.findall(r"\*\*Where:\*\* `([^`:]+):", doc.text)
    assert where[0] == "train.py"
    last_training = max(i for i, p in enumerate(where) if p == "train.py")
    assert all(is_auxiliary(p) for p in where[last_training + 1:]) and any(is_auxiliary(p) for p in where)
    # the estimate is the training job's: the benchmark's anomaly detection is not in it
    estimate = doc.tables[1]
    assert not any("SPD702" in cell for row in estimate for cell in row)
    assert any("SPD301" in cell for row in estimate for cell in row)
    # must not fire: the benchmark's findings are still reported, in the classes table too
    assert any(row[0] == "Backend and debugging leftovers" for row in doc.tables[0][1:])
    assert doc.tables[0][1][0] == "Precision"


def test_project_text_table_ranks_the_training_code_first(cli):
    out = _project_report(cli, "full")
    table = out[out.index("Ranked by expected impact"):].splitlines()[2:]
    codes = [line.split()[1] for line in table if re.match(r"\s*(high|medium|low)\s+SPD\d{3}", line)]
    assert codes[0] == "SPD301"
    assert codes[-1] == "SPD702"  # only in the benchmark: after every rule with training findings


def test_project_messages_say_where_and_figures_fit(cli):
    out = _project_report(cli, "full")
    block = out[out.index("train.py:41:"):]
    assert "runs once per epoch" in block.splitlines()[0]
    assert "paid once per epoch, not on every step" in block.splitlines()[2]
    block = out[out.index("train.py:18:"):]
    assert "on every evaluation batch" in block.splitlines()[0]
    assert "low impact: slows evaluation, not the training steps" in block.splitlines()[2]


def test_project_advice_fits_what_the_copy_feeds(cli):
    """The evaluation's `.cpu()` feeds scikit-learn: low, and advice to batch it or compute it on
    the device, not to accumulate on the device; the test's `assert` on a tensor decides Python
    control flow; the benchmark's `.item()` only prints: the usual advice."""
    rows = {(f["filename"], f["location"]["row"]): f for f in json.loads(_project_report(cli, "json"))["findings"]}
    sk = rows[("train.py", 18)]
    assert "`sklearn.metrics.f1_score`, which needs them on the host" in sk["message"]
    assert "batch it" in sk["fix"]["title"] and "Accumulate on the device" not in sk["fix"]["title"]
    decision = rows[("tests/test_step.py", 20)]
    assert decision["fix"]["title"].startswith("The value decides Python control flow (assert)")
    printed = rows[("benchmarks/bench_step.py", 25)]
    assert printed["fix"]["title"].startswith("Accumulate on the device")


# -- every message says where its code runs ---------------------------------------------------------
PLACES = """import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


@torch.no_grad()
def generate(model, idx, steps):
    for _ in range(steps):
        nxt = model(idx[:, -64:]).argmax(-1, keepdim=True)
        idx = torch.cat((idx, nxt), dim=1)
    return idx


def train(model, data, optimizer, steps):
    loader = DataLoader(data, batch_size=32, num_workers=4)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


def test_the_engine_adds_the_place_a_message_does_not_say():
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.engine import analyze_text
    from speedlint.analyzer.registry import select_rules

    settings = Settings(select=("SPD404", "SPD201", "SPD102"))
    found = {f.code: f for f in analyze_text(PLACES, "train.py", select_rules(settings.select), settings, prelook=False).findings}
    assert found["SPD404"].message.endswith("(runs in an evaluation or inference loop)")
    assert runs_where(found["SPD404"]) == EVAL  # a generation loop, not the training step
    # must not fire: a message that says where keeps its words; a loader setting has no place
    assert found["SPD201"].message.endswith("on every training step: a host-device sync")
    assert "(runs " not in found["SPD102"].message


def test_a_conditional_when_is_not_a_place():
    """SPD203's record says "per step when it runs in a step or a forward" for every finding: a
    finding whose message says nothing does not run on every training step for that."""
    moved = finding("SPD203", LOW, "GPU; per step when it runs in a step or a forward", "`torch.zeros(...)` is created on the CPU, then copied")
    assert runs_where(moved) is None
    gc = finding("SPD401", HIGH, "always; worst per sample in DataLoader workers", "`gc.collect()` runs once per epoch")
    assert runs_where(gc) == EPOCH


def test_markdown_says_the_added_place_once_on_the_runs_line():
    inference = finding("SPD203", LOW, "GPU; per step when it runs in a step or a forward", "`torch.zeros(...)` is created on the CPU, then copied (runs in inference code, with gradients off)")
    doc = Doc(check_document(RunResult(files=[FileResult("export.py", [inference], source="x\n")])))
    assert "- **Runs:** in inference code, with gradients off." in doc.text
    assert "then copied (runs" not in doc.text
    assert "on every evaluation batch" not in doc.text  # the ranking's place for it, not its words
