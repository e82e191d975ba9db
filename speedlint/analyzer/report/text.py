"""Human output: the `full` report (grouped by file, ranked summary; see `terminal` for how it
looks on a terminal and in a log) and `concise` lines."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Dict, List, Optional, Sequence, TextIO, Tuple

from speedlint.analyzer.findings import HIGH, LOW, MEDIUM, UNSAFE, Diagnostic, Finding
from speedlint.analyzer.report.ranking import group_key, places_text, rank_key, typical_text
from speedlint.analyzer.report.terminal import Line, Terminal
from speedlint.analyzer.sources import source_lines

LEVEL_STYLE = {HIGH: "bold red", MEDIUM: "yellow", LOW: "cyan"}


def snippet(source: str, line: int, split: Optional[Dict[str, List[str]]] = None) -> str:
    """Line `line` of `source` (`split`: the texts already split into lines, by text)."""
    lines = split.get(source) if split is not None else None
    if lines is None:
        lines = source_lines(source)
        if split is not None:
            split[source] = lines
    return lines[line - 1].rstrip() if 0 < line <= len(lines) else ""


def ranked_by_rule(findings: Sequence[Finding]) -> List[List[Finding]]:
    """The findings per rule, the costliest rule first (`ranking.group_key`: its costliest
    finding, impact times how hot the code is, then its summed cost, then its code); each rule's
    findings by expected cost, then position."""
    groups: Dict[str, List[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.code].append(f)
    order = sorted(groups.values(), key=group_key)
    return [sorted(fs, key=rank_key) for fs in order]


def fix_counts(findings: Sequence[Finding]) -> Tuple[int, int]:
    """(safe, unsafe): how many findings `fix --apply` (and `--unsafe-fixes`) would change."""
    applicable = [f.fix for f in findings if f.fix is not None and f.fix.applicable]
    unsafe = sum(1 for fix in applicable if fix.applicability is UNSAFE)
    return len(applicable) - unsafe, unsafe


def fix_label(f: Finding) -> str:
    if f.fix is None:
        return ""
    if f.fix.applicable:
        return f"fix ({f.fix.applicability.value}): {f.fix.title}"
    return f"advice: {f.fix.title}"


def full_lines(findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], sources: Dict[str, str], quiet: bool = False) -> List[Line]:
    """The `full` report's lines before the summary: per-file errors, then each file's findings
    with the flagged source line, the impact and the fix."""
    lines: List[Line] = []
    for d in diagnostics:
        style = "bold red" if d.kind != "warning" else "yellow"
        lines.append([(f"{d.path}", "bold"), (": ", ""), (d.kind, style), (f": {d.message}", "")])
    if quiet:
        return lines
    by_file: Dict[str, List[Finding]] = defaultdict(list)
    for f in findings:
        by_file[f.path].append(f)
    split: Dict[str, List[str]] = {}
    for path in sorted(by_file):
        lines.append([(path, "bold underline")])
        for f in sorted(by_file[path], key=Finding.sort_key):
            head: List[Tuple[str, str]] = [
                (f"{f.location}", "bold"), ("  ", ""), (f.code, LEVEL_STYLE.get(f.impact.level, "")), (" ", ""),
                (f"[{f.name}]", "dim"), (" ", ""), (f.message, ""),
            ]
            if f.status.value == "preview":
                head.append((" (preview)", "dim"))
            lines.append(head)
            code_line = snippet(sources.get(f.path, ""), f.source_line, split)
            if code_line:
                lines.append([("    | ", "dim"), (code_line, "")])
            lines.append([(f"    {f.impact.level_name} impact: {typical_text(f)}; matters {f.impact.when}", "dim")])
            label = fix_label(f)
            if label:
                lines.append([("    " + label, "green" if f.fix and f.fix.applicable else "dim")])
        lines.append([])
    return lines


def print_full(
    term: Terminal,
    findings: Sequence[Finding],
    diagnostics: Sequence[Diagnostic],
    sources: Dict[str, str],
    unsafe_fixes: bool = False,
    quiet: bool = False,
) -> None:
    term.lines(full_lines(findings, diagnostics, sources, quiet))
    print_summary(term, findings, diagnostics, unsafe_fixes)


def print_summary(term: Terminal, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], unsafe_fixes: bool) -> None:
    if findings:
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        table = Table(title="Ranked by expected impact", title_justify="left", show_edge=False, pad_edge=False, box=None)
        table.add_column("impact", no_wrap=True)
        table.add_column("code", no_wrap=True)
        table.add_column("name", no_wrap=True, overflow="ellipsis")
        table.add_column("count", justify="right", no_wrap=True)
        table.add_column("runs", overflow="fold", max_width=16)
        table.add_column("typically", overflow="fold", ratio=1)
        for fs in ranked_by_rule(findings):
            top = fs[0]
            table.add_row(
                Text(top.impact.level_name, style=LEVEL_STYLE.get(top.impact.level, "")),
                top.code, top.name, str(len(fs)), places_text(fs), escape(typical_text(top)),
            )
        term.render(table)
    safe, unsafe = fix_counts(findings)
    parts = [f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''}"]
    errors = [d for d in diagnostics if d.kind != "warning"]
    if errors:
        parts.append(f"{len(errors)} file error{'s' if len(errors) != 1 else ''}")
    line = ", ".join(parts) + "."
    if safe or (unsafe and unsafe_fixes):
        n = safe + (unsafe if unsafe_fixes else 0)
        line += f" {n} fixable with `speedlint fix --apply{' --unsafe-fixes' if unsafe_fixes and unsafe else ''}`."
    if unsafe and not unsafe_fixes:
        line += f" {unsafe} more with `--unsafe-fixes`."
    if not findings and not errors:
        line = "All checks passed."
    term.line([(line, "bold")])


def concise_lines(findings: Sequence[Finding], diagnostics: Sequence[Diagnostic]) -> List[str]:
    lines = [f"{d.path}: {d.kind}: {d.message}" for d in diagnostics]
    lines += [f"{f.location}: {f.code} {f.message}" for f in sorted(findings, key=Finding.sort_key)]
    return lines


def print_statistics(out: TextIO, findings: Sequence[Finding]) -> None:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = Counter(f.code for f in findings if f.fix is not None and f.fix.applicable)
    for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = "[*]" if fixable.get(code) else "   "
        out.write(f"{n:>5}  {code}  {mark} {name}\n")
