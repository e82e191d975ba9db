"""What the program model tells one file's rules (`FileSeeds`, made by `facts`) and `Hop`, one call
site of a chain that explains a hotness. Plain data with no heavy import: a run answered from the
cache reads seeds without importing the link, the summarizer or the config readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from speedlint.analyzer.program.schema import STEP


@dataclass(frozen=True)
class Hop:
    """One call site on a hot chain."""

    path: str
    line: int
    label: str
    cell: Optional[int] = None  # in a notebook: the cell, and `line` is a line of it

    def text(self) -> str:
        where = f"cell {self.cell}:{self.line}" if self.cell is not None else str(self.line)
        return f"{self.path}:{where} `{self.label}`"

    def related(self) -> Tuple[Any, ...]:
        """As `Finding.related` holds it."""
        return (self.path, self.line, self.label) if self.cell is None else (self.path, self.line, self.label, self.cell)


#: Project facts that say a file's loaders or functions are used from elsewhere: its own text
#: cannot tell what they do there (no pre-look).
USED_ELSEWHERE = ("loaders", "called", "pinned_loops", "loader_classes")


@dataclass
class FileSeeds:
    """What the program model says about one file, for its rules."""

    #: function ordinal (source order) -> {kind: chain}; the chain's last hop is the call that runs it
    functions: Dict[int, Dict[str, Tuple[Hop, ...]]] = field(default_factory=dict)
    #: loop ordinals (source order) that are training-step loops through a callee elsewhere
    step_loops: Tuple[int, ...] = ()
    #: the code that makes this file hot may run on a GPU
    gpu: bool = False
    #: other facts the rules ask about the project (see `Program.project_facts`)
    project: Dict[str, Any] = field(default_factory=dict)
    #: `digest()`, once known (the program cache keeps it next to the seeds)
    known_digest: Optional[str] = field(default=None, compare=False, repr=False)

    @property
    def kinds(self) -> Set[str]:
        return {k for kinds in self.functions.values() for k in kinds} | ({STEP} if self.step_loops else set())

    def changes_prelook(self, seed_triggers: Iterable[str] = ()) -> bool:
        """Whether a file's `ast` pre-look may answer differently with these seeds than from its
        text alone (`prelook.AstFacts.seed`; `seed_triggers`: the project keys its rules' text
        pre-filter reads). Passed constants, option defaults and model makers do not."""
        if self.gpu or self.step_loops or any(self.functions.values()):
            return True
        return any(self.project.get(k) for k in USED_ELSEWHERE) or any(k in self.project for k in seed_triggers)

    def digest(self) -> str:
        """What the file's findings depend on (part of its cache key)."""
        if self.known_digest is None:
            import hashlib

            import json

            self.known_digest = hashlib.sha1(json.dumps(self.to_json(), sort_keys=True, default=repr).encode()).hexdigest()[:16]
        return self.known_digest

    def to_json(self) -> List[Any]:
        return [
            [[i, {k: [list(h.related()) for h in c] for k, c in sorted(v.items())}] for i, v in sorted(self.functions.items())],
            list(self.step_loops), self.gpu, self.project,
        ]

    @classmethod
    def from_json(cls, data: List[Any]) -> "FileSeeds":
        fns = {int(i): {k: tuple(Hop(*h) for h in c) for k, c in v.items()} for i, v in data[0]}
        return cls(fns, tuple(data[1]), bool(data[2]), dict(data[3]))
