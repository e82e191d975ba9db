"""What a host copy feeds (`providers.host_use`) and the SPD201 advice that follows from it: a
host-only library or a Python decision gets "batch it / move it to the device / every N steps",
a value that is only logged or summed keeps "accumulate on the device"."""

from __future__ import annotations

from typing import Dict

from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.registry import select_rules

HEAD = """
import math
import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import roc_auc_score


"""


def advice(body: str) -> Dict[int, str]:
    """line -> the advice of each SPD201 finding in `HEAD + body`."""
    text = HEAD + body
    settings = Settings(select=("SPD201",))
    found = analyze_text(text, "train.py", select_rules(settings.select), settings, prelook=False).findings
    offset = HEAD.count("\n")
    return {f.line - offset: f.fix.title for f in found if f.code == "SPD201" and f.fix is not None}


TRAIN = """def train(model, loader, optimizer):
    for x, y in loader:
        out = model(x.cuda())
        cost = torch.cdist(out, y.cuda())
        rows, cols = linear_sum_assignment(cost.cpu())
        parts = cost.view(2, -1).cpu()
        pairs = [linear_sum_assignment(c[i]) for i, c in enumerate(parts.split(4, -1))]
        loss = F.mse_loss(out[rows], y.cuda()[cols])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
        if not math.isfinite(value):
            raise SystemExit(1)
"""


def test_a_copy_for_scipy_and_a_python_decision():
    got = advice(TRAIN)
    assert got[5].startswith("`scipy.optimize.linear_sum_assignment` needs the values on the host")
    assert "move that computation to the device" in got[5] and "every N steps" in got[5]
    assert got[6].startswith("`scipy.optimize.linear_sum_assignment` needs the values on the host")  # through a loop
    assert got[12].startswith("The value decides Python control flow (`math.isfinite`)")
    assert not any("Accumulate on the device" in a for a in got.values())


def test_a_value_only_logged_keeps_the_accumulate_advice():
    """Must not fire: `.item()` that is printed, summed or kept in a list (never handed to a
    library) is not a host-library use."""
    body = """def train(model, loader, optimizer, history):
    total = 0.0
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
        total += value
        history.append(value)
        print(f"{value:.3f}")
"""
    got = advice(body)
    assert list(got) == [8] and got[8].startswith("Accumulate on the device")


def test_an_evaluation_list_handed_to_sklearn():
    """Per evaluation batch, appended to a list that goes to scikit-learn after the loop: low,
    and the advice is to batch the copy (one after the loop) or compute it on the device."""
    body = """@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    scores, labels = [], []
    for x, y in loader:
        scores.append(model(x.cuda()).sigmoid().cpu().numpy())
        labels.append(y.numpy())
    return roc_auc_score(np.concatenate(labels), np.concatenate(scores))


def fit(model, loader, val_loader, optimizer):
    for epoch in range(10):
        for x, y in loader:
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        evaluate(model, val_loader)
"""
    got = advice(body)
    assert list(got) == [6]
    assert got[6].startswith("`numpy.concatenate` needs the values on the host: batch it")
    # must not fire: a loss read per evaluation batch goes nowhere else: keep it on the device
    got = advice(body.replace("labels.append(y.numpy())", "print(F.mse_loss(model(x.cuda()), y.cuda()).item())"))
    assert got[7].startswith("Keep the values on the device") and got[6].startswith("`numpy.concatenate`")


def test_a_decision_on_a_tensor_itself():
    body = """def train(model, loader, optimizer):
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        if loss > 100:
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    got = advice(body)
    assert list(got) == [4] and got[4].startswith("The value decides Python control flow (if)")


def test_reads_that_are_not_values_get_their_own_advice():
    """A boolean mask, a tensor size and `torch.cuda.synchronize()` are not values to accumulate:
    fixed shapes, host ints, CUDA events."""
    body = """def train(model, loader, optimizer):
    for x, y in loader:
        out = model(x.cuda())
        keep = out[out.abs() > 0.5]
        n = y.cuda().max()
        idx = torch.arange(n)
        loss = keep.sum() + idx.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
"""
    got = advice(body)
    assert got[4].startswith("Keep the shape fixed")
    assert got[6].startswith("Pass a Python int")
    assert got[11].startswith("Remove it from the step")
