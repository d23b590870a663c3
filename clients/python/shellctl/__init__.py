"""shellctl: a client of the shellctl HTTP API, standard library only.

    from shellctl import Client
    c = Client("http://127.0.0.1:8765", token="...")
    r = c.run("echo hello", mode="stdio")
"""

from .client import Answer, Client
from .errors import ShellctlError, StreamOrderError
from .models import (
    Cursor,
    EndEvent,
    Info,
    InputWaitEvent,
    JobInfo,
    JobResult,
    JobStatus,
    OtherEvent,
    OutputEvent,
    Record,
    RestoreResult,
    Screen,
    StateEvent,
    Terminal,
)
from .stream import JobStream

__all__ = [
    "Answer",
    "Client",
    "Cursor",
    "EndEvent",
    "Info",
    "InputWaitEvent",
    "JobInfo",
    "JobResult",
    "JobStatus",
    "JobStream",
    "OtherEvent",
    "OutputEvent",
    "Record",
    "RestoreResult",
    "Screen",
    "ShellctlError",
    "StateEvent",
    "StreamOrderError",
    "Terminal",
]
