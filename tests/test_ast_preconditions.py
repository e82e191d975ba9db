"""Every rule's `ast_precondition` is conservative: the `ast` pre-look never loses a finding.

For every file below, the findings of all rules (default-off and preview ones included) are the
same with and without the pre-look, and every rule that reports a finding has its precondition
true on that file. Files: the rule fixtures (and their goldens), the fixer fixtures, the harness
scenarios, the docs examples (with the preamble the docs meta-test uses), the example project,
and a sample of real code (the installed torch package, when it is there).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import FIXTURES, ROOT
from fixture_support import PRAGMA
from speedlint.analyzer.config import Settings, parse_version
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.prelook import AstFacts
from speedlint.analyzer.registry import all_rules, select_rules

RULES = all_rules()
ALL_CODES = tuple(r.code for r in RULES)
BY_CODE = {r.code: r for r in RULES}

PREAMBLE = """\
import argparse
import gc
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset
"""


def _settings_for(text: str) -> List[Settings]:
    """Every rule enabled; the file's fixture pragmas, plus an old target (SPD403's bare form)."""
    pragmas = {m.group("key"): m.group("value") for m in PRAGMA.finditer(text)}
    kwargs: Dict[str, object] = {}
    if "accumulation-steps" in pragmas:
        kwargs["fix_options"] = (("accumulation_steps", int(pragmas["accumulation-steps"])),)
    out = [Settings(select=ALL_CODES, **kwargs)]  # type: ignore[arg-type]
    version = parse_version(pragmas["target-torch-version"]) if "target-torch-version" in pragmas else (1, 13)
    out.append(Settings(select=ALL_CODES, target_torch_version=version, **kwargs))  # type: ignore[arg-type]
    return out


def _key(f) -> Tuple:  # type: ignore[no-untyped-def]
    return (f.code, f.line, f.column, f.end_line, f.end_column, f.message)


def _facts(text: str) -> Optional[AstFacts]:
    try:
        return AstFacts(ast.parse(text), text)
    except (SyntaxError, ValueError):
        return None


def assert_prelook_loses_nothing(text: str, path: str, all_settings: bool = True) -> int:
    """Checks one file; returns its number of findings (without the pre-look)."""
    facts = _facts(text)
    total = 0
    for settings in _settings_for(text)[0 if all_settings else -1 :]:
        rules = select_rules(settings.select)
        without = analyze_text(text, path, rules, settings, prelook=False)
        total += len(without.findings)
        if facts is not None:
            missed = sorted({f.code for f in without.findings if not BY_CODE[f.code].ast_precondition(facts)})  # type: ignore[attr-defined]
            assert not missed, f"{path}: the ast_precondition of {missed} is False, yet the rule reports findings"
        with_ = analyze_text(text, path, rules, settings)
        assert [_key(f) for f in with_.findings] == [_key(f) for f in without.findings], path
        assert with_.diagnostics == without.diagnostics, path
    return total


def test_every_rule_declares_a_precondition():
    missing = [r.code for r in RULES if getattr(r, "ast_precondition", None) is None]
    assert not missing, f"rules without an ast_precondition (LibCST runs on every file they trigger on): {missing}"


# -- project files ----------------------------------------------------------------------------
def _project_files() -> List[Path]:
    files = sorted((FIXTURES / "rules").glob("*.py"))
    files += sorted((FIXTURES / "fixers").glob("*/*.py"))
    files += sorted((FIXTURES / "harness").glob("*/*.py"))
    files += sorted((ROOT / "examples").rglob("*.py"))
    return files


PROJECT_FILES = _project_files()


@pytest.mark.parametrize("path", PROJECT_FILES, ids=[str(p.relative_to(ROOT)) for p in PROJECT_FILES])
def test_project_file(path: Path):
    assert_prelook_loses_nothing(path.read_text(encoding="utf-8"), str(path))


def test_rule_fixtures_are_covered():
    """The rule fixtures do have findings (else the test above would prove nothing)."""
    codes = set()
    for path in sorted((FIXTURES / "rules").glob("SPD*.py")):
        if path.name.endswith(".fixed.py"):
            continue
        text = path.read_text(encoding="utf-8")
        settings = _settings_for(text)[-1]
        codes |= {f.code for f in analyze_text(text, str(path), select_rules(settings.select), settings, prelook=False).findings}
    assert codes >= {p.stem.split(".")[0] for p in (FIXTURES / "rules").glob("SPD*.py") if not p.name.endswith(".fixed.py")}


# -- docs examples ----------------------------------------------------------------------------
def _blocks(docs: str) -> List[str]:
    return re.findall(r"```python\n(.*?)```", docs, re.S)


@pytest.mark.parametrize("rule", RULES, ids=ALL_CODES)
def test_docs_examples(rule):
    for block in _blocks(rule.docs()):
        assert_prelook_loses_nothing(PREAMBLE + block, f"{rule.code}-example.py")


# -- the preconditions on small cases -----------------------------------------------------------
def _holds(code: str, text: str) -> bool:
    facts = _facts(text)
    assert facts is not None
    return bool(BY_CODE[code].ast_precondition(facts))  # type: ignore[attr-defined]


def test_dataloader_alias_is_seen():
    text = "from torch.utils.data import DataLoader as DL\nloader = DL(ds, batch_size=4)\n"
    assert _holds("SPD101", text)
    assert not _holds("SPD101", "# DataLoader\nloader = make(ds)\n")


def test_training_step_through_helpers_is_file_level():
    text = (
        "from torch.utils.data import DataLoader\n"
        "def step(model, opt, batch):\n    loss = model(batch).sum()\n    loss.backward()\n    opt.step()\n"
        "def train(model, opt, ds):\n    for epoch in range(3):\n        loader = DataLoader(ds)\n"
        "        for batch in loader:\n            step(model, opt, batch)\n"
    )
    assert _holds("SPD104", text)
    # `from torch.autograd import backward as bw` is a backward call too
    text2 = "from torch.autograd import backward as bw\nfor x in xs:\n    bw(loss)\n    opt.step()\n"
    assert _holds("SPD303", text2)
    assert not _holds("SPD303", "for x in xs:\n    opt.step()\n")  # no backward: no training step
    assert not _holds("SPD303", "loss.backward()\nopt.step()\n")  # no loop


CAT_LOOP = "import torch\nfor x in loader:\n    acc = torch.cat([acc, x])\n{extra}"


@pytest.mark.parametrize(
    "extra, holds",
    [
        ("", True),
        ("    n = len(acc)\n    print(acc.shape)\n", True),  # metadata reads: still only grown
        ("    if acc is None:\n        pass\n", True),  # a guard
        ("    acc += 1\n", True),  # a write: the rule decides (the pre-look only drops whole reads)
        ("    out = model(acc)\n", False),  # consumed whole each iteration (decoding, U-Net skips)
        ("    out = model(inputs=acc)\n", False),
        ("    y = acc * 2\n", False),
        ("    y = acc[-1]\n", False),
        ("    y = acc.sum()\n", False),
    ],
)
def test_cat_in_loop_skips_accumulators_the_loop_reads_whole(extra, holds):
    text = CAT_LOOP.format(extra=extra)
    assert _holds("SPD404", text) is holds
    assert_prelook_loses_nothing(text, "cat.py")


def test_cat_in_loop_keeps_attribute_accumulators_and_other_loops():
    # `self.x` accumulators are not followed by the pre-look: always kept
    assert _holds("SPD404", "import torch\nfor x in xs:\n    self.acc = torch.cat([self.acc, x])\n    f(self.acc)\n")
    # the read is in another loop: this one only grows it
    text = "import torch\nfor x in xs:\n    acc = torch.cat([acc, x])\nfor y in ys:\n    f(acc)\n"
    assert _holds("SPD404", text)
    assert_prelook_loses_nothing(text, "cat.py")


def test_factory_moved_to_device():
    assert _holds("SPD203", "import torch\nx = torch.zeros(3).cuda()\n")
    assert _holds("SPD203", "from torch import tensor as T\nx = T([1]).long().to('cuda')\n")
    assert not _holds("SPD203", "import torch\nx = torch.zeros(3)\ny = x.cuda()\n")
    assert not _holds("SPD203", "import torch\nx = torch.zeros(3).to(torch.float16)\n")  # no GPU hint in the file


# -- real code --------------------------------------------------------------------------------
_INTERESTING = ("backward", "DataLoader", "no_grad", "zero_grad", "empty_cache", "collect", "cudnn", ".cuda(", "__getitem__", "torch.cat")


def _real_files(limit: int = 200, max_bytes: int = 40_000) -> List[Path]:
    try:
        import importlib.util

        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin:
        return []
    root = Path(spec.origin).parent
    candidates = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "include", "lib", "bin", "share"))
        for name in sorted(files):
            if name.endswith(".py"):
                p = Path(folder, name)
                try:
                    if p.stat().st_size <= max_bytes:
                        candidates.append(p)
                except OSError:
                    continue
    # the files most likely to have findings first, then an even spread of the rest
    def interesting(p: Path) -> bool:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        return sum(t in text for t in _INTERESTING) >= 2

    first = [p for p in candidates if interesting(p)][: limit // 2]
    rest = [p for p in candidates if p not in set(first)]
    step = max(1, len(rest) // max(1, limit - len(first)))
    return (first + rest[::step])[:limit]


REAL_FILES = _real_files()


@pytest.mark.skipif(not REAL_FILES, reason="torch is not installed")
def test_real_code_sample():
    findings = 0
    for path in REAL_FILES:
        text = path.read_text(encoding="utf-8", errors="replace")
        # one settings (the old target: SPD403's bare form too): every file costs one LibCST run
        findings += assert_prelook_loses_nothing(text, str(path), all_settings=False)
    assert len(REAL_FILES) >= 100
    assert findings > 0  # the sample does exercise some rules


# -- projects: the pre-look asked with what the whole program says ---------------------------------
PROJECTS = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir())


def _project_findings(project: Path, monkeypatch) -> List[Tuple]:
    from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths

    monkeypatch.chdir(project)
    resolver = SettingsResolver(Overrides(select=("ALL",), preview=True), isolated=True)
    return sorted((f.path, *_key(f)) for f in check_paths(["."], resolver, use_cache=False, jobs=1).findings)


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_project_prelook_loses_nothing(project: Path, monkeypatch):
    """In a multi-file project each file's pre-look is asked with its seeds (what the whole
    program says: hot functions, loaders used from other modules): the findings are those of a
    run without any pre-look."""
    from speedlint.analyzer import engine

    with_prelook = _project_findings(project, monkeypatch)
    monkeypatch.setattr(engine, "_prelook", lambda facts, rules: list(rules))
    assert _project_findings(project, monkeypatch) == with_prelook

