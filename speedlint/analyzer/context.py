"""Everything a rule may ask about the file it is visiting, computed lazily and at most once."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Optional

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from speedlint.analyzer.providers.names import ImportMap
from speedlint.analyzer.providers.training import TorchFacts
from speedlint.analyzer.providers.values import ValueTracer
from speedlint.analyzer.textscan import may_use_gpu

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.config import Settings

class FileContext:
    """Per-file state shared by all rules of one traversal.

    Metadata is resolved on first use only, so a rule that never asks for positions or the
    training-step structure does not pay for them.
    """

    def __init__(self, path: str, source: str, module: cst.Module, settings: "Settings") -> None:
        self.path = path
        self.source = source
        self.module = module
        self.settings = settings
        self.wrapper = MetadataWrapper(module, unsafe_skip_copy=True)

    @cached_property
    def imports(self) -> ImportMap:
        return ImportMap(self.module)

    @cached_property
    def torch(self) -> TorchFacts:
        return TorchFacts(self.module, self.imports)

    @cached_property
    def values(self) -> ValueTracer:
        return ValueTracer(self.torch)

    @cached_property
    def may_use_gpu(self) -> bool:
        """False for scripts that never mention CUDA or select a device: no GPU-only advice there."""
        return may_use_gpu(self.source)

    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        return self.imports.qualname(node)

    def matches(self, node: cst.BaseExpression, *names: str) -> bool:
        return self.imports.matches(node, *names)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self.wrapper.resolve(PositionProvider)[node]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)
