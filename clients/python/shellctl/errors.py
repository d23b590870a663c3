"""The API's error envelope ({"error":{"code","message"}}) as an exception."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional


class ShellctlError(Exception):
    """An error answer: branch on ``code`` (job_not_found, idempotency_key_reused …).

    ``details`` holds the envelope's other fields, e.g. ``count`` of
    edit_ambiguous."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        request_id: Optional[str] = None,
        details: Optional[Dict[str, Any]] = None,
    ):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details: Dict[str, Any] = details or {}

    @classmethod
    def from_answer(cls, status: int, body: bytes, request_id: Optional[str]) -> "ShellctlError":
        try:
            env = json.loads(body)
            err = env["error"]
            code, message = str(err["code"]), str(err.get("message", ""))
            details = {k: v for k, v in err.items() if k not in ("code", "message")}
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls(status, f"http_{status}", body.decode("utf-8", "replace").strip(), request_id)
        if code == "input_backpressure":
            return InputBackpressureError(status, code, message, request_id, details)
        return cls(status, code, message, request_id, details)


class InputBackpressureError(ShellctlError):
    """409 input_backpressure: the job did not read its stdin pipe in time.
    ``taken`` bytes of the input (its first ones) were written; the rest were
    not, and ``eof`` was not applied: send the rest again."""

    @property
    def taken(self) -> int:
        return int(self.details.get("taken", 0))


class StreamOrderError(Exception):
    """An output chunk that does not start where the last one ended: the
    chunks would not tile the file. Not a network fault; never retried."""


class AttachClosedError(ConnectionError):
    """The attach WebSocket closed without the job's exit message (``code``
    1001: the server is going away, attach again with ``raw_offset``)."""

    def __init__(self, code: Optional[int], reason: str):
        super().__init__(f"attach: the connection closed ({code} {reason!r}) before the job's exit message")
        self.code = code
        self.reason = reason
