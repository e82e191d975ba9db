"""Behaviour of the performance features: process pool, cache, profile, start-up (never timing)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import pytest

import speedlint.analyzer.parallel as parallel
from speedlint.analyzer import engine
from speedlint.analyzer.cache import CACHE_DIR_NAME, finding_from_json, finding_to_json
from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import Profile, analyze_text, ast_prelook
from speedlint.analyzer.prelook import AstFacts
from speedlint.analyzer.registry import all_rules
from speedlint.analyzer.rule import FixSummary
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures" / "rules").glob("SPD*.py") if not p.name.endswith(".fixed.py"))

PLAIN = "import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n"
BROKEN = "import torch\nimport gc\n\ndef f(:\n    gc.collect()\n"


def make_tree(root: Path, n: int = 40) -> List[Path]:
    """A project of `n` files: the rule fixtures (real training code), plain files, a syntax error."""
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        sub = root / f"pkg{i % 4}"
        sub.mkdir(exist_ok=True)
        if i == 7:
            text = BROKEN
        elif FIXTURES and i % 4 == 0:
            fixture = FIXTURES[(i // 4) % len(FIXTURES)]
            text = fixture.read_text(encoding="utf-8") + f"\n# copy {i}\n"
        else:
            text = PLAIN + f"# {i}\n"
        path = sub / f"mod_{i:02d}.py"
        path.write_text(text, encoding="utf-8")
        files.append(path)
    return files


def resolver(**overrides) -> SettingsResolver:  # type: ignore[no-untyped-def]
    return SettingsResolver(Overrides(**overrides), isolated=True)


def summary(result) -> Tuple:  # type: ignore[no-untyped-def]
    """Everything a report shows, in order."""
    out = []
    for r in result.files:
        for f in r.findings:
            fix = None
            if f.fix is not None:
                fix = (f.fix.title, f.fix.applicability.value, f.fix.applicable)
            out.append(("F", f.path, f.line, f.column, f.end_line, f.end_column, f.code, f.message, f.impact.level, fix, f.edits))
        for d in r.diagnostics:
            out.append(("D", d.path, d.kind, d.message))
    return tuple(out)


@pytest.fixture
def tree(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    make_tree(tmp_path / "proj")
    return tmp_path / "proj"


@pytest.fixture
def always_parallel(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(parallel, "MIN_PARALLEL_FILES", 2)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)


# -- process pool ---------------------------------------------------------------------------------
def test_parallel_results_equal_serial(tree, always_parallel):  # type: ignore[no-untyped-def]
    serial = check_paths([str(tree)], resolver(), use_cache=False, jobs=1)
    pooled = check_paths([str(tree)], resolver(), use_cache=False, jobs=2, profile=True)
    assert pooled.profile is not None and pooled.profile.workers == 2
    assert summary(serial) == summary(pooled)
    assert [r.path for r in serial.files] == [r.path for r in pooled.files]
    assert any(r.findings for r in serial.files) or not FIXTURES
    assert any(d.kind == "error" for d in serial.diagnostics)  # the syntax error is a diagnostic
    # snippets need the source of files with findings, in both modes
    assert all(r.source for r in pooled.files if r.findings)


def test_pool_order_is_discovery_order(tree, always_parallel):  # type: ignore[no-untyped-def]
    a = check_paths([str(tree)], resolver(), use_cache=False, jobs=2)
    b = check_paths([str(tree)], resolver(), use_cache=False, jobs=2)
    assert summary(a) == summary(b)
    assert [r.path for r in a.files] == sorted(r.path for r in a.files)


def test_findings_are_portable(tree):  # type: ignore[no-untyped-def]
    result = check_paths([str(tree)], resolver(), use_cache=False, jobs=1)
    for f in result.findings:
        assert f.fix is None or isinstance(f.fix, FixSummary)
        back = pickle.loads(pickle.dumps(f))
        assert finding_from_json(json.loads(json.dumps(finding_to_json(back))), f.path).__dict__ == f.__dict__


def test_fix_summary_answers_like_the_fix():  # type: ignore[no-untyped-def]
    if not FIXTURES:
        pytest.skip("no rule fixtures yet")
    for fixture in FIXTURES:
        analysis = analyze_text(fixture.read_text(encoding="utf-8"), str(fixture), all_rules(), Settings())
        for f in analysis.findings:
            if f.fix is None:
                continue
            s = FixSummary.of(f.fix)
            assert (s.title, s.applicability, s.applicable) == (f.fix.title, f.fix.applicability, f.fix.applicable)


# -- cache ----------------------------------------------------------------------------------------
def test_cache_hit_is_identical_and_does_not_parse(tree, monkeypatch):  # type: ignore[no-untyped-def]
    cold = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert cold.profile.cached == 0 and cold.profile.parsed > 0
    cache = tree.parent / CACHE_DIR_NAME
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a cached file was parsed again")

    monkeypatch.setattr(engine.cst, "parse_module", boom)
    warm = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert summary(warm) == summary(cold)
    assert warm.profile.parsed == 0
    assert warm.profile.cached == warm.profile.files == len(cold.files)
    assert all(r.source for r in warm.files if r.findings)


def test_cache_json_output_identical(tree):  # type: ignore[no-untyped-def]
    from speedlint.analyzer.report import json_document

    cold = check_paths([str(tree)], resolver(), use_cache=True, jobs=1)
    warm = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert warm.profile.cached == len(cold.files)
    assert json_document(cold.findings, cold.diagnostics) == json_document(warm.findings, warm.diagnostics)


def test_cache_invalidated_by_content_change(tree):  # type: ignore[no-untyped-def]
    check_paths([str(tree)], resolver(), use_cache=True, jobs=1)
    changed = tree / "pkg0" / "mod_00.py"
    changed.write_text(changed.read_text(encoding="utf-8") + "\nimport gc\ngc.collect()\n", encoding="utf-8")
    again = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert again.profile.cached == len(again.files) - 1
    fresh = check_paths([str(tree)], resolver(), use_cache=False, jobs=1)
    assert summary(again) == summary(fresh)


def test_cache_invalidated_by_settings_change(tree):  # type: ignore[no-untyped-def]
    first = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    other = check_paths([str(tree)], resolver(target_torch_version=(1, 13)), use_cache=True, jobs=1, profile=True)
    assert other.profile.cached == 0
    codes = sorted({f.code for f in first.findings})
    if codes:
        ignored = check_paths([str(tree)], resolver(ignore=(codes[0],)), use_cache=True, jobs=1, profile=True)
        assert ignored.profile.cached == 0
        assert codes[0] not in {f.code for f in ignored.findings}
    # and the first settings still hit their own entries
    back = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert back.profile.cached == len(first.files)
    assert summary(back) == summary(first)


def test_syntax_error_is_cached_as_its_diagnostic(tree):  # type: ignore[no-untyped-def]
    cold = check_paths([str(tree)], resolver(), use_cache=True, jobs=1)
    warm = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert warm.profile.cached == len(cold.files)
    assert [d.message for d in warm.diagnostics] == [d.message for d in cold.diagnostics]
    assert any("syntax error" in d.message for d in warm.diagnostics)


def test_no_cache_writes_nothing(tree):  # type: ignore[no-untyped-def]
    check_paths([str(tree)], resolver(), use_cache=False, jobs=1)
    assert not (tree.parent / CACHE_DIR_NAME).exists()


def test_corrupt_cache_is_ignored(tree):  # type: ignore[no-untyped-def]
    cold = check_paths([str(tree)], resolver(), use_cache=True, jobs=1)
    for bucket in (tree.parent / CACHE_DIR_NAME).glob("results-*.json"):
        bucket.write_text("{not json", encoding="utf-8")
    again = check_paths([str(tree)], resolver(), use_cache=True, jobs=1, profile=True)
    assert again.profile.cached == 0
    assert summary(again) == summary(cold)


# -- the command line -----------------------------------------------------------------------------
def run_cli(args: List[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "speedlint", *args], cwd=str(cwd), capture_output=True, text=True, env=env, timeout=300)


def test_clean_removes_the_cache(tree):  # type: ignore[no-untyped-def]
    cwd = tree.parent
    assert run_cli(["check", "proj", "--exit-zero", "-q"], cwd).returncode == 0
    assert (cwd / CACHE_DIR_NAME / ".gitignore").is_file()
    proc = run_cli(["clean"], cwd)
    assert proc.returncode == 0, proc.stderr
    assert not (cwd / CACHE_DIR_NAME).exists()
    assert run_cli(["clean"], cwd).returncode == 0  # nothing to remove is fine


def test_two_concurrent_runs_both_succeed(tree):  # type: ignore[no-untyped-def]
    cwd = tree.parent
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "speedlint", "check", "proj", "--output-format", "json", "--jobs", "2"]
    procs = [subprocess.Popen(cmd, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [procs[0].returncode] * 2 and procs[0].returncode in (0, 1), outs
    assert outs[0][0] == outs[1][0]
    for bucket in (cwd / CACHE_DIR_NAME).glob("results-*.json"):
        json.loads(bucket.read_text(encoding="utf-8"))  # complete, never half-written
    assert not list((cwd / CACHE_DIR_NAME).glob("*.tmp"))
    third = run_cli(["check", "proj", "--output-format", "json"], cwd)
    assert third.stdout == outs[0][0]


def test_profile_rules_lists_phases(tree):  # type: ignore[no-untyped-def]
    proc = run_cli(["check", "proj", "--no-cache", "--profile-rules", "--exit-zero", "--output-format", "concise"], tree.parent)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "Profile:" in err
    for phase in ("read", "pre-filter", "parse", "rules", "positions"):
        assert f"    {phase} " in err, err
    if FIXTURES:
        assert "providers" in err


def test_profile_merges_worker_profiles(tree, always_parallel):  # type: ignore[no-untyped-def]
    serial = check_paths([str(tree)], resolver(), use_cache=False, jobs=1, profile=True)
    pooled = check_paths([str(tree)], resolver(), use_cache=False, jobs=2, profile=True)
    assert pooled.profile.parsed == serial.profile.parsed > 0
    assert pooled.profile.files == serial.profile.files == len(serial.files)
    assert set(pooled.profile.rules) == set(serial.profile.rules)
    assert "parse" in pooled.profile.phases


def test_check_never_imports_torch(tmp_path):  # type: ignore[no-untyped-def]
    target = FIXTURES[0] if FIXTURES else None
    src = tmp_path / "train.py"
    src.write_text(target.read_text(encoding="utf-8") if target else "import torch\nimport gc\ngc.collect()\n", encoding="utf-8")
    code = (
        "import sys\n"
        "from speedlint.cli import main\n"
        f"sys.argv = ['speedlint', 'check', {str(src)!r}, '--no-cache', '--jobs', '1', '--select', 'ALL']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import speedlint.analyzer.registry as r; r.all_rules()\n"
        "sys.stderr.write('TORCH-LOADED=%s\\n' % ('torch' in sys.modules))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "TORCH-LOADED=False" in proc.stderr, proc.stderr[-2000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "speedlint.analyzer.engine" in imported
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")]


def test_version_is_cheap():  # type: ignore[no-untyped-def]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = "import sys\nfrom speedlint.cli import main\nsys.argv=['speedlint','--version']\ntry:\n    main()\nexcept SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('libcst','torch')))\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert "speedlint" in proc.stdout
    assert proc.stdout.strip().endswith("[]"), proc.stdout  # neither libcst nor torch for --version


# -- the ast pre-look -----------------------------------------------------------------------------
def test_ast_prelook_is_conservative():  # type: ignore[no-untyped-def]
    class Needs:
        ast_precondition = staticmethod(lambda facts: facts.may_have_training_step)

    class Loader:
        ast_precondition = staticmethod(lambda facts: facts.uses_any("DataLoader"))

    train = "for x in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()\n"
    assert ast_prelook(train, [Needs, Loader]) == [Needs]
    assert ast_prelook("# backward step DataLoader\nx = 1\n", [Needs, Loader]) == []
    assert ast_prelook("from torch.utils.data import DataLoader as DL\n", [Needs, Loader]) == [Loader]
    # what `ast` cannot parse goes to LibCST unchanged (it reports the error) ...
    broken = "def f(:\n    for x in DataLoader(ds):\n        loss.backward()\n        opt.step()\n"
    assert ast_prelook(broken, [Needs, Loader]) == [Needs, Loader]
    # ... unless the text alone already rules every precondition out (no parse at all)
    assert ast_prelook("def f(:\n", [Needs, Loader]) == []
    facts = AstFacts(__import__("ast").parse(train))
    assert facts.calls_any("backward") and facts.has_loop and "loss" in facts.names


def test_ast_prelook_skips_libcst_when_no_rule_can_fire(monkeypatch):  # type: ignore[no-untyped-def]
    from speedlint.analyzer.rule import Rule

    class OnlyInSteps(Rule):
        code = "SPD999"
        name = "test-only"
        triggers = ("backward",)
        ast_precondition = staticmethod(lambda facts: facts.may_have_training_step)

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("parsed with LibCST")

    monkeypatch.setattr(engine.cst, "parse_module", boom)
    profile = Profile()
    text = "# keeps backward compatibility\ndef f(x):\n    return x\n"
    analysis = analyze_text(text, "a.py", [OnlyInSteps], Settings(), profile)
    assert analysis.findings == [] and analysis.ctx is None
    assert profile.parsed == 0 and "ast pre-look" in profile.phases


def test_analysed_trees_are_released():  # type: ignore[no-untyped-def]
    """Nothing keeps a file's context (and so its trees) alive once its analysis is dropped:
    a per-file cache keyed by the context in a module-level weak dictionary, whose value refers
    back to the context, once kept every tree of a run alive (~1 GiB on a large corpus)."""
    import gc
    import weakref
    from pathlib import Path

    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.registry import all_rules, select_rules

    codes = tuple(r.code for r in all_rules())
    settings = Settings(select=codes)
    rules = select_rules(codes)
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
    for name in ("SPD201.py", "SPD203.py", "SPD101.py", "SPD602.py"):
        analysis = analyze_text((fixtures / name).read_text(encoding="utf-8"), name, rules, settings)
        assert analysis.ctx is not None and analysis.findings
        ref = weakref.ref(analysis.ctx)
        del analysis
        gc.collect()
        assert ref() is None, f"{name}: the FileContext outlives its analysis"


# -- parsing text `ast` has already accepted -----------------------------------------------------
@pytest.mark.parametrize("path", FIXTURES[:8], ids=lambda p: p.name)
def test_parse_valid_module_builds_the_same_tree(path):
    import libcst as cst

    text = path.read_text(encoding="utf-8")
    fast = engine.parse_valid_module(text)
    assert fast.code == text
    assert fast.deep_equals(cst.parse_module(text))


def test_parse_valid_module_puts_validation_back():
    import libcst as cst

    engine.parse_valid_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")  # built after the parse: validated as usual


def test_text_ast_rejects_is_parsed_with_validation_and_reported(monkeypatch):
    used = []
    monkeypatch.setattr(engine, "parse_valid_module", lambda text: used.append(text))
    rules = [r for r in all_rules() if r.code == "SPD401"]
    result = analyze_text(BROKEN, "broken.py", rules, Settings(), prelook=False)
    assert not used  # `ast` rejects it: LibCST parses it as usual and reports the error
    assert [d.message for d in result.diagnostics] and "syntax error" in result.diagnostics[0].message


def test_a_worker_gives_memory_back_after_each_big_file(monkeypatch):  # type: ignore[no-untyped-def]
    """After a file of `_BIG_FILE` bytes or more (only then: it costs a collection) a worker frees
    its garbage and hands free memory back; the results are those of the work, in order."""
    calls: List[int] = []
    monkeypatch.setattr(parallel, "_give_back_memory", lambda: calls.append(len(done)))
    done: List[int] = []

    class Work(parallel.CheckWork):
        def run(self, job, profile):  # type: ignore[no-untyped-def]
            done.append(job.index)
            return f"result {job.index}", None

    sizes = [10, parallel._BIG_FILE, 500, parallel._BIG_FILE * 3, parallel._BIG_FILE - 1]
    jobs = [parallel.Job(i, f"f{i}.py", f"f{i}.py", Settings(), ("SPD201",), size) for i, size in enumerate(sizes)]
    out, _ = parallel._work(jobs, False, Work())
    assert [r[:2] for r in out] == [(i, f"result {i}") for i in range(5)]
    assert calls == [2, 4]  # right after the second and the fourth file


def test_in_process_analysis_runs_with_a_workers_collector(monkeypatch):  # type: ignore[no-untyped-def]
    """One worker (or a small tree): the files are analysed in this process with what a forked
    worker has (`_init_worker`): what existed before is set aside from the collector and
    collections are rarer. Afterwards the process's collector is as it was."""
    import gc

    seen: List[Any] = []

    class Work(parallel.CheckWork):
        def run(self, job, profile):  # type: ignore[no-untyped-def]
            seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
            return f"result {job.index}", None

    before = gc.get_threshold(), gc.get_freeze_count()
    jobs = [parallel.Job(i, f"f{i}.py", f"f{i}.py", Settings(), ("SPD201",), 10) for i in range(3)]
    done = parallel.run_jobs(jobs, 1, None, Work())
    assert {i: r for i, (r, _) in done.items()} == {i: f"result {i}" for i in range(3)}
    assert seen == [(parallel._WORKER_GC, True)] * 3
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_giving_memory_back_works_without_malloc_trim(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(parallel, "_TRIM", [None])  # a C library without it (macOS, musl, Windows)
    parallel._give_back_memory()
    monkeypatch.setattr(parallel, "_TRIM", [])
    parallel._give_back_memory()  # looked up once, whatever the platform has
    assert len(parallel._TRIM) == 1 and (parallel._TRIM[0] is None or callable(parallel._TRIM[0]))


def test_a_text_the_program_phase_parsed_is_not_parsed_again_for_validity(monkeypatch):
    """`analyze_text(valid=True)`: the program phase's `ast` parse of the same bytes says the text
    is valid Python, so LibCST parses it without its own validation and `ast` is not run again."""
    from speedlint.analyzer import engine
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.pyparse import parse_quietly
    from speedlint.analyzer.registry import select_rules

    text = "import gc\nfrom torch.utils.data import Dataset\n\n\nclass D(Dataset):\n    def __getitem__(self, i):\n        gc.collect()\n        return i\n"
    parses = []

    def spy(source, *args, **kwargs):  # (the engine's `ast` parse: `pyparse.parse_quietly`)
        parses.append(source)
        return parse_quietly(source, *args, **kwargs)

    monkeypatch.setattr(engine, "parse_quietly", spy)
    rules = select_rules(select=["SPD401"])
    again = engine.analyze_text(text, "d.py", rules, Settings(), prelook=False)
    assert parses and [f.code for f in again.findings] == ["SPD401"]
    parses.clear()
    once = engine.analyze_text(text, "d.py", rules, Settings(), prelook=False, valid=True)
    assert parses == [] and [f.code for f in once.findings] == ["SPD401"]
