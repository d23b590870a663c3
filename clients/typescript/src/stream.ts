// GET /v1/jobs/{id}/stream (docs/stream.md) as an async iterator of decoded
// events, resumed with Last-Event-ID when the connection breaks before the
// `end` event. The generated types do not reach here: the answer is an event
// stream, not a JSON body.

import { ShellctlError } from "./errors.js";

/** A status change; the first event of every connection. */
export interface StateEvent {
  type: "state";
  status: string;
  done: boolean;
  exit_code: number | null;
}

/** Bytes of the channel's file: [offset, end). */
export interface OutputEvent {
  type: "output";
  /** Byte offset of the chunk's first byte. */
  offset: number;
  /** Byte offset just after the chunk (the event's id). */
  end: number;
  /** The chunk, byte for byte. */
  bytes: Uint8Array;
  /** The chunk as text when the server sent it as text (valid UTF-8). */
  text?: string;
}

/** A pty job started or stopped waiting for input. */
export interface InputWaitEvent {
  type: "input_wait";
  waiting: boolean;
}

/** The job is done and every byte was sent; the stream closes after it. */
export interface EndEvent {
  type: "end";
  status: string;
  exit_code: number | null;
  signal: string | null;
  reason: string | null;
  /** The file's final size. */
  offset: number;
}

/** An event this client does not know yet (a newer server's), passed on as is. */
export interface OtherEvent {
  type: "other";
  event: string;
  data: string;
}

export type StreamEvent = StateEvent | OutputEvent | InputWaitEvent | EndEvent | OtherEvent;

export interface StreamOptions {
  /** Byte offset to start from (default 0). */
  offset?: number;
  /** `output` (default) or `stderr` (stdio jobs). */
  channel?: "output" | "stderr";
  /** How long to keep reconnecting after a broken connection, in ms (default 60 000). */
  giveUpMs?: number;
  /** Called before each reconnect with the offset it resumes from and the cause. */
  onReconnect?: (offset: number, cause: unknown) => void;
  /** Ends the stream (the iterator then throws the abort reason). */
  signal?: AbortSignal;
}

/**
 * Opens one connection: resolves to the event stream's body, or rejects
 * with a ShellctlError for an API answer (which is never retried) or any
 * other error for a network fault (retried).
 */
export type Connect = (lastEventId: number | null, signal: AbortSignal) => Promise<ReadableStream<Uint8Array>>;

const backoffFirstMs = 50;
const backoffMaxMs = 2000;

/**
 * The stream of one job. Iterate it with `for await`; its output chunks
 * always tile the file from the offset asked: a reconnect resumes right
 * after the last chunk returned, and a chunk that does not start there is an
 * error, never a gap or a repeat.
 */
export class JobStream implements AsyncIterable<StreamEvent> {
  /** The offset after the last output chunk returned. */
  next: number;
  /** How many times the connection was made again. */
  reconnects = 0;
  private readonly connect: Connect;
  private readonly opts: StreamOptions;
  private ended = false;

  constructor(connect: Connect, opts: StreamOptions = {}) {
    this.connect = connect;
    this.opts = opts;
    this.next = opts.offset ?? 0;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamEvent> {
    let first = true;
    let brokenSince = 0;
    let delay = backoffFirstMs;
    const giveUp = this.opts.giveUpMs ?? 60_000;
    while (!this.ended) {
      const ctl = new AbortController();
      const outer = this.opts.signal;
      const onAbort = () => ctl.abort(outer?.reason);
      outer?.addEventListener("abort", onAbort, { once: true });
      try {
        outer?.throwIfAborted();
        // The first connection asks for the offset (query); every later one
        // says where it got to, as an EventSource would.
        const body = await this.connect(first ? null : this.next, ctl.signal);
        first = false;
        let gotEvent = false;
        for await (const ev of parseEvents(body)) {
          const out = this.decode(ev);
          if (out === null) continue;
          if (!gotEvent) {
            gotEvent = true;
            brokenSince = 0;
            delay = backoffFirstMs;
          }
          yield out;
          if (out.type === "end") {
            this.ended = true;
            return;
          }
        }
        throw new Error("the stream closed before its end event");
      } catch (err) {
        if (err instanceof ShellctlError || err instanceof StreamOrderError) throw err;
        if (outer?.aborted) throw outer.reason;
        const now = Date.now();
        if (brokenSince === 0) brokenSince = now;
        if (now - brokenSince > giveUp) {
          throw new Error(`stream: gave up reconnecting after ${giveUp} ms at offset ${this.next}: ${String(err)}`, { cause: err });
        }
        first = false;
        this.reconnects++;
        this.opts.onReconnect?.(this.next, err);
        await sleep(delay, outer);
        delay = Math.min(delay * 2, backoffMaxMs);
      } finally {
        outer?.removeEventListener("abort", onAbort);
        ctl.abort();
      }
    }
  }

  /** Reads to the end: every byte from the offset asked, and the end event. */
  async collect(): Promise<{ bytes: Uint8Array; end: EndEvent }> {
    const parts: Uint8Array[] = [];
    for await (const ev of this) {
      if (ev.type === "output") parts.push(ev.bytes);
      if (ev.type === "end") return { bytes: concat(parts), end: ev };
    }
    throw new Error("stream: ended without an end event");
  }

  private decode(ev: RawEvent): StreamEvent | null {
    switch (ev.event) {
      case "output": {
        const d = JSON.parse(ev.data) as { offset: number; text?: string; base64?: string };
        const bytes = d.text !== undefined ? new TextEncoder().encode(d.text) : Buffer.from(d.base64 ?? "", "base64");
        if (d.offset !== this.next) {
          throw new StreamOrderError(`stream: an output chunk starts at ${d.offset}, expected ${this.next}: the chunks would not tile the file`);
        }
        const end = d.offset + bytes.length;
        if (ev.id !== null && Number(ev.id) !== end) {
          throw new StreamOrderError(`stream: an output chunk's id is ${ev.id}, its bytes end at ${end}`);
        }
        this.next = end;
        const out: OutputEvent = { type: "output", offset: d.offset, end, bytes: new Uint8Array(bytes) };
        if (d.text !== undefined) out.text = d.text;
        return out;
      }
      case "state":
        return { type: "state", ...(JSON.parse(ev.data) as Omit<StateEvent, "type">) };
      case "input_wait":
        return { type: "input_wait", ...(JSON.parse(ev.data) as Omit<InputWaitEvent, "type">) };
      case "end":
        return { type: "end", ...(JSON.parse(ev.data) as Omit<EndEvent, "type">) };
      case "":
        return null;
      default:
        return { type: "other", event: ev.event, data: ev.data };
    }
  }
}

/** An output chunk out of order: the server and client disagree, not a network fault. */
export class StreamOrderError extends Error {}

export interface RawEvent {
  event: string;
  id: string | null;
  data: string;
}

// parseEvents splits a text/event-stream body into events (comments and
// keep-alives dropped).
export async function* parseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<RawEvent> {
  const decoder = new TextDecoder();
  let buf = "";
  let event = "";
  let id: string | null = null;
  let data: string[] = [];
  let any = false;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (any) yield { event: event || "message", id, data: data.join("\n") };
          event = "";
          id = null;
          data = [];
          any = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        any = true;
        if (field === "event") event = value;
        else if (field === "id") id = value;
        else if (field === "data") data.push(value);
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
