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
