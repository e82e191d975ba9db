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
#: The words of `CONV_TEXT` (a match is one of them as a whole word), by a part of them each holds.
_CONV_WORDS = {
    **{f"onv{n}d": (f"Conv{n}d", f"LazyConv{n}d", f"conv{n}d") for n in (1, 2, 3)},
    "onvTranspose": ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"),
    **{w: (w,) for w in ("torchvision.models", "timm.create_model", "segmentation_models_pytorch")},
}
#: Evidence of fixed input shapes (where the autotuner pays off): resize/crop transforms, the
#: standard fixed-size image datasets.
FIXED_SHAPES = re.compile(r"\b(Resize|RandomResizedCrop|RandomCrop|CenterCrop)\(|\b(CIFAR10|CIFAR100|MNIST|FashionMNIST|ImageFolder)\b")
#: Its parts by a part of them each holds: transforms called (a whole word then `(`), datasets named (a whole word).
_SHAPE_CALLS = {"Resize(": ("Resize",), "Crop(": ("RandomResizedCrop", "RandomCrop", "CenterCrop")}
_SHAPE_DATASETS = {"CIFAR10": ("CIFAR10", "CIFAR100"), "MNIST": ("MNIST", "FashionMNIST"), "ImageFolder": ("ImageFolder",)}
_CALLED = re.compile(r"\(")
#: The cuDNN autotuner switched (to anything: the explicit settings are judged where they are written).
BENCHMARK_ON = re.compile(r"cudnn\.benchmark\s*=(?!=)")


def text_facts(text: str) -> Dict[str, Any]:
    """`gpu`, `conv`, `cudnn_text`, `cfgnode`, `benchmark_on`, `fixed_shapes` (in that order)."""
    cudnn = "cudnn" in text
    return {
        "gpu": may_use_gpu(text),
        "conv": any(part in text and has_word(text, *words) for part, words in _CONV_WORDS.items()),  # (`CONV_TEXT.search(text)`)
        "cudnn_text": cudnn,
        "cfgnode": "CfgNode" in text,  # a yacs-style config may be defined here
        "benchmark_on": cudnn and bool(BENCHMARK_ON.search(text)),  # (a literal start: `re` scans it fast)
        "fixed_shapes": (  # (`FIXED_SHAPES.search(text)`)
            any(part in text and has_word_then(text, _CALLED, *words) for part, words in _SHAPE_CALLS.items())
            or any(part in text and has_word(text, *words) for part, words in _SHAPE_DATASETS.items())
        ),
    }
