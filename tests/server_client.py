"""A small JSON-RPC client for the tests of `speedlint server`: Content-Length framing over the
server's stdin/stdout, a reader thread, and waiting for notifications with a generous timeout
(never a fixed sleep)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import speedlint

REPO = Path(speedlint.__file__).resolve().parent.parent
TIMEOUT = 60.0  # seconds: only a hung server ever waits this long


class ServerError(Exception):
    pass


class LspClient:
    """Spawns `python -m speedlint server` in `cwd` and speaks LSP to it."""

    def __init__(self, cwd: Path, args: Sequence[str] = (), command: Optional[List[str]] = None) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        cmd = command or [sys.executable, "-m", "speedlint", "server", *args]
        self.proc = subprocess.Popen(cmd, cwd=str(cwd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self._next = 0
        self._lock = threading.Lock()
        self._responses: Dict[int, "queue.Queue[Dict[str, Any]]"] = {}
        self.notifications: List[Dict[str, Any]] = []
        self._cond = threading.Condition()
        self.applied_edits: List[Dict[str, Any]] = []
        self.stderr: List[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # -- framing -----------------------------------------------------------------------------
    def _send(self, message: Dict[str, Any]) -> None:
        body = json.dumps(message).encode("utf-8")
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self._cond:
                        self._cond.notify_all()
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value.strip())
            if length is None:
                continue
            message = json.loads(out.read(length).decode("utf-8"))
            self._dispatch(message)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _dispatch(self, message: Dict[str, Any]) -> None:
        if "id" in message and "method" in message:  # a request from the server
            result: Any = None
            if message["method"] == "workspace/applyEdit":
                self.applied_edits.append(message["params"]["edit"])
                result = {"applied": True}
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        if "id" in message:
            box = self._responses.get(message["id"])
            if box is not None:
                box.put(message)
            return
        with self._cond:
            self.notifications.append(message)
            self._cond.notify_all()

    # -- requests and notifications --------------------------------------------------------------
    def request(self, method: str, params: Any, timeout: float = TIMEOUT) -> Any:
        self._next += 1
        rid = self._next
        box: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self._responses[rid] = box
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            message = box.get(timeout=timeout)
        except queue.Empty:
            raise ServerError(f"no answer to {method} in {timeout}s; stderr: {self.stderr_text()}") from None
        if "error" in message:
            raise ServerError(f"{method}: {message['error']}")
        return message.get("result")

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, match: Callable[[Dict[str, Any]], bool], since: int = 0, timeout: float = TIMEOUT) -> Dict[str, Any]:
        """The first notification from index `since` on that `match`es."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.notifications[since:]:
                    if match(message):
                        return message
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise ServerError(f"no matching notification in {timeout}s; stderr: {self.stderr_text()}")
                self._cond.wait(timeout=min(left, 1.0))

    def mark(self) -> int:
        with self._cond:
            return len(self.notifications)

    def diagnostics(self, uri: str, since: int = 0, version: Optional[int] = None) -> List[Dict[str, Any]]:
        """The diagnostics published for `uri` after `since` (for that `version`, if given)."""

        def match(m: Dict[str, Any]) -> bool:
            if m.get("method") != "textDocument/publishDiagnostics" or m["params"]["uri"] != uri:
                return False
            return version is None or m["params"].get("version") == version

        return self.wait_for(match, since)["params"]["diagnostics"]

    def logs(self) -> List[str]:
        with self._cond:
            return [m["params"]["message"] for m in self.notifications if m.get("method") == "window/logMessage"]

    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")[-3000:]

    # -- the usual conversation ------------------------------------------------------------------
    def initialize(self, root: Path, options: Optional[Dict[str, Any]] = None, capabilities: Optional[Dict[str, Any]] = None) -> Any:
        result = self.request("initialize", {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "capabilities": capabilities or {"workspace": {"applyEdit": True}},
            "initializationOptions": options or {},
        })
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: Optional[str] = None, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": path.read_text(encoding="utf-8") if text is None else text}})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})

    def close(self, uri: str) -> None:
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def shutdown(self) -> int:
        try:
            self.request("shutdown", None, timeout=20)
            self.notify("exit", None)
            return self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()
            raise


def apply_text_edits(text: str, edits: List[Dict[str, Any]]) -> str:
    """Apply LSP text edits (UTF-16 positions) to `text`, as an editor does."""
    import re

    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(pos: Dict[str, int]) -> int:
        if pos["line"] >= len(lines):
            return len(text)
        line = lines[pos["line"]]
        units = 0
        for i, ch in enumerate(line):
            if units >= pos["character"]:
                return starts[pos["line"]] + i
            units += 2 if ord(ch) > 0xFFFF else 1
        return starts[pos["line"]] + len(line.rstrip("\r\n"))

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text
