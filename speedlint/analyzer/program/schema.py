"""The summary format's shared constants: the format version, the markers a summary holds,
the hotness kinds, and the layout and flags of a call in a summary (read by every layer of the
program model: `summary`, `link`, `hotness`, the facts)."""

from __future__ import annotations

#: The summary format (bump when `summarize` changes what it records).
SUMMARY_FORMAT = 12

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

#: A call in a summary: [line, callee expression, positional args, keyword args, loop index, flags]
#: and, when some are, the arguments known to be Python values in the caller (`_host_args`).
C_LINE, C_FUNC, C_ARGS, C_KWS, C_LOOP, C_FLAGS, C_HOST = range(7)

#: Call-site flags: behind an interval guard, in an exception handler, under no_grad, only when
#: training (`if self.training:`), only when evaluating (its `else`).
GUARDED, HANDLER, GRAD_OFF, TRAIN_ONLY, EVAL_ONLY, CONDITIONAL, PROPERTY = 1, 2, 4, 8, 16, 32, 64
#: Call-site flag (`cache_fill_lines`): the call fills a cache file on a miss; later epochs load it.
CACHE_FILL = 128
#: Call-site flag: the call runs on one iteration of its innermost loop, under a test of that
#: loop's counter for equality (`if i == len(loader) - 1:`). Rare when that loop is the step loop.
ONE_ITERATION = 256
