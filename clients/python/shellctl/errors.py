"""The API's error envelope ({"error":{"code","message"}}) as an exception."""

from __future__ import annotations

import json
from typing import Optional


class ShellctlError(Exception):
    """An error answer: branch on ``code`` (job_not_found, idempotency_key_reused …)."""

    def __init__(self, status: int, code: str, message: str, request_id: Optional[str] = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id

    @classmethod
    def from_answer(cls, status: int, body: bytes, request_id: Optional[str]) -> "ShellctlError":
        try:
            env = json.loads(body)
            err = env["error"]
            return cls(status, str(err["code"]), str(err.get("message", "")), request_id)
        except (ValueError, KeyError, TypeError):
            return cls(status, f"http_{status}", body.decode("utf-8", "replace").strip(), request_id)


class StreamOrderError(Exception):
    """An output chunk that does not start where the last one ended: the
    chunks would not tile the file. Not a network fault; never retried."""
