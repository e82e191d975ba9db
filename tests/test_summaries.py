"""The per-file summaries of the whole-program model: their compact, read-only form, the cache
that keeps them, and the batches that summarise a tree in several processes."""

import json
import pickle

import pytest

from speedlint.analyzer import parallel
from speedlint.analyzer.cache import ResultCache
from speedlint.analyzer.program.summary import FrozenDict, compact, summarize

TRAIN = '''
import torch

class Trainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    def fit(self):
        for x, y in self.loader:
            out = self.model(x)
            loss = out.mean()
            loss.backward()
            print(loss.item())
'''

LOSS = '''
class Focal:
    def __init__(self, gamma):
        self.gamma = gamma

    def __call__(self, out, y):
        return self.reduce((out - y).pow(self.gamma))

    def reduce(self, x):
        return x.mean()
'''


def _parts(obj, found):
    """Every tuple and dict inside `obj`, by identity."""
    if isinstance(obj, (tuple, list)):
        found.append(obj)
        for item in obj:
            _parts(item, found)
    elif isinstance(obj, dict):
        found.append(obj)
        for item in obj.values():
            _parts(item, found)
    return found


def test_summary_is_read_only_and_equal_parts_are_one_object():
    summary = summarize(TRAIN)
    selves = [p for p in _parts(summary, []) if p == ("n", "self")]
    assert len(selves) > 3  # `self.model`, `self.loader`, ... read and written
    assert len({id(p) for p in selves}) == 1
    fn = summary["functions"][0]
    assert isinstance(fn, FrozenDict) and isinstance(fn["calls"], tuple)
    with pytest.raises(TypeError):
        fn["q"] = "other"
    with pytest.raises(TypeError):
        fn.update(q="other")
    summary["cells"] = [[1, 1]]  # the summary itself stays a plain dict (a notebook adds its cells)


def test_compact_keeps_true_apart_from_one():
    """`True == 1` and `hash(True) == hash(1)`: sharing must not turn a flag into a number."""
    got = compact({"a": [["k", True], ["k", 1], ["k", 1.0]], "b": {"x": True}, "c": {"x": 1}})
    assert got["a"][0][1] is True and got["a"][1][1] is not True and type(got["a"][2][1]) is float
    assert got["b"]["x"] is True and got["c"]["x"] is not True


def test_compact_leaves_nothing_for_the_cyclic_collector():
    """The parts shared between a batch's files (tens of MiB for a big batch) are freed when the
    batch is done, by reference counting: the summary phase rests the cyclic collector, so a
    cycle through `compact`'s walk would keep them until the run ends."""
    import gc
    import types

    def walks() -> int:
        # (functions only: `getattr` on any tracked object would run lazy modules' hooks)
        return sum(1 for o in gc.get_objects() if type(o) is types.FunctionType and o.__qualname__ == "compact.<locals>.go")

    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        before = walks()
        compact(json.loads(json.dumps(summarize(TRAIN))), {})
        assert walks() == before
    finally:
        if collecting:
            gc.enable()


def test_compact_summary_survives_json_and_pickle():
    summary = summarize(TRAIN)
    assert compact(json.loads(json.dumps(summary))) == summary
    again = pickle.loads(pickle.dumps(summary))
    assert again == summary and isinstance(again["functions"][0], FrozenDict)


def test_calls_are_typed_records_by_name_and_by_position():
    """A summary's calls are `Call`s: fields by name (`call.func`), the same by position
    (`C_FUNC`), also after the JSON of the cache and the pickling to and from the workers."""
    from speedlint.analyzer.program.schema import C_FLAGS, C_FUNC, C_HOST, C_LINE, Call

    summary = summarize(TRAIN)
    for copy in (summary, compact(json.loads(json.dumps(summary))), pickle.loads(pickle.dumps(summary))):
        calls = [c for fn in copy["functions"] for c in fn["calls"]] + list(copy["module"]["calls"])
        assert calls and all(type(c) is Call for c in calls)
        backward = next(c for c in calls if c.func[-1] == "backward")
        assert backward.func is backward[C_FUNC] and backward.line == backward[C_LINE] == 13
        assert backward.flags == backward[C_FLAGS] and backward.host == backward[C_HOST]
        assert backward.loop == 0 and backward.args == () and backward.kws == {}


def test_summary_cache_reads_entries_back_and_drops_damaged_ones(tmp_path):
    summary = summarize(TRAIN)
    store = ResultCache(tmp_path / "cache").summaries
    store.put("good", summary)
    store.put("bad", summary)
    store.save()
    doc = json.loads(store.path.read_text(encoding="utf-8"))
    doc["entries"]["bad"] = doc["entries"]["bad"][:-7]  # cut short
    store.path.write_text(json.dumps(doc), encoding="utf-8")
    fresh = ResultCache(tmp_path / "cache").summaries
    assert fresh.get("good") == summary
    assert fresh.get("bad") is None  # summarised again, not a crash
    assert fresh.get("missing") is None


def test_summary_cache_of_another_format_is_not_used(tmp_path):
    """The summary format names the store's file, and an entry of another format (an old cache
    copied over, a stale entry) is summarised again: a format change invalidates cleanly."""
    from speedlint.analyzer.program.schema import SUMMARY_FORMAT

    summary = summarize(TRAIN)
    assert summary["format"] == SUMMARY_FORMAT
    store = ResultCache(tmp_path / "cache").summaries
    assert f"-v{SUMMARY_FORMAT}-" in store.path.name
    store.put("current", summary)
    store.put("old", summary)
    store.save()
    doc = json.loads(store.path.read_text(encoding="utf-8"))
    old = json.loads(doc["entries"]["old"])
    old["format"] = SUMMARY_FORMAT - 1
    doc["entries"]["old"] = json.dumps(old)
    store.path.write_text(json.dumps(doc), encoding="utf-8")
    fresh = ResultCache(tmp_path / "cache").summaries
    assert fresh.get("current") == summary
    assert fresh.get("old") is None


def test_a_batch_shares_equal_parts_across_its_files(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "loss.py").write_text(LOSS, encoding="utf-8")
    done = parallel._summarize([(0, str(tmp_path / "train.py"), ()), (1, str(tmp_path / "loss.py"), ())])
    (_, _, train, _), (_, _, loss, _) = done
    selves = [p for s in (train, loss) for p in _parts(s, []) if p == ("n", "self")]
    assert [p for p in _parts(loss, []) if p == ("n", "self")] and len({id(p) for p in selves}) == 1


def test_summarised_together_is_what_each_part_gives(tmp_path):
    """This process and the pool share the parts; every file is summarised once, as alone."""
    items = []
    for i in range(12):
        path = tmp_path / f"m{i}.py"
        path.write_text((TRAIN if i % 2 else LOSS) + f"\nX = {i}\n", encoding="utf-8")
        items.append((i, str(path), ()))
    parts = [items[k::5] for k in range(5)] + [[]]
    together = parallel._summarize_together(parts, workers=2)
    alone = parallel._summarize(items)
    assert sorted(r[0] for r in together) == list(range(12))
    assert sorted(together, key=lambda r: r[0]) == alone


def test_summary_cache_keeps_what_another_run_saved_meanwhile(tmp_path):
    first, second = ResultCache(tmp_path / "c").summaries, ResultCache(tmp_path / "c").summaries
    train, loss = summarize(TRAIN), summarize(LOSS)
    first.put("a", train)
    first.put("b", train)
    first.save()
    second.put("b", loss)  # the same digest saved again: the newer entry wins
    second.put("c", loss)
    second.save()
    doc = json.loads(second.path.read_text(encoding="utf-8"))  # one well-formed document
    assert sorted(doc["entries"]) == ["a", "b", "c"]
    again = ResultCache(tmp_path / "c").summaries
    assert again.get("a") == train and again.get("b") == loss and again.get("c") == loss
    assert second.get("a") == train  # the store that saved reads the file again


CALLER = '''
import torch

def train(loader, model, optimizer, logger, d, xs):
    max_lr = 0.0
    loss_value = 0.0
    for step, x in enumerate(loader):
        loss = model(x)
        if step % 10 == 0:
            loss_value = loss.item()
        for group in optimizer.param_groups:
            max_lr = max(max_lr, group["lr"])
        logger.update(loss=loss_value, lr=optimizer.param_groups[0]["lr"], m=max_lr, step=step, n=len(x), raw=loss)
        logger.update(loss_value, 2 * max_lr, *xs, **d)
        total = 0.0
        total += loss
        with open("log") as fh:
            pass
        logger.update(total=total, fh=fh, f=float(loss), w=(w := 1.0))
'''


def test_calls_record_which_arguments_are_python_values():
    """`C_HOST`: positions and keywords passed a Python value in the caller; `*`/`**` unpacking
    recorded as such (`Hotness.host_parameters` counts it as anything)."""
    from speedlint.analyzer.program.schema import C_HOST, C_KWS, SPLAT

    calls = [c for c in summarize(CALLER)["functions"][0]["calls"] if c[1][-1] == "update"]
    first, second, third = calls
    assert set(first[C_HOST]) == {"loss", "lr", "m", "step", "n"}  # not `raw`: a tensor
    assert list(second[C_HOST]) == [0, 1]
    assert second[C_KWS]["*"] == tuple(SPLAT) and second[C_KWS]["**"] == tuple(SPLAT)
    # `total += loss`, a `with ... as` target, a walrus: not followed, so not Python values
    assert list(third[C_HOST]) == ["f"]


HELPERS = '''
import torch

class Logger:
    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()

def record(meter, value, n=1):
    return value.item() if torch.is_tensor(value) else value
'''

LOOP = '''
from helpers import Logger, record

def train(model, loader, optimizer, meter):
    logger = Logger()
    for x in loader:
        loss = model(x)
        loss.backward()
        optimizer.step()
        logger.update(lr=optimizer.param_groups[0]["lr"], n=len(x))
        record(meter, 1.0)
        record(meter, loss)
'''


def test_the_program_names_the_parameters_no_hot_call_site_passes_a_tensor(tmp_path):
    """`Hotness.host_parameters`: for a function that tests a value for being a tensor, the
    parameters that every call site running it per step passes a Python value or leaves to its
    default (`**kwargs` of `update`, `n` of `record`); not `value`, which one hot call site
    passes the loss, nor `meter`, a name the caller does not bind to a Python value."""
    from speedlint.analyzer.program.facts import link

    files = [(str(tmp_path / name), name, summarize(text)) for name, text in (("helpers.py", HELPERS), ("train.py", LOOP))]
    seeds = link(files)["helpers.py"]
    assert seeds.project["host_params"] == {"0": ["**kwargs"], "1": ["n"]}
# -- in-memory dataset classes (SPD101) ------------------------------------------------------------
_DATASETS = {
    "list_built_at_start_up": ("self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]", "return self.data[i]", True),
    "tensors_passed_in": ("self.x = x\n        self.y = y", "return self.x[i], self.y[i].long()", True),
    "array_loaded_whole": ("self.x = np.load(path)", "return torch.from_numpy(self.x[i]).float()", True),
    "token_block": ("self.data = torch.tensor(x)\n        self.block = 64", "chunk = self.data[i:i + self.block + 1]\n        return chunk[:-1], chunk[1:]", True),
    "image_opened": ("self.paths = paths", "return Image.open(self.paths[i])", False),
    "transform_called": ("self.x = x\n        self.transform = transform", "return self.transform(self.x[i])", False),
    "another_dataset_wrapped": ("self.dataset = dataset", "return self.dataset[i], i", False),
    "hdf5_file": ('self.x = h5py.File(path, "r")["x"]', "return self.x[i]", False),
    "memory_map": ('self.x = np.load(path, mmap_mode="r")', "return self.x[i]", False),
    "library_dataset_held": ("self.images = ImageFolder(path)", "return self.images[i]", False),
    "attribute_set_elsewhere": ("pass", "return self.data[i]", False),
    "synthesised_from_the_index": ("pass", "return torch.full((2,), float(i))", False),
}


@pytest.mark.parametrize("name", sorted(_DATASETS))
def test_in_memory_dataset_classes(name):
    """A class whose `__getitem__` only indexes `self` attributes built in memory (or passed in)
    is recorded by its line; loading, a transform, a wrapped dataset or storage read per index is not."""
    init, getitem, in_memory = _DATASETS[name]
    text = (
        "class Data(Dataset):\n"
        "    def __init__(self, x=None, y=None, path=None, paths=None, dataset=None, transform=None):\n"
        f"        {init}\n\n"
        "    def __getitem__(self, i):\n"
        f"        {getitem}\n"
    )
    summary = summarize(text)
    found = (summary.get("loaders") or {}).get("in_memory_classes", {})
    assert (found.get("1") is not None) is in_memory, found


# -- loader keywords read out of `**kwargs` dicts (SPD202 across modules) ----------------------------
_SPLATS = {
    "literal": ('kw = {"batch_size": 8, "pin_memory": True}', {"pin_memory": True}),
    "dict_call": ("kw = dict(batch_size=8, num_workers=2, pin_memory=True)", {"pin_memory": True}),
    "updated_under_if": ('kw = {"batch_size": 8}\n    if use_cuda:\n        kw.update({"num_workers": 1, "pin_memory": True})', {"pin_memory": True}),
    "updated_from_name": ('kw = {"batch_size": 8}\n    extra = {"pin_memory": True}\n    kw.update(extra)', {"pin_memory": True}),
    "item_written": ('kw = {"batch_size": 8}\n    if use_cuda:\n        kw["pin_memory"] = True', {"pin_memory": True}),
    "conditional": ('kw = {"num_workers": 1, "pin_memory": True} if use_cuda else {}', {"pin_memory": True}),
    "merged_literal": ('base = {"pin_memory": True}\n    kw = {**base, "collate_fn": pad}', {"pin_memory": True, "collate_fn": True}),
    "module_level": ("pass", {"pin_memory": True}),
    "not_pinned": ('kw = {"batch_size": 8, "pin_memory": False}', {}),
    "pinned_by_expression": ('kw = {"pin_memory": torch.cuda.is_available()}', {}),
    "off_on_one_path": ('kw = {"pin_memory": True} if use_cuda else {"pin_memory": flag}', {}),
    "from_a_function": ("kw = loader_kwargs(use_cuda)", None),
    "parameter": ("pass", None),
    "vars_of_options": ("kw = vars(use_cuda)", None),
    "unreadable_merge": ('kw = {"pin_memory": True}\n    kw.update(other)', None),
    "popped": ('kw = {"pin_memory": True}\n    kw.pop("pin_memory")', None),
    "rebound_in_loop": ('kw = {"pin_memory": True}\n    for kw in options:\n        pass', None),
}


@pytest.mark.parametrize("name", sorted(_SPLATS))
def test_loader_keywords_read_out_of_kwargs_dicts(name):
    """`loader_program._splat_keywords`: a loader call's `pin_memory` (pinned on some path, every
    path that sets it says a literal bool) and `collate_fn` (set on some path) read out of the dict
    behind `**kw`, built in the function or at module level; a dict that may hide keys says nothing."""
    body, expected = _SPLATS[name]
    params = "use_cuda, kw" if name == "parameter" else "use_cuda"
    text = (
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        'kw = {"pin_memory": True}\n'
        "\n"
        f"def make({params}):\n"
        f"    {body}\n"
        "    return DataLoader(data, **kw)\n"
    )
    summary = summarize(text)
    line = str(text.splitlines().index("    return DataLoader(data, **kw)") + 1)
    found = ((summary.get("loaders") or {}).get("splat_kws") or {}).get(line)
    if expected is None:
        assert found is None, found
        return
    assert set(found or {}) == set(expected), found
    if expected.get("pin_memory"):
        assert found["pin_memory"] == ("k", True)
