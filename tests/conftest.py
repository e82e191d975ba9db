import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="Rewrite fixtures/**/*.fixed.py (and fixer after.py) from the current output; review the diff.",
    )


@pytest.fixture
def update_goldens(request):
    return request.config.getoption("--update-goldens")


def run_cli(*args, cwd=None, input=None, env=None):
    """Run the installed CLI in a subprocess, as a user would."""
    full_env = dict(os.environ, COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "speedlint", *map(str, args)],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=600,
    )


@pytest.fixture
def cli():
    return run_cli
