"""Config files read into trees whose scalars know where they are written.

`read_config(path, text)` gives a `ConfigDoc`: the root `Node` (`Mapping`, `Sequence` or
`Scalar`), or why the file is not understood. Every `Scalar` records its line and the columns of
its text, so a finding can point at it and a fix can replace exactly that text.

* YAML: a reader for the subset training configs use: block mappings and sequences (also a
  sequence at its key's indentation), plain, single- and double-quoted scalars, single-line flow
  collections (`[1, 2]`, `{a: 1}`), comments, a leading `---`, `|`/`>` block scalars (read,
  never edited), anchors, aliases and `<<` merges. Scalars are typed the way `yaml.safe_load`
  types them (YAML 1.1: `yes`/`on` are true, `1e-5` without a dot is a string; dates stay
  strings). Anything else
  (tags, complex keys, multi-line flow collections or plain scalars, several documents) makes the
  file "not understood": it is never reported on nor edited.
* JSON: a tokenizer with positions; the result must equal `json.loads` of the same text.
* TOML: `tomllib` for the values, a line scan for `key = value` positions (a value whose line is
  not found cannot be pointed at).
* INI (`.ini`, `.cfg`, `.conf`): `configparser` for the values (all strings), a line scan for positions.

`broken` is set when the file is clearly not valid in its format (a YAML or JSON syntax error):
that is worth a diagnostic when code reads the file. Merely "not understood" is silent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
TOML_SUFFIXES = (".toml",)
INI_SUFFIXES = (".ini", ".cfg", ".conf")


@dataclass(eq=False)
class Scalar:
    value: Any
    raw: str  # the text as written (quotes included)
    line: int  # 1-based; 0 when its place is not known
    col: int  # 0-based, where `raw` starts on the line
    end_col: int  # 0-based, exclusive
    style: str = "plain"  # plain | single | double | block | json | toml | ini
    shared: bool = False  # reached through a YAML alias: editing it would change other places

    @property
    def located(self) -> bool:
        return self.line > 0


@dataclass(eq=False)
class Entry:
    key: str
    line: int
    node: "Node"


@dataclass(eq=False)
class Mapping:
    entries: Dict[str, Entry] = field(default_factory=dict)
    line: int = 0

    def get(self, key: str) -> Optional["Node"]:
        entry = self.entries.get(key)
        return entry.node if entry is not None else None


@dataclass(eq=False)
class Sequence:
    items: List["Node"] = field(default_factory=list)
    line: int = 0


Node = Union[Scalar, Mapping, Sequence]


@dataclass
class ConfigDoc:
    path: str
    kind: str  # yaml | json | toml | ini
    root: Optional[Node] = None
    #: why the file is not understood (None: it is)
    problem: Optional[str] = None
    #: the problem is a syntax error in the format itself (worth a diagnostic)
    broken: bool = False

    @property
    def understood(self) -> bool:
        return self.root is not None and self.problem is None


class NotUnderstood(Exception):
    def __init__(self, message: str, line: int = 0, broken: bool = False) -> None:
        super().__init__(message)
        self.line = line
        self.broken = broken


def kind_of(path: str) -> Optional[str]:
    low = path.lower()
    if low.endswith(YAML_SUFFIXES):
        return "yaml"
    if low.endswith(JSON_SUFFIXES):
        return "json"
    if low.endswith(TOML_SUFFIXES):
        return "toml"
    if low.endswith(INI_SUFFIXES):
        return "ini"
    return None


def read_config(path: str, text: str) -> ConfigDoc:
    """The tree of a config file's text (never raises: a problem is recorded on the doc)."""
    kind = kind_of(path) or "yaml"
    doc = ConfigDoc(path, kind)
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        if kind == "yaml":
            doc.root = _Yaml(text).document()
        elif kind == "json":
            doc.root = _read_json(text)
        elif kind == "toml":
            doc.root = _read_toml(text)
        else:
            doc.root = _read_ini(text)
    except NotUnderstood as exc:
        doc.root = None
        doc.problem = f"line {exc.line}: {exc}" if exc.line else str(exc)
        doc.broken = exc.broken
    except RecursionError:
        doc.root, doc.problem = None, "nested too deeply"
    return doc


def plain(node: Optional[Node]) -> Any:
    """The node as plain Python data (dicts, lists, scalars)."""
    if node is None:
        return None
    if isinstance(node, Scalar):
        return node.value
    if isinstance(node, Mapping):
        return {k: plain(e.node) for k, e in node.entries.items()}
    return [plain(n) for n in node.items]


def scalars(node: Optional[Node], prefix: Tuple[Any, ...] = ()) -> Iterator[Tuple[Tuple[Any, ...], Scalar]]:
    """(key path, scalar) for every scalar under `node`."""
    if isinstance(node, Scalar):
        yield prefix, node
    elif isinstance(node, Mapping):
        for k, e in node.entries.items():
            yield from scalars(e.node, prefix + (k,))
    elif isinstance(node, Sequence):
        for i, n in enumerate(node.items):
            yield from scalars(n, prefix + (i,))


# -- YAML -----------------------------------------------------------------------------------------
_NULL = {"", "~", "null", "Null", "NULL"}
_TRUE = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "y", "Y"}
_FALSE = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "n", "N"}
_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9_]*)$")
_INT_OTHER = re.compile(r"^[-+]?(?:0b[0-1_]+|0[0-7_]+|0x[0-9a-fA-F_]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_KEY = re.compile(r"""^(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?)\s*:(?:\s+|$)""")


def yaml_scalar_value(raw: str) -> Any:
    """How `yaml.safe_load` types a plain scalar (YAML 1.1 core rules, sexagesimal aside)."""
    if raw in _NULL:
        return None
    if raw in ("y", "Y", "n", "N"):
        return raw  # PyYAML's resolver leaves the one-letter forms as strings
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    if _INT.match(raw):
        return int(raw.replace("_", ""))
    if _INT_OTHER.match(raw):
        text = raw.replace("_", "")
        sign = -1 if text.startswith("-") else 1
        text = text.lstrip("+-")
        if text.startswith("0b"):
            return sign * int(text[2:], 2)
        if text.startswith("0x"):
            return sign * int(text[2:], 16)
        return sign * int(text, 8)
    if _FLOAT.match(raw):
        low = raw.replace("_", "").lower()
        if low.endswith("inf"):
            return float("-inf") if low.startswith("-") else float("inf")
        if low.endswith("nan"):
            return float("nan")
        return float(low)
    return raw


@dataclass
class _Line:
    number: int  # 1-based
    indent: int
    text: str  # the whole line, comment removed, trailing space stripped


def _strip_comment(line: str) -> str:
    """The line without its comment (a `#` at the start or after whitespace, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                if quote == "'" and i + 1 < len(line) and line[i + 1] == "'":
                    continue
                if quote == '"' and _escaped(line, i):
                    continue
                quote = ""
        elif ch in "\"'" and (i == 0 or line[i - 1] in " \t:-[{,"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _escaped(text: str, i: int) -> bool:
    n = 0
    j = i - 1
    while j >= 0 and text[j] == "\\":
        n += 1
        j -= 1
    return n % 2 == 1


class _Yaml:
    def __init__(self, text: str) -> None:
        self.raw_lines = text.split("\n")
        self.lines: List[_Line] = []
        self.anchors: Dict[str, Node] = {}
        started = False
        for number, line in enumerate(self.raw_lines, start=1):
            if line.endswith("\r"):
                line = line[:-1]
                self.raw_lines[number - 1] = line
            stripped = _strip_comment(line)
            if not stripped.strip():
                continue
            if stripped.startswith("%"):
                if started:
                    raise NotUnderstood("a directive after content", number)
                continue
            if stripped.rstrip() == "---" or stripped.startswith("--- "):
                if started:
                    raise NotUnderstood("several YAML documents in one file", number)
                rest = stripped[3:].strip()
                if rest:
                    raise NotUnderstood("content on the `---` line", number)
                started = True
                continue
            if stripped.rstrip() == "...":
                break
            body = stripped.lstrip(" ")
            if body.startswith("\t") or (len(stripped) > len(body) and "\t" in stripped[: len(stripped) - len(body)]):
                raise NotUnderstood("tab in indentation", number, broken=True)
            started = True
            self.lines.append(_Line(number, len(stripped) - len(body), stripped))

    def document(self) -> Node:
        if not self.lines:
            return Scalar(None, "", 0, 0, 0)
        node, end = self._block(0, self.lines[0].indent)
        if end != len(self.lines):
            raise NotUnderstood("unexpected indentation", self.lines[end].number, broken=True)
        return node

    # blocks ----------------------------------------------------------------------------------
    def _block(self, i: int, indent: int) -> Tuple[Node, int]:
        line = self.lines[i]
        content = line.text[line.indent:]
        if content == "-" or content.startswith("- "):
            return self._sequence(i, indent)
        if _KEY.match(content) or content.startswith("<<:"):
            return self._mapping(i, indent)
        if content.startswith(("[", "{")):
            node = self._flow_value(line.text, line.indent, line.number)
            return node, i + 1
        if content.startswith(("|", ">")):
            raise NotUnderstood("a block scalar at the top level", line.number)
        # a lone scalar (the whole document, or a multi-line plain scalar: not understood)
        if i + 1 < len(self.lines) and self.lines[i + 1].indent >= indent:
            raise NotUnderstood("a multi-line plain scalar", line.number)
        return self._scalar(line.text, line.indent, line.number), i + 1

    def _mapping(self, i: int, indent: int) -> Tuple[Mapping, int]:
        mapping = Mapping(line=self.lines[i].number)
        merges: List[Node] = []
        while i < len(self.lines):
            line = self.lines[i]
            if line.indent < indent:
                break
            if line.indent > indent:
                raise NotUnderstood("unexpected indentation", line.number, broken=True)
            content = line.text[indent:]
            if content.startswith("- ") or content == "-":
                break  # a sequence at its key's indentation ends here (the caller decides)
            if content.startswith("? "):
                raise NotUnderstood("a complex mapping key", line.number)
            m = _KEY.match(content)
            if content.startswith("<<:"):
                key_text, rest_at = "<<", indent + 3
            elif m is None:
                raise NotUnderstood("expected `key: value`", line.number, broken=True)
            else:
                key_text, rest_at = m.group("key"), indent + m.end()
            key = self._key(key_text, line.number)
            rest = line.text[rest_at:].strip()
            value_col = rest_at + (len(line.text[rest_at:]) - len(line.text[rest_at:].lstrip()))
            node, i = self._value(i, indent, rest, value_col)
            if key == "<<":
                merges.extend(node.items if isinstance(node, Sequence) else [node])
                continue
            mapping.entries.pop(key, None)
            mapping.entries[key] = Entry(key, line.number, node)
        for merged in merges:  # `<<: *base`: the mapping's own keys win
            if not isinstance(merged, Mapping):
                raise NotUnderstood("`<<` of something that is not a mapping", mapping.line)
            for k, e in merged.entries.items():
                if k not in mapping.entries:
                    mapping.entries[k] = Entry(k, e.line, _shared(e.node))
        return mapping, i

    def _value(self, i: int, indent: int, rest: str, col: int) -> Tuple[Node, int]:
        """The value after `key:` (or `- `) on line i: on the line, or the block below it."""
        line = self.lines[i]
        anchor = None
        if rest.startswith("&"):
            m = re.match(r"&([^\s]+)\s*", rest)
            assert m is not None
            anchor = m.group(1)
            col += m.end()
            rest = rest[m.end():]
        if rest.startswith("!"):
            raise NotUnderstood("a YAML tag", line.number)
        if rest.startswith("*"):
            name = rest[1:].strip()
            if name not in self.anchors:
                raise NotUnderstood(f"unknown alias `*{name}`", line.number, broken=True)
            return _shared(self.anchors[name]), i + 1
        if rest.startswith(("|", ">")):
            if not re.fullmatch(r"[|>][-+]?[1-9]?|[|>][1-9]?[-+]?", rest):
                raise NotUnderstood("a block scalar header", line.number)
            j = i + 1
            parts = []
            while j < len(self.lines) and self.lines[j].indent > indent:
                parts.append(self.raw_lines[self.lines[j].number - 1].strip())
                j += 1
            text = ("\n" if rest[0] == "|" else " ").join(parts)
            if "-" not in rest and parts:
                text += "\n"  # clip: one final newline (`|-` strips it)
            node: Node = Scalar(text, rest, line.number, col, col + len(rest), "block")
            # blank lines and comments inside the block were skipped above: the value is
            # approximate, and a block scalar is never edited
            if anchor:
                self.anchors[anchor] = node
            return node, j
        if rest:
            if rest.startswith(("[", "{")):
                node = self._flow_value(line.text, col, line.number)
            else:
                node = self._scalar(line.text, col, line.number)
            if i + 1 < len(self.lines) and self.lines[i + 1].indent > indent and not _is_seq_item(self.lines[i + 1], indent):
                raise NotUnderstood("a multi-line value", self.lines[i + 1].number)
            if anchor:
                self.anchors[anchor] = node
            return node, i + 1
        # the value is the block below (more indented), or a sequence at the same indentation
        j = i + 1
        if j < len(self.lines) and self.lines[j].indent > indent:
            node, j = self._block(j, self.lines[j].indent)
        elif j < len(self.lines) and self.lines[j].indent == indent and _is_seq_item(self.lines[j], indent):
            node, j = self._sequence(j, indent)
        else:
            node = Scalar(None, "", line.number, col, col, "empty")
        if anchor:
            self.anchors[anchor] = node
        return node, j

    def _sequence(self, i: int, indent: int) -> Tuple[Sequence, int]:
        seq = Sequence(line=self.lines[i].number)
        node: Node
        while i < len(self.lines):
            line = self.lines[i]
            if line.indent != indent or not _is_seq_item(line, indent):
                if line.indent > indent:
                    raise NotUnderstood("unexpected indentation", line.number, broken=True)
                break
            after = line.text[indent + 1:]
            rest = after.strip()
            col = indent + 1 + (len(after) - len(after.lstrip()))
            if rest == "-" or rest.startswith("- "):  # `- - a`: a sequence in a sequence
                self.lines[i] = _Line(line.number, col, line.text)
                node, i = self._sequence(i, col)
            elif rest and not rest.startswith(("[", "{")) and (_KEY.match(rest) or rest.startswith("<<:")):
                # `- key: value` starts a mapping whose keys line up with `key`
                self.lines[i] = _Line(line.number, col, line.text)
                node, i = self._mapping(i, col)
            else:
                node, i = self._value(i, indent, rest, col)
            seq.items.append(node)
        return seq, i

    # scalars ---------------------------------------------------------------------------------
    def _key(self, text: str, number: int) -> str:
        text = text.strip()
        if text.startswith('"'):
            return _double_quoted(text, number)
        if text.startswith("'"):
            return text[1:-1].replace("''", "'")
        return text  # keys are looked up by their text (`1:` is the key "1")

    def _scalar(self, text: str, col: int, number: int) -> Scalar:
        raw = text[col:].rstrip()
        if raw.startswith('"'):
            end = _quote_end(raw, '"')
            if end != len(raw):
                raise NotUnderstood("text after a quoted scalar", number, broken=True)
            return Scalar(_double_quoted(raw, number), raw, number, col, col + len(raw), "double")
        if raw.startswith("'"):
            end = _quote_end(raw, "'")
            if end != len(raw):
                raise NotUnderstood("text after a quoted scalar", number, broken=True)
            return Scalar(raw[1:-1].replace("''", "'"), raw, number, col, col + len(raw), "single")
        if raw.startswith(("&", "*", "!", "%", "@", "`", "|", ">")):
            raise NotUnderstood(f"a scalar starting with `{raw[0]}`", number)
        if ": " in raw or raw.endswith(":"):
            raise NotUnderstood("a `key: value` where a scalar was expected", number, broken=True)
        return Scalar(yaml_scalar_value(raw), raw, number, col, col + len(raw), "plain")

    def _flow_value(self, text: str, col: int, number: int) -> Node:
        parser = _Flow(text, col, number)
        node = parser.value()
        parser.skip()
        if parser.pos != len(text.rstrip()):
            raise NotUnderstood("text after a flow collection (or one that spans lines)", number)
        return node


def _is_seq_item(line: _Line, indent: int) -> bool:
    content = line.text[indent:]
    return line.indent == indent and (content == "-" or content.startswith("- "))


def _shared(node: Node) -> Node:
    """A node reached through an alias or a merge: the same scalars, marked as shared."""
    if isinstance(node, Scalar):
        node.shared = True
    elif isinstance(node, Mapping):
        for e in node.entries.values():
            _shared(e.node)
    else:
        for n in node.items:
            _shared(n)
    return node


def _quote_end(text: str, quote: str, start: int = 0) -> int:
    """Index just past the closing quote of the quoted scalar starting at `start`."""
    i = start + 1
    while i < len(text):
        ch = text[i]
        if quote == "'" and ch == "'":
            if i + 1 < len(text) and text[i + 1] == "'":
                i += 2
                continue
            return i + 1
        if quote == '"' and ch == "\\":
            i += 2
            continue
        if quote == '"' and ch == '"':
            return i + 1
        i += 1
    raise NotUnderstood("an unterminated quoted scalar", 0, broken=True)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "\\": "\\", "/": "/", " ": " ", "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "v": "\v"}


def _double_quoted(raw: str, number: int) -> str:
    body = raw[1:-1]
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2:i + 2 + width]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise NotUnderstood("a bad escape in a double-quoted scalar", number, broken=True) from None
            i += 2 + width
        else:
            raise NotUnderstood("an unknown escape in a double-quoted scalar", number, broken=True)
    return "".join(out)


class _Flow:
    """A single-line flow collection: `[a, 'b', {c: 1}]`, `{x: 1, y: [2, 3]}`."""

    def __init__(self, text: str, pos: int, number: int) -> None:
        self.text = text
        self.pos = pos
        self.number = number

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def value(self) -> Node:
        self.skip()
        if self.pos >= len(self.text):
            raise NotUnderstood("a flow collection that spans lines", self.number)
        ch = self.text[self.pos]
        if ch == "[":
            return self._seq()
        if ch == "{":
            return self._map()
        return self._scalar()

    def _seq(self) -> Sequence:
        seq = Sequence(line=self.number)
        self.pos += 1
        self.skip()
        if self._take("]"):
            return seq
        while True:
            seq.items.append(self.value())
            self.skip()
            if self._take(","):
                self.skip()
                if self._take("]"):
                    return seq
                continue
            if self._take("]"):
                return seq
            raise NotUnderstood("expected `,` or `]`", self.number, broken=True)

    def _map(self) -> Mapping:
        mapping = Mapping(line=self.number)
        self.pos += 1
        self.skip()
        if self._take("}"):
            return mapping
        while True:
            key_node = self._scalar(key=True)
            self.skip()
            if not self._take(":"):
                raise NotUnderstood("expected `:` in a flow mapping", self.number, broken=True)
            value = self.value()
            key = key_node.value if key_node.style != "plain" else key_node.raw
            mapping.entries[str(key)] = Entry(str(key), self.number, value)
            self.skip()
            if self._take(","):
                self.skip()
                if self._take("}"):
                    return mapping
                continue
            if self._take("}"):
                return mapping
            raise NotUnderstood("expected `,` or `}`", self.number, broken=True)

    def _take(self, ch: str) -> bool:
        if self.pos < len(self.text) and self.text[self.pos] == ch:
            self.pos += 1
            return True
        return False

    def _scalar(self, key: bool = False) -> Scalar:
        self.skip()
        start = self.pos
        text = self.text
        if start < len(text) and text[start] in "\"'":
            end = _quote_end(text, text[start], start)
            raw = text[start:end]
            self.pos = end
            if raw[0] == '"':
                return Scalar(_double_quoted(raw, self.number), raw, self.number, start, end, "double")
            return Scalar(raw[1:-1].replace("''", "'"), raw, self.number, start, end, "single")
        end = start
        while end < len(text) and text[end] not in ",[]{}" and not (text[end] == ":" and (key or end + 1 >= len(text) or text[end + 1] in " ,]}")):
            end += 1
        raw = text[start:end].rstrip()
        self.pos = start + len(raw)
        if not raw or raw[0] in "&*!|>%@`":
            raise NotUnderstood("an empty or special flow scalar", self.number)
        return Scalar(yaml_scalar_value(raw), raw, self.number, start, start + len(raw), "plain")


# -- JSON -----------------------------------------------------------------------------------------
_JSON_TOKEN = re.compile(r'\s*(?:(?P<punct>[{}\[\]:,])|(?P<string>"(?:[^"\\\n]|\\.)*")|(?P<number>-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<word>true|false|null))', re.S)


def _read_json(text: str) -> Node:
    try:
        expected = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", 0)
        raise NotUnderstood(f"invalid JSON: {getattr(exc, 'msg', exc)}", line, broken=True) from None
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    parser = _Json(text, starts)
    node = parser.value()
    if text[parser.pos:].strip() or plain(node) != expected:
        raise NotUnderstood("JSON that this reader does not follow")
    return node


class _Json:
    def __init__(self, text: str, starts: List[int]) -> None:
        self.text = text
        self.starts = starts
        self.pos = 0

    def _where(self, offset: int) -> Tuple[int, int]:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.starts[lo]

    def _next(self) -> "re.Match[str]":
        m = _JSON_TOKEN.match(self.text, self.pos)
        if m is None:
            raise NotUnderstood("JSON this reader does not follow")
        self.pos = m.end()
        return m

    def value(self) -> Node:
        m = self._next()
        if m.group("punct") == "{":
            start_line, _ = self._where(m.start("punct"))
            mapping = Mapping(line=start_line)
            m = self._next()
            if m.group("punct") == "}":
                return mapping
            while True:
                if m.group("string") is None:
                    raise NotUnderstood("JSON this reader does not follow")
                key = json.loads(m.group("string"))
                key_line, _ = self._where(m.start("string"))
                if self._next().group("punct") != ":":
                    raise NotUnderstood("JSON this reader does not follow")
                node = self.value()
                mapping.entries.pop(key, None)
                mapping.entries[key] = Entry(key, key_line, node)
                m = self._next()
                if m.group("punct") == "}":
                    return mapping
                if m.group("punct") != ",":
                    raise NotUnderstood("JSON this reader does not follow")
                m = self._next()
        if m.group("punct") == "[":
            start_line, _ = self._where(m.start("punct"))
            seq = Sequence(line=start_line)
            save = self.pos
            m = self._next()
            if m.group("punct") == "]":
                return seq
            self.pos = save
            while True:
                seq.items.append(self.value())
                m = self._next()
                if m.group("punct") == "]":
                    return seq
                if m.group("punct") != ",":
                    raise NotUnderstood("JSON this reader does not follow")
        for group in ("string", "number", "word"):
            raw = m.group(group)
            if raw is not None:
                line, col = self._where(m.start(group))
                return Scalar(json.loads(raw), raw, line, col, col + len(raw), "json")
        raise NotUnderstood("JSON this reader does not follow")


# -- TOML -----------------------------------------------------------------------------------------
_TOML_TABLE = re.compile(r"^\s*\[(?P<array>\[)?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key_parts(text: str) -> Optional[List[str]]:
    """`a.b."c d"` -> ["a", "b", "c d"] (None: not a key this scan follows)."""
    parts = []
    rest = text.strip()
    while rest:
        if rest[0] == '"':
            end = _quote_end(rest, '"')
            parts.append(json.loads(rest[:end]))
        elif rest[0] == "'":
            end = rest.find("'", 1) + 1
            if end <= 0:
                return None
            parts.append(rest[1:end - 1])
        else:
            m = _TOML_BARE.match(rest)
            if m is None:
                return None
            end = m.end()
            parts.append(m.group(0))
        rest = rest[end:].strip()
        if rest.startswith("."):
            rest = rest[1:].strip()
        elif rest:
            return None
    return parts


def _read_toml(text: str) -> Node:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except Exception as exc:  # tomllib.TOMLDecodeError
        raise NotUnderstood(f"invalid TOML: {exc}", broken=True) from None
    places: Dict[Tuple[str, ...], Tuple[int, int, int, str]] = {}
    table: Tuple[str, ...] = ()
    arrays = False
    for number, line in enumerate(text.splitlines(), start=1):
        m = _TOML_TABLE.match(line)
        if m is not None and not line.strip().startswith("#"):
            parts = _toml_key_parts(m.group("name"))
            table = tuple(parts) if parts else ("\x00",)
            arrays = bool(m.group("array"))
            continue
        if arrays or "=" not in line or line.lstrip().startswith("#"):
            continue
        key_text, _, value_text = line.partition("=")
        parts = _toml_key_parts(key_text)
        if not parts:
            continue
        value = _strip_comment(value_text).strip()
        if not value or value[0] in "[{" or value.startswith(('"""', "'''")):
            continue
        col = len(key_text) + 1 + (len(value_text) - len(value_text.lstrip()))
        places[table + tuple(parts)] = (number, col, col + len(value), value)
    return _toml_node(data, (), places, 0)


def _toml_node(data: Any, path: Tuple[str, ...], places: Dict[Tuple[str, ...], Tuple[int, int, int, str]], line: int) -> Node:
    if isinstance(data, dict):
        mapping = Mapping(line=line)
        for k, v in data.items():
            place = places.get(path + (k,))
            mapping.entries[k] = Entry(k, place[0] if place else 0, _toml_node(v, path + (k,), places, place[0] if place else 0))
        return mapping
    if isinstance(data, list):
        return Sequence([_toml_node(v, path + ("\x00",), {}, 0) for v in data], line)
    place = places.get(path)
    if place is not None and _toml_same(place[3], data):
        return Scalar(data, place[3], place[0], place[1], place[2], "toml")
    return Scalar(data, "", 0, 0, 0, "toml")


def _toml_value(raw: str) -> Any:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads(f"x = {raw}")["x"]


def _toml_same(raw: str, value: Any) -> bool:
    try:
        got = _toml_value(raw)
    except Exception:
        return False
    return type(got) is type(value) and got == value


# -- INI ------------------------------------------------------------------------------------------
_INI_SECTION = re.compile(r"^\[(?P<name>[^\]]+)\]\s*(?:[#;].*)?$")
_INI_OPTION = re.compile(r"^(?P<key>[^=:\s][^=:]*?)\s*[=:]\s*(?P<value>.*?)\s*$")


def _read_ini(text: str) -> Node:
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise NotUnderstood(f"invalid INI: {exc}".splitlines()[0], broken=True) from None
    places: Dict[Tuple[str, str], Tuple[int, int, int, str]] = {}
    section = None
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        if line[0] in " \t":
            if section is not None and places:
                last = max(places.values(), key=lambda p: p[0])
                for stale_key, stale_place in list(places.items()):
                    if stale_place is last:
                        places.pop(stale_key)  # a multi-line value: not located
            continue
        m = _INI_SECTION.match(line)
        if m:
            section = m.group("name").strip()
            continue
        m = _INI_OPTION.match(line)
        if m and section is not None:
            key = parser.optionxform(m.group("key").strip())
            value = m.group("value")
            col = m.start("value")
            places[(section, key)] = (number, col, col + len(value), value)
    root = Mapping(line=1)
    defaults = parser.defaults()
    for name in ["DEFAULT", *parser.sections()] if defaults else parser.sections():
        items = defaults if name == "DEFAULT" else parser[name]
        mapping = Mapping(line=0)
        for key in items:
            value = items[key]
            place = places.get((name, key)) or (places.get(("DEFAULT", key)) if key in defaults else None)
            if place is not None and place[3] == value:
                node = Scalar(value, value, place[0], place[1], place[2], "ini")
            else:
                node = Scalar(value, "", 0, 0, 0, "ini")
            mapping.entries[key] = Entry(key, node.line, node)
        root.entries[name] = Entry(name, 0, mapping)
    return root
