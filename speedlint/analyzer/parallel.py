"""Checking (or fixing) many files: program phase, cache look-up, then the files left, in parallel.

The parent process reads each file once, hashes its bytes, and answers it from the cache when it
can (without a cache, `--no-cache`, there is nothing to look up: it reads nothing). The files
left are analysed by whoever analyses them, each read, decoded and run through the text
pre-filter there (a file none of the enabled rules could fire on is done: never parsed):
in-process for a handful (start-up would dominate), else in a pool of worker processes (`fork`
where the platform has it, so the workers inherit the already-imported rules; nothing heavy is
imported, never torch).

`process_files` runs a `CheckWork` on each file: checking by default; `speedlint fix` passes
`fixdriver.FixWork` (fix in the worker, write in the parent), so both commands share the program
phase, the cache look-up, the pool, its fallback when a worker dies, and the ordering.

Results are identical to a serial run and come back in discovery order: each file has its slot,
whatever order the workers finish in. The parent keeps no texts (its memory stays flat); workers
send back findings with their fix reduced to a `FixSummary`.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Type, Union

from speedlint.analyzer.config import Settings
from speedlint.analyzer.findings import Diagnostic, FileResult, Profile
from speedlint.analyzer.notebook import NOTEBOOK_SUFFIX, checked_text, locate_chains
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.sources import SourceError, read_source

if TYPE_CHECKING:  # pragma: no cover
    from multiprocessing.context import ForkContext, SpawnContext

    from speedlint.analyzer.cache import Bucket, CachedResult, ResultCache
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.rule import Rule

    #: `_summarize_and_link`'s arguments, all but the profile
    _LinkArgs = Tuple[
        Sequence[Tuple[Path, str]], Optional[ResultCache], int, Optional[Sequence[Tuple[str, ...]]], Sequence[str], Dict[int, str], str
    ]

#: The files that take part in the whole-program model: modules and notebooks.
_PROGRAM_SUFFIXES = (".py", NOTEBOOK_SUFFIX)

#: Below either threshold the files are analysed in-process: a pool would cost more than it saves.
MIN_PARALLEL_FILES = 16
MIN_PARALLEL_BYTES = 256 * 1024
_WORKER_GC = (50_000, 50, 100)  # the cyclic collector's thresholds while parsing (see `_init_worker`)
#: From this many files on, the program phase runs in a child process (`_link_apart`).
MIN_LINK_APART_FILES = 256


@dataclass
class Job:
    index: int
    path: str  # file system path
    shown: str  # display path
    settings: Settings
    codes: Tuple[str, ...]  # the enabled rules
    size: int
    seeds: Optional[FileSeeds] = None  # what the whole program says about this file
    hint: Optional[Tuple[str, ...]] = None  # the rules its pre-look left (already decided), if known
    digest: Optional[str] = None  # the hash of the text `hint` was decided on (a changed file is looked at anew)
    valid: bool = False  # `ast` parsed the text of that hash (the program phase's summary)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        read_source(path)  # raises SourceError with the message the user sees
        raise


# -- analysing one file (parent or worker) --------------------------------------------------------
_RULES_BY_CODE: Dict[str, Type[Rule]] = {}


def rules_by_code(codes: Sequence[str]) -> List[Type[Rule]]:
    if not _RULES_BY_CODE:
        from speedlint.analyzer.registry import all_rules

        _RULES_BY_CODE.update((r.code, r) for r in all_rules())
    return [_RULES_BY_CODE[c] for c in codes]


def analyze_job(job: Job, profile: Optional[Profile]) -> Tuple[FileResult, Optional[str]]:
    """Analyse one file; returns its result (portable findings) and the hash of what was read.

    Never raises: an unreadable file or a crash in a rule becomes a diagnostic for that file.
    """
    from speedlint.analyzer.cache import content_hash
    from speedlint.analyzer.engine import analyze_text
    from speedlint.analyzer.suppress import apply_suppressions

    digest = None
    t = time.perf_counter()
    try:
        data = read_bytes(job.path)
        digest = content_hash(data)
        text, notebook = checked_text(data, job.path)
    except SourceError as exc:
        return FileResult(job.shown, diagnostics=[Diagnostic(job.shown, str(exc))]), digest
    finally:
        if profile is not None:
            profile.add("read", time.perf_counter() - t)
    try:
        same = digest == job.digest
        enabled = rules_by_code(job.hint) if job.hint is not None and same else None
        analysis = analyze_text(text, job.shown, rules_by_code(job.codes), job.settings, profile, seeds=job.seeds, enabled=enabled, valid=job.valid and same)
        t = time.perf_counter()
        findings = [f.portable() for f in apply_suppressions(analysis.findings, text, job.settings, job.shown)]
        if profile is not None and analysis.findings:
            profile.add("suppressions", time.perf_counter() - t)
        diagnostics = analysis.diagnostics + config_diagnostics(job.shown, job.seeds, analysis.ctx)
        if notebook is not None:  # positions in cells; the cells skipped for a syntax error
            findings, diagnostics = notebook.locate(findings, diagnostics, job.shown)
    except Exception as exc:  # a bug in a rule must not stop the run, nor hide the other files
        return FileResult(job.shown, diagnostics=[Diagnostic(job.shown, f"internal error while analysing: {exc!r}; please report this bug", "internal-error")]), digest
    result = FileResult(job.shown, findings, diagnostics, text if findings else None, analysis.ctx is not None)
    if analysis.ctx is not None:
        # The per-file caches on the context (data flow, loader facts ...) refer back to it: drop
        # them so the trees are freed now, by reference counting, not at the next full collection.
        analysis.ctx.__dict__.clear()
    return result, digest


def config_diagnostics(shown: str, seeds: Optional[FileSeeds], ctx: Optional[FileContext]) -> List[Diagnostic]:
    """Warnings about the config files a file reads: a file that does not exist, one that cannot
    be read, a value of the wrong type (`configs`, `providers.configs`)."""
    from speedlint.analyzer.providers.configs import display_path

    out: List[Diagnostic] = []
    if seeds is not None:
        for path, line, message in seeds.project.get("config_problems", ()):
            where = display_path(path) if path else shown
            out.append(Diagnostic(where, f"line {line}: {message}" if not path else message, "warning"))
    if ctx is not None:
        for path, message in ctx.config_problems():
            out.append(Diagnostic(display_path(path), message, "warning"))
    unique: List[Diagnostic] = []
    for d in out:
        if d not in unique:
            unique.append(d)
    return unique


def _init_worker() -> None:
    """A forked worker: the inherited objects (imported modules, rules) never become garbage, so
    the cyclic collector need not walk them again and again (`gc.freeze`), and it runs less often
    (parsing allocates hundreds of thousands of objects per file; the trees are freed by
    reference counting, see `analyze_job`). About 13% less CPU on large files."""
    gc.freeze()
    gc.set_threshold(*_WORKER_GC)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """A worker's collector (`_init_worker`) for a while in this process: what exists now is
    set aside (`gc.freeze`: the summaries and seeds already made, which the collector would
    otherwise walk on every full collection) and collections are rarer (summarising and
    parsing allocate much and free it by reference counting). On the library corpus with
    `--jobs 1` (everything in this process): 102 -> 75 s."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*_WORKER_GC)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _work(jobs: List[Job], profiling: bool, work: "CheckWork") -> Tuple[List[Tuple[int, Any, Optional[str]]], Optional[Profile]]:
    """The worker's task: a chunk of files."""
    profile = Profile() if profiling else None
    out = []
    for job in jobs:
        result, digest = work.run(job, profile)
        out.append((job.index, result, digest))
        if job.size >= _BIG_FILE:
            _give_back_memory()
    return out, profile


#: After a file this big a worker frees its garbage and hands the memory back (`_give_back_memory`).
_BIG_FILE = 64 * 1024
_TRIM: List[Any] = []  # the C library's `malloc_trim`, once looked up (None where there is none)


def _give_back_memory() -> None:
    """Free what analysing (or fixing) a big file left: its cyclic garbage, which the worker's
    rare collections (`_WORKER_GC`) would keep for long, and the C heap's free pages, which would
    stay with the process. Without it a worker's memory only grows: its high-water mark is
    reached on its biggest file (they come first), then fragmentation adds to it (`fix` on the
    library corpus: 150 -> 200 MiB per worker; with it the workers fall back to about 75-110
    MiB after each big file). About 10 ms per big file."""
    gc.collect()
    if not _TRIM:
        try:
            import ctypes

            _TRIM.append(ctypes.CDLL(None).malloc_trim)  # glibc
        except (OSError, AttributeError, TypeError):  # none (macOS, musl; Windows has no CDLL(None))
            _TRIM.append(None)
    if _TRIM[0] is not None:
        _TRIM[0](0)


def _summarize(items: List[Tuple[int, str, Tuple[str, ...]]]) -> List[Tuple[int, Optional[str], Any, Optional[Tuple[str, ...]]]]:
    """The worker's task for the whole-program model: per file (index, content hash, summary,
    the enabled rules that survive the pre-filter and pre-look), from one `ast` parse."""
    from speedlint.analyzer.cache import content_hash
    from speedlint.analyzer.engine import summarize_and_prelook

    out: List[Tuple[int, Optional[str], Any, Optional[Tuple[str, ...]]]] = []
    shared: Dict[Any, Any] = {}  # equal parts of these files' summaries are one object
    for index, path, codes in items:
        try:
            data = read_bytes(path)
            text, notebook = checked_text(data, path)
        except (SourceError, OSError):
            out.append((index, None, None, None))
            continue
        try:
            summary, enabled = summarize_and_prelook(text, rules_by_code(codes), shared)
        except Exception:  # a bug here must not stop the run: the file is analysed as before
            summary, enabled = None, None
        if notebook is not None:
            if summary is not None:
                summary["cells"] = notebook.line_table()  # to place chains through it in cells
            if notebook.problems:
                enabled = None  # its skipped cells are reported by the analysis
        out.append((index, content_hash(data), summary, tuple(r.code for r in enabled) if enabled is not None else None))
    return out


def _summarize_together(parts: List[List[Tuple[int, str, Tuple[str, ...]]]], workers: int) -> List[Tuple[int, Optional[str], Any, Optional[Tuple[str, ...]]]]:
    """`_summarize` of every part, by this process and `workers - 1` forked ones: one process
    fewer holding its own copy of the imported modules and of the summaries it sends (the
    summaries all end up here anyway). Two parts wait in the pool per worker, so that a worker
    never waits while this process summarises one."""
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    queue = deque(p for p in parts if p)
    done: List[Tuple[int, Optional[str], Any, Optional[Tuple[str, ...]]]] = []
    pending: Set["Future[Any]"] = set()
    helpers = max(1, workers - 1)
    with _fewer_collections(), ProcessPoolExecutor(max_workers=helpers, mp_context=_context(), initializer=_init_worker) as pool:
        while queue or pending:
            while queue and len(pending) < 2 * helpers:
                pending.add(pool.submit(_summarize, queue.popleft()))
            if queue:
                done.extend(_summarize(queue.popleft()))
                finished = {f for f in pending if f.done()}
            else:
                finished = wait(pending, return_when=FIRST_COMPLETED).done
            for future in finished:
                done.extend(future.result())
            pending -= finished
    return done


@dataclass
class ProgramFacts:
    """What the program phase learnt, by index in the run's files."""

    seeds: Dict[int, FileSeeds]  # the files the program makes hot
    hints: Dict[int, Tuple[str, ...]]  # files summarised now: the rules their pre-look leaves
    digests: Dict[int, str]  # the content hash of each file read (the text seeds and hints come from)
    #: the files whose text (of that hash) `ast` parsed: their summary exists
    parsed: Set[int] = field(default_factory=set)


def program_seeds(
    files: Sequence[Tuple[Path, str]],
    cache: Optional["ResultCache"],
    workers: int,
    profile: Optional[Profile] = None,
    codes: Optional[Sequence[Tuple[str, ...]]] = None,
    config_files: Sequence[str] = (),
) -> ProgramFacts:
    """Link the whole program (`speedlint.analyzer.program`): each file's summary (from the cache
    by content hash, else computed in the pool), then hotness along the call graph. Returns the
    seeds of the files the program makes hot, by index in `files`, for the files summarised now
    the rules (of `codes`, each file's enabled rules) that their pre-look leaves, and the content
    hash of every file read (with a cache, the parent reads and hashes every file, once)."""
    from speedlint.analyzer.cache import content_hash

    t = time.perf_counter()
    digests: Dict[int, str] = {}
    key = ""
    if cache is not None:  # an unchanged program: its link is answered from the cache too
        for index, (path, _) in enumerate(files):
            if path.suffix in _PROGRAM_SUFFIXES:
                try:
                    digests[index] = content_hash(read_bytes(str(path)))
                except (SourceError, OSError):
                    continue
        key = _program_key(files, digests, config_files)
        linked = cache.load_program(key)
        if linked is not None:
            index_of = {shown: i for i, (_, shown) in enumerate(files)}
            if profile is not None:
                profile.add("program link", time.perf_counter() - t)
            return ProgramFacts({index_of[shown]: s for shown, s in linked.items() if shown in index_of}, {}, digests)
    args = (files, cache, workers, codes, config_files, digests, key)
    if _link_apart(files, workers):
        got = _in_child(args, profile)
        if got is not None:
            return got
    return _summarize_and_link(*args, profile)


def program_of(
    files: Sequence[Tuple[Path, str]],
    program_files: Optional[Sequence[Tuple[Path, str]]],
    cache: Optional["ResultCache"],
    workers: int,
    profile: Optional[Profile] = None,
    codes: Optional[Sequence[Tuple[str, ...]]] = None,
    config_files: Sequence[str] = (),
) -> ProgramFacts:
    """`program_seeds` of `files`, linked as part of `program_files` (which holds them, by
    display path) when given: the facts come back by index in `files`. The files not in the run
    are only summarised (no rules: their pre-look has nothing to decide)."""
    if program_files is None:
        return program_seeds(files, cache, workers, profile, codes, config_files)
    run_index = {shown: i for i, (_, shown) in enumerate(files)}
    where = [run_index.get(shown) for _, shown in program_files]
    wide_codes = [codes[i] if codes is not None and i is not None else () for i in where] if codes is not None else None
    got = program_seeds(program_files, cache, workers, profile, wide_codes, config_files)

    def mine(by_index: Dict[int, Any]) -> Dict[int, Any]:
        return {w: v for i, v in by_index.items() if (w := where[i]) is not None}

    parsed = {w for i in got.parsed if (w := where[i]) is not None}
    return ProgramFacts(mine(got.seeds), mine(got.hints), mine(got.digests), parsed)


def _link_apart(files: Sequence[Tuple[Path, str]], workers: int) -> bool:
    """Whether to summarise and link in a child process: a large tree (the summaries of every
    file weigh about 8x its source, and the memory they leave behind stays with the process that
    held them: the rule workers forked after would start that large), with workers allowed."""
    return workers > 1 and len(files) >= MIN_LINK_APART_FILES and _context().get_start_method() == "fork"


def _in_child(args: "_LinkArgs", profile: Optional[Profile]) -> Optional[ProgramFacts]:
    """`_summarize_and_link(*args)` in a forked child, which sends the result back through a
    pipe and gives the memory it used back to the system when it exits; None when the child
    fails (the caller then does the work itself)."""
    ctx = _context()
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            mine = Profile() if profile is not None else None
            result = _summarize_and_link(*args, mine)
            cache = args[1]
            if cache is not None:  # what the child learnt, saved by the child
                cache.summaries.save()
                cache.save_program_now()
            send.send(("ok", result, mine))
        except BaseException as exc:  # noqa: B036 - any failure: the parent does the work itself
            send.send(("error", repr(exc), None))

    proc = ctx.Process(target=child)
    proc.start()
    send.close()
    try:
        status, result, spent = receive.recv()
    except (EOFError, OSError):
        status, result, spent = "error", None, None
    finally:
        receive.close()
        proc.join()
    if status != "ok":
        return None
    if profile is not None and spent is not None:
        profile.merge(spent)
    return result


def _summarize_and_link(
    files: Sequence[Tuple[Path, str]],
    cache: Optional["ResultCache"],
    workers: int,
    codes: Optional[Sequence[Tuple[str, ...]]],
    config_files: Sequence[str],
    digests: Dict[int, str],
    key: str,
    profile: Optional[Profile],
) -> ProgramFacts:
    """`program_seeds` once its cache has no answer: summaries (cached or computed in the pool)
    and the link."""
    from speedlint.analyzer.program.facts import link

    t = time.perf_counter()
    summaries: Dict[int, Any] = {}
    parsed: Set[int] = set()
    hints: Dict[int, Tuple[str, ...]] = {}
    todo: List[Tuple[int, str, Tuple[str, ...]]] = []
    sizes: Dict[int, int] = {}
    for index, (path, _) in enumerate(files):
        if path.suffix not in _PROGRAM_SUFFIXES:
            continue
        if cache is not None:
            if index not in digests:
                continue
            got = cache.summaries.get(digests[index])
            if got is not None:
                summaries[index] = got
                parsed.add(index)
                continue
        try:
            sizes[index] = os.path.getsize(path)
        except OSError:
            continue
        todo.append((index, str(path), codes[index] if codes is not None else ()))
    if todo:
        total = sum(sizes.values())
        if workers <= 1 or len(todo) < MIN_PARALLEL_FILES or total < MIN_PARALLEL_BYTES:
            with _fewer_collections():
                done = _summarize(todo)
        else:
            ordered = sorted(todo, key=lambda item: -sizes.get(item[0], 0))
            done = _summarize_together([ordered[i::workers * 8] for i in range(workers * 8)], workers)
        for index, digest, summary, enabled in done:
            if digest is None:
                continue
            if summary is not None:
                summaries[index] = summary
                if cache is not None:
                    cache.summaries.put(digest, summary)
            if digests.setdefault(index, digest) != digest:
                continue  # changed since the parent read it: its pre-look is not the parent's text
            if summary is not None:
                parsed.add(index)
            if enabled is not None and codes is not None:
                hints[index] = enabled
    t1 = time.perf_counter()
    # (`link` rests the cyclic collector itself: it allocates much and frees it by reference counting)
    by_shown = link([(os.path.abspath(files[i][0]), files[i][1], s) for i, s in sorted(summaries.items())], config_files)
    locate_chains(by_shown, {files[i][1]: s["cells"] for i, s in summaries.items() if "cells" in s})
    if cache is not None:
        cache.save_program(key, by_shown)
    index_of = {shown: i for i, (_, shown) in enumerate(files)}
    seeds = {index_of[shown]: s for shown, s in by_shown.items() if shown in index_of}
    if profile is not None:
        profile.add("program summaries + pre-look", t1 - t)
        profile.add("program link", time.perf_counter() - t1)
    return ProgramFacts(seeds, hints, digests, parsed)


def _program_key(files: Sequence[Tuple[Path, str]], digests: Dict[int, str], config_files: Sequence[str] = ()) -> str:
    """What the link depends on: every file's place, name and content, the config files the code
    may read (by size and modification time), and speedlint's code."""
    import hashlib

    from speedlint.analyzer.cache import code_fingerprint

    h = hashlib.sha1(code_fingerprint().encode())
    for index, (path, shown) in enumerate(files):
        if index in digests:
            h.update(f"{os.path.abspath(path)}\0{shown}\0{digests[index]}\n".encode())
    for config in config_files:
        try:
            st = os.stat(config)
        except OSError:
            continue
        h.update(f"{config}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


# -- the pool -------------------------------------------------------------------------------------
def _chunks(jobs: List[Job], workers: int) -> List[List[Job]]:
    """Largest files first (the tail of the run stays short), in chunks of similar size."""
    ordered = sorted(jobs, key=lambda j: -j.size)
    total = sum(j.size for j in ordered)
    target = min(512 * 1024, max(32 * 1024, total // (workers * 16) or 1))
    chunks: List[List[Job]] = []
    current: List[Job] = []
    size = 0
    for job in ordered:
        current.append(job)
        size += job.size
        if size >= target or len(current) >= 32:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks


def _context() -> Union[ForkContext, SpawnContext]:
    import multiprocessing

    # fork: workers inherit the imported rules (no start-up imports). Only where it is safe.
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def run_jobs(jobs: List[Job], workers: int, profile: Optional[Profile], work: "Optional[CheckWork]" = None) -> Dict[int, Tuple[Any, Optional[str]]]:
    """Run `work` (checking, by default) on `jobs` in a pool of `workers` processes (in-process
    when that is cheaper); returns each job's result and the hash of the text it read."""
    work = work or CHECK
    done: Dict[int, Tuple[Any, Optional[str]]] = {}
    total = sum(j.size for j in jobs)
    if workers <= 1 or len(jobs) < MIN_PARALLEL_FILES or total < MIN_PARALLEL_BYTES:
        with _fewer_collections():
            for job in jobs:
                done[job.index] = work.run(job, profile)
        return done
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    chunks = _chunks(jobs, workers)
    workers = min(workers, len(chunks))
    if profile is not None:
        profile.workers = workers
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_context(), initializer=_init_worker) as pool:
            futures = [pool.submit(_work, chunk, profile is not None, work) for chunk in chunks]
            for future in futures:
                results, worker_profile = future.result()
                for index, result, digest in results:
                    done[index] = (result, digest)
                if profile is not None and worker_profile is not None:
                    profile.merge(worker_profile)
    except BrokenProcessPool:  # a worker died (killed, out of memory): finish in-process
        for job in jobs:
            if job.index not in done:
                done[job.index] = work.run(job, profile)
    return done


# -- the whole run --------------------------------------------------------------------------------
def _keyed(digest: str, seeds: Optional[FileSeeds]) -> str:
    """A file's cache key: its content, and what the program says about it (a file's findings
    change when a file it depends on changes how hot it is)."""
    return digest if seeds is None else f"{digest}+{seeds.digest()}"


class CheckWork:
    """What `process_files` does with each file: check it. `speedlint.analyzer.fixdriver.FixWork`
    fixes it instead, through the same program phase, cache look-up and pool."""

    #: whether the results are findings to keep in the cache
    store = True

    def run(self, job: Job, profile: Optional[Profile]) -> Tuple[Any, Optional[str]]:
        """Where the file is analysed (a worker, or the parent): its result, and the hash of what was read."""
        return analyze_job(job, profile)

    def nothing(self, shown: str) -> Any:
        """The result of a file none of its enabled rules can fire on."""
        return FileResult(shown)

    def unreadable(self, shown: str, message: str) -> Any:
        return FileResult(shown, diagnostics=[Diagnostic(shown, message)])

    def needs_source(self, hit: "CachedResult") -> bool:
        return bool(hit.findings)  # the reports show the flagged lines

    def cached(self, shown: str, hit: "CachedResult", settings: Settings, source: Optional[str]) -> Any:
        """The result from the cache entry of the file (None: the file must be looked at anyway)."""
        return FileResult(shown, hit.findings, hit.diagnostics, source, hit.parsed)


CHECK = CheckWork()


def _text_if_unchanged(path: str, digest: str, shown: str) -> Optional[str]:
    """The text of the file when its content still has `digest` (else None: analyse it anew)."""
    from speedlint.analyzer.cache import content_hash

    try:
        data = read_bytes(path)
        return checked_text(data, path)[0] if content_hash(data) == digest else None  # (a notebook: its analysed text)
    except SourceError:
        return None


def process_files(
    files: Sequence[Tuple[Path, str]],
    settings_for: Callable[[Path], Settings],
    codes_for: Callable[[Settings], Sequence[str]],
    cache_root: Optional[Path],
    profile: Optional[Profile] = None,
    jobs: Optional[int] = None,
    config_files: Sequence[str] = (),
    work: CheckWork = CHECK,
    program_files: Optional[Sequence[Tuple[Path, str]]] = None,
) -> Tuple[List[Any], List[str]]:
    """Run `work` on `files` ((path, display path) pairs): the program phase, then each file from
    the cache when its entry answers, else in the pool. Returns the results in the order of
    `files` (whatever order the workers finish in), and warnings. `program_files`, when given,
    is the whole program the files belong to (`project_scope`): it is linked, `files` analysed."""
    from speedlint.analyzer.cache import ResultCache, content_hash

    start = time.perf_counter()
    cache = ResultCache(cache_root) if cache_root is not None else None
    workers = jobs if jobs is not None else default_jobs()
    results: List[Any] = [None] * len(files)
    pending: List[Job] = []
    buckets: Dict[Tuple[str, Optional[str], Tuple[str, ...]], "Bucket"] = {}
    stored: Dict[int, str] = {}  # index -> the key its result is cached under
    Planned = Tuple[Settings, Tuple[str, ...], Tuple[str, Optional[str], Tuple[str, ...]]]
    by_folder: Dict[str, Planned] = {}
    by_settings: Dict[Settings, Planned] = {}
    settings_of: List[Planned] = []
    for path, _ in files:
        folder = os.path.dirname(path)
        if folder not in by_folder:
            settings = settings_for(path)
            if settings not in by_settings:
                codes = tuple(codes_for(settings))
                by_settings[settings] = (settings, codes, (settings.fingerprint() if cache is not None else "", settings.root, codes))
            by_folder[folder] = by_settings[settings]
        settings_of.append(by_folder[folder])
    cwd = os.getcwd()
    program = program_of(files, program_files, cache, workers, profile, [c for _, c, _ in settings_of], config_files)
    t_read = t_cache = 0.0
    triggers_of: Dict[Tuple[str, ...], Set[str]] = {}  # enabled rules -> the seed keys their pre-filter reads
    for index, (path, shown) in enumerate(files):
        settings, codes, key = settings_of[index]
        seeds = program.seeds.get(index)
        hint = program.hints.get(index)
        if hint is not None and seeds is not None:
            if codes not in triggers_of:
                triggers_of[codes] = {t for r in rules_by_code(codes) for t in r.seed_triggers}
            if seeds.changes_prelook(triggers_of[codes]):
                hint = None  # decided again with the seeds
        raw = program.digests.get(index)
        name = str(path)
        if cache is not None:
            t0 = time.perf_counter()
            if raw is None:  # not read by the program phase (a stub file)
                try:
                    raw = content_hash(read_bytes(name))
                except SourceError as exc:
                    results[index] = work.unreadable(shown, str(exc))
                    continue
            t1 = time.perf_counter()
            t_read += t1 - t0
            digest = _keyed(raw, seeds)
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = cache.bucket(*key)
            hit = bucket.get(os.path.normpath(os.path.join(cwd, name)), digest, shown)  # its absolute path
            if hit is not None:
                source = _text_if_unchanged(name, raw, shown) if work.needs_source(hit) else None
                answer = work.cached(shown, hit, settings, source) if source is not None or not work.needs_source(hit) else None
                if answer is not None:
                    results[index] = answer
                    cache.hits += 1
                    t_cache += time.perf_counter() - t1
                    continue
            cache.misses += 1
            stored[index] = digest
            t_cache += time.perf_counter() - t1
        if hint == () and (seeds is None or not seeds.project.get("config_problems")):
            results[index] = work.nothing(shown)  # the pre-look of the summary phase: nothing can fire
            continue
        try:
            size = os.path.getsize(name)
        except OSError:
            size = 0  # reading it will say what is wrong
        # whoever analyses the file reads it (the parent keeps no texts: its memory stays flat)
        pending.append(Job(index, name, shown, settings, codes, size, seeds, hint, raw, index in program.parsed))
    done = run_jobs(pending, workers, profile, work)
    for index, (result, read_digest) in done.items():
        results[index] = result
        if index in stored and read_digest is not None:
            stored[index] = _keyed(read_digest, program.seeds.get(index))  # what was analysed, if it changed meanwhile
    warnings: List[str] = []
    if cache is not None and work.store:
        t3 = time.perf_counter()
        for index, digest in stored.items():
            result = results[index]
            if result is not None:
                buckets[settings_of[index][2]].put(os.path.normpath(os.path.join(cwd, files[index][0])), digest, result.findings, result.diagnostics, result.parsed)
        warnings = cache.save()
        t_cache += time.perf_counter() - t3
    if profile is not None:
        profile.add("read", t_read)
        if cache is not None:
            profile.add("cache", t_cache)
            profile.cached = cache.hits
        profile.files = len(files)
        profile.wall = time.perf_counter() - start
    return [r if r is not None else work.nothing(files[i][1]) for i, r in enumerate(results)], warnings
