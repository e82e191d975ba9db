"""How the reports rank findings: by expected cost, where the code runs, and from which scripts.

* **Where a finding's code runs** (`runs_where`): on every training step (or for every sample),
  on every evaluation batch, or once per epoch, as the analysis says it in the finding: the
  context the rule records in the impact's `when` (`GPU; once per evaluation batch`), else the
  call chain's kind (`(runs on every training step: ...)`), else the message (`... every epoch`). None when
  the finding does not say (loader settings, deprecated APIs ...): such a finding keeps its level.
* **Expected cost** (`cost`): the impact level times how hot the code is: per step 3, per
  evaluation batch 2, per epoch 1 (not said: 3, the level the rule gave it stands). A high-impact
  sync on every step (9) comes before a high-impact one per evaluation batch (6), a medium one per
  step (6), and a high-impact call once per epoch (3). Groups of equal cost are ordered by the
  typical speed-up their impact records state (`gain_of`).
* **The figure fits** (`typical_text`): a rule's typical range is written for the code it usually
  flags; once-per-epoch code whose range is per step is said to cost once per epoch, and code per
  evaluation batch whose range is training steps/s is said to slow evaluation.
* **Training entry points** (`from_training`, `auxiliary`): findings in benchmark or test scripts
  (and in code only they reach) are left out when the report names the project's dominant
  bottleneck, and rank after the training code's (a benchmark's syncs cost the training job
  nothing): a rule or a bottleneck class is ranked by its findings in the training code.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Dict, List, Optional, Sequence

from speedlint.analyzer.findings import Finding
from speedlint.analyzer.providers.places import EPOCH, EVAL, PLACE_PHRASES, STEP, stated_when

#: How hot each place is (the multiplier of the impact level); a finding that does not say where
#: it runs counts as the rule's usual place (its level was set for it).
HEAT: Dict[Optional[str], int] = {STEP: 3, EVAL: 2, EPOCH: 1, None: 3}
#: How each place reads in a report.
PLACE_WORDS = {STEP: "on every training step", EVAL: "on every evaluation batch", EPOCH: "once per epoch"}

_CHAIN = re.compile(r"\(runs (?P<kind>on every training step|for every sample|on every evaluation batch|once per epoch): ")
_CHAIN_KINDS = {"on every training step": STEP, "for every sample": STEP, "on every evaluation batch": EVAL, "once per epoch": EPOCH}
#: Phrases of `Impact.when` and messages that say where code runs (`providers.places`).
_PHRASES = PLACE_PHRASES
_PER_STEP_FIGURE = re.compile(r"step time|steps/s|per step", re.I)

#: Folders and file names of benchmark and test scripts.
_AUX_FOLDERS = frozenset({"test", "tests", "testing", "benchmark", "benchmarks", "bench", "benches"})
_AUX_NAME = re.compile(r"^(test_.*|.*_test|tests?|bench(mark)?s?(_.*)?|.*_bench(mark)?s?|conftest)\.(py|ipynb)$", re.I)


_GAIN = re.compile(
    r"(?:(?P<lo>\d+(?:\.\d+)?)\s*-\s*|up to ~?)(?P<hi>\d+(?:\.\d+)?)\s*(?P<unit>x|%)\s+(?:of\s+)?"
    r"(?P<what>steps/s|step time|epoch time|eval throughput|throughput)"
)


@dataclass(frozen=True)
class Gain:
    """A speed-up factor range read from an impact record's typical range."""

    low: float
    high: float
    scope: str  # "train" (steps/s, step or epoch time) or "eval" (eval throughput)


def gain_of(typical: str) -> Optional[Gain]:
    """The first range in `typical` that states a whole-job speed-up: `A-Bx` or `A-B%` of steps/s,
    step time, epoch time or throughput (`up to Bx` reads as 1-Bx). Ranges of anything else (ms per
    call, `for the looped part`, memory) are not a speed-up of the job: None."""
    m = _GAIN.search(typical)
    if m is None:
        return None
    high = float(m["hi"])
    low = float(m["lo"]) if m["lo"] is not None else (0.0 if m["unit"] == "%" else 1.0)
    if m["unit"] == "%":
        if m["what"] == "step time":  # time saved per step: the rate grows by 1 / (1 - share)
            low, high = 1 / (1 - min(low, 90) / 100), 1 / (1 - min(high, 90) / 100)
        else:
            low, high = 1 + low / 100, 1 + high / 100
    return Gain(low, high, "eval" if "eval" in m["what"] else "train")


def runs_where(f: Finding) -> Optional[str]:
    """Where the flagged code runs (STEP, EVAL, EPOCH), or None when the finding does not say."""
    return _runs_where(f.impact.when, f.message)


@lru_cache(maxsize=8192)
def _runs_where(impact_when: str, message: str) -> Optional[str]:
    # (remembered: a report ranks each finding several times, by regular expressions)
    when = stated_when(impact_when)
    for place, pattern in _PHRASES:  # the rule's own record of the context comes first
        if pattern.search(when):
            return place
    m = _CHAIN.search(message)
    if m is not None:
        return _CHAIN_KINDS[m["kind"]]
    for place, pattern in _PHRASES:
        if pattern.search(message):
            return place
    return None


def cost(f: Finding) -> int:
    """Expected cost: the impact level times how hot the code is (see the module docstring)."""
    return f.impact.level * HEAT[runs_where(f)]


def auxiliary(f: Finding) -> bool:
    """The finding sits in a benchmark or test script, or in code only such a script reaches (its
    call chain starts there)."""
    return is_auxiliary(f.path) or bool(f.related and is_auxiliary(str(f.related[0][0])))


def rank_key(f: Finding) -> tuple:
    """The training code first (a benchmark's sync costs the training job nothing); then the
    costliest; then by level (a per-step low beats nothing), then position."""
    return (auxiliary(f), -cost(f), -f.impact.level, f.sort_key())


def gain_high(f: Finding) -> float:
    """The high end of the speed-up the finding's impact record states (1 when it states none)."""
    gain = gain_of(f.impact.typical)
    return gain.high if gain is not None else 1.0


def group_key(findings: Sequence[Finding]) -> tuple:
    """A group of findings (one rule's, one bottleneck class's), the costliest first: its
    costliest finding; at equal cost, the larger typical speed-up of the findings that cost that
    much (FP32 training, 1.5-3x, before a per-step sync, 5-30%); then its summed cost (many
    per-step findings before one), then its code."""
    training = [f for f in findings if not auxiliary(f)]
    judged = training or list(findings)  # a group with training code is judged by it, and comes first
    top = max(cost(f) for f in judged)
    return (
        not training, -top, -max(gain_high(f) for f in judged if cost(f) == top),
        -sum(cost(f) for f in judged), min(f.code for f in findings),
    )


#: Short names of the places, for a table column.
PLACE_SHORT = {STEP: "per step", EVAL: "per eval batch", EPOCH: "per epoch"}


def places_text(findings: Sequence[Finding]) -> str:
    """Where a group's findings run, the hottest first, with counts: `per step 3, per epoch 1`
    (empty when none says)."""
    counts = Counter(runs_where(f) for f in findings)
    places = [p for p in (STEP, EVAL, EPOCH) if counts[p]]
    if len(places) == 1 and not counts[None]:
        return PLACE_SHORT[places[0]]
    return ", ".join(f"{PLACE_SHORT[p]} {counts[p]}" for p in places)


def typical_text(f: Finding) -> str:
    """The finding's typical figure, as it fits where the code runs."""
    typical = f.impact.typical
    place = runs_where(f)
    if place == EPOCH and _PER_STEP_FIGURE.search(typical) and "epoch" not in typical.lower():
        return f"paid once per epoch, not on every step: a small, one-off cost per epoch ({typical} where it runs on every step)"
    if place == EVAL and re.search(r"steps/s|step time", typical) and "eval" not in typical.lower():
        return f"slows evaluation, not the training steps ({typical} where it runs on every training step)"
    return typical


@lru_cache(maxsize=8192)
def is_auxiliary(path: str) -> bool:
    """A benchmark or test script (by its folder or its name), not a training entry point.
    (Remembered: a report ranks each finding several times.)"""
    parts = PurePosixPath(path.replace("\\", "/")).parts
    return any(p.lower() in _AUX_FOLDERS for p in parts[:-1]) or bool(parts and _AUX_NAME.match(parts[-1]))


def from_training(findings: Sequence[Finding]) -> List[Finding]:
    """The findings outside benchmark and test scripts (a chain that starts in one counts as in
    one); all of them when nothing else is left."""
    kept = [f for f in findings if not auxiliary(f)]
    return kept or list(findings)
