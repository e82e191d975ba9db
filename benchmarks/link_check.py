"""Whether the whole-program link of two speedlint trees gives the same seeds, and its CPU time.

    python benchmarks/link_check.py TREE --base /path/to/old/speedlint/checkout [--runs 3]

Summarizes every Python file of TREE once (with the base tree's code, as `check` does, and the
config files a run finds), then runs `link()` on those summaries with the base tree's code and
with this checkout's, alternately, `--runs` times each, each in a fresh process, and compares
`{display path: seeds.to_json()}`. Prints the median CPU seconds (`time.process_time` around
`link()`) of each and exits 1 when the outputs differ. The summaries are the same for both: what
is compared is the link alone.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, List, Tuple

HERE = Path(__file__).resolve().parent.parent

_PREPARE = """
import os, pickle, sys
from pathlib import Path
from speedlint.analyzer.engine import summarize_and_prelook
from speedlint.analyzer.runner import Overrides, SettingsResolver, collect_config_files, collect_files, display_path
root, out = Path(sys.argv[1]).resolve(), sys.argv[2]
os.chdir(root)
resolver = SettingsResolver(Overrides())
items, shared = [], {}
for path in collect_files(["."], resolver, False).files:
    try:
        summary, _ = summarize_and_prelook(Path(path).read_text(), [], shared)
    except Exception:
        continue
    if summary is not None:
        items.append((os.path.abspath(path), display_path(path), summary))
pickle.dump((str(root), items, collect_config_files(["."], resolver)), open(out, "wb"))
"""

_LINK = """
import os, pickle, sys, time
root, items, configs = pickle.load(open(sys.argv[1], "rb"))
os.chdir(root)
from speedlint.analyzer.parallel import _fewer_collections
from speedlint.analyzer.program.facts import link
start = time.process_time()
with _fewer_collections():
    seeds = link(items, configs)
spent = time.process_time() - start
pickle.dump((spent, {shown: s.to_json() for shown, s in seeds.items()}), open(sys.argv[2], "wb"))
"""


def _run(code: str, pythonpath: Path, *args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    subprocess.run([sys.executable, "-c", code, *args], env=env, check=True)


def _link(pythonpath: Path, inputs: str, out: str) -> Tuple[float, Any]:
    _run(_LINK, pythonpath, inputs, out)
    with open(out, "rb") as f:
        return pickle.load(f)  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the speedlint to compare with")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "inputs.pkl")
        _run(_PREPARE, args.base, str(args.tree), inputs)
        times: List[List[float]] = [[], []]
        outputs: List[Any] = [None, None]
        for _ in range(args.runs):
            for k, code_tree in enumerate((args.base, HERE)):
                spent, out = _link(code_tree, inputs, os.path.join(tmp, f"out{k}.pkl"))
                times[k].append(spent)
                outputs[k] = out
    same = outputs[0] == outputs[1]
    base, here = (statistics.median(t) for t in times)
    print(f"{args.tree}: {'identical' if same else 'DIFFERENT'} seeds of {len(outputs[1])} files; link CPU s (median of {args.runs}): base {base:.2f}, this {here:.2f}")
    if not same:
        differ = sorted(k for k in set(outputs[0]) | set(outputs[1]) if outputs[0].get(k) != outputs[1].get(k))
        print(f"  {len(differ)} files differ, e.g. {differ[:5]}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
