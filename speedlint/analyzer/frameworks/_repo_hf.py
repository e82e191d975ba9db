"""The repository around a training script, for the Hugging Face `Trainer` / accelerate knowledge:
an accelerate config file or a `--mixed_precision` launch command shipped with it, the
`TrainingArguments` files `HfArgumentParser` may read, and the whole-run seeds built from them at
link time (`add_seeds`, called by `program.link`; this module imports nothing of the program
model or the rules' context, so that the program can import it)."""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from speedlint.analyzer.configs.reader import Mapping
from speedlint.analyzer.configs.sources import load
from speedlint.analyzer.frameworks.hf_facts import ACCELERATE_KEY, HF_FILES_KEY, REDUCED_KEY, TF32_KEY

#: Files that mark the root of a repository (the folder whose config files and launch scripts count).
_ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg", "requirements.txt", "README.md", "README.rst")
_LAUNCH_FLAG = re.compile(r"--mixed[_-]precision[= ]+[\"']?(\w+)")
_CONFIG_KEY = re.compile(r"^mixed_precision:\s*[\"']?(\w+)", re.M)
_ACCELERATE_KEYS = re.compile(r"^(distributed_type|compute_environment):", re.M)
_LAUNCH_FILES = re.compile(r"(\.sh|\.bash|\.md|\.rst|\.txt)$|^Makefile$|^README", re.I)


def add_seeds(
    summaries: Iterable[Tuple[str, str, Dict[str, Any]]], seeds: Dict[str, Any], new_seeds: Callable[[], Any], config_files: Iterable[str],
    in_program: Optional[Callable[[List[bool]], List[bool]]] = None,
) -> None:
    """Whole-run facts for the frameworks' rules: `(path, shown, summary)` per file.
    `in_program`: per-file flags -> whether a program each file belongs to has a flagged file
    (`program.scope`; without it, the whole run is one program)."""
    files = list(summaries)
    for fact, key in (("tf32", TF32_KEY), ("reduced", REDUCED_KEY)):
        flags = [bool((s.get("fw") or {}).get(fact)) for _, _, s in files]
        if any(flags):
            holds = in_program(flags) if in_program is not None else [True] * len(files)
            for (_, shown, _), held in zip(files, holds):
                if held:
                    seeds.setdefault(shown, new_seeds()).project[key] = True
    configs = list(config_files)
    for path, shown, s in files:
        if (s.get("fw") or {}).get("hf_files"):
            found_files = argument_files(path, configs)
            if found_files:
                seeds.setdefault(shown, new_seeds()).project[HF_FILES_KEY] = found_files
        if (s.get("fw") or {}).get("accelerate"):
            found = repo_precision(path, configs)
            if found is not None:
                seeds.setdefault(shown, new_seeds()).project[ACCELERATE_KEY] = list(found)


def repo_precision(path: str, config_files: Sequence[str]) -> Optional[Tuple[str, str, str, int]]:
    """(where, value, file, line) of the mixed precision that the repository of `path` sets for
    `accelerate launch`: an accelerate config file among `config_files`, else `--mixed_precision`
    in a launch script or README of the repository's root (or its `scripts/`)."""
    root = _root(os.path.dirname(os.path.abspath(path)))
    for config in config_files:
        if not os.path.abspath(config).startswith(root + os.sep):
            continue
        found = _config_value(config)
        if found is not None:
            return ("accelerate config file", found[0], config, found[1])
    for folder in (root, os.path.join(root, "scripts")):
        for name in _listdir(folder):
            if _LAUNCH_FILES.search(name):
                found = _launch_value(os.path.join(folder, name))
                if found is not None:
                    return ("launch command", found[0], os.path.join(folder, name), found[1])
    return None


def repo_root(folder: str) -> str:
    """The repository a folder belongs to: the nearest folder at or above it holding `.git`,
    `pyproject.toml`, `setup.py`, `setup.cfg`, `requirements.txt` or a README."""
    return _root(folder)


@lru_cache(maxsize=256)
def _root(folder: str) -> str:
    current = folder
    while True:
        if any(os.path.exists(os.path.join(current, m)) for m in _ROOT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return folder
        current = parent


def _listdir(folder: str) -> List[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(200_000)
    except OSError:
        return ""


def _config_value(path: str) -> Optional[Tuple[str, int]]:
    text = _read(path)
    if "mixed_precision" not in text:
        return None
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict) or not ({"distributed_type", "compute_environment"} & set(data)):
            return None
        value = data.get("mixed_precision")
        if not isinstance(value, str):
            return None
        line = next((i for i, t in enumerate(text.splitlines(), 1) if "mixed_precision" in t), 1)
        return value, line
    if not _ACCELERATE_KEYS.search(text):
        return None  # a training config with its own `mixed_precision` key, not accelerate's
    match = _CONFIG_KEY.search(text)
    if match is None:
        return None
    return match.group(1), text.count("\n", 0, match.start()) + 1


def _launch_value(path: str) -> Optional[Tuple[str, int]]:
    text = _read(path)
    if "mixed" not in text:
        return None
    match = _LAUNCH_FLAG.search(text)
    if match is None:
        return None
    return match.group(1), text.count("\n", 0, match.start()) + 1


def argument_files(path: str, config_files: Sequence[str]) -> List[List[str]]:
    """[file, content hash] of the JSON/YAML files of `path`'s repository that hold
    `TrainingArguments` (an `output_dir` key at the top), for a script that parses its arguments
    from such a file."""
    root = repo_root(os.path.dirname(os.path.abspath(path)))
    out: List[List[str]] = []
    for config in config_files:
        if not os.path.abspath(config).startswith(root + os.sep) or not config.endswith((".json", ".yaml", ".yml")):
            continue
        doc, digest = load(config)
        top = doc.root if doc is not None and doc.understood else None
        if isinstance(top, Mapping) and "output_dir" in top.entries:
            out.append([config, digest])
    return out
