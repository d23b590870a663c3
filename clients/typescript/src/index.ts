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
} from "./client.js";
export { ShellctlError } from "./errors.js";
export { JobStream, StreamOrderError } from "./stream.js";
export type { StreamEvent, StateEvent, OutputEvent, InputWaitEvent, EndEvent, OtherEvent, StreamOptions, Connect } from "./stream.js";
export type { paths, components, operations } from "./generated/openapi.js";
