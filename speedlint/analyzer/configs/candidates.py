"""The config files a required `--config` option may name.

`parser.add_argument("--config", required=True)` (or a positional `config`) with `cfg =
yaml.safe_load(open(args.config))`: the code reads whichever file the command line names, and
the repository holds the files it is run with. The candidates are the config files of the run
(`configs.discovery`) under the script's folder, with the extension the loader reads (YAML for
`yaml.safe_load` and `OmegaConf.load`, JSON for `json.load`, ...), leaving out files that are
not training configs (CI, packaging, environments, hidden folders). Each candidate is read as a
source of its own: a value all of them share is known (and reported on its line in each file);
a key whose value differs between them, or that one of them lacks, is not known.

More than `MAX_CANDIDATES` files: none (no guess).
"""

from __future__ import annotations

import os
from typing import FrozenSet, List

MAX_CANDIDATES = 8  # (a name holds at most 8 config references: `configs.flow`)

#: The file extensions each loader format reads.
_EXTENSIONS = {
    "yaml": (".yaml", ".yml"),
    "json": (".json",),
    "toml": (".toml",),
    "ini": (".ini", ".cfg", ".conf"),
}

#: Files that are never a training run's config.
_NOT_CONFIGS = frozenset({
    "environment.yml", "environment.yaml", "mkdocs.yml", "mkdocs.yaml", "docker-compose.yml",
    "docker-compose.yaml", "codecov.yml", "codecov.yaml", "pyproject.toml", "setup.cfg", "tox.ini",
    "package.json", "package-lock.json", "tsconfig.json", "citation.cff", "meta.yaml", "readthedocs.yml",
    "requirements.yaml", "pytest.ini", "mypy.ini", "pre-commit-config.yaml",
})
_NOT_CONFIG_FOLDERS = frozenset({"docs", "doc", "tests", "test", "node_modules", "site-packages", "conda", "recipe"})


def candidate_files(script: str, fmt: str, known: FrozenSet[str]) -> List[str]:
    """The config files (absolute, sorted) a required config option of `script` (absolute) may
    name, among `known` (the run's config files), for a loader of format `fmt`."""
    extensions = _EXTENSIONS.get(fmt)
    if not extensions:
        return []
    folder = os.path.dirname(script)
    prefix = folder.rstrip(os.sep) + os.sep
    out: List[str] = []
    for path in sorted(known):
        if not path.startswith(prefix) or not path.lower().endswith(extensions):
            continue
        parts = path[len(prefix):].split(os.sep)
        if parts[-1].lower().lstrip(".") in _NOT_CONFIGS or any(p.startswith(".") or p.lower() in _NOT_CONFIG_FOLDERS for p in parts):
            continue
        out.append(path)
    return out if len(out) <= MAX_CANDIDATES else []
