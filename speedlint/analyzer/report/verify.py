"""Output of `speedlint verify` and `fix --apply --verify`: progress lines, the rich report, JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Callable, Optional, TextIO

from speedlint.analyzer.report.terminal import Terminal

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.report.inputs import Side, Verification

VERDICT_STYLE = {
    "verified-faster": "bold green",
    "equivalent-not-faster": "bold yellow",
    "diverged": "bold red",
    "crashed": "bold red",
    "inconclusive": "bold magenta",
}


def progress_printer(enabled: bool = True) -> Callable[[str], None]:
    """A progress callback for `verify()`: one dim line per run, on stderr."""
    term = Terminal(sys.stderr)

    def say(message: str) -> None:
        if enabled:
            term.line([(f"speedlint verify: {message}", "dim")])

    return say


def _rate(side: Optional[Side]) -> str:
    if side is None or side.median is None:
        return "-"
    if len(side.rates) > 1:
        return f"{side.median:.2f} ({side.low:.2f}-{side.high:.2f})"
    return f"{side.median:.2f}"


def _share(side: Optional[Side]) -> str:
    if side is None or side.data_wait_share is None:
        return "-"
    return f"{side.data_wait_share:.0%}"


def print_verify(result: Verification, out: Optional[TextIO] = None) -> None:
    from rich.table import Table

    console = Terminal(out or sys.stdout).console
    args = " ".join(result.args)
    console.print(f"[bold]speedlint verify[/bold] {result.script}" + (f" -- {args}" if args else ""))
    if result.mode == "after":
        console.print(f"  comparing with: {result.after_file}")
    elif result.fixes:
        console.print(f"  fixes applied in a temporary copy ({len(result.fixes)}):")
        for f in result.fixes:
            console.print(f"    {f.path}:{f.line} {f.code} {f.title} [dim]({f.applicability})[/dim]")
    s = result.settings
    if result.runs:
        console.print(
            f"  {s['repeats']} alternating run(s) each, warm-up {s['warmup']} + {s['steps']} optimizer steps, seed {s['seed']}"
        )
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("")
        table.add_column("before", justify="right")
        table.add_column("after", justify="right")
        table.add_row("steps/s, median (min-max)", _rate(result.before), _rate(result.after))
        table.add_row("data-loader wait", _share(result.before), _share(result.after))
        table.add_row(
            "steps timed",
            str(result.before.steps) if result.before else "-",
            str(result.after.steps) if result.after else "-",
        )
        console.print(table)
        if result.speedup is not None:
            console.print(f"  speedup: [bold]{result.speedup:.2f}x[/bold]")
        if result.loss_max_deviation is not None:
            where = f" at step {result.loss_max_deviation_step}" if result.loss_max_deviation_step else ""
            console.print(
                f"  losses: {result.loss_steps_compared} steps compared, largest relative deviation "
                f"{result.loss_max_deviation:.3g}{where} (tolerance {result.tolerance:g}, {result.tolerance_kind})"
            )
    for note in result.notes:
        console.print(f"  [dim]note: {note}[/dim]")
    if result.verdict == "crashed":
        failed = [r for r in result.runs if r.failed]
        if failed and failed[0].stderr_tail:
            console.print("  [bold]the after-run's error output (last lines):[/bold]")
            for line in failed[0].stderr_tail.splitlines():
                console.print(f"    {line}", markup=False)
    style = VERDICT_STYLE.get(result.verdict, "bold")
    console.print(f"[{style}]{result.verdict}[/{style}]: {result.reason} (exit {result.exit_code})")


def emit_verify(result: Verification, as_json: bool = False) -> int:
    """Print a verification result; returns its exit code."""
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        print_verify(result)
    return int(result.exit_code)


def emit_fix_verify_refusal(result: Verification) -> None:
    Terminal(sys.stderr).console.print(
        f"[bold red]speedlint fix: not applied[/bold red]: verification verdict is {result.verdict}"
        + (" (slower)" if result.verdict == "equivalent-not-faster" and result.slower else "")
        + "; your files are unchanged"
    )


