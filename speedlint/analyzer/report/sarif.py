"""SARIF 2.1.0 output, as GitHub code scanning accepts it (`github/codeql-action/upload-sarif`).

* Artifact URIs are relative to the working folder (run speedlint from the repository root), with
  `uriBaseId: "%SRCROOT%"`; `originalUriBaseIds` maps that to the folder's absolute URI.
* `tool.driver.rules` lists every rule (id, name, short/full description, help as text and
  Markdown, default level, tags); each result points at its rule with `ruleId` and `ruleIndex`.
* Levels: high and medium impact -> `warning`, low -> `note` (performance findings are not
  errors; gate pull requests on the exit code of `speedlint check`).
* Regions: 1-based lines and columns counted in Unicode code points (`columnKind`); `endColumn`
  is the column after the last character, as SARIF defines it.
* `partialFingerprints["speedlintFingerprint/v1"]`: a hash of rule + path + the flagged line's
  content (comments removed, whitespace normalized), then `:N` for the N-th such finding in the
  file: stable when lines move, so code scanning keeps tracking the same alert.
* Per-file errors (syntax errors, unreadable files) are `toolExecutionNotifications`.
* Notebooks (`.ipynb`): the region is relative to the cell (`startLine` 1 is the cell's first
  line, as an editor shows the cell), and the cell is named where viewers show it: a logical
  location `cell N` (`fullyQualifiedName` `train.ipynb:cell N`, kind `notebookCell`), the
  location's `properties.cell`, and the message, which starts with `cell N:LINE:COL: `. Related
  locations (the hot call chain) in a notebook carry the same logical location.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Type
from urllib.parse import quote

from speedlint.analyzer.rule import HIGH, LOW, MEDIUM, Diagnostic, Finding, Rule

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "speedlintFingerprint/v1"

LEVELS = {HIGH: "warning", MEDIUM: "warning", LOW: "note"}


def sarif_level(impact_level: int) -> str:
    return LEVELS.get(impact_level, "warning")


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    m = re.match(r"(.+?[.!?])(\s|$)", flat)
    return (m.group(1) if m else flat) or flat


def rule_descriptor(rule: Type[Rule]) -> Dict[str, Any]:
    doc = rule.docs()
    what = rule.doc_section("What it does") or doc or rule.name
    short = _first_sentence(what) or rule.name
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": short},
        "fullDescription": {"text": " ".join(what.split())},
        "help": {"text": doc or short, "markdown": f"# {rule.code} ({rule.name})\n\n{doc}" if doc else short},
        "defaultConfiguration": {"level": sarif_level(rule.impact.level)},
        "properties": {
            "tags": ["performance", "pytorch"] + ([rule.category()] if rule.category() else []),
            "precision": "high",
            "problem.severity": sarif_level(rule.impact.level),
            "impact": rule.impact.level_name,
            "fix": rule.fixability(),
            "status": rule.status.value,
        },
    }


def artifact_uri(path: str) -> str:
    """A relative URI for a reported path (posix separators, percent-encoded)."""
    posix = Path(path).as_posix()
    if posix.startswith("./"):
        posix = posix[2:]
    return quote(posix, safe="/")


def _base_uri(root: Path) -> str:
    uri = root.resolve().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _fingerprints(findings: Sequence[Finding], sources: Dict[str, Optional[str]]) -> Dict[int, str]:
    from speedlint.analyzer.diffkeys import FindingKeyer

    keyer = FindingKeyer(Path("."), sources)
    seen: Counter = Counter()
    out: Dict[int, str] = {}
    for f in sorted(findings, key=Finding.sort_key):
        code, _, content = keyer.key(f)
        key = (code, artifact_uri(f.path), content)
        seen[key] += 1
        digest = hashlib.sha256("\0".join(key).encode("utf-8")).hexdigest()[:32]
        out[id(f)] = f"{digest}:{seen[key]}"
    return out


def _location(path: str, region: Optional[Dict[str, int]] = None, cell: Optional[int] = None) -> Dict[str, Any]:
    physical: Dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(path), "uriBaseId": SRCROOT}}
    if region:
        physical["region"] = region
    location: Dict[str, Any] = {"physicalLocation": physical}
    if cell is not None:  # a notebook: the region's lines are lines of this cell
        name = f"cell {cell}"
        location["logicalLocations"] = [{"name": name, "fullyQualifiedName": f"{Path(path).as_posix()}:{name}", "kind": "notebookCell"}]
        location["properties"] = {"cell": cell}
    return location


def _result(f: Finding, rule_index: int, fingerprint: str) -> Dict[str, Any]:
    region = {
        "startLine": max(1, f.line),
        "startColumn": max(1, f.column),
        "endLine": max(1, f.end_line),
        "endColumn": max(1, f.end_column),
    }
    properties: Dict[str, Any] = {"name": f.name, "impact": f.impact.level_name, "impactDetail": f.impact.line()}
    if f.fix is not None:
        properties["fix"] = {"title": f.fix.title, "applicability": f.fix.applicability.value}
    message = f.message
    if f.fix is not None:
        message += f" ({'fix' if f.fix.applicable else 'advice'}: {f.fix.title})"
    if f.cell is not None:
        message = f"cell {f.cell}:{f.line}:{f.column}: {message}"
    result = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": sarif_level(f.impact.level),
        "message": {"text": message},
        "locations": [_location(f.path, region, f.cell)],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        "properties": properties,
    }
    if f.related:  # the hot call chain, call site by call site
        related = []
        for i, (path, line, call, *cell) in enumerate(f.related):
            loc = _location(path, {"startLine": max(1, line)}, cell[0] if cell else None)
            loc["id"] = i
            loc["message"] = {"text": f"calls `{call}`"}
            related.append(loc)
        result["relatedLocations"] = related
    return result


def sarif_document(
    findings: Sequence[Finding],
    diagnostics: Sequence[Diagnostic],
    sources: Optional[Dict[str, Optional[str]]] = None,
    rules: Optional[Sequence[Type[Rule]]] = None,
    root: Optional[Path] = None,
) -> Dict[str, Any]:
    from speedlint import __version__

    if rules is None:
        from speedlint.analyzer.registry import all_rules

        rules = all_rules()
    rule_list: List[Type[Rule]] = list(rules)
    known = {r.code for r in rule_list}
    index: Dict[str, int] = {r.code: i for i, r in enumerate(rule_list)}
    descriptors = [rule_descriptor(r) for r in rule_list]
    for f in sorted(findings, key=Finding.sort_key):  # a finding of a rule not in the list still gets a descriptor
        if f.code not in known:
            known.add(f.code)
            index[f.code] = len(descriptors)
            descriptors.append({"id": f.code, "name": f.name, "shortDescription": {"text": f.name}})
    prints = _fingerprints(findings, sources or {})
    results = [_result(f, index[f.code], prints[id(f)]) for f in sorted(findings, key=Finding.sort_key)]
    notifications = [
        {
            "level": "error" if d.kind != "warning" else "warning",
            "message": {"text": f"{d.path}: {d.message}"},
            "locations": [_location(d.path)],
            "descriptor": {"id": d.kind},
        }
        for d in diagnostics
    ]
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "speedlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "rules": descriptors,
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not any(d.kind == "internal-error" for d in diagnostics),
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "originalUriBaseIds": {SRCROOT: {"uri": _base_uri(root or Path.cwd())}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
