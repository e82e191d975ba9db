"""Everything a rule may ask about the file it is visiting, computed lazily and at most once.

Every provider of a file (the shared facts a rule asks for: `imports`, `torch`, `values`,
`config_values` here, `providers.flow.flow`, `providers.loaders.loader_facts` ...) is reached the
same way: `FileContext.provider(build)` builds it from the context on first use and keeps it for
the traversal. Nothing else is stored on the context.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from speedlint.analyzer.providers.configs import ConfigLookup
from speedlint.analyzer.providers.names import ImportMap
from speedlint.analyzer.providers.positions import node_positions, statement_positions
from speedlint.analyzer.providers.training import TorchFacts
from speedlint.analyzer.providers.values import ValueTracer
from speedlint.analyzer.textscan import may_use_gpu

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.config import Settings
    from speedlint.analyzer.program.seeds import FileSeeds

#: Passes that note a few positions (`prefetch_positions`) before all are computed at once:
#: passes that generate the whole module, and passes that generate only the statements that
#: hold the nodes (each costs about what it generates, plus a search of the text).
_POSITION_PASSES = 3
_STATEMENT_PASSES = 64

P = TypeVar("P")
#: Builds a provider from the file's context (a provider class, or a function).
Build = Callable[["FileContext"], P]


class FileContext:
    """Per-file state shared by all rules of one traversal.

    Metadata is resolved on first use only, so a rule that never asks for positions or the
    training-step structure does not pay for them.
    """

    def __init__(self, path: str, source: str, module: cst.Module, settings: "Settings", seeds: "Optional[FileSeeds]" = None) -> None:
        self.path = path
        #: what the whole program says about this file (`speedlint.analyzer.program`)
        self.seeds = seeds
        self.source = source
        self.module = module
        self.settings = settings
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._positions: Dict[int, Tuple[cst.CSTNode, CodeRange]] = {}  # id -> (node, range)
        self._all_positions: Optional[Mapping[cst.CSTNode, CodeRange]] = None
        self._position_passes = 0
        self._statement_passes = 0
        self._providers: Dict[Callable[..., Any], Any] = {}  # build -> what it built

    # -- providers --------------------------------------------------------------------------------
    def provider(self, build: "Build[P]") -> P:
        """The file's provider that `build` makes from this context: built on first use, then
        kept for the traversal (every rule of the file shares it)."""
        got = self._providers.get(build)
        if got is None:
            got = self._providers[build] = self._build(build)
        return got

    def built(self, build: "Build[P]") -> Optional[P]:
        """The provider `build` makes, when something asked for it already (else None: nothing is
        built for the asking)."""
        return self._providers.get(build)

    def _build(self, build: "Build[P]") -> P:
        return build(self)

    @property
    def imports(self) -> ImportMap:
        return self.provider(_imports)

    @property
    def torch(self) -> TorchFacts:
        return self.provider(_torch)

    @property
    def torch_if_built(self) -> Optional[TorchFacts]:
        """`torch`, when a rule asked for it already (else None)."""
        return self.built(_torch)

    @property
    def values(self) -> ValueTracer:
        return self.provider(_values)

    @property
    def config_values(self) -> ValueTracer:
        """`values`, also through config files the code reads (`providers.configs`): a value
        from a config file carries the line that holds it (`Value.config`). Rules that report
        on config lines or read config toggles ask this one."""
        return self.provider(_config_values)

    def config_problems(self) -> list:
        """(config path, message) for config files that could not be used (read errors, values
        of the wrong type), found while looking values up."""
        tracer = self.built(_config_values)
        lookup = getattr(tracer, "configs", None)
        return list(lookup.problems) if lookup is not None else []

    @cached_property
    def may_use_gpu(self) -> bool:
        """False for scripts that never mention CUDA or select a device: no GPU-only advice there
        (a module whose code is made hot by such a script, through the program, counts as GPU)."""
        return may_use_gpu(self.source) or (self.seeds is not None and self.seeds.gpu)

    def loader_use(self, call: cst.Call) -> Dict[str, str]:
        """How loops in other functions and modules use the loader built by `call` (the whole
        program): "epoch" -> where it is iterated again every epoch, "moved" -> where its batches
        are copied to the GPU. Empty when the program knows nothing more."""
        if self.seeds is None or not self.seeds.project.get("loaders"):
            return {}
        return self.seeds.project["loaders"].get(str(self.position(call).start.line), {})

    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        return self.imports.qualname(node)

    def matches(self, node: cst.BaseExpression, *names: str) -> bool:
        return self.imports.matches(node, *names)

    def position(self, node: cst.CSTNode) -> CodeRange:
        """The node's range, as LibCST's `PositionProvider` gives it (KeyError: not in the tree)."""
        known = self._positions.get(id(node))
        if known is None or known[0] is not node:
            # asked while the rules run (a fix's edit, the line of a loader call): the statement
            # that holds it is generated, not more (noting every call in the same pass, to spare
            # later passes, generated most of the file)
            self.prefetch_positions([node])
            known = self._positions.get(id(node))
            if known is None or known[0] is not node:
                raise KeyError(node)
        return known[1]

    def prefetch_positions(self, nodes: Sequence[cst.CSTNode]) -> None:
        """Compute the ranges of these nodes in one pass (what the report needs, all at once).

        A pass notes only the nodes asked for (`providers.positions`), generating only the
        statements that hold them when the tree's reading is at hand (`torch.tree`); after a few
        passes in one file, every node's range is computed at once, as `PositionProvider` does."""
        wanted = [n for n in nodes if id(n) not in self._positions]
        if not wanted:
            return
        if self._all_positions is None and self._position_passes < _POSITION_PASSES:
            facts = self.torch_if_built
            found = None
            if facts is not None and self._statement_passes < _STATEMENT_PASSES:
                self._statement_passes += 1
                found = statement_positions(self.module, wanted, self.source, facts.tree)
            if found is None:
                self._position_passes += 1
                found = node_positions(self.module, wanted)
            if found is not None:
                for n in wanted:
                    if id(n) in found:
                        self._positions[id(n)] = (n, found[id(n)])
                return
        if self._all_positions is None:
            self._all_positions = self.wrapper.resolve(PositionProvider)
        for n in wanted:
            got = self._all_positions.get(n)
            if got is not None:
                self._positions[id(n)] = (n, got)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


# -- the providers built here ---------------------------------------------------------------------
def _imports(ctx: FileContext) -> ImportMap:
    return ImportMap(ctx.module)


def _torch(ctx: FileContext) -> TorchFacts:
    return TorchFacts(ctx.module, ctx.imports, ctx.seeds)


def _values(ctx: FileContext) -> ValueTracer:
    return ValueTracer(ctx.torch)


def _config_values(ctx: FileContext) -> ValueTracer:
    lookup = ConfigLookup(ctx.torch)
    if not lookup.active:
        return ctx.values
    tracer = ValueTracer(ctx.torch, configs=lookup)
    tracer._index = ctx.values.index  # the same bindings: index the module once
    return tracer
