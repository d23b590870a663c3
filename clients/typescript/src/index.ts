// @shellctl/client: a client of the shellctl HTTP API (docs/api.md).
export { ShellctlClient } from "./client.js";
export type {
  ClientOptions,
  CallOptions,
  IdempotentOptions,
  JobWindow,
  JobState,
  JobResult,
  JobStatusView,
  JobInfo,
  JobRecord,
  Info,
  Screen,
  RestoreResult,
  RunRequest,
  WaitRequest,
  InputRequest,
  SignalRequest,
  KeysRequest,
  Terminal,
  FileStat,
  FileList,
  FileWritten,
  FileEditRequest,
  FileEdited,
  FileMade,
  FileMoved,
  FileRemoved,
  PrepareRequest,
  PrepareCredential,
  ReadFileOptions,
  WriteFileOptions,
  ArchiveOptions,
} from "./client.js";
export { ShellctlError, InputBackpressureError } from "./errors.js";
export { ArchiveError } from "./files.js";
export type { FileContent, ArchiveStream, ArchiveTrailers, ArchiveWarning, WatchEvent, WatchReady, WatchChange, WatchOverflow } from "./files.js";
export { AttachConnection, AttachClosedError, ATTACH_SUBPROTOCOL } from "./attach.js";
export type { AttachMessage, AttachExit, AttachOptions } from "./attach.js";
export { JobStream, StreamOrderError } from "./stream.js";
export type { StreamEvent, StateEvent, OutputEvent, InputWaitEvent, EndEvent, OtherEvent, StreamOptions, Connect } from "./stream.js";
export type { paths, components, operations } from "./generated/openapi.js";
