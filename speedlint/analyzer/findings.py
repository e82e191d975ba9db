"""The small frozen types a run reports, without LibCST: `Finding`, `Diagnostic`, `Impact`,
`FixSummary`, `Edit`, and the per-file `FileResult` and run `Profile`.

They are what crosses process boundaries and what the cache, the baseline and the reports read,
so a run answered from the cache imports this module and never LibCST. `speedlint.analyzer.rule`
re-exports them next to `Rule` and `Fix` (which hold CST nodes).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple


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
    config_edits: Tuple[Any, ...] = ()

    @classmethod
    def of(cls, fix: Any) -> "FixSummary":
        """The summary of a `rule.Fix` (or the summary itself)."""
        if isinstance(fix, FixSummary):
            return fix
        return cls(fix.title, fix.applicability, fix.applicable, tuple(fix.imports), config_edits=tuple(getattr(fix, "config_edits", ())))


def allowed(fix: Optional[Any], unsafe: bool) -> bool:
    """Whether a finding's fix (a `rule.Fix` or its `FixSummary`) is applied: applicable, and
    safe unless `unsafe`."""
    if fix is None or not fix.applicable:
        return False
    return fix.applicability is not UNSAFE or unsafe


def unsafe_left(findings: "Sequence[Finding]", unsafe: bool) -> int:
    """How many of `findings` have an applicable fix that only `--unsafe-fixes` would apply."""
    if unsafe:
        return 0
    return sum(1 for f in findings if f.fix is not None and f.fix.applicable and f.fix.applicability is UNSAFE)


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
    fix: Optional[Any] = None  # a `rule.Fix` (with its nodes) or, once portable, its `FixSummary`
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
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    source: Optional[str] = None  # the text checked (for snippets); None when unread
    parsed: bool = False


@dataclass
class Profile:
    """Seconds per phase and per rule, summed over files (`--profile-rules`)."""

    phases: Dict[str, float] = field(default_factory=dict)
    rules: Dict[str, float] = field(default_factory=dict)
    files: int = 0
    parsed: int = 0
    cached: int = 0  # files answered from the cache
    workers: int = 0  # worker processes used (0: in-process)
    wall: float = 0.0  # wall seconds of the whole run (phases are summed over processes)

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def merge(self, other: "Profile") -> None:
        for k, v in other.phases.items():
            self.add(k, v)
        for k, v in other.rules.items():
            self.rules[k] = self.rules.get(k, 0.0) + v
        self.files += other.files
        self.parsed += other.parsed
        self.cached += other.cached


@dataclass
class FixOutcome:
    """What fixing one file gave (`speedlint.analyzer.fixing.fix_text`): its text before and
    after, the findings fixed and those left."""

    path: str
    original: str
    fixed: str
    applied: List[Finding] = field(default_factory=list)  # the findings whose fixes were applied
    remaining: List[Finding] = field(default_factory=list)  # findings left after fixing
    diagnostics: List[Diagnostic] = field(default_factory=list)
    unsafe_available: int = 0  # unsafe fixes not applied because --unsafe-fixes was not given
    #: findings whose (allowed) fix edits a config file the code reads: applied apart, once per
    #: config file, after every Python file (`fixdriver.fix_config_files`)
    config_fixes: List[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.fixed != self.original
