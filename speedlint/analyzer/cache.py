"""The result cache: an unchanged file under unchanged settings is never analysed twice.

Layout (like ruff's): `<project root>/.speedlint_cache/` holds a `.gitignore` containing `*` (so
the folder never shows up in `git status`), a `CACHEDIR.TAG`, and one JSON file per *bucket*.
A bucket is keyed by

* the speedlint version and a fingerprint of its own code (so editing a rule during development
  never serves stale results),
* the effective settings (`Settings.fingerprint()` plus the settings root),
* the enabled rules (their codes),

and maps each file (absolute path) to the hash of its bytes and its results: findings with
their fix reduced to a `FixSummary` (title, applicability, edits: what the reports use) and
diagnostics (a file that fails to parse is cached as its diagnostic). Internal errors are never
cached.

Writes are atomic (a temporary file in the same folder, then `os.replace`). Two runs that race
each read the bucket, merge their own entries over what is on disk at the time they save, and
replace the file: a reader always sees a complete file, and the worst a race can do is drop some
entries (they are recomputed next time). A bucket that cannot be read or decoded is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from speedlint import __version__
from speedlint.analyzer.findings import (
    Applicability,
    Diagnostic,
    Edit,
    Finding,
    FixSummary,
    Impact,
    ImportSpec,
    Status,
)
from speedlint.analyzer.program.schema import SUMMARY_FORMAT
from speedlint.analyzer.program.seeds import FileSeeds

CACHE_DIR_NAME = ".speedlint_cache"
FORMAT = 1
_GITIGNORE = "# Automatically created by speedlint.\n*\n"
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by speedlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """speedlint's version plus the size and mtime of each of its own modules (cheap: stats only)."""
    import speedlint

    root = Path(speedlint.__file__).resolve().parent
    h = hashlib.blake2b(f"{__version__}/{FORMAT}".encode(), digest_size=16)
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                p = os.path.join(folder, name)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                h.update(f"{os.path.relpath(p, root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def bucket_key(settings_fingerprint: str, settings_root: Optional[str], rule_codes: Sequence[str]) -> str:
    text = json.dumps([code_fingerprint(), settings_fingerprint, settings_root or "", sorted(rule_codes)])
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


# -- (de)serialisation ---------------------------------------------------------------------------
def _impact_json(i: Impact) -> List[Any]:
    return [i.wastes, i.when, i.typical, i.evidence, i.level]


def _impact_load(v: List[Any]) -> Impact:
    return Impact(v[0], v[1], v[2], v[3], v[4])


def finding_to_json(f: Finding) -> List[Any]:
    fix = None
    if f.fix is not None:
        s = FixSummary.of(f.fix)
        fix = [s.title, s.applicability.value, s.applicable, [[i.module, i.obj] for i in s.imports]]
    edits = [[e.line, e.column, e.end_line, e.end_column, e.content] for e in f.edits]
    related = [list(r) for r in f.related]
    return [f.code, f.name, f.message, f.line, f.column, f.end_line, f.end_column, _impact_json(f.impact), fix, edits, f.status.value, related, f.cell, f.cell_offset]


#: Where a cached finding keeps its file when that is not the checked one (after `finding_to_json`'s fields).
_ELSEWHERE = 14


def _elsewhere(path: str, abspath: str) -> Optional[str]:
    """The absolute path of a finding's file when it is not the checked file (a config file the
    code reads), else None."""
    full = os.path.abspath(path)
    return full if full != abspath else None


def _shown(full: Optional[str], shown: str) -> str:
    if full is None:
        return shown
    try:
        return os.path.relpath(full)
    except ValueError:  # another drive on Windows
        return full


def finding_from_json(v: List[Any], path: str) -> Finding:
    fix = None
    if v[8] is not None:
        t, a, ok, imports = v[8]
        fix = FixSummary(t, Applicability(a), bool(ok), tuple(ImportSpec(m, o) for m, o in imports))
    return Finding(
        code=v[0],
        name=v[1],
        message=v[2],
        path=path,
        line=v[3],
        column=v[4],
        end_line=v[5],
        end_column=v[6],
        impact=_impact_load(v[7]),
        fix=fix,
        edits=tuple(Edit(*e) for e in v[9]),
        status=Status(v[10]),
        related=tuple(_hop_load(r) for r in (v[11] if len(v) > 11 else ())),
        cell=int(v[12]) if len(v) > 12 and v[12] is not None else None,
        cell_offset=int(v[13]) if len(v) > 13 else 0,
    )


def _hop_load(r: List[Any]) -> Tuple[Any, ...]:
    """A call site of `Finding.related`: (path, line, call), and the cell in a notebook."""
    hop = (str(r[0]), int(r[1]), str(r[2]))
    return hop + (int(r[3]),) if len(r) > 3 and r[3] is not None else hop


class CachedResult:
    """What a bucket holds for one file."""

    __slots__ = ("findings", "diagnostics", "parsed")

    def __init__(self, findings: List[Finding], diagnostics: List[Diagnostic], parsed: bool) -> None:
        self.findings = findings
        self.diagnostics = diagnostics
        self.parsed = parsed


class Bucket:
    """One (version, settings, rules) partition of the cache, loaded on first use."""

    def __init__(self, cache: "ResultCache", key: str) -> None:
        self.cache = cache
        self.key = key
        self.path = cache.directory / f"results-{key}.json"
        self._entries: Optional[Dict[str, List[Any]]] = None
        self._new: Dict[str, List[Any]] = {}

    @property
    def entries(self) -> Dict[str, List[Any]]:
        if self._entries is None:
            self._entries = _read_bucket(self.path)
        return self._entries

    def get(self, abspath: str, digest: str, shown: str) -> Optional[CachedResult]:
        entry = self._new.get(abspath) or self.entries.get(abspath)
        if entry is None or entry[0] != digest:
            return None
        try:
            findings = [finding_from_json(v, _shown(v[_ELSEWHERE] if len(v) > _ELSEWHERE else None, shown)) for v in entry[1]]
            diagnostics = [Diagnostic(_shown(d[2] if len(d) > 2 else None, shown), d[0], d[1]) for d in entry[2]]
            return CachedResult(findings, diagnostics, bool(entry[3]))
        except (TypeError, ValueError, IndexError, KeyError):
            return None  # an entry from an incompatible writer: recompute

    def put(self, abspath: str, digest: str, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], parsed: bool) -> None:
        if any(d.kind == "internal-error" for d in diagnostics):
            return
        self._new[abspath] = [
            digest,
            [finding_to_json(f) + ([full] if (full := _elsewhere(f.path, abspath)) else []) for f in findings],
            [[d.message, d.kind] + ([full] if (full := _elsewhere(d.path, abspath)) else []) for d in diagnostics],
            parsed,
        ]

    def save(self) -> None:
        if not self._new:
            return
        self.cache.ensure_directory()
        merged = _read_bucket(self.path)  # what another run may have written meanwhile
        merged.update(self._new)
        data = json.dumps({"format": FORMAT, "entries": merged}, separators=(",", ":"))
        _write_atomic(self.path, data.encode("utf-8"))
        self._entries = merged
        self._new = {}


def _read_bucket(path: Path) -> Dict[str, Any]:  # a bucket's entries are lists, the summaries' JSON texts
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("entries"), dict):
        return {}
    return doc["entries"]


def _write_atomic(path: Path, data: Union[bytes, Iterable[str]]) -> None:
    """Write `data` (bytes, or text in parts: a large document is never one string) to a
    temporary file beside `path`, then put it in place: a reader sees the old file or the new."""
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, bytes):
                fh.write(data)
            else:
                for part in data:
                    fh.write(part.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class SummaryStore:
    """Per-file summaries for the whole-program model (`speedlint.analyzer.program`), keyed by
    content hash alone: a file's summary does not depend on settings, rules or where it lies.
    Each entry is kept as its JSON text and decoded (into the compact form) when asked for: a
    run that needs a few summaries does not build all of them. The summary format
    (`program.schema.SUMMARY_FORMAT`) names the file, and an entry of another format is not
    used (the file is summarised again): a format change invalidates old caches cleanly."""

    def __init__(self, cache: "ResultCache") -> None:
        self.cache = cache
        self.path = cache.directory / f"summaries-v{SUMMARY_FORMAT}-{code_fingerprint()[:16]}.json"
        self._entries: Optional[Dict[str, Any]] = None
        self._new: Dict[str, Any] = {}
        self._shared: Dict[Any, Any] = {}  # equal parts of the summaries read are one object

    def get(self, digest: str) -> Optional[Any]:
        from speedlint.analyzer.program.summary import compact

        got = self._new.get(digest)
        if got is not None:
            return got
        if self._entries is None:
            self._entries = _read_bucket(self.path)
        raw = self._entries.get(digest)
        if raw is None:
            return None
        try:
            summary = json.loads(raw) if isinstance(raw, str) else raw
            if summary.get("format") != SUMMARY_FORMAT:
                return None  # another format: the file is summarised again
            return compact(summary, self._shared)
        except (ValueError, TypeError, AttributeError, RecursionError):
            return None  # a damaged entry: the file is summarised again

    def put(self, digest: str, summary: Any) -> None:
        self._new[digest] = summary

    def save(self) -> None:
        """Merge the new entries into the file (with what another run may have written
        meanwhile), one entry at a time: the summaries of a big tree are 70 MB of JSON."""
        if not self._new:
            return
        self.cache.ensure_directory()
        old = _read_bucket(self.path)
        new = self._new

        def parts() -> Iterable[str]:
            yield f'{{"format":{json.dumps(FORMAT)},"entries":{{'
            sep = ""
            for key, text in old.items():
                if key not in new:
                    yield f"{sep}{json.dumps(key)}:{json.dumps(text, separators=(',', ':'))}"
                    sep = ","
            for key, summary in new.items():
                yield f"{sep}{json.dumps(key)}:{json.dumps(json.dumps(summary, separators=(',', ':')))}"
                sep = ","
            yield "}}"

        _write_atomic(self.path, parts())
        self._entries = None  # read again if asked
        self._new = {}


class ResultCache:
    """The cache folder of one project root; hands out buckets per settings."""

    _program: Optional[Tuple[str, Dict[str, Any]]]  # set by `save_program` (absent until then)

    def __init__(self, root: Path) -> None:
        self.directory = Path(root) / CACHE_DIR_NAME
        self._buckets: Dict[str, Bucket] = {}
        self.summaries = SummaryStore(self)
        self.hits = 0
        self.misses = 0

    def bucket(self, settings_fingerprint: str, settings_root: Optional[str], rule_codes: Sequence[str]) -> Bucket:
        key = bucket_key(settings_fingerprint, settings_root, rule_codes)
        if key not in self._buckets:
            self._buckets[key] = Bucket(self, key)
        return self._buckets[key]

    # -- the linked program: one file per tree state, the latest only ----------------------------
    def load_program(self, key: str) -> "Optional[Dict[str, Any]]":
        """The seeds of the last link of exactly this tree (`parallel._program_key`), if cached."""
        try:
            with open(self.directory / f"program-{key}.json", "rb") as fh:
                doc = json.loads(fh.read())
            if doc.get("format") != FORMAT:
                return None
            digests = doc.get("digests", {})
            seeds = {}
            for shown, v in doc["seeds"].items():
                seeds[shown] = FileSeeds.from_json(v)
                seeds[shown].known_digest = digests.get(shown)
            return seeds
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return None

    def save_program(self, key: str, seeds: "Dict[str, Any]") -> None:
        """Keep this link's seeds (replacing the previous one: only the latest tree state is useful)."""
        self._program = (key, seeds)

    def save_program_now(self) -> None:
        """Write the seeds kept by `save_program` now (a child process that linked the program)."""
        self._save_program()
        self._program = None

    def _save_program(self) -> None:
        program = getattr(self, "_program", None)
        if program is None:
            return
        key, seeds = program
        self.ensure_directory()
        data = json.dumps(
            {"format": FORMAT, "seeds": {k: s.to_json() for k, s in seeds.items()}, "digests": {k: s.digest() for k, s in seeds.items()}},
            separators=(",", ":"),
        )
        target = self.directory / f"program-{key}.json"
        _write_atomic(target, data.encode("utf-8"))
        for old in self.directory.glob("program-*.json"):
            if old != target:
                try:
                    old.unlink()
                except OSError:
                    pass
        self._program = None

    def ensure_directory(self) -> None:
        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
            target = d / name
            if not target.exists():
                try:
                    _write_atomic(target, text.encode("utf-8"))
                except OSError:
                    pass

    def save(self) -> List[str]:
        """Write every changed bucket; returns warnings (an unwritable cache is not an error)."""
        warnings: List[str] = []
        stores: List[Union[Bucket, SummaryStore]] = [*self._buckets.values(), self.summaries]
        for bucket in stores:
            try:
                bucket.save()
            except OSError as exc:
                warnings.append(f"cannot write the cache in {self.directory}: {exc.strerror or exc}")
                return warnings
        try:
            self._save_program()
            if self.directory.is_dir():
                _save_catalogue(self.directory)
        except OSError as exc:
            warnings.append(f"cannot write the cache in {self.directory}: {exc.strerror or exc}")
        return warnings


# -- the rule catalogue, remembered for runs that import no rule -----------------------------------
def _catalogue_path(directory: Path) -> Path:
    return directory / f"catalogue-{code_fingerprint()[:16]}.json"


def load_catalogue(root: Path) -> bool:
    """Give the registry the rule catalogue that a run of this very code (same fingerprint)
    remembered under `root`, so that selecting rules imports none; whether there was one."""
    from speedlint.analyzer.registry import RuleInfo, use_catalogue

    try:
        with open(_catalogue_path(Path(root) / CACHE_DIR_NAME), "rb") as fh:
            doc = json.loads(fh.read())
        if doc.get("format") != FORMAT:
            return False
        infos = [RuleInfo.from_json(v) for v in doc["rules"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return False
    use_catalogue(infos)
    return True


def _save_catalogue(directory: Path) -> None:
    """Remember the catalogue when this process read it from the rules and none is remembered."""
    from speedlint.analyzer.registry import imported_catalogue

    target = _catalogue_path(directory)
    infos = imported_catalogue()
    if infos is None or target.exists():
        return
    data = json.dumps({"format": FORMAT, "rules": [i.to_json() for i in infos]}, separators=(",", ":"))
    _write_atomic(target, data.encode("utf-8"))
    for old in directory.glob("catalogue-*.json"):
        if old != target:
            try:
                old.unlink()
            except OSError:
                pass


def clean(root: Path) -> Tuple[bool, Path]:
    """Remove `<root>/.speedlint_cache`; returns (removed?, the folder)."""
    folder = Path(root) / CACHE_DIR_NAME
    if not folder.is_dir():
        return False, folder
    shutil.rmtree(folder)
    return True, folder
