"""What the reports read from what they are handed, as `Protocol`s: a check run, a fix run, a
verification. The report layer imports no orchestration module (`tests/test_layout.py`): the
runner's `RunResult`, the fix driver's `FixRun` and the harness's `VerifyResult` have these shapes,
and mypy checks each where it is handed over."""

from __future__ import annotations

from typing import Dict, List, Optional, Protocol, Sequence

from speedlint.analyzer.findings import Diagnostic, FileResult, Finding, FixOutcome, Profile


class CheckRun(Protocol):
    """A check of some paths (`runner.RunResult`)."""

    files: List[FileResult]
    missing: List[str]
    profile: Optional[Profile]

    @property
    def findings(self) -> List[Finding]: ...
    @property
    def diagnostics(self) -> List[Diagnostic]: ...


class FixesRun(Protocol):
    """The fixes of some paths, shown or written (`fixdriver.FixRun`)."""

    missing: List[str]
    diagnostics: List[Diagnostic]
    written: List[str]

    @property
    def outcomes(self) -> List[FixOutcome]: ...
    @property
    def changed(self) -> List[FixOutcome]: ...


class VerifiedFix(Protocol):
    """A fix applied in the verification's copy (`harness.verify.AppliedFix`)."""

    path: str
    code: str
    title: str
    applicability: str
    line: int


class TimedRun(Protocol):
    """One run of the script (`harness.verify.RunResult`)."""

    stderr_tail: str

    @property
    def failed(self) -> bool: ...


class Side(Protocol):
    """The runs of one side, before or after (`harness.verify.Side`)."""

    rates: List[float]
    median: Optional[float]
    low: Optional[float]
    high: Optional[float]
    data_wait_share: Optional[float]
    steps: int


class Verification(Protocol):
    """A verification's result (`harness.verify.VerifyResult`)."""

    verdict: str
    reason: str
    script: str
    args: List[str]
    mode: str
    after_file: Optional[str]
    tolerance: float
    tolerance_kind: str
    speedup: Optional[float]
    loss_steps_compared: int
    loss_max_deviation: Optional[float]
    loss_max_deviation_step: Optional[int]
    settings: Dict[str, object]
    notes: List[str]

    # (read-only: the result's own types are the harness's, which only need these shapes)
    @property
    def fixes(self) -> Sequence[VerifiedFix]: ...
    @property
    def before(self) -> Optional[Side]: ...
    @property
    def after(self) -> Optional[Side]: ...
    @property
    def runs(self) -> Sequence[TimedRun]: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def slower(self) -> bool: ...

    def to_dict(self) -> Dict[str, object]: ...
