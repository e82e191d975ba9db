"""The package type-checks: mypy (pinned in the test extra) over `speedlint/`, with the settings of
`pyproject.toml` (`[tool.mypy]`: unused `# type: ignore`s count as errors), reports nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_type_checks(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"mypy reports (fix the types, not the check):\n{result.stdout}{result.stderr}"
    assert result.stdout == "", result.stdout
