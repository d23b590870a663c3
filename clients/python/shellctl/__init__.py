"""shellctl: a client of the shellctl HTTP API, standard library only.

    from shellctl import Client
    c = Client("http://127.0.0.1:8765", token="...")
    r = c.run("echo hello", mode="stdio")
"""

from .attach import (
    AttachConnection,
    AttachError,
    AttachExit,
    AttachOther,
    AttachOutput,
    AttachRedraw,
    AttachResume,
)
from .client import Answer, Client
from .errors import AttachClosedError, InputBackpressureError, ShellctlError, StreamOrderError
from .files import Archive, ArchiveError, FileWatch
from .models import (
    ArchiveTrailers,
    ArchiveWarning,
    FileContent,
    FileEdited,
    FileEntry,
    FileList,
    FileStat,
    FileWritten,
    WatchChange,
    WatchOverflow,
    WatchReady,
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
    "Archive",
    "ArchiveError",
    "ArchiveTrailers",
    "ArchiveWarning",
    "AttachClosedError",
    "AttachConnection",
    "AttachError",
    "AttachExit",
    "AttachOther",
    "AttachOutput",
    "AttachRedraw",
    "AttachResume",
    "Client",
    "Cursor",
    "EndEvent",
    "FileContent",
    "FileEdited",
    "FileEntry",
    "FileList",
    "FileStat",
    "FileWatch",
    "FileWritten",
    "Info",
    "InputBackpressureError",
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
    "WatchChange",
    "WatchOverflow",
    "WatchReady",
]
