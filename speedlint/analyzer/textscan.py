"""Fast whole-word searches in source text (the pre-filter and the `ast` pre-look use them).

Python's `re` scans a pattern that starts with `\\b` or an alternation character by character
(about 0.6 s for 58 MB of source here); `str.find` on a literal is ten times faster. So a word is
found with `str.find` and its boundaries are checked by hand, with exactly the meaning of `\\b`
(a word character is `c.isalnum() or c == "_"`, what `re` uses for `str` patterns); a pattern
that must follow the word is then matched at that one place.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from speedlint.analyzer.vocabulary import GRAD_OFF_NAMES as _GRAD_OFF_NAMES


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def word_ends(text: str, word: str) -> Iterator[int]:
    """The end offset of every whole-word occurrence of `word` (an identifier) in `text`."""
    n = len(word)
    size = len(text)
    i = text.find(word)
    while i >= 0:
        end = i + n
        if (i == 0 or not _is_word_char(text[i - 1])) and (end >= size or not _is_word_char(text[end])):
            yield end
        i = text.find(word, i + 1)


def has_word(text: str, *words: str) -> bool:
    """Whether one of the identifiers occurs in `text` as a whole word (like `\\b(?:a|b)\\b`)."""
    return any(next(word_ends(text, w), None) is not None for w in words if w in text)


def has_word_then(text: str, follow: "re.Pattern[str]", *words: str) -> bool:
    """Whether one of the words occurs as a whole word with `follow` matching right after it."""
    for w in words:
        if w in text:
            for end in word_ends(text, w):
                if follow.match(text, end):
                    return True
    return False


def matches_at(text: str, literal: str, pattern: "re.Pattern[str]") -> bool:
    """Whether `pattern`, every match of which starts with `literal` (a leading `\\b` aside),
    matches at an occurrence of `literal` in `text`: `pattern.search(text) is not None`, with
    `str.find` doing the scan (`match` at an offset sees the text before it: `\\b` keeps its meaning)."""
    at = text.find(literal)
    while at >= 0:
        if pattern.match(text, at):
            return True
        at = text.find(literal, at + 1)
    return False


#: What counts as a hint that a script may run on an accelerator (`may_use_gpu`).
_GPU_HINT = re.compile(r"cuda|\bmps\b|xla|accelerator|Accelerator|device_map|\.to\(\s*device|torch\.device\(\s*[a-zA-Z_]")
#: Literals of which `_GPU_HINT` needs one: a text with none of them cannot match.
_GPU_PLAIN = ("cuda", "xla", "accelerator", "Accelerator", "device_map")  # each alone is a match
#: The other parts of `_GPU_HINT` (each starts with a literal: `re` finds it fast).
_TO_DEVICE = re.compile(r"\.to\(\s*device")
_TORCH_DEVICE = re.compile(r"torch\.device\(\s*[a-zA-Z_]")


def may_use_gpu(text: str) -> bool:
    """False for scripts that never mention CUDA or select a device: no GPU-only advice there.

    Exactly `_GPU_HINT.search(text) is not None`, part by part (an alternation, and a part that
    starts with `\\b`, are scanned character by character)."""
    if any(p in text for p in _GPU_PLAIN):
        return True
    return has_word(text, "mps") or "device" in text and bool(_TO_DEVICE.search(text) or _TORCH_DEVICE.search(text))


_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}
_CALL_OPEN = re.compile(r"(?:\s|\\|#[^\n]*\n)*(\()")
_ALIAS_AFTER = re.compile(r"(?:\s|\\)+as\b")
_KEYWORD = re.compile(r"\s*\w+\s*=(?!=)")
_DOTTED = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
#: the longest argument list looked at; a longer one counts as a possible site
_MAX_ARGS = 4000
_COMMENT = re.compile(r"#[^\n]*")


class _GiveUp(Exception):
    """The text is not simple enough to read here: the answer is "maybe"."""


def _split_top(text: str) -> List[str]:
    """`text` (the inside of brackets, no strings or comments in it) split at its top-level commas."""
    parts: List[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _code(text: str, i: int, stop: int) -> Iterator[Tuple[int, str, int]]:
    """(offset, character, bracket depth once it is read) for the code in `text[i:stop]`, comments
    left out. Strings are not read: a quote is yielded and ends the scan (the callers then answer
    "maybe"), so a `#` met here always starts a comment."""
    depth = 0
    while i < stop:
        c = text[i]
        if c == "#":
            i = text.find("\n", i, stop)
            if i < 0:
                return
            continue
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        yield i, c, depth
        if c == "'" or c == '"':
            return
        i += 1


def _call_arguments(text: str, open_at: int) -> str:
    """The text between the `(` at `open_at` and its `)`, comments blanked out (_GiveUp on
    strings, or when too long)."""
    for i, c, depth in _code(text, open_at, min(len(text), open_at + _MAX_ARGS)):
        if c == "'" or c == '"':
            break
        if depth == 0:
            return _COMMENT.sub("", text[open_at + 1 : i])
    raise _GiveUp


def _unwrap(expr: str) -> str:
    """`((x))` -> `x` (`ast` drops the parentheses), whitespace and continuations removed."""
    expr = expr.replace("\\\n", " ").strip()
    while len(expr) >= 2 and expr[0] == "(" and expr[-1] == ")" and _balanced(expr[1:-1]):
        expr = expr[1:-1].strip()
    return expr


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _grown_candidates(arguments: str) -> List[str]:
    """The first and last elements (dotted names) of the list/tuple literals among the arguments."""
    out = []
    for arg in _split_top(arguments):
        arg = arg.replace("\\\n", " ")
        keyword = _KEYWORD.match(arg)
        if keyword is not None:
            arg = arg[keyword.end():]
        arg = arg.strip()
        if len(arg) < 2 or (arg[0], arg[-1]) not in (("[", "]"), ("(", ")")) or not _balanced(arg[1:-1]):
            continue
        elements = _split_top(arg[1:-1])
        if elements and not elements[-1].strip():
            elements.pop()  # a trailing comma
        if len(elements) < 2:
            continue
        for element in (elements[0], elements[-1]):
            name = re.sub(r"\s+", "", _unwrap(element))
            if _DOTTED.fullmatch(name):
                out.append(name)
    return out


#: Growers whose accumulator is the first argument (`x = np.append(x, y)`), not a list element.
FIRST_ARG_GROWERS = frozenset({"append"})


def _first_argument(arguments: str) -> List[str]:
    """The first positional argument, when it is a dotted name."""
    args = _split_top(arguments)
    if len(args) < 2 or _KEYWORD.match(args[0].replace("\\\n", " ")):
        return []
    name = re.sub(r"\s+", "", _unwrap(args[0]))
    return [name] if _DOTTED.fullmatch(name) else []


def may_grow(text: str, names: Sequence[str]) -> bool:
    """Text check for "`x = f([x, ...])` or `x = f([..., x])` (`x = append(x, ...)`) in a loop, `f` one of `names`" (the
    sites the `ast` pre-look's `grows` records): False only when no call of one of the names has a
    list/tuple argument whose first or last element is a name that the statement holding the call
    assigns, on a line inside a `for`/`while` of its own function. A string inside such a call,
    an import alias of one of the names, a very long call, or anything `_assigned_by_statement`
    and `_in_loop` cannot read for sure count as "maybe" (True); so does a carriage return
    anywhere (lines are read by `\n`)."""
    if "\r" in text:
        return True
    for name in names:
        if name not in text:
            continue
        for end in word_ends(text, name):
            if _ALIAS_AFTER.match(text, end):
                return True  # `import cat as join`: calls under another name
            call = _CALL_OPEN.match(text, end)
            if call is None:
                continue
            try:
                arguments = _call_arguments(text, call.start(1))
                candidates = _first_argument(arguments) if name in FIRST_ARG_GROWERS else _grown_candidates(arguments)
            except _GiveUp:
                return True
            for target in candidates:
                if _assigned_by_statement(text, target, end - len(name)) and _in_loop(text, end - len(name)):
                    return True
    return False


_BLOCK = re.compile(
    r"(?:(for|while|async[ \t]+for)|(def|async[ \t]+def|class)|(if|elif|try|except|finally|with|async[ \t]+with|match|case))\b"
)
_TRIPLE_QUOTES = ('"""', "'''")


def _in_loop(text: str, at: int) -> bool:
    """Whether the line holding offset `at` may be inside a `for`/`while` statement of its own
    function, read from indentation: the enclosing block headers are found going up (fewer
    leading spaces each time) until a loop (True) or a `def`/`class` (False). Anything the
    indentation cannot tell for sure counts as "maybe" (True): tabs, a line with fewer leading
    spaces that is not a block header (a continued expression, string contents), `else:`, or
    an odd number of triple quotes between the header and the line (the header may be string
    contents)."""
    start = text.rfind("\n", 0, at) + 1
    stop = text.find("\n", at)
    line = text[start : stop if stop >= 0 else len(text)]
    stripped = line.lstrip(" ")
    if stripped.startswith("\t"):
        return True
    own = _BLOCK.match(stripped)
    if own is not None and own.group(1):
        return True  # `for x in xs: acc = cat([acc, x])`
    indent = len(line) - len(stripped)
    end = start  # lines above: text[start:end - 1], going up
    while end > 0:
        start = text.rfind("\n", 0, end - 1) + 1
        line = text[start : end - 1]
        end = start
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(stripped)
        if depth >= indent:
            continue
        if stripped.startswith("\t"):
            return True
        block = _BLOCK.match(stripped)
        if block is None and stripped.startswith((")", "]")) and stripped.split("#", 1)[0].rstrip().endswith(":"):
            # `) -> int:` closes a header written over several lines: its first line is the
            # next one up with as few leading spaces (the lines between are its arguments)
            indent = depth + 1
            continue
        if block is None or block.group(1) or any(text.count(q, start, at) % 2 for q in _TRIPLE_QUOTES):
            return True  # a loop, or nothing sure
        if block.group(2):
            return False  # the function (or class) it is in has no loop around it
        indent = depth
    return False


def _assigned_by_statement(text: str, target: str, at: int) -> bool:
    """Whether the statement around offset `at` may be `target = ...` (the value holding `at`):
    the closest `target =` before `at` that is not a keyword argument, with no statement boundary
    (a newline outside brackets and not continued, or a `;`) between it and `at`. A string in
    between counts as "maybe"."""
    pattern = _ASSIGNMENTS.get(target)
    if pattern is None:
        spelled = r"(?:\s|\\)*\.(?:\s|\\)*".join(map(re.escape, target.split(".")))
        pattern = _ASSIGNMENTS[target] = re.compile(r"%s[\s\\)]*=(?!=)" % spelled)  # `(x) = ...` too
    first = target.split(".", 1)[0]
    pos = at
    while True:  # the occurrences of `target =` before `at`, closest first
        k = text.rfind(first, 0, pos)
        if k < 0:
            return False
        pos = k
        if k > 0 and (_is_word_char(text[k - 1]) or text[k - 1] == "."):
            continue
        match = pattern.match(text, k, at)
        if match is None:
            continue
        b = k - 1
        while b >= 0 and text[b] in " \t":
            b -= 1
        if b >= 0 and text[b] in "(," and ")" not in match.group(0):
            continue  # `f(x=...)`, `g(a, x=...)` on one line: a keyword argument (or `a, x = ...`)
        verdict = _gap(text, match.end(), at)
        if verdict is None:
            return True  # `target = <... the call ...>`, or a string on the way: maybe
        if verdict == "boundary":
            return False  # the closest assignment is an earlier statement


_ASSIGNMENTS: Dict[str, "re.Pattern[str]"] = {}


def _gap(text: str, i: int, at: int) -> Optional[str]:
    """What lies between an assignment's `=` (offset `i`) and offset `at`: "boundary" (the
    statement ends first), "keyword" (a bracket closes first: it was a keyword argument), or
    None (`at` is in the assigned value; also when a string is in the way: maybe)."""
    for k, c, depth in _code(text, i, at):
        if c == "'" or c == '"':
            return None
        if depth < 0:
            return "keyword"
        if depth == 0 and (c == ";" or (c == "\n" and text[k - 1] != "\\")):
            return "boundary"
    return None


# -- what a context manager's name says ------------------------------------------------------------


def says_grad_off(name: str) -> bool:
    """Whether a context manager or decorator named `name` (its last part) turns autograd off:
    `no_grad`, `inference_mode`, and a helper of the project or another library named after them
    (`smart_inference_mode()`, a decorator that picks `inference_mode` or `no_grad`)."""
    return any(name == word or name.endswith("_" + word) for word in _GRAD_OFF_NAMES)


def says_autocast(name: str) -> bool:
    """Whether a context manager named `name` (its last part) enters autocast: `autocast`, and a
    helper named after it (`smart_amp_autocast(amp)`, `amp_autocast()`, `accelerator.autocast()`,
    `self.autocast_ctx()`); not the autocast state queries and setters (`is_autocast_enabled`,
    `set_autocast_enabled`, `get_autocast_gpu_dtype`)."""
    return "autocast" in name and not name.startswith(("is_", "set_", "get_autocast_")) and not name.endswith(("_enabled", "_dtype"))
