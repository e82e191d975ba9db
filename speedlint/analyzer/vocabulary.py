"""The names speedlint knows training code by, in one place for both of its sides: the stdlib `ast`
side (the program model's summaries, the pre-look) and the LibCST side (providers, rules). Each
list is written once here, so that what one side recognises the other does too.

* functions and names: evaluation and inference functions, schedulers, step counters, grad-off
  context managers;
* distributed launchers: what says a script runs one process per GPU;
* dtypes: `torch.<name>` dtypes;
* loader families: torch's `DataLoader` and the loaders built on it, with their parameters;
* `dotted_name`: `a.b.c` of an `ast` name or attribute chain.

Nothing here imports the rest of speedlint (nor LibCST).
"""

from __future__ import annotations

import ast
import re
from typing import Dict, Optional

# -- functions and names --------------------------------------------------------------------------

#: Names that say a value is the batch size (`for i in range(batch_size)`).
BATCH_SIZE_NAMES = frozenset({"batch_size", "bsz", "bs", "n_batch", "nbatch", "num_batch"})
#: A function whose name says it computes a loss (model code, as `forward` is).
LOSS_FUNCTION = re.compile(r"loss|criterion", re.I)
#: A parameter annotation that says a sequence or mapping, not a tensor (`List[Tensor]`).
SEQUENCE_ANNOTATION = re.compile(r"\b(List|list|Sequence|Tuple|tuple|Dict|dict|Iterable|Mapping)\b")
#: A function (or a loop's function) named for evaluation: eval/valid/test/predict/infer.
EVAL_NAME = re.compile(
    r"(^|_)(eval|evaluate|evaluation|valid|validate|validation|val|test|testing|predict|prediction|infer|inference)(_|$)|^(eval|valid|test|predict|infer)",
    re.I,
)
#: Inference entry points by name besides `EVAL_NAME` (decoding, generation): SPD601 looks at a
#: `no_grad` there even when no `.eval()` call is in sight.
INFERENCE_VERB = re.compile(r"^(recognize|decode|generate|greedy|beam_search|translate|transcribe|synthesize|sample)(_|$)")
#: A receiver named like a learning-rate scheduler: its `.step()` is not an optimizer step.
SCHEDULER_HINT = re.compile(r"sched|(^|_)lr(_|$)|warmup", re.I)
#: Names in an `if` test that say the branch runs now and then, not every time.
#: A value that changes every step: a loop counter, a step count (`i`, `step`, `batch_idx`).
COUNTER_NAME = re.compile(
    r"(^|_)(step|steps|it|iter|iters|iteration|iterations|idx|index|i|j|n|batch_idx|batch_i|batch_num|"
    r"batch_nb|batch_id|nb|count|counter|cnt|epoch|tick)$",
    re.I,
)

#: The last parts of `torch.no_grad` / `torch.inference_mode` (helpers named after them end so too).
GRAD_OFF_NAMES = ("no_grad", "inference_mode")

# -- distributed launchers ------------------------------------------------------------------------

#: A training script that runs one process per GPU (DDP, torchrun, `mp.spawn`, accelerate, DeepSpeed):
#: one of these as a whole word (`DISTRIBUTED`; `textscan.has_word(text, *DISTRIBUTED_WORDS)` is the same test, faster).
DISTRIBUTED_WORDS = (
    "DistributedDataParallel", "init_process_group", "DistributedSampler", "LOCAL_RANK", "local_rank", "torchrun",
    "torch.distributed.launch", "mp.spawn", "multiprocessing.spawn", "Accelerator", "deepspeed",
)
DISTRIBUTED = re.compile(r"\b(" + "|".join(re.escape(w) for w in DISTRIBUTED_WORDS) + r")\b")

# -- dtypes ---------------------------------------------------------------------------------------

#: `torch.<name>` dtypes (a `.to()` with one of these casts, it does not move).
DTYPES = frozenset({
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8", "int16",
    "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble",
    "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64",
})

# -- loader families ------------------------------------------------------------------------------

DATALOADER = "torch.utils.data.DataLoader"
#: Positional order of `DataLoader.__init__` (torch 1.13-2.x); the rest is keyword-only.
POSITIONS = {
    "dataset": 0,
    "batch_size": 1,
    "shuffle": 2,
    "sampler": 3,
    "batch_sampler": 4,
    "num_workers": 5,
    "collate_fn": 6,
    "pin_memory": 7,
    "drop_last": 8,
}
#: Loaders built on torch's `DataLoader` (their keywords reach it through `**kwargs`), with the
#: positions of their own leading parameters. `dataset` names whatever they load from.
_PYG_LIKE = {"dataset": 0, "batch_size": 1, "shuffle": 2}
LOADER_FAMILIES: Dict[str, Dict[str, int]] = {
    DATALOADER: POSITIONS,
    "torch_geometric.loader.DataLoader": _PYG_LIKE,
    "torch_geometric.loader.dataloader.DataLoader": _PYG_LIKE,
    "torch_geometric.data.DataLoader": _PYG_LIKE,
    "torch_geometric.loader.DataListLoader": _PYG_LIKE,
    "torch_geometric.data.DataListLoader": _PYG_LIKE,
    "torch_geometric.loader.DenseDataLoader": _PYG_LIKE,
    "torch_geometric.data.DenseDataLoader": _PYG_LIKE,
    "torch_geometric.loader.ClusterLoader": {"dataset": 0},
    "torch_geometric.data.ClusterLoader": {"dataset": 0},
    "torch_geometric.loader.GraphSAINTRandomWalkSampler": {"dataset": 0, "batch_size": 1},
    "torch_geometric.data.GraphSAINTRandomWalkSampler": {"dataset": 0, "batch_size": 1},
    "torch_geometric.loader.GraphSAINTNodeSampler": {"dataset": 0, "batch_size": 1},
    "torch_geometric.data.GraphSAINTNodeSampler": {"dataset": 0, "batch_size": 1},
    "torch_geometric.loader.GraphSAINTEdgeSampler": {"dataset": 0, "batch_size": 1},
    "torch_geometric.data.GraphSAINTEdgeSampler": {"dataset": 0, "batch_size": 1},
    "torch_geometric.loader.NeighborLoader": {"dataset": 0},
    "torch_geometric.loader.LinkNeighborLoader": {"dataset": 0},
    "monai.data.DataLoader": {"dataset": 0, "num_workers": 1},
    "monai.data.dataloader.DataLoader": {"dataset": 0, "num_workers": 1},
    "dgl.dataloading.GraphDataLoader": {"dataset": 0},
    # webdataset's loader is torch's DataLoader (`WebLoader(*args, **kw)` passes them on)
    "webdataset.WebLoader": POSITIONS,
    "webdataset.compat.WebLoader": POSITIONS,
}
#: What a module must mention for a loader of these families to be built in it (rule triggers);
#: also how the name of a project's own loader or sampler class ends.
LOADER_TRIGGERS = ("Loader", "Sampler")
#: The last parts of the loader classes' names (the `ast` pre-look).
LOADER_TAILS = tuple(sorted({q.rsplit(".", 1)[-1] for q in LOADER_FAMILIES}))
#: A `pin_memory=` expression (its source text) that is true on the GPU path: it names CUDA or a
#: GPU (`torch.cuda.is_available()`, `use_cuda`, `args.gpu`), or compares a device with "cpu" by
#: `!=` (`device != "cpu"`). Pinned where the copy to the GPU costs, which is what SPD202 asks.
PINNED_ON_GPU = re.compile(r"cuda|gpu|!=\s*['\"]cpu['\"]|['\"]cpu['\"]\s*!=", re.I)
#: Loader classes by the last part of their name, for the program model (which sees names, not
#: imports): the families above, and torch_geometric's `NeighborSampler` (a loader whose
#: parameters are its own: no position of a `DataLoader` parameter is known).
LOADER_NAMES = frozenset({*LOADER_TAILS, "NeighborSampler"})


# -- names of `ast` nodes -------------------------------------------------------------------------

def dotted_name(node: ast.AST) -> Optional[str]:
    """`a.b.c` for a name or an attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# -- tensors (the data flow of `providers.flow`) ------------------------------------------------------
#: torch functions that do not return a tensor (or return one on the CPU only).
NOT_TENSOR_FUNCS = {
    "device", "Size", "dtype", "is_tensor", "is_floating_point", "is_complex", "is_nonzero", "numel",
    "manual_seed", "seed", "initial_seed", "save", "load", "no_grad", "enable_grad", "inference_mode",
    "set_grad_enabled", "compile", "from_numpy", "get_default_dtype", "set_default_dtype",
    "is_grad_enabled", "autocast", "finfo", "iinfo", "set_printoptions", "use_deterministic_algorithms",
    "set_num_threads", "get_num_threads", "typename", "is_storage", "result_type", "promote_types",
    "can_cast", "broadcast_shapes", "equal", "allclose", "is_same_size",
}
#: torch functions that make a tensor of host data: on the CPU unless given `device=` (or, for
#: `as_tensor`, a tensor that already is elsewhere).
FROM_HOST_FUNCS = frozenset({"from_numpy", "as_tensor", "asarray"})
#: torch factories: a CPU tensor unless given `device=`.
FACTORIES = {
    "zeros", "ones", "empty", "full", "arange", "eye", "tensor", "linspace", "logspace",
    "zeros_like", "ones_like", "empty_like", "full_like",
}
RANDOM_FACTORIES = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like"}
#: tensor methods that give back something that is not a (device) tensor.
NON_TENSOR_METHODS = {
    "item", "tolist", "numpy", "cpu", "size", "dim", "numel", "ndimension", "nelement", "element_size",
    "data_ptr", "is_contiguous", "get_device", "stride", "storage", "keys", "values", "items",
    "is_floating_point", "is_complex", "untyped_storage", "__len__", "state_dict", "parameters",
    "named_parameters", "get", "format", "join", "split" ,
}
TENSOR_ATTRS = {"grad", "data", "T", "mT", "H", "real", "imag", "loss", "logits"}
#: Attributes of a tensor that are host values (everything else read off a batch moved to the
#: device, such as a graph batch's `batch.y` / `batch.edge_index`, is a tensor).
HOST_ATTRS = {
    "shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "layout", "names", "is_leaf", "grad_fn",
    "is_sparse", "is_quantized", "is_meta", "itemsize", "nbytes", "batch_size", "keys",
}
HOST_ATTR_PREFIXES = ("num_", "is_", "has_", "_")
#: torch functions below the top level that return a tensor.
TENSOR_FUNCS = frozenset({
    "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_norm", "torch.nn.utils.get_total_norm",
    "torch.nn.utils.parameters_to_vector", "torch.nn.utils.rnn.pad_sequence", "torch.nn.Parameter",
    "torch.nn.parameter.Parameter",
    # graph libraries built on torch: their tensor utilities
    "torch_geometric.utils.degree", "torch_geometric.utils.softmax", "torch_geometric.utils.scatter",
    "torch_scatter.scatter", "torch_scatter.scatter_add", "torch_scatter.scatter_mean", "torch_scatter.scatter_sum",
    "torch_geometric.nn.global_add_pool", "torch_geometric.nn.global_mean_pool", "torch_geometric.nn.global_max_pool",
})
#: The per-device torch modules (`torch.cuda.empty_cache()`, `torch.xpu.synchronize()` ...).
ACCELERATOR_MODULES = frozenset({"torch.cuda", "torch.mps", "torch.xpu", "torch.npu", "torch.mtia"})
#: Fields of a graph batch (torch_geometric's `Data`/`Batch` conventions): tensors.
GRAPH_FIELDS = frozenset({
    "x", "y", "pos", "edge_index", "edge_attr", "edge_weight", "batch", "ptr", "node_type", "edge_type",
    "train_mask", "val_mask", "test_mask", "n_id", "e_id", "adj_t", "face", "norm",
})
#: Classes whose instances are moved to the device as data, not as a module.
DATA_CLASSES = frozenset({"Data", "Batch", "HeteroData", "TensorDict", "BatchEncoding", "Tensor"})
#: Iterating these methods of a module gives its parameters (tensors): the element at this path.
PARAM_ITERS = {"parameters": (), "buffers": (), "named_parameters": (1,), "named_buffers": (1,)}
MODEL_NAME = re.compile(
    r"(^|_)(model|net|network|generator|discriminator|gen|disc|critic|encoder|decoder|backbone|head|"
    r"criterion|loss_fn|loss_func|lossfn|loss_function|G|D|netG|netD)$|^(model|net)"
)
