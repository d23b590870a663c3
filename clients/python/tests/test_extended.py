"""Files, stdin pipes, egress credentials and attach through the shellctl
package, against a real server (harness.py), each with its errors."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import threading
import unittest

from shellctl import (
    ArchiveError,
    AttachExit,
    AttachOutput,
    AttachRedraw,
    Client,
    InputBackpressureError,
    JobResult,
    ShellctlError,
    WatchChange,
    WatchReady,
)

from .harness import wait_done as harness_wait_done, CuttingProxy, Server

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


def started(pipe: bool = False) -> JobResult:
    """A stdio job that has started (its run answers once "up" is out) and
    then sleeps without reading its stdin; a job ended before it started
    is not what these tests are about."""
    stdin = "pipe" if pipe else None
    r = c.run("echo up; exec sleep 300", mode="stdio", timeout=30, idle_flush_seconds=0.05, stdin=stdin)
    assert r.output == "up\n", r
    return r


class APITest(unittest.TestCase):
    def assertAPIError(self, status: int, code: str, fn, *args, **kw) -> ShellctlError:
        with self.assertRaises(ShellctlError) as cm:
            fn(*args, **kw)
        self.assertEqual((cm.exception.status, cm.exception.code), (status, code), str(cm.exception))
        return cm.exception


class Files(APITest):
    def test_write_read_stat_list(self) -> None:
        data = bytes(range(256)) * 1000
        w = c.write_file("py/a.bin", data, mkdirs=True, mode=0o600)
        self.assertTrue(w.created)
        self.assertEqual((w.size, w.sha256), (len(data), hashlib.sha256(data).hexdigest()))
        with open(os.path.join(srv.home, "py", "a.bin"), "rb") as f:
            self.assertEqual(f.read(), data, "on disk, byte-exact")

        got = c.read_file("py/a.bin")
        self.assertEqual((got.status, got.data, got.length), (200, data, len(data)))
        self.assertTrue(got.etag)
        part = c.read_file("py/a.bin", range=(10, 19))
        self.assertEqual((part.status, part.data), (206, data[10:20]))
        self.assertEqual(part.content_range, "bytes 10-19/%d" % len(data))
        tail = c.read_file("py/a.bin", range=(len(data) - 3, None))
        self.assertEqual(tail.data, data[-3:])
        same = c.read_file("py/a.bin", if_none_match=got.etag)
        self.assertTrue(same.not_modified)
        self.assertIsNone(same.data)
        buf = io.BytesIO()
        streamed = c.read_file("py/a.bin", to=buf)
        self.assertIsNone(streamed.data)
        self.assertEqual(buf.getvalue(), data)

        st = c.stat("py/a.bin")
        self.assertEqual((st.type, st.size, st.mode), ("file", len(data), "0600"))
        os.symlink("a.bin", os.path.join(srv.home, "py", "link"))
        self.assertEqual(c.stat("py/link").type, "file")
        ln = c.stat("py/link", follow=False)
        self.assertEqual((ln.type, ln.link_target), ("symlink", "a.bin"))
        ls = c.list_dir("py")
        self.assertEqual([e.name for e in ls.entries], ["a.bin", "link"])
        self.assertFalse(ls.truncated)
        self.assertEqual(len(c.list_dir("py", limit=1).entries), 1)

        # A file body is sent as it is read (chunked).
        w2 = c.write_file("py/a.bin", io.BytesIO(b"replaced"), if_match=got.etag)
        self.assertFalse(w2.created)
        self.assertEqual(c.read_file("py/a.bin").data, b"replaced")
        self.assertEqual(c.stat("py/a.bin").mode, "0600", "the replaced file's mode is kept")

    def test_write_preconditions_and_walls(self) -> None:
        c.write_file("pre.txt", "one")
        old = c.read_file("pre.txt").etag
        c.write_file("pre.txt", "two")
        self.assertAPIError(412, "precondition_failed", c.write_file, "pre.txt", "three", if_match=old)
        self.assertAPIError(412, "precondition_failed", c.write_file, "pre.txt", "three", if_none_match="*")
        self.assertEqual(c.read_file("pre.txt").data, b"two", "nothing written by a failed precondition")
        self.assertTrue(c.write_file("fresh.txt", "x", if_none_match="*").created)

        self.assertAPIError(403, "path_not_allowed", c.read_file, "/etc/passwd")
        self.assertAPIError(403, "path_not_allowed", c.write_file, "../outside.txt", "x")
        self.assertAPIError(403, "path_not_allowed", c.stat, srv.state_dir)
        self.assertAPIError(404, "not_found", c.stat, "no/such/file")
        self.assertAPIError(409, "not_a_regular_file", c.read_file, ".")
        self.assertAPIError(404, "not_found", c.write_file, "no/such/dir/f", "x")

    def test_edit_mkdir_move_remove(self) -> None:
        c.write_file("ed/notes.txt", "alpha beta alpha\n", mkdirs=True)
        e = self.assertAPIError(409, "edit_ambiguous", c.edit_file, "ed/notes.txt", "alpha", "gamma")
        self.assertEqual(e.details.get("count"), 2)
        self.assertAPIError(409, "edit_no_match", c.edit_file, "ed/notes.txt", "delta", "x")
        r = c.edit_file("ed/notes.txt", "alpha", "gamma", replace_all=True)
        self.assertEqual(r.replacements, 2)
        self.assertEqual(c.read_file("ed/notes.txt").data, b"gamma beta gamma\n")

        self.assertTrue(c.mkdir("ed/sub/deeper"))
        self.assertFalse(c.mkdir("ed/sub/deeper"), "it exists: made is False")
        self.assertAPIError(409, "already_exists", c.mkdir, "ed/sub/deeper", parents=False)
        c.write_file("ed/other.txt", "o")
        self.assertAPIError(409, "already_exists", c.move, "ed/notes.txt", "ed/other.txt")
        c.move("ed/notes.txt", "ed/sub/notes.txt")
        self.assertEqual(c.read_file("ed/sub/notes.txt").data, b"gamma beta gamma\n")
        c.move("ed/other.txt", "ed/sub/notes.txt", overwrite=True)
        self.assertEqual(c.read_file("ed/sub/notes.txt").data, b"o")
        self.assertAPIError(409, "dir_not_empty", c.remove, "ed/sub")
        self.assertEqual(c.remove("ed", recursive=True), 4)
        self.assertAPIError(404, "not_found", c.stat, "ed")
        self.assertAPIError(400, "invalid_path", c.remove, srv.home, recursive=True)

    def test_archive_with_trailers(self) -> None:
        c.write_file("arch/a.txt", "aaa", mkdirs=True)
        c.write_file("arch/d/b.txt", "bb", mkdirs=True)
        os.symlink("/etc/shadow", os.path.join(srv.home, "arch", "evil"))
        os.mkfifo(os.path.join(srv.home, "arch", "fifo"))
        a = c.archive("arch")
        data = a.read()
        t = a.trailers
        self.assertIsNotNone(t)
        self.assertEqual((t.status, t.files, t.bytes, t.sha256), ("ok", 2, len(data), hashlib.sha256(data).hexdigest()))
        self.assertEqual([(w.kind, w.path) for w in t.warnings], [("not_a_regular_file", "fifo")])
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            names = {m.name: m for m in tf.getmembers()}
            self.assertEqual(tf.extractfile(names["a.txt"]).read(), b"aaa")
            self.assertEqual(tf.extractfile(names["d/b.txt"]).read(), b"bb")
            self.assertTrue(names["evil"].issym(), "a link is stored as a link, never followed")
            self.assertNotIn("fifo", names)

        # A bound is a warning and a truncated status, not an error.
        buf = io.BytesIO()
        t2 = c.archive("arch", max_files=1).save(buf)
        self.assertEqual((t2.status, t2.files), ("truncated", 1))
        self.assertIn("max_files", [w.kind for w in t2.warnings])
        zst = c.archive("arch", format="tar.zst")
        self.assertEqual(zst.read()[:4], b"\x28\xb5\x2f\xfd")
        self.assertEqual(zst.trailers.status, "ok")

        self.assertAPIError(403, "path_not_allowed", c.archive, "/etc")
        self.assertAPIError(400, "invalid_request", c.archive, "arch", format="zip")

    def test_archive_cut_before_its_trailers(self) -> None:
        # The cut falls inside the tar, long before the trailers.
        c.write_file("big/blob.bin", b"\x07" * (2 << 20), mkdirs=True)
        proxy = CuttingProxy(srv.url, [{"cut_after": 300_000}])
        try:
            via = Client(proxy.url, token=srv.token)
            a = via.archive("big")
            with self.assertRaisesRegex(ArchiveError, "cut"):
                a.read()
            self.assertIsNone(a.trailers)
        finally:
            proxy.close()

    def test_watch(self) -> None:
        c.mkdir("watched")
        w = c.watch("watched", read_timeout=30)
        events = iter(w)
        ready = next(events)
        self.assertIsInstance(ready, WatchReady)
        c.write_file("watched/new.txt", "hi")
        seen = []
        for ev in events:
            self.assertIsInstance(ev, WatchChange)
            seen.append((ev.op, os.path.basename(ev.path), ev.kind))
            if seen[-1] == ("create", "new.txt", "file"):
                break
        self.assertIn(("create", "new.txt", "file"), seen, "a PUT's rename shows as the new name's create")
        w.close()
        self.assertAPIError(404, "not_found", lambda: next(iter(c.watch("no-such-dir"))))
        self.assertAPIError(403, "path_not_allowed", c.watch, "/etc")


class Pipes(APITest):
    def test_bytes_through_cat_and_eof(self) -> None:
        r = c.run("exec cat", mode="stdio", stdin="pipe", timeout=0.001)
        self.assertEqual(c.record(r.job_id).raw["stdin"], "pipe")
        data = bytes(range(256))
        c.input(r.job_id, data=data, timeout=0)
        w = c.input(r.job_id, eof=True, offset=0, timeout=30)
        done = w if w.done else wait_done(r.job_id)
        self.assertEqual((done.status, done.exit_code), ("exited", 0))
        got, _ = c.stream(r.job_id).collect()
        self.assertEqual(got, data, "byte-exact, nothing added")
        self.assertAPIError(409, "job_not_running", c.input, r.job_id, "late")

    def test_backpressure_says_what_was_taken(self) -> None:
        # The job never reads: the pipe (64 KiB) fills, the rest waits.
        r = started(pipe=True)
        big = b"x" * (1 << 20)
        with self.assertRaises(InputBackpressureError) as cm:
            c.input(r.job_id, data=big, eof=True, timeout=1)
        e = cm.exception
        self.assertEqual((e.status, e.code), (409, "input_backpressure"))
        self.assertTrue(0 < e.taken < len(big), e.taken)
        self.assertEqual(e.details["taken"], e.taken)
        self.assertEqual(c.record(r.job_id).raw["stdin"], "pipe", "eof was not applied")
        c.terminate(r.job_id, 0)

    def test_stdin_closed_and_pty_refusal(self) -> None:
        r = started(pipe=True)
        c.input(r.job_id, eof=True, timeout=0)
        self.assertAPIError(409, "stdin_closed", c.input, r.job_id, "more")
        c.terminate(r.job_id, 0)
        self.assertAPIError(422, "validation_error", c.run, "true", stdin="pipe")
        plain = started()
        self.assertAPIError(409, "input_unsupported", c.input, plain.job_id, data=b"x")
        c.terminate(plain.job_id, 0)


class Egress(APITest):
    CRED = {
        "provider": "github",
        "name": "token",
        "value": "ghp_py_client_test_value",
        "inject": {"type": "http-header", "config": {"name": "Authorization", "expr": "Bearer {{.Value}}", "domains": ["api.github.com"]}},
    }

    def test_prepare_run_unprepare(self) -> None:
        self.assertEqual(c.prepare("py-s1", [self.CRED]), 1)
        self.assertEqual(c.prepare("py-s1", [self.CRED]), 1, "a second PUT replaces")
        r = c.run("echo $SECRET_GITHUB_TOKEN", mode="stdio", timeout=30, session_id="py-s1")
        self.assertEqual(r.output, "__secret:github/token__\n", "the job holds the placeholder only")
        rec = c.record(r.job_id).raw
        self.assertEqual(rec["egress"]["credentials"], [{"provider": "github", "name": "token"}])
        self.assertNotIn(self.CRED["value"], json.dumps(rec))
        self.assertEqual(c.unprepare("py-s1"), 1)
        self.assertAPIError(404, "not_found", c.unprepare, "py-s1")

    def test_prepare_refusals(self) -> None:
        self.assertAPIError(422, "validation_error", c.prepare, "bad id!", [self.CRED])
        self.assertAPIError(400, "invalid_request", c.prepare, "py-s2", [])
        bad = dict(self.CRED, inject={"type": "http-header", "config": {"name": "Host", "domains": ["x.example"]}})
        self.assertAPIError(422, "validation_error", c.prepare, "py-s2", [bad])


def lsp_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def lsp_read(buf: bytearray) -> "bytes | None":
    """Takes one Content-Length framed message off the front of buf."""
    head_end = buf.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    n = int(bytes(buf[:head_end]).split(b":")[1])
    if len(buf) < head_end + 4 + n:
        return None
    body = bytes(buf[head_end + 4 : head_end + 4 + n])
    del buf[: head_end + 4 + n]
    return body


class Attach(APITest):
    def test_language_server_like_round_trip_over_a_pipe(self) -> None:
        # cat stands in for a language server: what goes in framed comes
        # back framed, byte for byte, whatever the WebSocket messages'
        # boundaries; one body is not UTF-8 at all.
        r = c.run("exec cat", mode="stdio", stdin="pipe", timeout=0.001)
        bodies = [
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"rootUri": "file:///w"}}).encode(),
            json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"text": "é ✓ 𝄞"}}).encode(),
            bytes(range(256)) * 3,
            b"\xff\xfe\x00\x80" * 70000,  # 280 000 bytes: several output messages
        ]
        with c.attach(r.job_id, offset=0, frame_size=4096) as conn:
            sender = threading.Thread(target=lambda: [conn.send(lsp_frame(b)) for b in bodies])
            sender.start()
            buf = bytearray()
            got = []
            for m in conn:
                self.assertIsInstance(m, AttachOutput, m)
                buf += m.data
                while True:
                    body = lsp_read(buf)
                    if body is None:
                        break
                    got.append(body)
                if len(got) == len(bodies):
                    break
            sender.join()
            self.assertEqual(got, bodies)
            conn.eof()
            rest = list(conn)
        self.assertEqual(len(rest), 1, rest)
        ex = rest[0]
        self.assertIsInstance(ex, AttachExit)
        self.assertEqual((ex.status, ex.exit_code), ("exited", 0))
        self.assertEqual(ex.offset, sum(len(lsp_frame(b)) for b in bodies))

    def test_pty_job_resize_and_token_in_subprotocol(self) -> None:
        r = c.run('read line; echo "got $line"; stty size; read x', timeout=0.001, terminal=(80, 24))
        with c.attach(r.job_id, token_in_subprotocol=True) as conn:
            first = conn.recv()
            self.assertIsInstance(first, AttachRedraw)
            conn.resize(100, 30)
            conn.send("hello\r")
            out = b""
            for m in conn:
                if isinstance(m, AttachOutput):
                    out += m.data
                if b"30 100" in out:
                    break
            self.assertIn(b"got hello", out)
            conn.send("\r")
            self.assertIsInstance(list(conn)[-1], AttachExit)

    def test_refusals(self) -> None:
        self.assertAPIError(404, "job_not_found", c.attach, "no-such-job")
        plain = started()
        self.assertAPIError(409, "input_unsupported", c.attach, plain.job_id)
        c.terminate(plain.job_id, 0)
        bad = Client(srv.url, token="wrong")
        self.assertAPIError(401, _unauthorized(), bad.attach, plain.job_id)


def _unauthorized() -> str:
    # The code of a 401, as the server names it (asked once, not assumed).
    try:
        Client(srv.url, token="wrong").list()
    except ShellctlError as e:
        return e.code
    raise AssertionError("a wrong token was accepted")


if __name__ == "__main__":
    unittest.main()
