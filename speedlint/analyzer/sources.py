"""Reading and writing Python source files without losing anything the user wrote.

Encoding follows PEP 263 (coding cookie) and the UTF-8 BOM; line endings are kept as they are
(LibCST round-trips them). Writes are atomic: a temporary file in the same folder, then a rename,
with the original permissions.
"""

from __future__ import annotations

import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import List, Union


_LINE_END = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> List[str]:
    """The lines of Python source as the tokenizer numbers them. `str.splitlines` also ends a line
    at a form feed (`\\f`, common between sections of older code) and at other separators, which
    shifts the number of every line after it."""
    lines = _LINE_END.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


class SourceError(Exception):
    """A file that cannot be read or decoded; the message is shown for that file."""


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str  # as detected; "utf-8-sig" when the file starts with a BOM

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def decode(data: bytes, path: str = "<bytes>") -> Source:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceError(f"invalid encoding declaration: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode as {encoding}: {exc}") from None
    return Source(text, encoding)


def read_source(path: Union[str, Path]) -> Source:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise SourceError("no such file") from None
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except PermissionError:
        raise SourceError("permission denied (cannot read)") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(data, str(path))


def write_atomic(path: Union[str, Path], data: bytes) -> None:
    """Replace `path` with `data` atomically, keeping its permission bits.

    Raises SourceError (the original file untouched) when the file or its folder is not writable.
    """
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise SourceError(f"cannot stat: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK):
        raise SourceError("file is read-only; not modified")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".speedlint-tmp", dir=str(path.parent))
    except OSError as exc:
        raise SourceError(f"cannot write in {path.parent}: {exc.strerror or exc}; not modified") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(f"cannot write: {exc.strerror or exc}; not modified") from None
        raise
