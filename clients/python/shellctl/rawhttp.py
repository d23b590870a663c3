"""A request over a plain socket, for the two answers http.client cannot
give whole: an upgrade to a WebSocket (the socket is the connection
afterwards) and a chunked body whose trailers matter (http.client reads
and drops them), the archive's."""

from __future__ import annotations

import socket
import ssl
from typing import IO, Dict, Iterator, Mapping, Optional, Tuple

_MAX_HEAD = 64 << 10


class RawResponse:
    """The head of an answer, and the socket it came on."""

    def __init__(self, sock: socket.socket, rfile: IO[bytes], status: int, reason: str, headers: Dict[str, str]):
        self.sock = sock
        self.rfile = rfile
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case names

    def read_body(self) -> bytes:
        """The rest of a non-chunked body (Content-Length, else to the close)."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            return b"".join(ChunkedBody(self.rfile))
        n = self.headers.get("content-length")
        return self.rfile.read(int(n)) if n is not None else self.rfile.read()

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()


def request(
    scheme: str,
    netloc: str,
    method: str,
    target: str,
    headers: Mapping[str, str],
    timeout: Optional[float],
) -> RawResponse:
    """Sends a request without a body and reads the answer's head. The
    connection is asked to close after the answer, so its end is the
    socket's."""
    host, port = _split(netloc, 443 if scheme == "https" else 80)
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        fields = {"Connection": "close"}
        fields.update(headers)
        head = [f"{method} {target} HTTP/1.1", f"Host: {netloc}"]
        head += [f"{k}: {v}" for k, v in fields.items()]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        rfile = sock.makefile("rb")
        status, reason, hdrs = _read_head(rfile)
        return RawResponse(sock, rfile, status, reason, hdrs)
    except BaseException:
        sock.close()
        raise


def _split(netloc: str, default: int) -> Tuple[str, int]:
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default
    host, sep, port = netloc.rpartition(":")
    if not sep:
        return netloc, default
    return host, int(port)


def _read_line(rfile: IO[bytes], what: str) -> bytes:
    line = rfile.readline(_MAX_HEAD + 1)
    if not line:
        raise ConnectionError(f"the connection closed in the {what}")
    if len(line) > _MAX_HEAD:
        raise ConnectionError(f"a line of the {what} is longer than {_MAX_HEAD} bytes")
    return line


def _read_fields(rfile: IO[bytes], what: str) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    total = 0
    while True:
        line = _read_line(rfile, what)
        total += len(line)
        if total > _MAX_HEAD:
            raise ConnectionError(f"the {what} is longer than {_MAX_HEAD} bytes")
        if line in (b"\r\n", b"\n"):
            return fields
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ConnectionError(f"a line of the {what} is not a header: {line[:80]!r}")
        k = name.strip().lower()
        v = value.strip()
        fields[k] = f"{fields[k]}, {v}" if k in fields else v


def _read_head(rfile: IO[bytes]) -> Tuple[int, str, Dict[str, str]]:
    line = _read_line(rfile, "answer's head").decode("latin-1").rstrip("\r\n")
    parts = line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP answer: {line[:80]!r}")
    return int(parts[1]), parts[2] if len(parts) > 2 else "", _read_fields(rfile, "answer's head")


class ChunkedBody:
    """Iterates the chunks of a chunked body (RFC 9112 §7.1); once it is
    done, ``trailers`` holds the trailer fields (lower-case names) and
    ``complete`` is True. A body cut before its last chunk raises
    ConnectionError."""

    def __init__(self, rfile: IO[bytes], read_size: int = 256 << 10):
        self._rfile = rfile
        self._read_size = read_size
        self.trailers: Dict[str, str] = {}
        self.complete = False

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = _read_line(self._rfile, "chunked body")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ConnectionError(f"a chunk's size is not hexadecimal: {line[:80]!r}") from None
            if size == 0:
                self.trailers = _read_fields(self._rfile, "trailers")
                self.complete = True
                return
            left = size
            while left:
                b = self._rfile.read(min(left, self._read_size))
                if not b:
                    raise ConnectionError(f"the body was cut in a chunk ({left} of its {size} bytes missing)")
                left -= len(b)
                yield b
            if _read_line(self._rfile, "chunked body") not in (b"\r\n", b"\n"):
                raise ConnectionError("a chunk does not end with CRLF")
