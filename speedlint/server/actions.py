"""Code actions, the edits of the commands, and hover.

Every edit is the minimal set of text edits between the buffer and the fixed text
(`edits.minimal_changes`), never a whole-file replacement.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from speedlint.analyzer.findings import UNSAFE, Finding, allowed
from speedlint.analyzer.registry import rule_by_code_or_name
from speedlint.analyzer.report import explain_markdown
from speedlint.analyzer.runner import display_path
from speedlint.server.analysis import fix_all, fix_all_notebook, fix_one
from speedlint.server.convert import hover_markdown, lines_of
from speedlint.server.edits import TextChange, minimal_changes, suppression
from speedlint.server.notebooks import cell_number, cell_text
from speedlint.server.state import Document, State


def text_edits(old: str, changes: Sequence[TextChange], codec: PositionCodec) -> List[types.TextEdit]:
    lines = lines_of(old)
    out = []
    for c in changes:
        start = types.Position(line=c.start[0], character=c.start[1])
        end = types.Position(line=c.end[0], character=c.end[1])
        out.append(types.TextEdit(range=codec.range_to_client_units(lines, types.Range(start=start, end=end)), new_text=c.text))
    return out


def workspace_edit(uri: str, old: str, changes: Sequence[TextChange], codec: PositionCodec) -> Optional[types.WorkspaceEdit]:
    if not changes:
        return None
    return types.WorkspaceEdit(changes={uri: text_edits(old, changes, codec)})


def fix_edit(state: State, doc: Document, code: str, line: int, column: int, codec: PositionCodec) -> Optional[types.WorkspaceEdit]:
    """The edit of one finding's fix (`analysis.fix_one`)."""
    if doc.is_notebook:
        return None
    fixed = fix_one(doc.text, display_path(doc.path), state.settings(doc), doc.seeds, code, line, column)
    return workspace_edit(doc.uri, doc.text, minimal_changes(doc.text, fixed), codec) if fixed is not None else None


def fix_all_edit(state: State, doc: Document, codec: PositionCodec) -> Optional[types.WorkspaceEdit]:
    """The edit of `fix --apply` on the buffer (`analysis.fix_all`; a notebook: on its cells)."""
    if doc.is_notebook:
        cells = fix_all_notebook(doc.text, display_path(doc.path), state.settings(doc), doc.seeds)
        changes = {
            doc.cells[number - 1]: text_edits(old, minimal_changes(old, new), codec)
            for number, old, new in cells
            if 1 <= number <= len(doc.cells) and cell_text(doc, number) == old
        }
        return types.WorkspaceEdit(changes=changes) if changes else None
    fixed = fix_all(doc.text, display_path(doc.path), state.settings(doc), doc.seeds)
    return workspace_edit(doc.uri, doc.text, minimal_changes(doc.text, fixed), codec) if fixed is not None else None


def suppress_edit(doc: Document, code: str, lines: Tuple[int, ...], codec: PositionCodec, uri: Optional[str] = None, text: Optional[str] = None) -> Optional[types.WorkspaceEdit]:
    """The edit that adds `# noqa: CODE` on the finding's first line (or its last one)."""
    text = doc.text if text is None else text
    change = suppression(text, lines, code)
    return workspace_edit(uri or doc.uri, text, [change], codec) if change is not None else None


def _touches(f: Finding, rng: types.Range, lines: Sequence[str], codec: PositionCodec) -> bool:
    server_range = codec.range_from_client_units(list(lines), rng)
    first, last = server_range.start.line + 1, server_range.end.line + 1
    return f.line <= last and f.end_line >= first


def _matching(f: Finding, diagnostics: Sequence[types.Diagnostic]) -> List[types.Diagnostic]:
    return [d for d in diagnostics if d.code == f.code and d.range.start.line == f.line - 1]


def code_actions(state: State, doc: Document, params: types.CodeActionParams, codec: PositionCodec, fix_all_kind: str, fix_all_command: str) -> List[types.CodeAction]:
    """Quick fixes (safe ones preferred; unsafe ones apart, marked), suppressions, and fix all."""
    only = params.context.only
    wants_quickfix = _wanted(only, types.CodeActionKind.QuickFix.value) and not doc.is_notebook
    out: List[types.CodeAction] = []
    result = state.current(doc)
    if wants_quickfix:
        lines = lines_of(doc.text)
        here = [f for f in result.findings if _touches(f, params.range, lines, codec)]
        for f in here:
            diags = _matching(f, params.context.diagnostics)
            if f.fix is not None and allowed(f.fix, True) and not f.fix.config_edits:
                edit = fix_edit(state, doc, f.code, f.line, f.column, codec)
                if edit is not None:
                    unsafe = f.fix.applicability is UNSAFE
                    title = f"{f.code}: {f.fix.title}" + (" (unsafe fix: may change results, review it)" if unsafe else "")
                    out.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, diagnostics=diags or None, edit=edit, is_preferred=not unsafe))
            edit = suppress_edit(doc, f.code, (f.line, f.end_line), codec)
            if edit is not None:
                out.append(types.CodeAction(title=f"Suppress {f.code} on this line (# noqa: {f.code})", kind=types.CodeActionKind.QuickFix, diagnostics=diags or None, edit=edit))
    out.extend(fix_all_actions(state, doc, only, codec, fix_all_kind, fix_all_command))
    return out


def _wanted(only: Optional[Sequence[str]], kind: str) -> bool:
    """Whether a code action of `kind` answers a request for the kinds `only` (None: any)."""
    return only is None or any(k == "" or kind == k or kind.startswith(f"{k}.") for k in only)


def fix_all_actions(state: State, doc: Document, only: Optional[Sequence[str]], codec: PositionCodec, fix_all_kind: str, fix_all_command: str) -> List[types.CodeAction]:
    """`source.fixAll.speedlint` when the document has a fix to apply: with its edit when asked
    for by kind (on save), else (a menu) as the command that works it out when chosen."""
    if not _wanted(only, fix_all_kind):
        return []
    if not any(f.fix is not None and allowed(f.fix, False) for f in state.current(doc).findings):
        return []
    title = "speedlint: apply all safe fixes"
    if only is not None:
        edit = fix_all_edit(state, doc, codec)
        return [types.CodeAction(title=title, kind=fix_all_kind, edit=edit)] if edit is not None else []
    command = types.Command(title=title, command=fix_all_command, arguments=[doc.uri])
    return [types.CodeAction(title=title, kind=fix_all_kind, command=command)]


def cell_actions(state: State, doc: Document, cell_uri: str, params: types.CodeActionParams, codec: PositionCodec, fix_all_kind: str, fix_all_command: str) -> List[types.CodeAction]:
    """A notebook cell: the suppressions of its findings, and fix all (every cell)."""
    number = cell_number(doc, cell_uri)
    text = cell_text(doc, number)
    if number is None or text is None:
        return []
    out = []
    lines = lines_of(text)
    for f in state.current(doc).findings:
        if f.cell != number or not _touches(f, params.range, lines, codec) or not _wanted(params.context.only, types.CodeActionKind.QuickFix.value):
            continue
        edit = suppress_edit(doc, f.code, (f.line, f.end_line), codec, uri=cell_uri, text=text)
        if edit is not None:
            out.append(types.CodeAction(title=f"Suppress {f.code} on this line (# noqa: {f.code})", kind=types.CodeActionKind.QuickFix, edit=edit))
    return out + fix_all_actions(state, doc, params.context.only, codec, fix_all_kind, fix_all_command)


def hover(state: State, doc: Document, position: types.Position, codec: PositionCodec) -> Optional[types.Hover]:
    """The documentation of the rules whose findings cover `position`, shortened."""
    lines = lines_of(doc.text)
    at = codec.position_from_client_units(lines, position)
    line, column = at.line + 1, at.character + 1
    parts: List[str] = []
    for f in state.current(doc).findings:
        inside = (f.line, f.column) <= (line, column) <= (f.end_line, f.end_column) or f.line == line
        if not inside or any(p.startswith(f"# {f.code} ") for p in parts):
            continue
        try:
            rule = rule_by_code_or_name(f.code)
        except KeyError:
            continue
        parts.append(hover_markdown(rule, explain_markdown(rule)) + f"\n\n*This finding:* {f.impact.line()}")
    if not parts:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)))
