"""SPD106 dataset-heavy-getitem (preview)."""

from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, Fix, Impact, Rule, Status
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.loaders import target_names

#: Parsing a file format or building a structure: the same result every epoch.
HEAVY_PREFIXES = {
    "trimesh.": "parses a mesh",
    "open3d.": "builds an Open3D geometry",
    "meshio.": "parses a mesh",
    "pyvista.": "builds a mesh",
    "pymeshlab.": "builds a mesh",
    "networkx.": "builds a graph",
    "rdkit.": "parses a molecule",
    "librosa.feature.": "extracts audio features",
    "python_speech_features.": "extracts audio features",
    "skimage.feature.": "extracts image features",
    "scipy.spatial.KDTree": "builds a KD-tree",
    "scipy.spatial.cKDTree": "builds a KD-tree",
    "sklearn.neighbors.": "builds a neighbour index",
    "pandas.read_": "parses a table",
    "nibabel.load": "parses a volume",
    "SimpleITK.ReadImage": "parses a volume",
    "h5py.File": "opens an HDF5 file",
}
#: Loading a whole serialized file: heavy unless the path is the sample's own file.
WHOLE_FILE = {"numpy.load": "loads a whole `.npy`/`.npz` file", "torch.load": "unpickles a whole file", "json.load": "parses a JSON file", "pickle.load": "unpickles a whole file"}
#: Constructors that load models/vocabularies: must never run per sample.
FROM_PRETRAINED = ("transformers.",)
RANDOM = ("random.", "numpy.random.", "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.bernoulli", "torch.normal")


class DatasetHeavyGetitem(Rule):
    """
    ## What it does
    Flags work in `Dataset.__getitem__` (or a same-file function it calls, or a `collate_fn`) that
    parses files or builds structures once per sample, when the result would be the same every
    epoch: mesh and graph libraries (`trimesh`, `open3d`, `networkx`), `np.load`/`torch.load` of a
    whole file to take one sample out of it, table parsing (`pd.read_csv`), feature extraction
    (`librosa.feature`, `skimage.feature`), KD-tree construction, tokenizers loaded with
    `from_pretrained`. Cheap decodes of a pre-processed per-sample file (`np.load(self.files[i])`,
    memory-mapped loads) and random augmentation (it cannot be cached) are not flagged.

    ## Why is this slow?
    `__getitem__` runs for every sample of every epoch. Work whose result does not depend on the
    epoch (parsing a mesh, building a graph, computing MFCCs, loading a 2 GB array to read one row)
    is repeated epochs x samples times, and usually dominates the input pipeline: the GPU waits on
    it even with many workers.

    ## Example
    ```python
    class Scores(Dataset):
        def __init__(self, path):
            self.path = path

        def __getitem__(self, i):
            table = np.load(self.path)
            return torch.from_numpy(table[i])
    ```

    ## Use instead
    ```python
    class Scores(Dataset):
        def __init__(self, path):
            self.table = np.load(path, mmap_mode="r")

        def __getitem__(self, i):
            return torch.from_numpy(self.table[i])
    ```

    ## Fix safety
    No automatic fix (display-only advice): precompute once (in `__init__`, or offline into a
    cache of per-sample arrays) and keep `__getitem__` to a cheap read. This rule is in preview:
    whether a call is expensive depends on the data it reads.
    """

    code = "SPD106"
    name = "dataset-heavy-getitem"
    status = Status.PREVIEW
    impact = Impact(
        wastes="input pipeline (per-sample parsing repeated every epoch)",
        when="input-bound jobs",
        typical="2-100x epoch time of the cached form",
        evidence="PyTorch data loading guide: preprocess once, load cheaply",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = ("__getitem__", "collate_fn")
    ast_precondition = staticmethod(lambda facts: facts.may_have_sample_function)

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        fn = ctx.torch.sample_function_of(node)
        if fn is None:
            return
        q = ctx.qualname(node.func)
        if q is None:
            return
        what = self._heavy(node, q, fn)
        if what is None or self._random(node):
            return
        self.report(
            node,
            f"`{dotted(node.func) or q}(...)` {what} for every sample, every epoch (in `{fn.name.value}`)",
            fix=Fix.advice("Precompute it once (in `__init__` or an offline cache) and read the result here"),
        )

    def _heavy(self, call: cst.Call, q: str, fn: cst.FunctionDef) -> Optional[str]:
        for prefix, what in HEAVY_PREFIXES.items():
            if q.startswith(prefix):
                return what
        if q.startswith(FROM_PRETRAINED) and q.endswith("from_pretrained"):
            return "loads a pretrained tokenizer/model"
        if q in WHOLE_FILE:
            if any(a.keyword is not None and a.keyword.value == "mmap_mode" for a in call.args):
                return None
            if q in ("numpy.load", "torch.load") and self._per_sample_path(call, fn):
                return None  # a pre-processed per-sample file: the cheap decode
            if q in ("json.load", "pickle.load") and self._per_sample_path(call, fn):
                return None
            return WHOLE_FILE[q]
        return None

    def _per_sample_path(self, call: cst.Call, fn: cst.FunctionDef) -> bool:
        """The file read depends on the sample index (or is a helper's parameter)."""
        if fn.name.value not in ("__getitem__", "__getitems__"):
            return True  # a helper: its argument is unknown, assume per-sample
        params = [p.name.value for p in fn.params.params[1:]]
        tainted: Set[str] = set(params)
        # names derived from the index inside __getitem__
        for stmt in _assignments(fn):
            if _reads(stmt.value) & tainted:
                for t in stmt.targets:
                    tainted.update(target_names(t.target))
        if not call.args:
            return False
        return bool(_reads(call.args[0].value) & tainted)

    def _random(self, call: cst.Call) -> bool:
        finder = _CallNames(self.ctx)
        for arg in call.args:
            arg.value.visit(finder)
        return any(q.startswith(RANDOM) for q in finder.names)


def _assignments(fn: cst.FunctionDef):  # type: ignore[no-untyped-def]
    collector = _AssignCollector()
    fn.body.visit(collector)
    return collector.found


class _AssignCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found = []  # type: ignore[var-annotated]

    def visit_Assign(self, node: cst.Assign) -> None:
        self.found.append(node)


def _reads(expr: cst.CSTNode) -> Set[str]:
    finder = _NameReads()
    expr.visit(finder)
    return finder.names


class _NameReads(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False


class _CallNames(cst.CSTVisitor):
    def __init__(self, ctx) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.ctx = ctx
        self.names: Set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.qualname(node.func)
        if q:
            self.names.add(q)
