"""A real shellctl server for the tests: the freshly built bin/shellctl
(SHELLCTL_BIN, else the checkout's bin/shellctl) on 127.0.0.1:0 with a
temporary state dir and Home, and a TCP proxy in front of it that can cut a
connection the way a network fault would."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from typing import Dict, List, Optional
from urllib.parse import urlsplit

from shellctl import Client, JobResult

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOKEN = "py-client-test-token"
_SERVING = re.compile(r'serving on (http://[^\s"()]+)')


class Server:
    def __init__(self) -> None:
        binary = os.environ.get("SHELLCTL_BIN") or os.path.join(REPO_ROOT, "bin", "shellctl")
        if not os.path.exists(binary):
            raise RuntimeError(f"no shellctl binary at {binary}: build it first (make build), or set SHELLCTL_BIN")
        self.root = tempfile.mkdtemp(prefix="shellctl-py-client-")
        self.home = os.path.join(self.root, "home")
        self.state_dir = os.path.join(self.root, "state")
        os.mkdir(self.home)
        os.mkdir(self.state_dir, 0o700)
        self.proc = subprocess.Popen(
            [
                binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", self.state_dir, "--token", TOKEN,
                # The egress proxy, for prepare: its CA goes beside the state
                # dir, not to the machine-wide default another server shares.
                "--egress-proxy", "127.0.0.1:0", "--egress-ca-out", os.path.join(self.root, "egress"),
            ],  # fmt: skip
            env={"HOME": self.home, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.stderr: List[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.proc.stderr is not None
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace")
                self.stderr.append(line)
                m = _SERVING.search(line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(20) or not self.url:
            self.proc.kill()
            raise RuntimeError("shellctl serve did not print its serving on line:\n" + "".join(self.stderr))
        self.token = TOKEN
        self.client = Client(self.url, token=TOKEN)

    def stop(self) -> None:
        # Jobs outlive their server (their runners are their own): end them
        # through the API first.
        try:
            for j in self.client.list(limit=200):
                try:
                    self.client.delete(j.job_id, force=True, grace_seconds=0)
                except Exception:
                    pass
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.root, ignore_errors=True)


class CuttingProxy:
    """A TCP proxy to ``target``. Each connection's first bytes from the
    client (its request head) are kept in ``requests``. ``plan`` says, per
    connection in order, what goes wrong: {"cut_after": n} closes it after n
    bytes of the answer; {"drop_answer": True} forwards the request and
    closes the connection when the answer's first bytes come back (the
    request took effect, its answer is lost)."""

    def __init__(self, target: str, plan: List[Optional[Dict[str, object]]]):
        u = urlsplit(target)
        self.target = (u.hostname, u.port)
        self.plan = plan
        self.requests: List[bytes] = []
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self._sock.getsockname()[1]
        self._open: List[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                n = len(self.requests)
                self.requests.append(b"")
                fault = self.plan[n] if n < len(self.plan) else None
            up = socket.create_connection(self.target)
            self._open += [c, up]
            threading.Thread(target=self._up, args=(c, up, n), daemon=True).start()
            threading.Thread(target=self._down, args=(c, up, fault or {}), daemon=True).start()

    def _up(self, c: socket.socket, up: socket.socket, n: int) -> None:
        try:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                with self._lock:
                    if len(self.requests[n]) < 4096:
                        self.requests[n] += b
                up.sendall(b)
        except OSError:
            pass
        finally:
            _close(c, up)

    def _down(self, c: socket.socket, up: socket.socket, fault: Dict[str, object]) -> None:
        sent = 0
        cut = fault.get("cut_after")
        try:
            while True:
                b = up.recv(65536)
                if not b:
                    break
                if fault.get("drop_answer"):
                    break
                if isinstance(cut, int) and sent + len(b) >= cut:
                    c.sendall(b[: cut - sent])
                    break
                sent += len(b)
                c.sendall(b)
        except OSError:
            pass
        finally:
            _close(c, up)

    def header(self, n: int, name: str) -> Optional[str]:
        """The value of a header in connection n's request head, or None."""
        for line in self.requests[n].decode("latin-1").split("\r\n"):
            k, sep, v = line.partition(":")
            if sep and k.lower() == name.lower():
                return v.strip()
        return None

    def close(self) -> None:
        self._sock.close()
        for s in self._open:
            _close(s)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def wait_done(c: Client, job_id: str) -> JobResult:
    """Waits (server-side, no polling) until the job ends: its last window."""
    while True:
        w = c.wait(job_id, 0, timeout=30, output_limit=524288)
        if w.done:
            return w
