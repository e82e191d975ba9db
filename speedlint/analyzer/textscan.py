"""Fast whole-word searches in source text (the pre-filter and the `ast` pre-look use them).

Python's `re` scans a pattern that starts with `\\b` or an alternation character by character
(about 0.6 s for 58 MB of source here); `str.find` on a literal is ten times faster. So a word is
found with `str.find` and its boundaries are checked by hand, with exactly the meaning of `\\b`
(a word character is `c.isalnum() or c == "_"`, what `re` uses for `str` patterns); a pattern
that must follow the word is then matched at that one place.
"""

from __future__ import annotations

import re
from typing import Iterator


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


#: What counts as a hint that a script may run on an accelerator (`may_use_gpu`).
_GPU_HINT = re.compile(r"cuda|\bmps\b|xla|accelerator|Accelerator|device_map|\.to\(\s*device|torch\.device\(\s*[a-zA-Z_]")
#: Literals of which `_GPU_HINT` needs one: a text with none of them cannot match.
_GPU_PLAIN = ("cuda", "xla", "accelerator", "Accelerator", "device_map")  # each alone is a match
_GPU_OTHER = ("mps", ".to(", "torch.device(")


def may_use_gpu(text: str) -> bool:
    """False for scripts that never mention CUDA or select a device: no GPU-only advice there.

    Exactly `_GPU_HINT.search(text) is not None`, without scanning with the regex when a literal
    answers."""
    if any(p in text for p in _GPU_PLAIN):
        return True
    if not any(p in text for p in _GPU_OTHER):
        return False
    return _GPU_HINT.search(text) is not None
