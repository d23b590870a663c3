"""A small WebSocket client (RFC 6455) over the standard library's socket,
enough for attach: the opening handshake with subprotocols, masked client
frames, messages in fragments either way, ping answered with pong, and the
closing handshake. No extensions are offered, so none are accepted."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import threading
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from . import rawhttp
from .errors import ShellctlError

# RFC 6455 §1.3: the server proves it read the key by hashing it with this.
_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

# Close codes (RFC 6455 §7.4.1).
NORMAL, GOING_AWAY, PROTOCOL_ERROR, INVALID_DATA, TOO_BIG = 1000, 1001, 1002, 1007, 1009


class WebSocketClosed(Exception):
    """The connection is closed; ``code`` and ``reason`` are the peer's
    close frame's (code None: no close frame, the connection was cut)."""

    def __init__(self, code: Optional[int], reason: str = ""):
        super().__init__(f"websocket closed: {code} {reason!r}")
        self.code = code
        self.reason = reason


class ProtocolError(Exception):
    """The peer broke RFC 6455; the connection was closed with ``code``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _ACCEPT_GUID).digest()).decode("ascii")


def mask(data: bytes, key: bytes) -> bytes:
    """XORs data with the 4-byte key repeated (RFC 6455 §5.3), as one big
    integer operation: fast enough for megabytes without a C extension."""
    n = len(data)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


class WebSocket:
    """One client connection. ``recv`` (from one thread) and the senders
    (from any thread: writes are serialised) may run at once."""

    def __init__(self, resp: rawhttp.RawResponse, subprotocol: Optional[str], max_message: int):
        self._sock = resp.sock
        self._rfile = resp.rfile
        self._resp = resp
        self.subprotocol = subprotocol
        self.max_message = max_message
        self._wlock = threading.Lock()
        self._close_sent = False
        self.close_code: Optional[int] = None
        self.close_reason = ""
        self.closed = False

    @classmethod
    def connect(
        cls,
        scheme: str,
        netloc: str,
        target: str,
        subprotocols: Sequence[str],
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        max_message: int = 64 << 20,
    ) -> "WebSocket":
        """The opening handshake (RFC 6455 §4.1). An answer other than 101
        raises ShellctlError with the API's error envelope; a 101 that does
        not prove the key or picks a subprotocol not offered raises
        ProtocolError."""
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        h: Dict[str, str] = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": key,
            "Sec-WebSocket-Version": "13",
        }
        if subprotocols:
            h["Sec-WebSocket-Protocol"] = ", ".join(subprotocols)
        h.update(headers or {})
        resp = rawhttp.request("http" if scheme in ("http", "ws") else "https", netloc, "GET", target, h, timeout)
        try:
            if resp.status != 101:
                body = resp.read_body()
                raise ShellctlError.from_answer(resp.status, body, resp.headers.get("x-request-id"))
            hd = resp.headers
            if hd.get("upgrade", "").lower() != "websocket" or "upgrade" not in hd.get("connection", "").lower():
                raise ProtocolError(PROTOCOL_ERROR, "the 101 answer does not upgrade to websocket")
            if hd.get("sec-websocket-accept") != accept_key(key):
                raise ProtocolError(PROTOCOL_ERROR, "the 101 answer's Sec-WebSocket-Accept does not match the key sent")
            if hd.get("sec-websocket-extensions"):
                raise ProtocolError(PROTOCOL_ERROR, "the server chose an extension none was offered")
            proto = hd.get("sec-websocket-protocol")
            if proto is not None and proto not in subprotocols:
                raise ProtocolError(PROTOCOL_ERROR, f"the server chose the subprotocol {proto!r}, which was not offered")
            resp.sock.settimeout(None)
            return cls(resp, proto, max_message)
        except BaseException:
            resp.close()
            raise

    # --- sending ---

    def _frame(self, opcode: int, payload: bytes, fin: bool = True) -> bytes:
        # Every client frame is masked with a fresh key (RFC 6455 §5.3).
        n = len(payload)
        b0 = (0x80 if fin else 0) | opcode
        if n < 126:
            head = struct.pack("!BB", b0, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", b0, 0x80 | 127, n)
        key = os.urandom(4)
        return head + key + mask(payload, key)

    def _write(self, data: bytes) -> None:
        with self._wlock:
            if self._close_sent:
                raise WebSocketClosed(self.close_code, self.close_reason)
            self._sock.sendall(data)

    def send(self, data: bytes, text: bool = False, frame_size: Optional[int] = None) -> None:
        """Sends one message; with ``frame_size``, in fragments of at most
        that many bytes (a continuation frame per fragment, §5.4). Blocks
        while the peer does not read (TCP's flow control)."""
        op = OP_TEXT if text else OP_BINARY
        if not frame_size or len(data) <= frame_size:
            self._write(self._frame(op, data))
            return
        # The fragments of one message go out under one hold of the lock:
        # another sender's message cannot come between them.
        with self._wlock:
            if self._close_sent:
                raise WebSocketClosed(self.close_code, self.close_reason)
            for at in range(0, len(data), frame_size):
                last = at + frame_size >= len(data)
                self._sock.sendall(self._frame(op if at == 0 else OP_CONT, data[at : at + frame_size], fin=last))

    def ping(self, payload: bytes = b"") -> None:
        self._write(self._frame(OP_PING, payload))

    def close(self, code: int = NORMAL, reason: str = "", wait: float = 5.0) -> None:
        """The closing handshake: sends a close frame, then waits (at most
        ``wait`` seconds) for the peer's and closes the socket."""
        self._send_close(code, reason)
        if not self.closed:
            try:
                self._sock.settimeout(wait)
                while True:
                    self.recv()
            except (WebSocketClosed, ProtocolError, OSError):
                pass
        self._shutdown()

    def _send_close(self, code: Optional[int], reason: str = "") -> None:
        with self._wlock:
            if self._close_sent:
                return
            self._close_sent = True
            payload = b"" if code is None else struct.pack("!H", code) + reason.encode("utf-8")[:123]
            try:
                self._sock.sendall(self._frame(OP_CLOSE, payload))
            except OSError:
                pass

    def _shutdown(self) -> None:
        self.closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._resp.close()

    # --- receiving ---

    def _read(self, n: int) -> bytes:
        b = self._rfile.read(n)
        if b is None or len(b) < n:
            raise WebSocketClosed(None, "the connection was cut")
        return b

    def _fail(self, code: int, message: str) -> "ProtocolError":
        self._send_close(code, message[:100])
        self._shutdown()
        return ProtocolError(code, message)

    def _read_frame(self) -> Tuple[bool, int, bytes]:
        b0, b1 = self._read(2)
        fin, rsv, opcode = bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F
        if rsv:
            raise self._fail(PROTOCOL_ERROR, "a frame has reserved bits set and no extension was agreed")
        if b1 & 0x80:
            raise self._fail(PROTOCOL_ERROR, "a frame from the server is masked")
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._read(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read(8))
        if opcode >= 0x8:
            if not fin or n > 125:
                raise self._fail(PROTOCOL_ERROR, "a control frame is fragmented or longer than 125 bytes")
        elif n > self.max_message:
            raise self._fail(TOO_BIG, f"a frame of {n} bytes is over the {self.max_message} allowed")
        return fin, opcode, self._read(n) if n else b""

    def recv(self) -> Tuple[int, bytes]:
        """The next message: (OP_TEXT or OP_BINARY, its payload), its
        fragments put together. Pings are answered, pongs dropped. A close
        frame is answered with one (§5.5.1) and raises WebSocketClosed."""
        if self.closed:
            raise WebSocketClosed(self.close_code, self.close_reason)
        parts: List[bytes] = []
        size = 0
        first = -1
        while True:
            try:
                fin, op, payload = self._read_frame()
            except WebSocketClosed:
                self._shutdown()
                raise
            if op == OP_PING:
                try:
                    self._write(self._frame(OP_PONG, payload))
                except (OSError, WebSocketClosed):
                    pass
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                self._on_close(payload)
                raise WebSocketClosed(self.close_code, self.close_reason)
            if op == OP_CONT:
                if first < 0:
                    raise self._fail(PROTOCOL_ERROR, "a continuation frame without a message to continue")
            elif op in (OP_TEXT, OP_BINARY):
                if first >= 0:
                    raise self._fail(PROTOCOL_ERROR, "a new message began before the last one's final fragment")
                first = op
            else:
                raise self._fail(PROTOCOL_ERROR, f"a frame of unknown opcode {op:#x}")
            size += len(payload)
            if size > self.max_message:
                raise self._fail(TOO_BIG, f"a message over the {self.max_message} bytes allowed")
            parts.append(payload)
            if fin:
                data = b"".join(parts)
                if first == OP_TEXT:
                    try:
                        data.decode("utf-8")
                    except UnicodeDecodeError:
                        raise self._fail(INVALID_DATA, "a text message is not UTF-8") from None
                return first, data

    def _on_close(self, payload: bytes) -> None:
        if len(payload) >= 2:
            (self.close_code,) = struct.unpack("!H", payload[:2])
            self.close_reason = payload[2:].decode("utf-8", "replace")
        else:
            self.close_code = 1005  # no status code in the frame (§7.1.5)
        # Answer with the code received, then the server closes TCP first.
        self._send_close(self.close_code if self.close_code != 1005 else None)
        self._shutdown()
