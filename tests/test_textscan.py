"""The fast text searches mean exactly what the regular expressions they replace mean."""

import re

import pytest

from speedlint.analyzer.textscan import _GPU_HINT, has_word, has_word_then, may_use_gpu, word_ends

TEXTS = [
    "",
    "eval",
    "model.eval()",
    "evaluate(x)",
    "x_eval = 1",
    "reeval()",
    "évaluer eval",  # non-ASCII word characters next to a word
    "éeval evalé",
    "train_loader; pretrain; train",
    "def\\\n  validate(model):",
    "with torch.no_grad():\n    pass",
    "from torch import no_grad as ng",
    "inference_mode\\\n as im",
    "DataLoader  # comment\n(ds)",
    "DataLoaderX(ds)",
    "x.to(device)",
    "x.to( device)",
    "torch.device( 'cpu')",
    "torch.device(dev)",
    "use mps here",
    "mpsx",
    "torch.xla",
    "nothing to see",
    "CUDA only in caps",
]
WORDS = [("eval",), ("eval", "train"), ("no_grad", "inference_mode"), ("DataLoader",), ("def",), ("validate",)]
AFTER = re.compile(r"(?:\s|\\|#[^\n]*\n)*(?:\(|as\b)")


@pytest.mark.parametrize("words", WORDS)
@pytest.mark.parametrize("text", TEXTS)
def test_has_word_is_a_word_boundary_search(text, words):
    pattern = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, words)))
    assert has_word(text, *words) == (pattern.search(text) is not None)


@pytest.mark.parametrize("words", WORDS)
@pytest.mark.parametrize("text", TEXTS)
def test_has_word_then_is_the_combined_pattern(text, words):
    pattern = re.compile(r"\b(?:%s)(?:\s|\\|#[^\n]*\n)*(?:\(|as\b)" % "|".join(map(re.escape, words)))
    assert has_word_then(text, AFTER, *words) == (pattern.search(text) is not None)


def test_word_ends_lists_every_whole_word_occurrence():
    text = "eval evaluate eval_x (eval) x.eval"
    assert list(word_ends(text, "eval")) == [m.end() for m in re.finditer(r"\beval\b", text)]


@pytest.mark.parametrize("text", TEXTS)
def test_may_use_gpu_is_the_hint_regex(text):
    assert may_use_gpu(text) == (_GPU_HINT.search(text) is not None)
