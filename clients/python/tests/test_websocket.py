"""The RFC 6455 client against a scripted peer written here from the RFC's
rules (not the shellctl server, whose WebSocket library sends neither
fragments nor pings on its own): what the client must do with fragments,
a ping between them, a close, a bad handshake and a masked server frame."""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading
import unittest
from typing import Callable, List, Tuple

from shellctl import ShellctlError
from shellctl.websocket import OP_BINARY, OP_TEXT, ProtocolError, WebSocket, WebSocketClosed, accept_key, mask

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(op: int, payload: bytes, fin: bool = True, masked: bool = False) -> bytes:
    b0 = (0x80 if fin else 0) | op
    n = len(payload)
    mbit = 0x80 if masked else 0
    if n < 126:
        head = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    if masked:
        key = b"\x01\x02\x03\x04"
        return head + key + mask(payload, key)
    return head + payload


def read_frame(f) -> Tuple[bool, int, bytes, bool]:
    b0, b1 = f.read(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", f.read(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", f.read(8))
    masked = bool(b1 & 0x80)
    key = f.read(4) if masked else b""
    data = f.read(n)
    return bool(b0 & 0x80), b0 & 0x0F, mask(data, key) if masked else data, masked


class Peer:
    """Accepts one connection, answers the handshake (or not), then runs
    script(conn_file, sock)."""

    def __init__(self, script: Callable, accept: str = "", status: str = "101 Switching Protocols"):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.script = script
        self.accept = accept
        self.status = status
        self.request: List[str] = []
        self.error: List[BaseException] = []
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        try:
            conn, _ = self.sock.accept()
            self.sock.close()
            f = conn.makefile("rb")
            key = ""
            while True:
                line = f.readline().decode("latin-1").rstrip("\r\n")
                if not line:
                    break
                self.request.append(line)
                if line.lower().startswith("sec-websocket-key:"):
                    key = line.split(":", 1)[1].strip()
            acc = self.accept or base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
            if self.status.startswith("101"):
                head = (
                    f"HTTP/1.1 {self.status}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Accept: {acc}\r\nSec-WebSocket-Protocol: p.v1\r\n\r\n"
                )
            else:
                body = b'{"error":{"code":"job_not_found","message":"no job x"}}'
                head = f"HTTP/1.1 {self.status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                conn.sendall(head.encode() + body)
                conn.close()
                return
            conn.sendall(head.encode())
            self.script(f, conn)
            conn.close()
        except BaseException as e:  # surfaced by the test
            self.error.append(e)

    def connect(self) -> WebSocket:
        return WebSocket.connect("http", f"127.0.0.1:{self.port}", "/x", ["p.v1"], timeout=10)


class RFC6455(unittest.TestCase):
    def test_accept_key_example_of_the_rfc(self) -> None:
        # RFC 6455 §1.3's worked example.
        self.assertEqual(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_fragments_ping_between_and_close(self) -> None:
        got: dict = {}

        def script(f, conn) -> None:
            # A binary message in three fragments with a ping between the
            # first two; a text message in two.
            conn.sendall(frame(OP_BINARY, b"\x00\xff", fin=False))
            conn.sendall(frame(0x9, b"are-you-there"))
            conn.sendall(frame(0x0, b"\x80", fin=False))
            conn.sendall(frame(0x0, b"end", fin=True))
            conn.sendall(frame(OP_TEXT, "h\u00e9".encode()[:2], fin=False) + frame(0x0, "h\u00e9".encode()[2:]))
            got["pong"] = read_frame(f)
            got["client"] = read_frame(f)
            got["client2"] = read_frame(f)
            got["client3"] = read_frame(f)
            conn.sendall(frame(0x8, struct.pack("!H", 1000) + b"bye"))
            got["close"] = read_frame(f)

        p = Peer(script)
        ws = p.connect()
        self.assertEqual(ws.subprotocol, "p.v1")
        self.assertEqual(ws.recv(), (OP_BINARY, b"\x00\xff\x80end"))
        self.assertEqual(ws.recv(), (OP_TEXT, "h\u00e9".encode()))
        ws.send(b"x" * 300, frame_size=128)
        with self.assertRaises(WebSocketClosed) as cm:
            ws.recv()
        self.assertEqual((cm.exception.code, cm.exception.reason), (1000, "bye"))
        p.t.join(10)
        self.assertEqual(p.error, [])
        fin, op, data, masked = got["pong"]
        self.assertEqual((fin, op, data, masked), (True, 0xA, b"are-you-there", True), "a ping is answered with its payload")
        # The client's 300 bytes in fragments of 128: binary, then continuation.
        self.assertEqual(got["client"][:2], (False, OP_BINARY))
        self.assertTrue(got["client"][3], "client frames are masked")
        self.assertEqual(got["client"][2], b"x" * 128)
        self.assertEqual(got["client2"][:3], (False, 0x0, b"x" * 128))
        self.assertEqual(got["client3"][:3], (True, 0x0, b"x" * 44), "the last fragment has FIN")
        self.assertEqual(got["close"][1], 0x8)
        self.assertEqual(struct.unpack("!H", got["close"][2][:2])[0], 1000, "the close is answered with its code")
        self.assertTrue(any(h.lower() == "sec-websocket-version: 13" for h in p.request))
        self.assertTrue(any(h.lower() == "sec-websocket-protocol: p.v1" for h in p.request))

    def test_a_masked_server_frame_is_a_protocol_error(self) -> None:
        got: dict = {}

        def script(f, conn) -> None:
            conn.sendall(frame(OP_BINARY, b"hidden", masked=True))
            got["close"] = read_frame(f)

        p = Peer(script)
        ws = p.connect()
        with self.assertRaises(ProtocolError) as cm:
            ws.recv()
        self.assertEqual(cm.exception.code, 1002)
        p.t.join(10)
        self.assertEqual(struct.unpack("!H", got["close"][2][:2])[0], 1002)
        ws.close()

    def test_a_wrong_accept_key_is_refused(self) -> None:
        p = Peer(lambda f, conn: None, accept="AAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        with self.assertRaises(ProtocolError):
            p.connect()

    def test_a_refused_upgrade_is_the_api_error(self) -> None:
        p = Peer(lambda f, conn: None, status="404 Not Found")
        with self.assertRaises(ShellctlError) as cm:
            p.connect()
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "job_not_found"))


if __name__ == "__main__":
    unittest.main()
