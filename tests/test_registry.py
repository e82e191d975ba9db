"""Meta-tests over the registry: every rule is documented, unique, and its docs' examples are honest."""

from __future__ import annotations

import re

import pytest

from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.registry import all_rules, select_rules
from speedlint.analyzer.rule import Impact, Status

RULES = all_rules()
IDS = [r.code for r in RULES]
SECTIONS = ("## What it does", "## Why is this slow?", "## Example", "## Use instead", "## Fix safety")

# Imports every docs example may rely on; examples show the pattern, not the boilerplate.
PREAMBLE = """\
import argparse
import gc
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset
"""


def test_rules_are_discovered():
    assert len(RULES) >= 1


def test_codes_and_names_are_unique_and_well_formed():
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for r in RULES:
        assert re.fullmatch(r"SPD[1-9]\d\d", r.code), r.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_metadata(rule):
    assert isinstance(rule.impact, Impact)
    assert rule.impact.wastes and rule.impact.when and rule.impact.typical
    assert rule.triggers, "a rule must declare trigger tokens for the pre-filter"
    assert isinstance(rule.status, Status)
    docs = rule.docs()
    for section in SECTIONS:
        assert section in docs, f"{rule.code} docs lack {section!r}"


def _block(docs: str, section: str) -> str:
    part = docs.split(section, 1)[1]
    m = re.search(r"```python\n(.*?)```", part, re.S)
    assert m, f"no python block under {section}"
    return m.group(1)


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_docs_example_triggers_and_use_instead_does_not(rule):
    docs = rule.docs()
    settings = Settings(select=(rule.code,), target_torch_version=(1, 13))
    rules = select_rules(settings.select)
    example = PREAMBLE + _block(docs, "## Example")
    fixed = PREAMBLE + _block(docs, "## Use instead")
    found = [f for f in analyze_text(example, "example.py", rules, settings).findings if f.code == rule.code]
    assert found, f"{rule.code}: the docs Example does not trigger the rule"
    clean = [f for f in analyze_text(fixed, "example.py", rules, settings).findings if f.code == rule.code]
    assert not clean, f"{rule.code}: the docs 'Use instead' still triggers: {[f.message for f in clean]}"
