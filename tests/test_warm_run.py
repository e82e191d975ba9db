"""A run answered entirely from the cache imports neither LibCST nor any rule, nor the parts of
rich and typer it does not use (what it imports is read from `python -X importtime`; no timing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures" / "rules").glob("SPD*.py") if not p.name.endswith(".fixed.py"))


#: The program model's modules that summarize, link or read config files (a warm run needs none:
#: it reads the cached seeds, `program.seeds`, and looks for config files, `configs.discovery`).
PROGRAM_CODE = tuple(
    f"speedlint.analyzer.program.{p.stem}"
    for p in sorted((ROOT / "speedlint" / "analyzer" / "program").glob("*.py"))
    if p.stem not in ("__init__", "schema", "seeds")
) + tuple(f"speedlint.analyzer.configs.{name}" for name in ("summary", "reader", "flow"))


def make_project(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    for fixture in FIXTURES[:6]:
        (root / "pkg" / fixture.name.lower()).write_text(fixture.read_text(encoding="utf-8"), encoding="utf-8")
    (root / "pkg" / "plain.py").write_text("import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n", encoding="utf-8")
    (root / ".gitignore").write_text("*.log\n", encoding="utf-8")
    (root / ".git").mkdir()


def run(root: Path, *args: str, command: str = "check") -> Tuple[subprocess.CompletedProcess, Set[str]]:
    """`speedlint check .` (or `command`) under `-X importtime`: its result and the modules it imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "speedlint", command, ".", *(["--profile-rules"] if command == "check" else []), *args],
        cwd=root, capture_output=True, text=True, env=env, timeout=600,
    )
    modules = set()
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", line)
        if m:
            modules.add(m.group(1))
    return proc, modules


def cached_count(proc: subprocess.CompletedProcess) -> Tuple[int, int]:
    m = re.search(r"Profile: (\d+) files, (\d+) from cache", proc.stderr)
    assert m, proc.stderr[-2000:]
    return int(m.group(1)), int(m.group(2))


def roots(modules: Set[str], *names: str) -> List[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize("output_format", ["concise", "full"])
def test_warm_run_imports_no_libcst(tmp_path, output_format):  # type: ignore[no-untyped-def]
    make_project(tmp_path)
    cold, cold_modules = run(tmp_path, "--output-format", output_format)
    assert cold.returncode == 1, cold.stderr[-2000:]
    # the check below can fail: a run that analyses files imports LibCST and the rules
    assert roots(cold_modules, "libcst") and roots(cold_modules, "speedlint.rules")
    warm, modules = run(tmp_path, "--output-format", output_format)
    assert warm.returncode == 1
    assert warm.stdout == cold.stdout
    files, cached = cached_count(warm)
    assert files == cached == len(list(tmp_path.rglob("*.py")))
    assert not roots(modules, "libcst", "speedlint.rules", "speedlint.analyzer.engine", "speedlint.fixers", "torch")
    assert not roots(modules, "typer.rich_utils", "rich.markdown", "rich.syntax", "pygments", "markdown_it")
    # nor the whole-program code: the cached seeds are plain data (`program.seeds`)
    assert roots(cold_modules, *PROGRAM_CODE)  # (the check below can fail)
    assert not roots(modules, *PROGRAM_CODE)
    if output_format == "concise":
        assert not roots(modules, "rich")  # nothing human to render


def test_fix_with_nothing_to_fix_after_check_imports_no_libcst(tmp_path):  # type: ignore[no-untyped-def]
    """`fix` answers the files `check` says have nothing to fix without analysing them: neither
    LibCST nor the fix engine is imported then (they are, once a file is fixed)."""
    (tmp_path / "pkg").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "pkg" / f"{name}.py").write_text(f"import os\n\n\ndef {name}(x):\n    return os.path.join(x, 'a')\n", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    check, _ = run(tmp_path)
    assert check.returncode == 0, check.stderr[-2000:]
    fix, modules = run(tmp_path, command="fix")
    assert fix.returncode == 0 and fix.stdout == "", fix.stderr[-2000:]
    assert not roots(modules, "libcst", "speedlint.analyzer.fixing", "speedlint.rules", "speedlint.fixers", "torch")
    (tmp_path / "pkg" / "d.py").write_text(FIXTURES[0].read_text(encoding="utf-8"), encoding="utf-8")
    fixing, modules = run(tmp_path, command="fix")
    assert roots(modules, "libcst") and roots(modules, "speedlint.analyzer.fixing")  # (the check above can fail)


def test_warm_run_with_selectors_imports_no_rule(tmp_path):  # type: ignore[no-untyped-def]
    make_project(tmp_path)
    (tmp_path / "speedlint.toml").write_text('ignore = ["SPD5"]\nextend-select = ["SPD303"]\n', encoding="utf-8")
    run(tmp_path, "--output-format", "concise", "--select", "SPD1,SPD4")
    warm, modules = run(tmp_path, "--output-format", "concise", "--select", "SPD1,SPD4")
    files, cached = cached_count(warm)
    assert files == cached
    assert not roots(modules, "libcst", "speedlint.rules")
    # an unknown selector is still an error on a warm run
    bad, _ = run(tmp_path, "--output-format", "concise", "--select", "SPD9")
    assert bad.returncode == 2 and "unknown rule selector" in bad.stderr


def test_catalogue_is_remembered_per_code_version(tmp_path):  # type: ignore[no-untyped-def]
    make_project(tmp_path)
    run(tmp_path, "--output-format", "concise")
    cache = tmp_path / ".speedlint_cache"
    remembered = sorted(p.name for p in cache.glob("catalogue-*.json"))
    assert len(remembered) == 1
    from speedlint.analyzer.cache import code_fingerprint

    assert remembered[0] == f"catalogue-{code_fingerprint()[:16]}.json"
