// The file routes' answers that are not one JSON body (docs/files.md): a
// file's bytes as a stream with its ETag and range, the archive with its
// trailers, and the watch's events.

import { ShellctlError } from "./errors.js";
import { parseEvents } from "./stream.js";

/** GET /v1/files/content: the bytes of a regular file (all, or the range asked). */
export interface FileContent {
  /** 200 (all), 206 (the range asked) or 304 (`ifNoneMatch` named this version: no body). */
  status: 200 | 206 | 304;
  /** The version (inode, size, mtime): `ifMatch` of a write, `ifNoneMatch` of a read. */
  etag: string | null;
  /** Content-Length: the bytes of this answer. */
  length: number | null;
  /** Content-Range of a 206, e.g. `bytes 10-19/4096`. */
  contentRange: string | null;
  /** The bytes as they come; null for a 304. Read it once (or use bytes()/text()). */
  body: ReadableStream<Uint8Array> | null;
  bytes(): Promise<Uint8Array>;
  text(): Promise<string>;
}

export function fileContent(r: Response): FileContent {
  const n = r.headers.get("Content-Length");
  const body = r.status === 304 ? null : r.body;
  const bytes = async () => (body === null ? new Uint8Array(0) : new Uint8Array(await new Response(body).arrayBuffer()));
  return {
    status: r.status as 200 | 206 | 304,
    etag: r.headers.get("ETag"),
    length: n === null ? null : Number(n),
    contentRange: r.headers.get("Content-Range"),
    body,
    bytes,
    text: async () => new TextDecoder().decode(await bytes()),
  };
}

/** One entry of X-Archive-Warnings. */
export interface ArchiveWarning {
  /** `not_a_regular_file`, `changed`, `max_files` …, or `KIND_more` for the ones not listed. */
  kind: string;
  /** Relative to the archived directory. */
  path?: string;
  /** Warnings of this kind in all. */
  count: number;
}

/** The archive's trailers: they, not the status line, say that it succeeded. */
export interface ArchiveTrailers {
  /** `ok`, or `truncated` when a bound stopped it. */
  status: "ok" | "truncated";
  files: number;
  /** The stream's size, checked against the bytes read. */
  bytes: number;
  /** The stream's SHA-256 (hex), checked against the bytes read. */
  sha256: string;
  warnings: ArchiveWarning[];
}

/**
 * GET /v1/files/archive as it streams. Read `body` to its end; then
 * `trailers()` resolves. Where the platform gives no trailers (fetch:
 * browsers, and Node's fetch) it resolves null: the bytes arrived, but
 * whether the server finished cannot be told.
 */
export interface ArchiveStream {
  contentType: string;
  body: ReadableStream<Uint8Array>;
  /**
   * The trailers, once the body was read to its end, checked against the
   * stream (size, SHA-256). Rejects with ArchiveError when the stream was
   * cut before them or does not match them; null without trailer support.
   */
  trailers(): Promise<ArchiveTrailers | null>;
  /** Reads it all: the bytes and the trailers. */
  collect(): Promise<{ bytes: Uint8Array; trailers: ArchiveTrailers | null }>;
}

/** The archive failed: cut before its trailers, or not what they say. */
export class ArchiveError extends Error {}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
  reject(e: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Nobody need ask for the trailers: a failure is then not unhandled.
  promise.catch(() => {});
  return { promise, resolve, reject };
}

function withCollect(contentType: string, body: ReadableStream<Uint8Array>, trailers: () => Promise<ArchiveTrailers | null>): ArchiveStream {
  return {
    contentType,
    body,
    trailers,
    async collect() {
      const bytes = new Uint8Array(await new Response(body).arrayBuffer());
      return { bytes, trailers: await trailers() };
    },
  };
}

/** The archive through fetch: its bytes, no trailers. */
export function archiveFromFetch(r: Response): ArchiveStream {
  const done = deferred<ArchiveTrailers | null>();
  const src = r.body!;
  const body = src.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      flush() {
        done.resolve(null);
      },
    }),
  );
  return withCollect(r.headers.get("Content-Type") ?? "", body, () => done.promise);
}

/**
 * The archive through node:http, which hands over a response's trailers
 * (fetch does not): GET url with headers.
 */
export async function archiveFromNode(url: URL, headers: Record<string, string>, signal?: AbortSignal): Promise<ArchiveStream> {
  const http = await import(url.protocol === "https:" ? "node:https" : "node:http");
  const { createHash } = await import("node:crypto");
  const res = await new Promise<import("node:http").IncomingMessage>((resolve, reject) => {
    const req = http.request(url, { method: "GET", headers: { ...headers, TE: "trailers" }, signal }, resolve);
    req.on("error", reject);
    req.end();
  });
  if (res.statusCode !== 200) {
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const rid = res.headers["x-request-id"];
    throw ShellctlError.fromParts(res.statusCode ?? 0, typeof rid === "string" ? rid : null, Buffer.concat(chunks).toString("utf8"));
  }
  const done = deferred<ArchiveTrailers | null>();
  const hash = createHash("sha256");
  let n = 0;
  const it = res[Symbol.asyncIterator]();
  const body = new ReadableStream<Uint8Array>({
    async pull(ctl) {
      let step: IteratorResult<Buffer>;
      try {
        step = await it.next();
      } catch (err) {
        const e = new ArchiveError(`archive: the stream was cut after ${n} bytes, before its trailers: ${String(err)}`, { cause: err });
        done.reject(e);
        ctl.error(e);
        return;
      }
      if (step.done) {
        try {
          done.resolve(checkTrailers(res.trailers, n, hash.digest("hex")));
          ctl.close();
        } catch (e) {
          done.reject(e);
          ctl.error(e);
        }
        return;
      }
      hash.update(step.value);
      n += step.value.length;
      ctl.enqueue(new Uint8Array(step.value.buffer, step.value.byteOffset, step.value.length));
    },
    cancel(reason) {
      res.destroy();
      done.reject(new ArchiveError(`archive: cancelled after ${n} bytes: ${String(reason)}`));
    },
  });
  return withCollect(String(res.headers["content-type"] ?? ""), body, () => done.promise);
}

function checkTrailers(t: Record<string, string | undefined>, n: number, sha: string): ArchiveTrailers {
  const status = t["x-archive-status"];
  if (status !== "ok" && status !== "truncated") {
    throw new ArchiveError(`archive: the stream ended without an ok trailer (X-Archive-Status ${JSON.stringify(status ?? null)}): a failure`);
  }
  let warnings: ArchiveWarning[];
  try {
    warnings = JSON.parse(t["x-archive-warnings"] || "[]") as ArchiveWarning[];
  } catch (e) {
    throw new ArchiveError(`archive: X-Archive-Warnings does not parse: ${String(e)}`);
  }
  const out: ArchiveTrailers = {
    status,
    files: Number(t["x-archive-files"] ?? 0),
    bytes: Number(t["x-archive-bytes"] ?? -1),
    sha256: t["x-archive-sha256"] ?? "",
    warnings,
  };
  if (out.bytes !== n || out.sha256 !== sha) {
    throw new ArchiveError(`archive: the trailers say ${out.bytes} bytes with SHA-256 ${out.sha256}, the stream read was ${n} bytes with ${sha}`);
  }
  return out;
}

/** The watches are in place: changes from now on are reported. */
export interface WatchReady {
  event: "ready";
  path: string;
  dirs: number;
}

/** A change beneath the watched directory (a move: `rename` of the old name, `create` of the new). */
export interface WatchChange {
  event: "change";
  op: "create" | "write" | "remove" | "rename";
  /** Absolute. */
  path: string;
  type: "file" | "dir";
}

/** Events were lost (the kernel's queue overflowed): list the directory again. */
export interface WatchOverflow {
  event: "overflow";
  path: string;
}

export type WatchEvent = WatchReady | WatchChange | WatchOverflow;

/** Decodes the watch's event stream. */
export async function* watchEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<WatchEvent> {
  for await (const ev of parseEvents(body)) {
    const d = ev.data ? (JSON.parse(ev.data) as Record<string, unknown>) : {};
    if (ev.event === "ready" || ev.event === "change" || ev.event === "overflow") {
      yield { ...d, event: ev.event } as WatchEvent;
    }
  }
}
