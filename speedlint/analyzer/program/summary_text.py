"""The facts of a file's summary that its text alone gives (`text_facts`): GPU hints, a conv net,
the cuDNN autotuner switched, fixed input shapes.

Each is exactly what its regex (kept here as the definition) finds anywhere in the text; the
search is done with `str.find` on the literals that every match holds (`textscan`): a regex that
starts with `\\b` or an alternation is scanned character by character, ten times slower.
"""

from __future__ import annotations

import re
from typing import Any, Dict

from speedlint.analyzer.textscan import has_word, has_word_then, may_use_gpu

#: Text that says a module builds convolutions (SPD701's "conv net").
CONV_TEXT = re.compile(r"\b(Conv[123]d|ConvTranspose[123]d|LazyConv[123]d|conv[123]d|torchvision\.models|timm\.create_model|segmentation_models_pytorch)\b")
#: The words of `CONV_TEXT` (a match is one of them as a whole word: `textscan.has_word`).
_CONV_WORDS = (
    *(f"{stem}{n}d" for stem in ("Conv", "ConvTranspose", "LazyConv", "conv") for n in (1, 2, 3)),
    "torchvision.models", "timm.create_model", "segmentation_models_pytorch",
)
#: Evidence of fixed input shapes (where the autotuner pays off): resize/crop transforms, the
#: standard fixed-size image datasets.
FIXED_SHAPES = re.compile(r"\b(Resize|RandomResizedCrop|RandomCrop|CenterCrop)\(|\b(CIFAR10|CIFAR100|MNIST|FashionMNIST|ImageFolder)\b")
#: Its parts: a transform called (a whole word then `(`), a dataset named (a whole word).
_SHAPE_CALLS = ("Resize", "RandomResizedCrop", "RandomCrop", "CenterCrop")
_SHAPE_DATASETS = ("CIFAR10", "CIFAR100", "MNIST", "FashionMNIST", "ImageFolder")
_CALLED = re.compile(r"\(")
#: The cuDNN autotuner switched (to anything: the explicit settings are judged where they are written).
BENCHMARK_ON = re.compile(r"cudnn\.benchmark\s*=(?!=)")


def text_facts(text: str) -> Dict[str, Any]:
    """`gpu`, `conv`, `cudnn_text`, `cfgnode`, `benchmark_on`, `fixed_shapes` (in that order)."""
    cudnn = "cudnn" in text
    return {
        "gpu": may_use_gpu(text),
        "conv": has_word(text, *_CONV_WORDS),  # (`CONV_TEXT.search(text)`)
        "cudnn_text": cudnn,
        "cfgnode": "CfgNode" in text,  # a yacs-style config may be defined here
        "benchmark_on": cudnn and bool(BENCHMARK_ON.search(text)),  # (a literal start: `re` scans it fast)
        "fixed_shapes": has_word_then(text, _CALLED, *_SHAPE_CALLS) or has_word(text, *_SHAPE_DATASETS),  # (`FIXED_SHAPES.search(text)`)
    }
