"""The summary format's shared constants: the format version, the markers a summary holds,
the hotness kinds, and the layout and flags of a call in a summary (read by every layer of the
program model: `summary`, `link`, `hotness`, the facts)."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Tuple

#: The summary format (bump when `summarize` changes what it records).
SUMMARY_FORMAT = 17

#: In `passed_constants`: a call site that does not pass the parameter (its default applies).
DEFAULT = "\x00default"

#: A value known to be some Python int (a `range` loop counter), not a tensor.
INT = "\x00int"

#: In a call's keyword arguments, under the keys "*" and "**": the call unpacks a sequence
#: (`f(*xs)`) or a mapping (`f(**d)`) whose contents are not followed.
SPLAT = ("k", "\x00splat")

#: Hotness kinds, hottest first.
STEP, SAMPLE, EVAL, EPOCH = "step", "sample", "eval", "epoch"
KINDS = (STEP, SAMPLE, EVAL, EPOCH)



class Call(NamedTuple):
    """A call in a compact summary (`summary.compact`; the summarizer builds it as a list of the
    same fields). Its fields are also read by position (`C_LINE` ... `C_HOST`)."""

    #: the line of the call
    line: int
    #: the callee, as a summary expression (`["a", ["n", "self"], "criterion"]`)
    func: Any
    #: the positional arguments' expressions (None: says nothing useful)
    args: Tuple[Any, ...]
    #: keyword -> argument expression (`"*"` / `"**"`: `SPLAT`, an unpacked sequence or mapping)
    kws: Mapping[str, Any]
    #: the index of the innermost loop around it in its function's `loops` (-1: none)
    loop: int
    #: call-site flags (`GUARDED` ...)
    flags: int
    #: the arguments known to be Python values in the caller (`_host_args`): positions and keywords
    host: Tuple[Any, ...] = ()


#: The fields of a `Call` by position (as the summarizer's lists hold them).
C_LINE, C_FUNC, C_ARGS, C_KWS, C_LOOP, C_FLAGS, C_HOST = range(7)

#: Call-site flags: behind an interval guard, in an exception handler, under no_grad, only when
#: training (`if self.training:`), only when evaluating (its `else`).
GUARDED, HANDLER, GRAD_OFF, TRAIN_ONLY, EVAL_ONLY, CONDITIONAL, PROPERTY = 1, 2, 4, 8, 16, 32, 64
#: Call-site flag (`cache_fill_lines`): the call fills a cache file on a miss; later epochs load it.
CACHE_FILL = 128
#: Call-site flag: the call runs on one iteration of its innermost loop, under a test of that
#: loop's counter for equality (`if i == len(loader) - 1:`). Rare when that loop is the step loop.
ONE_ITERATION = 256
#: Call-site flag: the call is the context expression of a `with` (`with MemoryTrace():`): the
#: object's `__enter__` and `__exit__` run there too.
WITH_ITEM = 512
