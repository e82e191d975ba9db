"""Whether a training step runs convolutions (SPD701's absence finding: the network trained is a
conv net), from the step loop's own calls rather than from imports: a probe head trained on the
features of a frozen conv backbone imports the backbone but trains no conv net."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from speedlint.analyzer.program.hotness import Hotness
from speedlint.analyzer.program.link import _RETURNS_SELF


def conv_in_steps(hot: Hotness, budget: int = 20000) -> Set[int]:
    """The modules whose training-step loops run convolutions: the module's text builds them
    (`nn.Conv2d`, `torchvision.models`), or a function the step calls (at any depth) lives in
    a module that does. Imports alone do not count: a probe head trained on features of a
    frozen conv backbone trains no conv net."""
    p = hot.p
    conv = [bool(m.summary.get("conv")) for m in p.modules]
    out: Set[int] = set()
    for mid, fid, loop in sorted(hot.step_loops, key=lambda s: (s[0], -1 if s[1] is None else s[1], s[2])):
        if mid in out:
            continue
        if conv[mid]:
            out.add(mid)
            continue
        body = hot._body(mid, fid)
        calls = set(hot._loop_calls(body, loop))
        if _calls_made_in_conv_module(hot, mid, fid, body, calls, conv):
            out.add(mid)
            continue
        todo = [c for ci, c in hot._edges(mid, fid) if ci in calls]
        seen = set(todo)
        while todo and budget > 0:
            budget -= 1
            cur = todo.pop()
            if conv[p.functions[cur][0]]:
                out.add(mid)
                break
            for edge in p.edges[cur]:
                if edge[1] not in seen:
                    seen.add(edge[1])
                    todo.append(edge[1])
    return out


def _calls_made_in_conv_module(hot: Hotness, mid: int, fid: Optional[int], body: Dict[str, Any], calls: Set[int], conv: List[bool]) -> bool:
    """A name the step calls (`model(x)`) holds what a project function or class of a module
    building convolutions made (`model = conv_net(10).to(device)`: an `nn.Sequential` of
    convolutions, whose forward is torch's own)."""
    names = {c[1][1] for i, c in enumerate(body["calls"]) if i in calls and c[1] and c[1][0] == "n"}
    env: Optional[Dict[str, Set[str]]] = None
    for name in sorted(names):
        for value in body["assign"].get(name, ()):
            while value and value[0] == "c" and value[1] and value[1][0] == "a" and value[1][2] in _RETURNS_SELF:
                value = value[1][1]  # `conv_net(10).to(device)` is what `conv_net` made
            if not value or value[0] != "c":
                continue
            if env is None:
                env = hot._env(mid, fid)
            for obj in hot.p.eval(mid, fid, value[1], env):
                kind, _, rest = obj.partition(":")
                if kind in ("F", "C") and conv[hot.p.functions[int(rest)][0] if kind == "F" else hot.p.classes[int(rest)][0]]:
                    return True
    return False
