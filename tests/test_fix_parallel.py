"""`speedlint fix` on many files: the worker pool, the parent's writes, and `check`'s cache.

Results must be those of a serial run (same diff, same files written), a file that cannot be
written must not stop the others, an edit made while fixing must never be overwritten, and a
file `check`'s cache answers with nothing to fix is not analysed again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, List

import pytest

import speedlint.analyzer.fixing as fixing
import speedlint.analyzer.parallel as parallel
import speedlint.analyzer.rewrite as rewrite
from speedlint.analyzer.findings import Diagnostic
from speedlint.analyzer.rewrite import FixWork, fix_paths, unified_diff, write_fixed
from speedlint.analyzer.runner import Overrides, SettingsResolver, check_paths, codes_for, display_path
from speedlint.analyzer.sources import SourceError

from test_fix_engine import BAD as FIXABLE  # SPD401, `gc.collect()` per sample: a safe fix

# SPD403, `zero_grad(set_to_none=False)`: a safe fix
STEP = (
    "import torch\n"
    "\n"
    "\n"
    "def train(model, loader, opt):\n"
    "    for x, y in loader:\n"
    "        opt.zero_grad(set_to_none=False)\n"
    "        loss = model(x).sum()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
)
PLAIN = "import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n"
BROKEN = "import gc\n\ndef f(:\n    gc.collect()\n"


def make_tree(root: Path, n: int = 24) -> None:
    for i in range(n):
        sub = root / f"pkg{i % 3}"
        sub.mkdir(parents=True, exist_ok=True)
        text = (FIXABLE, STEP, PLAIN, PLAIN)[i % 4] + f"# file {i}\n"
        if i == 5:
            text = BROKEN
        (sub / f"mod_{i:02d}.py").write_text(text, encoding="utf-8")


def resolver() -> SettingsResolver:
    return SettingsResolver(Overrides(), isolated=True)


def snapshot(root: Path) -> Dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def report(run) -> tuple:  # type: ignore[no-untyped-def]
    """What `fix` prints, in order: the diff, each file's applied fixes, diagnostics, counts."""
    return (
        "".join(unified_diff(o) for o in run.changed),
        [(o.path, [f.code for f in o.applied], o.unsafe_available, [(d.kind, d.message) for d in o.diagnostics]) for o in run.outcomes],
        [(d.path, d.kind, d.message) for d in run.diagnostics],
        list(run.written),
    )


@pytest.fixture
def always_parallel(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(parallel, "MIN_PARALLEL_FILES", 2)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)


def test_pool_gives_the_serial_diff_and_writes_the_same_files(tmp_path, monkeypatch, always_parallel):  # type: ignore[no-untyped-def]
    make_tree(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    monkeypatch.chdir(tmp_path / "a")
    serial = fix_paths(["."], resolver(), apply=False, jobs=1, use_cache=False)
    monkeypatch.chdir(tmp_path / "b")
    pooled_chunks: List[int] = []
    real_chunks = parallel._chunks
    monkeypatch.setattr(parallel, "_chunks", lambda jobs, workers: pooled_chunks.append(len(jobs)) or real_chunks(jobs, workers))
    pooled = fix_paths(["."], resolver(), apply=False, jobs=2, use_cache=False)
    assert pooled_chunks, "the files were fixed in the worker pool"
    assert report(serial) == report(pooled)
    assert len(serial.changed) == 11 and "gc.collect()" in report(serial)[0] and "set_to_none=True" in report(serial)[0]
    assert any(d.kind == "error" for o in serial.outcomes for d in o.diagnostics)  # the syntax error, reported

    monkeypatch.chdir(tmp_path / "a")
    applied_serial = fix_paths(["."], resolver(), apply=True, jobs=1, use_cache=False)
    monkeypatch.chdir(tmp_path / "b")
    applied_pooled = fix_paths(["."], resolver(), apply=True, jobs=2, use_cache=False)
    assert report(applied_serial) == report(applied_pooled)
    assert len(applied_pooled.written) == 11
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    # idempotent: nothing left to fix, nothing rewritten
    before = {p: os.stat(p).st_mtime_ns for p in (tmp_path / "b").rglob("*.py")}
    again = fix_paths(["."], resolver(), apply=True, jobs=2, use_cache=False)
    assert not again.changed and not again.written
    assert before == {p: os.stat(p).st_mtime_ns for p in (tmp_path / "b").rglob("*.py")}


def test_unchanged_files_are_never_rewritten(tmp_path, monkeypatch, always_parallel):  # type: ignore[no-untyped-def]
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    plain = sorted(p for p in tmp_path.rglob("*.py") if p.read_text().startswith("import os"))
    stats = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in plain}
    run = fix_paths(["."], resolver(), apply=True, jobs=2, use_cache=False)
    assert run.written and not any(display_path(p) in run.written for p in plain)
    assert stats == {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in plain}


def test_a_file_that_cannot_be_written_does_not_stop_the_others(tmp_path, monkeypatch, always_parallel):  # type: ignore[no-untyped-def]
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "pkg0" / "mod_00.py"
    original = victim.read_bytes()
    real = rewrite.write_atomic

    def failing(path, data):  # type: ignore[no-untyped-def]
        if Path(path).name == victim.name:
            raise SourceError("file is read-only; not modified")
        real(path, data)

    monkeypatch.setattr(rewrite, "write_atomic", failing)  # the parent writes: a pool run sees this too
    run = fix_paths(["."], resolver(), apply=True, jobs=2, use_cache=False)
    errors = [d for d in run.diagnostics if d.kind == "write-error"]
    assert [d.path for d in errors] == [display_path(victim)] and "read-only" in errors[0].message
    assert victim.read_bytes() == original
    assert len(run.written) == 10  # every other fixable file
    assert "gc.collect()" not in (tmp_path / "pkg1" / "mod_04.py").read_text()


def test_an_edit_made_while_fixing_is_never_overwritten(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    target = tmp_path / "train.py"
    target.write_text(FIXABLE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    files = [(Path("train.py"), "train.py")]
    resolve = resolver()
    [fixed], _ = parallel.process_files(files, resolve.for_file, codes_for, None, jobs=1, work=FixWork())
    assert fixed.outcome is not None and fixed.outcome.changed
    target.write_text(FIXABLE + "# the user's edit\n", encoding="utf-8")
    problem = write_fixed(Path("train.py"), "train.py", fixed)
    assert isinstance(problem, Diagnostic) and problem.kind == "write-error" and "changed" in problem.message
    assert target.read_text(encoding="utf-8").endswith("# the user's edit\n")


def test_check_cache_spares_files_with_nothing_to_fix(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    make_tree(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    seen: List[str] = []
    real = fixing.fix_text

    def spy(text, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(path)
        return real(text, path, *args, **kwargs)

    monkeypatch.setattr(fixing, "fix_text", spy)
    without = fix_paths(["proj"], resolver(), apply=False, jobs=1, use_cache=False)
    analysed_without = sorted(seen)
    check_paths(["proj"], resolver(), jobs=1)  # fills the cache
    seen.clear()
    with_cache = fix_paths(["proj"], resolver(), apply=False, jobs=1)
    assert report(with_cache) == report(without)
    assert sorted(seen) == sorted(o.path for o in without.changed)  # only the files with a fix to apply
    assert len(seen) < len(analysed_without)
    # an unsafe fix the cache knows about counts as available, as when the file is analysed
    assert [o.unsafe_available for o in with_cache.outcomes] == [o.unsafe_available for o in without.outcomes]
    # other settings (here --unsafe-fixes) are another cache entry: the files are analysed
    seen.clear()
    fix_paths(["proj"], SettingsResolver(Overrides(unsafe_fixes=True), isolated=True), apply=False, jobs=1)
    assert set(seen) >= set(analysed_without)


def test_fix_never_writes_the_cache(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    make_tree(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    fix_paths(["proj"], resolver(), apply=True, jobs=1)
    assert not (tmp_path / ".speedlint_cache").exists()


def test_cli_fix_jobs_option(cli, tmp_path):  # type: ignore[no-untyped-def]
    make_tree(tmp_path / "proj")
    shutil.copytree(tmp_path / "proj", tmp_path / "copy")
    one = cli("fix", "proj", "--jobs", "1", cwd=tmp_path)
    two = cli("fix", "copy", "--jobs", "2", "--no-cache", cwd=tmp_path)
    assert one.returncode == two.returncode == 1
    assert one.stdout.replace("a/proj/", "a/X/").replace("b/proj/", "b/X/") == two.stdout.replace("a/copy/", "a/X/").replace("b/copy/", "b/X/")
    assert cli("fix", "proj", "--jobs", "0", cwd=tmp_path).returncode == 2
