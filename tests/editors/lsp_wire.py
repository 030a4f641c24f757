"""A raw JSON-RPC connection to the real language server process over stdio: sends well-framed
bodies of any content (garbage included) and collects every reply, notification and the
server's stderr. pygls' own client cannot send malformed messages, hence this one."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from editor_helpers import ROOT


class Wire:
    def __init__(self, *args: str, command: list[str] | None = None):
        self.proc = subprocess.Popen(
            command or [sys.executable, "-m", "tilelang.cli", "lsp", *args], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.replies: dict = {}              # id -> reply (the first one for that id)
        self.null_replies: list[dict] = []   # error replies with "id": null
        self.notifications: list[dict] = []
        self.bad_output: list = []           # frames that are not a JSON object
        self.stderr = bytearray()
        self._cond = threading.Condition()
        self._next_id = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # --- reading -----------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, colon, value = line.decode("ascii", errors="replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
                elif not colon or name.strip().lower() != "content-type":
                    self.bad_output.append((line, "not a header"))  # a client would give up
            body = out.read(length or 0)
            try:
                msg = json.loads(body)
                if not isinstance(msg, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                self.bad_output.append((body[:200], str(e)))
                continue
            with self._cond:
                if "method" in msg and "id" in msg:
                    self.notifications.append(msg)  # a request of the server (none expected)
                elif "method" in msg:
                    self.notifications.append(msg)
                elif msg.get("id") is None or not isinstance(msg["id"], (str, int)):
                    self.null_replies.append(msg)  # (a server that echoes an odd id fails here)
                else:
                    self.replies.setdefault(msg["id"], msg)
                self._cond.notify_all()

    def _read_stderr(self) -> None:
        while True:
            chunk = self.proc.stderr.read1(65536)
            if not chunk:
                return
            self.stderr.extend(chunk)

    # --- writing -----------------------------------------------------------------------------
    def send_raw(self, body: bytes) -> None:
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, msg) -> None:
        self.send_raw(json.dumps(msg).encode("utf-8"))

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def request(self, method: str, params=None, msg_id=None):
        msg_id = self.new_id() if msg_id is None else msg_id
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return msg_id

    def notify(self, method: str, params=None) -> None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    # --- waiting -----------------------------------------------------------------------------
    def reply(self, msg_id, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while msg_id not in self.replies:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    state = "exited" if self.proc.poll() is not None else "alive"
                    raise AssertionError(f"no reply to request {msg_id!r} within {timeout} s "
                                         f"(server {state}); stderr: "
                                         f"{self.stderr.decode(errors='replace')[-2000:]}")
                self._cond.wait(min(left, 0.5))
            return self.replies[msg_id]

    def call(self, method: str, params=None, timeout: float = 30.0) -> dict:
        return self.reply(self.request(method, params), timeout)

    def diagnostics(self, uri: str, timeout: float = 30.0, after: int = 0,
                    where=lambda m: True) -> dict:
        """The first publishDiagnostics for `uri` among the notifications from index `after`
        on that satisfies `where`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for m in self.notifications[after:]:
                    if m.get("method") == "textDocument/publishDiagnostics" and \
                            m["params"]["uri"] == uri and where(m["params"]):
                        return m["params"]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no diagnostics for {uri} within {timeout} s")
                self._cond.wait(min(left, 0.5))

    def initialize(self, **capabilities) -> dict:
        r = self.call("initialize", {"processId": None, "rootUri": None,
                                     "capabilities": capabilities})
        self.notify("initialized", {})
        return r

    def close(self, timeout: float = 20.0) -> int:
        """Shut down and exit politely; kill the process if it does not go."""
        try:
            if self.proc.poll() is None:
                try:
                    self.call("shutdown", timeout=timeout)
                    self.notify("exit")
                except (AssertionError, BrokenPipeError, OSError):
                    pass
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
                return self.proc.wait(timeout)
            return self.proc.returncode
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
