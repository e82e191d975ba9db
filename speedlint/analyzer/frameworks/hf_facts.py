"""What the Hugging Face / accelerate knowledge reads from a file's text at summary time (no
LibCST: the summaries and the program's link, warm runs included, import this and nothing heavier).

* `summary_facts(text)`: per file (cached with the summary): TF32 switched on (in the code: a
  comment or docstring that names the setting switches nothing on), accelerate used,
  reduced-precision weights or FSDP policies, arguments parsed from a file;
* the project-fact keys the program model writes (`FileSeeds.project`) and the knob states.
"""

from __future__ import annotations

import re
from typing import Any, Dict

from speedlint.analyzer.textscan import matches_at

#: Knob states.
FP32, MIXED, UNKNOWN = "fp32", "mixed", "unknown"

#: Text that switches TF32 matmuls on, or sets the matmul precision on purpose ("highest").
_TF32 = re.compile(r"set_float32_matmul_precision|allow_tf32|\btf32\s*[=:]")
#: Text that puts a run in reduced precision by other means than autocast: FSDP mixed-precision
#: policies, model weights loaded or cast to float16/bfloat16.
_REDUCED = re.compile(
    r"\bMixedPrecision\(|torch_dtype\s*=\s*(torch\.(b?float16|half)|[\"']auto[\"'])|\.(half|bfloat16)\(\)"
    r"|\.to\(\s*(dtype\s*=\s*)?torch\.(b?float16|half)\s*\)"
)
#: The parts of `_TF32` and `_REDUCED` that are more than a literal (an alternation, and a part
#: that starts with `\b`, are scanned character by character: these are found part by part).
_TF32_SET = re.compile(r"\btf32\s*[=:]")
_MIXED_POLICY = re.compile(r"\bMixedPrecision\(")
_DTYPE_REDUCED = re.compile(r"torch_dtype\s*=\s*(torch\.(b?float16|half)|[\"']auto[\"'])")
_TO_REDUCED = re.compile(r"\.to\(\s*(dtype\s*=\s*)?torch\.(b?float16|half)\s*\)")
#: Project facts (`FileSeeds.project` keys).
TF32_KEY = "tf32_enabled"
REDUCED_KEY = "reduced_precision"
ACCELERATE_KEY = "accelerate_precision"
HF_FILES_KEY = "hf_argument_files"


def summary_facts(text: str) -> Dict[str, Any]:
    """Per-file facts for the summary (empty for most files)."""
    out: Dict[str, Any] = {}
    if ("tf32" in text or "matmul_precision" in text) and _switches_tf32(text):
        out["tf32"] = True
    if "accelerate" in text and "Accelerator" in text:
        out["accelerate"] = True
    if ("MixedPrecision" in text or "16" in text or "half" in text) and _reduces_precision(text):
        out["reduced"] = True
    if "HfArgumentParser" in text and ("parse_json_file" in text or "parse_yaml_file" in text):
        out["hf_files"] = True
    return out


def _switches_tf32(text: str) -> bool:
    """`_TF32` matches the code of `text`, not only its comments or strings (a docstring that
    advises `set_float32_matmul_precision` switches nothing on)."""
    if not ("set_float32_matmul_precision" in text or "allow_tf32" in text or matches_at(text, "tf32", _TF32_SET)):
        return False
    return _tf32_in_code(text)


def _tf32_in_code(text: str) -> bool:
    """Some name token of the code holds `set_float32_matmul_precision` or `allow_tf32`, or is
    `tf32` followed by `=` or `:` (what `_TF32` matches, outside comments and strings). True when
    the text cannot be tokenized (the text match stands)."""
    import io
    import tokenize

    NAME, OP = tokenize.NAME, tokenize.OP
    tf32 = False  # the token before was the name `tf32`
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, word = tok.type, tok.string
            if tf32 and kind == OP and word[0] in "=:":
                return True
            tf32 = kind == NAME and word == "tf32"
            if kind == NAME and ("set_float32_matmul_precision" in word or "allow_tf32" in word):
                return True
    except (tokenize.TokenError, SyntaxError, ValueError):
        return True
    return False


def _reduces_precision(text: str) -> bool:
    """`_REDUCED.search(text) is not None`, exactly: one of its parts matches."""
    return (
        ".half()" in text or ".bfloat16()" in text or matches_at(text, "MixedPrecision(", _MIXED_POLICY)
        or bool(_DTYPE_REDUCED.search(text) or _TO_REDUCED.search(text))  # (a literal start: `re` finds it fast)
    )
