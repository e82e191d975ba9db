"""LSP notebook documents: the cells, as the client syncs them, become a notebook's JSON (every
cell counted, as in the `.ipynb` file), analysed like `check` analyses a notebook
(`Notebook.parse`, `Notebook.locate`); each finding is published on its cell."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

from lsprotocol import types
from pygls.workspace import Workspace
from pygls.workspace.position_codec import PositionCodec

from speedlint.server.analysis import DocumentResult
from speedlint.server.convert import finding_diagnostic, lines_of, problem_diagnostic
from speedlint.server.state import Document, State

_CELL_KINDS = {types.NotebookCellKind.Code: "code", types.NotebookCellKind.Markup: "markdown"}


def sync(workspace: Workspace, doc: Document) -> List[str]:
    """Rebuild `doc`'s JSON from the workspace's cells; returns the URIs of cells gone since."""
    notebook = workspace.get_notebook_document(notebook_uri=doc.uri)
    if notebook is None:
        return []
    cells: List[Dict[str, Any]] = []
    uris = []
    for cell in notebook.cells:
        source = workspace.get_text_document(cell.document).source
        cells.append({"cell_type": _CELL_KINDS.get(cell.kind, "code"), "metadata": {}, "source": source, "outputs": [], "execution_count": None})
        if cells[-1]["cell_type"] == "markdown":
            del cells[-1]["outputs"], cells[-1]["execution_count"]
        uris.append(cell.document)
    gone = [u for u in doc.cells if u not in uris]
    doc.cells = uris
    doc.text = json.dumps({
        "cells": cells,
        "metadata": {"language_info": {"name": "python"}, "kernelspec": {"language": "python", "name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })
    return gone


def cell_number(doc: Document, cell_uri: str) -> Optional[int]:
    try:
        return doc.cells.index(cell_uri) + 1
    except ValueError:
        return None


def cell_text(doc: Document, number: Optional[int]) -> Optional[str]:
    if number is None:
        return None
    try:
        return str(json.loads(doc.text)["cells"][number - 1]["source"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def owner(state: State, cell_uri: str) -> Optional[Document]:
    """The open notebook holding the cell `cell_uri`."""
    for doc in state.documents.values():
        if cell_uri in doc.cells:
            return doc
    return None


def cell_diagnostics(doc: Document, result: DocumentResult, codec: PositionCodec, uri_of: Callable[[str], Optional[str]]) -> Dict[str, List[types.Diagnostic]]:
    """The diagnostics of each cell of the notebook (empty lists clear the others); a problem of
    the whole notebook goes on its first cell."""
    out: Dict[str, List[types.Diagnostic]] = {uri: [] for uri in doc.cells}
    texts: Dict[int, List[str]] = {}
    for f in result.findings:
        if f.cell is None or not 1 <= f.cell <= len(doc.cells):
            continue
        if f.cell not in texts:
            texts[f.cell] = lines_of(cell_text(doc, f.cell) or "")
        out[doc.cells[f.cell - 1]].append(finding_diagnostic(f, codec, texts[f.cell], uri_of))
    if doc.cells:
        first = lines_of(cell_text(doc, 1) or "")
        for d in result.diagnostics:
            out[doc.cells[0]].append(problem_diagnostic(d, codec, first))
    return out
