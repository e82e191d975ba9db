"""The rule unit: `Rule` (a LibCST batchable visitor), and the small frozen types it reports.

A rule is a pure detector. It reads the tree and the shared per-file facts on `self.ctx` and calls
`self.report(...)`. It never prints, opens files or edits: the engine turns reports into
`Finding`s, the fix engine applies `Fix`es, and `speedlint.analyzer.report` does all output.
"""

from __future__ import annotations

import enum
import inspect
import re
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Sequence, Tuple, Union

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.program import FileSeeds


class Applicability(str, enum.Enum):
    """How far a fix can be trusted.

    `safe` keeps the program's results; `unsafe` may change numerics, resources or behaviour and
    needs `--unsafe-fixes`; `display-only` is advice that is shown and never applied.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


SAFE = Applicability.SAFE
UNSAFE = Applicability.UNSAFE
DISPLAY_ONLY = Applicability.DISPLAY_ONLY


class Status(str, enum.Enum):
    STABLE = "stable"
    PREVIEW = "preview"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


#: Impact levels, used to rank findings: what costs the user most comes first.
HIGH, MEDIUM, LOW = 3, 2, 1
LEVEL_NAMES = {HIGH: "high", MEDIUM: "medium", LOW: "low"}


@dataclass(frozen=True)
class Impact:
    """What a finding costs: reports rank by `level`, then show the rest as the impact line."""

    wastes: str  # input pipeline, device math, host-device sync, memory, Python overhead
    when: str  # when it matters: "GPU", "input-bound jobs", "always" ...
    typical: str  # typical range, e.g. "1.5-4x steps/s"
    evidence: str = ""  # a reference, or our own benchmark in benchmarks/
    level: int = MEDIUM

    @property
    def level_name(self) -> str:
        return LEVEL_NAMES.get(self.level, str(self.level))

    def with_level(self, level: int, when: Optional[str] = None) -> "Impact":
        """The same record at another level (context decides severity: eval loop vs step)."""
        return replace(self, level=level, when=when or self.when)

    def line(self) -> str:
        text = f"{self.level_name} impact: wastes {self.wastes}; matters {self.when}; typically {self.typical}"
        return text + (f" ({self.evidence})" if self.evidence else "")


@dataclass(frozen=True)
class ImportSpec:
    """An import a fix needs: `import module` (obj None) or `from module import obj`."""

    module: str
    obj: Optional[str] = None


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

    @property
    def applicable(self) -> bool:
        return self.applicability is not DISPLAY_ONLY and bool(self.replacements or self.fixer)


@dataclass(frozen=True)
class FixSummary:
    """What the reports need of a `Fix`, without the tree: picklable and serialisable.

    Findings restored from the cache or sent back by a worker process carry this instead of the
    `Fix` (which holds CST nodes). It answers `title`, `applicability`, `imports` and `applicable`
    like the `Fix` it summarises; it cannot be applied (`speedlint fix` always re-analyses).
    """

    title: str
    applicability: Applicability
    applicable: bool
    imports: Tuple[ImportSpec, ...] = ()
    replacements: Tuple[Any, ...] = ()
    fixer: None = None

    @classmethod
    def of(cls, fix: "Union[Fix, FixSummary]") -> "FixSummary":
        if isinstance(fix, FixSummary):
            return fix
        return cls(fix.title, fix.applicability, fix.applicable, tuple(fix.imports))


@dataclass(frozen=True)
class Edit:
    """A textual edit (1-based lines, 0-based columns as LibCST reports them, end exclusive)."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True, eq=False)
class Finding:
    code: str
    name: str
    message: str
    path: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    impact: Impact
    fix: Optional[Union[Fix, FixSummary]] = None
    edits: Tuple[Edit, ...] = ()
    status: Status = Status.STABLE
    #: the hot call chain that makes it costly, call site by call site: (path, line, what is
    #: called), plus the cell number when the call site is in a notebook (the line is then in the cell)
    related: Tuple[Tuple[Any, ...], ...] = ()
    #: in a notebook: the cell's number (1-based, every cell counted) and the lines above it in the
    #: analysed text; `line`/`end_line` (and the edits' lines) are then lines of the cell
    cell: Optional[int] = None
    cell_offset: int = 0

    def portable(self) -> "Finding":
        """This finding with its fix reduced to a `FixSummary` (picklable, cacheable)."""
        if self.fix is None or isinstance(self.fix, FixSummary):
            return self
        return replace(self, fix=FixSummary.of(self.fix))

    @property
    def location(self) -> str:
        """`path:line:col`; `path:cell N:line:col` in a notebook."""
        if self.cell is not None:
            return f"{self.path}:cell {self.cell}:{self.line}:{self.column}"
        return f"{self.path}:{self.line}:{self.column}"

    @property
    def source_line(self) -> int:
        """The finding's line in the text that was analysed (`FileResult.source`)."""
        return self.line + self.cell_offset

    def sort_key(self) -> Tuple[Any, ...]:
        return (self.path, self.cell or 0, self.line, self.column, self.code)


@dataclass(frozen=True)
class Diagnostic:
    """A per-file problem that is not a finding: syntax error, bad encoding, unreadable file."""

    path: str
    message: str
    kind: str = "error"  # error | internal-error | warning


@dataclass
class Report:
    """What a rule reported before the engine attached positions."""

    node: cst.CSTNode
    message: str
    fix: Optional[Fix]
    impact: Impact
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
        related: Tuple[Tuple[Any, ...], ...] = (),
    ) -> None:
        self.reports.append(Report(node, message, fix, impact or self.impact, related))

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
