"""`speedlint server`: a language server (LSP over stdio) on the engine `check` and `fix` use.

Needs the `server` extra (`pip install "speedlint[server]"`: pygls and lsprotocol); nothing in
the rest of speedlint imports this package. Modules: `project` (the project around a file, its
summaries and link, buffers in place of files), `analysis` (a buffer's findings, one fix, fix
all), `edits` (minimal text edits, `# noqa`), `convert` (LSP diagnostics, hover text),
`actions` (code actions, commands' edits, hover), `notebooks` (notebook documents), `state`
(options, open documents), `lsp` (the pygls wiring).
"""
