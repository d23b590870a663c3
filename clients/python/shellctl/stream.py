"""GET /v1/jobs/{id}/stream as an iterator of decoded events, resumed with
Last-Event-ID when the connection breaks before the ``end`` event
(docs/stream.md)."""

from __future__ import annotations

import base64
import http.client
import json
import time
from typing import Callable, Iterator, List, Optional, Tuple, Union

from .errors import ShellctlError, StreamOrderError
from .models import EndEvent, InputWaitEvent, OtherEvent, OutputEvent, StateEvent

Event = Union[StateEvent, OutputEvent, InputWaitEvent, EndEvent, OtherEvent]

# Connect opens one connection: given the Last-Event-ID to send (None on the
# first), it returns a function that reads the next bytes of the answer
# (b"" at its end) and one that closes it, or raises ShellctlError for an API
# answer (never retried) or OSError and the like for a network fault
# (retried).
Connect = Callable[[Optional[int]], Tuple[Callable[[], bytes], Callable[[], None]]]

_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 2.0


class JobStream:
    """The stream of one job. Iterate it; its output chunks always tile the
    file from the offset asked: a reconnect resumes right after the last
    chunk returned, and a chunk that does not start there raises
    StreamOrderError, so there is never a gap or a repeat."""

    def __init__(
        self,
        connect: Connect,
        offset: int = 0,
        give_up: float = 60.0,
        on_reconnect: Optional[Callable[[int, BaseException], None]] = None,
    ):
        self._connect = connect
        self.next = offset
        """The offset after the last output chunk returned."""
        self.reconnects = 0
        """How many times the connection was made again."""
        self._give_up = give_up
        self._on_reconnect = on_reconnect
        self._ended = False

    def __iter__(self) -> Iterator[Event]:
        first = True
        broken_since = 0.0
        delay = _BACKOFF_FIRST
        while not self._ended:
            close: Optional[Callable[[], None]] = None
            try:
                read, close = self._connect(None if first else self.next)
                first = False
                got = False
                for raw in _events(read):
                    ev = self._decode(*raw)
                    if ev is None:
                        continue
                    if not got:
                        got = True
                        broken_since = 0.0
                        delay = _BACKOFF_FIRST
                    yield ev
                    if isinstance(ev, EndEvent):
                        self._ended = True
                        return
                raise ConnectionError("the stream closed before its end event")
            except Exception as err:
                if not _is_network(err):
                    raise
                self._broken(err, broken_since)
                if broken_since == 0.0:
                    broken_since = time.monotonic()
                first = False
                time.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX)
            finally:
                if close is not None:
                    close()

    def _broken(self, err: BaseException, since: float) -> None:
        if since and time.monotonic() - since > self._give_up:
            raise ConnectionError(
                f"stream: gave up reconnecting after {self._give_up} s at offset {self.next}: {err}"
            ) from err
        self.reconnects += 1
        if self._on_reconnect is not None:
            self._on_reconnect(self.next, err)

    def collect(self) -> Tuple[bytes, EndEvent]:
        """Reads to the end: every byte from the offset asked, and the end event."""
        parts: List[bytes] = []
        for ev in self:
            if isinstance(ev, OutputEvent):
                parts.append(ev.data)
            elif isinstance(ev, EndEvent):
                return b"".join(parts), ev
        raise ConnectionError("stream: ended without an end event")

    def _decode(self, event: str, ident: Optional[str], data: str) -> Optional[Event]:
        if event == "output":
            d = json.loads(data)
            text = d.get("text")
            b = text.encode("utf-8") if text is not None else base64.b64decode(d.get("base64", ""))
            if d["offset"] != self.next:
                raise StreamOrderError(
                    f"stream: an output chunk starts at {d['offset']}, expected {self.next}: "
                    "the chunks would not tile the file"
                )
            end = d["offset"] + len(b)
            if ident is not None and int(ident) != end:
                raise StreamOrderError(f"stream: an output chunk's id is {ident}, its bytes end at {end}")
            self.next = end
            return OutputEvent(offset=d["offset"], end=end, data=b, text=text)
        if event == "state":
            d = json.loads(data)
            return StateEvent(status=d["status"], done=d["done"], exit_code=d.get("exit_code"))
        if event == "input_wait":
            return InputWaitEvent(waiting=json.loads(data)["waiting"])
        if event == "end":
            d = json.loads(data)
            return EndEvent(
                status=d["status"],
                exit_code=d.get("exit_code"),
                signal=d.get("signal"),
                reason=d.get("reason"),
                offset=d["offset"],
            )
        return OtherEvent(event=event, data=data)


def _is_network(err: BaseException) -> bool:
    """A fault of the connection (retried), not an answer of the API nor a
    disagreement about offsets (raised)."""
    if isinstance(err, (ShellctlError, StreamOrderError)):
        return False
    # OSError: refused, reset, timed out; HTTPException: a body cut short
    # (IncompleteRead) or a connection closed before the answer's head.
    return isinstance(err, (OSError, http.client.HTTPException))


def _events(read: Callable[[], bytes]) -> Iterator[Tuple[str, Optional[str], str]]:
    """Splits a text/event-stream body into (event, id, data); comments and
    keep-alives are dropped."""
    buf = b""
    event = ""
    ident: Optional[str] = None
    data: List[str] = []
    seen = False
    while True:
        chunk = read()
        if not chunk:
            return
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line = buf[:nl].decode("utf-8")
            buf = buf[nl + 1 :]
            if line.endswith("\r"):
                line = line[:-1]
            if line == "":
                if seen:
                    yield event or "message", ident, "\n".join(data)
                event, ident, data, seen = "", None, [], False
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            seen = True
            if name == "event":
                event = value
            elif name == "id":
                ident = value
            elif name == "data":
                data.append(value)
