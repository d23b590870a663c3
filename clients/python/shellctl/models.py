"""The answers of the shellctl API as dataclasses (internal/api/openapi.json).

Keys a newer server adds are ignored by ``from_dict``; the record and the
server's info also keep the whole answer in ``raw``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Type, TypeVar

T = TypeVar("T")


def _build(cls: Type[T], d: Mapping[str, Any], **more: Any) -> T:
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kw = {k: v for k, v in d.items() if k in names}
    kw.update(more)
    if "raw" in names:
        kw["raw"] = dict(d)
    return cls(**kw)  # type: ignore[call-arg]


@dataclass
class JobResult:
    """A window of a job's output: run, wait, input, log/tail and stderr.

    ``input_wait`` and ``replayed`` come from the answer's headers
    (X-Shellctl-Input-Wait, X-Shellctl-Idempotent-Replay), not its body.
    """

    job_id: str
    done: bool
    status: str
    exit_code: Optional[int]
    output_path: str
    output: str
    offset: int
    truncated: bool
    input_wait: Optional[bool] = None
    replayed: bool = False
    idempotency_key: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **more: Any) -> "JobResult":
        return _build(cls, d, **more)


@dataclass
class JobStatus:
    """GET /v1/jobs/{id}, and the answer of terminate."""

    job_id: str
    status: str
    done: bool
    exit_code: Optional[int]
    created_at: str
    started_at: Optional[str]
    ended_at: Optional[str]
    offset: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobStatus":
        return _build(cls, d)


@dataclass
class JobInfo:
    """One job of GET /v1/jobs."""

    job_id: str
    status: str
    created_at: str
    started_at: Optional[str] = None
    ended_at: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobInfo":
        return _build(cls, d)


@dataclass
class Terminal:
    cols: int
    rows: int


@dataclass
class Record:
    """GET /v1/jobs/{id}/record (and the answers of signal and resize)."""

    job_id: str
    status: str
    done: bool
    exit_code: Optional[int]
    signal: Optional[str]
    reason: Optional[str]
    message: Optional[str]
    mode: str
    cwd: str
    home: str
    terminal: Optional[Terminal]
    session_id: Optional[str]
    env_names: List[str]
    created_at: str
    started_at: Optional[str]
    ended_at: Optional[str]
    output_bytes: int
    stderr_bytes: int
    output_complete: bool
    input_wait: Optional[bool]
    pid: Optional[int]
    pgid: Optional[int]
    idempotency_key: Optional[str]
    screen_available: bool
    isolation: Optional[Dict[str, Any]] = None
    limits: Optional[Dict[str, Any]] = None
    usage: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Record":
        t = d.get("terminal")
        return _build(cls, d, terminal=Terminal(**t) if t else None)


@dataclass
class Info:
    """GET /v1/info: the server's description of itself."""

    version: str
    commit: str
    go_version: str
    state_dir: str
    started_at: str
    uptime_seconds: float
    auth_required: bool
    tracking: str
    kernel: Dict[str, Any] = field(default_factory=dict)
    landlock: Dict[str, Any] = field(default_factory=dict)
    cgroup: Dict[str, Any] = field(default_factory=dict)
    limits: Dict[str, Any] = field(default_factory=dict)
    policy: Dict[str, Any] = field(default_factory=dict)
    jobs: Dict[str, int] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Info":
        return _build(cls, d)


@dataclass
class Cursor:
    row: int
    col: int
    visible: bool


@dataclass
class Screen:
    """What a pty job's terminal shows (GET screen, POST keys)."""

    cols: int
    rows: int
    cursor: Cursor
    alt_screen: bool
    title: str
    lines: List[str]
    scrollback: Optional[List[str]] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Screen":
        return _build(cls, d, cursor=Cursor(**d["cursor"]))


@dataclass
class RestoreResult:
    entries: int
    bytes_written: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RestoreResult":
        return _build(cls, d)


# --- the events of GET /v1/jobs/{id}/stream (docs/stream.md) ---


@dataclass
class StateEvent:
    """A status change; the first event of every connection."""

    status: str
    done: bool
    exit_code: Optional[int]
    type: str = "state"


@dataclass
class OutputEvent:
    """Bytes [offset, end) of the channel's file."""

    offset: int
    end: int
    data: bytes
    text: Optional[str] = None
    type: str = "output"


@dataclass
class InputWaitEvent:
    waiting: bool
    type: str = "input_wait"


@dataclass
class EndEvent:
    """The job is done and every byte was sent; ``offset`` is the file's size."""

    status: str
    exit_code: Optional[int]
    signal: Optional[str]
    reason: Optional[str]
    offset: int
    type: str = "end"


@dataclass
class OtherEvent:
    """An event this client does not know yet (a newer server's), as sent."""

    event: str
    data: str
    type: str = "other"


# --- the file routes (docs/files.md) ---


@dataclass
class FileStat:
    """GET /v1/files/stat. ``type``: file, dir, symlink, fifo, socket or device; ``mode`` octal text."""

    path: str
    type: str
    size: int
    mode: str
    mtime: str
    link_target: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FileStat":
        return _build(cls, d)


@dataclass
class FileEntry:
    name: str
    type: str
    size: int
    mode: str
    mtime: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FileEntry":
        return _build(cls, d)


@dataclass
class FileList:
    """GET /v1/files/list: entries sorted by name; ``truncated`` when more were left out."""

    path: str
    entries: List[FileEntry]
    truncated: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FileList":
        return _build(cls, d, entries=[FileEntry.from_dict(e) for e in d.get("entries") or []])


@dataclass
class FileContent:
    """GET /v1/files/content: ``status`` 200 (all), 206 (the range asked)
    or 304 (``if_none_match`` named this version: no data). ``data`` is
    None when the bytes went to a file (``to=``)."""

    status: int
    etag: Optional[str]
    length: Optional[int]
    content_range: Optional[str]
    data: Optional[bytes]

    @property
    def not_modified(self) -> bool:
        return self.status == 304


@dataclass
class FileWritten:
    """PUT /v1/files/content: ``created`` (201) or replaced (200)."""

    path: str
    size: int
    sha256: str
    created: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], **more: Any) -> "FileWritten":
        return _build(cls, d, **more)


@dataclass
class FileEdited:
    path: str
    replacements: int
    sha256: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FileEdited":
        return _build(cls, d)


@dataclass
class ArchiveWarning:
    """One entry of X-Archive-Warnings: ``kind`` (changed, max_files, …,
    or KIND_more), the path relative to the archived directory, and how
    many warnings of that kind there were in all."""

    kind: str
    count: int
    path: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ArchiveWarning":
        return _build(cls, d)


@dataclass
class ArchiveTrailers:
    """The archive's trailers, which say it succeeded: ``status`` ok, or
    truncated when a bound stopped it."""

    status: str
    files: int
    bytes: int
    sha256: str
    warnings: List[ArchiveWarning]


@dataclass
class WatchReady:
    """The watches are in place: changes from now on are reported."""

    path: str
    dirs: int
    type: str = "ready"


@dataclass
class WatchChange:
    """``op``: create, write, remove or rename; ``path`` absolute; ``kind``: file or dir."""

    op: str
    path: str
    kind: str
    type: str = "change"


@dataclass
class WatchOverflow:
    """Events were lost (the kernel's queue overflowed): list the directory again."""

    path: str
    type: str = "overflow"
