"""Settings: `[tool.speedlint]` in pyproject.toml or a `speedlint.toml`, plus command-line overrides.

The closest config file to each checked file wins (like ruff). When `target-torch-version` is not
set, the project's declared torch requirement (pyproject dependencies, requirements*.txt) is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_FILES = ("speedlint.toml", ".speedlint.toml", "pyproject.toml")


class ConfigError(ValueError):
    """A config file or option that cannot be used: exit code 2 with this message."""


@dataclass(frozen=True)
class Settings:
    select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    per_file_ignores: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    #: None: the default excludes; a tuple replaces them (like ruff).
    exclude: Optional[Tuple[str, ...]] = None
    extend_exclude: Tuple[str, ...] = ()
    unsafe_fixes: bool = False
    preview: bool = False
    target_torch_version: Optional[Tuple[int, int]] = None
    #: `target_torch_version` is the floor of the project's declared torch requirement (`torch>=1.7`
    #: written years ago), not a version the user set: rules may still advise newer APIs.
    torch_declared: bool = False
    #: The declared requirement's upper bound (exclusive), when it has one (`torch<1.9`).
    torch_below: Optional[Tuple[int, int]] = None
    #: Folder of the config file these settings came from (patterns are relative to it).
    root: Optional[str] = None
    #: Options for fixers (e.g. accumulation_steps) given by the user.
    fix_options: Tuple[Tuple[str, Any], ...] = ()
    #: Which training config files (YAML, JSON, TOML, INI) `check` reads beside the Python files,
    #: as gitignore-style globs (None: `configs.discovery.DEFAULT_CONFIG_GLOBS`; empty: none).
    config_files: Optional[Tuple[str, ...]] = None

    def fingerprint(self) -> str:
        data = asdict(self)
        data.pop("root", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def fix_option(self, name: str, default: Any = None) -> Any:
        return dict(self.fix_options).get(name, default)


_LIST_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "config-files"}
_BOOL_KEYS = {"unsafe-fixes", "preview"}
KNOWN_KEYS = _LIST_KEYS | _BOOL_KEYS | {"per-file-ignores", "target-torch-version", "fix"}

#: Options of the `[tool.speedlint.fix]` table: name -> (type check, description).
FIX_OPTIONS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "accumulation_steps": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer"),
}


def parse_version(text: str) -> Tuple[int, int]:
    """`"2.1"`, `"2"`, `"2.1.0"`, `"2.1.0+cu121"` -> (major, minor)."""
    m = re.match(r"^\s*(\d+)(?:\.(\d+))?(?:\.\d+)?(?:(?:a|b|rc|\.post|\.dev)\d+)*(?:\+[\w.]+)?\s*$", str(text))
    if not m:
        raise ConfigError(f"invalid torch version `{text}` (expected a version like \"2.1\")")
    return int(m.group(1)), int(m.group(2) or 0)


def _unknown_key(source: str, key: str, known: Iterable[str], what: str = "speedlint settings") -> ConfigError:
    import difflib

    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean `{close[0]}`?" if close else ""
    return ConfigError(f"{source}: unknown key `{key}` in {what}{hint} (known: {', '.join(known)})")


def settings_from_table(table: Dict[str, Any], source: str, root: Optional[str]) -> Settings:
    """Validate a `[tool.speedlint]` table. Unknown keys and bad values raise ConfigError."""
    kwargs: Dict[str, Any] = {"root": root}
    for key, value in table.items():
        if key not in KNOWN_KEYS:
            raise _unknown_key(source, key, KNOWN_KEYS)
        attr = key.replace("-", "_")
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{source}: `{key}` must be a list of strings")
            kwargs[attr] = tuple(value)
        elif key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise ConfigError(f"{source}: `{key}` must be true or false")
            kwargs[attr] = value
        elif key == "per-file-ignores":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(c, str) for c in v) for k, v in value.items()
            ):
                raise ConfigError(f"{source}: `per-file-ignores` must map glob patterns to lists of codes")
            kwargs[attr] = tuple((k, tuple(v)) for k, v in value.items())
        elif key == "target-torch-version":
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise ConfigError(f"{source}: `target-torch-version` must be a quoted version string like \"2.1\"")
            try:
                kwargs[attr] = parse_version(str(value))
            except ConfigError as exc:
                raise ConfigError(f"{source}: {exc}") from None
        elif key == "fix":
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: `fix` must be a table of fixer options")
            options = []
            for name, option in value.items():
                norm = str(name).replace("-", "_")
                if norm not in FIX_OPTIONS:
                    raise _unknown_key(source, name, [k.replace("_", "-") for k in FIX_OPTIONS], "the `fix` table")
                check, expected = FIX_OPTIONS[norm]
                if not check(option):
                    raise ConfigError(f"{source}: `fix.{name}` must be {expected}")
                options.append((norm, option))
            kwargs["fix_options"] = tuple(sorted(options))
    return Settings(**kwargs)


def selectors_of(settings: Settings) -> List[str]:
    """Every rule selector a config file wrote (checked against the catalogue by the caller:
    this module knows the format, the registry knows the rules)."""
    out = [*settings.select, *settings.ignore, *settings.extend_select]
    for _, codes in settings.per_file_ignores:
        out += codes
    return out


def _read_toml(path: Path, needs: Optional[bytes] = None) -> Dict[str, Any]:
    """A TOML file's table. With `needs`, a file whose bytes lack that word cannot hold what the
    caller reads: it is not parsed (an empty table; most projects' pyproject.toml never mentions
    speedlint, and many not torch)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if needs is not None and needs not in data:
        return {}
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def read_config_file(path: Path) -> Settings:
    """A config file's settings as written (rule selectors not yet checked: `runner.load_config_file`)."""
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("speedlint", {})
    else:
        table = data
    settings = settings_from_table(table, str(path), str(path.parent))
    if settings.target_torch_version is None:
        floor, below = declared_torch_range(path.parent)
        settings = replace(settings, target_torch_version=floor, torch_declared=floor is not None, torch_below=below)
    return settings


def find_config_file(directory: Path, memo: Optional[Dict[Path, Optional[Path]]] = None) -> Optional[Path]:
    """The closest config file at or above `directory` (pyproject.toml only with [tool.speedlint]).

    With `memo` (one run's), each folder is looked at once: the answers for the folders walked
    through are remembered."""
    return closest(directory, config_file_in, memo)


def config_file_in(folder: Path) -> Optional[Path]:
    """The config file of this very folder, if any."""
    for name in CONFIG_FILES:
        candidate = folder / name
        if candidate.is_file():
            if name == "pyproject.toml":
                try:
                    if "speedlint" not in _read_toml(candidate, b"speedlint").get("tool", {}):
                        continue
                except ConfigError:
                    # A broken pyproject.toml is only our problem when it configures speedlint.
                    try:
                        mentions = "tool.speedlint" in candidate.read_text(encoding="utf-8", errors="replace")
                    except OSError:
                        mentions = False
                    if mentions:
                        raise
                    continue
            return candidate
    return None


_T = TypeVar("_T")


def closest(
    directory: Path,
    find: Callable[[Path], Optional[_T]],
    memo: Optional[Dict[Path, Optional[_T]]] = None,
    stop: Optional[Callable[[Path], bool]] = None,
) -> Optional[_T]:
    """What `find` answers for the closest folder at or above `directory` where it answers
    something, going no higher than a folder `stop` accepts; folders answered before come from
    `memo` (and every folder walked through is added to it)."""
    walked: List[Path] = []
    found: Optional[_T] = None
    folder = directory
    while True:
        if memo is not None and folder in memo:
            found = memo[folder]
            break
        walked.append(folder)
        found = find(folder)
        if found is not None or (stop is not None and stop(folder)):
            break
        parent = folder.parent
        if parent == folder:
            break
        folder = parent
    if memo is not None:
        for folder in walked:
            memo[folder] = found
    return found


_TORCH_REQ = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?P<spec>[^;#]*)", re.I)


def _max_version(spec: str) -> Optional[Tuple[int, int]]:
    """The lowest upper bound (exclusive) a requirement specifier puts on torch: `<1.9` -> 1.9,
    `<=1.8` -> 1.9 (None when unbounded above)."""
    highs = []
    for part in spec.split(","):
        m = re.match(r"\s*(<=|<|==)\s*(\d+)(?:\.(\d+))?", part)
        if m:
            major, minor = int(m.group(2)), int(m.group(3) or 0)
            highs.append((major, minor + 1) if m.group(1) in ("<=", "==") else (major, minor))
    return min(highs) if highs else None


def _min_version(spec: str) -> Optional[Tuple[int, int]]:
    """The lowest torch version a requirement specifier admits (None when unbounded below)."""
    lows = []
    for part in spec.split(","):
        part = part.strip()
        m = re.match(r"(==|>=|~=|>|===)\s*(\d+(?:\.\d+)?)", part)
        if m:
            lows.append(parse_version(m.group(2)))
            continue
        m = re.match(r"(<|<=)\s*(\d+)(?:\.(\d+))?", part)
        if m and int(m.group(2)) <= 2 and (m.group(1) == "<" and (m.group(3) in (None, "0"))):
            lows.append((int(m.group(2)) - 1, 0))
    return min(lows) if lows else None


def requirement_files(folder: Path) -> List[Path]:
    """The folder's requirements*.txt files, sorted."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [folder / n for n in sorted(names) if n.startswith("requirements") and n.endswith(".txt")]


def declared_torch_version(root: Path) -> Optional[Tuple[int, int]]:
    """The lowest torch version the project at `root` declares support for, if it says."""
    return declared_torch_range(root)[0]


def declared_torch_range(root: Path) -> Tuple[Optional[Tuple[int, int]], Optional[Tuple[int, int]]]:
    """(lowest version admitted, upper bound) of the project's declared torch requirement."""
    specs = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = _read_toml(pyproject, b"torch")
        except ConfigError:
            data = {}
        project = data.get("project", {})
        deps = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            deps += list(extra)
        specs += [d for d in deps if isinstance(d, str)]
    for req in requirement_files(root):
        try:
            specs += req.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    found, bounds = [], []
    for line in specs:
        m = _TORCH_REQ.match(line)
        if m and not re.match(r"^\s*torch[a-z_-]", line, re.I):
            v = _min_version(m.group("spec"))
            if v is not None:
                found.append(v)
            b = _max_version(m.group("spec"))
            if b is not None:
                bounds.append(b)
    return (min(found) if found else None), (min(bounds) if bounds else None)
