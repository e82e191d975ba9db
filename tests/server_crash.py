"""Starts `speedlint server` with one rule broken on purpose (its constructor raises), for
tests/test_server.py: the server must log the failure and skip that rule only.

Usage: python tests/server_crash.py CODE
"""

from __future__ import annotations

import sys

from speedlint.analyzer.registry import rule_by_code_or_name
from speedlint.server.lsp import start


def _broken(self, ctx):  # type: ignore[no-untyped-def]
    raise RuntimeError("a bug planted by the test")


if __name__ == "__main__":
    rule_by_code_or_name(sys.argv[1]).__init__ = _broken  # type: ignore[method-assign]
    start(debounce=0.01, use_cache=False)
