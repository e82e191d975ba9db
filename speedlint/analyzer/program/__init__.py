"""The whole program: per-file summaries, a link step, and how hot each function is.

Real training projects split the step across modules (the loop in `train.py`, the cost in
`losses/`, `models/`, `data/`, `utils/`). This package follows the step wherever it goes. Its
modules, each importing only those above it in this list:

* `schema`: the summary format's shared constants (format version, call layout, call-site flags,
  hotness kinds).
* `seeds`: `FileSeeds`, what a file's rules get from the program, and `Hop` (plain data: a run
  answered from the cache reads seeds and imports nothing below).
* `loader_summary`, `summary`: per-file summaries from the stdlib `ast` (`summarize`), cacheable
  by content hash, made compact (`compact`).
* `link`: the linked project (`Program`): modules, imports, classes across files, a
  flow-insensitive type inference, the call graph.
* `hotness`: roots (training-step, epoch and evaluation loops, per-sample entry points) and the
  propagation of hotness along the call graph (`Hotness`).
* `data`: whole-program facts for the data-loading rules and config files.
* `facts`: what the program tells each file (`ProgramFacts.seeds`) and `link`, which runs it all:
  summaries of every file of a run -> the seeds of each file.

Also: `summary_plugins` / `plugins` (modules loaded by name: each module the load may give) and
`scope` (facts set somewhere in the project hold per entry script's program).

Unresolvable calls and recursion end quietly: no guess.
"""
