// GET /v1/jobs/{id}/attach (docs/attach.md): a WebSocket to a job with the
// subprotocol shellctl.attach.v1. Binary messages are bytes (input one way,
// output the other), text messages JSON control. The global WebSocket is
// used where there is one (browsers, Node 22 and later); on Node 20 the
// `ws` package, which can also send the token as a header and hold the
// sender back while the socket is full.

import { ShellctlError } from "./errors.js";

export const ATTACH_SUBPROTOCOL = "shellctl.attach.v1";

/** The server takes at most 1 MiB a message: longer input goes as several. */
const maxInputMessage = 1 << 20;
/** Messages queued unread before a `ws` socket stops reading (flow control). */
const highWater = 64;

export type AttachMessage =
  /** Bytes the job wrote: a pty job's raw terminal, or output.log. */
  | { type: "output"; bytes: Uint8Array }
  /** pty: the next output message redraws the screen; raw bytes from raw_offset follow. */
  | { type: "redraw"; raw_offset: number }
  /** pty: the raw bytes from raw_offset follow (the reconnect's offset was still kept). */
  | { type: "resume"; raw_offset: number }
  /** An input or control message the server could not do; the socket stays open. */
  | { type: "error"; code: string; message: string }
  /** The job ended and every byte was sent; a normal close (1000) follows. */
  | AttachExit
  /** A control message this client does not know yet (a newer server's). */
  | { type: "other"; data: Record<string, unknown> };

export interface AttachExit {
  type: "exit";
  status: string;
  exit_code: number | null;
  signal: string | null;
  /** output.log's size. */
  offset: number;
  /** pty: where the raw bytes ended. */
  raw_offset?: number;
}

export interface AttachOptions {
  /** output.log from this byte (a stdio job's stdout; default: the current end). */
  offset?: number;
  /** pty: the raw terminal bytes from this offset (a reconnect). */
  rawOffset?: number;
  /**
   * How the token goes: `header` (Authorization; needs the `ws` package, the
   * default on Node without a global WebSocket) or `subprotocol`
   * (`bearer.<token>` in the subprotocol list, as a browser must send it;
   * the default with the global WebSocket).
   */
  auth?: "header" | "subprotocol";
  /**
   * A WebSocket class of your own: the standard one's constructor
   * `(url, protocols)`; `ws`'s also takes `{headers}`. Default: the global
   * WebSocket, else `ws`.
   */
  WebSocket?: unknown;
  signal?: AbortSignal;
}

/** The attach closed without the exit message (1001: the server is going away; attach again with rawOffset). */
export class AttachClosedError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
  ) {
    super(`attach: the connection closed (${code} ${JSON.stringify(reason)}) before the job's exit message`);
    this.name = "AttachClosedError";
  }
}

// The part of the WebSocket interface used here: the standard one's, with
// `ws`'s extras optional.
interface Socket {
  binaryType: string;
  readyState: number;
  protocol: string;
  bufferedAmount: number;
  send(data: string | Uint8Array, cb?: (err?: Error) => void): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, fn: (ev: any) => void): void;
  on?(type: string, fn: (...args: any[]) => void): void;
  pause?(): void;
  resume?(): void;
  isPaused?: boolean;
}

export async function openAttach(url: URL, token: string | undefined, opts: AttachOptions): Promise<AttachConnection> {
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  type Ctor = new (url: string, protocols: string[], options?: unknown) => Socket;
  let Ctor = opts.WebSocket as Ctor | undefined;
  let isWs = false;
  if (!Ctor) {
    const g = (globalThis as { WebSocket?: unknown }).WebSocket;
    if (g) Ctor = g as Ctor;
    else {
      Ctor = (await import("ws")).WebSocket as unknown as Ctor;
      isWs = true;
    }
  } else {
    isWs = typeof (Ctor as { prototype?: { pause?: unknown } }).prototype?.pause === "function";
  }
  const auth = opts.auth ?? (isWs ? "header" : "subprotocol");
  if (auth === "header" && !isWs) {
    throw new Error("attach: a standard WebSocket cannot send an Authorization header: use auth \"subprotocol\" (or the ws package)");
  }
  const protocols = [ATTACH_SUBPROTOCOL];
  if (token && auth === "subprotocol") protocols.push(`bearer.${token}`);
  const sock = isWs
    ? new Ctor!(url.toString(), protocols, { headers: token && auth === "header" ? { Authorization: `Bearer ${token}` } : {} })
    : new Ctor!(url.toString(), protocols);
  sock.binaryType = "arraybuffer";
  const conn = new AttachConnection(sock, isWs);
  await conn.opened(opts.signal);
  return conn;
}

/**
 * One attach. Iterate it (`for await`) for what the job writes; `send`,
 * `resize` and `eof` meanwhile. The iteration ends after the exit message
 * and the normal close; any other close throws AttachClosedError.
 */
export class AttachConnection implements AsyncIterable<AttachMessage> {
  /** The exit message, once received. */
  exit: AttachExit | null = null;
  private readonly queue: AttachMessage[] = [];
  private waiter: (() => void) | null = null;
  private closedWith: { code: number; reason: string } | null = null;
  private failure: unknown = null;
  private openWait: { resolve(): void; reject(e: unknown): void } | null = null;

  constructor(
    private readonly sock: Socket,
    private readonly isWs: boolean,
  ) {
    sock.addEventListener("open", () => {
      this.openWait?.resolve();
      this.openWait = null;
    });
    sock.addEventListener("message", (ev: { data: ArrayBuffer | string }) => {
      this.queue.push(decode(ev.data));
      if (this.isWs && this.queue.length >= highWater && !sock.isPaused) sock.pause?.();
      this.wake();
    });
    sock.addEventListener("close", (ev: { code: number; reason: string }) => {
      this.closedWith = { code: ev.code, reason: String(ev.reason ?? "") };
      this.openWait?.reject(this.failure ?? new Error(`attach: the WebSocket closed (${ev.code}) before it opened (a standard WebSocket does not say why: check the job id, that it is a pty job or has a stdin pipe, and the token)`));
      this.openWait = null;
      this.wake();
    });
    sock.addEventListener("error", (ev: { error?: unknown; message?: string }) => {
      this.failure ??= ev.error ?? new Error(`attach: ${ev.message ?? "WebSocket error"}`);
    });
    // ws hands over the answer of a refused upgrade: the API's error.
    sock.on?.("unexpected-response", (_req: unknown, res: import("node:http").IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const rid = res.headers["x-request-id"];
        const err = ShellctlError.fromParts(res.statusCode ?? 0, typeof rid === "string" ? rid : null, Buffer.concat(chunks).toString("utf8"));
        this.failure = err;
        this.openWait?.reject(err);
        this.openWait = null;
        // Ends the handshake ws left open for this handler.
        this.sock.close();
      });
    });
  }

  /** Resolves once the WebSocket is open; rejects with the refusal. */
  opened(signal?: AbortSignal): Promise<void> {
    if (this.sock.readyState === 1) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.openWait = { resolve, reject };
      signal?.addEventListener(
        "abort",
        () => {
          this.close();
          reject(signal.reason);
        },
        { once: true },
      );
    }).then(() => {
      if (this.sock.protocol !== ATTACH_SUBPROTOCOL) {
        this.close();
        throw new Error(`attach: the server answered the subprotocol ${JSON.stringify(this.sock.protocol)}, not ${ATTACH_SUBPROTOCOL}`);
      }
    });
  }

  /**
   * Input bytes (a string goes as UTF-8), byte-exact, in messages of at most
   * 1 MiB. With `ws` it resolves once they were written to the socket, so
   * awaiting it holds the sender back while the job does not read; the
   * standard WebSocket has no such signal (see `bufferedAmount`).
   */
  async send(data: Uint8Array | string): Promise<void> {
    const b = typeof data === "string" ? new TextEncoder().encode(data) : data;
    for (let at = 0; at < b.length; at += maxInputMessage) {
      await this.write(b.subarray(at, at + maxInputMessage));
    }
  }

  /** Sets a pty job's terminal size (a stdio job answers an error message). */
  resize(cols: number, rows: number): Promise<void> {
    return this.write(JSON.stringify({ type: "resize", cols, rows }));
  }

  /** The end of input: a stdio job's stdin pipe closes after every byte sent before; a pty job gets Ctrl-D. */
  eof(): Promise<void> {
    return this.write(JSON.stringify({ type: "eof" }));
  }

  /** Bytes sent but not yet handed to the network. */
  get bufferedAmount(): number {
    return this.sock.bufferedAmount;
  }

  private write(data: Uint8Array | string): Promise<void> {
    if (this.sock.readyState !== 1) {
      return Promise.reject(new AttachClosedError(this.closedWith?.code ?? 1006, "the WebSocket is not open"));
    }
    if (!this.isWs) {
      this.sock.send(data);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => this.sock.send(data, (err) => (err ? reject(err) : resolve())));
  }

  /** The next message, or null after the exit message and the normal close. */
  async next(): Promise<AttachMessage | null> {
    for (;;) {
      const m = this.queue.shift();
      if (m) {
        if (this.isWs && this.sock.isPaused && this.queue.length < highWater / 2) this.sock.resume?.();
        if (m.type === "exit") this.exit = m;
        return m;
      }
      if (this.closedWith) {
        if (this.closedWith.code === 1000 && this.exit) return null;
        if (this.failure instanceof ShellctlError) throw this.failure;
        throw new AttachClosedError(this.closedWith.code, this.closedWith.reason);
      }
      await new Promise<void>((r) => (this.waiter = r));
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<AttachMessage> {
    for (;;) {
      const m = await this.next();
      if (m === null) return;
      yield m;
    }
  }

  /** Leaves the job running: a normal close. */
  close(code = 1000, reason = ""): void {
    if (this.sock.readyState <= 1) this.sock.close(code, reason);
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}

function decode(data: ArrayBuffer | string | Uint8Array): AttachMessage {
  if (typeof data !== "string") {
    return { type: "output", bytes: data instanceof Uint8Array ? data : new Uint8Array(data) };
  }
  const d = JSON.parse(data) as Record<string, unknown> & { type?: string };
  switch (d.type) {
    case "exit":
    case "redraw":
    case "resume":
    case "error":
      return d as unknown as AttachMessage;
    default:
      return { type: "other", data: d };
  }
}
