"""Orchestrates a run: discover files, resolve each file's settings, check or fix them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, Type

from speedlint.analyzer.config import (
    ConfigError,
    Settings,
    closest,
    declared_torch_range,
    find_config_file,
    read_config_file,
    requirement_files,
    selectors_of,
)
from speedlint.analyzer.discovery import Discovery, ExcludesFor, discover, resolve_folder
from speedlint.analyzer.findings import Diagnostic, FileResult, Finding, Profile
from speedlint.analyzer.registry import SelectionError, select_codes, select_rules, validate_selectors
from speedlint.analyzer.sources import Source

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program.seeds import FileSeeds
    from speedlint.analyzer.project_scope import ProjectScope
    from speedlint.analyzer.rule import Rule


def load_config_file(path: Path) -> Settings:
    """A config file's settings, its rule selectors checked against the catalogue."""
    settings = read_config_file(path)
    try:
        validate_selectors(selectors_of(settings))
    except SelectionError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return settings


@dataclass(frozen=True)
class Overrides:
    """Command-line options that override config files."""

    select: Optional[Tuple[str, ...]] = None
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    preview: Optional[bool] = None
    unsafe_fixes: Optional[bool] = None
    target_torch_version: Optional[Tuple[int, int]] = None
    exclude: Optional[Tuple[str, ...]] = None
    extend_exclude: Tuple[str, ...] = ()
    fix_options: Tuple[Tuple[str, object], ...] = ()

    def apply(self, s: Settings) -> Settings:
        return replace(
            s,
            select=self.select if self.select is not None else s.select,
            ignore=s.ignore + self.ignore,
            extend_select=s.extend_select + self.extend_select,
            preview=self.preview if self.preview is not None else s.preview,
            unsafe_fixes=self.unsafe_fixes if self.unsafe_fixes is not None else s.unsafe_fixes,
            target_torch_version=self.target_torch_version or s.target_torch_version,
            torch_declared=s.torch_declared and not self.target_torch_version,
            exclude=self.exclude if self.exclude is not None else s.exclude,
            extend_exclude=s.extend_exclude + self.extend_exclude,
            fix_options=tuple(dict(s.fix_options, **dict(self.fix_options)).items()),
        )


class SettingsResolver:
    """The effective settings for each file: the closest config file wins, then overrides.

    With `config` set, that file is used for every file; with `isolated`, no config file at all.
    """

    def __init__(self, overrides: Overrides, config: Optional[Path] = None, isolated: bool = False) -> None:
        self.overrides = overrides
        self.config = config
        self.isolated = isolated
        self._fixed: Optional[Settings] = None
        self._by_file: Dict[Path, Settings] = {}
        self._by_folder: Dict[Path, Settings] = {}  # folder -> effective settings (one lookup per folder)
        self._config_files: Dict[Path, Optional[Path]] = {}  # folder -> its closest config file
        self._declaring: Dict[Path, Optional[Path]] = {}  # folder -> closest folder declaring requirements
        self._declared: Dict[Optional[Path], Settings] = {}  # that folder -> the settings it gives
        if config is not None:
            if not config.is_file():
                raise ConfigError(f"config file not found: {config}")
            self._fixed = overrides.apply(load_config_file(config))

    def for_directory(self, folder: Path) -> Settings:
        if self._fixed is not None:
            return self._fixed
        if self.isolated:
            return self.overrides.apply(Settings(root=str(Path.cwd())))
        folder = resolve_folder(folder)
        known = self._by_folder.get(folder)
        if known is not None:
            return known
        config = find_config_file(folder, self._config_files)
        if config is None:
            declared_in = closest(folder, _declares_requirements, self._declaring, stop=_is_checkout_root)
            if declared_in not in self._declared:
                version, below = declared_torch_range(declared_in) if declared_in is not None else (None, None)
                self._declared[declared_in] = self.overrides.apply(
                    Settings(root=str(Path.cwd()), target_torch_version=version, torch_declared=version is not None, torch_below=below)
                )
            settings = self._declared[declared_in]
        else:
            if config not in self._by_file:
                self._by_file[config] = self.overrides.apply(load_config_file(config))
            settings = self._by_file[config]
        self._by_folder[folder] = settings
        return settings

    def for_file(self, path: Path) -> Settings:
        return self.for_directory(path.parent)


def _declares_requirements(folder: Path) -> Optional[Path]:
    """The folder itself when it has a pyproject.toml or requirements*.txt (where the target
    torch version may be declared)."""
    if (folder / "pyproject.toml").is_file() or requirement_files(folder):
        return folder
    return None


def _is_checkout_root(folder: Path) -> bool:
    return (folder / ".git").exists()


_RULES_CACHE: Dict[Tuple, List[Type[Rule]]] = {}
_CODES_CACHE: Dict[Tuple, Tuple[str, ...]] = {}


def rules_for(settings: Settings) -> List[Type[Rule]]:
    key = (settings.select, settings.ignore, settings.extend_select, settings.preview)
    if key not in _RULES_CACHE:
        _RULES_CACHE[key] = select_rules(settings.select, settings.ignore, settings.extend_select, settings.preview)
    return _RULES_CACHE[key]


def codes_for(settings: Settings) -> Tuple[str, ...]:
    """The codes of the rules `settings` enable (from the catalogue: imports no rule)."""
    key = (settings.select, settings.ignore, settings.extend_select, settings.preview)
    if key not in _CODES_CACHE:
        _CODES_CACHE[key] = select_codes(settings.select, settings.ignore, settings.extend_select, settings.preview)
    return _CODES_CACHE[key]


@dataclass
class RunResult:
    files: List[FileResult] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    profile: Optional[Profile] = None

    @property
    def findings(self) -> List[Finding]:
        return [f for r in self.files for f in r.findings]

    @property
    def diagnostics(self) -> List[Diagnostic]:
        return [d for r in self.files for d in r.diagnostics]


def display_path(path: Path) -> str:
    """The path as shown: relative to cwd."""
    name = os.fspath(path)
    if not os.path.isabs(name) and ".." not in name:
        return os.path.normpath(name)  # what relpath answers, without asking for cwd
    try:
        return os.path.relpath(name)
    except ValueError:  # another drive on Windows
        return name


def excludes_for(resolver: SettingsResolver) -> ExcludesFor:
    """For discovery: the exclude patterns of the config that applies in a folder, and their root."""
    from speedlint.analyzer.discovery import exclude_patterns

    def lookup(folder: Path) -> Tuple[Tuple[str, ...], Path]:
        s = resolver.for_directory(folder)
        return exclude_patterns(s.exclude, s.extend_exclude), Path(s.root) if s.root else Path.cwd()

    return lookup


def collect_files(paths: Sequence[str], resolver: SettingsResolver, force_exclude: bool = False) -> Discovery:
    return discover(paths, force_exclude=force_exclude, excludes_for=excludes_for(resolver))


def check_paths(
    paths: Sequence[str],
    resolver: SettingsResolver,
    force_exclude: bool = False,
    profile: bool = False,
    use_cache: bool = True,
    jobs: Optional[int] = None,
) -> RunResult:
    """Check files: cached results for unchanged files, the rest in parallel (see parallel.py)."""
    from speedlint.analyzer.parallel import process_files

    found = collect_files(paths, resolver, force_exclude)
    result = RunResult(missing=found.missing, profile=Profile() if profile else None)
    files = [(path, display_path(path)) for path in found.files]
    root = cache_root(resolver) if use_cache else None
    scope = program_scope(paths, files, resolver)
    configs = collect_config_files(list(scope.roots) if scope is not None else paths, resolver)
    program_files = scope.files if scope is not None else None
    result.files, warnings = process_files(files, resolver.for_file, codes_for, root, result.profile, jobs, config_files=configs, program_files=program_files)
    result.files = group_config_results(result.files, resolver)
    for message in warnings:
        result.files.append(FileResult(str(root), diagnostics=[Diagnostic(str(root), message, "warning")]))
    return result


def program_scope(paths: Sequence[str], files: Sequence[Tuple[Path, str]], resolver: SettingsResolver) -> Optional[ProjectScope]:
    """The program around the named `files` (`project_scope`): None when they are it already."""
    from speedlint.analyzer.project_scope import project_scope

    return project_scope(paths, files, excludes_for(resolver), display_path)


def collect_config_files(paths: Sequence[str], resolver: SettingsResolver) -> List[str]:
    """The training config files beside the checked Python files (`configs.discovery`)."""
    from speedlint.analyzer.configs.discovery import discover_config_files, globs_of

    def globs_for(folder: Path) -> Tuple[Tuple[str, ...], Path]:
        s = resolver.for_directory(folder)
        return globs_of(s.config_files), Path(s.root) if s.root else Path.cwd()

    return discover_config_files([p for p in paths if p != "-"], globs_for, excludes_for(resolver))


def group_config_results(files: List[FileResult], resolver: SettingsResolver) -> List[FileResult]:
    """Findings and diagnostics on config files (reported by the Python file that reads them)
    get a result of their own, with the config file's text for snippets; its `# noqa` comments
    and `per-file-ignores` apply. The same finding from two readers is kept once."""
    from speedlint.analyzer.suppress import apply_suppressions

    by_path: Dict[str, FileResult] = {}
    out: List[FileResult] = []
    for result in files:
        moved = [f for f in result.findings if f.path != result.path]
        moved_diags = [d for d in result.diagnostics if d.path != result.path]
        if moved or moved_diags:
            result.findings = [f for f in result.findings if f.path == result.path]
            result.diagnostics = [d for d in result.diagnostics if d.path == result.path]
        out.append(result)
        for f in moved:
            target = by_path.get(f.path)
            if target is None:
                target = by_path[f.path] = FileResult(f.path, source=_read_text(f.path))
            key = (f.code, f.line, f.column, f.message)
            if all((g.code, g.line, g.column, g.message) != key for g in target.findings):
                target.findings.append(f)
        for d in moved_diags:
            target = by_path.get(d.path)
            if target is None:
                target = by_path[d.path] = FileResult(d.path, source=_read_text(d.path))
            if d not in target.diagnostics:
                target.diagnostics.append(d)
    for path, result in sorted(by_path.items()):
        settings = resolver.for_file(Path(path))
        result.findings = sorted(apply_suppressions(result.findings, result.source or "", settings, path), key=lambda f: f.sort_key())
        out.append(result)
    return out


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def cache_root(resolver: SettingsResolver) -> Path:
    """Where `.speedlint_cache/` lives (`project_root`)."""
    return project_root(resolver.config, resolver.isolated)


def project_root(config: Optional[Path], isolated: bool) -> Path:
    """The folder of the config file that applies to cwd (`--config`'s, else the closest one),
    or cwd: the `root` of cwd's settings, known before reading any of them."""
    if config is not None:
        return config.parent
    if not isolated:
        found = find_config_file(Path.cwd().resolve())
        if found is not None:
            return found.parent
    return Path.cwd()


def use_cached_catalogue(config: Optional[Path], isolated: bool) -> None:
    """Before anything selects rules: the rule catalogue remembered in the cache, if any, so
    that a run answered from the cache imports no rule (`registry.use_catalogue`)."""
    from speedlint.analyzer.cache import load_catalogue

    try:
        load_catalogue(project_root(config, isolated))
    except ConfigError:
        pass  # reported when the settings are read


def check_stdin(text: str, filename: str, resolver: SettingsResolver, use_cache: bool = True) -> RunResult:
    """Code read from stdin, checked as `filename`: with a real file name, as part of the
    program around it (`project_scope`, `buffer_program`), like the file on disk would be."""
    from speedlint.analyzer.notebook import check_notebook_text, is_notebook
    from speedlint.analyzer.engine import check_source

    settings = resolver.for_file(Path(filename))
    if is_notebook(filename):  # `--stdin-filename train.ipynb`: stdin holds the notebook's JSON
        return RunResult(files=[check_notebook_text(text, filename, rules_for(settings), settings)])
    seeds = stdin_seeds(text, filename, resolver, use_cache) if filename != "-" else None
    res = check_source(Source(text, "utf-8"), filename, rules_for(settings), settings, seeds=seeds)
    return RunResult(files=[res])


def stdin_seeds(text: str, filename: str, resolver: SettingsResolver, use_cache: bool) -> Optional[FileSeeds]:
    """The whole-program seeds of a buffer named `filename` (None when it names no project)."""
    from speedlint.analyzer.buffer_program import buffer_seeds

    path = Path(filename)
    shown = display_path(path)
    scope = program_scope([filename], [(path, shown)], resolver) if path.parent.is_dir() else None
    if scope is None:
        return None
    configs = collect_config_files(list(scope.roots), resolver)
    return buffer_seeds(text, path, shown, scope.files, configs, cache_root(resolver) if use_cache else None)
