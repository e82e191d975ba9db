"""Jupyter notebooks (`.ipynb`, nbformat 4): checked as one Python text, reported per cell, fixed
cell by cell.

**The text that is analysed.** The code cells whose code is Python, in order, one after the
other; between two cells a separator statement (`pass  # speedlint notebook cell N`), so that no
statement, comment or blank line of one cell ever belongs to the next (LibCST attaches the
comments above a statement to it: without the separator, removing the first statement of a cell
would remove the end of the previous one). Markdown and raw cells are left out, and so are:

* cells whose first line is a cell magic (`%%bash`, `%%writefile`, `%%html` ...) whose body is not
  Python. The exceptions are `%%time`, `%%timeit`, `%%capture` and `%%prun`
  (`PYTHON_CELL_MAGICS`): their body is Python run in the notebook's namespace, so it is
  analysed (and may be fixed); the `%%` line itself is not;
* cells with a syntax error: they are reported (a diagnostic naming the cell and the line), and
  the notebook is analysed without them;
* every code cell of a notebook whose kernel is not Python (`metadata.kernelspec.language` or
  `metadata.language_info.name`).

Inside a Python cell, IPython syntax is never parsed as Python: line magics (`%matplotlib
inline`, `%time f()`), shell escapes (`!pip install x`, `!!ls`), help (`obj?`, `??obj`), the
autocall escapes (`/f x`, `,f a b`, `;f a b`) and assignments from them (`files = !ls`,
`t = %timeit -o f()`), with their backslash continuation lines, are recognised at the start of a
logical line only (not inside a string or brackets), and each such line becomes an inert `pass`
at its own indentation: the line count stays the same, so positions map back exactly.
`get_ipython().run_line_magic(...)` is plain Python and is analysed as such.

**Positions.** A finding in a notebook carries the number of its cell (`Finding.cell`: the
cell's position in the notebook, 1-based, markdown and raw cells counted, as editors number
them) and lines relative to that cell; `Finding.cell_offset` gives back the line in the analysed
text (`Finding.source_line`). No finding is ever reported on a magic line.

**Fixes.** The fixed text is mapped back to cells line by line (a diff against the analysed
text); only the cells whose text changes are written, and only their `source` (list or string
form kept; outputs, metadata, cell ids, execution counts and every other byte of the file stay
as they are: the new `source` value is spliced into the original JSON text, in its layout). A
fix that would change a magic line or a line of a left-out cell, or whose edit spans two cells,
is not applied (the other fixes are), and a warning says why.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass, field, replace
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union, cast

from speedlint.analyzer.findings import Diagnostic, Finding
from speedlint.analyzer.program.seeds import Hop
from speedlint.analyzer.pyparse import AST_ERRORS, parse_quietly
from speedlint.analyzer.sources import SourceError, decode

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.engine import FileResult
    from speedlint.analyzer.program.seeds import FileSeeds
    from speedlint.analyzer.rule import Rule

NOTEBOOK_SUFFIX = ".ipynb"
#: The nbformat major version read here.
SUPPORTED_NBFORMAT = 4
#: Cell magics whose body is Python, run in the notebook's namespace: analysed.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
#: Cell magics a notebook exported as a script may drop (the body runs once, as it would).
SCRIPT_CELL_MAGICS = frozenset({"time", "capture"})
#: Line magics that change nothing a script computes: dropped when exporting a notebook.
HARMLESS_LINE_MAGICS = frozenset({
    "matplotlib", "config", "load_ext", "reload_ext", "unload_ext", "autoreload", "aimport", "precision",
    "xmode", "pprint", "colors", "who", "whos", "who_ls", "lsmagic", "magic", "history", "pwd", "pinfo",
    "pinfo2", "pdef", "pdoc", "psource", "pfile", "quickref",
})
#: Line magics whose argument is a Python statement run once: exported as that statement.
STATEMENT_LINE_MAGICS = frozenset({"time"})


class NotebookError(SourceError):
    """A notebook that cannot be read (invalid JSON, unsupported nbformat), exported or rewritten."""


def is_notebook(path: Union[str, Path]) -> bool:
    return str(path).endswith(NOTEBOOK_SUFFIX)


def checked_text(data: bytes, path: Union[str, Path]) -> Tuple[str, Optional["Notebook"]]:
    """The text that is analysed for a file's bytes, and its notebook when it is one (raises
    SourceError / NotebookError for what cannot be read)."""
    if is_notebook(path):
        notebook = Notebook.parse(data)
        return notebook.text, notebook
    return decode(data, str(path)).text, None


def read_checked_text(path: Union[str, Path]) -> str:
    """`checked_text` of a file on disk ("" when it cannot be read)."""
    try:
        data = Path(path).read_bytes()
        return checked_text(data, path)[0]
    except (OSError, SourceError):
        return ""


def check_notebook_text(text: str, shown: str, rules: Sequence[Type["Rule"]], settings: "Settings") -> "FileResult":
    """`engine.check_source` for a notebook's JSON text (stdin)."""
    from speedlint.analyzer.engine import FileResult, check_source
    from speedlint.analyzer.sources import Source

    try:
        notebook = Notebook.parse(text.encode("utf-8"))
    except NotebookError as exc:
        return FileResult(shown, diagnostics=[Diagnostic(shown, str(exc))])
    result = check_source(Source(notebook.text, "utf-8"), shown, rules, settings)
    result.findings, result.diagnostics = notebook.locate(result.findings, result.diagnostics, shown)
    return result


# -- IPython syntax ------------------------------------------------------------------------------
_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_CELL_MAGIC = re.compile(r"\s*%%(\w*)")
_LINE_MAGIC = re.compile(r"\s*%(\w*)\s*(.*)")
#: `obj?`, `obj.attr??`, `%magic?`
_HELP = re.compile(r"\s*[%\w.*\[\]]+\?\??\s*$")
#: `x = !ls`, `a, b = %sx ...`: an assignment from a magic or a shell escape
_ASSIGN = re.compile(r"\s*[\w.,\s\[\]()*'\"]+?\s*=\s*[%!]")


def split_lines(text: str) -> List[Tuple[str, str]]:
    """(content, line ending) pairs; the last line may have no ending."""
    out = []
    for m in _LINE.finditer(text):
        content, ending = m.group(1), m.group(2)
        if not content and not ending:
            break
        out.append((content, ending))
    return out


def _is_magic(content: str) -> bool:
    """Whether a line that starts a logical line is IPython syntax rather than Python."""
    s = content.lstrip()
    if not s:
        return False
    if s[0] in "%!?/,;":  # none of these can start a Python statement
        return True
    return _HELP.match(content) is not None or _ASSIGN.match(content) is not None


def _advance(line: str, quote: Optional[str], depth: int) -> Tuple[Optional[str], int, bool]:
    """Scan one line of Python: (the open string's closing quote, bracket depth, whether the
    line continues with a backslash) after it."""
    i, n = 0, len(line)
    comment = False
    while i < n:
        c = line[i]
        if quote is not None:
            if c == "\\":
                i += 2
                continue
            if line.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
            i += 1
            continue
        if c == "#":
            comment = True
            break
        if c == '"' or c == "'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else c
            i += len(quote)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    backslash = not comment and line.endswith("\\")
    if quote in ('"', "'") and not backslash:
        quote = None  # an unterminated string: a syntax error, reported by the parser
    return quote, depth, backslash and quote is None


@dataclass
class Cell:
    """A code cell of the notebook."""

    index: int  # position in the notebook's `cells` (0-based)
    form: str  # "list" or "str": how its `source` is stored
    lines: List[Tuple[str, str]]  # (content, line ending)
    python: bool = True  # analysed
    #: line (0-based) -> its inert stand-in, for the IPython lines of an analysed cell
    masked: Dict[int, str] = field(default_factory=dict)
    #: lines (0-based) that start a magic (the others in `masked` continue one)
    magic_starts: List[int] = field(default_factory=list)
    head: Optional[int] = None  # the `%%time`-like line of a cell whose body is Python
    magic: str = ""  # the name of a cell magic (`%%bash`: "bash")
    problem: Optional[str] = None  # why the cell is not analysed, when it is a syntax error
    start: int = 0  # its first line in the analysed text (1-based), when analysed

    @property
    def number(self) -> int:
        return self.index + 1

    @property
    def source(self) -> str:
        return "".join(c + e for c, e in self.lines)

    @property
    def code(self) -> str:
        """Its text with the IPython lines made inert."""
        return "".join(self.masked.get(i, c) + "\n" for i, (c, _) in enumerate(self.lines))

    @property
    def newline(self) -> str:
        endings = [e for _, e in self.lines if e]
        return max(set(endings), key=endings.count) if endings else "\n"


def _classify(cell: Cell) -> None:
    """Find the cell's IPython lines, or decide that it is not Python at all."""
    lines = cell.lines
    first = next((i for i, (c, _) in enumerate(lines) if c.strip()), None)
    if first is None:
        return
    body = 0
    m = _CELL_MAGIC.match(lines[first][0])
    if m is not None:
        cell.magic = m.group(1)
        if cell.magic not in PYTHON_CELL_MAGICS:
            cell.python = False
            return
        cell.head = first
        cell.masked[first] = "pass"
        cell.magic_starts.append(first)
        body = first + 1
    quote: Optional[str] = None
    depth = 0
    continued = False
    i = body
    while i < len(lines):
        content = lines[i][0]
        if quote is None and depth == 0 and not continued and _is_magic(content):
            indent = content[: len(content) - len(content.lstrip())]
            cell.magic_starts.append(i)
            cell.masked[i] = indent + "pass"
            while lines[i][0].endswith("\\") and i + 1 < len(lines):
                i += 1
                cell.masked[i] = indent + "pass"
            i += 1
            continue
        quote, depth, continued = _advance(content, quote, depth)
        i += 1


def _check_syntax(cell: Cell) -> None:
    code = cell.code
    try:
        parse_quietly(code, f"<cell {cell.number}>")
    except SyntaxError as exc:
        where = f"{exc.lineno}:{(exc.offset or 1)}" if exc.lineno else "?"
        cell.python = False
        cell.problem = f"cell {cell.number}:{where}: syntax error: {exc.msg}; the cell is skipped, the other cells are checked"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        cell.python = False
        cell.problem = f"cell {cell.number}: cannot parse: {exc}; the cell is skipped, the other cells are checked"


def _language(doc: Dict[str, Any]) -> Optional[str]:
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return None
    for key, sub in (("kernelspec", "language"), ("language_info", "name")):
        value = meta.get(key)
        if isinstance(value, dict) and isinstance(value.get(sub), str):
            return str(value[sub])
    return None


# -- the notebook ----------------------------------------------------------------------------------
_MARKER = "pass  # speedlint notebook cell {}"


class Notebook:
    """A parsed notebook: its code cells, the text analysed for it, and how to write it back."""

    def __init__(self, raw: str, cells: List[Cell], bom: bool) -> None:
        self.raw = raw  # the file's JSON text
        self.cells = cells  # code cells, in order
        self.bom = bom
        lines: List[str] = []
        #: analysed-text line (0-based) -> (index in `cells`, line in the cell), None: a separator
        self.owner: List[Optional[Tuple[int, int]]] = []
        placed = False
        for k, cell in enumerate(cells):
            if not cell.python:
                continue
            if placed:
                lines.append(_MARKER.format(cell.number))
                self.owner.append(None)
            placed = True
            cell.start = len(lines) + 1
            for i, (content, _) in enumerate(cell.lines):
                # a magic's stand-in says where it is: no two lines alike, for the diff of `rebuild`
                inert = cell.masked.get(i)
                lines.append(content if inert is None else f"{inert}  # IPython, cell {cell.number} line {i + 1}")
                self.owner.append((k, i))
        self.lines = lines
        self.text = "".join(line + "\n" for line in lines)

    # -- reading ---------------------------------------------------------------------------------
    @classmethod
    def parse(cls, data: bytes) -> "Notebook":
        bom = data.startswith(b"\xef\xbb\xbf")
        try:
            raw = data[3:].decode("utf-8") if bom else data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not a Jupyter notebook: cannot decode as UTF-8 ({exc.reason} at byte {exc.start})") from None
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise NotebookError(f"not a Jupyter notebook: invalid JSON{where}: {msg}") from None
        except RecursionError:
            raise NotebookError("not a Jupyter notebook: JSON nested too deeply") from None
        if not isinstance(doc, dict) or "cells" not in doc and "nbformat" not in doc:
            raise NotebookError("not a Jupyter notebook: the JSON has no `nbformat` and no `cells`")
        version = doc.get("nbformat")
        if version != SUPPORTED_NBFORMAT:
            shown = "missing" if version is None else json.dumps(version)
            raise NotebookError(
                f"unsupported notebook format: nbformat {shown}; speedlint reads nbformat {SUPPORTED_NBFORMAT} notebooks only "
                f"(convert with `jupyter nbconvert --to notebook --nbformat {SUPPORTED_NBFORMAT}`)"
            )
        raw_cells = doc.get("cells")
        if not isinstance(raw_cells, list):
            raise NotebookError("invalid notebook: `cells` is not a list")
        language = _language(doc)
        python = language is None or language.lower() in ("python", "python3", "ipython", "ipython3")
        cells: List[Cell] = []
        for index, item in enumerate(raw_cells):
            if not isinstance(item, dict):
                raise NotebookError(f"invalid notebook: cell {index + 1} is not a JSON object")
            if item.get("cell_type") != "code":
                continue
            source = item.get("source", "")
            if isinstance(source, list) and all(isinstance(s, str) for s in source):
                cell = Cell(index, "list", split_lines("".join(source)))
            elif isinstance(source, str):
                cell = Cell(index, "str", split_lines(source))
            else:
                raise NotebookError(f"invalid notebook: cell {index + 1}: `source` is neither a string nor a list of strings")
            if not python:
                cell.python = False
            else:
                _classify(cell)
                if cell.python:
                    _check_syntax(cell)
            cells.append(cell)
        return cls(raw, cells, bom)

    @property
    def problems(self) -> List[str]:
        """Why cells are not analysed, when they have a syntax error."""
        return [c.problem for c in self.cells if c.problem]

    def cell_of(self, line: int) -> Optional[Tuple[Cell, int]]:
        """The cell of an analysed-text line (1-based) and the line in it (1-based); None for a
        separator or beyond the text."""
        if not 0 < line <= len(self.owner):
            return None
        owner = self.owner[line - 1]
        if owner is None:
            return None
        return self.cells[owner[0]], owner[1] + 1

    def line_table(self) -> List[List[int]]:
        """[first analysed line, cell number, number of lines] per analysed cell (JSON; kept in
        the whole-program summary, to place the call chains that pass through the notebook)."""
        return [[c.start, c.number, len(c.lines)] for c in self.cells if c.python]

    # -- reporting -------------------------------------------------------------------------------
    def locate(self, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], shown: str) -> Tuple[List[Finding], List[Diagnostic]]:
        """Findings and diagnostics of the analysed text, placed in cells (findings on a magic
        line, which cannot happen, are dropped), with the skipped cells' syntax errors."""
        out = []
        for f in findings:
            got = self.cell_of(f.line)
            if got is None or got[1] - 1 in got[0].masked:
                continue
            cell, line = got
            offset = cell.start - 1
            end_line, end_column = f.end_line - offset, f.end_column
            if end_line > len(cell.lines):  # the node runs past the cell (a module-level report)
                end_line = len(cell.lines)
                end_column = len(cell.lines[-1][0]) + 1
            message = f.message
            here = f" -> {shown}:{f.line})"  # the end of a call chain names the finding's own line
            if message.endswith(here):
                message = message[: -len(here)] + f" -> {shown}:cell {cell.number}:{line})"
            message = _LINE_WORD.sub(self._line_words, message)  # "(`x.cuda()` on line 13)"
            edits = tuple(replace(e, line=e.line - offset, end_line=e.end_line - offset) for e in f.edits)
            out.append(replace(f, line=line, end_line=end_line, end_column=end_column, cell=cell.number, cell_offset=offset, message=message, edits=edits))
        diags = [Diagnostic(shown, p) for p in self.problems]
        diags += [replace(d, message=self.place_message(d.message)) for d in diagnostics]
        return out, diags

    def _line_words(self, m: "re.Match[str]") -> str:
        got = self.cell_of(int(m.group(1)))
        return m.group(0) if got is None else f"line {got[1]} of cell {got[0].number}"

    def place_message(self, message: str) -> str:
        """A diagnostic's message with its position (`at LINE:COL`, a line of the analysed
        text) placed in its cell."""

        def place(m: "re.Match[str]") -> str:
            got = self.cell_of(int(m.group(1)))
            return m.group(0) if got is None else f"at cell {got[0].number}:{got[1]}:{m.group(2)}"

        return _SYNTAX_AT.sub(place, message, count=1)

    # -- fixing ------------------------------------------------------------------------------------
    def rebuild(self, fixed: str) -> Tuple[Dict[int, str], List[str]]:
        """The new source of every cell that `fixed` (the analysed text after fixes) changes,
        by index in `cells`, or the reasons it cannot be mapped back (then nothing is changed)."""
        old = self.lines
        new = fixed.split("\n")
        if new and new[-1] == "":
            new.pop()
        markers = {line for line, owner in zip(old, self.owner) if owner is None}
        entries: Dict[int, List[Tuple[str, Optional[int]]]] = {k: [] for k, c in enumerate(self.cells) if c.python}
        problems: List[str] = []
        first = min(entries) if entries else None
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for k in range(i2 - i1):
                    owner = self.owner[i1 + k]
                    if owner is not None:
                        entries[owner[0]].append((new[j1 + k], owner[1]))
                continue
            touched = [o for o in self.owner[i1:i2] if o is not None]
            added = [line for line in new[j1:j2] if line not in markers]
            magic = sorted({self.cells[k].number for k, i in touched if i in self.cells[k].masked})
            if magic:
                problems.append(f"it would change an IPython magic line in cell {', '.join(map(str, magic))}")
                continue
            targets = sorted({k for k, _ in touched})
            if len(targets) > 1:
                problems.append("its edit spans cells " + " and ".join(str(self.cells[k].number) for k in targets))
                continue
            if targets:
                target = targets[0]
            elif not added:
                continue
            elif i1 > 0 and (before := self.owner[i1 - 1]) is not None:
                target = before[0]
            elif i2 < len(self.owner) and (after := self.owner[i2]) is not None:
                target = after[0]
            elif i1 == 0 and first is not None:
                target = first
            else:
                problems.append("it would add code between two cells")
                continue
            entries[target].extend((line, None) for line in added)
        if problems:
            return {}, sorted(set(problems))
        self._drop_known_imports(entries)
        changed = {}
        for k, lines in entries.items():
            text = self._cell_text(self.cells[k], lines)
            if text != self.cells[k].source:
                changed[k] = text
        return changed, []

    def _drop_known_imports(self, entries: Dict[int, List[Tuple[str, Optional[int]]]]) -> None:
        """Leave out the imports a fix adds that a cell already makes (LibCST adds an import
        unless it is in the block of imports at the top of the text; in a notebook, imports
        are spread over cells, often after a magic). An import counts when it is at the top
        level of a cell that runs before the first cell the fixes change otherwise."""
        added = {k: [n for n, (text, i) in enumerate(lines) if i is None and _import_key(text) is not None] for k, lines in entries.items()}
        if not any(added.values()):
            return
        changed = [k for k, lines in entries.items() if any(i is None and n not in added[k] for n, (_, i) in enumerate(lines))]
        changed += [k for k, lines in entries.items() if [i for _, i in lines if i is not None] != list(range(len(self.cells[k].lines)))]
        last = min(changed) if changed else max(entries)
        known = {key for k in entries if k <= last for key in _top_level_imports(self.cells[k])}
        for k, positions in added.items():
            lines = entries[k]
            drop = set()
            for n in positions:
                if cast(frozenset, _import_key(lines[n][0])) <= known:  # `positions`: the lines whose key is not None
                    drop.add(n)
                    if n + 1 < len(lines) and lines[n + 1][1] is None and not lines[n + 1][0].strip():
                        drop.add(n + 1)  # the blank line LibCST puts after the imports it adds
            entries[k] = [e for n, e in enumerate(lines) if n not in drop]

    @staticmethod
    def _cell_text(cell: Cell, entries: List[Tuple[str, Optional[int]]]) -> str:
        if cell.head is not None:  # code added above a `%%time` line goes below it
            at = next((n for n, (_, i) in enumerate(entries) if i == cell.head), None)
            if at is not None:
                moved = [e for e in entries[:at] if e[1] is None]
                kept = [e for e in entries[:at] if e[1] is not None]
                entries = kept + [entries[at]] + moved + entries[at + 1:]
        while entries and entries[-1][1] is None and not entries[-1][0].strip():
            entries.pop()  # blank lines added at the end of a cell (after added imports)
        newline = cell.newline
        parts: List[List[str]] = []
        for text, i in entries:
            if i is None:
                parts.append([text, newline])
            else:
                content, ending = cell.lines[i]
                parts.append([content if i in cell.masked else text, ending or newline])
        if parts and (not cell.lines or not cell.lines[-1][1]):
            parts[-1][1] = ""  # the cell ended without a line ending: so does the new one
        return "".join(t + e for t, e in parts)

    # -- writing ---------------------------------------------------------------------------------
    @property
    def ensure_ascii(self) -> bool:
        """Whether the file escapes non-ASCII characters (`json.dumps`'s default) rather than
        writing them (Jupyter's way)."""
        return self.raw.isascii() and re.search(r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])", self.raw) is not None

    def render(self, sources: Dict[int, str]) -> bytes:
        """The file with the `source` of some cells (by index in `cells`) replaced, every other
        byte as it was."""
        spans = _source_spans(self.raw)
        pieces: List[str] = []
        pos = 0
        expected = json.loads(self.raw)
        for k in sorted(sources, key=lambda k: self.cells[k].index):
            cell = self.cells[k]
            value: Any = sources[k] if cell.form == "str" else [c + e for c, e in split_lines(sources[k])]
            expected["cells"][cell.index]["source"] = value
            if cell.index not in spans:
                raise NotebookError(f"cannot find the source of cell {cell.number} in the file; not modified")
            start, end = spans[cell.index]
            pieces.append(self.raw[pos:start])
            pieces.append(self._format(start, end, value))
            pos = end
        pieces.append(self.raw[pos:])
        text = "".join(pieces)
        if json.loads(text) != expected:
            raise NotebookError("rewriting the notebook would change more than the cells' source; not modified, please report this bug")
        return (b"\xef\xbb\xbf" if self.bom else b"") + text.encode("utf-8")

    def _format(self, start: int, end: int, value: Any) -> str:
        ascii_only = self.ensure_ascii
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=ascii_only)
        if not value:
            return "[]"
        old = self.raw[start:end]
        items = _array_items(old)
        reuse: Dict[Any, str] = {}
        for a, b in items:
            reuse.setdefault(json.loads(old[a:b]), old[a:b])
        texts = [reuse.get(v) or json.dumps(v, ensure_ascii=ascii_only) for v in value]
        if items:
            lead, tail = old[1:items[0][0]], old[items[-1][1]:-1]
            sep = old[items[0][1]:items[1][0]] if len(items) > 1 else ("," + lead if "\n" in lead else ", ")
        else:  # `[]` before: lay it out like the file's other lists
            line_start = self.raw.rfind("\n", 0, start) + 1
            indent = cast("re.Match[str]", re.match(r"[ \t]*", self.raw[line_start:])).group(0)  # (always matches)
            unit_m = re.search(r"\n([ \t]+)\S", self.raw)
            if unit_m is None:  # a file on one line
                lead, tail, sep = "", "", ","
            else:
                newline = "\r\n" if "\r\n" in self.raw else "\n"
                lead = newline + indent + unit_m.group(1)
                tail = newline + indent
                sep = "," + lead
        return "[" + lead + sep.join(texts) + tail + "]"

    # -- running as a script (verify) ------------------------------------------------------------
    def script(self) -> str:
        """The code cells as one Python script, for `speedlint verify`. Harmless magics
        (`HARMLESS_LINE_MAGICS`, `?` help) are left out, `%time stmt` runs `stmt`, `%%time` and
        `%%capture` cells run their body; anything else that needs IPython raises NotebookError."""
        out: List[str] = []
        for cell in self.cells:
            if cell.problem:
                raise NotebookError(cell.problem.split(";")[0])
            if not cell.python and cell.magic:
                raise NotebookError(f"cell {cell.number} is a `%%{cell.magic}` cell, which needs IPython")
            if not cell.python:
                raise NotebookError("the notebook's kernel is not Python")
            if cell.head is not None and cell.magic not in SCRIPT_CELL_MAGICS:
                raise NotebookError(f"cell {cell.number} is a `%%{cell.magic}` cell: its body would not run as it does in a script")
            lines = [content for content, _ in cell.lines]
            for i in cell.magic_starts:
                if i == cell.head:
                    lines[i] = f"pass  # %%{cell.magic}"
                    continue
                lines[i] = self._script_line(cell, i)
            for i in cell.masked:
                if i not in cell.magic_starts:
                    lines[i] = cell.masked[i]  # a continuation line of a harmless magic
            out.append(f"# %% cell {cell.number}\n" + "".join(line + "\n" for line in lines))
        script = "\n".join(out)
        if re.search(r"\bget_ipython\s*\(", script):
            raise NotebookError("it calls `get_ipython()`, which exists only under IPython")
        return script

    @staticmethod
    def _script_line(cell: Cell, i: int) -> str:
        content = cell.lines[i][0]
        indent = content[: len(content) - len(content.lstrip())]
        m = _LINE_MAGIC.match(content)
        if m is not None and not content.lstrip().startswith("%%"):
            name, rest = m.group(1), m.group(2)
            if name in STATEMENT_LINE_MAGICS and rest and not content.endswith("\\"):
                return indent + rest
            if name in HARMLESS_LINE_MAGICS:
                return indent + "pass"
        elif _HELP.match(content) or content.lstrip().startswith("?"):
            return indent + "pass"
        raise NotebookError(f"cell {cell.number}, line {i + 1}: `{content.strip()}` needs IPython")


_SYNTAX_AT = re.compile(r"\bat (\d+):(\d+)")
#: A rule's message that names another line of the file ("... on line 13")
_LINE_WORD = re.compile(r"\bline (\d+)\b")


def _import_keys(node: ast.stmt) -> Optional[frozenset]:
    """What an import statement binds, as comparable keys; None for another statement."""
    if isinstance(node, ast.Import):
        return frozenset(("import", a.name, a.asname) for a in node.names)
    if isinstance(node, ast.ImportFrom) and not node.level:
        return frozenset(("from", node.module, a.name, a.asname) for a in node.names)
    return None


def _import_key(line: str) -> Optional[frozenset]:
    """`_import_keys` of a line that is one import statement."""
    if not line.startswith(("import ", "from ")):
        return None
    try:
        tree = parse_quietly(line)
    except AST_ERRORS:
        return None
    return _import_keys(tree.body[0]) if len(tree.body) == 1 else None


def _top_level_imports(cell: Cell) -> frozenset:
    try:
        tree = parse_quietly(cell.code)
    except AST_ERRORS:
        return frozenset()
    return frozenset(key for node in tree.body for key in (_import_keys(node) or ()))


# -- where things are in the JSON text -------------------------------------------------------------
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip_ws(text: str, i: int) -> int:
    return cast("re.Match[str]", _WS.match(text, i)).end()  # (always matches)


def _expect(text: str, i: int, char: str) -> int:
    i = _skip_ws(text, i)
    if text[i:i + 1] != char:
        raise NotebookError(f"unexpected JSON layout at offset {i}; not modified")
    return i + 1


def _source_spans(text: str) -> Dict[int, Tuple[int, int]]:
    """Cell index -> (start, end) offsets of the JSON value of that cell's `source`."""
    spans: Dict[int, Tuple[int, int]] = {}

    def value_end(i: int) -> int:
        return _DECODER.raw_decode(text, i)[1]

    def walk_object(i: int, on_key: Callable[[str, int], int]) -> int:
        """`i` at "{": calls on_key(key, value offset) -> end of the value; returns the end."""
        i = _expect(text, i, "{")
        i = _skip_ws(text, i)
        if text[i:i + 1] == "}":
            return i + 1
        while True:
            i = _expect(text, i, '"')
            key, i = scanstring(text, i)
            i = _skip_ws(text, _expect(text, i, ":"))
            i = _skip_ws(text, on_key(key, i))
            if text[i:i + 1] == ",":
                i += 1
                continue
            return _expect(text, i, "}")

    def cell(index: int, i: int) -> int:
        def on_key(key: str, at: int) -> int:
            end = value_end(at)
            if key == "source":
                spans[index] = (at, end)
            return end

        return walk_object(i, on_key) if text[i:i + 1] == "{" else value_end(i)

    def top(key: str, at: int) -> int:
        if key != "cells" or text[at:at + 1] != "[":
            return value_end(at)
        spans.clear()  # a repeated key: the last one counts, as for `json.loads`
        i = _skip_ws(text, at + 1)
        if text[i:i + 1] == "]":
            return i + 1
        index = 0
        while True:
            i = _skip_ws(text, cell(index, _skip_ws(text, i)))
            index += 1
            if text[i:i + 1] == ",":
                i += 1
                continue
            return _expect(text, i, "]")

    try:
        walk_object(0, top)
    except (ValueError, IndexError) as exc:
        raise NotebookError(f"cannot read the notebook's JSON layout ({exc}); not modified") from None
    return spans


def _array_items(array: str) -> List[Tuple[int, int]]:
    """(start, end) of each element of a JSON array text."""
    out: List[Tuple[int, int]] = []
    i = _skip_ws(array, 1)
    if array[i:i + 1] == "]":
        return out
    while True:
        end = _DECODER.raw_decode(array, i)[1]
        out.append((i, end))
        i = _skip_ws(array, end)
        if array[i:i + 1] != ",":
            return out
        i = _skip_ws(array, i + 1)


# -- the call chains of the whole program ------------------------------------------------------------
def locate_chains(seeds: Dict[str, "FileSeeds"], tables: Dict[str, List[List[int]]]) -> None:
    """Place the call sites of hot chains that lie in notebooks (display path -> `line_table`)
    in their cells, in place."""
    if not tables:
        return

    def place(hop: "Hop") -> "Hop":
        for start, number, count in tables.get(hop.path, ()):
            if start <= hop.line < start + count:
                return Hop(hop.path, hop.line - start + 1, hop.label, number)
        return hop

    for s in seeds.values():
        for kinds in s.functions.values():
            for kind, chain in kinds.items():
                if any(h.path in tables for h in chain):
                    kinds[kind] = tuple(place(h) for h in chain)
