"""The link's type inference: its rounds after the first visit only the functions whose inputs
changed (`Program._inputs_unchanged`), and that gives what visiting every function gives."""

from speedlint.analyzer.program.link import Program

from speedlint.analyzer.program.summary import summarize

MODELS = '''
class Net:
    def forward(self, x):
        return x


def make_net():
    return Net()
'''

# each function returns what the one after it returns: a round takes the type one step up the
# chain, so it is longer than the rounds and its top stays unknown
CHAIN = '''
from models import make_net


def level0():
    return level1()


def level1():
    return level2()


def level2():
    return level3()


def level3():
    return level4()


def level4():
    return level5()


def level5():
    return make_net()


class Holder:
    def __init__(self, net):
        self.net = net

    def get(self):
        return self.net


def build():
    holder = Holder(level3())
    return holder.get()


def pair():
    return level4(), level2()


def first():
    a, b = pair()
    return a


def outer():
    net = level4()

    def inner():
        return net

    return inner()


def train(model, loaders):
    model.forward(1)
    a, b = loaders
    return a


def main():
    train(level2(), (build(), first()))
    train(outer(), (level1(), level3()))
'''


class _Counting(Program):
    visits = 0

    def _visit_function(self, *args, **kwargs):
        type(self).visits += 1
        return super()._visit_function(*args, **kwargs)


class _EveryFunction(_Counting):
    """The rounds as they were: every function visited in each."""

    visits = 0

    def _inputs_unchanged(self, fid):
        return False


class _WorkList(_Counting):
    visits = 0


def _state(program):
    return (
        program.ret_types,
        program.param_types,
        program.attr_types,
        program.param_elems,
        program.ret_elems,
        program.edges,
        program.callers,
        [m.globals_env for m in program.modules],
        dict(program._symbol_memo),
    )


def test_rounds_visiting_only_changed_inputs_give_what_visiting_every_function_gives(tmp_path):
    files = [(str(tmp_path / name), name, summarize(text)) for name, text in (("models.py", MODELS), ("chain.py", CHAIN))]
    every, work_list = _EveryFunction(files), _WorkList(files)
    assert _state(work_list) == _state(every)
    # the rounds stopped at their cap before the chain's top learnt anything
    names = {fn["q"]: fid for fid, (_, fn) in enumerate(every.functions)}
    assert not every.ret_types[names["level1"]]
    assert every.ret_types[names["level2"]] == {f"I:{every.modules[0].cids['Net']}"}
    assert every.visits == Program.ROUNDS * len(every.functions)
    assert work_list.visits < every.visits


NESTED = '''
class Net:
    def forward(self, x):
        return x


def one_epoch(loader):
    return loader


def main():
    def one_epoch(loader):
        def step(batch):
            return Net()

        return step(loader)

    class Local:
        def run(self):
            return one_epoch(1)

    def later():
        return one_epoch(2)

    return one_epoch(0), later(), Local().run()


def plain():
    return one_epoch(3)
'''


class _NoShortcut(Program):
    """`_nested_def` as it was: every (function, name) looked up and memoised."""

    def __init__(self, files):  # type: ignore[no-untyped-def]
        super().__init__(files)

    @property
    def _encloses(self):  # type: ignore[no-untyped-def]
        return range(len(self.functions))

    @_encloses.setter
    def _encloses(self, value):  # type: ignore[no-untyped-def]
        pass


def test_nested_defs_are_looked_up_only_where_some_can_be(tmp_path):
    """A name read in a function with no def inside it (nor around it) calls no nested def: no
    memo entry is made for it, and the types are those of looking every name up."""
    files = [(str(tmp_path / "train.py"), "train.py", summarize(NESTED))]
    fast, slow = Program(files), _NoShortcut(files)
    assert _state(fast) == _state(slow)
    names = {fn["q"]: fid for fid, (_, fn) in enumerate(fast.functions)}
    net = {f"I:{fast.modules[0].cids['Net']}"}
    assert fast.ret_types[names["main.one_epoch"]] == net  # through `step`, nested in a nested def
    assert fast.ret_types[names["main.later"]] == net  # a def beside it, in the function around it
    assert not fast.ret_types[names["plain"]]  # the module's `one_epoch`, not main's
    assert {fid for fid, _ in fast._nested_memo} <= {names[q] for q in ("main", "main.one_epoch", "main.one_epoch.step", "main.later", "main.Local.run")}
    assert any(fid == names["plain"] for fid, _ in slow._nested_memo)


ELEMENTS = '''
class A:
    def run(self):
        return 1


class B:
    def run(self):
        return 2


a = A()
b = B()


def f(xs):
    p, q = xs
    p.run()


def g():
    f([a, a])


def h():
    f([b, b])


def only(xs):
    p, q = xs
    p.run()


def k():
    only([a, b])
'''


def test_each_position_of_a_literal_sequence_argument_gathers_every_call_site(tmp_path):
    """`f([a, a])` and `f([b, b])` with module-level `a = A()`, `b = B()`: the first position of
    `f`'s parameter may be either, so `p.run()` runs `A.run` and `B.run`. (The types of a
    position were the module name's own frozen set, which `|=` does not grow: only `A.run`.) A
    function called from one place keeps its positions apart: `only([a, b])` runs `A.run`
    alone."""
    program = Program([(str(tmp_path / "m.py"), "m.py", summarize(ELEMENTS))])
    names = {fn["q"]: fid for fid, (_, fn) in enumerate(program.functions)}

    def runs(caller):
        return sorted(program.functions[callee][1]["q"] for _, callee in program.edges[names[caller]])

    assert runs("f") == ["A.run", "B.run"]
    assert runs("only") == ["A.run"]
    # the module's own types of `a` and `b` are not grown by it
    assert program.param_elems[names["f"]]["xs"][0] == {f"I:{program.modules[0].cids['A']}", f"I:{program.modules[0].cids['B']}"}
