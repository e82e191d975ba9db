"""The whole-program seeds of a buffer: code read from stdin (`--stdin-filename`, an editor's
unsaved text) checked as part of the project around its file name (`project_scope`).

The buffer's summary comes from its text, every other file's from the cache by content hash
(an `ast` summary when missing, saved for the next run); the link is the same as for a run over
files, so a buffer gets the findings its file would get on disk with the same text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from speedlint.analyzer.cache import ResultCache, content_hash
from speedlint.analyzer.notebook import checked_text
from speedlint.analyzer.parallel import read_bytes
from speedlint.analyzer.program.facts import link
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.program.summary import summarize
from speedlint.analyzer.sources import SourceError

#: The files whose summaries take part in the program (notebooks are left out here: a cell
#: table is needed to place chains in them).
_PYTHON = ".py"


def buffer_seeds(
    text: str,
    path: Path,
    shown: str,
    program_files: Sequence[Tuple[Path, str]],
    config_files: Sequence[str] = (),
    cache_root: Optional[Path] = None,
) -> Optional[FileSeeds]:
    """The seeds of the buffer `text` of file `path` (display path `shown`), linked with the
    other files of `program_files` as they are on disk."""
    cache = ResultCache(cache_root) if cache_root is not None else None
    mine = os.path.realpath(path)
    entries: List[Tuple[str, str, Any]] = []
    seen = False
    for file, file_shown in program_files:
        if file.suffix != _PYTHON:
            continue
        if os.path.realpath(file) == mine:
            seen = True
            entries.append((os.path.abspath(path), shown, summarize(text)))
            continue
        try:
            data = read_bytes(str(file))
        except (SourceError, OSError):
            continue
        digest = content_hash(data)
        summary = cache.summaries.get(digest) if cache is not None else None
        if summary is None:
            try:
                summary = summarize(checked_text(data, str(file))[0])
            except SourceError:
                continue
            if summary is not None and cache is not None:
                cache.summaries.put(digest, summary)
        entries.append((os.path.abspath(file), file_shown, summary))
    if not seen:
        entries.append((os.path.abspath(path), shown, summarize(text)))
    seeds = link(entries, config_files)
    if cache is not None:
        cache.summaries.save()
    return seeds.get(shown)
