"""The rule unit: `Rule` (a LibCST batchable visitor) and `Fix`; the small frozen types it reports
(`Finding`, `Impact`, ...) are defined in `speedlint.analyzer.findings` and re-exported here.

A rule is a pure detector. It reads the tree and the shared per-file facts on `self.ctx` and calls
`self.report(...)`. It never prints, opens files or edits: the engine turns reports into
`Finding`s, the fix engine applies `Fix`es, and `speedlint.analyzer.report` does all output.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Sequence, Tuple, Union

import libcst as cst

from speedlint.analyzer.configs.edit import value_edit

# The reported types live in `findings` (no LibCST: what the cache and the reports read); rules
# import them from here, next to `Rule` and `Fix`.
from speedlint.analyzer.findings import (  # noqa: F401 - re-exported
    DISPLAY_ONLY,
    HIGH,
    LEVEL_NAMES,
    LOW,
    MEDIUM,
    SAFE,
    UNSAFE,
    Applicability,
    Diagnostic,
    Edit,
    Finding,
    FixSummary,
    Impact,
    ImportSpec,
    Status,
)

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.prelook import AstFacts
    from speedlint.analyzer.program.seeds import FileSeeds


Replacement = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel]


@dataclass(frozen=True, eq=False)
class Fix:
    """A proposed change, with its applicability decided per finding.

    Either `replacements` (original node -> new node, keyed on node identity) plus `imports`,
    or `fixer`: a callable that takes the file's module and returns the rewritten module (used by
    the multi-site codemods in `speedlint.fixers`). A display-only fix carries neither.
    """

    title: str
    applicability: Applicability
    replacements: Tuple[Tuple[cst.CSTNode, Replacement], ...] = ()
    imports: Tuple[ImportSpec, ...] = ()
    fixer: Optional[Callable[[cst.Module], cst.Module]] = None
    #: textual edits of config files (`configs.edit.ConfigEdit`), applied apart from the code
    config_edits: Tuple[Any, ...] = ()

    @classmethod
    def replace(
        cls,
        node: cst.CSTNode,
        new: Replacement,
        title: str,
        applicability: Applicability = SAFE,
        imports: Sequence[ImportSpec] = (),
    ) -> "Fix":
        return cls(title, applicability, ((node, new),), tuple(imports))

    @classmethod
    def many(
        cls,
        pairs: Sequence[Tuple[cst.CSTNode, Replacement]],
        title: str,
        applicability: Applicability = SAFE,
        imports: Sequence[ImportSpec] = (),
    ) -> "Fix":
        return cls(title, applicability, tuple(pairs), tuple(imports))

    @classmethod
    def advice(cls, title: str) -> "Fix":
        return cls(title, DISPLAY_ONLY)

    @classmethod
    def config(cls, edit: Any, title: str, applicability: Applicability = SAFE) -> "Fix":
        """Change one value of a config file (`configs.edit.ConfigEdit`)."""
        return cls(title, applicability, config_edits=(edit,))

    @property
    def applicable(self) -> bool:
        return self.applicability is not DISPLAY_ONLY and bool(self.replacements or self.fixer or self.config_edits)


@dataclass
class Report:
    """What a rule reported before the engine attached positions."""

    node: cst.CSTNode
    message: str
    fix: Optional[Fix]
    impact: Impact
    #: a config-file place (`providers.configs.ConfigSite`) the finding belongs to instead of
    #: `node`; the code at `node` becomes its related location
    at: Any = None
    #: call sites in this file that make `node` hot (as `Finding.related`), when the rule knows
    #: them and the whole program gives no chain (a helper called from `__getitem__`)
    related: Tuple[Tuple[Any, ...], ...] = ()


class Rule(cst.BatchableCSTVisitor):
    """Base class of every rule. Subclasses set the class attributes and define `visit_*`.

    The docstring of a rule is its documentation (`speedlint explain`), with the sections
    What it does / Why is this slow? / Example / Use instead / Fix safety.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    impact: ClassVar[Impact]
    status: ClassVar[Status] = Status.STABLE
    #: The applicabilities this rule's fixes may have; empty means it never offers a fix.
    fixes: ClassVar[Tuple[Applicability, ...]] = ()
    #: The file must contain one of these strings for the rule to be able to fire.
    triggers: ClassVar[Tuple[str, ...]] = ()
    #: `FileSeeds.project` keys that make a file a candidate whatever its text (the loader that
    #: matters is built in another module)
    seed_triggers: ClassVar[Tuple[str, ...]] = ()
    #: Off unless selected explicitly (by full code or name).
    default_enabled: ClassVar[bool] = True
    #: The `ast` pre-look's test (`speedlint.analyzer.prelook.AstFacts`), declared by every rule as
    #: `staticmethod(lambda facts: ...)`: True whenever the rule could fire on the file (it may
    #: answer True too often, never too rarely); LibCST runs only for the rules whose test holds.
    #: (Typed as the `staticmethod` object it is: a plain callable class attribute would be read
    #: by mypy as a method, whose first argument is the rule.)
    ast_precondition: ClassVar[Optional["staticmethod[[AstFacts], bool]"]] = None
    #: The cost the rule reports is paid once per epoch (a loader built, the allocator's cache
    #: emptied): a chain through code the whole program runs once per epoch explains its findings,
    #: as a per-step chain explains the others'.
    per_epoch: ClassVar[bool] = False

    def __init__(self, ctx: "FileContext") -> None:
        super().__init__()
        self.ctx = ctx
        self.reports: list[Report] = []

    # -- reporting -----------------------------------------------------------------------
    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        fix: Optional[Fix] = None,
        impact: Optional[Impact] = None,
        at: Any = None,
        related: Tuple[Tuple[Any, ...], ...] = (),
    ) -> None:
        """Report a finding on `node`, or, with `at` (a `ConfigSite` from `ctx.config_values`),
        on the config-file line that holds the value, with `node` as the code that reads it.
        `related`: call sites in this file that make `node` hot (a helper called from
        `__getitem__`), when the whole program gives no chain. A site with `others` (the same
        value in each candidate file of a required config option) gives one finding per file."""
        self.reports.append(Report(node, message, fix, impact or self.impact, at, related))
        for other in getattr(at, "others", ()) if at is not None else ():
            self.reports.append(Report(node, message, _fix_at(fix, other), impact or self.impact, other, related))

    # -- class-level helpers -------------------------------------------------------------
    @classmethod
    def category(cls) -> str:
        parts = cls.__module__.split(".")
        return parts[-2] if len(parts) >= 2 else ""

    @classmethod
    def category_title(cls) -> str:
        """The bottleneck class the rule belongs to: the first line of its category package's
        docstring (`speedlint/rules/data/__init__.py`: "Input pipeline"), else the category."""
        package = sys.modules.get(cls.__module__.rpartition(".")[0])
        doc = inspect.getdoc(package) if package is not None else None
        return doc.splitlines()[0].strip() if doc else cls.category()

    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def doc_section(cls, title: str) -> str:
        """The body of one `## title` section of the documentation ("" when there is none)."""
        m = re.search(rf"^##\s+{re.escape(title)}\s*$(?P<body>.*?)(?=^##\s|\Z)", cls.docs(), re.M | re.S)
        return m.group("body").strip() if m else ""

    @classmethod
    def can_fire_on(cls, text: str, seeds: "Optional[FileSeeds]" = None) -> bool:
        """The text pre-filter: a trigger token is in the text, or the whole program says the
        file holds what the rule looks at (`seed_triggers`: keys of `FileSeeds.project`)."""
        if not cls.triggers or any(t in text for t in cls.triggers):
            return True
        return seeds is not None and any(k in seeds.project for k in cls.seed_triggers)

    @classmethod
    def fixability(cls) -> str:
        if not cls.fixes:
            return "-"
        return "/".join(a.value for a in cls.fixes)


def _fix_at(fix: Optional[Fix], site: Any) -> Optional[Fix]:
    """`fix`, with its config-file edits made again at `site` (another file holding the value)."""
    if fix is None or not fix.config_edits:
        return fix
    edits = [value_edit(site, e.value) for e in fix.config_edits]
    if any(e is None for e in edits):
        return Fix.advice(fix.title)
    return dataclasses.replace(fix, config_edits=tuple(edits))
