"""Reading rule fixtures: `# expect: CODE` markers, a must-not-fire section, and pragmas."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Set, Tuple

from speedlint.analyzer.config import Settings, parse_version

EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>SPD\d{3}(?:\s*,\s*SPD\d{3})*)")
MUST_NOT_FIRE = re.compile(r"^\s*#\s*must not fire", re.I | re.M)
PRAGMA = re.compile(r"^#\s*speedlint-fixture:\s*(?P<key>[\w-]+)\s*=\s*(?P<value>\S+)", re.M)


@dataclass
class RuleFixture:
    path: Path
    code: str
    text: str
    expected: Set[Tuple[int, str]] = field(default_factory=set)
    must_not_fire_line: int = 0
    pragmas: Dict[str, str] = field(default_factory=dict)

    @property
    def golden(self) -> Path:
        return self.path.with_name(self.path.stem + ".fixed.py")

    def settings(self) -> Settings:
        kwargs = {}
        if "target-torch-version" in self.pragmas:
            kwargs["target_torch_version"] = parse_version(self.pragmas["target-torch-version"])
        if "accumulation-steps" in self.pragmas:
            kwargs["fix_options"] = (("accumulation_steps", int(self.pragmas["accumulation-steps"])),)
        return Settings(select=(self.code,), **kwargs)


def load_fixture(path: Path) -> RuleFixture:
    text = path.read_text(encoding="utf-8")
    fixture = RuleFixture(path, path.stem.split(".")[0], text)
    fixture.pragmas = {m.group("key"): m.group("value") for m in PRAGMA.finditer(text)}
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = EXPECT.search(line)
        if m:
            for code in re.split(r"\s*,\s*", m.group("codes")):
                fixture.expected.add((lineno, code))
        if not fixture.must_not_fire_line and MUST_NOT_FIRE.match(line):
            fixture.must_not_fire_line = lineno
    return fixture


def rule_fixture_paths(root: Path) -> List[Path]:
    return sorted(p for p in (root / "rules").glob("SPD*.py") if not p.name.endswith(".fixed.py"))
