"""Plugins loaded by name (`program.summary_plugins`, `program.plugins`) and facts per program
(`program.scope`): the summary's record of each load, the modules it may give, the programs a
fact holds for."""

from __future__ import annotations

import ast

import pytest

from speedlint.analyzer.program.facts import ProgramFacts
from speedlint.analyzer.program.link import Program
from speedlint.analyzer.program.plugins import plugin_modules
from speedlint.analyzer.program.scope import program_holds
from speedlint.analyzer.program.summary import summarize
from speedlint.analyzer.program.summary_plugins import plugin_expr, plugin_facts


def _call(src: str) -> ast.Call:
    node = ast.parse(src, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


@pytest.mark.parametrize(
    "src, spec",
    [
        ('importlib.import_module("losses." + name)', "losses.*"),
        ('importlib.import_module(f"models.{arch}")', "models.*"),
        ("importlib.import_module(args.model)", "*"),
        ('import_module(cfg["arch"])', "*"),
        ("__import__(name)", "*"),
        ('importlib.import_module("models.resnet")', "models.resnet"),
        ('__import__("a." + name, fromlist=["x"])', "a.*"),
    ],
)
def test_loads_by_name_are_recorded(src, spec):
    assert plugin_expr(_call(src)) == ["imp", spec]


@pytest.mark.parametrize(
    "src",
    [
        'importlib.import_module("model_" + name)',  # a name pattern, not a package
        'importlib.import_module("." + name, package="pkg")',  # relative: not followed
        '__import__("a." + name)',  # gives the top package `a`, not the submodule
        'importlib.import_module(f"{a}.{b}")',  # no literal prefix, two dynamic parts
        "importlib.reload(mod)",
        "json.load(f)",
    ],
)
def test_other_calls_are_not_loads(src):
    assert plugin_expr(_call(src)) is None


def test_sys_path_folders_and_specs():
    tree = ast.parse(
        "import os, sys, importlib\n"
        "sys.path.append(os.path.join(BASE_DIR, 'models'))\n"
        "sys.path.insert(0, './utils')\n"
        "sys.path.append(BASE_DIR)\n"
        "sys.path.append('/opt/abs')\n"
        "m = importlib.import_module(args.model)\n"
    )
    facts = plugin_facts(tree, ast.unparse(tree))
    assert facts == {"plugins": ["*"], "sys_path": ["models", "utils"]}
    assert plugin_facts(ast.parse("x = 1"), "x = 1") == {}


def _program(tmp_path, files):
    out = []
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out.append((str(path), rel, summarize(text)))
    return Program(out), {rel: k for k, rel in enumerate(files)}


NET = "import torch.nn as nn\nclass get_model(nn.Module):\n    def forward(self, x):\n        return x\n"


def test_bare_load_gives_the_sys_path_folder_and_module_neighbours(tmp_path):
    p, ids = _program(tmp_path, {
        "train.py": "import sys, os, importlib\nsys.path.append(os.path.join(BASE, 'models'))\nm = importlib.import_module(args.model)\nloss.backward()\n",
        "models/a.py": NET,
        "models/b.py": "def helper():\n    return 1\n",
        "archive/models/a.py": NET,  # not on sys.path
        "tools.py": NET,  # beside the script, defines a network: may be loaded
        "other_train.py": NET + "loss.backward()\n",  # a sibling entry script: another program
    })
    got = sorted(p.modules[c].shown for c in plugin_modules(p, ids["train.py"], "*"))
    assert got == ["models/a.py", "models/b.py", "tools.py"]


def test_package_load_gives_the_package_modules(tmp_path):
    p, ids = _program(tmp_path, {
        "train.py": "import importlib\nm = importlib.import_module('losses.' + name)\n",
        "losses/__init__.py": "",
        "losses/focal.py": NET,
        "losses/sub/deep.py": NET,  # a subpackage's module is not `losses.<name>`
        "other_losses/focal.py": NET,
    })
    got = sorted(p.modules[c].shown for c in plugin_modules(p, ids["train.py"], "losses.*"))
    assert got == ["losses/focal.py"]
    assert plugin_modules(p, ids["train.py"], "nowhere.*") == []


def test_program_holds_follows_entries_not_siblings():
    # 0 train -> 1 setup (flagged), 0 -> 2 nets; 3 example -> 2 nets; 4 lonely
    deps = [{1, 2}, set(), set(), {2}, set()]
    holds = program_holds(deps, [False, True, False, False, False])
    assert holds == [True, True, True, False, False]
    assert program_holds(deps, [False] * 5) == [False] * 5


def test_plugin_loads_are_imports_of_the_program(tmp_path):
    p, ids = _program(tmp_path, {
        "train.py": "import sys, importlib\nsys.path.append('models')\nm = importlib.import_module(args.model)\nloss.backward()\n",
        "models/net.py": "import torch\ntorch.backends.cudnn.benchmark = True\n" + NET,
        "example.py": "loss.backward()\n",
    })
    facts = ProgramFacts(p)
    holds = facts.program_wide("benchmark_on")
    assert holds[ids["train.py"]] and holds[ids["models/net.py"]] and not holds[ids["example.py"]]


def test_a_flagged_module_no_one_imports_holds_everywhere_unless_it_is_a_script():
    deps = [{1}, set(), set()]  # 0 train -> 1 nets; 2 a module nobody imports
    flags = [False, False, True]
    # `data.py` with the transforms, used by a runner outside the checked code: every program's
    assert program_holds(deps, flags, entries=[True, False, False]) == [True, True, True]
    # a script of its own (`if __name__ == "__main__":`): its program only
    assert program_holds(deps, flags, entries=[True, False, True]) == [False, False, True]


def test_main_guard_marks_a_script():
    text = 'def main():\n    pass\n\nif __name__ == "__main__":\n    main()\n'
    assert plugin_facts(ast.parse(text), text) == {"script": True}
    text = 'x = "__main__"\n'
    assert plugin_facts(ast.parse(text), text) == {}
