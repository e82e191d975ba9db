"""Every rule fixture, found by glob: expected findings, must-not-fire cases, fix goldens, invariants.

A new fixture needs no new test code: add `fixtures/rules/SPDxxx.py` with `# expect: SPDxxx`
markers and a `# must not fire` section; fixable rules also get `SPDxxx.fixed.py`
(write it with `pytest --update-goldens` and review the diff).
"""

from __future__ import annotations

import libcst as cst
import pytest

from conftest import FIXTURES
from fixture_support import load_fixture, rule_fixture_paths
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.fixing import fix_text
from speedlint.analyzer.program.facts import link
from speedlint.analyzer.program.summary import summarize
from speedlint.analyzer.registry import all_rules, rule_by_code_or_name, select_rules
from speedlint.analyzer.rule import DISPLAY_ONLY

PATHS = rule_fixture_paths(FIXTURES)
IDS = [p.stem for p in PATHS]


def _seeds(fixture, text=None):
    """What the whole-program phase over the one file says about it (`speedlint check FILE`)."""
    text = fixture.text if text is None else text
    return link([(str(fixture.path.resolve()), str(fixture.path), summarize(text))]).get(str(fixture.path))


def _lint(fixture, text=None):
    """The fixture checked as `speedlint check FILE` checks it: the whole-program phase over the
    one file first (its seeds), then the rules."""
    settings = fixture.settings()
    rules = select_rules(settings.select)
    text = fixture.text if text is None else text
    return analyze_text(text, str(fixture.path), rules, settings, seeds=_seeds(fixture, text))


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_expected_findings(path):
    fixture = load_fixture(path)
    analysis = _lint(fixture)
    assert not analysis.diagnostics, analysis.diagnostics
    found = {(f.line, f.code) for f in analysis.findings}
    missing = sorted(fixture.expected - found)
    unexpected = sorted(found - fixture.expected)
    assert not missing, f"expected findings not reported (line, code): {missing}"
    assert not unexpected, f"findings without an `# expect:` marker (line, code): {unexpected}"


def test_host_syncs_reported_once_per_statement():
    """`a, b = x.item(), y.item()`: the first sync drains the GPU queue, the second finds it
    (nearly) empty. SPD201 reports the statement once, at its first sync."""
    fixture = load_fixture(FIXTURES / "rules" / "SPD201.py")
    lines = [f.line for f in _lint(fixture).findings if f.code == "SPD201"]
    twice = fixture.text.splitlines().index(next(l for l in fixture.text.splitlines() if "top1, peak = acc.item()" in l)) + 1
    assert lines.count(twice) == 1
    assert len(lines) == len(set(lines)), sorted(lines)


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_fixture_has_positives_and_must_not_fire_section(path):
    fixture = load_fixture(path)
    positives = [line for line, code in fixture.expected if code == fixture.code]
    assert len(positives) >= 4, "a rule fixture needs at least 4 positive cases"
    assert fixture.must_not_fire_line, "a rule fixture needs a `# must not fire` section"
    after = [line for line, _ in fixture.expected if line > fixture.must_not_fire_line]
    assert not after, f"expect markers inside the must-not-fire section: lines {after}"
    body = fixture.text.splitlines()[fixture.must_not_fire_line:]
    cases = [l for l in body if l.strip() and not l.lstrip().startswith("#")]
    assert len(cases) >= 4, "the must-not-fire section needs real cases"


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_fixes_match_declared_availability(path):
    fixture = load_fixture(path)
    rule = rule_by_code_or_name(fixture.code)
    findings = [f for f in _lint(fixture).findings if f.code == fixture.code]
    emitted = {f.fix.applicability for f in findings if f.fix is not None}
    assert emitted <= set(rule.fixes), f"{rule.code} emits {emitted}, declares {rule.fixes}"
    if rule.fixes:
        assert set(rule.fixes) <= emitted, f"declared fix kinds never emitted by the fixture: {set(rule.fixes) - emitted}"
    for f in findings:
        if f.fix is not None and f.fix.applicability is not DISPLAY_ONLY:
            assert f.fix.replacements or f.fix.fixer, "an applicable fix must change something"


def _has_applicable_fixes(fixture) -> bool:
    return any(f.fix is not None and f.fix.applicable for f in _lint(fixture).findings)


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_fixed_output_matches_golden(path, update_goldens):
    fixture = load_fixture(path)
    if not _has_applicable_fixes(fixture):
        assert not fixture.golden.exists(), "golden for a fixture with nothing to fix"
        return
    settings = fixture.settings()
    outcome = fix_text(fixture.text, str(path), select_rules(settings.select), settings, unsafe=True, seeds=_seeds(fixture))
    assert not [d for d in outcome.diagnostics if d.kind != "warning"], outcome.diagnostics
    if update_goldens:
        fixture.golden.write_text(outcome.fixed, encoding="utf-8")
    assert fixture.golden.exists(), f"missing golden {fixture.golden.name}: run pytest --update-goldens and review it"
    assert outcome.fixed == fixture.golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_fix_invariants(path):
    """Fixed output parses and compiles, fixing again changes nothing, fixed findings are gone."""
    fixture = load_fixture(path)
    settings = fixture.settings()
    rules = select_rules(settings.select)
    once = fix_text(fixture.text, str(path), rules, settings, unsafe=True)
    cst.parse_module(once.fixed)
    compile(once.fixed, str(path), "exec")
    twice = fix_text(once.fixed, str(path), rules, settings, unsafe=True)
    assert twice.fixed == once.fixed, "fix is not idempotent"
    again = analyze_text(once.fixed, str(path), rules, settings)
    still_fixable = [f for f in again.findings if f.fix is not None and f.fix.applicable]
    assert not still_fixable, [(f.line, f.code, f.message) for f in still_fixable]
    assert not [d for d in once.diagnostics if d.kind != "warning"], once.diagnostics


def test_every_rule_has_a_fixture():
    have = {p.stem for p in PATHS}
    missing = [r.code for r in all_rules() if r.code not in have]
    assert not missing, f"rules without fixtures/rules/<CODE>.py: {missing}"
