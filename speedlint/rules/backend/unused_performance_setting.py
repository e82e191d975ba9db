"""SPD704 unused-performance-setting (preview)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Tuple, Union

import libcst as cst

from speedlint.analyzer.providers.configs import ConfigSite
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, Fix, Impact, Rule, Status
from speedlint.analyzer.settings_use import ACCUMULATION, COMPILE, LOADING, PRECISION, SEEDS_KEY, unused_options_alone

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext


def _what_happens(name: str) -> str:
    if name in PRECISION:
        return "training stays in the precision the code hard-codes (FP32 unless it enables AMP itself)"
    if name in ACCUMULATION:
        return "no gradient accumulation happens: every batch steps the optimizer"
    if name in LOADING:
        return "the DataLoaders keep the values written in the code"
    if name in COMPILE:
        return "the backend setting it names is never applied"
    return "it changes nothing"


class UnusedPerformanceSetting(Rule):
    """
    ## What it does
    Flags a performance setting that the user sets but no code of the program reads: an
    argparse option (`--fp16`, `--amp`, `--num_workers`, `--accumulation_steps`, `--compile`)
    whose value is never read anywhere in the project, or a performance key of a config file the
    code loads (`use_amp: true`, `accumulation_steps: 4`, `workers: 8`) that no code reads. The
    whole project is searched for reads (`args.fp16`, `cfg["use_amp"]`, `cfg.get("workers")`,
    `getattr(args, "fp16")`, a parameter or local of that name); when the program hands a
    namespace or config over whole (`vars(args)`, `args.__dict__`, `**cfg`, `getattr(args,
    name)`, `cfg.items()`, `hydra.utils.instantiate(...)`, `args` passed to a library such as
    `Trainer.from_argparse_args(args)`), any setting may be read and nothing is reported. Keys
    of a Hydra node with `_target_` are read by the class it instantiates.

    An option is reported on its `add_argument(...)` line; a config key on its line in the
    config file, with the code that loads the file as the related location.

    ## Why is this slow?
    The run is slower than its author believes: `--fp16` on the command line or `use_amp: true`
    in the config says mixed precision, yet nothing passes it to an `autocast` and the step runs
    in FP32 (1.5-3x slower on tensor-core GPUs); `accumulation_steps: 4` changes nothing, so the
    effective batch is a quarter of what was planned; `--num_workers 8` leaves a loader that
    hard-codes `num_workers=0` loading in the main process. Experiments are then compared and
    tuned on settings that were never in effect.

    ## Example
    ```python
    parser.add_argument("--fp16", action="store_true")  # parsed, never read
    args = parser.parse_args()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    parser.add_argument("--fp16", action="store_true")
    args = parser.parse_args()
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.float16, enabled=args.fp16):
            loss = criterion(model(x.cuda()), y.cuda())
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    Display-only: either wire the setting up (which changes what the run does) or delete it;
    only the author knows which was meant.

    ## References
    - PyTorch docs, "Automatic Mixed Precision" (torch.amp)
    - PyTorch docs, `torch.utils.data.DataLoader` (num_workers, pin_memory)
    """

    code = "SPD704"
    name = "unused-performance-setting"
    status = Status.PREVIEW
    impact = Impact(
        wastes="whatever the setting was meant to save (device math, input pipeline, optimizer steps)",
        when="the run relies on the setting (the command line or config passes it)",
        typical="up to 1.5-3x (AMP never enabled); the planned batch size or worker count never applied",
        evidence="PyTorch AMP recipe; the setting's own documentation",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    #: a file that declares options, or one the whole program says loads a config whose keys
    #: nobody reads (`seed_triggers`)
    triggers = ("add_argument",)
    seed_triggers = (SEEDS_KEY,)
    #: the text filter and the seeds decide (the program's reads are not in the file's `ast`)
    ast_precondition = staticmethod(lambda facts: True)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        seeds = ctx.seeds
        if seeds is not None and SEEDS_KEY in seeds.project:
            entries: List[List[Any]] = list(seeds.project[SEEDS_KEY])
        else:  # no program phase (stdin, an editor buffer): the file is the program
            entries = unused_options_alone(ctx.source)
        # (looked up by a string literal's value, which may be bytes: a `b"--x"` misses)
        self._options: Dict[Tuple[int, Union[str, bytes]], List[Any]] = {(e[1], e[4]): e for e in entries if e[0] == "option"}
        self._configs: Dict[int, List[List[Any]]] = {}
        for e in entries:
            if e[0] == "config":
                self._configs.setdefault(e[1], []).append(e)

    def visit_Call(self, node: cst.Call) -> None:
        if not (self._options or self._configs):
            return
        line = self.ctx.position(node).start.line
        for entry in self._configs.pop(line, ()):
            self._report_config(node, entry)
        if not self._options or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "add_argument":
            return
        for arg in node.args:
            if arg.keyword is None and isinstance(arg.value, cst.SimpleString):
                option = self._options.pop((line, arg.value.evaluated_value), None)
                if option is not None:
                    self._report_option(node, option)
                    return

    def leave_Module(self, original_node: cst.Module) -> None:
        # a config loaded where no call starts on the load line (rare): on the module's first statement
        for entries in self._configs.values():
            for entry in entries:
                if original_node.body:
                    self._report_config(original_node.body[0], entry)
        self._configs = {}

    def _report_option(self, node: cst.Call, entry: List[Any]) -> None:
        _, _, _, dest, flag, _ = entry[:6]
        self.report(
            node,
            f"`{flag}` is parsed but no code reads `{dest}`: passing it changes nothing, {_what_happens(dest)}",
            fix=Fix.advice(f"Use `{dest}` where it belongs (e.g. `autocast(enabled=args.{dest})`, `DataLoader(num_workers=args.{dest})`) or remove the option"),
        )

    def _report_config(self, node: cst.CSTNode, entry: List[Any]) -> None:
        name, path, keys, raw_site = entry[3], entry[4], tuple(entry[5]), entry[6]
        line, col, end_col, raw, style, shared, value, kind = raw_site
        site = ConfigSite(path, line, col, end_col, raw, style, shared, keys, value, kind, ".".join(map(str, keys)))
        self.report(
            node,
            f"`{site.name}` is set in the config file but no code reads it: {_what_happens(name)}",
            fix=Fix.advice(f"Read `{name}` where it belongs or remove it from the config"),
            at=site,
        )
