"""Memory rules (SPD402-SPD404) beyond their fixtures: settings, project configuration, fix semantics."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_cli
from speedlint.analyzer.config import Settings
from speedlint.analyzer.engine import analyze_text
from speedlint.analyzer.fixing import fix_text
from speedlint.analyzer.registry import select_rules

BARE_ZERO_GRAD = textwrap.dedent(
    """\
    import torch
    import torch.nn.functional as F


    def train(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
    """
)


def _spd(code: str, text: str, **settings):
    s = Settings(select=(code,), **settings)
    return [f for f in analyze_text(text, "train.py", select_rules(s.select), s).findings if f.code == code]


# -- SPD403: the target torch version decides the bare form ---------------------------------
@pytest.mark.parametrize("version", [(2, 1), (2, 0), None])
def test_bare_zero_grad_is_fine_on_torch_2_or_unknown(version):
    assert _spd("SPD403", BARE_ZERO_GRAD, target_torch_version=version) == []


@pytest.mark.parametrize("version", [(1, 13), (1, 8)])
def test_bare_zero_grad_fires_below_torch_2(version):
    found = _spd("SPD403", BARE_ZERO_GRAD, target_torch_version=version)
    assert [f.line for f in found] == [8]
    assert found[0].fix is not None and found[0].fix.applicability.value == "safe"


def test_explicit_false_fires_whatever_the_version():
    text = BARE_ZERO_GRAD.replace("zero_grad()", "zero_grad(set_to_none=False)")
    for version in [(2, 1), None, (1, 13)]:
        assert [f.line for f in _spd("SPD403", text, target_torch_version=version)] == [8]


def test_fix_is_unsafe_when_gradients_are_read():
    text = BARE_ZERO_GRAD.replace(
        "        optimizer.step()\n",
        "        optimizer.step()\n        print(sum(p.grad.abs().sum() for p in model.parameters()))\n",
    )
    assert ".grad." in text
    (finding,) = _spd("SPD403", text, target_torch_version=(1, 13))
    assert finding.fix.applicability.value == "unsafe"
    s = Settings(select=("SPD403",), target_torch_version=(1, 13))
    assert "optimizer.zero_grad(set_to_none=True)" in fix_text(text, "t.py", select_rules(s.select), s, unsafe=True).fixed
    assert fix_text(text, "t.py", select_rules(s.select), s, unsafe=False).fixed == text


def _project(tmp_path, files):
    for name, content in files.items():
        (tmp_path / name).write_text(textwrap.dedent(content), encoding="utf-8")
    (tmp_path / "train.py").write_text(BARE_ZERO_GRAD, encoding="utf-8")
    return tmp_path


def _cli_codes(project):
    res = run_cli("check", "--select", "SPD403", "--no-cache", "--output-format", "json", "train.py", cwd=project)
    assert res.returncode in (0, 1), res.stderr
    data = json.loads(res.stdout) if res.stdout.strip() else []
    items = data if isinstance(data, list) else data.get("findings", [])
    return res.returncode, [item.get("code") for item in items]


@pytest.mark.parametrize(
    "files, fires",
    [
        ({"pyproject.toml": '[project]\nname = "p"\nversion = "0"\ndependencies = ["torch>=1.12", "numpy"]\n'}, True),
        ({"requirements.txt": "numpy\ntorch==1.13.1\n"}, True),
        ({"pyproject.toml": '[tool.speedlint]\ntarget-torch-version = "1.13"\n'}, True),
        ({"pyproject.toml": '[project]\nname = "p"\nversion = "0"\ndependencies = ["torch>=2.1"]\n'}, False),
        ({"requirements.txt": "torch==2.3.0\n"}, False),
        ({"pyproject.toml": '[tool.speedlint]\ntarget-torch-version = "2.2"\n', "requirements.txt": "torch==1.13.1\n"}, False),
        ({}, False),
    ],
    ids=["pyproject-deps-1.12", "requirements-1.13", "tool-speedlint-1.13", "pyproject-deps-2.1", "requirements-2.3", "config-wins", "undeclared"],
)
def test_cli_reads_target_version_from_project(tmp_path, files, fires):
    (tmp_path / ".git").mkdir()  # the project root: do not look further up
    code, codes = _cli_codes(_project(tmp_path, files))
    if fires:
        assert code == 1 and codes == ["SPD403"]
    else:
        assert code == 0 and codes == []


# -- SPD404: the rewrite computes exactly what the loop computed -------------------------------
def _load(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cat_in_loop_fix_keeps_results():
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    from conftest import FIXTURES

    before = _load(FIXTURES / "rules" / "SPD404.py", "spd404_before")
    after = _load(FIXTURES / "rules" / "SPD404.fixed.py", "spd404_after")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 5)
    encoder = torch.nn.Linear(8, 128)
    loader = [(torch.randn(4, 8), torch.randint(0, 5, (4,))) for _ in range(6)]
    for loader_ in (loader, []):  # a loop that never runs keeps the initial value
        assert torch.equal(before.predict(model, loader_, 5), after.predict(model, loader_, 5))
        e1, l1 = before.extract_embeddings(encoder, loader_)
        e2, l2 = after.extract_embeddings(encoder, loader_)
        assert np.array_equal(e1, e2) and e1.dtype == e2.dtype
        assert torch.equal(l1, l2) and l1.dtype == l2.dtype
    batches = [(torch.randn(2, 4), torch.randn(3, 4)) for _ in range(3)]
    assert torch.equal(before.collect_rows(batches), after.collect_rows(batches))


CAT_CASES = {
    "dtype-promotion": """
        import torch
        def f(chunks):
            acc = torch.tensor([])  # float32, 1-D empty: legacy cat accepts it
            for c in chunks:
                acc = torch.cat([acc, c])
            return acc
    """,
    "dim-and-break": """
        import torch
        def f(chunks):
            acc = torch.zeros(2, 0)
            for i, c in enumerate(chunks):
                if i == 3:
                    break
                acc = torch.cat([acc, c.reshape(2, -1)], dim=-1)
            return acc
    """,
    "module-level": """
        import torch
        acc = torch.ones(1)
        for c in [torch.arange(3), torch.arange(2), torch.arange(4), torch.arange(1), torch.arange(5)]:
            acc = torch.cat((acc, c * 2))
        def f(chunks):
            return acc
    """,
}


@pytest.mark.parametrize("name", sorted(CAT_CASES))
def test_cat_in_loop_fix_semantics(name, tmp_path):
    torch = pytest.importorskip("torch")
    text = textwrap.dedent(CAT_CASES[name])
    s = Settings(select=("SPD404",))
    fixed = fix_text(text, "t.py", select_rules(s.select), s).fixed
    assert "_parts.append(" in fixed and fixed != text
    (tmp_path / "before.py").write_text(text)
    (tmp_path / "after.py").write_text(fixed)
    before = _load(tmp_path / "before.py", f"b_{name}")
    after = _load(tmp_path / "after.py", f"a_{name}")
    chunks = [torch.arange(6, dtype=torch.long) + i for i in range(5)]
    r1, r2 = before.f(chunks), after.f(chunks)
    assert r1.dtype == r2.dtype and torch.equal(r1, r2)
