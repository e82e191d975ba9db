"""One vocabulary for both sides: the `ast` side (program summaries, the pre-look) and the LibCST
side (providers) read the same lists, and the text hints of a pattern cover every match of it."""

import re

from speedlint.analyzer import prelook, textscan, vocabulary
from speedlint.analyzer.program import link, loader_summary, summary
from speedlint.analyzer.providers import flow, loaders, training


def test_both_sides_read_one_list():
    assert training.EVAL_NAME is vocabulary.EVAL_NAME is prelook.EVAL_NAME
    assert training.SCHEDULER_HINT is vocabulary.SCHEDULER_HINT is summary.SCHEDULER_HINT
    assert summary.COUNTER_NAME is vocabulary.COUNTER_NAME
    assert loaders.DISTRIBUTED is vocabulary.DISTRIBUTED
    assert loader_summary._DISTRIBUTED_WORDS is vocabulary.DISTRIBUTED_WORDS  # (the words `DISTRIBUTED` is made of)
    assert flow.DTYPES is vocabulary.DTYPES is summary._DTYPE_NAMES is loaders.DTYPES
    assert loaders.LOADER_FAMILIES is vocabulary.LOADER_FAMILIES
    assert link.LOADER_NAMES is vocabulary.LOADER_NAMES
    assert loader_summary._LOADER_ENDINGS is loaders.LOADER_TRIGGERS
    assert prelook._GRAD_OFF is textscan._GRAD_OFF_NAMES is vocabulary.GRAD_OFF_NAMES


def test_loader_names_cover_the_families():
    assert set(vocabulary.LOADER_TAILS) <= vocabulary.LOADER_NAMES
    assert all(name.endswith(vocabulary.LOADER_TRIGGERS) for name in vocabulary.LOADER_NAMES)


def _alternatives(pattern: "re.Pattern[str]") -> list:
    inner = pattern.pattern[pattern.pattern.index("(") + 1 : pattern.pattern.rindex(")")]
    return [alt.replace("\\.", ".") for alt in inner.split("|")]


def test_distributed_hints_cover_every_launcher():
    alternatives = _alternatives(vocabulary.DISTRIBUTED)
    assert len(alternatives) == 11
    for word in alternatives:
        assert vocabulary.DISTRIBUTED.search(f"x = {word}(y)"), word
        assert word in vocabulary.DISTRIBUTED_WORDS, f"{word} is not looked for: the summary would skip it"
        assert textscan.has_word(f"x = {word}(y)", *vocabulary.DISTRIBUTED_WORDS)
        assert not textscan.has_word(f"x = {word}_(y)", *vocabulary.DISTRIBUTED_WORDS) and not vocabulary.DISTRIBUTED.search(f"x = {word}_(y)")
    assert not vocabulary.DISTRIBUTED.search("model = DataParallel(model)  # one process")


def test_dotted_name():
    import ast

    assert vocabulary.dotted_name(ast.parse("a.b.c", mode="eval").body) == "a.b.c"
    assert vocabulary.dotted_name(ast.parse("f().b", mode="eval").body) is None
