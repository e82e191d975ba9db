"""SPD301 on AMP behind an opt-in option that defaults off: FP32 by default, medium impact, and
advice to turn the option on (the AMP is already written); an opt-out option is AMP on."""

from __future__ import annotations

from conftest import FIXTURES
from fixture_support import load_fixture
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.program.facts import link
from speedlint.analyzer.program.summary import summarize
from speedlint.analyzer.registry import select_rules
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM


def _findings():
    fixture = load_fixture(FIXTURES / "rules" / "SPD301.py")
    seeds = link([(str(fixture.path.resolve()), str(fixture.path), summarize(fixture.text))]).get(str(fixture.path))
    settings = fixture.settings()
    analysis = analyze_text(fixture.text, str(fixture.path), select_rules(settings.select), settings, seeds=seeds)
    return fixture, analysis.findings


def _line(fixture, needle: str, after: int = 0) -> int:
    return next(i for i, l in enumerate(fixture.text.splitlines(), start=1) if i > after and needle in l)


def test_opt_in_amp_is_medium_with_advice():
    fixture, findings = _findings()
    for function in ("def train_opt_in(", "def train_opt_in_enabled("):
        line = _line(fixture, "# expect: SPD301", _line(fixture, function))
        (f,) = [f for f in findings if f.line == line]
        assert "off by default" in f.message
        assert f.impact.level == MEDIUM
        assert f.fix is not None and f.fix.applicability is DISPLAY_ONLY and "on by default" in f.fix.title


def test_opt_out_amp_is_not_reported():
    fixture, findings = _findings()
    start = _line(fixture, "def train_opt_out")
    assert not [f for f in findings if f.line > start]


def test_gate_declared_in_another_module_reaches_only_its_program():
    """The whole program gives the module that declares an opt-in option the autocasts it gates
    (`program.optin_seeds`): main.py hands its namespace to the gated class; the sibling script,
    the on-by-default options and an option the experiment sets itself get nothing."""
    from speedlint.analyzer.program.summary_optin import KEY

    project = FIXTURES / "projects" / "opt_in_amp_declared"
    files = [(str(p.resolve()), p.relative_to(project).as_posix(), summarize(p.read_text())) for p in sorted(project.rglob("*.py"))]
    seeds = link(files)
    assert seeds["main.py"].project[KEY] == {"use_amp": [["exp/exp.py", 18]]}  # (`--amp`, `--mixed`: on by default)
    assert KEY not in (seeds.get("sibling.py").project if "sibling.py" in seeds else {})


def test_negated_or_own_attribute_tests_are_no_gates():
    import ast

    from speedlint.analyzer.program.summary_optin import amp_gate_facts

    text = (
        "import torch\n"
        "def f(args, self):\n"
        "    if not args.use_amp:\n"
        "        with torch.autocast('cuda'):\n"
        "            pass\n"
        "    if self.amp:\n"
        "        with torch.autocast('cuda'):\n"
        "            pass\n"
        "    if args.fast:\n"
        "        pass\n"
        "    else:\n"
        "        with torch.autocast('cuda'):\n"
        "            pass\n"
    )
    assert amp_gate_facts(ast.parse(text)) == {}
    gated = "import torch\ndef f(args):\n    with torch.autocast('cuda', enabled=args.amp):\n        pass\n"
    assert amp_gate_facts(ast.parse(gated)) == {"amp_gates": [["amp", 3, None, "f"]]}
