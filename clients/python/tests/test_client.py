"""Every route group of the server today, through the shellctl package,
against a real server (harness.py). The client runs in this test process:
jobs cannot reach the API (403 forbidden_from_job)."""

from __future__ import annotations

import ast
import io
import json
import os
import sys
import time
import unittest

from shellctl import (
    Client,
    EndEvent,
    InputWaitEvent,
    JobResult,
    OutputEvent,
    Record,
    Screen,
    ShellctlError,
    StateEvent,
)

from .harness import wait_done as harness_wait_done, REPO_ROOT, CuttingProxy, Server

srv: Server
c: Client


def setUpModule() -> None:
    global srv, c
    srv = Server()
    c = srv.client


def tearDownModule() -> None:
    srv.stop()


def wait_done(job_id: str) -> JobResult:
    """Waits (server-side, no polling) until the job ends."""
    return harness_wait_done(c, job_id)


class Jobs(unittest.TestCase):
    def assertAPIError(self, status: int, code: str, fn, *args, **kw) -> None:
        with self.assertRaises(ShellctlError) as cm:
            fn(*args, **kw)
        self.assertEqual((cm.exception.status, cm.exception.code), (status, code), str(cm.exception))

    def test_run_stderr_wait_status_list_tail_terminate_delete(self) -> None:
        r = c.run("echo hello; echo oops >&2; exit 3", mode="stdio", timeout=30)
        self.assertIsInstance(r, JobResult)
        self.assertEqual((r.done, r.status, r.exit_code, r.output), (True, "exited", 3, "hello\n"))
        self.assertIsNone(r.input_wait, "a stdio job has no X-Shellctl-Input-Wait")
        self.assertEqual(c.stderr(r.job_id).output, "oops\n")

        long = c.run("echo started; exec sleep 300", mode="stdio", timeout=5, idle_flush_seconds=0.2)
        self.assertFalse(long.done)
        w = c.wait(long.job_id, long.offset, timeout=0)
        self.assertFalse(w.done)
        self.assertEqual(w.offset, long.offset)
        self.assertEqual(c.status(long.job_id).status, "running")
        running = [j.job_id for j in c.list(status="running")]
        self.assertIn(long.job_id, running)
        self.assertNotIn(r.job_id, running)
        t = c.terminate(long.job_id, grace_seconds=1)
        self.assertTrue(t.done)
        self.assertEqual(t.status, "terminated")

        seq = c.run("seq 1 1000", mode="stdio", timeout=30)
        tail = c.tail(seq.job_id, output_limit=10)
        self.assertTrue(tail.output.endswith("999\n1000\n"), tail.output)
        self.assertLessEqual(len(tail.output), 10)

        c.delete(long.job_id)
        self.assertAPIError(404, "job_not_found", c.status, long.job_id)
        self.assertAPIError(404, "job_not_found", c.delete, long.job_id)

    def test_input_answers_when_the_program_waits(self) -> None:
        r = c.run('printf "name? "; read n; echo "hi $n"', timeout=30, idle_flush_seconds=20, return_on_input_wait=True)
        self.assertFalse(r.done)
        self.assertIs(r.input_wait, True)
        self.assertTrue(r.output.endswith("name? "), r.output)
        a = c.input(r.job_id, "ada\n", r.offset, timeout=30)
        self.assertIn("hi ada", a.output)
        self.assertEqual(wait_done(r.job_id).exit_code, 0)

    def test_wrong_token(self) -> None:
        bad = Client(srv.url, token="wrong")
        with self.assertRaises(ShellctlError) as cm:
            bad.list()
        self.assertEqual(cm.exception.status, 401)
        self.assertTrue(cm.exception.code)
        self.assertTrue(cm.exception.request_id)

    def test_record(self) -> None:
        r = c.run("exit 7", mode="stdio", timeout=30, env={"B": "2", "A": "1"})
        rec = c.record(r.job_id)
        self.assertIsInstance(rec, Record)
        self.assertEqual((rec.job_id, rec.mode, rec.exit_code, rec.reason), (r.job_id, "stdio", 7, "exited"))
        self.assertIsNone(rec.terminal)
        self.assertEqual(rec.env_names, ["A", "B"])
        self.assertIsNone(rec.idempotency_key)
        self.assertEqual(rec.raw["job_id"], r.job_id)

    def test_screen_keys_resize_signal(self) -> None:
        r = c.run('echo ready; read line; echo "got $line"; read x', timeout=5, terminal=(80, 24))
        s0 = c.screen(r.job_id)
        self.assertIsInstance(s0, Screen)
        self.assertEqual((s0.cols, s0.rows, s0.lines[0]), (80, 24, "ready"))
        s1 = c.keys(r.job_id, ["hello", "Enter"])
        self.assertIn("got hello", s1.lines)
        rec = c.resize(r.job_id, 100, 30)
        self.assertEqual((rec.terminal.cols, rec.terminal.rows), (100, 30))
        s2 = c.screen(r.job_id, scrollback=10)
        self.assertEqual(s2.cols, 100)
        self.assertEqual(s2.scrollback, [])
        self.assertAPIError(422, "validation_error", c.keys, r.job_id, [""])

        # The run answers once "up" is out: the job has started.
        sig = c.run("echo up; exec sleep 300", mode="stdio", timeout=30, idle_flush_seconds=0.05)
        self.assertEqual(sig.output, "up\n")
        self.assertAPIError(409, "input_unsupported", c.resize, sig.job_id, 10, 10)
        c.signal(sig.job_id, "TERM")
        wait_done(sig.job_id)
        after = c.record(sig.job_id)
        self.assertEqual(after.reason, "signaled")
        self.assertIn("TERM", after.signal or "")
        self.assertAPIError(409, "job_not_running", c.signal, sig.job_id, "TERM")

    def test_info_health_metrics_openapi(self) -> None:
        info = c.info()
        self.assertTrue(info.version)
        self.assertEqual(info.state_dir, srv.state_dir)
        self.assertTrue(info.auth_required)
        self.assertEqual(c.health(), {"status": "ok"})
        self.assertRegex(c.metrics(), r"(?m)^shellctl_")
        with open(os.path.join(REPO_ROOT, "internal", "api", "openapi.json")) as f:
            self.assertEqual(c.openapi(), json.load(f))

    def test_idempotent_run(self) -> None:
        key = "py-%d" % time.time_ns()
        a = c.run_idempotent("echo once", key=key, mode="stdio", timeout=30)
        self.assertEqual((a.idempotency_key, a.replayed), (key, False))
        b = c.run_idempotent("echo once", key=key, mode="stdio", timeout=30)
        self.assertEqual((b.job_id, b.replayed), (a.job_id, True))
        self.assertAPIError(422, "idempotency_key_reused", c.run, "echo other", mode="stdio", idempotency_key=key)

        # The first request reaches the server, its answer is lost on the way back.
        proxy = CuttingProxy(srv.url, [{"drop_answer": True}])
        try:
            via = Client(proxy.url, token=srv.token)
            before = len(c.list(limit=200))
            w = via.run_idempotent("echo lost-answer", mode="stdio", timeout=30)
            self.assertEqual(len(proxy.requests), 2, "sent twice")
            self.assertEqual(proxy.header(0, "Idempotency-Key"), w.idempotency_key)
            self.assertEqual(proxy.header(1, "Idempotency-Key"), w.idempotency_key)
            self.assertTrue(w.replayed, "the second answer is the first request's job")
            self.assertEqual(len(c.list(limit=200)), before + 1, "one job, not two")
            self.assertEqual(c.record(w.job_id).idempotency_key, w.idempotency_key)
        finally:
            proxy.close()

    def test_snapshot_save_restore(self) -> None:
        path = os.path.join(srv.home, "notes.txt")
        with open(path, "w") as f:
            f.write("kept across a restore\n")
        archive = c.snapshot_save()
        self.assertEqual(archive[:4], b"\x28\xb5\x2f\xfd", "a zstd frame")
        buf = io.BytesIO()
        self.assertIsNone(c.snapshot_save(to=buf))
        self.assertEqual(buf.getvalue()[:4], archive[:4])
        os.remove(path)
        buf.seek(0)
        res = c.snapshot_restore(buf)  # a file: sent chunked as it is read
        self.assertGreaterEqual(res.entries, 1)
        with open(path) as f:
            self.assertEqual(f.read(), "kept across a restore\n")


class Stream(unittest.TestCase):
    def test_resumes_after_a_dropped_connection(self) -> None:
        n = 60000
        want = "".join("%d\n" % (i + 1) for i in range(n)).encode()
        r = c.run("seq 1 %d" % n, mode="stdio", timeout=30)
        wait_done(r.job_id)
        # The first connection is cut 100 000 bytes into its answer: after
        # the first output event (at most 64 KiB of the file), in the
        # middle of the second.
        proxy = CuttingProxy(srv.url, [{"cut_after": 100_000}])
        try:
            via = Client(proxy.url, token=srv.token)
            resumed = []
            s = via.stream(r.job_id, on_reconnect=lambda off, err: resumed.append(off))
            data, end = s.collect()
            self.assertEqual(data, want)
            self.assertEqual((end.status, end.exit_code, end.offset), ("exited", 0, len(want)))
            self.assertEqual(s.reconnects, 1)
            self.assertTrue(0 < resumed[0] < 100_000, resumed)
            self.assertIsNone(proxy.header(0, "Last-Event-ID"))
            self.assertEqual(proxy.header(1, "Last-Event-ID"), str(resumed[0]))
        finally:
            proxy.close()

    def test_events_of_a_live_pty_job_stderr_channel_and_errors(self) -> None:
        r = c.run('printf "ready? "; read x; echo "got $x"', timeout=0.001)
        seen = []
        text = b""
        for ev in c.stream(r.job_id):
            seen.append("input_wait:%s" % ev.waiting if isinstance(ev, InputWaitEvent) else ev.type)
            if isinstance(ev, OutputEvent):
                text += ev.data
            if isinstance(ev, InputWaitEvent) and ev.waiting:
                c.input(r.job_id, "yes\n", 0, timeout=0)
            if isinstance(ev, EndEvent):
                self.assertEqual(ev.exit_code, 0)
        self.assertEqual(seen[0], "state")
        self.assertIn("input_wait:True", seen)
        self.assertEqual(seen[-1], "end")
        self.assertRegex(text.decode(), r"(?s)ready\? .*got yes")

        e = c.run("echo to-err >&2", mode="stdio", timeout=30)
        self.assertEqual(c.stream(e.job_id, channel="stderr").collect()[0], b"to-err\n")
        self.assertEqual(c.stream(e.job_id, channel="stderr", offset=3).collect()[0], b"err\n")
        with self.assertRaises(ShellctlError) as cm:
            c.stream(e.job_id, offset=1 << 20).collect()
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_offset"))
        with self.assertRaises(ShellctlError) as cm:
            c.stream(r.job_id, channel="stderr").collect()
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "channel_unsupported"))

    def test_binary_output_is_byte_exact(self) -> None:
        r = c.run(r"printf 'a\377\376b'", mode="stdio", timeout=30)
        wait_done(r.job_id)
        evs = list(c.stream(r.job_id))
        self.assertIsInstance(evs[0], StateEvent)
        self.assertEqual(b"".join(e.data for e in evs if isinstance(e, OutputEvent)), b"a\xff\xfeb")


class Package(unittest.TestCase):
    """The package must stay installable anywhere: Python 3.9 syntax and
    nothing but the standard library."""

    def modules(self):
        pkg = os.path.join(os.path.dirname(__file__), "..", "shellctl")
        for name in sorted(os.listdir(pkg)):
            if name.endswith(".py"):
                with open(os.path.join(pkg, name)) as f:
                    yield name, f.read()

    def test_python39_syntax(self) -> None:
        for name, src in self.modules():
            ast.parse(src, filename=name, feature_version=(3, 9))

    @unittest.skipUnless(hasattr(sys, "stdlib_module_names"), "needs Python 3.10+ to list the standard library")
    def test_standard_library_only(self) -> None:
        for name, src in self.modules():
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.Import):
                    tops = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    tops = [(node.module or "").split(".")[0]]
                else:
                    continue
                for top in tops:
                    self.assertIn(top, sys.stdlib_module_names, f"{name} imports {top}, not in the standard library")



class Readme(unittest.TestCase):
    def test_example_runs_as_written(self) -> None:
        import re

        pkg = os.path.join(os.path.dirname(__file__), "..")
        with open(os.path.join(pkg, "README.md")) as f:
            m = re.search(r"## Example.*?```python\n(.*?)```", f.read(), re.S)
        self.assertIsNotNone(m, "README.md has a python block under ## Example")
        self.run_example(pkg, m.group(1))

    def test_front_page_example_runs_as_written(self) -> None:
        import re

        pkg = os.path.join(os.path.dirname(__file__), "..")
        with open(os.path.join(pkg, "..", "..", "README.md")) as f:
            m = re.search(r"<!-- client-example-python:[^\n]*\n```python\n(.*?)```", f.read(), re.S)
        self.assertIsNotNone(m, "the project's README.md has a python block under <!-- client-example-python -->")
        self.run_example(pkg, m.group(1))

    def run_example(self, pkg: str, code: str) -> None:
        import subprocess

        env = dict(os.environ, SHELLCTL_URL=srv.url, SHELLCTL_TOKEN=srv.token, PYTHONPATH=os.path.abspath(pkg))
        out = subprocess.run(
            [sys.executable, "-B", "-c", code], env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
        self.assertEqual(out.returncode, 0, out.stderr.decode())
        self.assertEqual(out.stdout.decode(), "line 1\nline 2\nline 3\nexit 0\n")


if __name__ == "__main__":
    unittest.main()
