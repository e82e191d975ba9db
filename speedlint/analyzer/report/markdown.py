"""`--output-format markdown`: a performance review document (GitHub-flavoured Markdown).

For `check`: a summary (files, findings by impact, the bottleneck class that dominates), an
estimate of the combined gain derived from the rules' impact records, the top findings grouped by
bottleneck class and ranked by impact (location, call chain, code excerpt, why it is slow, typical
gain, what `fix` does about it), the rest summarised per rule, and the commands to apply and verify.
For `fix`: per file the unified diff (preview) or what was written (`--apply`).

The document renders on GitHub without raw HTML: table cells escape pipes and newlines, inline code
uses a backtick run longer than any in the code, and code fences are longer than any backtick run in
the code they hold. A bottleneck class is the rule's category (`Rule.category_title`).
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple, Type

from speedlint.analyzer.diffkeys import unified_diff
from speedlint.analyzer.report.ranking import EPOCH, EVAL, PLACE_WORDS, Gain, from_training, gain_of, group_key, rank_key, runs_where, typical_text
from speedlint.analyzer.report.text import fix_counts, ranked_by_rule
from speedlint.analyzer.rule import HIGH, LEVEL_NAMES, LOW, MEDIUM, UNSAFE, Diagnostic, Finding, Rule
from speedlint.analyzer.sources import source_lines

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.findings import FixOutcome
    from speedlint.analyzer.report.inputs import CheckRun, FixesRun

#: Findings shown in full (the costliest first, at most PER_RULE of one rule); the rest go to a table.
FULL_LIMIT = 20
PER_RULE = 3
#: Locations listed per rule in the summary table of the rest.
LOCATIONS_LIMIT = 10
#: Lines of code around the flagged line in an excerpt.
EXCERPT_LINES = 8

LEVELS = (HIGH, MEDIUM, LOW)
OTHER = "Other"
SCRIPT_PLACEHOLDER = "path/to/train.py"
_MAIN_GUARD = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)
_CHAIN_SUFFIX = re.compile(r"\s\(runs (?P<kind>[^:()]+): .*\)\s*$", re.S)
_PLACE_SUFFIX = re.compile(r"\s\(runs (?P<place>[^:()]+)\)\s*$")


# -- escaping --------------------------------------------------------------------------------------
#: escaped outside code spans: emphasis, links, HTML, tables, strikethrough, entities; `_` only where
#: it could start or end emphasis (not inside `num_workers`)
_SPECIAL = re.compile(r"([\\*\[\]<|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|&(?=#?\w+;))")
_TICKS = re.compile(r"`+")


def code_span(text: str) -> str:
    """`text` as inline code, whatever backticks it holds."""
    text = " ".join(text.split())
    longest = max((len(m.group()) for m in _TICKS.finditer(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def inline(text: str) -> str:
    """Text with `code spans` (as in rule messages and docs) as one line of Markdown: the code
    spans are kept, everything else is escaped so that it renders as written."""
    text = " ".join(text.split())
    out: List[str] = []
    pos = 0
    while pos < len(text):
        m = _TICKS.search(text, pos)
        if m is None:
            out.append(_SPECIAL.sub(r"\\\g<0>", text[pos:]))
            break
        out.append(_SPECIAL.sub(r"\\\g<0>", text[pos:m.start()]))
        close = re.compile(rf"(?<!`){m.group()}(?!`)").search(text, m.end())
        if close is None:  # an unmatched run: literal backticks
            out.append("\\`" * len(m.group()))
            pos = m.end()
        else:
            out.append(text[m.start():close.end()])
            pos = close.end()
    return "".join(out)


def paragraph(text: str) -> str:
    """`inline(text)` that may start a line: not read as a heading, list, quote or rule."""
    line = inline(text)
    if re.match(r"[#>=+-]", line):
        return "\\" + line
    return re.sub(r"^(\d{1,9})([.)])(?=\s|$)", r"\1\\\2", line)


def cell(markdown: str) -> str:
    """A table cell from inline Markdown: one line, every pipe escaped (inside code spans too,
    which GitHub requires in tables)."""
    return re.sub(r"(?<!\\)\|", r"\\|", " ".join(markdown.split())) or " "


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> List[str]:
    """A GitHub table; headers and cells are inline Markdown."""
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def fence(code: str, info: str = "") -> List[str]:
    """A fenced code block longer than any backtick run in `code`."""
    longest = max((len(m.group()) for m in _TICKS.finditer(code)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [ticks + info, *code.rstrip("\n").split("\n"), ticks]


def language(path: str) -> str:
    return "python" if path == "-" or Path(path).suffix in (".py", ".pyi", ".ipynb") else ""


def _plural(n: int, word: str, many: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _counted(codes: Iterable[str]) -> str:
    """`SPD101 ×2, SPD401`: rule codes with how often they occur, by code."""
    return ", ".join(f"{code} ×{n}" if n > 1 else code for code, n in sorted(Counter(codes).items()))


def _shell(paths: Sequence[str]) -> str:
    return " ".join(shlex.quote(p) for p in paths) or "."


# -- rules and bottleneck classes ------------------------------------------------------------------
def _rules() -> Dict[str, Type[Rule]]:
    from speedlint.analyzer.registry import all_rules

    return {r.code: r for r in all_rules()}


def bottleneck(f: Finding, rules: Dict[str, Type[Rule]]) -> str:
    rule = rules.get(f.code)
    return rule.category_title() if rule is not None else OTHER


def _level_counts(findings: Sequence[Finding]) -> Counter:
    return Counter(f.impact.level for f in findings)


def classes_by_weight(findings: Sequence[Finding], rules: Dict[str, Type[Rule]]) -> List[Tuple[str, List[Finding]]]:
    """Bottleneck classes, the dominant first: by expected cost (`ranking.group_key`: the
    costliest finding, impact times how hot its code is, then the summed cost)."""
    groups: Dict[str, List[Finding]] = defaultdict(list)
    for f in findings:
        groups[bottleneck(f, rules)].append(f)
    return sorted(groups.items(), key=lambda item: group_key(item[1]))


def _levels_text(findings: Sequence[Finding]) -> str:
    counts = _level_counts(findings)
    return ", ".join(f"{counts[level]} {LEVEL_NAMES[level]}" for level in LEVELS if counts[level])


# -- the estimate (the gains are read by `ranking.gain_of`) -----------------------------------------
def _factor(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2f}".rstrip("0").rstrip(".")


def _range(low: float, high: float) -> str:
    return f"{_factor(low)}x" if _factor(low) == _factor(high) else f"{_factor(low)}-{_factor(high)}x"


SCENARIOS = (
    ("input-bound", "Input-bound: the GPU waits for batches", "training steps/s"),
    ("compute-bound", "Compute-bound: the training step itself is the limit", "training steps/s"),
    ("eval", "Evaluation loops", "eval throughput"),
)


def _scenarios(f: Finding, rules: Dict[str, Type[Rule]], gain: Gain) -> Tuple[str, ...]:
    """Where a finding's gain applies: input-pipeline gains when the job is input-bound, the others
    when it is compute-bound, gains that matter `always` in both; eval gains to eval loops."""
    when = f.impact.when.lower()
    if gain.scope == "eval" or "evaluation" in when or runs_where(f) == EVAL:
        return ("eval",)
    rule = rules.get(f.code)
    if when.startswith("always"):
        return ("input-bound", "compute-bound")
    if "input-bound" in when or (rule is not None and rule.category() == "data"):
        return ("input-bound",)
    return ("compute-bound",)


def estimate_lines(findings: Sequence[Finding], rules: Dict[str, Type[Rule]]) -> List[str]:
    per: Dict[str, Dict[str, Tuple[float, float, Finding]]] = {key: {} for key, _, _ in SCENARIOS}
    unquantified: Dict[str, Finding] = {}
    once_per_epoch: Dict[str, Finding] = {}
    for f in sorted(findings, key=rank_key):
        gain = gain_of(f.impact.typical)
        if gain is None:
            unquantified.setdefault(f.code, f)
            continue
        if gain.scope == "train" and runs_where(f) == EPOCH and "epoch" not in f.impact.typical.lower():
            once_per_epoch.setdefault(f.code, f)  # a per-step gain: not what once per epoch costs
            continue
        for key in _scenarios(f, rules, gain):
            low, high, first = per[key].get(f.code, (gain.low, gain.high, f))
            per[key][f.code] = (max(low, gain.low), max(high, gain.high), first)
    lines = ["## Estimated gain", ""]
    rows = []
    for key, title, unit in SCENARIOS:
        if not per[key]:
            continue
        entries = sorted(per[key].items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))
        low = max(v[0] for _, v in entries)
        high = max(v[1] for _, v in entries)
        basis = ", ".join(
            f"{code_span(code)} {_range(lo, hi)}" + (" (GPU)" if "gpu" in f.impact.when.lower() else "")
            for code, (lo, hi, f) in entries
        )
        rows.append([inline(title), f"**{_range(low, high)}** {unit}", basis])
    if rows:
        lines += table(["if the job is", "estimated speed-up", "from (per rule)"], rows)
        lines += [
            "",
            "How this was estimated: each rule's impact record states a typical range (with its evidence,"
            " below each finding). A job is limited by one thing at a time and fixes for the same"
            " bottleneck overlap, so the ranges are not multiplied: the estimate runs from the largest low"
            " end to the largest high end of the rules that apply in that situation. Input-pipeline"
            " fixes pay off when the job is input-bound, device-side fixes when it is compute-bound;"
            " rules marked (GPU) buy little or nothing on a CPU-only machine. This is a static"
            " estimate, not a measurement: `speedlint verify` runs your script before and after the"
            " fixes and measures the real speed-up.",
            "",
        ]
        conditions: Dict[str, str] = {}  # the first situation's (training before evaluation)
        for key in per:
            for code, (_, _, f) in per[key].items():
                conditions.setdefault(code, f.impact.when)
        lines.append("What each range assumes (from the impact records):")
        lines.append("")
        lines += [f"- {code_span(code)}: {inline(when)}" for code, when in sorted(conditions.items())]
        lines.append("")
    else:
        lines += ["The findings' impact records give no speed-up factor to estimate from.", ""]
    if unquantified:
        listed = "; ".join(f"{code_span(code)} ({inline(f.impact.typical)})" for code, f in sorted(unquantified.items()))
        lines += [f"Not in the estimate (no speed-up factor in the record): {listed}.", ""]
    epoch_only = sorted(code for code in once_per_epoch if not any(code in per[key] for key in per))
    if epoch_only:
        listed = ", ".join(code_span(code) for code in epoch_only)
        lines += [f"Not in the estimate (their code runs once per epoch, their typical range is per step): {listed}.", ""]
    return lines


# -- findings --------------------------------------------------------------------------------------
def select_full(findings: Sequence[Finding]) -> Tuple[List[Finding], List[Finding]]:
    """(shown in full, summarised): the costliest findings, at most PER_RULE of each rule."""
    groups = ranked_by_rule(findings)
    candidates = [(rank_key(f)[:3], rank, f.sort_key(), f) for rank, fs in enumerate(groups) for f in fs[:PER_RULE]]
    chosen = [c[-1] for c in sorted(candidates, key=lambda c: c[:3])[:FULL_LIMIT]]
    picked = {id(f) for f in chosen}
    return chosen, [f for fs in groups for f in fs if id(f) not in picked]


def excerpt(source: str, f: Finding) -> Tuple[int, str]:
    """(first line number, code) around a finding: a line before, the flagged lines, a line after.
    `source` is the analysed text (a notebook's cells together); the number is the finding's own
    (a line of its cell in a notebook), and the excerpt stays inside that cell."""
    lines = source_lines(source)
    at, offset = f.source_line, f.cell_offset
    if not 0 < at <= len(lines):
        return 0, ""
    first = max(1 + offset, at - 1)
    last = min(len(lines), max(f.end_line + offset, at) + 1, first + EXCERPT_LINES - 1)
    if f.cell is not None:  # no stand-ins: the next cell's separator, a magic's inert line
        while last > at and _STAND_IN.match(lines[last - 1]):
            last -= 1
        while first < at and _STAND_IN.match(lines[first - 1]):
            first += 1
    return first - offset, textwrap.dedent("\n".join(lines[first - 1:last])).strip("\n")


#: What a notebook's analysed text holds in place of a cell boundary or an IPython magic.
_STAND_IN = re.compile(r"^\s*pass  # (speedlint notebook cell \d+|IPython, cell \d+ line \d+)$")


def fix_sentence(f: Finding) -> str:
    fix = f.fix
    if fix is None:
        return f"advice only: no automatic fix (`speedlint explain {f.code}`)."
    title = inline(fix.title)
    if not fix.applicable:
        return f"advice only, a manual change: {title}."
    if fix.applicability is UNSAFE:
        return (
            f"`speedlint fix --apply --unsafe-fixes` makes this change: {title}."
            " Unsafe: it may change numerics, resources or behaviour; review the diff."
        )
    return f"`speedlint fix --apply` makes this change: {title} (safe: keeps the results)."


def _fix_kind(f: Finding) -> str:
    if f.fix is None or not f.fix.applicable:
        return "advice"
    return "unsafe fix" if f.fix.applicability is UNSAFE else "safe fix"


def why_text(rule: Optional[Type[Rule]]) -> str:
    """The first paragraph of the rule's "Why is this slow?" section."""
    if rule is None:
        return ""
    body = rule.doc_section("Why is this slow?")
    return inline(body.split("\n\n")[0]) if body else ""


def finding_lines(
    number: int, f: Finding, rules: Dict[str, Type[Rule]], sources: Dict[str, str], explained: Dict[str, int]
) -> List[str]:
    rule = rules.get(f.code)
    message = f.message
    hot = None
    if f.related:
        m = _CHAIN_SUFFIX.search(message)
        if m:
            message, hot = message[: m.start()], m["kind"]
    local = _PLACE_SUFFIX.search(message)  # the place the engine added: said once, on the Runs line
    if local:
        message = message[: local.start()]
    lines = [
        f"#### {number}. {f.code} {code_span(f.name)}: {LEVEL_NAMES.get(f.impact.level, '?')} impact",
        "",
        paragraph(message),
        "",
        f"- **Where:** {code_span(f.location)}",
    ]
    place = runs_where(f)
    if f.related:
        hops = [f"{code_span(f'{p}:{n}')} {code_span(call)}" for p, n, call in f.related]
        label = f"Runs {hot} through" if hot else "Call chain"
        lines.append(f"- **{inline(label)}:** " + " → ".join(hops + [code_span(f"{f.path}:{f.line}")]))
    if local and not (f.related and hot):
        lines.append(f"- **Runs:** {inline(local['place'])}.")
    elif place is not None and not (f.related and hot):
        lines.append(f"- **Runs:** {PLACE_WORDS[place]}.")
    if f.code in explained:
        lines.append(f"- **Why it is slow:** as for #{explained[f.code]} ({f.code}).")
    else:
        why = why_text(rule)
        if why:
            lines.append(f"- **Why it is slow:** {why}")
            explained[f.code] = number
    gain = f"- **Typical gain:** {inline(typical_text(f))}; matters {inline(f.impact.when)}."
    if f.impact.evidence:
        gain += f" Evidence: {inline(f.impact.evidence)}."
    lines += [gain, f"- **Fix:** {fix_sentence(f)}", ""]
    first, code = excerpt(sources.get(f.path, ""), f)
    if code:
        last = first + code.count("\n")
        where = f"line {first}" if first == last else f"lines {first}-{last}"
        if f.cell is not None:
            where = f"cell {f.cell}, {where}"
        lines += [f"{code_span(f.path)}, {where}:", "", *fence(code, language(f.path)), ""]
    return lines


def rest_lines(rest: Sequence[Finding], rules: Dict[str, Type[Rule]]) -> List[str]:
    rows = []
    for fs in ranked_by_rule(rest):
        top = fs[0]
        locations = ", ".join(code_span(f"{f.path}:{f.line}") for f in sorted(fs, key=Finding.sort_key)[:LOCATIONS_LIMIT])
        if len(fs) > LOCATIONS_LIMIT:
            locations += f" and {len(fs) - LOCATIONS_LIMIT} more"
        kinds = sorted({_fix_kind(f) for f in fs})
        rows.append([
            top.impact.level_name, f"{top.code} {code_span(top.name)}", inline(bottleneck(top, rules)),
            str(len(fs)), ", ".join(kinds), inline(typical_text(top)), locations,
        ])
    return [
        "## More findings, per rule",
        "",
        f"{_plural(len(rest), 'more finding')}, not shown in full above:",
        "",
        *table(["impact", "rule", "bottleneck", "count", "fix", "typically", "locations"], rows),
        "",
    ]


def errors_lines(diagnostics: Sequence[Diagnostic], title: str) -> List[str]:
    if not diagnostics:
        return []
    rows = [[code_span(d.path), d.kind, inline(d.message)] for d in diagnostics]
    return [f"## {title}", "", *table(["file", "kind", "message"], rows), ""]


def verify_script(sources: Dict[str, str], preferred: Iterable[str]) -> Optional[str]:
    """The training script to verify: the one file among `preferred` (files with findings or fixes,
    and the starts of their call chains) that runs as a script; None when there is not exactly one."""
    scripts = sorted({p for p in preferred if p != "-" and _MAIN_GUARD.search(sources.get(p, ""))})
    return scripts[0] if len(scripts) == 1 else None


def apply_commands(target: str, script: Optional[str], safe: int, unsafe: int, diffs: bool = True) -> List[str]:
    """The commands that write the fixes, measured on the training script first (`--verify`);
    with `diffs`, also the ones that show them."""
    shown = shlex.quote(script) if script else SCRIPT_PLACEHOLDER
    lines = [f"# {SCRIPT_PLACEHOLDER}: your training script"] if script is None and (safe or unsafe) else []
    if safe:
        if diffs:
            lines.append(f"speedlint fix {target}   # the safe fixes as a diff; writes nothing")
        lines += [
            f"speedlint fix {target} --apply --verify {shown}   # measure them on the script, write them if the verdict allows",
            f"speedlint fix {target} --apply   # or write them without measuring",
        ]
    if unsafe:
        if diffs:
            lines.append(f"speedlint fix {target} --unsafe-fixes   # with the {_plural(unsafe, 'unsafe fix', 'unsafe fixes')}: review this diff")
        lines.append(f"speedlint fix {target} --apply --unsafe-fixes --verify {shown}   # the same, unsafe fixes included")
    return lines


VERIFY_NOTE = (
    "`--verify` runs the script as it is and with the fixes in a temporary copy (fresh processes,"
    " same seeds), compares steps/s and losses, and writes only when the verdict allows it;"
    " `speedlint verify SCRIPT` measures without writing. The script's own arguments go after `--`."
)


# -- check -----------------------------------------------------------------------------------------
def check_document(result: CheckRun, paths: Sequence[str] = (".",)) -> str:
    """The review document for a check result."""
    rules = _rules()
    findings = list(result.findings)
    diagnostics = list(result.diagnostics)
    errors = [d for d in diagnostics if d.kind != "warning"]
    sources = {r.path: r.source or "" for r in result.files}
    files = len(result.files)
    lines = ["# speedlint performance review", ""]
    if not findings:
        text = f"Checked {_plural(files, 'file')}: no findings."
        if errors:
            text += f" {_plural(len(errors), 'file')} could not be checked (below)."
        lines += [text, ""]
        lines += errors_lines(diagnostics, "Files that could not be checked")
        return "\n".join(lines).rstrip("\n") + "\n"

    classes = classes_by_weight(findings, rules)
    with_findings = len({f.path for f in findings})
    safe, unsafe = fix_counts(findings)
    training = from_training(findings)  # the dominant bottleneck is the training code's
    dominant, dominant_findings = classes_by_weight(training, rules)[0]
    scope = " of the training code (benchmark and test scripts left out)" if len(training) < len(findings) else ""
    summary = (
        f"Checked {_plural(files, 'file')}: **{_plural(len(findings), 'finding')}** ({_levels_text(findings)} impact)"
        f" in {_plural(with_findings, 'file')}. The dominant bottleneck{scope} is **{inline(dominant)}**"
        f" ({_plural(len(dominant_findings), 'finding')}: {_levels_text(dominant_findings)} impact)."
    )
    if errors:
        summary += f" {_plural(len(errors), 'file')} could not be checked (below)."
    advice = len(findings) - safe - unsafe
    if safe or unsafe:
        fixes = (
            f"`speedlint fix --apply` makes {_plural(safe, 'safe change')}, `--unsafe-fixes` {unsafe} more;"
            f" {_plural(advice, 'finding')} {'is' if advice == 1 else 'are'} advice for a manual change."
        )
    else:
        fixes = "None of them has an automatic fix: each is advice for a manual change."
    lines += ["## Summary", "", summary, "", fixes, ""]
    rows = []
    for title, fs in classes:
        counts = _level_counts(fs)
        rows.append([inline(title), str(len(fs)), *(str(counts[level]) for level in LEVELS), _counted(f.code for f in fs)])
    lines += table(["bottleneck", "findings", "high", "medium", "low", "rules"], rows)
    lines.append("")
    lines += estimate_lines(training, rules)  # what the training job gains

    full, rest = select_full(findings)
    order = {title: i for i, (title, _) in enumerate(classes)}
    shown = sorted(full, key=lambda f: order[bottleneck(f, rules)])  # stable: ranked within a class
    lines += ["## Findings", ""]
    if rest:
        lines += [f"The {_plural(len(full), 'costliest finding')} in full; {len(rest)} more are summarised per rule below.", ""]
    explained: Dict[str, int] = {}
    current = None
    for number, f in enumerate(shown, start=1):
        title = bottleneck(f, rules)
        if title != current:
            current = title
            lines += [f"### {inline(title)}", ""]
        lines += finding_lines(number, f, rules, sources, explained)
    if rest:
        lines += rest_lines(rest, rules)
    lines += errors_lines(diagnostics, "Files that could not be checked")

    roots = {p for f in findings for p, _, _ in f.related[:1]}
    script = verify_script(sources, {f.path for f in findings} | roots)
    target = _shell(paths)
    commands = apply_commands(target, script, safe, unsafe)
    commands.append(f"speedlint check {target} --output-format markdown   # this review again")
    lines += ["## Apply and verify", "", *fence("\n".join(commands), "sh"), ""]
    if safe or unsafe:
        lines += [VERIFY_NOTE, ""]
    else:
        lines += ["No finding has an automatic fix: each one above is advice for a manual change.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# -- fix -------------------------------------------------------------------------------------------
def _fix_rows(outcomes: Sequence[FixOutcome]) -> List[List[str]]:
    rows = []
    for o in outcomes:
        rows.append([code_span(o.path), str(len(o.applied)), _counted(f.code for f in o.applied)])
    return rows


def _applied_items(outcome: FixOutcome) -> List[str]:
    titles = Counter((f.code, f.name, f.fix.title if f.fix else "", _fix_kind(f)) for f in outcome.applied)
    return [
        f"- {code} {code_span(name)}: {inline(title)} ({kind}{f', ×{n}' if n > 1 else ''})"
        for (code, name, title, kind), n in sorted(titles.items())
    ]


def fix_document(run: FixesRun, apply: bool, paths: Sequence[str] = (".",)) -> str:
    """`speedlint fix --output-format markdown`: the diffs (preview) or what was written (--apply)."""
    changed = run.changed if not apply else [o for o in run.changed if o.path in run.written]
    n = sum(len(o.applied) for o in changed)
    unsafe_used = any(f.fix is not None and f.fix.applicability is UNSAFE for o in changed for f in o.applied)
    unsafe_left = sum(o.unsafe_available for o in run.outcomes)
    remaining = sum(1 for o in run.outcomes for f in o.remaining if f.fix is None or not f.fix.applicable)
    diagnostics: List[Diagnostic] = [d for o in run.outcomes for d in o.diagnostics] + list(run.diagnostics)
    target = _shell(paths)
    lines = ["# speedlint fixes" + (" (applied)" if apply else " (preview)"), ""]
    if not changed:
        lines += ["Nothing to fix." + (f" {_plural(unsafe_left, 'unsafe fix', 'unsafe fixes')} available with `--unsafe-fixes`." if unsafe_left else ""), ""]
    elif apply:
        lines += [f"Wrote {_plural(n, 'fix', 'fixes')} to {_plural(len(changed), 'file')}.", ""]
    else:
        scope = "safe and unsafe fixes (`--unsafe-fixes`)" if unsafe_used else "safe fixes only"
        lines += [f"{_plural(n, 'fix', 'fixes')} in {_plural(len(changed), 'file')} would be written ({scope}); nothing has been written yet.", ""]
    if changed:
        lines += table(["file", "fixes", "rules"], _fix_rows(changed))
        lines.append("")
    if not apply:
        for o in changed:
            diff = unified_diff(o).replace("\r\n", "\n").replace("\r", "\n")
            lines += [f"## {code_span(o.path)}", "", *_applied_items(o), "", *fence(diff, "diff"), ""]
    left = []
    if unsafe_left and changed:
        left.append(f"{_plural(unsafe_left, 'more fix', 'more fixes')} with `--unsafe-fixes` (AMP, tuned DataLoader and the like: review their diff).")
    if remaining:
        left.append(f"{_plural(remaining, 'finding')} left for a manual change (advice): `speedlint check {target} --output-format markdown` explains {'it' if remaining == 1 else 'them'}.")
    if left:
        lines += ["## Not fixed automatically", "", *(f"- {item}" for item in left), ""]
    lines += errors_lines(diagnostics, "Files that could not be fixed")
    if changed and apply:
        commands = ["git diff   # review what was written", f"speedlint check {target} --output-format markdown   # what is left"]
        lines += ["## Next", "", *fence("\n".join(commands), "sh"), ""]
        lines += [
            "To measure what was written, run the previous version against the new one:"
            " `speedlint verify OLD_SCRIPT --after SCRIPT` (before `--apply`, `speedlint fix --apply --verify SCRIPT` does both).",
            "",
        ]
    elif changed:
        sources = {o.path: o.original for o in changed}
        safe = sum(1 for o in changed for f in o.applied if f.fix is not None and f.fix.applicability is not UNSAFE)
        commands = apply_commands(target, verify_script(sources, sources), safe, n - safe, diffs=False)
        lines += ["## Verify and apply", "", *fence("\n".join(commands), "sh"), "", VERIFY_NOTE, ""]
    return "\n".join(lines).rstrip("\n") + "\n"

