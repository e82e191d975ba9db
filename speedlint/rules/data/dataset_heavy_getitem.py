"""SPD106 dataset-heavy-getitem."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.program.summary import cache_fill_lines
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.providers.hot import callers
from speedlint.analyzer.providers.loaders import target_names
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, LOW, MEDIUM, Fix, Impact, Rule, Status
from speedlint.analyzer.providers import walk
from speedlint.analyzer.pyparse import AST_ERRORS, parse_quietly

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

#: Parsing a file format, building a structure or extracting features: the same result every
#: epoch. Qualified-name prefixes (a call of anything under them).
HEAVY_PREFIXES = {
    "trimesh.": "parses or builds a mesh",
    "open3d.": "builds an Open3D geometry",
    "meshio.": "parses a mesh",
    "pyvista.": "builds a mesh",
    "pymeshlab.": "builds a mesh",
    "networkx.": "builds a graph",
    "rdkit.": "parses or builds a molecule",
    "librosa.feature.": "extracts audio features",
    "python_speech_features.": "extracts audio features",
    "torchaudio.compliance.kaldi.": "computes Kaldi features from the raw waveform",
    "skimage.feature.": "extracts image features",
    "scipy.ndimage.": "filters the whole volume",
    "scipy.spatial.KDTree": "builds a KD-tree",
    "scipy.spatial.cKDTree": "builds a KD-tree",
    "sklearn.neighbors.": "builds a neighbour index",
    "pandas.read_": "parses a table",
    "nibabel.load": "parses a volume",
    "SimpleITK.ReadImage": "parses a volume",
    "tifffile.imread": "reads a whole image stack",
    "tifffile.TiffFile": "parses a whole image stack",
    "h5py.File": "opens an HDF5 file",
    "numpy.loadtxt": "parses a text file",
    "numpy.genfromtxt": "parses a text file",
}
#: Exact names (no prefix match): audio decoding and deterministic transforms of the signal.
HEAVY_NAMES = {
    "librosa.load": "decodes and resamples an audio file",
    "librosa.core.load": "decodes and resamples an audio file",
    "librosa.stft": "computes a spectrogram",
    "librosa.core.stft": "computes a spectrogram",
    "librosa.cqt": "computes a constant-Q transform",
    "librosa.core.cqt": "computes a constant-Q transform",
    "librosa.resample": "resamples the audio",
    "librosa.core.resample": "resamples the audio",
    "librosa.effects.trim": "trims silence (framing + RMS over the whole clip)",
    "librosa.effects.split": "splits on silence (framing + RMS over the whole clip)",
    "torchaudio.functional.spectrogram": "computes a spectrogram",
    "torchaudio.functional.melscale_fbanks": "builds a mel filter bank",
    "torchaudio.functional.resample": "resamples the audio",
}
#: Plain decoding of one audio file: cheap for WAV, costly for compressed formats (low impact).
DECODE = {
    "soundfile.read": "decodes a whole audio file (cheap for WAV, costly for compressed formats)",
    "torchaudio.load": "decodes a whole audio file (cheap for WAV, costly for compressed formats)",
}
#: torchaudio feature transforms: building one computes its window and filter bank; calling one
#: extracts the features (the masking/augmentation transforms are random: not listed).
FEATURE_TRANSFORMS = frozenset({
    "Spectrogram", "MelSpectrogram", "MFCC", "LFCC", "MelScale", "InverseMelScale", "GriffinLim",
    "Resample", "AmplitudeToDB", "SpectralCentroid", "ComputeDeltas",
})
#: Loading a whole serialized file: heavy unless the path is the sample's own file.
WHOLE_FILE = {
    "numpy.load": "loads a whole `.npy`/`.npz` file",
    "torch.load": "unpickles a whole file",
    "json.load": "parses a JSON file",
    "pickle.load": "unpickles a whole file",
    "scipy.io.loadmat": "parses a whole MAT file",
}
#: A file picked at random per sample (noise or augmentation clips): the bank can be loaded once.
BANK = "reads an extra file picked at random from a bank"
#: Constructors that load models/vocabularies: must never run per sample.
FROM_PRETRAINED = ("transformers.",)
RANDOM = ("random.", "numpy.random.", "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.bernoulli", "torch.normal", "torch.multinomial")
#: Table constructors: a dataset attribute built with one of them is a table of every sample.
TABLES = ("pandas.DataFrame", "pandas.read_")
#: Decorators that memoise a function: its body runs once per distinct argument, per process.
MEMOIZERS = frozenset({"functools.lru_cache", "functools.cache", "lru_cache", "cache"})
#: What the per-sample entry points are called.
ROOTS = frozenset({"__getitem__", "__getitems__", "__iter__"})
#: Text tokens without which nothing here can be called (imports spell the library).
TRIGGERS = (
    "trimesh", "open3d", "meshio", "pyvista", "pymeshlab", "networkx", "rdkit", "librosa", "python_speech_features",
    "torchaudio", "skimage", "scipy", "sklearn", "pandas", "read_", "nibabel", "SimpleITK", "tifffile", "h5py",
    "load", "genfromtxt", "soundfile", "from_pretrained", "__getitem__", "__init__",
)


class DatasetHeavyGetitem(Rule):
    """
    ## What it does
    Flags work that runs once per sample (in `Dataset.__getitem__`, an `IterableDataset`'s
    `__iter__`, a `collate_fn`, or anything they call, in any module of the project) and parses
    files or builds structures whose result is the same every epoch:

    - mesh and graph libraries (`trimesh`, `open3d`, `networkx`, RDKit molecules), KD-trees;
    - whole-volume readers and filters (`tifffile`, `nibabel`, SimpleITK, `scipy.ndimage`);
    - audio feature extraction and resampling (`librosa.load`/`stft`/`cqt`/`feature.*`, Kaldi
      filter banks, `torchaudio` feature transforms, whether built per call, kept on `self` or
      built once at module level and called per sample);
    - a boolean filter over a whole table the dataset holds (`self.df[self.df[2] == speaker]`:
      every row scanned for every sample);
    - text parsing (`np.loadtxt`, `np.genfromtxt`, `pd.read_csv`), even of the sample's own file;
    - `np.load`/`torch.load`/`json.load`/`pickle.load`, or audio decoding, of a whole file that
      is not the sample's own (one fixed file read again for every sample, at low impact for a
      decode, or an extra file picked from a bank of noise or augmentation clips), tokenizers
      loaded with `from_pretrained`;
    - a call the dataset's own `__init__` precomputes for every sample behind an option
      (`if self.process_data:`), when the per-sample path runs it instead because the option is off.

    Work behind an in-memory cache (`if index in self.cache:`) is still flagged: the cache fills in
    each DataLoader worker separately and is thrown away when the workers are respawned every
    epoch. Not flagged: the sample's own primary read (its image, its WAV file, its
    pre-processed `np.load(self.files[i])`, a memory-mapped array: every sample has to be read
    once), standard image decoding (PIL, OpenCV), random augmentation (its arguments are random:
    it cannot be cached), work in the branch that writes a cache file (`if os.path.exists(f):
    torch.load(f) else: compute, torch.save`), and a conversion that only runs for data off its
    target (`if sr != 24000: librosa.resample(wave, orig_sr=sr, target_sr=24000)`).

    Where the work sits in a helper outside the dataset class (a module-level `preprocess(wave)`),
    the finding is on the dataset's line that calls it, the line to change, with the helper's
    heavy call as a related location.

    ## Why is this slow?
    `__getitem__` runs for every sample of every epoch. Work whose result does not depend on the
    epoch (parsing a mesh or a text file, building a graph, computing filter banks or MFCCs,
    loading a 2 GB array to read one row) is repeated epochs x samples times, and usually
    dominates the input pipeline: the GPU waits on it even with many workers.

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
    cache of per-sample arrays) and keep `__getitem__` to a cheap read. How much a call costs
    depends on the data it reads; the impact record gives the typical range.

    ## References
    - PyTorch data loading tutorial: do the expensive preprocessing once, load cheaply per sample
    """

    code = "SPD106"
    name = "dataset-heavy-getitem"
    status = Status.STABLE
    impact = Impact(
        wastes="input pipeline (per-sample parsing repeated every epoch)",
        when="input-bound jobs",
        typical="2-100x epoch time of the cached form",
        evidence="PyTorch data loading guide: preprocess once, load cheaply",
        level=MEDIUM,
    )
    #: decoding a compressed file per sample: worth caching only when it dominates
    decode_impact = impact.with_level(LOW, when="input-bound jobs with compressed audio")
    fixes = (DISPLAY_ONLY,)
    triggers = TRIGGERS
    ast_precondition = staticmethod(lambda facts: facts.may_have_sample_function)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._random_names: Dict[cst.FunctionDef, Set[str]] = {}
        self._reported: Set[Tuple[Union[cst.Call, cst.FunctionDef], str]] = set()
        self._fill_lines: Optional[Set[int]] = None

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        fn = ctx.torch.sample_function_of(node)
        if fn is None:
            return
        found = self._heavy(node, fn)
        if found is None:
            return
        if self._off_target_only(node, fn):
            return  # `if sr != 24000: resample(wave, orig_sr=sr, target_sr=24000)`: only off-spec data pays
        what, impact, precomputed = found
        if precomputed is None and what != BANK and self._random(node, fn):
            return  # random augmentation: a new result every time (a file picked at random is still a file)
        cached = self._cache(node, fn)
        if cached == "disk" or (cached == "memoized" and not _params(fn)):
            return  # filled once: a cache file, or a memoised function without arguments
        sites = self._local_sites(fn) if not ctx.torch.chain_of(node)[1] else []
        anchor = self._dataset_call_site(fn, sites)
        if ((anchor or fn), what) in self._reported:
            return  # one finding per kind of work in a function (`MolFromSmiles`, then `AddHs`)
        self._reported.add(((anchor or fn), what))
        callee = dotted(node.func) or ctx.code(node.func)
        if anchor is not None:
            outer = dotted(anchor.func) or ctx.code(anchor.func)
            message = f"`{outer}(...)` {what} for every sample, every epoch (through `{callee}(...)` in `{fn.name.value}`)"
        else:
            message = f"`{callee}(...)` {what} for every sample, every epoch (in `{fn.name.value}`)"
        if precomputed is not None:
            flag, line, default_off = precomputed
            message += (
                f"; `__init__` precomputes it (line {line}) only when `self.{flag}` is set"
                + (", and it is off by default" if default_off else "")
            )
        if cached in ("memory", "memoized"):
            message += (
                f"; {'the in-memory cache in front of it' if cached == 'memory' else f'`{fn.name.value}` is memoised, but its cache'} "
                "fills in each DataLoader worker separately and is lost when the workers are respawned every "
                "epoch (without `persistent_workers=True`)"
            )
        related = tuple(self._hop(site) for site in sites)
        if related:
            hops = " -> ".join(f"{p}:{line} `{label}`" for p, line, label in related)
            message += f" (runs for every sample: {hops} -> {ctx.path}:{ctx.position(node).start.line})"
        if anchor is not None:
            # the dataset's own line that calls the helper is the one to change; the work is related
            related = related + ((ctx.path, ctx.position(node).start.line, f"{callee}(...)"),)
        self.report(
            anchor if anchor is not None else node,
            message,
            fix=Fix.advice("Precompute it once (in `__init__` or an offline cache of per-sample arrays) and read the result here"),
            impact=impact,
            related=related,
        )

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`self.df[self.df[2] == speaker]`: a boolean mask over every row of a table the dataset
        holds, computed for every sample (O(rows) per sample, O(rows^2) per epoch)."""
        table = node.value
        if not (isinstance(table, cst.Attribute) and dotted(table.value) == "self") or len(node.slice) != 1:
            return
        index = node.slice[0].slice
        if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Comparison)):
            return
        test = index.value
        own = f"self.{table.attr.value}"
        sides = (test.left, *(c.comparator for c in test.comparisons))
        if not any(isinstance(side, cst.Subscript) and dotted(side.value) == own for side in sides):
            return
        fn = self.ctx.torch.sample_function_of(node)
        if fn is None or (fn, "table filter") in self._reported:
            return
        writes = flow(self.ctx).self_writes(table)
        if not any(isinstance(v, cst.Call) and (self.ctx.qualname(v.func) or "").startswith(TABLES) for v in writes):
            return
        self._reported.add((fn, "table filter"))
        self.report(
            node,
            f"`{own}[...]` filters the whole `{own}` table (a boolean mask over every row) for every sample, "
            f"every epoch (in `{fn.name.value}`)",
            fix=Fix.advice(f"Group the rows once in `__init__` (a dict from the key to its rows) and pick from that group here"),
            impact=self.impact,
        )

    # -- what the call does ------------------------------------------------------------------
    def _heavy(self, call: cst.Call, fn: cst.FunctionDef) -> Optional[Tuple[str, Impact, Optional[Tuple[str, int, bool]]]]:
        """(what it does, its impact, (option, line, off by default?) when `__init__` precomputes
        it behind an option) for a heavy call; None for anything else."""
        what: Optional[str] = None
        impact = self.impact
        q = self.ctx.qualname(call.func) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if q is not None:
            what = _catalogue(q)
            if what is None and q in DECODE:
                if self._extra_file(call, fn):
                    what = BANK
                elif self._per_sample_path(call, fn):
                    return None  # the sample's own primary read: every sample has to be decoded once
                else:
                    what, impact = DECODE[q], self.decode_impact
            if what is None and q.startswith(FROM_PRETRAINED) and q.endswith("from_pretrained"):
                what = "loads a pretrained tokenizer/model"
            if what is None and q in WHOLE_FILE:
                what = self._whole_file(call, q, fn)
            if what is None and _transform_class(q) is not None:
                what = f"builds the `{_transform_class(q)}` transform (window and filter bank) and extracts features with it"
        if what is None:
            what = self._stored_extractor(call, fn)
        precomputed = self._precomputed(call, fn)
        if what is None and precomputed is not None:
            what = "is recomputed"
        if what is None:
            return None
        return what, impact, precomputed

    def _whole_file(self, call: cst.Call, q: str, fn: cst.FunctionDef) -> Optional[str]:
        if any(a.keyword is not None and a.keyword.value == "mmap_mode" for a in call.args):
            return None
        if self._extra_file(call, fn):
            return BANK
        if self._per_sample_path(call, fn):
            return None  # a pre-processed per-sample file: the cheap decode
        return WHOLE_FILE[q]

    def _stored_extractor(self, call: cst.Call, fn: cst.FunctionDef) -> Optional[str]:
        """`self.transforms(x)` / `mel(x)` where `self.transforms` (or `mel`) holds a feature
        extractor: a function such as `librosa.feature.mfcc`, or a torchaudio transform."""
        func = call.func
        values: List[cst.BaseExpression] = []
        tracer = flow(self.ctx)
        if isinstance(func, cst.Attribute) and dotted(func.value) == "self":
            values = tracer.self_writes(func)
        elif isinstance(func, cst.Name):
            bound = [(b, v) for b in tracer.reaching(func) if b.kind == "assign" for v in [tracer.value_at(b)] if v is not None]
            if any(isinstance(v, cst.Call) and self.ctx.torch.contains(fn, b.site) for b, v in bound):
                return None  # built here and called here: the construction is reported
            # built once outside (a module-level `to_mel = MelSpectrogram(...)`), called per sample
            values = [v for _, v in bound]
        for v in values:
            target = v.func if isinstance(v, cst.Call) else v
            if not isinstance(target, (cst.Name, cst.Attribute)):
                continue
            q = self.ctx.qualname(target)
            if q is None:
                continue
            if isinstance(v, cst.Call):
                kind = _transform_class(q)
                if kind is not None:
                    return f"extracts features (`{kind}`)"
            else:
                what = _catalogue(q)
                if what is not None:
                    return f"{what} (`{q}`)"
        return None

    def _off_target_only(self, call: cst.Call, fn: cst.FunctionDef) -> bool:
        """The call runs only when its input is not yet in the form it produces: it sits under
        `if a != b:` where `a` and `b` are both among its arguments (`if sr != 24000:
        librosa.resample(wave, orig_sr=sr, target_sr=24000)`). Data already at the target pays
        nothing; the conversion is a fallback for off-spec files, not work done every epoch."""
        args = {self.ctx.code(a.value) for a in call.args}
        for a in self.ctx.torch.ancestors(call):
            if a is fn:
                break
            if not isinstance(a, cst.If) or not self.ctx.torch.contains(a.body, call):
                continue
            test = a.test
            if (
                isinstance(test, cst.Comparison)
                and len(test.comparisons) == 1
                and isinstance(test.comparisons[0].operator, cst.NotEqual)
                and self.ctx.code(test.left) in args
                and self.ctx.code(test.comparisons[0].comparator) in args
            ):
                return True
        return False

    # -- where the file comes from ---------------------------------------------------------
    def _per_sample_path(self, call: cst.Call, fn: cst.FunctionDef) -> bool:
        """The file read is the sample's own: its path depends on the sample (a parameter of the
        function, a name derived from one, a loop variable of `__iter__`), or is an attribute of
        a per-sample object (`self.frames_path` of an `Utterance`). A literal, a global, or an
        attribute of the dataset itself names one fixed file, read again for every sample."""
        if not call.args:
            return False
        path = call.args[0].value
        params = _params(fn)
        tainted = params | _derived(fn, params | _loop_targets(fn))
        if _reads(path) & tainted:
            return True
        cls = self.ctx.torch.enclosing_class(fn.body)
        return cls is not None and not _is_dataset_class(self.ctx, cls) and _reads_self(path)

    def _extra_file(self, call: cst.Call, fn: cst.FunctionDef) -> bool:
        """The path is picked at random (`random.choice(self.noise_files)`): a bank of extra files."""
        if not call.args:
            return False
        return self._random_expr(call.args[0].value, fn)

    # -- random augmentation ---------------------------------------------------------------
    def _random(self, call: cst.Call, fn: cst.FunctionDef) -> bool:
        """An argument is random (directly, or a name bound from a random draw in the function),
        or the call only runs when a random draw says so (`if random.random() < p:`)."""
        if any(self._random_expr(a.value, fn) for a in call.args):
            return True
        if isinstance(call.func, cst.Call) and any(self._random_expr(a.value, fn) for a in call.func.args):
            return True
        for a in self.ctx.torch.ancestors(call):
            if a is fn:
                break
            if isinstance(a, cst.If) and self._random_expr(a.test, fn):
                return True
        return False

    def _random_expr(self, expr: cst.BaseExpression, fn: cst.FunctionDef) -> bool:
        finder = _CallNames(self.ctx)
        walk.visit(expr, finder)
        if any(q.startswith(RANDOM) for q in finder.names):
            return True
        return bool(_reads(expr) & self._random_locals(fn))

    def _random_locals(self, fn: cst.FunctionDef) -> Set[str]:
        got = self._random_names.get(fn)
        if got is None:
            got = set()
            for _ in range(2):
                for stmt in _assignments(fn):
                    finder = _CallNames(self.ctx)
                    walk.visit(stmt.value, finder)
                    if any(q.startswith(RANDOM) for q in finder.names) or _reads(stmt.value) & got:
                        for t in stmt.targets:
                            got.update(target_names(t.target))
            self._random_names[fn] = got
        return got

    # -- caches ------------------------------------------------------------------------------
    def _cache(self, call: cst.Call, fn: cst.FunctionDef) -> Optional[str]:
        """"disk" when the call sits in the branch that fills a cache file (`if os.path.exists(f):
        ... else: <call>; torch.save(...)`), also through same-file callers; "memoized" in a
        function decorated with `functools.lru_cache`/`cache`; "memory" behind an in-memory cache
        (`if index in self.cache:`); None otherwise."""
        if self._fills_cache_file(call):
            return "disk"
        sites = callers(self.ctx, fn) if fn.name.value not in ROOTS else []
        if sites and all(self._fills_cache_file(c) for c in sites):
            return "disk"
        if any(_memoizes(self.ctx, d.decorator) for d in fn.decorators):
            return "memoized"
        return _memory_cache_miss(self.ctx, call, fn)

    def _fills_cache_file(self, call: cst.Call) -> bool:
        if self._fill_lines is None:
            try:
                self._fill_lines = cache_fill_lines(parse_quietly(self.ctx.source))
            except AST_ERRORS:
                self._fill_lines = set()
        return self.ctx.position(call).start.line in self._fill_lines

    # -- precomputed in __init__ behind an option ------------------------------------------
    def _precomputed(self, call: cst.Call, fn: cst.FunctionDef) -> Optional[Tuple[str, int, bool]]:
        """The class's `__init__` makes the same call in a loop under `if self.<option>:`, and
        this call runs when the option is off: (option, line of that call, off by default?)."""
        facts = self.ctx.torch
        cls = facts.enclosing_class(fn.body)
        if cls is None:
            return None
        if not facts.resolve_call(call) and _catalogue(self.ctx.qualname(call.func) or "") is None:
            return None  # only this file's own functions (and the catalogue) are worth the note
        here = {option for option, when in _option_tests(self.ctx, call, fn).items() if not when}
        if not here:
            return None
        callee = self.ctx.code(call.func)
        for init in facts.methods.get((cls.name.value, "__init__"), ()):
            for other in facts.units[init].calls:
                if self.ctx.code(other.func) != callee or not _repeated(self.ctx, other, init):
                    continue
                for option, when in _option_tests(self.ctx, other, init).items():
                    if when and option in here:
                        return option, self.ctx.position(other).start.line, _defaults_off(self.ctx, init, option)
        return None

    # -- the same-file chain from the per-sample entry point ---------------------------------
    def _hop(self, site: cst.Call) -> Tuple[str, int, str]:
        return (self.ctx.path, self.ctx.position(site).start.line, f"{dotted(site.func) or 'call'}(...)")

    def _dataset_call_site(self, fn: cst.FunctionDef, sites: List[cst.Call]) -> Optional[cst.Call]:
        """When the work sits in a helper outside the dataset class (a module-level
        `preprocess(wave)`), the call of that helper in the dataset's own method, the last such
        hop of the chain; None when `fn` is itself a method of the dataset (`_get_item`)."""
        facts = self.ctx.torch

        def in_dataset(f: Optional[cst.FunctionDef]) -> bool:
            cls = facts.enclosing_class(f.body) if f is not None else None
            return cls is not None and _is_dataset_class(self.ctx, cls)

        if in_dataset(fn):
            return None
        inside = [site for site in sites if in_dataset(facts.enclosing_function(site))]
        return inside[-1] if inside else None

    def _local_sites(self, fn: cst.FunctionDef) -> List[cst.Call]:
        """The call sites from this file's `__getitem__` (or collate function) down to `fn`."""
        facts = self.ctx.torch
        roots = facts.local_sample_functions
        chain: List[cst.Call] = []
        seen = {fn}
        current = fn
        while current.name.value not in ROOTS:
            sites = [c for c in callers(self.ctx, current) if facts.enclosing_function(c) in roots]
            site = min(sites, key=lambda c: facts.order.get(c, 0), default=None)
            if site is None:
                break
            chain.append(site)
            nxt = facts.enclosing_function(site)
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            current = nxt
        return list(reversed(chain))


# -- helpers ---------------------------------------------------------------------------------
def _catalogue(q: str) -> Optional[str]:
    if q in HEAVY_NAMES:
        return HEAVY_NAMES[q]
    for prefix, what in HEAVY_PREFIXES.items():
        if q.startswith(prefix):
            return what
    return None


def _transform_class(q: str) -> Optional[str]:
    """`torchaudio.transforms.MelSpectrogram` -> "MelSpectrogram" (a feature transform class)."""
    module, _, name = q.rpartition(".")
    if module in ("torchaudio.transforms", "torchaudio.transforms._transforms") and name in FEATURE_TRANSFORMS:
        return name
    return None


def _is_dataset_class(ctx: FileContext, cls: cst.ClassDef) -> bool:
    """A class with a dataset base (`Dataset`, `IterableDataset`, a project `*Dataset`) or a
    `__getitem__`: one object serves every sample."""
    for base in cls.bases:
        text = ctx.qualname(base.value) or dotted(base.value) or ""
        if text.rsplit(".", 1)[-1].endswith("Dataset"):
            return True
    return any(isinstance(s, cst.FunctionDef) and s.name.value in ROOTS for s in cls.body.body)


def _memoizes(ctx: FileContext, decorator: cst.BaseExpression) -> bool:
    """`@functools.lru_cache(...)`, `@lru_cache`, `@functools.cache`."""
    target = decorator.func if isinstance(decorator, cst.Call) else decorator
    if not isinstance(target, (cst.Name, cst.Attribute)):
        return False
    return (ctx.qualname(target) or dotted(target) or "") in MEMOIZERS


def _memory_cache_miss(ctx: FileContext, node: cst.CSTNode, fn: Optional[cst.FunctionDef]) -> Optional[str]:
    """"memory" when `node` runs on a miss of an in-memory cache (`if key in self.cache:` ...
    `else:`, or the body of `if key not in self.cache:`), else None."""
    child = node
    for a in ctx.torch.ancestors(node):
        if a is fn:
            break
        if isinstance(a, cst.If) and child is not a.test:
            test = a.test
            negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
            inner = cast(cst.UnaryOperation, test).expression if negated else test
            if isinstance(inner, cst.Comparison) and len(inner.comparisons) == 1:
                op = inner.comparisons[0].operator
                holder = inner.comparisons[0].comparator
                if isinstance(op, (cst.In, cst.NotIn)) and isinstance(holder, cst.Attribute) and dotted(holder.value) == "self":
                    missing = isinstance(op, cst.NotIn) != negated
                    if (child is a.body) == missing:
                        return "memory"
        child = a
    return None


def _option_tests(ctx: FileContext, node: cst.CSTNode, fn: cst.FunctionDef) -> Dict[str, bool]:
    """The `if self.<option>:` / `if not self.<option>:` tests around `node` in `fn`: option ->
    whether `node` runs when the option is set."""
    found: Dict[str, bool] = {}
    child = node
    for a in ctx.torch.ancestors(node):
        if a is fn:
            break
        if isinstance(a, cst.If) and child is not a.test:
            test, positive = a.test, True
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                test, positive = test.expression, False
            if isinstance(test, cst.Attribute) and dotted(test.value) == "self":
                found.setdefault(test.attr.value, positive == (child is a.body))
        if isinstance(a, cst.IndentedBlock):
            # `if self.preload: return self.items[i]` earlier in the block: what follows runs when it is off
            for stmt in a.body:
                if stmt is child:
                    break
                if isinstance(stmt, cst.If) and stmt.orelse is None and _leaves(stmt.body):
                    test, positive = stmt.test, True
                    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                        test, positive = test.expression, False
                    if isinstance(test, cst.Attribute) and dotted(test.value) == "self":
                        found.setdefault(test.attr.value, not positive)
        child = a
    return found


def _repeated(ctx: FileContext, node: cst.CSTNode, fn: cst.FunctionDef) -> bool:
    """`node` runs once per item in `fn`: in a loop or a comprehension there."""
    if ctx.torch.in_loop(node) is not None:
        return True
    for a in ctx.torch.ancestors(node):
        if a is fn:
            return False
        if isinstance(a, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            return True
    return False


def _leaves(body: cst.BaseSuite) -> bool:
    """The block ends by leaving (`return`, `raise`, `continue`)."""
    stmts = body.body
    last = stmts[-1] if stmts else None
    return isinstance(last, cst.SimpleStatementLine) and bool(last.body) and isinstance(last.body[-1], (cst.Return, cst.Raise, cst.Continue))


def _defaults_off(ctx: FileContext, init: cst.FunctionDef, option: str) -> bool:
    """`self.<option> = <param>` in `__init__` with that parameter defaulting to False/None/0."""
    for stmt in _assignments(init):
        for t in stmt.targets:
            target = t.target
            if isinstance(target, cst.Attribute) and dotted(target.value) == "self" and target.attr.value == option and isinstance(stmt.value, cst.Name):
                for p in init.params.params:
                    if p.name.value == stmt.value.value and p.default is not None:
                        d = p.default
                        return (isinstance(d, cst.Name) and d.value in ("False", "None")) or (isinstance(d, cst.Integer) and d.value == "0")
    return False


def _params(fn: cst.FunctionDef) -> Set[str]:
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    return set(params)


def _derived(fn: cst.FunctionDef, names: Set[str]) -> Set[str]:
    """`names`, and the names bound in `fn` from them (transitively, in source order), by
    assignments and `with ... as f:`."""
    tainted = set(names)
    for value, targets in _bindings(fn):
        if _reads(value) & tainted:
            for t in targets:
                tainted.update(target_names(t))
    return tainted


def _bindings(fn: cst.FunctionDef) -> List[Tuple[cst.BaseExpression, List[cst.BaseExpression]]]:
    collector = _AssignCollector()
    walk.visit(fn.body, collector)
    return collector.bindings


def _loop_targets(fn: cst.FunctionDef) -> Set[str]:
    """Names a `for` loop of `fn` binds: one value per iteration (per item in `__iter__`)."""
    collector = _AssignCollector()
    walk.visit(fn.body, collector)
    return collector.loop_targets


def _assignments(fn: cst.FunctionDef) -> List[cst.Assign]:
    collector = _AssignCollector()
    walk.visit(fn.body, collector)
    return collector.found


class _AssignCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: List[cst.Assign] = []
        #: (value, targets) of assignments and `with` items, in source order
        self.bindings: List[Tuple[cst.BaseExpression, List[cst.BaseExpression]]] = []
        self.loop_targets: Set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        self.found.append(node)
        self.bindings.append((node.value, [t.target for t in node.targets]))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self.bindings.append((node.item, [node.asname.name]))

    def visit_For(self, node: cst.For) -> None:
        self.loop_targets.update(target_names(node.target))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _reads(expr: cst.CSTNode) -> Set[str]:
    finder = _NameReads()
    walk.visit(expr, finder)
    return finder.names


def _reads_self(expr: cst.CSTNode) -> bool:
    return "self" in _Plain.of(expr)


class _NameReads(cst.CSTVisitor):
    """Names read, not counting `self` (its attributes are the object's, not the sample's)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value != "self":
            self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk.visit(node.value, self)
        return False


class _Plain(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: Set[str] = set()

    @staticmethod
    def of(expr: cst.CSTNode) -> Set[str]:
        finder = _Plain()
        walk.visit(expr, finder)
        return finder.names

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


class _CallNames(cst.CSTVisitor):
    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.names: Set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        q = self.ctx.qualname(node.func) if isinstance(node.func, (cst.Name, cst.Attribute)) else None
        if q:
            self.names.add(q)
