"""The shared torch-aware providers: qualified names, training steps, eval loops, value tracing."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from speedlint.analyzer.config import Settings
from speedlint.analyzer.context import FileContext


def ctx_for(code: str) -> FileContext:
    code = textwrap.dedent(code)
    return FileContext("t.py", code, cst.parse_module(code), Settings())


def calls_named(ctx: FileContext, name: str):
    return [c for c in ctx.torch.calls if ctx.code(c.func).endswith(name)]


def one_call(ctx: FileContext, name: str) -> cst.Call:
    found = calls_named(ctx, name)
    assert len(found) == 1, [ctx.code(c) for c in found]
    return found[0]


# -- qualified names ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "code, expr",
    [
        ("import torch\nx = torch.utils.data.DataLoader(ds)", "torch.utils.data.DataLoader"),
        ("import torch as t\nx = t.utils.data.DataLoader(ds)", "t.utils.data.DataLoader"),
        ("from torch.utils.data import DataLoader as DL\nx = DL(ds)", "DL"),
        ("import torch.utils.data as tud\nx = tud.DataLoader(ds)", "tud.DataLoader"),
        ("from torch.utils import data\nx = data.DataLoader(ds)", "data.DataLoader"),
        ("from torch.utils.data.dataloader import DataLoader\nx = DataLoader(ds)", "DataLoader"),
    ],
)
def test_qualified_names_through_import_spellings(code, expr):
    ctx = ctx_for(code)
    call = ctx.torch.calls[0]
    assert ctx.code(call.func) == expr
    assert ctx.qualname(call.func) == "torch.utils.data.DataLoader"


def test_unimported_name_has_no_qualified_name():
    ctx = ctx_for("x = DataLoader(ds)\n")
    assert ctx.qualname(ctx.torch.calls[0].func) is None


def test_from_torch_import_nn():
    ctx = ctx_for("from torch import nn\nm = nn.DataParallel(model)\n")
    assert ctx.qualname(ctx.torch.calls[0].func) == "torch.nn.DataParallel"


# -- training steps ----------------------------------------------------------------------------
FLAT = """
for epoch in range(3):
    for x, y in loader:
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        sched.step()
"""


def test_flat_script_step_and_epoch_loops():
    ctx = ctx_for(FLAT)
    facts = ctx.torch
    assert len(facts.step_loops) == 1 and len(facts.epoch_loops) == 1
    (step,) = facts.step_loops
    assert isinstance(step, cst.For) and ctx.code(step.iter) == "loader"
    assert facts.in_training_step(one_call(ctx, "zero_grad"))
    (epoch,) = facts.epoch_loops
    assert ctx.code(epoch.iter) == "range(3)"


def test_scheduler_step_is_not_an_optimizer_step():
    ctx = ctx_for(
        """
        scheduler = torch.optim.lr_scheduler.StepLR(opt, 1)
        for x in loader:
            loss = model(x)
            loss.backward()
            scheduler.step()
        """
    )
    assert not ctx.torch.step_loops


def test_step_through_helper_functions_and_methods():
    ctx = ctx_for(
        """
        def train_step(model, batch, optimizer):
            loss = model(batch).mean()
            loss.backward()
            optimizer.step()
            log(loss)

        def log(loss):
            print(loss.item())

        def train_one_epoch(model, loader, optimizer):
            for batch in loader:
                train_step(model, batch, optimizer)

        def main():
            for epoch in range(10):
                train_one_epoch(model, loader, optimizer)
                validate(model)

        def validate(model):
            pass
        """
    )
    facts = ctx.torch
    (step,) = facts.step_loops
    assert ctx.code(step.iter) == "loader"
    names = {fn.name.value for fn in facts.step_functions}
    assert names == {"train_step", "log"}
    assert facts.in_training_step(one_call(ctx, "print"))
    assert {fn.name.value for fn in facts.epoch_functions} == {"train_one_epoch", "validate"}
    (epoch,) = facts.epoch_loops
    assert ctx.code(epoch.iter) == "range(10)"


def test_class_based_trainer_with_self_optimizer():
    ctx = ctx_for(
        """
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters())

            def compute_loss(self, batch):
                return self.model(batch).mean()

            def training_step(self, batch):
                self.optimizer.zero_grad()
                loss = self.compute_loss(batch)
                loss.backward()
                self.optimizer.step()

            def fit(self, loader, epochs):
                for epoch in range(epochs):
                    for batch in loader:
                        self.training_step(batch)
        """
    )
    facts = ctx.torch
    assert len(facts.step_loops) == 1 and len(facts.epoch_loops) == 1
    assert {fn.name.value for fn in facts.step_functions} == {"training_step", "compute_loss"}


def test_gan_with_two_optimizers_is_one_step():
    ctx = ctx_for(
        """
        for real in loader:
            opt_d.zero_grad()
            d_loss = bce(D(real), ones) + bce(D(G(z).detach()), zeros)
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            g_loss = bce(D(G(z)), ones)
            g_loss.backward()
            opt_g.step()
        """
    )
    assert len(ctx.torch.step_loops) == 1


def test_a_loop_that_runs_whole_training_runs_is_not_an_epoch_loop():
    ctx = ctx_for(
        """
        def train(hyp):
            opt.zero_grad()
            for epoch in range(hyp.epochs):
                for x, y in loader:
                    loss_fn(model(x), y).backward()
                    opt.step()
            cleanup()

        def evolve(n):
            for generation in range(n):
                train(mutate(hyp))
        """
    )
    facts = ctx.torch
    (run,) = facts.run_loops
    assert ctx.code(run.target) == "generation"
    (epoch,) = facts.epoch_loops
    assert ctx.code(epoch.target) == "epoch"
    assert facts.epoch_of(one_call(ctx, "cleanup")) is None  # once per run
    assert {fn.name.value for fn in facts.epoch_functions} == set()
    assert facts.between_steps(one_call(ctx, "zero_grad")).name.value == "train"  # once per run


def test_between_steps_and_a_level_that_runs_its_own_backward():
    ctx = ctx_for(
        """
        def train_one_epoch():
            opt.zero_grad()
            for x, y in loader:
                loss_fn(model(x), y).backward()
                opt.step()
                opt.zero_grad()

        def fit(epochs):
            for epoch in range(epochs):
                train_one_epoch()

        for step in range(total_steps):
            q_opt.zero_grad()
            q_loss().backward()
            q_opt.step()
            for _ in range(2):
                actor_opt.zero_grad()
                actor_loss().backward()
                actor_opt.step()
        """
    )
    facts = ctx.torch
    assert not facts.run_loops  # `train_one_epoch()` has no epoch loop of its own
    first, per_step = calls_named(ctx, "opt.zero_grad")[:2]
    assert facts.between_steps(first).name.value == "train_one_epoch"
    assert facts.between_steps(per_step) is None
    # the outer loop holds a step loop, but runs a backward of its own: a step too
    assert facts.between_steps(one_call(ctx, "q_opt.zero_grad")) is None
    assert facts.between_steps(one_call(ctx, "actor_opt.zero_grad")) is None


def test_loop_without_backward_is_not_a_step():
    ctx = ctx_for("for x in loader:\n    y = model(x)\n    opt.step()\n")
    assert not ctx.torch.step_loops


def test_eval_loops():
    ctx = ctx_for(
        """
        import torch

        def evaluate(model, loader):
            total = 0
            for x, y in loader:
                total += (model(x) == y).sum()
            return total

        def run(model, loader):
            model.eval()
            for x in loader:
                model(x)

        def infer_nothing(model, loader):
            for x in loader:
                loss = model(x)
                loss.backward()

        with torch.no_grad():
            for x in loader:
                model(x)
        """
    )
    facts = ctx.torch
    assert len(facts.eval_loops) == 3
    owners = {facts.enclosing_function(loop).name.value if facts.enclosing_function(loop) else None for loop in facts.eval_loops}
    assert owners == {"evaluate", "run", None}


def test_per_sample_functions():
    ctx = ctx_for(
        """
        def decode(path):
            return load(path)

        class DS(Dataset):
            def __getitem__(self, i):
                return decode(self.paths[i])

        def my_collate(batch):
            return batch

        loader = DataLoader(DS(), collate_fn=my_collate)
        """
    )
    assert {fn.name.value for fn in ctx.torch.sample_functions} == {"__getitem__", "decode", "my_collate"}


# -- value tracing -----------------------------------------------------------------------------
def _kw(code: str, name: str = "num_workers", call: str = "DataLoader", position=None):
    ctx = ctx_for(code)
    return ctx.values.kwarg(one_call(ctx, call), name, position)


def test_literal_and_missing():
    assert _kw("DataLoader(ds, num_workers=4)").value.options == (4,)
    assert _kw("DataLoader(ds)").missing


def test_positional_argument():
    assert _kw("DataLoader(ds, 32, True, None, None, 3)", position=5).value.options == (3,)


def test_module_constant_and_function_default():
    assert _kw("WORKERS = 0\nDataLoader(ds, num_workers=WORKERS)").value.options == (0,)
    code = "def make(ds, workers=1):\n    return DataLoader(ds, num_workers=workers)\n"
    assert _kw(code).value.options == (1,)
    overridden = code + "make(ds, workers=8)\n"
    assert set(_kw(overridden).value.options) == {1, 8}


def test_chain_of_helpers_resolves_each_parameter_once(monkeypatch):
    """A value passed on through many helpers, each called from several places, is traced
    through every call site (all the constants arrive), and each parameter is resolved once:
    before, the call sites were resolved again at every level (2**levels work; a file of the
    installed torch ran for more than ten minutes)."""
    from speedlint.analyzer.providers import values

    levels = 8
    lines = ["def h0(ds, w):", "    return DataLoader(ds, num_workers=w)"]
    for k in range(1, levels):
        lines += [f"def h{k}(ds, w):", f"    h{k - 1}(ds, w)", f"    h{k - 1}(ds, w)", f"    return h{k - 1}(ds, w)"]
    lines += [f"h{levels - 1}(ds, 2)", f"h{levels - 1}(ds, 4)"]
    seen = []
    real = values.ValueTracer._resolve_param_uncached
    monkeypatch.setattr(values.ValueTracer, "_resolve_param_uncached", lambda self, fn, p: seen.append(p) or real(self, fn, p))
    got = _kw("\n".join(lines) + "\n")
    assert set(got.value.options) == {2, 4}
    assert len(seen) == len(set(map(id, seen))) <= 2 * levels  # once per parameter


def test_argparse_default_through_args():
    code = """
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-workers", type=int, default=0)
    args = parser.parse_args()
    DataLoader(ds, num_workers=args.num_workers)
    """
    kw = _kw(code)
    assert kw.value.options == (0,) and kw.value.kind == "argparse"
    dest = """
    parser.add_argument("-j", "--jobs", dest="workers", default=2)
    opt = parser.parse_args()
    DataLoader(ds, num_workers=opt.workers)
    """
    assert _kw(dest).value.options == (2,)


def test_kwargs_dict_literal_dict_call_and_updates():
    assert _kw("kw = {'num_workers': 0, 'batch_size': 8}\nDataLoader(ds, **kw)").value.options == (0,)
    assert _kw("kw = dict(num_workers=1)\nDataLoader(ds, **kw)").value.options == (1,)
    code = """
    def build(ds):
        kw = {"batch_size": 8}
        kw["num_workers"] = 6
        kw.update(pin_memory=True)
        return DataLoader(ds, **kw)
    """
    assert _kw(code).value.options == (6,)
    assert _kw(code, "pin_memory").value.options == (True,)
    assert _kw("kw = {'batch_size': 8}\nDataLoader(ds, **kw)").missing
    assert _kw("DataLoader(ds, **get_kwargs())").unknown


def test_dict_items_written_from_an_unpacked_call_are_unknown_from_where_they_are_written():
    """`kw["num_workers"], kw["pin_memory"] = make()`: unknown, placed at the call that writes
    them (a CST node, never the tracer's own marker), and in the order written: a literal written
    before the unpacking is overwritten by it, one written after overrides it."""
    before = """
    def build(ds):
        kw = {"batch_size": 8}
        kw["num_workers"] = 0
        kw["num_workers"], kw["pin_memory"] = make()
        return DataLoader(ds, **kw)
    """
    got = _kw(before)
    assert got.unknown and isinstance(got.node, cst.Call) and got.node.func.value == "make"
    assert _kw(before, "pin_memory").unknown
    after = """
    def build(ds):
        kw = {"batch_size": 8}
        kw["num_workers"], kw["pin_memory"] = make()
        kw["num_workers"] = 0
        return DataLoader(ds, **kw)
    """
    assert _kw(after).value.options == (0,)


def test_config_lookups():
    assert _kw("cfg = {'num_workers': 3}\nDataLoader(ds, num_workers=cfg['num_workers'])").value.options == (3,)
    got = _kw("DataLoader(ds, num_workers=cfg.get('num_workers', 8))").value
    assert got.options == (8,) and not got.certain
    assert _kw("DataLoader(ds, num_workers=cfg['num_workers'])").unknown


def test_helpers_conditionals_and_unknowns():
    assert _kw("def workers():\n    return 0\nDataLoader(ds, num_workers=workers())").value.options == (0,)
    assert set(_kw("DataLoader(ds, num_workers=4 if fast else 0)").value.options) == {4, 0}
    assert _kw("import os\nDataLoader(ds, num_workers=os.cpu_count())").unknown
    assert _kw("for w in range(3):\n    DataLoader(ds, num_workers=w)").unknown


def test_config_class_and_self_attributes():
    code = """
    class Config:
        num_workers = 1

    cfg = Config()
    DataLoader(ds, num_workers=cfg.num_workers)
    """
    assert _kw(code).value.options == (1,)
    code = """
    class Trainer:
        def __init__(self, workers=0):
            self.workers = workers

        def loader(self):
            return DataLoader(self.ds, num_workers=self.workers)
    """
    assert _kw(code).value.options == (0,)
