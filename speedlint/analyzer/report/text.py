"""Human output: the `full` report (rich, grouped by file, ranked summary) and `concise` lines."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Dict, List, Sequence, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from speedlint.analyzer.findings import HIGH, LOW, MEDIUM, UNSAFE, Diagnostic, Finding

LEVEL_STYLE = {HIGH: "bold red", MEDIUM: "yellow", LOW: "cyan"}


def snippet(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1].rstrip() if 0 < line <= len(lines) else ""


def fix_label(f: Finding) -> str:
    if f.fix is None:
        return ""
    if f.fix.applicable:
        return f"fix ({f.fix.applicability.value}): {f.fix.title}"
    return f"advice: {f.fix.title}"


def print_full(
    console: Console,
    findings: Sequence[Finding],
    diagnostics: Sequence[Diagnostic],
    sources: Dict[str, str],
    unsafe_fixes: bool = False,
    quiet: bool = False,
) -> None:
    by_file: Dict[str, List[Finding]] = defaultdict(list)
    for f in findings:
        by_file[f.path].append(f)
    for d in diagnostics:
        style = "bold red" if d.kind != "warning" else "yellow"
        console.print(Text.assemble((f"{d.path}", "bold"), ": ", (d.kind, style), f": {d.message}"))
    if not quiet:
        for path in sorted(by_file):
            console.print(Text(path, style="bold underline"))
            for f in sorted(by_file[path], key=lambda x: (x.line, x.column, x.code)):
                head = Text.assemble(
                    (f"{f.location}", "bold"), "  ",
                    (f.code, LEVEL_STYLE.get(f.impact.level, "")), " ",
                    (f"[{f.name}]", "dim"), " ", f.message,
                )
                if f.status.value == "preview":
                    head.append(" (preview)", style="dim")
                console.print(head)
                code_line = snippet(sources.get(f.path, ""), f.line)
                if code_line:
                    console.print(Text.assemble(("    | ", "dim"), (code_line, "")))
                console.print(Text(f"    {f.impact.level_name} impact: {f.impact.typical}; matters {f.impact.when}", style="dim"))
                label = fix_label(f)
                if label:
                    console.print(Text("    " + label, style="green" if f.fix and f.fix.applicable else "dim"))
            console.print()
    print_summary(console, findings, diagnostics, unsafe_fixes)


def print_summary(console: Console, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], unsafe_fixes: bool) -> None:
    if findings:
        table = Table(title="Ranked by expected impact", title_justify="left", show_edge=False, pad_edge=False, box=None)
        table.add_column("impact", no_wrap=True)
        table.add_column("code", no_wrap=True)
        table.add_column("name", no_wrap=True, overflow="ellipsis")
        table.add_column("count", justify="right", no_wrap=True)
        table.add_column("typically", overflow="fold", ratio=1)
        groups: Dict[str, List[Finding]] = defaultdict(list)
        for f in findings:
            groups[f.code].append(f)
        order = sorted(groups.values(), key=lambda fs: (-max(x.impact.level for x in fs), -len(fs), fs[0].code))
        for fs in order:
            top = max(fs, key=lambda x: x.impact.level)
            table.add_row(
                Text(top.impact.level_name, style=LEVEL_STYLE.get(top.impact.level, "")),
                top.code, top.name, str(len(fs)), escape(top.impact.typical),
            )
        console.print(table)
    safe = sum(1 for f in findings if f.fix is not None and f.fix.applicable and f.fix.applicability is not UNSAFE)
    unsafe = sum(1 for f in findings if f.fix is not None and f.fix.applicable and f.fix.applicability is UNSAFE)
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
    console.print(Text(line, style="bold"))


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
