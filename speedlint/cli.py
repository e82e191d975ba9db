"""The command line: the only place that parses argv.

Exit codes: 0 clean, 1 findings (or a diff to apply), 2 usage/config/internal error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, cast

import typer

from speedlint import __version__

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.baseline import BaselineOutcome
    from speedlint.analyzer.fixdriver import FixRun
    from speedlint.analyzer.runner import Overrides, SettingsResolver
    from speedlint.analyzer.sources import Source

app = typer.Typer(
    name="speedlint",
    help="Find and fix the habits that make PyTorch training slow.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageFailure(Exception):
    """A one-line error for the user; exit code 2."""


def _split(values: Optional[List[str]]) -> Tuple[str, ...]:
    out: List[str] = []
    for v in values or []:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return tuple(out)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"speedlint {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version_callback, is_eager=True, help="Show the version and exit."),
) -> None:
    """speedlint: static analysis and automatic fixes for slow PyTorch training code."""


# -- shared option helpers ---------------------------------------------------------------------
def _overrides(
    select: Optional[List[str]],
    ignore: Optional[List[str]],
    extend_select: Optional[List[str]],
    preview: bool,
    unsafe_fixes: bool,
    target_torch_version: Optional[str],
    fix_options: Sequence[Tuple[str, object]] = (),
) -> Overrides:
    """The options that override config files (their rule selectors are checked by `_resolver`)."""
    from speedlint.analyzer.config import ConfigError, parse_version
    from speedlint.analyzer.runner import Overrides

    sel, ign, ext = _split(select), _split(ignore), _split(extend_select)
    try:
        ttv = parse_version(target_torch_version) if target_torch_version else None
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None
    return Overrides(
        select=sel or None,
        ignore=ign,
        extend_select=ext,
        preview=True if preview else None,
        unsafe_fixes=True if unsafe_fixes else None,
        target_torch_version=ttv,
        fix_options=tuple(fix_options),
    )


def _resolver(overrides: Overrides, config: Optional[Path], isolated: bool) -> SettingsResolver:
    from speedlint.analyzer.config import ConfigError
    from speedlint.analyzer.registry import SelectionError, validate_selectors
    from speedlint.analyzer.runner import SettingsResolver, use_cached_catalogue

    use_cached_catalogue(config, isolated)  # a run answered from the cache imports no rule
    try:
        validate_selectors([*(overrides.select or ()), *overrides.ignore, *overrides.extend_select])
    except SelectionError as exc:
        raise UsageFailure(str(exc)) from None
    try:
        return SettingsResolver(overrides, config=config, isolated=isolated)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None


SELECT = typer.Option(None, "--select", help="Rule codes, prefixes or names to enable (comma-separated; ALL).")
IGNORE = typer.Option(None, "--ignore", help="Rule codes, prefixes or names to disable.")
EXTEND_SELECT = typer.Option(None, "--extend-select", help="Rules to enable on top of the selection.")
PREVIEW = typer.Option(False, "--preview", help="Enable preview rules.")
CONFIG = typer.Option(None, "--config", help="Use this config file instead of discovering one.")
ISOLATED = typer.Option(False, "--isolated", help="Ignore all config files.")
TORCH_VERSION = typer.Option(None, "--target-torch-version", help="The oldest torch version the code must support, e.g. 1.13.")


# -- check -------------------------------------------------------------------------------------
@app.command()
def check(
    paths: List[str] = typer.Argument(None, help="Files or folders to check (default: .). Use - for stdin."),
    select: Optional[List[str]] = SELECT,
    ignore: Optional[List[str]] = IGNORE,
    extend_select: Optional[List[str]] = EXTEND_SELECT,
    preview: bool = PREVIEW,
    output_format: str = typer.Option("full", "--output-format", help="full, concise, json, sarif, github or markdown (a review document for a pull request or $GITHUB_STEP_SUMMARY)."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", help="Write the report to this file."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only the summary line (full format)."),
    statistics: bool = typer.Option(False, "--statistics", help="Count findings per rule."),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", help="The file name for code read from stdin."),
    force_exclude: bool = typer.Option(False, "--force-exclude", help="Apply excludes to files named explicitly too (pre-commit)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache."),
    profile_rules: bool = typer.Option(False, "--profile-rules", help="Print time spent per phase and per rule."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: one per core; 1: no pool)."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Count unsafe fixes as available."),
    config: Optional[Path] = CONFIG,
    isolated: bool = ISOLATED,
    target_torch_version: Optional[str] = TORCH_VERSION,
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Report only findings that are not in this baseline file."),
    write_baseline: Optional[Path] = typer.Option(None, "--write-baseline", help="Record the current findings in this baseline file and exit 0."),
) -> None:
    """Check files for slow PyTorch training patterns. Never runs your code."""
    from speedlint.analyzer.baseline import BaselineError, filter_result, load_baseline, write_baseline as write_baseline_file
    from speedlint.analyzer.config import ConfigError
    from speedlint.analyzer.report import FORMATS, emit_check
    from speedlint.analyzer.runner import RunResult, check_paths, check_stdin

    if output_format not in FORMATS:
        raise UsageFailure(f"unknown output format `{output_format}` (choose from {', '.join(FORMATS)})")
    overrides = _overrides(select, ignore, extend_select, preview, unsafe_fixes, target_torch_version)
    resolver = _resolver(overrides, config, isolated)
    paths = paths or ["."]
    try:
        entries = load_baseline(baseline) if baseline is not None else None
        if paths == ["-"]:
            text = _read_stdin().text
            name = stdin_filename or "-"
            if force_exclude and stdin_filename and _stdin_excluded(stdin_filename, resolver):
                result = RunResult()
            else:
                result = check_stdin(text, name, resolver, use_cache=not no_cache)
        else:
            result = check_paths(paths, resolver, force_exclude=force_exclude, profile=profile_rules, use_cache=not no_cache, jobs=jobs)
        if write_baseline is not None:
            sources = {r.path: r.source for r in result.files}
            n = write_baseline_file(write_baseline, result.findings, sources)
            sys.stderr.write(f"speedlint: wrote {n} finding{'s' if n != 1 else ''} to baseline {write_baseline}\n")
            for d in result.diagnostics:
                sys.stderr.write(f"speedlint: {d.path}: {d.kind}: {d.message} (not baselined)\n")
            raise typer.Exit(EXIT_ERROR if result.missing else EXIT_CLEAN)
        outcome = filter_result(result, entries, baseline.parent) if entries is not None and baseline is not None else None
        unsafe = unsafe_fixes or resolver.for_directory(Path.cwd()).unsafe_fixes
    except (ConfigError, BaselineError) as exc:
        raise UsageFailure(str(exc)) from None
    code = emit_check(
        result,
        output_format=output_format,
        output_file=output_file,
        quiet=quiet,
        statistics=statistics,
        unsafe_fixes=unsafe,
        paths=[stdin_filename or "-"] if paths == ["-"] else paths,
    )
    if outcome is not None and not quiet:
        _baseline_note(outcome, cast(Path, baseline))  # an outcome exists only when a baseline was given
    if result.missing:
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_CLEAN if exit_zero and code != EXIT_ERROR else code)


def _read_stdin() -> Source:
    """Code on stdin, decoded like a file (coding cookie, BOM), line endings kept as they are."""
    from speedlint.analyzer.sources import Source, SourceError, decode

    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text-only stdin (tests, embedding)
        return Source(sys.stdin.read(), "utf-8")
    try:
        return decode(buffer.read(), "<stdin>")
    except SourceError as exc:
        raise UsageFailure(f"stdin: {exc}") from None


def _write_stdout(source: Source, text: str) -> None:
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        buffer.write(source.encode(text))
        buffer.flush()


def _stdin_excluded(filename: str, resolver: SettingsResolver) -> bool:
    """`--force-exclude` with `--stdin-filename`: whether the excludes cover that name."""
    from speedlint.analyzer.discovery import matches_excludes
    from speedlint.analyzer.runner import excludes_for

    path = Path(filename).absolute()
    patterns, root = excludes_for(resolver)(path.parent)
    return matches_excludes(path, False, patterns, root)


def _baseline_note(outcome: BaselineOutcome, baseline: Path) -> None:
    """Stale baseline entries: a short note on stderr, never a failure."""
    if not outcome.stale:
        return
    n = sum(missing for _, missing in outcome.stale)
    lines = [f"speedlint: note: {n} baseline entr{'ies' if n != 1 else 'y'} in {baseline} no longer match (fixed or changed); refresh it with --write-baseline {baseline}"]
    for entry, missing in outcome.stale[:10]:
        lines.append(f"  stale: {entry.path}: {entry.code} `{entry.content}`" + (f" (x{missing})" if missing > 1 else ""))
    if len(outcome.stale) > 10:
        lines.append(f"  ... and {len(outcome.stale) - 10} more")
    sys.stderr.write("\n".join(lines) + "\n")


# -- fix ---------------------------------------------------------------------------------------
@app.command()
def fix(
    paths: List[str] = typer.Argument(None, help="Files or folders to fix (default: .). Use - for stdin."),
    apply: bool = typer.Option(False, "--apply", help="Write the fixes (default: show the diff only)."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply unsafe fixes (AMP, tuned DataLoader ...)."),
    select: Optional[List[str]] = SELECT,
    ignore: Optional[List[str]] = IGNORE,
    extend_select: Optional[List[str]] = EXTEND_SELECT,
    preview: bool = PREVIEW,
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", help="The file name for code read from stdin."),
    force_exclude: bool = typer.Option(False, "--force-exclude", help="Apply excludes to files named explicitly too."),
    output_format: str = typer.Option("full", "--output-format", help="full (the diff on stdout, a summary on stderr) or markdown (one document: the diffs, or with --apply what was written)."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", help="Write the diff or the markdown document to this file."),
    accumulation_steps: Optional[int] = typer.Option(None, "--accumulation-steps", min=1, help="Default of the accumulation knob SPD303 adds."),
    verify_script: Optional[Path] = typer.Option(None, "--verify", help="Run this script before/after the fixes first (`speedlint verify`); with --apply, write only when the verdict allows it, else exit with the verdict's code (3-6, see `speedlint verify --help`). Script arguments go after `--`."),
    verify_steps: int = typer.Option(30, "--verify-steps", min=1, help="Optimizer steps timed per --verify run."),
    verify_repeats: int = typer.Option(3, "--verify-repeats", min=1, help="Alternating --verify runs per version."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: one per core; 1: no pool)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read `check`'s cache (fix never writes it)."),
    config: Optional[Path] = CONFIG,
    isolated: bool = ISOLATED,
    target_torch_version: Optional[str] = TORCH_VERSION,
) -> None:
    """Show (or with --apply, write) the fixes. Never runs your code, except the script named by --verify."""
    from speedlint.analyzer.config import ConfigError
    from speedlint.analyzer.report import FIX_FORMATS, emit_fix
    from speedlint.analyzer.rewrite import fix_paths, fix_stdin, write_run

    if output_format not in FIX_FORMATS:
        raise UsageFailure(f"unknown output format `{output_format}` for fix (choose from {', '.join(FIX_FORMATS)})")
    options = [("accumulation_steps", accumulation_steps)] if accumulation_steps else []
    overrides = _overrides(select, ignore, extend_select, preview, unsafe_fixes, target_torch_version, options)
    resolver = _resolver(overrides, config, isolated)
    if verify_script is not None:  # verification first; refusal exits with the verdict's code
        try:
            paths, run = _fix_with_verify(verify_script, paths or [], resolver, apply, verify_steps, verify_repeats, force_exclude, jobs, not no_cache)
        except ConfigError as exc:
            raise UsageFailure(str(exc)) from None
        if apply:  # exactly the fixes that were verified
            write_run(run)
        raise typer.Exit(emit_fix(run, apply=apply, output_format=output_format, output_file=output_file, paths=paths))
    paths = paths or ["."]

    try:
        if paths == ["-"]:
            if output_format != "full":
                raise UsageFailure(f"--output-format {output_format} cannot be used with stdin: `fix -` writes the fixed code to stdout")
            source = _read_stdin()
            if force_exclude and stdin_filename and _stdin_excluded(stdin_filename, resolver):
                _write_stdout(source, source.text)
                raise typer.Exit(EXIT_CLEAN)
            outcome = fix_stdin(source.text, stdin_filename or "-", resolver, use_cache=not no_cache)
            _write_stdout(source, outcome.fixed)
            for d in outcome.diagnostics:
                sys.stderr.write(f"speedlint: {d.path}: {d.kind}: {d.message}\n")
            if any(d.kind == "internal-error" for d in outcome.diagnostics):
                raise typer.Exit(EXIT_ERROR)
            raise typer.Exit(EXIT_FINDINGS if any(d.kind == "error" for d in outcome.diagnostics) else EXIT_CLEAN)
        result = fix_paths(paths, resolver, apply=apply, force_exclude=force_exclude, jobs=jobs, use_cache=not no_cache)
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None
    raise typer.Exit(emit_fix(result, apply=apply, output_format=output_format, output_file=output_file, paths=paths))


# -- verify ------------------------------------------------------------------------------------
VERIFY_EXIT_CODES = (
    "Exit codes: 0 verified-faster, 3 equivalent-not-faster (same results, not measurably faster), "
    "4 diverged (losses differ beyond the tolerance), 5 crashed (the after-run fails), 6 inconclusive "
    "(too noisy, too few steps, no fixes apply, or the script as it is fails), 2 usage or internal error."
)


def _script_args_from_argv(positionals: List[str]) -> Tuple[List[str], List[str]]:
    """Split `fix PATHS --verify S -- ARGS`: click merges ARGS into PATHS; sys.argv knows where `--` was."""
    argv = sys.argv[1:]
    if "--" not in argv:
        return positionals, []
    tail = argv[argv.index("--") + 1:]
    if tail and positionals[-len(tail):] == tail:
        return positionals[: len(positionals) - len(tail)], tail
    return positionals, []


def _fix_with_verify(
    script: Path,
    paths: List[str],
    resolver: SettingsResolver,
    apply: bool,
    steps: int,
    repeats: int,
    force_exclude: bool,
    jobs: Optional[int],
    use_cache: bool,
) -> Tuple[List[str], FixRun]:
    """Compute the fixes for the paths (the fix driver, as `fix` does) and verify them; returns
    the paths and the fixes (for `fix` to show or write: exactly what was verified), or exits
    with the verdict's code."""
    from speedlint.analyzer.fixdriver import compute_fixes
    from speedlint.analyzer.report.verify import emit_fix_verify_refusal, emit_verify, progress_printer
    from speedlint.harness.verify import VerifyError, VerifyOptions, verify

    paths, script_args = _script_args_from_argv(paths)
    paths = paths or [str(script)]
    if paths == ["-"]:
        raise UsageFailure("--verify cannot be used with stdin")
    run = compute_fixes(paths, resolver, force_exclude=force_exclude, jobs=jobs, use_cache=use_cache)
    opts = VerifyOptions(script=script, args=tuple(script_args), steps=steps, repeats=repeats, fixes=run)
    try:
        result = verify(opts, resolver, progress=progress_printer())
    except VerifyError as exc:
        raise UsageFailure(str(exc)) from None
    emit_verify(result)
    if result.mode == "fixes" and not result.fixes:
        raise typer.Exit(EXIT_CLEAN)  # nothing to fix, nothing to write
    if apply and not result.allows_write:
        emit_fix_verify_refusal(result)
        raise typer.Exit(result.exit_code)
    return paths, run


@app.command(help=f"""Run SCRIPT as it is and with the fixes applied (in a temporary copy), compare speed and losses.

Both versions run in fresh subprocesses under a measuring shim (same interpreter, arguments, environment, seeds), alternating. Your files are never modified. Script arguments go after `--`: `speedlint verify train.py -- --epochs 1`.

{VERIFY_EXIT_CODES}""")
def verify(
    script: Path = typer.Argument(..., help="The training script to run."),
    script_args: Optional[List[str]] = typer.Argument(None, help="Arguments for the script (after `--`)."),
    steps: int = typer.Option(30, "--steps", min=1, help="Optimizer steps timed per run, after warm-up."),
    warmup: int = typer.Option(5, "--warmup", min=0, help="Optimizer steps run before timing starts."),
    repeats: int = typer.Option(3, "--repeats", min=1, help="Alternating runs per version (before, after, before, ...)."),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="Seconds per run; its whole process group is killed past it."),
    tolerance: Optional[float] = typer.Option(None, "--tolerance", min=0.0, help="Largest relative loss deviation allowed (default: by the kind of fix: 1e-5 safe, 1e-3 unsafe/--after, 0.1 AMP)."),
    min_speedup: float = typer.Option(1.05, "--min-speedup", min=1.0, help="The smallest speedup that counts as faster."),
    seed: int = typer.Option(0, "--seed", help="Seed for random, numpy and torch in both runs."),
    after: Optional[Path] = typer.Option(None, "--after", help="Compare with this file (run in SCRIPT's place) instead of speedlint's fixes."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply unsafe fixes (AMP, tuned DataLoader ...)."),
    select: Optional[List[str]] = SELECT,
    ignore: Optional[List[str]] = IGNORE,
    extend_select: Optional[List[str]] = EXTEND_SELECT,
    preview: bool = PREVIEW,
    accumulation_steps: Optional[int] = typer.Option(None, "--accumulation-steps", min=1, help="Default of the accumulation knob SPD303 adds."),
    config: Optional[Path] = CONFIG,
    isolated: bool = ISOLATED,
    target_torch_version: Optional[str] = TORCH_VERSION,
) -> None:
    from speedlint.analyzer.report.verify import emit_verify, progress_printer
    from speedlint.harness.verify import VerifyError, VerifyOptions
    from speedlint.harness.verify import verify as run_verify

    options = [("accumulation_steps", accumulation_steps)] if accumulation_steps else []
    overrides = _overrides(select, ignore, extend_select, preview, unsafe_fixes, target_torch_version, options)
    resolver = _resolver(overrides, config, isolated)
    opts = VerifyOptions(
        script=script, args=tuple(script_args or ()), steps=steps, warmup=warmup, repeats=repeats, timeout=timeout,
        tolerance=tolerance, min_speedup=min_speedup, seed=seed, after=after,
    )
    try:
        result = run_verify(opts, resolver, progress=progress_printer(not as_json))
    except VerifyError as exc:
        raise UsageFailure(str(exc)) from None
    raise typer.Exit(emit_verify(result, as_json=as_json))


# -- rules / explain ---------------------------------------------------------------------------
@app.command()
def rules(
    output_format: str = typer.Option("full", "--output-format", help="full or json."),
) -> None:
    """List every rule: code, name, category, fix availability, status."""
    from speedlint.analyzer.registry import all_rules
    from speedlint.analyzer.report import emit_rules

    emit_rules(all_rules(), output_format)


@app.command()
def explain(code: str = typer.Argument(..., help="A rule code (SPD101) or name (dataloader-sync-loading).")) -> None:
    """Show a rule's documentation."""
    from speedlint.analyzer.registry import rule_by_code_or_name
    from speedlint.analyzer.report import emit_explain

    try:
        rule = rule_by_code_or_name(code)
    except KeyError:
        raise UsageFailure(f"unknown rule `{code}`; `speedlint rules` lists them") from None
    emit_explain(rule)


# -- server ------------------------------------------------------------------------------------
@app.command()
def server(
    debounce_ms: int = typer.Option(200, "--debounce-ms", min=0, help="Wait this long after the last edit before analysing (the client's `debounceMs` option wins)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache."),
) -> None:
    """Run the language server (LSP over stdio) for editors: findings as you type, quick fixes, hover docs. See docs/editors.md."""
    import importlib.util

    missing = [name for name in ("pygls", "lsprotocol") if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageFailure(f"the language server needs {' and '.join(missing)}: install it with `pip install \"speedlint[server]\"`")
    from speedlint.server.lsp import start

    start(debounce=debounce_ms / 1000, use_cache=not no_cache)


# -- clean -------------------------------------------------------------------------------------
@app.command()
def clean(
    config: Optional[Path] = CONFIG,
    isolated: bool = ISOLATED,
) -> None:
    """Remove the result cache (.speedlint_cache/ at the project root)."""
    from speedlint.analyzer.cache import clean as remove_cache
    from speedlint.analyzer.runner import Overrides, cache_root

    root = cache_root(_resolver(Overrides(), config, isolated))
    removed, folder = remove_cache(root)
    sys.stderr.write(f"Removed {folder}\n" if removed else f"No cache at {folder}\n")


def main() -> None:
    """Console-script entry point: maps every failure to exit code 2, never 1."""
    try:
        app(prog_name="speedlint")
    except UsageFailure as exc:
        sys.stderr.write(f"speedlint: error: {exc}\n")
        sys.exit(EXIT_ERROR)
    except SystemExit as exc:
        if exc.code not in (None, 0, 1, 2) and not isinstance(exc.code, int):
            sys.stderr.write(f"speedlint: error: {exc.code}\n")
            sys.exit(EXIT_ERROR)
        raise
    except KeyboardInterrupt:
        sys.stderr.write("speedlint: interrupted\n")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_ERROR)
    except Exception as exc:  # an internal error must never look like "findings" (exit 1)
        import traceback

        traceback.print_exc()
        sys.stderr.write(f"speedlint: internal error: {exc!r}; please report this bug\n")
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":  # pragma: no cover
    main()
