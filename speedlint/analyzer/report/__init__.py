"""All terminal and file output. Nothing else in speedlint prints.

Machine formats (json, sarif, github, concise, markdown) are written as plain text: never wrapped
or coloured, whatever the terminal width, through a pipe or not. Human output (`full`, `fix`'s
messages, `rules`, `explain`, `verify`) is wrapped and coloured on a terminal only, and follows
NO_COLOR / FORCE_COLOR (`report.terminal`).
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, TextIO, Tuple, Type

from speedlint.analyzer.report.terminal import Terminal
from speedlint.analyzer.report.text import concise_lines, print_full, print_statistics

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.findings import Diagnostic, Finding, Profile
    from speedlint.analyzer.rule import Rule
    from speedlint.analyzer.report.inputs import CheckRun, FixesRun

FORMATS = ("full", "concise", "json", "sarif", "github", "markdown")
FIX_FORMATS = ("full", "markdown")


@contextmanager
def _output(output_file: Optional[Path]) -> Iterator[TextIO]:
    if output_file is None:
        yield sys.stdout
        return
    output_file.parent.mkdir(parents=True, exist_ok=True)
    with output_file.open("w", encoding="utf-8", newline="\n") as fh:
        yield fh


def _exit_code(result: CheckRun) -> int:
    if any(d.kind in ("internal-error",) for d in result.diagnostics):
        return 2
    return 1 if (result.findings or any(d.kind != "warning" for d in result.diagnostics)) else 0


def emit_check(
    result: CheckRun,
    output_format: str = "full",
    output_file: Optional[Path] = None,
    quiet: bool = False,
    statistics: bool = False,
    unsafe_fixes: bool = False,
    paths: Sequence[str] = (".",),
) -> int:
    """Print a check result; returns the exit code for it (0 clean, 1 findings, 2 errors).
    `paths`: what was checked, as given (the markdown document's commands name them)."""
    if output_format not in FORMATS:  # the command line checks it first, with a usage error
        raise ValueError(f"unknown output format `{output_format}` (choose from {', '.join(FORMATS)})")
    for missing in result.missing:
        sys.stderr.write(f"speedlint: error: {missing}: no such file or directory\n")
    findings = result.findings
    diagnostics = result.diagnostics
    with _output(output_file) as out:
        if statistics and output_format == "json":
            out.write(json.dumps(statistics_json(findings), indent=2) + "\n")
        elif statistics:
            print_statistics(out, findings)
        elif output_format == "full" and (result.files or not result.missing):
            sources = {r.path: r.source or "" for r in result.files if r.findings}
            print_full(Terminal(out, plain=output_file is not None), findings, diagnostics, sources, unsafe_fixes=unsafe_fixes, quiet=quiet)
        elif output_format == "concise":
            for line in concise_lines(findings, diagnostics):
                out.write(line + "\n")
        elif output_format == "json":
            out.write(json.dumps(json_document(findings, diagnostics), indent=2) + "\n")
        elif output_format == "sarif":
            from speedlint.analyzer.report.sarif import sarif_document

            texts = {r.path: r.source for r in result.files if r.findings}
            out.write(json.dumps(sarif_document(findings, diagnostics, texts), indent=2) + "\n")
        elif output_format == "github":
            from speedlint.analyzer.report.github import github_lines

            for line in github_lines(findings, diagnostics):
                out.write(line + "\n")
        elif output_format == "markdown" and (result.files or not result.missing):
            from speedlint.analyzer.report.markdown import check_document

            out.write(check_document(result, paths))
    if result.profile is not None:
        print_profile(result.profile)
    return _exit_code(result)


def statistics_json(findings: Sequence[Finding]) -> List[Dict[str, Any]]:
    """`--statistics --output-format json`: one object per rule, most frequent first."""
    from collections import Counter

    counts = Counter((f.code, f.name) for f in findings)
    fixable = Counter(f.code for f in findings if f.fix is not None and f.fix.applicable)
    return [
        {"code": code, "name": name, "count": n, "fixable": fixable.get(code, 0)}
        for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def finding_json(f: Finding) -> Dict[str, Any]:
    fix = None
    if f.fix is not None:
        fix = {
            "title": f.fix.title,
            "applicability": f.fix.applicability.value,
            "edits": [
                {
                    "location": {"row": e.line, "column": e.column + 1},
                    "end_location": {"row": e.end_line, "column": e.end_column + 1},
                    "content": e.content,
                }
                for e in f.edits
            ],
        }
    out: Dict[str, Any] = {
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "filename": f.path,
        "location": {"row": f.line, "column": f.column},
        "end_location": {"row": f.end_line, "column": f.end_column},
        "status": f.status.value,
        "impact": {
            "level": f.impact.level_name,
            "wastes": f.impact.wastes,
            "when": f.impact.when,
            "typical": f.impact.typical,
            "evidence": f.impact.evidence,
        },
        "fix": fix,
        "chain": [_hop_json(hop) for hop in f.related],
    }
    if f.cell is not None:  # a notebook: rows (here and in the edits) are lines of this cell
        out["cell"] = f.cell
    return out


def _hop_json(hop: Tuple[Any, ...]) -> Dict[str, Any]:
    out = {"filename": hop[0], "location": {"row": hop[1]}, "call": hop[2]}
    if len(hop) > 3:
        out["cell"] = hop[3]
    return out


def json_document(findings: Sequence[Finding], diagnostics: Sequence[Diagnostic]) -> Dict[str, Any]:
    return {
        "version": 1,
        "findings": [finding_json(f) for f in sorted(findings, key=lambda x: x.sort_key())],
        "errors": [{"filename": d.path, "kind": d.kind, "message": d.message} for d in diagnostics],
    }


PROFILE_PHASES = ("read", "cache", "pre-filter", "parse", "providers", "rules", "positions", "fixes", "suppressions")


def profile_lines(profile: Profile) -> List[str]:
    """The `--profile-rules` report as plain lines (phases in pipeline order, then rules by time)."""
    total = sum(profile.phases.values()) or 1e-9
    head = f"Profile: {profile.files} files, {profile.cached} from cache, {profile.parsed} parsed"
    head += f", {profile.workers} worker processes" if profile.workers else ", in-process"
    if profile.wall:
        head += f"; wall {profile.wall:.3f} s"
    lines = [head, "  phase (seconds spent in it, summed over processes)"]
    names = [p for p in PROFILE_PHASES if p in profile.phases] + sorted(set(profile.phases) - set(PROFILE_PHASES))
    for name in names:
        secs = profile.phases[name]
        lines.append(f"    {name:<14}{secs:9.3f} s {100 * secs / total:5.1f}%")
    if profile.rules:
        lines.append("  rule (time in its visit methods, providers excluded)")
        for name, secs in sorted(profile.rules.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {name:<14}{secs:9.3f} s")
    return lines


def print_profile(profile: Profile) -> None:
    sys.stdout.flush()
    sys.stderr.write("\n".join(profile_lines(profile)) + "\n")


# -- fix -------------------------------------------------------------------------------------
def _fix_exit_code(run: FixesRun, apply: bool) -> int:
    failed = ("internal-error", "write-error")
    if run.missing or any(d.kind in failed for o in run.outcomes for d in o.diagnostics) or any(d.kind in failed for d in run.diagnostics):
        return 2
    if apply:
        return 0
    return 1 if run.changed else 0


def emit_fix(
    run: FixesRun,
    apply: bool,
    output_format: str = "full",
    output_file: Optional[Path] = None,
    paths: Sequence[str] = (".",),
) -> int:
    """Show a fix run: `full` writes the diff (preview) to stdout and a summary to stderr;
    `markdown` writes one document (the diffs, or with `apply` what was written)."""
    from collections import Counter

    from speedlint.analyzer.diffkeys import unified_diff

    if output_format not in FIX_FORMATS:  # the command line checks it first, with a usage error
        raise ValueError(f"unknown output format `{output_format}` (choose from {', '.join(FIX_FORMATS)})")
    for missing in run.missing:
        sys.stderr.write(f"speedlint: error: {missing}: no such file or directory\n")
    if output_format == "markdown":
        from speedlint.analyzer.report.markdown import fix_document

        with _output(output_file) as out:
            out.write(fix_document(run, apply, paths))
        return _fix_exit_code(run, apply)
    err = Terminal(sys.stderr)
    if not apply:
        with _output(output_file) as out:
            for outcome in run.changed:
                out.write(unified_diff(outcome))
    for d in [d for outcome in run.outcomes for d in outcome.diagnostics] + run.diagnostics:
        err.line([(d.path, "bold"), (": ", ""), (d.kind, "red"), (f": {d.message}", "")])
    total: Counter[str] = Counter()
    for outcome in run.changed:
        per_rule = Counter(f.code for f in outcome.applied)
        total.update(per_rule)
        verb = "Fixed" if apply and outcome.path in run.written else "Would fix"
        detail = ", ".join(f"{code} x{n}" for code, n in sorted(per_rule.items()))
        err.line([(f"{verb} {sum(per_rule.values())} in {outcome.path} ({detail})", "")])
    n = sum(total.values())
    files = len(run.written) if apply else len(run.changed)
    if n:
        verb = "Fixed" if apply else "Would fix"
        err.line([(f"{verb} {n} finding{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}.", "bold")])
    else:
        err.line([("Nothing to fix.", "bold")])
    unsafe = sum(o.unsafe_available for o in run.outcomes)
    if unsafe:
        err.line([(f"{unsafe} unsafe fix{'es' if unsafe != 1 else ''} available with `--unsafe-fixes`.", "dim")])
    return _fix_exit_code(run, apply)


# -- rules / explain ---------------------------------------------------------------------------
def emit_rules(rules: Sequence[Type], output_format: str = "full") -> None:
    if output_format == "json":
        data = [
            {
                "code": r.code, "name": r.name, "category": r.category(), "fix": r.fixability(),
                "status": r.status.value, "default_enabled": r.default_enabled,
                "impact": {"level": r.impact.level_name, "wastes": r.impact.wastes, "typical": r.impact.typical},
            }
            for r in rules
        ]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table(show_edge=False)
    for col in ("code", "name", "category", "fix", "status", "impact"):
        table.add_column(col)
    for r in rules:
        status = r.status.value + ("" if r.default_enabled else " (off by default)")
        table.add_row(r.code, r.name, r.category(), r.fixability(), status, r.impact.level_name)
    Terminal(sys.stdout).render(table)


def explain_markdown(rule: Type[Rule]) -> str:
    """A rule's documentation as Markdown: its title, status, fix and impact record, then its
    docs (what `speedlint explain` shows; the language server's hover shortens it)."""
    header = f"# {rule.code} ({rule.name})\n\n"
    meta = (
        f"Status: {rule.status.value}{'' if rule.default_enabled else ', off by default'}. "
        f"Fix: {rule.fixability()}. Impact: {rule.impact.line()}.\n\n"
    )
    return header + meta + rule.docs()


def emit_explain(rule: Type[Rule]) -> None:
    """A rule's documentation: rendered on a terminal; elsewhere its Markdown source, as written
    (no wrapping, code blocks intact: it reads, greps and pastes as it is)."""
    term = Terminal(sys.stdout)
    if not term.wrap:
        sys.stdout.write(explain_markdown(rule) + "\n")
        return
    from rich.markdown import Markdown

    term.render(Markdown(explain_markdown(rule)))
