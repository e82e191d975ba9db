"""The package layout the design asks for, checked on the source: shared facts live in the
analyzer; a rule never imports another rule module, a fixer never imports a rule, and only the
rules that attach a codemod import a fixer."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, Tuple

ROOT = Path(__file__).resolve().parents[1] / "speedlint"


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, imported module) for every import in the file, lazy ones inside functions too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)


def test_rules_do_not_import_other_rules():
    bad = []
    for path in sorted((ROOT / "rules").rglob("*.py")):
        me = _module(path)
        for line, target in _imports(path):
            if target.startswith("speedlint.rules") and target != me:
                bad.append(f"{me}:{line} imports {target}")
    assert not bad, "shared facts belong in speedlint.analyzer:\n" + "\n".join(bad)


def test_fixers_do_not_import_rules():
    bad = [
        f"{_module(path)}:{line} imports {target}"
        for path in sorted((ROOT / "fixers").rglob("*.py"))
        for line, target in _imports(path)
        if target.startswith("speedlint.rules")
    ]
    assert not bad, "fixers import the analyzer, never a rule:\n" + "\n".join(bad)


#: The rules that still reach into `speedlint.fixers`: each attaches a codemod to its finding, or
#: asks the codemod's plan whether (and why not) it can rewrite the code. Facts a rule needs for
#: anything else live in the analyzer (`analyzer.loader_edits`: where a loader keyword is edited;
#: `analyzer.providers.amp_api`: the deprecated AMP spellings and their replacements).
#: The list only shrinks: the plans are shared facts, and belong in the analyzer too.
_RULES_ON_CODEMODS = {
    "speedlint.rules.data.dataloader_sync_loading",
    "speedlint.rules.precision.fp32_matmul_precision_highest",
    "speedlint.rules.precision.fp32_training_step",
    "speedlint.rules.precision.training_step_without_accumulation",
}


def test_rules_import_fixers_only_for_their_codemods():
    reaching = {
        _module(path)
        for path in sorted((ROOT / "rules").rglob("*.py"))
        for _, target in _imports(path)
        if target.startswith("speedlint.fixers")
    }
    assert reaching <= _RULES_ON_CODEMODS, "a rule's facts belong in speedlint.analyzer, not in a fixer:\n" + "\n".join(sorted(reaching - _RULES_ON_CODEMODS))
    assert reaching == _RULES_ON_CODEMODS, "no longer reaching into a fixer (take it off the list):\n" + "\n".join(sorted(_RULES_ON_CODEMODS - reaching))


#: A fact kept on a file's context by hand (an attribute or `__dict__` entry of its own) instead of
#: through `ctx.provider(build)`, the one way facts are built once per file and shared.
_HAND_CACHE = re.compile(r"ctx\.__dict__\s*(\[|\.get\(|\.setdefault\()|setattr\(ctx\b|getattr\(ctx, *\"_speedlint|\bctx\._speedlint_")


def test_facts_are_kept_on_a_context_one_way():
    bad = [
        f"{_module(path)}:{number}: {line.strip()}"
        for path in sorted(ROOT.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _HAND_CACHE.search(line)
    ]
    assert not bad, "keep a file's facts with ctx.provider(build):\n" + "\n".join(bad)
    assert _HAND_CACHE.search('cached = getattr(ctx, "_speedlint_amp_plan", None)')
    assert _HAND_CACHE.search('memo = ctx.__dict__.setdefault("_x", {})') and not _HAND_CACHE.search("analysis.ctx.__dict__.clear()")


def test_the_checks_can_fail(tmp_path):
    """The import reader sees what these tests look for (else they would prove nothing)."""
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from speedlint.rules.data import x\nimport speedlint.rules.sync\n", encoding="utf-8")
    assert sorted(t for _, t in _imports(sample)) == ["speedlint.rules.data", "speedlint.rules.sync"]


def _import_graph() -> dict:
    """speedlint module -> the speedlint modules it imports (lazy and TYPE_CHECKING imports too)."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        name = _module(path)
        modules[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _cycles(graph: dict) -> list:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_circles():
    cycles = _cycles(_import_graph())
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# -- the program package and the engine's layers ---------------------------------------------------
MAX_LINES = 1200
#: Modules held to the size limit: every module of the package (a module that outgrows it is split).
SIZED = sorted(ROOT.rglob("*.py"))
#: The modules that run rules without knowing any: they ask a rule's class attributes
#: (`ast_precondition`, `per_epoch`, `triggers` ...), never its code.
RULE_BLIND = ["engine", "prelook", "context", "runner", "parallel", "registry", "rule"]
_RULE_CODE = re.compile(r"\bSPD\d{3}\b")


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_program_modules_stay_small():
    assert (ROOT / "analyzer" / "program" / "__init__.py").is_file(), "the program model is a package"
    big = [f"{_module(p)}: {_line_count(p)} lines" for p in SIZED if _line_count(p) > MAX_LINES]
    assert not big, f"modules over {MAX_LINES} lines (split them):\n" + "\n".join(big)


def _codes_named(path: Path) -> list:
    """(line, text) of the rule codes in the module's string constants (docstrings aside: they
    may cite a rule)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        and _RULE_CODE.search(node.value)
    ]


def test_the_engine_names_no_rule_code():
    named = [
        f"speedlint.analyzer.{name}:{line} {text!r}"
        for name in RULE_BLIND
        for line, text in _codes_named(ROOT / "analyzer" / f"{name}.py")
    ]
    assert not named, "the engine asks the rules' class attributes, it names no rule:\n" + "\n".join(named)


def test_the_layer_checks_can_fail(tmp_path):
    """What the size and rule-code checks read does see what they look for."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""Cites SPD104."""\nEPOCH = {"SPD104", "x"}\n' + "x = 1\n" * MAX_LINES, encoding="utf-8")
    assert _line_count(sample) > MAX_LINES
    assert _codes_named(sample) == [(2, "SPD104")]  # the set's element, not the docstring


def test_rules_declare_their_layer_attributes():
    """Every rule declares its pre-look precondition, and `per_epoch` is a plain flag."""
    from speedlint.analyzer.registry import all_rules

    rules = all_rules()
    assert rules
    assert not [r.code for r in rules if r.ast_precondition is None]
    assert all(isinstance(r.per_epoch, bool) for r in rules)
    assert {r.code for r in rules if r.per_epoch} >= {"SPD104", "SPD402"}


#: Orchestration: what reads files, runs the analysis or writes results. The report sits at the
#: top of the house: it formats findings, fix runs and verdicts handed to it, and imports none of
#: these (the diff and finding keys it shares with them live in `speedlint.analyzer.diffkeys`).
ORCHESTRATION = (
    "speedlint.__main__",
    "speedlint.cli",
    "speedlint.harness",
    "speedlint.analyzer.baseline",
    "speedlint.analyzer.cache",
    "speedlint.analyzer.discovery",
    "speedlint.analyzer.engine",
    "speedlint.analyzer.fixdriver",
    "speedlint.analyzer.fixing",
    "speedlint.analyzer.parallel",
    "speedlint.analyzer.rewrite",
    "speedlint.analyzer.runner",
)


def _orchestration_imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, orchestration module) for each import of one in the file, lazy ones too; `from
    speedlint.analyzer import rewrite` counts as importing `speedlint.analyzer.rewrite`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names: list = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        hits = {m for name in names for m in ORCHESTRATION if name == m or name.startswith(m + ".")}
        for hit in sorted(hits):
            yield node.lineno, hit


def test_report_imports_no_orchestration():
    bad = [
        f"{_module(path)}:{line} imports {target}"
        for path in sorted((ROOT / "analyzer" / "report").rglob("*.py"))
        for line, target in _orchestration_imports(path)
    ]
    assert not bad, "the report formats what it is given; shared helpers go in a base module:\n" + "\n".join(bad)


def test_the_orchestration_check_can_fail(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from speedlint.analyzer import rewrite\n"
        "def f():\n    from speedlint.analyzer.baseline import entries_for\n"
        "import speedlint.harness.verify\n"
        "from speedlint.analyzer.diffkeys import unified_diff\n",
        encoding="utf-8",
    )
    assert sorted(t for _, t in _orchestration_imports(sample)) == [
        "speedlint.analyzer.baseline", "speedlint.analyzer.rewrite", "speedlint.harness",
    ]
