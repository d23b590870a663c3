"""GET /v1/jobs/{id}/attach (docs/attach.md): a WebSocket to a job, with
the subprotocol shellctl.attach.v1. Binary messages are bytes (input one
way, output the other), text messages JSON control."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional, Union

from .errors import AttachClosedError
from .websocket import NORMAL, OP_BINARY, WebSocket, WebSocketClosed

SUBPROTOCOL = "shellctl.attach.v1"

# The server takes at most 1 MiB a message: longer input is sent as several.
MAX_INPUT_MESSAGE = 1 << 20


@dataclass
class AttachOutput:
    """Bytes the job wrote (a pty job's raw terminal, or output.log)."""

    data: bytes
    type: str = "output"


@dataclass
class AttachRedraw:
    """pty: the next output message redraws the screen; raw bytes from ``raw_offset`` follow it."""

    raw_offset: int
    type: str = "redraw"


@dataclass
class AttachResume:
    """pty: the raw bytes from ``raw_offset`` follow (the reconnect's offset was still kept)."""

    raw_offset: int
    type: str = "resume"


@dataclass
class AttachError:
    """An input or control message the server could not do; the socket stays open."""

    code: str
    message: str
    type: str = "error"


@dataclass
class AttachExit:
    """The job ended and every byte was sent; a normal close follows."""

    status: str
    exit_code: Optional[int]
    signal: Optional[str]
    offset: int
    raw_offset: Optional[int] = None
    type: str = "exit"


@dataclass
class AttachOther:
    """A control message this client does not know yet (a newer server's)."""

    kind: str
    data: Dict[str, Any] = field(default_factory=dict)
    type: str = "other"


AttachMessage = Union[AttachOutput, AttachRedraw, AttachResume, AttachError, AttachExit, AttachOther]


class AttachConnection:
    """One attach. Iterate it (or call ``recv``) for what the job writes;
    ``send``, ``resize`` and ``eof`` may be called from another thread
    meanwhile. Use it as a context manager to close it."""

    def __init__(self, ws: WebSocket, frame_size: Optional[int] = None):
        self._ws = ws
        self.frame_size = frame_size
        """Sends each input message in fragments of at most this many bytes (None: whole)."""
        self.exit: Optional[AttachExit] = None
        """The exit message, once received."""

    def send(self, data: Union[bytes, str]) -> None:
        """Input bytes (a str goes as UTF-8), byte-exact. Blocks while the
        job does not read: the server holds the message until it does."""
        b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        for at in range(0, len(b), MAX_INPUT_MESSAGE):
            self._ws.send(b[at : at + MAX_INPUT_MESSAGE], frame_size=self.frame_size)

    def resize(self, cols: int, rows: int) -> None:
        """Sets a pty job's terminal size (a stdio job answers an error message)."""
        self._control({"type": "resize", "cols": cols, "rows": rows})

    def eof(self) -> None:
        """The end of input: a stdio job's stdin pipe is closed after every
        byte sent before; a pty job gets its terminal's EOF character."""
        self._control({"type": "eof"})

    def _control(self, msg: Dict[str, Any]) -> None:
        self._ws.send(json.dumps(msg).encode("utf-8"), text=True)

    def recv(self) -> Optional[AttachMessage]:
        """The next message, or None once the server closed normally after
        the exit message. Any other close raises AttachClosedError."""
        try:
            op, payload = self._ws.recv()
        except WebSocketClosed as e:
            if e.code == NORMAL and self.exit is not None:
                return None
            raise AttachClosedError(e.code, e.reason) from None
        if op == OP_BINARY:
            return AttachOutput(payload)
        d = json.loads(payload)
        t = d.get("type")
        if t == "exit":
            self.exit = AttachExit(
                status=d["status"],
                exit_code=d.get("exit_code"),
                signal=d.get("signal"),
                offset=d.get("offset", 0),
                raw_offset=d.get("raw_offset"),
            )
            return self.exit
        if t == "redraw":
            return AttachRedraw(d["raw_offset"])
        if t == "resume":
            return AttachResume(d["raw_offset"])
        if t == "error":
            return AttachError(d.get("code", ""), d.get("message", ""))
        return AttachOther(str(t), d)

    def __iter__(self) -> Iterator[AttachMessage]:
        while True:
            m = self.recv()
            if m is None:
                return
            yield m

    def close(self) -> None:
        """Leaves the job running: a normal close."""
        if not self._ws.closed:
            self._ws.close()

    def __enter__(self) -> "AttachConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
