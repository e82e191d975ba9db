"""`speedlint server`: the Language Server Protocol over stdio (pygls).

Diagnostics on open, change (debounced) and save; code actions (each fix, the suppression, fix
all); hover with the rule's documentation; `speedlint.applyFix` / `speedlint.applyAutofix`
commands that send the edit to the client (`workspace/applyEdit`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, cast

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from speedlint import __version__
from speedlint.analyzer.config import ConfigError
from speedlint.analyzer.registry import SelectionError
from speedlint.server import actions, notebooks
from speedlint.server.convert import finding_diagnostic, lines_of, problem_diagnostic
from speedlint.server.state import Document, Options, State, path_of

FIX_ALL_KIND = "source.fixAll.speedlint"
CMD_FIX = "speedlint.applyFix"
CMD_FIX_ALL = "speedlint.applyAutofix"
CMD_SUPPRESS = "speedlint.applySuppression"


class SpeedlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "speedlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="jupyter-notebook")],
                save=True,
            ),
        )
        self.state: Optional[State] = None
        self.options = Options()
        self.defaults = Options()  # the command line's
        self.workspaces: List[Path] = []  # the client's workspace folders
        self._timers: Dict[str, asyncio.TimerHandle] = {}
        self._said: Set[str] = set()

    # -- helpers -------------------------------------------------------------------------------
    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def log_once(self, message: str, kind: types.MessageType) -> None:
        """`log`, each message once per session (a rule that fails on every edit is said once)."""
        if message not in self._said:
            self._said.add(message)
            self.log(message, kind)

    def ensure_state(self) -> State:
        if self.state is None:
            try:
                self.state = State(self.options, self.workspaces)
            except (ConfigError, SelectionError) as exc:
                self.log(f"speedlint: {exc}; using the defaults", types.MessageType.Error)
                self.state = State(Options(debounce=self.options.debounce, cache=self.options.cache), self.workspaces)
            for problem in self.state.problems:
                self.log(f"speedlint: {problem}", types.MessageType.Warning)
        return self.state

    def schedule(self, doc: Document, delay: float) -> None:
        """Analyse `doc`'s project after `delay` seconds of quiet (a new change restarts the wait)."""
        old = self._timers.pop(doc.uri, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._timers[doc.uri] = loop.call_later(delay, self._run, doc.uri)

    def _run(self, uri: str) -> None:
        self._timers.pop(uri, None)
        state = self.ensure_state()
        doc = state.documents.get(uri)
        if doc is None:
            return
        self.refresh(doc)

    def refresh(self, doc: Optional[Document]) -> None:
        state = self.ensure_state()
        try:
            state.refresh(doc, self.publish)
        except ConfigError as exc:  # a bad config file: said once per message, the server goes on
            self.log_once(f"speedlint: {exc}", types.MessageType.Error)
        except Exception as exc:  # never take the server down
            self.log(f"speedlint: internal error while analysing: {exc!r}; please report this bug", types.MessageType.Error)

    def publish(self, doc: Document) -> None:
        result = doc.result
        if result is None:
            return
        for code, error in result.failed:
            self.log_once(f"speedlint: rule {code} failed on {doc.path}: {error}; skipped for this file, please report this bug", types.MessageType.Error)
        for d in result.diagnostics:
            if d.kind == "internal-error":
                self.log_once(f"speedlint: {d.path}: {d.message}", types.MessageType.Error)
        codec = self.workspace.position_codec
        # (`publish` runs inside `State.refresh`, after `ensure_state`: `self.state` is set)
        if doc.is_notebook:
            for uri, diagnostics in notebooks.cell_diagnostics(doc, result, codec, cast(State, self.state).uri_of).items():
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
            return
        lines = lines_of(doc.text)
        out = [finding_diagnostic(f, codec, lines, cast(State, self.state).uri_of) for f in result.findings]
        out += [problem_diagnostic(d, codec, lines) for d in result.diagnostics]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=doc.uri, diagnostics=out, version=doc.version))

    def clear(self, uris: List[str]) -> None:
        for uri in uris:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


server = SpeedlintServer()


@server.feature(types.INITIALIZE)
def initialize(ls: SpeedlintServer, params: types.InitializeParams) -> None:
    ls.options = Options.from_json(params.initialization_options, ls.defaults)
    folders = [f.uri for f in params.workspace_folders or []] or ([params.root_uri] if params.root_uri else [])
    ls.workspaces = [p.absolute() for p in map(path_of, folders) if p is not None]
    if ls.workspaces and ls.workspaces[0].is_dir():  # paths in messages read as `check` run there shows them
        os.chdir(ls.workspaces[0])


#: Files whose creation, change or deletion the server wants to hear of (when the client lets it
#: register watchers): code for the program model, config files for the settings.
WATCHED = ("**/*.py", "**/*.ipynb", "**/pyproject.toml", "**/speedlint.toml", "**/.speedlint.toml", "**/setup.cfg", "**/requirements*.txt")
CONFIG_NAMES = ("pyproject.toml", "speedlint.toml", ".speedlint.toml", "setup.cfg")


@server.feature(types.INITIALIZED)
async def initialized(ls: SpeedlintServer, params: types.InitializedParams) -> None:
    ls.ensure_state()
    watch = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
    if watch and watch.dynamic_registration:
        options = types.DidChangeWatchedFilesRegistrationOptions(watchers=[types.FileSystemWatcher(glob_pattern=g) for g in WATCHED])
        registration = types.Registration(id="speedlint-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)
        try:
            await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as exc:  # the client said no: saves still refresh
            ls.log(f"speedlint: cannot watch files ({exc}); files changed outside the editor are seen on the next edit", types.MessageType.Info)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: SpeedlintServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict) and settings:
        ls.options = Options.from_json(settings, ls.defaults)
        _reset(ls)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: SpeedlintServer, params: types.DidChangeWatchedFilesParams) -> None:
    """A config file changed: everything again (new settings). Files created or deleted: the
    projects' files again. Changed files are seen by the next refresh (by their time stamps)."""
    names = [path_of(c.uri) for c in params.changes]
    if any(p is not None and (p.name in CONFIG_NAMES or p.name.startswith("requirements")) for p in names):
        _reset(ls)
        return
    state = ls.ensure_state()
    if any(c.type != types.FileChangeType.Changed for c in params.changes):
        for project in state.projects.all():
            project.discover()
    ls.refresh(None)


def _reset(ls: SpeedlintServer) -> None:
    """Settings or files changed on disk: a new state (settings, projects), every document again."""
    old = ls.state
    ls.state = None
    state = ls.ensure_state()
    if old is not None:
        for doc in old.documents.values():
            doc.result = doc.analysed = doc.seeds = None
            state.documents[doc.uri] = doc
    ls.refresh(None)


# -- text documents ----------------------------------------------------------------------------
@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: SpeedlintServer, params: types.DidOpenTextDocumentParams) -> None:
    item = params.text_document
    path = path_of(item.uri)
    if path is None or path.suffix not in (".py", ".pyi"):
        return
    state = ls.ensure_state()
    doc = state.documents[item.uri] = Document(item.uri, path.absolute(), item.text, item.version)
    ls.schedule(doc, 0.0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
async def did_change(ls: SpeedlintServer, params: types.DidChangeTextDocumentParams) -> None:
    state = ls.ensure_state()
    doc = state.documents.get(params.text_document.uri)
    if doc is None:
        return
    doc.text = ls.workspace.get_text_document(doc.uri).source
    doc.version = params.text_document.version
    ls.schedule(doc, ls.options.debounce)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: SpeedlintServer, params: types.DidSaveTextDocumentParams) -> None:
    _check_now(ls, params.text_document.uri)


def _check_now(ls: SpeedlintServer, uri: str) -> None:
    """A saved document (text or notebook) is checked at once, without the edit debounce."""
    doc = ls.ensure_state().documents.get(uri)
    if doc is not None:
        ls.schedule(doc, 0.0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
async def did_close(ls: SpeedlintServer, params: types.DidCloseTextDocumentParams) -> None:
    state = ls.ensure_state()
    doc = state.documents.pop(params.text_document.uri, None)
    timer = ls._timers.pop(params.text_document.uri, None)
    if timer is not None:
        timer.cancel()
    ls.clear([params.text_document.uri])
    if doc is not None:  # its file on disk counts again for the others
        ls.refresh(None)


# -- notebooks ---------------------------------------------------------------------------------
@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
async def notebook_did_open(ls: SpeedlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    path = path_of(params.notebook_document.uri)
    if path is None:
        return
    state = ls.ensure_state()
    doc = Document(params.notebook_document.uri, path.absolute(), "", params.notebook_document.version)
    notebooks.sync(ls.workspace, doc)
    state.documents[doc.uri] = doc
    ls.schedule(doc, 0.0)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
async def notebook_did_change(ls: SpeedlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    state = ls.ensure_state()
    doc = state.documents.get(params.notebook_document.uri)
    if doc is None:
        return
    gone = notebooks.sync(ls.workspace, doc)
    doc.version = params.notebook_document.version
    ls.clear(gone)
    ls.schedule(doc, ls.options.debounce)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
async def notebook_did_save(ls: SpeedlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    _check_now(ls, params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
async def notebook_did_close(ls: SpeedlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    state = ls.ensure_state()
    doc = state.documents.pop(params.notebook_document.uri, None)
    if doc is not None:
        ls.clear(doc.cells)


# -- code actions, commands, hover -------------------------------------------------------------
@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND], resolve_provider=False),
)
def code_action(ls: SpeedlintServer, params: types.CodeActionParams) -> Optional[List[types.CodeAction]]:
    state = ls.ensure_state()
    uri = params.text_document.uri
    doc = state.documents.get(uri)
    if doc is None:
        cell = notebooks.owner(state, uri)
        return actions.cell_actions(state, cell, uri, params, ls.workspace.position_codec, FIX_ALL_KIND, CMD_FIX_ALL) if cell is not None else None
    return actions.code_actions(state, doc, params, ls.workspace.position_codec, FIX_ALL_KIND, CMD_FIX_ALL)


async def _send_edit(ls: SpeedlintServer, command: str, args: List[Any]) -> Any:
    """Work out the command's edit on the open document `args[0]` and send it to the client."""
    state = ls.ensure_state()
    uri = args[0] if args and isinstance(args[0], str) else None
    doc = state.documents.get(uri) if uri else None
    if doc is None:
        ls.log(f"speedlint: {command}: no open document {uri!r}", types.MessageType.Warning)
        return None
    codec = ls.workspace.position_codec
    try:
        if command == CMD_FIX_ALL:
            edit = actions.fix_all_edit(state, doc, codec)
        elif command == CMD_FIX:
            edit = actions.fix_edit(state, doc, str(args[1]), int(args[2]), int(args[3]), codec)
        else:
            edit = actions.suppress_edit(doc, str(args[1]), (int(args[2]),), codec)
    except (IndexError, TypeError, ValueError):
        ls.log(f"speedlint: {command}: bad arguments {args!r}", types.MessageType.Warning)
        return None
    if edit is None:
        return None
    result = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=command))
    return {"applied": bool(result.applied)}


@server.command(CMD_FIX_ALL)
async def apply_fix_all(ls: SpeedlintServer, *args: Any) -> Any:
    """Arguments: the document's URI."""
    return await _send_edit(ls, CMD_FIX_ALL, list(args))


@server.command(CMD_FIX)
async def apply_fix(ls: SpeedlintServer, *args: Any) -> Any:
    """Arguments: the document's URI, the rule code, the finding's line and column (1-based)."""
    return await _send_edit(ls, CMD_FIX, list(args))


@server.command(CMD_SUPPRESS)
async def apply_suppression(ls: SpeedlintServer, *args: Any) -> Any:
    """Arguments: the document's URI, the rule code, the line (1-based)."""
    return await _send_edit(ls, CMD_SUPPRESS, list(args))


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: SpeedlintServer, params: types.HoverParams) -> Optional[types.Hover]:
    state = ls.ensure_state()
    doc = state.documents.get(params.text_document.uri)
    if doc is None or doc.is_notebook:
        return None
    return actions.hover(state, doc, params.position, ls.workspace.position_codec)


def start(debounce: Optional[float] = None, use_cache: bool = True) -> None:
    """Serve on stdin/stdout until the client says exit. Nothing else may write to stdout: it is
    the protocol's channel (stray prints go to stderr)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    server.defaults = server.options = Options(debounce=debounce if debounce is not None else Options().debounce, cache=use_cache)
    server.start_io(stdin, stdout)
