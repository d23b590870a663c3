"""The shellctl client: one method per route of the API (docs/api.md),
standard library only (http.client), so it installs in any sandbox."""

from __future__ import annotations

import base64
import http.client
import json
import time
import uuid
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from . import rawhttp
from .attach import SUBPROTOCOL, AttachConnection
from .errors import ShellctlError
from .files import Archive, FileWatch
from .models import (
    FileContent,
    FileEdited,
    FileList,
    FileStat,
    FileWritten,
    Info,
    JobInfo,
    JobResult,
    JobStatus,
    Record,
    RestoreResult,
    Screen,
)
from .stream import JobStream
from .websocket import WebSocket

Body = Union[None, bytes, IO[bytes], Mapping[str, Any]]


class Answer:
    """A raw answer: status, headers (lower-case names) and body."""

    def __init__(self, status: int, headers: Dict[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


class Client:
    """A client of one shellctl server.

    ``timeout`` bounds each request's socket reads, in seconds; a request
    that waits on the server (run, wait, input with a ``timeout``) gets that
    wait added to it.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 60.0):
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base_url!r}: want http://host:port (or https://)")
        self.base_url = base_url.rstrip("/")
        self._scheme = u.scheme
        self._netloc = u.netloc
        self._prefix = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout

    # --- the transport ---

    def _conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        return cls(self._netloc, timeout=timeout)

    def _open(
        self,
        method: str,
        path: str,
        body: Body = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        h: Dict[str, str] = {}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        data: Any = None
        if isinstance(body, Mapping):
            data = json.dumps(body).encode("utf-8")
            h["Content-Type"] = "application/json"
        elif body is not None:
            data = body
            h["Content-Type"] = "application/octet-stream"
            if not isinstance(body, (bytes, bytearray)):
                # A file: sent in chunks as it is read, never whole in memory.
                h["Transfer-Encoding"] = "chunked"
        h.update(headers or {})
        conn = self._conn(self.timeout if timeout is None else timeout)
        try:
            conn.request(
                method,
                self._prefix + path,
                body=data,
                headers=h,
                encode_chunked=data is not None and not isinstance(data, (bytes, bytearray)),
            )
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def request(
        self,
        method: str,
        path: str,
        body: Body = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
    ) -> Answer:
        """Sends one request to any route (including ones this class has no
        method for yet) and returns the answer; a status other than 2xx
        raises ShellctlError."""
        conn, resp = self._open(method, path, body, headers, timeout)
        try:
            raw = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()
        if not 200 <= resp.status < 300:
            raise ShellctlError.from_answer(resp.status, raw, hdrs.get("x-request-id"))
        return Answer(resp.status, hdrs, raw)

    def _json(self, method: str, path: str, body: Body = None, **kw: Any) -> Any:
        return self.request(method, path, body, **kw).json()

    @staticmethod
    def _window(a: Answer, **more: Any) -> JobResult:
        iw = a.headers.get("x-shellctl-input-wait")
        return JobResult.from_dict(
            a.json(),
            input_wait=None if iw is None else iw == "1",
            replayed=a.headers.get("x-shellctl-idempotent-replay") == "true",
            **more,
        )

    def _wait_timeout(self, seconds: Optional[float]) -> float:
        return self.timeout + (seconds or 0) + (30 if seconds is None or seconds <= 0 else 0)

    # --- the compatible job routes ---

    def run(
        self,
        script: str,
        *,
        mode: Optional[str] = None,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        terminal: Optional[Tuple[int, int]] = None,
        session_id: Optional[str] = None,
        timeout: Optional[float] = None,
        output_limit: Optional[int] = None,
        idle_flush_seconds: Optional[float] = None,
        return_on_input_wait: Optional[bool] = None,
        idempotency_key: Optional[str] = None,
        stdin: Optional[str] = None,
        extra: Optional[Mapping[str, Any]] = None,
    ) -> JobResult:
        """POST /v1/jobs/run: starts a job and answers its first window.

        ``timeout`` is how long this request waits for output (unset or 0:
        the server's 30 s; a small one such as 0.001 answers at once).
        ``terminal`` is (cols, rows). ``stdin="pipe"`` (stdio jobs) gives
        the job a stdin pipe that input() and attach() write. ``extra``
        adds fields this client does not name yet."""
        body: Dict[str, Any] = {"script": script}
        for k, v in (
            ("mode", mode),
            ("cwd", cwd),
            ("env", dict(env) if env is not None else None),
            ("terminal", {"cols": terminal[0], "rows": terminal[1]} if terminal else None),
            ("session_id", session_id),
            ("timeout", timeout),
            ("output_limit", output_limit),
            ("idle_flush_seconds", idle_flush_seconds),
            ("return_on_input_wait", return_on_input_wait),
            ("stdin", stdin),
        ):
            if v is not None:
                body[k] = v
        body.update(extra or {})
        h = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        a = self.request("POST", "/v1/jobs/run", body, h, timeout=self._wait_timeout(timeout))
        return self._window(a, idempotency_key=idempotency_key)

    def run_idempotent(self, script: str, *, key: Optional[str] = None, retries: int = 3, **kw: Any) -> JobResult:
        """An idempotent run: run() with an Idempotency-Key (a fresh UUID by
        default), sent again with the same key when the answer is lost to a
        network fault, so the job starts once however many times the request
        went out. The key is in the answer's ``idempotency_key``."""
        key = key or str(uuid.uuid4())
        for attempt in range(retries + 1):
            try:
                return self.run(script, idempotency_key=key, **kw)
            except (OSError, http.client.HTTPException):
                if attempt >= retries:
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    def wait(
        self,
        job_id: str,
        offset: int = 0,
        *,
        timeout: Optional[float] = None,
        output_limit: Optional[int] = None,
        idle_flush_seconds: Optional[float] = None,
        return_on_input_wait: Optional[bool] = None,
    ) -> JobResult:
        """POST /v1/jobs/{id}/wait: output past ``offset``, or the job's end,
        within ``timeout`` seconds (0 or unset: look once)."""
        body = _drop_none(
            offset=offset,
            timeout=timeout,
            output_limit=output_limit,
            idle_flush_seconds=idle_flush_seconds,
            return_on_input_wait=return_on_input_wait,
        )
        return self._window(self.request("POST", _job(job_id, "/wait"), body, timeout=self._wait_timeout(timeout)))

    def input(
        self,
        job_id: str,
        text: Optional[str] = None,
        offset: int = 0,
        *,
        data: Optional[bytes] = None,
        eof: Optional[bool] = None,
        write_timeout: Optional[float] = None,
        timeout: Optional[float] = None,
        output_limit: Optional[int] = None,
        idle_flush_seconds: Optional[float] = None,
        return_on_input_wait: Optional[bool] = None,
        idempotency_key: Optional[str] = None,
    ) -> JobResult:
        """POST /v1/jobs/{id}/input: types ``text`` on a pty job's terminal,
        or writes it to a stdio job's stdin pipe (run with stdin="pipe"),
        then waits as wait() does. ``data`` sends any bytes instead of
        text (as base64); ``eof`` closes the pipe after them (or alone).
        A job that does not read its pipe within ``timeout`` (or
        ``write_timeout``) raises InputBackpressureError, whose ``taken``
        says how many of the bytes were written."""
        body = _drop_none(
            text=text,
            base64=base64.b64encode(data).decode("ascii") if data is not None else None,
            eof=eof,
            write_timeout=write_timeout,
            offset=offset,
            timeout=timeout,
            output_limit=output_limit,
            idle_flush_seconds=idle_flush_seconds,
            return_on_input_wait=return_on_input_wait,
        )
        h = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        wait = self._wait_timeout(timeout) + max(write_timeout or 0, 0)
        a = self.request("POST", _job(job_id, "/input"), body, h, timeout=wait)
        return self._window(a, idempotency_key=idempotency_key)

    def tail(self, job_id: str, output_limit: Optional[int] = None) -> JobResult:
        """GET /v1/jobs/{id}/log/tail: the last bytes of the output."""
        return self._window(self.request("GET", _job(job_id, "/log/tail") + _query(output_limit=output_limit)))

    def status(self, job_id: str) -> JobStatus:
        """GET /v1/jobs/{id}"""
        return JobStatus.from_dict(self._json("GET", _job(job_id)))

    def list(self, status: Optional[str] = None, limit: Optional[int] = None) -> List[JobInfo]:
        """GET /v1/jobs: newest first."""
        d = self._json("GET", "/v1/jobs" + _query(status=status, limit=limit))
        return [JobInfo.from_dict(j) for j in d["jobs"]]

    def terminate(self, job_id: str, grace_seconds: Optional[float] = None) -> JobStatus:
        """POST /v1/jobs/{id}/terminate: SIGTERM, then SIGKILL after the grace."""
        body = {"grace_seconds": grace_seconds} if grace_seconds is not None else None
        return JobStatus.from_dict(self._json("POST", _job(job_id, "/terminate"), body))

    def delete(self, job_id: str, force: bool = False, grace_seconds: Optional[float] = None) -> None:
        """DELETE /v1/jobs/{id}: removes the job's row and directory (force: ends it first)."""
        self.request("DELETE", _job(job_id) + _query(force="true" if force else None, grace_seconds=grace_seconds))

    # --- the extended job routes ---

    def record(self, job_id: str) -> Record:
        """GET /v1/jobs/{id}/record: everything known about a job."""
        return Record.from_dict(self._json("GET", _job(job_id, "/record")))

    def stderr(self, job_id: str, offset: int = 0, output_limit: Optional[int] = None) -> JobResult:
        """GET /v1/jobs/{id}/stderr: a window of a stdio job's stderr."""
        return self._window(self.request("GET", _job(job_id, "/stderr") + _query(offset=offset, output_limit=output_limit)))

    def signal(self, job_id: str, signal: Union[str, int], target: Optional[str] = None) -> Record:
        """POST /v1/jobs/{id}/signal: "INT", "SIGTERM" or 9 to the foreground, group or tree."""
        return Record.from_dict(self._json("POST", _job(job_id, "/signal"), _drop_none(signal=signal, target=target)))

    def resize(self, job_id: str, cols: int, rows: int) -> Record:
        """POST /v1/jobs/{id}/resize: sets a pty job's terminal size."""
        return Record.from_dict(self._json("POST", _job(job_id, "/resize"), {"cols": cols, "rows": rows}))

    def screen(self, job_id: str, scrollback: Optional[int] = None) -> Screen:
        """GET /v1/jobs/{id}/screen: what a pty job's terminal shows now."""
        return Screen.from_dict(self._json("GET", _job(job_id, "/screen") + _query(scrollback=scrollback)))

    def keys(
        self,
        job_id: str,
        keys: Sequence[str],
        *,
        quiet_ms: Optional[int] = None,
        timeout_ms: Optional[int] = None,
        scrollback: Optional[int] = None,
    ) -> Screen:
        """POST /v1/jobs/{id}/keys: types keys ("Escape", ":wq", "Enter",
        "C-c") and answers the screen once the program settled."""
        body = _drop_none(keys=list(keys), quiet_ms=quiet_ms, timeout_ms=timeout_ms, scrollback=scrollback)
        wait = (timeout_ms or 3000) / 1000
        return Screen.from_dict(self._json("POST", _job(job_id, "/keys"), body, timeout=self.timeout + wait))

    def stream(
        self,
        job_id: str,
        offset: int = 0,
        channel: Optional[str] = None,
        give_up: float = 60.0,
        on_reconnect: Optional[Callable[[int, BaseException], None]] = None,
        read_timeout: float = 45.0,
    ) -> JobStream:
        """GET /v1/jobs/{id}/stream: the job's output as events, byte-exact,
        reconnecting with Last-Event-ID after a broken connection (for up to
        ``give_up`` seconds). A connection silent for ``read_timeout`` (the
        server sends a keep-alive every 15 s) counts as broken."""

        def connect(last_event_id: Optional[int]) -> Tuple[Callable[[], bytes], Callable[[], None]]:
            q = _query(offset=offset or None if last_event_id is None else None, channel=channel)
            h = {"Accept": "text/event-stream"}
            if last_event_id is not None:
                h["Last-Event-ID"] = str(last_event_id)
            conn, resp = self._open("GET", _job(job_id, "/stream") + q, None, h, timeout=read_timeout)
            if resp.status != 200:
                try:
                    raw = resp.read()
                finally:
                    conn.close()
                raise ShellctlError.from_answer(resp.status, raw, resp.getheader("X-Request-Id"))
            return (lambda: resp.read1(65536)), conn.close

        return JobStream(connect, offset=offset, give_up=give_up, on_reconnect=on_reconnect)

    def attach(
        self,
        job_id: str,
        *,
        offset: Optional[int] = None,
        raw_offset: Optional[int] = None,
        token_in_subprotocol: bool = False,
        frame_size: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> AttachConnection:
        """GET /v1/jobs/{id}/attach: a WebSocket to a pty job, or a stdio
        job run with stdin="pipe" (docs/attach.md). ``offset``: output.log
        from that byte (a stdio job's stdout; default the current end);
        ``raw_offset``: a pty job's raw terminal bytes from there (a
        reconnect). The token goes in the Authorization header, or with
        ``token_in_subprotocol`` as the subprotocol entry bearer.<token>,
        as a browser sends it. A refusal (404 job_not_found, 409
        input_unsupported …) raises ShellctlError."""
        protos = [SUBPROTOCOL]
        headers: Dict[str, str] = {}
        if self.token:
            if token_in_subprotocol:
                protos.append("bearer." + self.token)
            else:
                headers["Authorization"] = f"Bearer {self.token}"
        target = self._prefix + _job(job_id, "/attach") + _query(offset=offset, raw_offset=raw_offset)
        ws = WebSocket.connect(
            self._scheme, self._netloc, target, protos, headers, timeout=self.timeout if timeout is None else timeout
        )
        if ws.subprotocol != SUBPROTOCOL:
            ws.close()
            raise ConnectionError(f"attach: the server answered the subprotocol {ws.subprotocol!r}, not {SUBPROTOCOL}")
        return AttachConnection(ws, frame_size=frame_size)

    # --- files (docs/files.md) ---

    def stat(self, path: str, follow: bool = True) -> FileStat:
        """GET /v1/files/stat: what a path is (follow=False: a link itself)."""
        return FileStat.from_dict(self._json("GET", "/v1/files/stat" + _query(path=path, follow=_bool(follow, True))))

    def list_dir(self, path: str, limit: Optional[int] = None, hidden: bool = True) -> FileList:
        """GET /v1/files/list: a directory's entries, sorted by name, links not followed."""
        return FileList.from_dict(
            self._json("GET", "/v1/files/list" + _query(path=path, limit=limit, hidden=_bool(hidden, True)))
        )

    def read_file(
        self,
        path: str,
        *,
        range: Optional[Tuple[int, Optional[int]]] = None,
        if_none_match: Optional[str] = None,
        to: Optional[IO[bytes]] = None,
    ) -> FileContent:
        """GET /v1/files/content: a regular file's bytes. ``range`` is
        (first, last) byte, both included (last None: to the end): 206 with
        those bytes. ``if_none_match`` an ETag: 304, no data, when the file
        is still that version. With ``to``, the bytes are written there as
        they arrive (``data`` None)."""
        h: Dict[str, str] = {}
        if range is not None:
            h["Range"] = "bytes=%d-%s" % (range[0], "" if range[1] is None else range[1])
        if if_none_match is not None:
            h["If-None-Match"] = if_none_match
        conn, resp = self._open("GET", "/v1/files/content" + _query(path=path), None, h)
        try:
            if resp.status not in (200, 206, 304):
                raise ShellctlError.from_answer(resp.status, resp.read(), resp.getheader("X-Request-Id"))
            data: Optional[bytes] = None
            if resp.status == 304:
                resp.read()
            elif to is None:
                data = resp.read()
            else:
                while True:
                    b = resp.read1(1 << 16)
                    if not b:
                        break
                    to.write(b)
            n = resp.getheader("Content-Length")
            return FileContent(
                status=resp.status,
                etag=resp.getheader("ETag"),
                length=int(n) if n is not None else None,
                content_range=resp.getheader("Content-Range"),
                data=data,
            )
        finally:
            conn.close()

    def write_file(
        self,
        path: str,
        data: Union[bytes, str, IO[bytes]],
        *,
        mode: Union[None, int, str] = None,
        mkdirs: bool = False,
        if_match: Optional[str] = None,
        if_none_match: Optional[str] = None,
    ) -> FileWritten:
        """PUT /v1/files/content: writes the file atomically (a reader sees
        the old file or the new one). ``data``: bytes, text (UTF-8) or a
        file, sent as it is read. ``mode``: 0o644 or "0644" (default: the
        replaced file's, else 0644). ``if_match`` an ETag: only over that
        version; ``if_none_match="*"``: only if it does not exist (else
        ShellctlError 412 precondition_failed)."""
        body: Body = data.encode("utf-8") if isinstance(data, str) else data
        if isinstance(mode, int):
            mode = "%04o" % mode
        h: Dict[str, str] = {}
        if if_match is not None:
            h["If-Match"] = if_match
        if if_none_match is not None:
            h["If-None-Match"] = if_none_match
        q = _query(path=path, mode=mode, mkdirs="true" if mkdirs else None)
        a = self.request("PUT", "/v1/files/content" + q, body, h)
        return FileWritten.from_dict(a.json(), created=a.status == 201)

    def edit_file(self, path: str, old_text: str, new_text: str, replace_all: bool = False) -> FileEdited:
        """POST /v1/files/edit: replaces exact text in a UTF-8 file (409
        edit_no_match; edit_ambiguous with ``details["count"]``)."""
        body = {"path": path, "old_text": old_text, "new_text": new_text, "replace_all": replace_all}
        return FileEdited.from_dict(self._json("POST", "/v1/files/edit", body))

    def mkdir(self, path: str, parents: bool = True, mode: Union[None, int, str] = None) -> bool:
        """POST /v1/files/mkdir: True when it was made, False when it existed (parents)."""
        if isinstance(mode, int):
            mode = "%04o" % mode
        return bool(self._json("POST", "/v1/files/mkdir", _drop_none(path=path, parents=parents, mode=mode))["created"])

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        """POST /v1/files/move: renames, never replacing ``dst`` unless ``overwrite``."""
        self.request("POST", "/v1/files/move", {"from": src, "to": dst, "overwrite": overwrite})

    def remove(self, path: str, recursive: bool = False) -> int:
        """DELETE /v1/files: a file, a link, an empty directory, or with
        ``recursive`` a tree; returns how many entries were removed."""
        q = _query(path=path, recursive="true" if recursive else None)
        return int(self._json("DELETE", "/v1/files" + q)["removed"])

    def archive(
        self,
        path: str,
        format: str = "tar",
        *,
        max_files: Optional[int] = None,
        max_file_bytes: Optional[int] = None,
        max_bytes: Optional[int] = None,
        max_entries_visited: Optional[int] = None,
    ) -> Archive:
        """GET /v1/files/archive: a directory as tar (or tar.zst) as it
        streams; its trailers (status, warnings) are read at its end and
        checked against the bytes."""
        q = _query(
            path=path,
            format=format,
            max_files=max_files,
            max_file_bytes=max_file_bytes,
            max_bytes=max_bytes,
            max_entries_visited=max_entries_visited,
        )
        return Archive(self._raw("GET", "/v1/files/archive" + q, {"TE": "trailers"}, self.timeout))

    def watch(self, path: str, recursive: bool = True, read_timeout: Optional[float] = None) -> FileWatch:
        """GET /v1/files/watch: changes beneath a directory as events
        (the server sends no keep-alive: ``read_timeout`` None waits for as
        long as nothing changes)."""
        q = _query(path=path, recursive=_bool(recursive, True))
        resp = self._raw("GET", "/v1/files/watch" + q, {"Accept": "text/event-stream"}, self.timeout)
        resp.sock.settimeout(read_timeout)
        return FileWatch(resp)

    def _raw(self, method: str, path: str, headers: Mapping[str, str], timeout: Optional[float]) -> rawhttp.RawResponse:
        h = dict(headers)
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        resp = rawhttp.request(self._scheme, self._netloc, method, self._prefix + path, h, timeout)
        if resp.status != 200:
            try:
                raise ShellctlError.from_answer(resp.status, resp.read_body(), resp.headers.get("x-request-id"))
            finally:
                resp.close()
        return resp

    # --- egress credentials (docs/egress.md) ---

    def prepare(self, session_id: str, credentials: Sequence[Mapping[str, Any]]) -> int:
        """PUT /v1/prepare: registers (replaces) a session's credentials
        with the egress proxy; returns how many. Jobs run with
        ``session_id`` hold placeholders only (needs serve --egress-proxy:
        else 409 egressproxy_disabled)."""
        body = {"session_id": session_id, "credentials": [dict(c) for c in credentials]}
        return int(self._json("PUT", "/v1/prepare", body)["registered"])

    def unprepare(self, session_id: str) -> int:
        """DELETE /v1/prepare/{session_id}: drops them; how many (404 not_found: none were)."""
        return int(self._json("DELETE", "/v1/prepare/" + quote(session_id, safe=""))["removed"])

    # --- the server ---

    def health(self) -> Dict[str, Any]:
        """GET /healthz"""
        return self._json("GET", "/healthz")

    def info(self) -> Info:
        """GET /v1/info: version, kernel, Landlock, cgroup, policy and limits."""
        return Info.from_dict(self._json("GET", "/v1/info"))

    def openapi(self) -> Dict[str, Any]:
        """GET /v1/openapi.json: the OpenAPI document the server serves."""
        return self._json("GET", "/v1/openapi.json")

    def metrics(self) -> str:
        """GET /metrics: Prometheus text."""
        return self.request("GET", "/metrics").body.decode("utf-8")

    # --- snapshots of Home ---

    def snapshot_save(self, excludes: Optional[Sequence[str]] = None, to: Optional[IO[bytes]] = None) -> Optional[bytes]:
        """POST /v1/snapshot/save: Home as a tar.zst archive. With ``to``,
        the archive is written there as it arrives (and None returned);
        else it is returned as bytes."""
        body = {"excludes": list(excludes)} if excludes is not None else None
        if to is None:
            return self.request("POST", "/v1/snapshot/save", body).body
        conn, resp = self._open("POST", "/v1/snapshot/save", body)
        try:
            if resp.status != 200:
                raise ShellctlError.from_answer(resp.status, resp.read(), resp.getheader("X-Request-Id"))
            while True:
                b = resp.read1(1 << 16)
                if not b:
                    return None
                to.write(b)
        finally:
            conn.close()

    def snapshot_restore(self, archive: Union[bytes, IO[bytes]]) -> RestoreResult:
        """POST /v1/snapshot/restore: writes an archive from snapshot_save
        into Home (bytes, or a file read as it is sent)."""
        return RestoreResult.from_dict(self._json("POST", "/v1/snapshot/restore", archive))


def _job(job_id: str, rest: str = "") -> str:
    return "/v1/jobs/" + quote(job_id, safe="") + rest


def _bool(v: bool, default: bool) -> Optional[str]:
    return None if v == default else ("true" if v else "false")


def _drop_none(**kw: Any) -> Dict[str, Any]:
    return {k: v for k, v in kw.items() if v is not None}


def _query(**kw: Any) -> str:
    q = _drop_none(**kw)
    return "?" + urlencode(q) if q else ""
