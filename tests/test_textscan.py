"""The fast text searches mean exactly what the regular expressions they replace mean."""

import re

import pytest

from conftest import FIXTURES
from speedlint.analyzer.frameworks import hf_facts
from speedlint.analyzer.textscan import _GPU_HINT, has_word, has_word_then, may_grow, may_use_gpu, word_ends

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


# -- may_grow: the text check for SPD404's grow sites --------------------------------------------
GROW = ("append", "cat", "concat", "concatenate", "stack", "vstack", "hstack")
GROWS = [  # every one is a grow site in a loop: the text check must say "maybe"
    "for x in xs:\n    acc = torch.cat([acc, x])\n",
    "for x in xs:\n    acc = torch.cat((x, acc), dim=0)\n",
    "while True:\n    acc = np.concatenate(\n        [acc,  # so far\n         x],\n        axis=0,\n    )\n",
    "for x in xs:\n    acc = x if acc is None else torch.cat([acc, x])\n",
    "for x in xs:\n    self.acc = torch.cat([self . acc, x])\n",
    "for x in xs: acc = torch.cat([acc, x])\n",
    "for x in xs:\n    if x:\n        with ctx:\n            acc = torch.cat(tensors=[(acc), x])\n",
    "def f(\n    xs,\n):\n    for x in xs:\n        acc = torch.cat([acc, x])\n",
    "for x in xs:\n    acc \\\n        = torch.cat([acc, x])\n",
    "from torch import cat as join\nfor x in xs:\n    acc = join([acc, x])\n",
    "for x in xs:\n    acc = torch.cat([acc, x], dim=get('#'))\n",  # a string in the call: maybe
    "for x in xs:\n\tacc = torch.cat([acc, x])\n",  # tabs: maybe
    'for x in xs:\n    """\ndef not_a_def():\n    """\n    acc = torch.cat([acc, x])\n',
    "for d in ds:\n    scores = np.append(scores, d[4])\n",  # the accumulator is the first argument
    "for d in ds:\n    scores = np.append(\n        scores,\n        d,\n        axis=0,\n    )\n",
]
NO_GROWS = [  # no grow site in a loop: the text check may say "no"
    "acc = torch.cat([acc, x])\n",  # not in a loop
    "def f(xs):\n    acc = torch.cat([acc, x])\n    for x in xs:\n        pass\n",
    "for x in xs:\n    y = torch.cat([acc, x])\n",  # another name
    "acc = 1\nfor x in xs:\n    y = torch.cat([acc, x])\n",  # `acc =` is an earlier statement
    "for x in xs:\n    y = f(acc=torch.cat([acc, x]))\n",  # a keyword argument, not the target
    "for x in xs:\n    acc = torch.cat([acc])\n",  # one element
    "# torch.cat([acc, x]) in a loop\nacc = 1\n",
    "for d in ds:\n    scores = np.append(d, scores)\n",  # prepended to another value: a new array each time
    "for d in ds:\n    out = items.append(d)\n",  # one argument: a list's append
]


@pytest.mark.parametrize("text", GROWS)
def test_may_grow_says_maybe_for_every_site(text):
    import ast

    from speedlint.analyzer.prelook import AstFacts

    assert not AstFacts(ast.parse(text), text).grows.isdisjoint(GROW + ("join",))  # a site indeed
    assert may_grow(text, GROW)


@pytest.mark.parametrize("text", NO_GROWS)
def test_may_grow_says_no_without_a_site_in_a_loop(text):
    assert not may_grow(text, GROW)


def _real_code(shard: int, shards: int):
    """The fixtures (in every shard: they hold the grow sites this test must see) and the installed
    torch and numpy, dealt into `shards` shards (so that pytest-xdist spreads the work over the cores)."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    installed = []
    for package in ("torch", "numpy"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin:
            installed += sorted(Path(spec.origin).parent.rglob("*.py"))
    return sorted((root / "fixtures").rglob("*.py")) + installed[shard::shards]


REAL_CODE_SHARDS = 4


@pytest.mark.parametrize("shard", range(REAL_CODE_SHARDS))
def test_may_grow_never_misses_a_site_in_real_code(shard):
    """On the fixtures and installed packages: wherever `ast` sees a grow site, the text says maybe.

    A file where the text already says maybe cannot break the rule, so only the others are parsed
    (the count of grow sites seen is taken over every file all the same)."""
    import ast

    from speedlint.analyzer.prelook import AstFacts

    seen = 0
    for path in _real_code(shard, REAL_CODE_SHARDS):
        text = path.read_text(encoding="utf-8", errors="replace")
        if not any(g in text for g in GROW):
            continue
        maybe = may_grow(text, GROW)
        if maybe and seen:
            continue
        try:
            facts = AstFacts(ast.parse(text), text)
        except (SyntaxError, ValueError):
            continue
        if not facts.grows.isdisjoint(GROW):
            seen += 1
            assert maybe, path
    assert seen > 0


def test_may_grow_says_maybe_for_carriage_returns():
    assert may_grow("acc = 1\r\nfor x in xs:\r\n    acc = \\\r\n        torch.cat([acc, x])\r\n", GROW)
    assert may_grow("for x in xs:\r    acc = torch.cat([acc, x])\r", GROW)


# -- the summary's text facts that hf_facts reads: each is its regex, searched part by part -------
PRECISION_TEXTS = [
    "", "torch.backends.cuda.matmul.allow_tf32 = True", "torch.set_float32_matmul_precision('high')", "tf32: true",
    "tf32 =1", "use_tf32 = True", "xtf32=1", "tf32 == x", "MixedPrecision(param_dtype=torch.float16)",
    "FSDPMixedPrecision(x)", "torch_dtype = torch.bfloat16", "torch_dtype='auto'", "torch_dtype=dtype",
    "model.half()", "model.bfloat16()", "x.half", "x.to(torch.float16)", "x.to( dtype = torch.half )",
    "x.to(device, torch.float16)", "x.to(torch.float32)", "évaluer MixedPrecision(", "éMixedPrecision(",
]


@pytest.mark.parametrize("text", PRECISION_TEXTS)
def test_precision_facts_are_their_regexes(text):
    assert hf_facts._switches_tf32(text) == (hf_facts._TF32.search(text) is not None)
    assert hf_facts._reduces_precision(text) == (hf_facts._REDUCED.search(text) is not None)


#: TF32 named where it switches nothing on: a docstring, a comment, a string (SPD304 still fires).
TF32_NOT_IN_CODE = [
    '"""Call torch.set_float32_matmul_precision("high") before training."""\nx = 1\n',
    "# torch.backends.cuda.matmul.allow_tf32 = True\nx = 1\n",
    'print(f"tf32={flag}")\n',
    "HELP = 'tf32: switch TF32 on'\n",
]


@pytest.mark.parametrize("text", TF32_NOT_IN_CODE)
def test_tf32_named_outside_the_code_switches_nothing_on(text):
    assert hf_facts._TF32.search(text) is not None  # the text alone would say so
    assert not hf_facts._switches_tf32(text)
    assert "tf32" not in hf_facts.summary_facts(text)


def test_spd304_fires_when_only_a_docstring_names_the_setting():
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.engine import analyze_text
    from speedlint.analyzer.registry import select_rules

    code = (FIXTURES / "rules" / "SPD304.py").read_text()
    advised = code.replace('"""Image classifier', '"""Call `torch.set_float32_matmul_precision("high")` first. Image classifier', 1)
    assert advised != code
    rules = select_rules(("SPD304",))

    def lines(text):
        return [f.line for f in analyze_text(text, "train.py", rules, Settings(select=("SPD304",))).findings]

    assert lines(advised) == lines(code) != []
    switched = advised.replace("import argparse\n", "import argparse\n\nimport torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", 1)
    assert lines(switched) == []  # in the code, it does switch TF32 on
