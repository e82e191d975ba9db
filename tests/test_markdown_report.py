"""`--output-format markdown`: the performance review document (check) and the fix document.

Every document is parsed with markdown-it-py (CommonMark plus GitHub tables) and checked for what
a reader on GitHub sees: the headings, tables whose rows all have the header's number of cells
(in the source, before the parser pads or cuts them), code fences with the right language that
hold exactly the code, and no raw HTML.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from conftest import FIXTURES
from speedlint.analyzer.engine import FileResult
from speedlint.analyzer.registry import all_rules
from speedlint.analyzer.report import markdown as md_report
from speedlint.analyzer.report.markdown import check_document, code_span, fence, gain_of, inline, paragraph, table
from speedlint.analyzer.rule import HIGH, LOW, MEDIUM, Finding, Impact
from speedlint.analyzer.runner import RunResult
from test_output_formats import BAD, BAD_COL, BAD_LINE, speedlint

MD = MarkdownIt("commonmark").enable("table")

TRAIN = '''import torch
import torch.nn.functional as F


def train(model, loader, optimizer, device):
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        print(loss.item())


if __name__ == "__main__":
    train(None, [], None, "cuda")
'''


# -- reading a document the way GitHub does --------------------------------------------------------
class Doc:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = MD.parse(text)
        html = [t for t in self.tokens if t.type == "html_block"]
        html += [c for t in self.tokens if t.type == "inline" for c in t.children or [] if c.type == "html_inline"]
        assert not html, f"raw HTML in the document: {html[:3]}"

    @property
    def headings(self):
        return [(int(t.tag[1]), text_of(self.tokens[i + 1])) for i, t in enumerate(self.tokens) if t.type == "heading_open"]

    def titles(self, level):
        return [text for lvl, text in self.headings if lvl == level]

    @property
    def fences(self):
        return [(t.info, t.content) for t in self.tokens if t.type == "fence"]

    @property
    def tables(self):
        """Each table as rows of cell texts (as rendered: escapes resolved, code spans unwrapped),
        after checking that every source row has the header's number of cells."""
        out = []
        lines = self.text.split("\n")
        for i, t in enumerate(self.tokens):
            if t.type != "table_open":
                continue
            source = lines[t.map[0]:t.map[1]]
            widths = {len(re.split(r"(?<!\\)\|", row.strip()[1:-1])) for row in source}
            assert len(widths) == 1, f"rows with different numbers of cells:\n" + "\n".join(source)
            rows, row = [], None
            for tok in self.tokens[i + 1:]:
                if tok.type == "table_close":
                    break
                if tok.type == "tr_open":
                    row = []
                elif tok.type == "tr_close":
                    rows.append(row)
                elif tok.type == "inline":
                    row.append(text_of(tok))
            assert len(rows) == len(source) - 1  # the delimiter row is not a row
            out.append(rows)
        return out

    def paragraphs(self):
        return [text_of(self.tokens[i + 1]) for i, t in enumerate(self.tokens) if t.type == "paragraph_open"]


def text_of(inline_token) -> str:
    """What a reader sees of an inline token: text and code, without the markup."""
    parts = []
    for c in inline_token.children or []:
        if c.type in ("text", "code_inline"):
            parts.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def rendered_inline(markdown: str) -> str:
    (para,) = [t for t in MD.parse(markdown) if t.type == "inline"]
    return text_of(para)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "data.py").write_text(BAD)
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    (tmp_path / "src" / "clean.py").write_text("import torch\n\nx = torch.zeros(3)\n")
    return tmp_path


# -- check: a small project ------------------------------------------------------------------------
def test_small_project_review(project):
    r = speedlint("check", "src", "--output-format", "markdown", cwd=project, columns=40)
    assert r.returncode == 1, r.stderr
    assert "\x1b[" not in r.stdout
    doc = Doc(r.stdout)
    assert doc.titles(1) == ["speedlint performance review"]
    assert doc.titles(2) == ["Summary", "Estimated gain", "Findings", "Apply and verify"]
    assert any(len(line) > 40 for line in r.stdout.splitlines())  # not wrapped at the terminal width

    findings = json.loads(speedlint("check", "src", "--output-format", "json", cwd=project).stdout)["findings"]
    codes = {f["code"] for f in findings}
    assert {"SPD401", "SPD201", "SPD403"} <= codes
    # every finding in full (a small project), numbered, grouped by bottleneck class
    full = doc.titles(4)
    assert len(full) == len(findings)
    assert [int(t.split(".")[0]) for t in full] == list(range(1, len(findings) + 1))
    classes = doc.titles(3)
    assert "Memory" in classes and "Host-device syncs and transfers" in classes
    assert len(classes) == len(set(classes))  # each class once

    summary, estimate = doc.tables[0], doc.tables[1]
    assert summary[0] == ["bottleneck", "findings", "high", "medium", "low", "rules"]
    assert sum(int(row[1]) for row in summary[1:]) == len(findings)
    assert {row[0] for row in summary[1:]} == set(classes)
    assert f"{len(findings)} findings" in doc.paragraphs()[0]
    assert estimate[0] == ["if the job is", "estimated speed-up", "from (per rule)"]
    assert all(re.search(r"\d(\.\d+)?(-\d+(\.\d+)?)?x ", row[1]) for row in estimate[1:])

    # the gc.collect() finding: location, excerpt in a python fence, why, gain, what fix does
    section = r.stdout.split("SPD401 `gc-collect-in-hot-path`")[1].split("\n#### ")[0]
    assert f"**Where:** `src/data.py:{BAD_LINE}:{BAD_COL}`" in section
    assert "**Why it is slow:** A full garbage collection" in section
    assert "**Typical gain:** 10-500 ms per call" in section
    assert "`speedlint fix --apply` makes this change: Remove `gc.collect()`" in section
    python = [code for info, code in doc.fences if info == "python"]
    assert any(code.splitlines()[1] == "gc.collect()" for code in python)
    assert len(python) == len(findings)
    # advice-only findings say so
    sync = r.stdout.split("SPD201 `host-sync-in-training-step`")[1].split("\n#### ")[0]
    assert "**Fix:** advice only" in sync

    (commands,) = [code for info, code in doc.fences if info == "sh"]
    assert "speedlint fix src --apply --verify src/train.py" in commands  # the one script with a main guard
    assert "speedlint fix src --apply   #" in commands
    assert "speedlint check src --output-format markdown" in commands


def test_no_findings_is_a_short_valid_document(project):
    r = speedlint("check", "src/clean.py", "--output-format", "markdown", cwd=project)
    assert r.returncode == 0, r.stderr
    doc = Doc(r.stdout)
    assert doc.headings == [(1, "speedlint performance review")]
    assert doc.paragraphs() == ["Checked 1 file: no findings."]
    assert doc.tables == [] and doc.fences == []


def test_file_errors_are_listed_and_exit_1(project):
    (project / "src" / "broken.py").write_text("import torch\ndef f(:\n    gc.collect()\n")
    r = speedlint("check", "src/broken.py", "src/clean.py", "--output-format", "markdown", cwd=project)
    assert r.returncode == 1
    doc = Doc(r.stdout)
    assert doc.titles(2) == ["Files that could not be checked"]
    ((header, row),) = doc.tables
    assert header == ["file", "kind", "message"]
    assert row[0] == "src/broken.py" and row[1] == "error" and "syntax" in row[2]


def test_exit_zero_and_output_file(project):
    out = project / "reports" / "review.md"
    r = speedlint("check", "src", "--output-format", "markdown", "--output-file", out, "--exit-zero", cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert Doc(out.read_text(encoding="utf-8")).titles(1) == ["speedlint performance review"]


# -- check: a large project ------------------------------------------------------------------------
HOT = '''import gc

import torch
from torch.utils.data import Dataset


class Frames{i}(Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, index):
        frame = torch.zeros(3)
        gc.collect()
        return frame


def train{i}(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        x = x.cuda()
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        print(loss.item())
        print(y.sum().item())
'''


def test_hundreds_of_findings_stay_readable(tmp_path):
    for i in range(60):
        (tmp_path / f"mod{i:02}.py").write_text(HOT.format(i=i))
    r = speedlint("check", ".", "--output-format", "markdown", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    findings = json.loads(speedlint("check", ".", "--output-format", "json", cwd=tmp_path).stdout)["findings"]
    assert len(findings) >= 200
    doc = Doc(r.stdout)
    assert "More findings, per rule" in doc.titles(2)
    full = doc.titles(4)
    counts = Counter(f["code"] for f in findings)
    assert len(full) == min(md_report.FULL_LIMIT, sum(min(n, md_report.PER_RULE) for n in counts.values()))
    per_rule = {}
    for title in full:
        code = title.split()[1]
        per_rule[code] = per_rule.get(code, 0) + 1
    assert max(per_rule.values()) <= md_report.PER_RULE

    rest = doc.tables[-1]
    assert rest[0] == ["impact", "rule", "bottleneck", "count", "fix", "typically", "locations"]
    assert sum(int(row[3]) for row in rest[1:]) == len(findings) - len(full)
    assert len(rest) - 1 == len(counts)  # one row per rule
    for row in rest[1:]:
        listed = re.findall(r"mod\d\d\.py:\d+", row[6])
        assert len(listed) == min(int(row[3]), md_report.LOCATIONS_LIMIT)
        if int(row[3]) > md_report.LOCATIONS_LIMIT:
            assert row[6].endswith(f"and {int(row[3]) - md_report.LOCATIONS_LIMIT} more")
    assert len(r.stdout.splitlines()) < 600  # a summary, not one section per finding


# -- the call chain of the whole-program analysis --------------------------------------------------
def test_finding_with_a_chain_through_other_modules(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "projects" / "loss_in_another_module", root)
    r = speedlint("check", ".", "--output-format", "markdown", "--no-cache", cwd=root)
    assert r.returncode == 1, r.stderr
    doc = Doc(r.stdout)
    section = r.stdout.split("**Where:** `losses/focal.py:15:27`")[0].rsplit("\n#### ", 1)[1]
    assert section.startswith("1. SPD201")  # a high-impact sync: ranked first
    item = r.stdout.split("**Where:** `losses/focal.py:15:27`")[1].split("\n")[1]
    assert item == (
        "- **Runs on every training step through:** `train.py:33` `self.train_step(...)` → "
        "`train.py:24` `self.criterion(...)` → `losses/focal.py:15`"
    )
    # the chain is a list item of its own, not repeated at the end of the message
    message = [p for p in doc.paragraphs() if p.startswith(".item() waits")]
    assert message and all("(runs" not in p for p in message)
    # every finding here is advice: no fix command to offer, and the document says so
    (commands,) = [code for info, code in doc.fences if info == "sh"]
    assert "--apply" not in commands
    assert "No finding has an automatic fix: each one above is advice for a manual change." in doc.paragraphs()


# -- escaping: pipes, backticks, newlines ----------------------------------------------------------
TRICKY = '''import gc

import torch
from torch.utils.data import Dataset


class Docs(Dataset):
    def __getitem__(self, index):
        gc.collect(); text = """```python | `x` ````"""
        return text
'''


def test_code_with_backticks_and_pipes_keeps_its_fence(tmp_path):
    (tmp_path / "data.py").write_text(TRICKY)
    r = speedlint("check", "data.py", "--output-format", "markdown", "--select", "SPD401", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = Doc(r.stdout)
    (code,) = [code for info, code in doc.fences if info == "python"]
    assert '    gc.collect(); text = """```python | `x` ````"""' in code.splitlines()
    assert doc.titles(2)[-1] == "Apply and verify"  # the fence did not swallow the rest
    assert "\n`````python\n" in r.stdout  # longer than the longest backtick run (4)


def _finding(i, name="odd|name`x", message="uses `a|b` | c\nand *more* <b>", typical="1-2x steps/s | `p|q`"):
    impact = Impact(wastes="w", when="always", typical=typical, level=(HIGH, MEDIUM, LOW)[i % 3])
    return Finding("SPD999", name, message, f"pkg|dir/m`{i}.py", i + 1, 1, i + 1, 5, impact)


def test_table_cells_escape_pipes_backticks_and_newlines():
    findings = [_finding(i) for i in range(30)]
    result = RunResult(files=[FileResult(f.path, [f], source="x = 1\n" * 40) for f in findings])
    doc = Doc(check_document(result, ["src"]))
    rest = doc.tables[-1]
    assert rest[1][1] == "SPD999 odd|name`x"
    assert rest[1][2] == "Other"  # a rule the registry does not know
    assert rest[1][5] == "1-2x steps/s | p|q"
    assert "pkg|dir/m`" in rest[1][6]
    # the message renders as written (emphasis and HTML escaped), on one line
    assert "uses a|b | c and *more* <b>" in doc.paragraphs()


@pytest.mark.parametrize("text, seen", [
    ("plain `code` and more", "plain code and more"),
    ("a|b `x|y` *not emphasis* _nor this_ [not](a link) <not-html> ~~nor~~ &amp; kept",
     "a|b x|y *not emphasis* _nor this_ [not](a link) <not-html> ~~nor~~ &amp; kept"),
    ("an odd ` backtick and `` double `` ticks", "an odd ` backtick and double ticks"),
    ("`` a`b `` and `` `c ``", "a`b and `c"),
    ("snake_case and __dunder__ names, 2 * 3", "snake_case and __dunder__ names, 2 * 3"),
    ("trailing backslash \\", "trailing backslash \\"),
    ("two\nlines", "two lines"),
])
def test_inline_renders_as_written(text, seen):
    assert rendered_inline(inline(text)) == seen


@pytest.mark.parametrize("text", ["1. not a list", "- not a list", "# not a heading", "> not a quote", "+ no", "= no"])
def test_paragraph_never_starts_a_block(text):
    tokens = MD.parse(paragraph(text))
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert text_of(tokens[1]) == text


def test_code_span_and_fence_outlast_backticks():
    for text in ["a`b", "`x", "x``", "```"]:
        assert rendered_inline(code_span(text)) == text
    code = "x = '```'\n````\ny = 1"
    tokens = MD.parse("\n".join(fence(code, "python")) + "\n# after\n")
    assert tokens[0].type == "fence" and tokens[0].info == "python" and tokens[0].content == code + "\n"
    assert tokens[1].type == "heading_open"  # the fence closed where it should
    rows = Doc("\n".join(table(["a|b", "c"], [["`x|y`", "line\nbreak"]])) + "\n").tables
    assert rows == [[["a|b", "c"], ["x|y", "line break"]]]


# -- the estimate ----------------------------------------------------------------------------------
@pytest.mark.parametrize("typical, expected", [
    ("2-10x steps/s on input-bound jobs", (2, 10, "train")),
    ("10-500 ms per call; 1.5-20x epoch time per sample", (1.5, 20, "train")),
    ("5-30% steps/s for small and medium models", (1.05, 1.3, "train")),
    ("5-40% step time", (1 / 0.95, 1 / 0.6, "train")),
    ("up to 2x epoch time", (1, 2, "train")),
    ("1.05-1.3x eval throughput", (1.05, 1.3, "eval")),
    ("10-100x for the looped part of the step", None),  # a part of the step is not the job
    ("O(n^2) copying: seconds to minutes", None),
    ("tens of microseconds per call", None),
])
def test_gain_read_from_typical_ranges(typical, expected):
    gain = gain_of(typical)
    if expected is None:
        assert gain is None
    else:
        assert gain.low == pytest.approx(expected[0]) and gain.high == pytest.approx(expected[1])
        assert gain.scope == expected[2]


def test_every_rule_range_reads_as_a_speedup_or_none():
    read = 0
    for rule in all_rules():
        gain = gain_of(rule.impact.typical)
        if gain is not None:
            read += 1
            assert 1 <= gain.low <= gain.high <= 100, (rule.code, rule.impact.typical)
    assert read >= len(all_rules()) // 2  # most rules state a speed-up the estimate can use


def test_estimate_separates_input_bound_compute_bound_and_eval():
    def f(code, typical, when, path="a.py"):
        return Finding(code, code.lower(), "m", path, 1, 1, 1, 2, Impact("w", when, typical, level=HIGH))

    findings = [
        f("SPD101", "2-10x steps/s on input-bound jobs", "input-bound jobs"),
        f("SPD301", "1.5-3x steps/s", "GPU; compute-bound training"),
        f("SPD403", "1-5% step time", "always; most for large models"),
        f("SPD601", "1.05-1.3x eval throughput", "eval loops"),
        f("SPD404", "O(n^2) copying", "always"),
    ]
    result = RunResult(files=[FileResult("a.py", findings, source="x\n")])
    doc = Doc(check_document(result))
    rows = {row[0].split(":")[0]: row for row in doc.tables[1][1:]}
    assert rows["Input-bound"][1] == "2-10x training steps/s"
    assert "SPD403" in rows["Input-bound"][2] and "SPD301" not in rows["Input-bound"][2]
    assert rows["Compute-bound"][1] == "1.5-3x training steps/s"
    assert "SPD301 1.5-3x (GPU)" in rows["Compute-bound"][2] and "SPD101" not in rows["Compute-bound"][2]
    assert rows["Evaluation loops"][1] == "1.05-1.3x eval throughput"
    text = " ".join(doc.paragraphs())
    assert "SPD404 (O(n^2) copying)" in text  # said to be left out, not silently dropped
    assert "speedlint verify" in text  # a static estimate; verify measures


# -- fix -------------------------------------------------------------------------------------------
def test_fix_preview_markdown(project):
    before = (project / "src" / "data.py").read_text()
    r = speedlint("fix", "src", "--output-format", "markdown", cwd=project)
    assert r.returncode == 1, r.stderr  # a diff to apply
    assert (project / "src" / "data.py").read_text() == before  # nothing written
    doc = Doc(r.stdout)
    assert doc.titles(1) == ["speedlint fixes (preview)"]
    assert "src/data.py" in doc.titles(2) and "Verify and apply" in doc.titles(2)
    diffs = {code.splitlines()[0]: code for info, code in doc.fences if info == "diff"}
    assert "--- a/src/data.py" in diffs
    assert "-        gc.collect()\n" in diffs["--- a/src/data.py"]
    files = doc.tables[0]
    assert files[0] == ["file", "fixes", "rules"]
    assert {row[0] for row in files[1:]} == {line[len("--- a/"):] for line in diffs}
    (commands,) = [code for info, code in doc.fences if info == "sh"]
    assert "speedlint fix src --apply --verify src/train.py" in commands


def test_fix_apply_markdown_summarises_what_was_written(project):
    out = project / "fix.md"
    r = speedlint("fix", "src", "--apply", "--output-format", "markdown", "-o", out, cwd=project)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "gc.collect()" not in (project / "src" / "data.py").read_text()
    doc = Doc(out.read_text(encoding="utf-8"))
    assert doc.titles(1) == ["speedlint fixes (applied)"]
    assert not [info for info, _ in doc.fences if info == "diff"]  # written: `git diff` shows it
    rows = doc.tables[0][1:]
    assert "src/data.py" in {row[0] for row in rows}
    assert doc.paragraphs()[0].startswith("Wrote ")
    again = speedlint("fix", "src", "--output-format", "markdown", cwd=project)
    assert again.returncode == 0
    assert Doc(again.stdout).paragraphs()[0].startswith("Nothing to fix.")


def test_fix_diff_with_backticks_keeps_its_fence(tmp_path):
    (tmp_path / "data.py").write_text(TRICKY)
    r = speedlint("fix", "data.py", "--output-format", "markdown", "--select", "SPD401", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = Doc(r.stdout)
    ((info, diff),) = [(i, c) for i, c in doc.fences if i == "diff"]
    assert '-        gc.collect(); text = """```python | `x` ````"""' in diff.splitlines()
    assert doc.titles(2)[-1] == "Verify and apply"


def test_fix_rejects_unknown_formats_and_stdin_markdown(project):
    r = speedlint("fix", "src", "--output-format", "json", cwd=project)
    assert r.returncode == 2 and "unknown output format" in r.stderr
    r = speedlint("fix", "-", "--output-format", "markdown", cwd=project, input=BAD)
    assert r.returncode == 2 and "stdin" in r.stderr


def test_notebook_findings_show_the_cell_and_its_code(tmp_path):
    """In a notebook the excerpt is the flagged cell's own code, numbered as the cell's lines,
    without the stand-ins the analysis puts for cell boundaries and magics."""
    shutil.copy(FIXTURES / "notebooks" / "train.ipynb", tmp_path / "train.ipynb")
    r = speedlint("check", "train.ipynb", "--output-format", "markdown", "--isolated", "--no-cache", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = Doc(r.stdout)
    assert "`train.ipynb:cell 7:9:9`" in r.stdout  # the SPD401 finding, placed by cell
    code = [content for info, content in doc.fences if "gc.collect()" in content]
    assert code and all("# IPython, cell" not in c and "speedlint notebook cell" not in c for c in code)
    assert re.search(r"`train\.ipynb`, cell 7, lines? \d", r.stdout)
    assert all("# IPython, cell" not in content for _, content in doc.fences)
