// The shellctl client: one method per route, typed by the OpenAPI document
// (src/generated/openapi.ts), sent through openapi-fetch. What generation
// does not reach is written here: the answers' X-Shellctl-* headers, the
// event stream (stream.ts), the snapshot archive's bytes, and retries of an
// idempotent run.

import createClient, { type Client as FetchClient } from "openapi-fetch";
import { randomUUID } from "node:crypto";
import type { components, paths } from "./generated/openapi.js";
import { ShellctlError } from "./errors.js";
import { JobStream, type StreamOptions } from "./stream.js";
import { archiveFromFetch, archiveFromNode, fileContent, watchEvents, type ArchiveStream, type FileContent, type WatchEvent } from "./files.js";
import { openAttach, type AttachConnection, type AttachOptions } from "./attach.js";

type S = components["schemas"];
export type JobState = S["JobState"];
export type JobResult = S["JobResult"];
export type JobStatusView = S["JobStatusView"];
export type JobInfo = S["JobInfo"];
export type JobRecord = S["Record"];
export type Info = S["Info"];
export type Screen = S["Screen"];
export type RestoreResult = S["RestoreResult"];
export type RunRequest = S["RunRequest"];
export type WaitRequest = S["WaitRequest"];
export type InputRequest = S["InputRequest"];
export type SignalRequest = S["SignalRequest"];
export type KeysRequest = S["KeysRequest"];
export type Terminal = S["Terminal"];
export type FileStat = S["FileStat"];
export type FileList = S["FileList"];
export type FileWritten = S["FileWritten"] & {
  /** 201: the file was made (else replaced, 200). */
  created: boolean;
};
export type FileEditRequest = S["FileEditRequest"];
export type FileEdited = S["FileEdited"];
export type FileMade = S["FileMade"];
export type FileMoved = S["FileMoved"];
export type FileRemoved = S["FileRemoved"];
export type PrepareRequest = S["PrepareRequest"];
export type PrepareCredential = S["PrepareCredential"];

export interface ReadFileOptions extends CallOptions {
  /** One range of bytes, both ends included (`end` unset: to the end of the file): a 206. */
  range?: { start: number; end?: number };
  /** An ETag: a 304 without a body while the file is still that version. */
  ifNoneMatch?: string;
}

export interface WriteFileOptions extends CallOptions {
  /** Octal text ("0600") or a number (0o600); default: the replaced file's, else 0644. */
  mode?: string | number;
  /** Make the missing directories above it. */
  mkdirs?: boolean;
  /** Replace only this version (an ETag of readFile): else 412 precondition_failed. */
  ifMatch?: string;
  /** "*": only if the file does not exist, else 412. */
  ifNoneMatch?: "*";
}

export interface ArchiveOptions extends CallOptions {
  format?: "tar" | "tar.zst";
  maxFiles?: number;
  maxFileBytes?: number;
  maxBytes?: number;
  maxEntriesVisited?: number;
  /**
   * Read it with fetch even on Node. fetch gives no trailers: `trailers()`
   * then resolves null. By default Node reads it with node:http, which
   * does (and so ignores the `fetch` option).
   */
  useFetch?: boolean;
}

/**
 * A window of a job's output (run, wait, input, tail, stderr): the JSON
 * answer, plus what the server says in headers (camelCase, so they never
 * clash with the answer's keys).
 */
export interface JobWindow extends JobResult {
  /** X-Shellctl-Input-Wait: a pty job waits for input (null for stdio jobs). */
  inputWait: boolean | null;
  /** X-Shellctl-Idempotent-Replay: this answer is of an earlier request with the same key. */
  replayed: boolean;
}

export interface ClientOptions {
  /** The server, e.g. http://127.0.0.1:8765 */
  baseUrl: string;
  /** The bearer token (`serve --token`), if the server has one. */
  token?: string;
  /** A fetch of your own (proxies, tests); the global one by default. */
  fetch?: typeof globalThis.fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface IdempotentOptions extends CallOptions {
  /** The Idempotency-Key (1..255 visible ASCII); a fresh UUID by default. */
  key?: string;
  /** How many times to send the request again after a network fault (default 3). */
  retries?: number;
}

export class ShellctlClient {
  /**
   * The typed openapi-fetch client itself, for any route of the document,
   * including routes this class has no method for yet.
   */
  readonly api: FetchClient<paths>;
  readonly baseUrl: string;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly token: string | undefined;

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.token = opts.token;
    this.fetchImpl = opts.fetch ?? globalThis.fetch;
    this.api = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: opts.token ? { Authorization: `Bearer ${opts.token}` } : {},
      fetch: (req: Request) => this.fetchImpl(req),
    });
  }

  // --- the compatible job routes ---

  /** POST /v1/jobs/run: starts a job and answers its first window. */
  async run(req: RunRequest, opts: CallOptions & { idempotencyKey?: string } = {}): Promise<JobWindow> {
    const r = await this.api.POST("/v1/jobs/run", {
      body: req,
      params: opts.idempotencyKey ? { header: { "Idempotency-Key": opts.idempotencyKey } } : {},
      signal: opts.signal,
    });
    return window(unwrap(r), r.response);
  }

  /**
   * An idempotent run: POST /v1/jobs/run with an Idempotency-Key, sent again
   * with the same key when the answer is lost to a network fault, so the job
   * starts once however many times the request went out.
   */
  async runIdempotent(req: RunRequest, opts: IdempotentOptions = {}): Promise<JobWindow & { key: string }> {
    const key = opts.key ?? randomUUID();
    const retries = opts.retries ?? 3;
    for (let attempt = 0; ; attempt++) {
      try {
        const w = await this.run(req, { idempotencyKey: key, signal: opts.signal });
        return { ...w, key };
      } catch (err) {
        if (err instanceof ShellctlError || opts.signal?.aborted || attempt >= retries) throw err;
        await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
      }
    }
  }

  /** POST /v1/jobs/{id}/wait: waits for output past `offset` or the job's end. */
  async wait(id: string, req: WaitRequest, opts: CallOptions = {}): Promise<JobWindow> {
    const r = await this.api.POST("/v1/jobs/{id}/wait", { params: { path: { id } }, body: req, signal: opts.signal });
    return window(unwrap(r), r.response);
  }

  /** POST /v1/jobs/{id}/input: types text on a pty job's terminal, then waits as wait does. */
  async input(id: string, req: InputRequest, opts: CallOptions & { idempotencyKey?: string } = {}): Promise<JobWindow> {
    const r = await this.api.POST("/v1/jobs/{id}/input", {
      params: { path: { id }, ...(opts.idempotencyKey ? { header: { "Idempotency-Key": opts.idempotencyKey } } : {}) },
      body: req,
      signal: opts.signal,
    });
    return window(unwrap(r), r.response);
  }

  /** GET /v1/jobs/{id}/log/tail: the last bytes of the output. */
  async tail(id: string, outputLimit?: number, opts: CallOptions = {}): Promise<JobWindow> {
    const query = outputLimit !== undefined ? { output_limit: String(outputLimit) } : {};
    const r = await this.api.GET("/v1/jobs/{id}/log/tail", { params: { path: { id }, query }, signal: opts.signal });
    return window(unwrap(r), r.response);
  }

  /** GET /v1/jobs/{id}: the status view. */
  async status(id: string, opts: CallOptions = {}): Promise<JobStatusView> {
    return unwrap(await this.api.GET("/v1/jobs/{id}", { params: { path: { id } }, signal: opts.signal }));
  }

  /** GET /v1/jobs: jobs, newest first. */
  async list(filter: { status?: JobState; limit?: number } = {}, opts: CallOptions = {}): Promise<JobInfo[]> {
    const query: { status?: string; limit?: string } = {};
    if (filter.status) query.status = filter.status;
    if (filter.limit !== undefined) query.limit = String(filter.limit);
    return unwrap(await this.api.GET("/v1/jobs", { params: { query }, signal: opts.signal })).jobs;
  }

  /** POST /v1/jobs/{id}/terminate: ends a job (SIGTERM, then SIGKILL after the grace). */
  async terminate(id: string, graceSeconds?: number, opts: CallOptions = {}): Promise<JobStatusView> {
    const r = await this.api.POST("/v1/jobs/{id}/terminate", {
      params: { path: { id } },
      body: graceSeconds !== undefined ? { grace_seconds: graceSeconds } : undefined,
      signal: opts.signal,
    });
    return unwrap(r);
  }

  /** DELETE /v1/jobs/{id}: removes a job's row and directory (force: end it first). */
  async delete(id: string, o: { force?: boolean; graceSeconds?: number } = {}, opts: CallOptions = {}): Promise<void> {
    const query: { force?: string; grace_seconds?: string } = {};
    if (o.force) query.force = "true";
    if (o.graceSeconds !== undefined) query.grace_seconds = String(o.graceSeconds);
    unwrap(await this.api.DELETE("/v1/jobs/{id}", { params: { path: { id }, query }, signal: opts.signal }));
  }

  /**
   * POST /v1/jobs/{id}/input with bytes (sent as base64): to a stdio job's
   * stdin pipe (run with `stdin: "pipe"`), byte-exact. `eof` closes the pipe
   * after them. A job that does not read in time throws
   * InputBackpressureError, whose `taken` says how many were written.
   */
  async inputBytes(id: string, bytes: Uint8Array, req: Omit<InputRequest, "text" | "base64"> = {}, opts: CallOptions = {}): Promise<JobWindow> {
    return this.input(id, { ...req, base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("base64") }, opts);
  }

  // --- the extended job routes ---

  /** GET /v1/jobs/{id}/record: everything known about a job. */
  async record(id: string, opts: CallOptions = {}): Promise<JobRecord> {
    return unwrap(await this.api.GET("/v1/jobs/{id}/record", { params: { path: { id } }, signal: opts.signal }));
  }

  /** GET /v1/jobs/{id}/stderr: a window of a stdio job's stderr. */
  async stderr(id: string, offset = 0, outputLimit?: number, opts: CallOptions = {}): Promise<JobWindow> {
    const query: { offset: string; output_limit?: string } = { offset: String(offset) };
    if (outputLimit !== undefined) query.output_limit = String(outputLimit);
    const r = await this.api.GET("/v1/jobs/{id}/stderr", { params: { path: { id }, query }, signal: opts.signal });
    return window(unwrap(r), r.response);
  }

  /** POST /v1/jobs/{id}/signal: sends a signal ("INT", "SIGTERM", 9) to the foreground, group or tree. */
  async signal(id: string, signal: SignalRequest["signal"], target?: SignalRequest["target"], opts: CallOptions = {}): Promise<JobRecord> {
    const body: SignalRequest = target ? { signal, target } : { signal };
    return unwrap(await this.api.POST("/v1/jobs/{id}/signal", { params: { path: { id } }, body, signal: opts.signal }));
  }

  /** POST /v1/jobs/{id}/resize: sets a pty job's terminal size. */
  async resize(id: string, size: Terminal, opts: CallOptions = {}): Promise<JobRecord> {
    return unwrap(await this.api.POST("/v1/jobs/{id}/resize", { params: { path: { id } }, body: size, signal: opts.signal }));
  }

  /** GET /v1/jobs/{id}/screen: what a pty job's terminal shows now. */
  async screen(id: string, scrollback?: number, opts: CallOptions = {}): Promise<Screen> {
    const query = scrollback !== undefined ? { scrollback: String(scrollback) } : {};
    return unwrap(await this.api.GET("/v1/jobs/{id}/screen", { params: { path: { id }, query }, signal: opts.signal }));
  }

  /** POST /v1/jobs/{id}/keys: types keys ("Escape", ":wq", "Enter", "C-c") and answers the settled screen. */
  async keys(id: string, req: KeysRequest, opts: CallOptions = {}): Promise<Screen> {
    return unwrap(await this.api.POST("/v1/jobs/{id}/keys", { params: { path: { id } }, body: req, signal: opts.signal }));
  }

  /**
   * GET /v1/jobs/{id}/stream: the job's output as events, byte-exact,
   * reconnecting with Last-Event-ID after a broken connection.
   */
  stream(id: string, opts: StreamOptions = {}): JobStream {
    const channel = opts.channel;
    return new JobStream(async (lastEventId, signal) => {
      const query: { offset?: string; channel?: "output" | "stderr" } = {};
      if (lastEventId === null && opts.offset) query.offset = String(opts.offset);
      if (channel) query.channel = channel;
      const r = await this.api.GET("/v1/jobs/{id}/stream", {
        params: { path: { id }, query },
        headers: lastEventId === null ? {} : { "Last-Event-ID": String(lastEventId) },
        parseAs: "stream",
        signal,
      });
      if (r.error !== undefined || !r.response.ok || !r.data) throw ShellctlError.fromAnswer(r.response, r.error);
      // openapi-fetch hands the body over unread (parseAs: "stream").
      return r.data as unknown as ReadableStream<Uint8Array>;
    }, opts);
  }

  /**
   * GET /v1/jobs/{id}/attach: a WebSocket to a pty job, or a stdio job run
   * with `stdin: "pipe"` (docs/attach.md). Resolves once it is open; a
   * refusal throws ShellctlError (404 job_not_found, 409 input_unsupported
   * …) where the WebSocket says why (`ws`; a standard WebSocket does not).
   */
  async attach(id: string, opts: AttachOptions = {}): Promise<AttachConnection> {
    const url = new URL(`${this.baseUrl}/v1/jobs/${encodeURIComponent(id)}/attach`);
    if (opts.offset !== undefined) url.searchParams.set("offset", String(opts.offset));
    if (opts.rawOffset !== undefined) url.searchParams.set("raw_offset", String(opts.rawOffset));
    return openAttach(url, this.token, opts);
  }

  // --- files (docs/files.md) ---

  /** GET /v1/files/stat: what a path is (`follow: false`: a link itself). */
  async stat(path: string, o: { follow?: boolean } & CallOptions = {}): Promise<FileStat> {
    const query: { path: string; follow?: boolean } = { path };
    if (o.follow === false) query.follow = false;
    return unwrap(await this.api.GET("/v1/files/stat", { params: { query }, signal: o.signal }));
  }

  /** GET /v1/files/list: a directory's entries, sorted by name, links not followed. */
  async listDir(path: string, o: { limit?: number; hidden?: boolean } & CallOptions = {}): Promise<FileList> {
    const query: { path: string; limit?: number; hidden?: boolean } = { path };
    if (o.limit !== undefined) query.limit = o.limit;
    if (o.hidden === false) query.hidden = false;
    return unwrap(await this.api.GET("/v1/files/list", { params: { query }, signal: o.signal }));
  }

  /** GET /v1/files/content: a regular file's bytes as a stream, with its ETag. */
  async readFile(path: string, o: ReadFileOptions = {}): Promise<FileContent> {
    const headers: Record<string, string> = {};
    if (o.range) headers.Range = `bytes=${o.range.start}-${o.range.end ?? ""}`;
    if (o.ifNoneMatch) headers["If-None-Match"] = o.ifNoneMatch;
    const r = await this.api.GET("/v1/files/content", { params: { query: { path } }, headers, parseAs: "stream", signal: o.signal });
    if (r.response.status === 304) return fileContent(r.response);
    if (r.error !== undefined || !r.response.ok) throw ShellctlError.fromAnswer(r.response, r.error);
    return fileContent(r.response);
  }

  /**
   * PUT /v1/files/content: writes a file atomically (readers see the old
   * file or the new one). `data` may be a stream: it is sent as it is read.
   */
  async writeFile(path: string, data: Uint8Array | string | Blob | ReadableStream<Uint8Array>, o: WriteFileOptions = {}): Promise<FileWritten> {
    const query: { path: string; mode?: string; mkdirs?: boolean } = { path };
    if (o.mode !== undefined) query.mode = typeof o.mode === "number" ? o.mode.toString(8).padStart(4, "0") : o.mode;
    if (o.mkdirs) query.mkdirs = true;
    const header: { "If-Match"?: string; "If-None-Match"?: "*" } = {};
    if (o.ifMatch !== undefined) header["If-Match"] = o.ifMatch;
    if (o.ifNoneMatch !== undefined) header["If-None-Match"] = o.ifNoneMatch;
    const stream = typeof ReadableStream !== "undefined" && data instanceof ReadableStream;
    // fetch sends a stream body only half-duplex (an option the types of
    // openapi-fetch do not name; it passes it on to the Request).
    const extra = stream ? ({ duplex: "half" } as object) : {};
    const r = await this.api.PUT("/v1/files/content", {
      ...extra,
      params: { query, header },
      // The document types the body as a string (binary); it goes as is.
      body: data as unknown as string,
      bodySerializer: (b: unknown) => b as BodyInit,
      headers: { "Content-Type": "application/octet-stream" },
      signal: o.signal,
    });
    return { ...unwrap(r), created: r.response.status === 201 };
  }

  /** POST /v1/files/edit: exact text replace (409 edit_no_match; edit_ambiguous with `details.count`). */
  async editFile(req: FileEditRequest, opts: CallOptions = {}): Promise<FileEdited> {
    return unwrap(await this.api.POST("/v1/files/edit", { body: req, signal: opts.signal }));
  }

  /** POST /v1/files/mkdir: `created` false when it existed (parents). */
  async mkdir(path: string, o: { parents?: boolean; mode?: string } & CallOptions = {}): Promise<FileMade> {
    const body: S["FileMkdirRequest"] = { path };
    if (o.parents !== undefined) body.parents = o.parents;
    if (o.mode !== undefined) body.mode = o.mode;
    return unwrap(await this.api.POST("/v1/files/mkdir", { body, signal: o.signal }));
  }

  /** POST /v1/files/move: renames, never replacing `to` unless `overwrite`. */
  async move(from: string, to: string, o: { overwrite?: boolean } & CallOptions = {}): Promise<FileMoved> {
    return unwrap(await this.api.POST("/v1/files/move", { body: { from, to, overwrite: o.overwrite ?? false }, signal: o.signal }));
  }

  /** DELETE /v1/files: a file, a link, an empty directory, or with `recursive` a tree. */
  async remove(path: string, o: { recursive?: boolean } & CallOptions = {}): Promise<FileRemoved> {
    const query: { path: string; recursive?: boolean } = { path };
    if (o.recursive) query.recursive = true;
    return unwrap(await this.api.DELETE("/v1/files", { params: { query }, signal: o.signal }));
  }

  /**
   * GET /v1/files/archive: a directory as tar (or tar.zst) as it streams.
   * On Node its trailers (status, warnings) are read too and checked
   * against the bytes; through fetch there are none (null).
   */
  async archive(path: string, o: ArchiveOptions = {}): Promise<ArchiveStream> {
    const url = new URL(`${this.baseUrl}/v1/files/archive`);
    url.searchParams.set("path", path);
    const q: Array<[string, string | number | undefined]> = [
      ["format", o.format],
      ["max_files", o.maxFiles],
      ["max_file_bytes", o.maxFileBytes],
      ["max_bytes", o.maxBytes],
      ["max_entries_visited", o.maxEntriesVisited],
    ];
    for (const [k, v] of q) if (v !== undefined) url.searchParams.set(k, String(v));
    const onNode = typeof process !== "undefined" && !!process.versions?.node;
    if (onNode && !o.useFetch) {
      return archiveFromNode(url, this.token ? { Authorization: `Bearer ${this.token}` } : {}, o.signal);
    }
    const r = await this.fetchImpl(url, { headers: this.token ? { Authorization: `Bearer ${this.token}` } : {}, signal: o.signal });
    if (!r.ok) throw ShellctlError.fromParts(r.status, r.headers.get("X-Request-Id"), await r.text());
    return archiveFromFetch(r);
  }

  /**
   * GET /v1/files/watch: changes beneath a directory, `ready` first. Stop it
   * with `break` or the signal. A broken connection is not resumed: watch
   * again and list the directory.
   */
  async *watch(path: string, o: { recursive?: boolean } & CallOptions = {}): AsyncGenerator<WatchEvent> {
    const query: { path: string; recursive?: boolean } = { path };
    if (o.recursive === false) query.recursive = false;
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(o.signal?.reason);
    o.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const r = await this.api.GET("/v1/files/watch", { params: { query }, parseAs: "stream", signal: ctl.signal });
      if (r.error !== undefined || !r.response.ok || !r.data) throw ShellctlError.fromAnswer(r.response, r.error);
      yield* watchEvents(r.data as unknown as ReadableStream<Uint8Array>);
    } finally {
      o.signal?.removeEventListener("abort", onAbort);
      ctl.abort();
    }
  }

  // --- egress credentials (docs/egress.md) ---

  /**
   * PUT /v1/prepare: registers (replaces) a session's credentials with the
   * egress proxy; jobs run with its `session_id` hold placeholders only.
   * Needs `serve --egress-proxy` (else 409 egressproxy_disabled).
   */
  async prepare(req: PrepareRequest, opts: CallOptions = {}): Promise<S["Prepared"]> {
    return unwrap(await this.api.PUT("/v1/prepare", { body: req, signal: opts.signal }));
  }

  /** DELETE /v1/prepare/{session_id}: drops them (404 not_found: there were none). */
  async unprepare(sessionId: string, opts: CallOptions = {}): Promise<S["Unprepared"]> {
    return unwrap(await this.api.DELETE("/v1/prepare/{session_id}", { params: { path: { session_id: sessionId } }, signal: opts.signal }));
  }

  // --- the server ---

  /** GET /healthz */
  async health(opts: CallOptions = {}): Promise<{ status: "ok" }> {
    return unwrap(await this.api.GET("/healthz", { signal: opts.signal }));
  }

  /** GET /v1/info: version, kernel, Landlock, cgroup, policy and limits. */
  async info(opts: CallOptions = {}): Promise<Info> {
    return unwrap(await this.api.GET("/v1/info", { signal: opts.signal }));
  }

  /** GET /v1/openapi.json: the document these types were generated from, as served. */
  async openapi(opts: CallOptions = {}): Promise<Record<string, unknown>> {
    return unwrap(await this.api.GET("/v1/openapi.json", { signal: opts.signal })) as Record<string, unknown>;
  }

  /** GET /metrics: Prometheus text. */
  async metrics(opts: CallOptions = {}): Promise<string> {
    return unwrap(await this.api.GET("/metrics", { parseAs: "text", signal: opts.signal }));
  }

  // --- snapshots of Home ---

  /** POST /v1/snapshot/save: Home as a tar.zst archive. */
  async snapshotSave(excludes?: string[], opts: CallOptions = {}): Promise<Uint8Array> {
    const r = await this.api.POST("/v1/snapshot/save", {
      body: excludes ? { excludes } : undefined,
      parseAs: "arrayBuffer",
      signal: opts.signal,
    });
    return new Uint8Array(unwrap(r));
  }

  /** POST /v1/snapshot/restore: writes an archive from snapshotSave into Home. */
  async snapshotRestore(archive: Uint8Array, opts: CallOptions = {}): Promise<RestoreResult> {
    const r = await this.api.POST("/v1/snapshot/restore", {
      // The document types the body as a string (binary); it goes as bytes.
      body: archive as unknown as string,
      bodySerializer: (b: unknown) => b as BodyInit,
      headers: { "Content-Type": "application/octet-stream" },
      signal: opts.signal,
    });
    return unwrap(r);
  }
}

// unwrap returns an answer's body or throws its error envelope.
function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.error !== undefined || !r.response.ok) throw ShellctlError.fromAnswer(r.response, r.error);
  return r.data as T;
}

function window(body: JobResult, response: Response): JobWindow {
  const iw = response.headers.get("X-Shellctl-Input-Wait");
  return {
    ...body,
    inputWait: iw === null ? null : iw === "1",
    replayed: response.headers.get("X-Shellctl-Idempotent-Replay") === "true",
  };
}
