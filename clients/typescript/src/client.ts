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

  constructor(opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
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
