"""The two file routes that are not one JSON answer: the archive (a
chunked stream whose trailers say whether it succeeded) and the watch (an
event stream of changes). docs/files.md."""

from __future__ import annotations

import hashlib
import json
import socket
from typing import IO, Iterator, Optional, Union

from . import rawhttp
from .models import ArchiveTrailers, ArchiveWarning, WatchChange, WatchOverflow, WatchReady
from .stream import _events

WatchEvent = Union[WatchReady, WatchChange, WatchOverflow]


class ArchiveError(ConnectionError):
    """The archive stream failed: cut before its trailers, or its bytes are
    not what the trailers say. What was read of it must not be used."""


class Archive:
    """GET /v1/files/archive as it streams. Iterate it for the bytes (or
    ``save`` / ``read``); once the last byte is read, ``trailers`` holds
    the trailers, checked against the stream (its size and SHA-256). A
    stream cut before them raises ArchiveError."""

    def __init__(self, resp: rawhttp.RawResponse):
        self._resp = resp
        self.content_type = resp.headers.get("content-type", "")
        self.trailers: Optional[ArchiveTrailers] = None
        self._used = False

    def __iter__(self) -> Iterator[bytes]:
        if self._used:
            raise RuntimeError("an archive is read once")
        self._used = True
        body = rawhttp.ChunkedBody(self._resp.rfile)
        h = hashlib.sha256()
        n = 0
        try:
            try:
                for chunk in body:
                    h.update(chunk)
                    n += len(chunk)
                    yield chunk
            except (OSError, ConnectionError) as e:
                raise ArchiveError(f"archive: the stream was cut after {n} bytes, before its trailers: {e}") from e
            self.trailers = _check(body.trailers, n, h.hexdigest())
        finally:
            self._resp.close()

    def save(self, to: IO[bytes]) -> ArchiveTrailers:
        """Writes the stream to a file as it comes; returns the trailers."""
        for chunk in self:
            to.write(chunk)
        assert self.trailers is not None
        return self.trailers

    def read(self) -> bytes:
        """The whole stream, in memory (a small tree's)."""
        return b"".join(self)

    def close(self) -> None:
        self._resp.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check(t: dict, n: int, sha: str) -> ArchiveTrailers:
    status = t.get("x-archive-status")
    if status not in ("ok", "truncated"):
        raise ArchiveError(f"archive: the stream ended without an ok trailer (X-Archive-Status {status!r}): a failure")
    try:
        got = ArchiveTrailers(
            status=status,
            files=int(t.get("x-archive-files", "0")),
            bytes=int(t.get("x-archive-bytes", "-1")),
            sha256=t.get("x-archive-sha256", ""),
            warnings=[ArchiveWarning.from_dict(w) for w in json.loads(t.get("x-archive-warnings") or "[]")],
        )
    except (ValueError, TypeError, KeyError) as e:
        raise ArchiveError(f"archive: its trailers do not parse: {e}") from e
    if got.bytes != n or got.sha256 != sha:
        raise ArchiveError(
            f"archive: the trailers say {got.bytes} bytes with SHA-256 {got.sha256}, "
            f"the stream read was {n} bytes with {sha}"
        )
    return got


class FileWatch:
    """GET /v1/files/watch: iterate it for WatchReady (first), WatchChange
    and WatchOverflow events. It ends when the server ends it; ``close``
    (from another thread too) stops it. A broken connection is not
    resumed: watch again and list the directory (changes in between are
    not reported)."""

    def __init__(self, resp: rawhttp.RawResponse):
        self._resp = resp
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        chunks = iter(rawhttp.ChunkedBody(self._resp.rfile, read_size=64 << 10))
        try:
            for event, _id, data in _events(lambda: next(chunks, b"")):
                d = json.loads(data) if data else {}
                if event == "ready":
                    yield WatchReady(path=d.get("path", ""), dirs=d.get("dirs", 0))
                elif event == "change":
                    yield WatchChange(op=d["op"], path=d["path"], kind=d.get("type", ""))
                elif event == "overflow":
                    yield WatchOverflow(path=d.get("path", ""))
        except (OSError, ValueError):
            if not self._closed:
                raise
        finally:
            self.close()

    def close(self) -> None:
        """Ends the watch; a read blocked in another thread returns."""
        if self._closed:
            return
        self._closed = True
        try:
            self._resp.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._resp.close()

    def __enter__(self) -> "FileWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
