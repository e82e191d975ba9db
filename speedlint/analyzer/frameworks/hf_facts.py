"""What the Hugging Face / accelerate knowledge reads from a file's text at summary time (no
LibCST: the summaries and the program's link, warm runs included, import this and nothing heavier).

* `summary_facts(text)`: per file (cached with the summary): TF32 switched on, accelerate used,
  reduced-precision weights or FSDP policies, arguments parsed from a file;
* the project-fact keys the program model writes (`FileSeeds.project`) and the knob states.
"""

from __future__ import annotations

import re
from typing import Any, Dict

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
#: Project facts (`FileSeeds.project` keys).
TF32_KEY = "tf32_enabled"
REDUCED_KEY = "reduced_precision"
ACCELERATE_KEY = "accelerate_precision"
HF_FILES_KEY = "hf_argument_files"


def summary_facts(text: str) -> Dict[str, Any]:
    """Per-file facts for the summary (empty for most files)."""
    out: Dict[str, Any] = {}
    if ("tf32" in text or "matmul_precision" in text) and _TF32.search(text):
        out["tf32"] = True
    if "accelerate" in text and "Accelerator" in text:
        out["accelerate"] = True
    if ("MixedPrecision" in text or "16" in text or "half" in text) and _REDUCED.search(text):
        out["reduced"] = True
    if "HfArgumentParser" in text and ("parse_json_file" in text or "parse_yaml_file" in text):
        out["hf_files"] = True
    return out
