"""The pre-look's loop shapes for SPD501 (`analyzer/prelook_batch.py`): a file whose loops cannot
be loops over a batch is not parsed for SPD501, and no finding is lost (the findings with and
without the pre-look are the same, and the precondition holds wherever the rule reports)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.prelook import AstFacts
from speedlint.analyzer.registry import select_rules

RULE = select_rules(("SPD501",))[0]
SETTINGS = Settings(select=("SPD501",))

HEADER = """\
import torch
from torch import nn


"""


def _model(forward_body: str, init: str = "self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])", extra: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(forward_body).strip("\n"), " " * 8)
    head = textwrap.dedent("""\
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                INIT

            def forward(self, x):
        """).replace("INIT", init)
    return HEADER + head + body + "\n" + textwrap.dedent(extra)


def _precondition(text: str) -> bool:
    return bool(RULE.ast_precondition(AstFacts(ast.parse(text), text)))  # type: ignore[attr-defined]


def _findings(text: str, prelook: bool):  # type: ignore[no-untyped-def]
    return [(f.code, f.line, f.message) for f in analyze_text(text, "m.py", [RULE], SETTINGS, prelook=prelook).findings]


#: Model files whose loops cannot run over the batch: SPD501's pre-look says no.
SPARED = {
    "over the layers": _model("""
        for layer in self.layers:
            x = layer(x)
        return x
    """),
    "enumerate over the layers": _model("""
        for i, layer in enumerate(self.layers):
            x = layer(x) + i
        return x
    """),
    "over a range of layers": _model("""
        for i in range(self.num_layers):
            x = self.layers[i](x)
        return x
    """, init="self.layers = nn.Sequential(nn.Linear(4, 4))\n        self.num_layers = 1"),
    "over a literal list": _model("""
        outs = [x * s for s in self.scales]
        return torch.stack(outs)
    """, init="self.scales = [1.0, 2.0]"),
    "over a parameter of a helper": _model("""
        return helper(x)
    """, extra="""
        def helper(x):
            return torch.stack([r * 2 for r in x])
    """),
    "over a sequence parameter": _model("""
        return helper([x])
    """, extra="""
        def helper(xs: List[torch.Tensor]):
            out = []
            for x in xs:
                out.append(x * 2)
            return out
    """).replace("import torch\n", "from typing import List\n\nimport torch\n"),
    "range of a parameter": _model("""
        return helper(x, 4)
    """, extra="""
        def helper(x, n):
            for i in range(n):
                x = x + i
            return x
    """),
    "range of a name bound twice": _model("""
        n = x.size(0)
        n = 3
        for i in range(n):
            x = x + i
        return x
    """),
    "over a config's layers": _model("""
        for block in self.config.blocks:
            x = block(x)
        return x
    """),
    "loops only outside model code": _model("""
        return x
    """, extra="""
        def report(xs):
            for x in xs:
                print(x.sum())
    """),
}

#: Model files with a loop that may run over the batch: the pre-look keeps SPD501.
KEPT = {
    "range of the batch size": _model("""
        for i in range(x.size(0)):
            x[i] = x[i] * 2
        return x
    """),
    "over a tensor argument": _model("""
        x = x.flatten(1)
        return torch.stack([(row - row.mean()) / (row.std() + 1e-6) for row in x])
    """),
    "over a self tensor": _model("""
        for row in self.weight:
            x = x + row.sum()
        return x
    """, init="self.weight = torch.zeros(4, 4, device='cuda')"),
    "over a registered buffer": _model("""
        for row in self.table:
            x = x + row
        return x
    """, init='self.table = nn.ModuleList()\n        self.register_buffer("table", torch.zeros(4, 4))'),
    "a buffer named at run time": _model("""
        for row in self.layers:
            x = x + row
        return x
    """, init='self.layers = nn.ModuleList()\n        name = "lay" + "ers"\n        self.register_buffer(name, torch.zeros(4, 4))'),
    "container written also as a tensor": _model("""
        for row in self.layers:
            x = x + row
        return x
    """, extra="""
        class Other(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = torch.ones(4, 4)
    """),
    "a container whose import is not torch's": _model("""
        for row in self.layers:
            x = x + row
        return x
    """).replace("from torch import nn", "from compat import nn"),
    "a row mask filled per sample": _model("""
        mask = torch.ones_like(x)
        for i in range(self.num_layers):
            mask[i, self.lengths[i]:] = 0
        return x * mask
    """),
    "a loop in a helper that forward calls": _model("""
        return helper(x)
    """, extra="""
        def helper(x):
            h = x.flatten(1)
            return torch.stack([(r - r.mean()) / (r.std() + 1e-6) for r in h])
    """),
    "over a parameter of a helper, read as a tensor": _model("""
        return helper(x)
    """, extra="""
        def helper(x):
            n = x.size(1)
            return torch.stack([r * n for r in x])
    """),
    "over a parameter of forward": _model("""
        return torch.stack([r * 2 for r in x])
    """),
    "unique values": _model("""
        for c in x.unique():
            x = x + (x == c).float().sum()
        return x
    """),
}


@pytest.mark.parametrize("name", sorted(SPARED))
def test_spared_model_files(name: str) -> None:
    text = SPARED[name]
    assert not _precondition(text), name
    assert _findings(text, prelook=False) == [], name  # the rule itself agrees


@pytest.mark.parametrize("name", sorted(KEPT))
def test_kept_model_files(name: str) -> None:
    text = KEPT[name]
    assert _precondition(text), name
    assert _findings(text, prelook=True) == _findings(text, prelook=False), name


def test_kept_files_include_real_findings() -> None:
    """The kept shapes are ones the rule reports (not only what the pre-look lets through)."""
    reported = {name for name, text in KEPT.items() if _findings(text, prelook=False)}
    assert {"range of the batch size", "over a tensor argument", "over a registered buffer", "a row mask filled per sample"} <= reported, reported


def test_training_file_keeps_every_loop() -> None:
    """In a file that may hold a training step, a loop outside model code counts too."""
    text = HEADER + textwrap.dedent("""\
        def train(model, loader, opt):
            for x, y in loader:
                x = x.to("cuda").flatten(1)
                x = torch.stack([(row - row.mean()) / (row.std() + 1e-6) for row in x])
                loss = model(x).sum()
                loss.backward()
                opt.step()
    """)
    assert _precondition(text)
    assert _findings(text, prelook=True) == _findings(text, prelook=False) != []


# -- where a loop may run hot: a file with a training step (`_Index.may_run_hot`) --------------------
TRAIN = HEADER + """\
def train(model, loader, opt):
    for x, y in loader:
        x = x.to("cuda")
        x = STEP_CALL
        loss = model(x).sum()
        loss.backward()
        opt.step()


def normalize(x):
    x = x.flatten(1)
    return torch.stack([(row - row.mean()) / (row.std() + 1e-6) for row in x])
"""


def _train(step_call: str, tail: str = "") -> str:
    return TRAIN.replace("STEP_CALL", step_call) + textwrap.dedent(tail)


def _seeded_findings(text: str, seeds, prelook: bool):  # type: ignore[no-untyped-def]
    return [(f.code, f.line, f.message) for f in analyze_text(text, "m.py", [RULE], SETTINGS, prelook=prelook, seeds=seeds).findings]


def _seeds(kind: str, ordinal: int):  # type: ignore[no-untyped-def]
    from speedlint.analyzer.program.seeds import FileSeeds, Hop

    return FileSeeds(functions={ordinal: {kind: (Hop("run.py", 3, "normalize(...)"),)}})


def _seeded_precondition(text: str, seeds) -> bool:  # type: ignore[no-untyped-def]
    facts = AstFacts(ast.parse(text), text)
    facts.seed(seeds)
    return bool(RULE.ast_precondition(facts))  # type: ignore[attr-defined]


def test_helper_the_step_calls_is_kept() -> None:
    """A function a loop calls may be the training step's: its batch loop is looked at."""
    text = _train("normalize(x)")
    assert _precondition(text)
    assert _findings(text, prelook=True) == _findings(text, prelook=False) != []


def test_helper_nothing_hot_runs_is_spared() -> None:
    """The same batch loop in a function that no loop, hook or model code of the file runs (and
    the whole program does not make hot): it runs once, not per step; no parse for SPD501."""
    text = _train("x * 2", tail="""

        if __name__ == "__main__":
            print(normalize(torch.ones(2, 2)))
    """)
    assert not _precondition(text)
    assert _findings(text, prelook=False) == []  # the rule agrees


def test_loop_nested_in_a_while_step_is_kept() -> None:
    """A batch loop inside the step loop itself (here a `while`): looked at."""
    text = HEADER + textwrap.dedent("""\
        def train(model, batches, opt):
            while True:
                x = next(batches).to("cuda").flatten(1)
                x = torch.stack([(row - row.mean()) / (row.std() + 1e-6) for row in x])
                model(x).sum().backward()
                opt.step()
    """)
    assert _precondition(text)
    assert _findings(text, prelook=True) == _findings(text, prelook=False) != []


def test_function_the_program_runs_per_step_is_kept() -> None:
    """The whole program runs `normalize` (ordinal 1) on every training step from another
    module: its loop is looked at; run per sample instead, it is not (dataset code is per
    sample by design)."""
    text = _train("x * 2")
    per_step, per_sample = _seeds("step", 1), _seeds("sample", 1)
    assert _seeded_precondition(text, per_step)
    assert _seeded_findings(text, per_step, prelook=True) == _seeded_findings(text, per_step, prelook=False) != []
    assert not _seeded_precondition(text, per_sample)
    assert _seeded_findings(text, per_sample, prelook=False) == []


def test_only_the_constructed_class_init_is_model_code() -> None:
    """`forward` building `Box(...)` runs `Box.__init__`, not the `__init__` of every class."""
    text = _model("""
        return Box(x).x
    """, extra="""
        class Box:
            def __init__(self, x):
                self.x = x


        class Table:
            def __init__(self, x):
                for i in range(x.size(0)):
                    x[i] = x[i] * 2
                self.x = x
    """)
    assert not _precondition(text)
    assert _findings(text, prelook=False) == []
    kept = text.replace("return Box(x).x", "return Table(x).x")
    assert _precondition(kept)
    assert _findings(kept, prelook=True) == _findings(kept, prelook=False)
