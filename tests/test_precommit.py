"""The real `pre-commit try-repo` against this repository, in a temporary git repository.

`try-repo` installs the hook repository at a git revision; on a local repository with uncommitted
changes it snapshots only tracked files (`git add -u`), so new, not yet committed files would be
missed. The test therefore copies this working tree (the files the package needs and
`.pre-commit-hooks.yaml`, as they are on disk) into a fresh git repository, commits it there, and
runs `pre-commit try-repo <copy> <hook> --files ...` from a second temporary repository that plays
the user's project. This repository's own git state is never touched.

pre-commit installs speedlint into its own virtualenv with pip (libcst, typer, rich, pathspec from
the package index): the test skips with the reason when `pre-commit` is missing or that install
fails for lack of network.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

BAD = '''import gc

import torch
from torch.utils.data import Dataset


class Frames(Dataset):
    def __init__(self, frames):
        self.frames = frames

    def __len__(self):
        return len(self.frames)

    def __getitem__(self, index):
        frame = torch.from_numpy(self.frames[index]).float()
        gc.collect()
        return frame
'''
CLEAN = "import torch\n\n\ndef double(x):\n    return torch.as_tensor(x) * 2\n"
NETWORK_HINTS = (
    "Could not find a version", "No matching distribution", "NewConnectionError", "Temporary failure in name resolution",
    "Name or service not known", "Network is unreachable", "Connection refused", "ConnectTimeout", "ReadTimeout",
    "Max retries exceeded", "Failed to establish a new connection", "ProxyError", "SSLError",
)

pytestmark = [pytest.mark.xdist_group("pre-commit"), pytest.mark.skipif(importlib.util.find_spec("pre_commit") is None and shutil.which("pre-commit") is None,
                                reason="pre-commit is not installed (pip install pre-commit; it is in the `test` extra)")]


def _git(*args, cwd):
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args], cwd=cwd, env=env,
                   check=True, capture_output=True, text=True, timeout=120)


def _pre_commit_cmd():
    if importlib.util.find_spec("pre_commit") is not None:
        return [sys.executable, "-m", "pre_commit"]
    return [shutil.which("pre-commit")]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """A committed copy of this working tree: what a user's `rev:` would point at."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("hook-repo")
    for name in ("pyproject.toml", ".pre-commit-hooks.yaml", "README.md", "LICENSE", "setup.cfg", "MANIFEST.in"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, repo / name)
    if not (repo / "README.md").exists():  # pyproject names it as the readme
        (repo / "README.md").write_text("# speedlint\n")
    shutil.copytree(ROOT / "speedlint", repo / "speedlint",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".speedlint_cache"))
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "snapshot of the working tree", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory):
    """One pre-commit home for the module: the hook environment is installed once, not per test."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def project(tmp_path):
    proj = tmp_path / "project"
    proj.mkdir()
    (proj / "speedlint.toml").write_text('select = ["SPD401"]\nextend-exclude = ["vendored"]\n')
    (proj / "bad.py").write_text(BAD)
    (proj / "clean.py").write_text(CLEAN)
    (proj / "vendored").mkdir()
    (proj / "vendored" / "third_party.py").write_text(BAD)
    _git("init", "-q", cwd=proj)
    _git("add", "-A", cwd=proj)
    _git("commit", "-q", "-m", "project", cwd=proj)
    return proj


def try_repo(hook_repo, hook, files, cwd, home):
    env = dict(os.environ, COLUMNS="40", PRE_COMMIT_COLOR="never", PRE_COMMIT_HOME=str(home))
    r = subprocess.run([*_pre_commit_cmd(), "try-repo", str(hook_repo), hook, "--files", *files, "--verbose"],
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    if r.returncode == 3 or "An unexpected error has occurred" in out:
        if any(h in out for h in NETWORK_HINTS):
            pytest.skip("pre-commit could not install speedlint's dependencies (no network?): " + out[-400:])
    return r.returncode, out


def test_check_hook_fails_on_a_bad_file_and_passes_on_a_clean_one(hook_repo, project, pre_commit_home):
    code, out = try_repo(hook_repo, "speedlint", ["bad.py"], project, pre_commit_home)
    assert code == 1, out
    assert "Failed" in out and "SPD401" in out
    # the clean file passes; the excluded file passed explicitly is skipped thanks to --force-exclude
    code, out = try_repo(hook_repo, "speedlint", ["clean.py", "vendored/third_party.py"], project, pre_commit_home)
    assert code == 0, out
    assert "Passed" in out


def test_fix_hook_rewrites_the_file(hook_repo, project, pre_commit_home):
    code, out = try_repo(hook_repo, "speedlint-fix", ["bad.py", "clean.py"], project, pre_commit_home)
    assert code == 1, out  # pre-commit fails a hook that modified files
    assert "files were modified by this hook" in out
    fixed = (project / "bad.py").read_text()
    assert "gc.collect()" not in fixed
    assert "frame = torch.from_numpy(self.frames[index]).float()\n        return frame\n" in fixed
    assert (project / "clean.py").read_text() == CLEAN
