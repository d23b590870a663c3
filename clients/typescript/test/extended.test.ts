// Files, stdin pipes, egress credentials and attach through
// @shellctl/client, against a real server (harness.ts), each with its errors.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, symlinkSync } from "node:fs";
import path from "node:path";
import { WebSocket as WsWebSocket } from "ws";
import {
  ShellctlClient,
  ShellctlError,
  InputBackpressureError,
  ArchiveError,
  type AttachMessage,
  type JobWindow,
  type WatchEvent,
} from "../src/index.js";
import { startServer, waitDone as waitDoneOf, CuttingProxy, type TestServer } from "./harness.js";

let srv: TestServer;
let c: ShellctlClient;

before(async () => {
  srv = await startServer();
  c = srv.client;
});
after(async () => {
  await srv?.stop();
});

// waitDone waits (server-side, no polling) until the job ends.
const waitDone = (id: string): Promise<JobWindow> => waitDoneOf(c, id);

// started runs a stdio job that has started (its run answers once "up" is
// out) and then sleeps without reading its stdin; a job ended before it
// started is not what these tests are about.
async function started(stdin?: "pipe"): Promise<JobWindow> {
  const r = await c.run({ script: "echo up; exec sleep 300", mode: "stdio", timeout: 30, idle_flush_seconds: 0.05, ...(stdin ? { stdin } : {}) });
  assert.equal(r.output, "up\n");
  return r;
}

async function rejectsWith(p: Promise<unknown>, status: number, code: string): Promise<ShellctlError> {
  let got: ShellctlError | undefined;
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ShellctlError, `want a ShellctlError, got ${String(err)}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    got = err;
    return true;
  });
  return got!;
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

test("files: write, read with a range and an ETag, stat, list", async () => {
  const data = new Uint8Array(256_000).map((_, i) => i % 256);
  const w = await c.writeFile("ts/a.bin", data, { mkdirs: true, mode: 0o600 });
  assert.equal(w.created, true);
  assert.equal(w.size, data.length);
  assert.equal(w.sha256, sha256(data));
  assert.deepEqual(new Uint8Array(readFileSync(path.join(srv.home, "ts", "a.bin"))), data, "on disk, byte-exact");

  const all = await c.readFile("ts/a.bin");
  assert.equal(all.status, 200);
  assert.equal(all.length, data.length);
  assert.ok(all.etag);
  assert.deepEqual(await all.bytes(), data);
  const part = await c.readFile("ts/a.bin", { range: { start: 10, end: 19 } });
  assert.equal(part.status, 206);
  assert.equal(part.contentRange, `bytes 10-19/${data.length}`);
  assert.deepEqual(await part.bytes(), data.subarray(10, 20));
  const tail = await c.readFile("ts/a.bin", { range: { start: data.length - 3 } });
  assert.deepEqual(await tail.bytes(), data.subarray(data.length - 3));
  const same = await c.readFile("ts/a.bin", { ifNoneMatch: all.etag! });
  assert.equal(same.status, 304);
  assert.equal(same.body, null);

  const st = await c.stat("ts/a.bin");
  assert.equal(st.type, "file");
  assert.equal(st.size, data.length);
  assert.equal(st.mode, "0600");
  symlinkSync("a.bin", path.join(srv.home, "ts", "link"));
  assert.equal((await c.stat("ts/link")).type, "file");
  const ln = await c.stat("ts/link", { follow: false });
  assert.equal(ln.type, "symlink");
  assert.equal(ln.link_target, "a.bin");
  const ls = await c.listDir("ts");
  assert.deepEqual(ls.entries.map((e) => e.name), ["a.bin", "link"]);
  assert.equal(ls.truncated, false);
  assert.equal((await c.listDir("ts", { limit: 1 })).entries.length, 1);

  // A stream body is sent as it is read.
  const body = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(new TextEncoder().encode("re"));
      ctl.enqueue(new TextEncoder().encode("placed"));
      ctl.close();
    },
  });
  const w2 = await c.writeFile("ts/a.bin", body, { ifMatch: all.etag! });
  assert.equal(w2.created, false);
  assert.equal(await (await c.readFile("ts/a.bin")).text(), "replaced");
  assert.equal((await c.stat("ts/a.bin")).mode, "0600", "the replaced file's mode is kept");
});

test("files: preconditions (412) and the walls (403, 404, 409)", async () => {
  await c.writeFile("pre.txt", "one");
  const old = (await c.readFile("pre.txt")).etag!;
  await c.writeFile("pre.txt", "two");
  await rejectsWith(c.writeFile("pre.txt", "three", { ifMatch: old }), 412, "precondition_failed");
  await rejectsWith(c.writeFile("pre.txt", "three", { ifNoneMatch: "*" }), 412, "precondition_failed");
  assert.equal(await (await c.readFile("pre.txt")).text(), "two", "nothing written by a failed precondition");
  assert.equal((await c.writeFile("fresh.txt", "x", { ifNoneMatch: "*" })).created, true);

  await rejectsWith(c.readFile("/etc/passwd"), 403, "path_not_allowed");
  await rejectsWith(c.writeFile("../outside.txt", "x"), 403, "path_not_allowed");
  await rejectsWith(c.stat(srv.stateDir), 403, "path_not_allowed");
  await rejectsWith(c.stat("no/such/file"), 404, "not_found");
  await rejectsWith(c.readFile("."), 409, "not_a_regular_file");
});

test("files: edit, mkdir, move, remove", async () => {
  await c.writeFile("ed/notes.txt", "alpha beta alpha\n", { mkdirs: true });
  const amb = await rejectsWith(c.editFile({ path: "ed/notes.txt", old_text: "alpha", new_text: "gamma" }), 409, "edit_ambiguous");
  assert.equal(amb.details.count, 2);
  await rejectsWith(c.editFile({ path: "ed/notes.txt", old_text: "delta", new_text: "x" }), 409, "edit_no_match");
  const e = await c.editFile({ path: "ed/notes.txt", old_text: "alpha", new_text: "gamma", replace_all: true });
  assert.equal(e.replacements, 2);
  assert.equal(await (await c.readFile("ed/notes.txt")).text(), "gamma beta gamma\n");

  assert.equal((await c.mkdir("ed/sub/deeper")).created, true);
  assert.equal((await c.mkdir("ed/sub/deeper")).created, false);
  await rejectsWith(c.mkdir("ed/sub/deeper", { parents: false }), 409, "already_exists");
  await c.writeFile("ed/other.txt", "o");
  await rejectsWith(c.move("ed/notes.txt", "ed/other.txt"), 409, "already_exists");
  await c.move("ed/notes.txt", "ed/sub/notes.txt");
  await c.move("ed/other.txt", "ed/sub/notes.txt", { overwrite: true });
  assert.equal(await (await c.readFile("ed/sub/notes.txt")).text(), "o");
  await rejectsWith(c.remove("ed/sub"), 409, "dir_not_empty");
  assert.equal((await c.remove("ed", { recursive: true })).removed, 4);
  await rejectsWith(c.stat("ed"), 404, "not_found");
});

test("files: archive streams, its trailers are read on Node and checked; fetch has none", async () => {
  await c.writeFile("arch/a.txt", "aaa", { mkdirs: true });
  await c.writeFile("arch/d/b.txt", "bb", { mkdirs: true });
  symlinkSync("/etc/shadow", path.join(srv.home, "arch", "evil"));
  execFileSync("mkfifo", [path.join(srv.home, "arch", "fifo")]);
  const a = await c.archive("arch");
  const { bytes, trailers } = await a.collect();
  assert.ok(trailers);
  assert.equal(trailers.status, "ok");
  assert.equal(trailers.files, 2);
  assert.equal(trailers.bytes, bytes.length);
  assert.equal(trailers.sha256, sha256(bytes));
  assert.deepEqual(trailers.warnings.map((w) => [w.kind, w.path]), [["not_a_regular_file", "fifo"]]);
  // The tar's names: a.txt, d/, d/b.txt and the link itself (not followed).
  const names = tarNames(bytes);
  assert.deepEqual(names.sort(), ["a.txt", "d/", "d/b.txt", "evil"]);

  const cut = await c.archive("arch", { maxFiles: 1 });
  const t2 = (await cut.collect()).trailers!;
  assert.equal(t2.status, "truncated");
  assert.ok(t2.warnings.some((w) => w.kind === "max_files"));
  const zst = await c.archive("arch", { format: "tar.zst" });
  const z = await zst.collect();
  assert.deepEqual([...z.bytes.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd]);
  assert.equal(z.trailers!.status, "ok");

  const viaFetch = await c.archive("arch", { useFetch: true });
  const f = await viaFetch.collect();
  assert.deepEqual(tarNames(f.bytes).sort(), names.sort(), "the same bytes through fetch");
  assert.equal(f.trailers, null, "fetch hands over no trailers");

  await rejectsWith(c.archive("/etc"), 403, "path_not_allowed");
  await rejectsWith(c.archive("arch", { format: "zip" as "tar" }), 400, "invalid_request");
});

test("files: an archive cut before its trailers is an ArchiveError, never a success", async () => {
  // Enough to outlast the answer's head and first chunk: the cut falls
  // inside the tar, long before the trailers.
  await c.writeFile("big/blob.bin", new Uint8Array(2 << 20).fill(7), { mkdirs: true });
  const proxy = new CuttingProxy(new URL(srv.url), [{ cutAfter: 300_000 }]);
  const via = new ShellctlClient({ baseUrl: await proxy.listen(), token: srv.token });
  try {
    const a = await via.archive("big");
    await assert.rejects(a.collect(), (err: unknown) => err instanceof ArchiveError && /cut/.test(err.message));
    await assert.rejects(a.trailers(), ArchiveError);
  } finally {
    await proxy.close();
  }
});

test("files: watch reports a write, and its errors", async () => {
  await c.mkdir("watched");
  const seen: WatchEvent[] = [];
  for await (const ev of c.watch("watched")) {
    seen.push(ev);
    if (ev.event === "ready") await c.writeFile("watched/new.txt", "hi");
    if (ev.event === "change" && ev.op === "create" && ev.path.endsWith("/watched/new.txt")) break;
  }
  assert.equal(seen[0].event, "ready");
  const last = seen[seen.length - 1];
  assert.equal(last.event === "change" && last.type, "file");
  await rejectsWith(c.watch("no-such-dir").next(), 404, "not_found");
  await rejectsWith(c.watch("/etc").next(), 403, "path_not_allowed");
});

test("pipes: bytes through cat, eof; backpressure says what was taken; refusals", async () => {
  const r = await c.run({ script: "exec cat", mode: "stdio", stdin: "pipe", timeout: 0.001 });
  assert.equal((await c.record(r.job_id)).stdin, "pipe");
  const data = new Uint8Array(256).map((_, i) => i);
  await c.inputBytes(r.job_id, data, { timeout: 0 });
  const w = await c.input(r.job_id, { eof: true, offset: 0, timeout: 30 });
  const done = w.done ? w : await waitDone(r.job_id);
  assert.equal(done.status, "exited");
  assert.equal(done.exit_code, 0);
  assert.deepEqual((await c.stream(r.job_id).collect()).bytes, data, "byte-exact, nothing added");
  await rejectsWith(c.input(r.job_id, { text: "late" }), 409, "job_not_running");

  // The job never reads: the pipe (64 KiB) fills, the rest waits.
  const s = await started("pipe");
  const big = new Uint8Array(1 << 20).fill(0x78);
  await assert.rejects(c.inputBytes(s.job_id, big, { eof: true, timeout: 1 }), (err: unknown) => {
    assert.ok(err instanceof InputBackpressureError, String(err));
    assert.equal(err.status, 409);
    assert.equal(err.code, "input_backpressure");
    assert.ok(err.taken > 0 && err.taken < big.length, String(err.taken));
    assert.equal(err.details.taken, err.taken);
    return true;
  });
  assert.equal((await c.record(s.job_id)).stdin, "pipe", "eof was not applied");
  await c.input(s.job_id, { eof: true, timeout: 0 }).catch(() => {});
  await c.terminate(s.job_id, 0);

  await rejectsWith(c.run({ script: "true", stdin: "pipe" }), 422, "validation_error");
  const plain = await started();
  await rejectsWith(c.inputBytes(plain.job_id, new Uint8Array([1])), 409, "input_unsupported");
  await c.terminate(plain.job_id, 0);
});

test("pipes: stdin_closed after eof", async () => {
  const r = await started("pipe");
  await c.input(r.job_id, { eof: true, timeout: 0 });
  await rejectsWith(c.input(r.job_id, { text: "more" }), 409, "stdin_closed");
  await c.terminate(r.job_id, 0);
});

const cred = {
  provider: "github",
  name: "token",
  value: "ghp_ts_client_test_value",
  inject: { type: "http-header" as const, config: { name: "Authorization", expr: "Bearer {{.Value}}", domains: ["api.github.com"] } },
};

test("egress: prepare, a job of the session holds the placeholder, unprepare", async () => {
  assert.deepEqual(await c.prepare({ session_id: "ts-s1", credentials: [cred] }), { registered: 1 });
  assert.deepEqual(await c.prepare({ session_id: "ts-s1", credentials: [cred] }), { registered: 1 }, "a second PUT replaces");
  const r = await c.run({ script: "echo $SECRET_GITHUB_TOKEN", mode: "stdio", timeout: 30, session_id: "ts-s1" });
  assert.equal(r.output, "__secret:github/token__\n");
  const rec = await c.record(r.job_id);
  assert.deepEqual((rec as unknown as { egress: { credentials: unknown } }).egress.credentials, [{ provider: "github", name: "token" }]);
  assert.ok(!JSON.stringify(rec).includes(cred.value));
  assert.deepEqual(await c.unprepare("ts-s1"), { removed: 1 });
  await rejectsWith(c.unprepare("ts-s1"), 404, "not_found");
  await rejectsWith(c.prepare({ session_id: "bad id!", credentials: [cred] }), 422, "validation_error");
  await rejectsWith(c.prepare({ session_id: "ts-s2", credentials: [] }), 400, "invalid_request");
});

// lspFrame frames a body as a language server does (Content-Length).
function lspFrame(body: Uint8Array): Uint8Array {
  const head = new TextEncoder().encode(`Content-Length: ${body.length}\r\n\r\n`);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

// lspTake takes the framed messages off the front of buf; the rest stays.
function lspTake(buf: Buffer<ArrayBufferLike>): { bodies: Buffer[]; rest: Buffer } {
  const bodies: Buffer[] = [];
  for (;;) {
    const end = buf.indexOf("\r\n\r\n");
    if (end < 0) break;
    const n = Number(buf.subarray(0, end).toString("latin1").split(":")[1]);
    if (buf.length < end + 4 + n) break;
    bodies.push(buf.subarray(end + 4, end + 4 + n));
    buf = buf.subarray(end + 4 + n);
  }
  return { bodies, rest: buf };
}

test("attach: a language-server-like round trip through cat over a stdin pipe, byte-exact", async () => {
  // cat stands in for a language server: what goes in framed comes back
  // framed, byte for byte, whatever the WebSocket messages' boundaries;
  // one body is not UTF-8 at all.
  const r = await c.run({ script: "exec cat", mode: "stdio", stdin: "pipe", timeout: 0.001 });
  const enc = new TextEncoder();
  const bodies = [
    enc.encode(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { rootUri: "file:///w" } })),
    enc.encode(JSON.stringify({ jsonrpc: "2.0", method: "textDocument/didOpen", params: { text: "é ✓ 𝄞" } })),
    new Uint8Array(768).map((_, i) => i % 256),
    new Uint8Array(280_000).map((_, i) => [0xff, 0xfe, 0x00, 0x80][i % 4]),
  ];
  const conn = await c.attach(r.job_id, { offset: 0 });
  const sending = (async () => {
    for (const b of bodies) await conn.send(lspFrame(b));
  })();
  let buf: Buffer<ArrayBufferLike> = Buffer.alloc(0);
  const got: Buffer[] = [];
  const after: AttachMessage[] = [];
  for await (const m of conn) {
    if (got.length === bodies.length) {
      after.push(m);
      continue;
    }
    assert.equal(m.type, "output");
    if (m.type !== "output") continue;
    buf = Buffer.concat([buf, m.bytes]);
    const t = lspTake(buf);
    got.push(...t.bodies);
    buf = t.rest;
    if (got.length === bodies.length) {
      await sending;
      await conn.eof();
    }
  }
  assert.deepEqual(got.map((b) => new Uint8Array(b)), bodies);
  assert.equal(after.length, 1, JSON.stringify(after));
  const ex = after[0];
  assert.equal(ex.type, "exit");
  assert.equal(conn.exit?.status, "exited");
  assert.equal(conn.exit?.exit_code, 0);
  assert.equal(conn.exit?.offset, bodies.reduce((n, b) => n + lspFrame(b).length, 0));
});

/**
 * A browser's WebSocket, as far as the client can tell: the standard
 * constructor (url, protocols) and interface only, no header, no send
 * callback, no pause (ws underneath, as Node 20 has no global one).
 */
class StandardWebSocket {
  private readonly ws: WsWebSocket;
  constructor(url: string, protocols: string[]) {
    this.ws = new WsWebSocket(url, protocols);
  }
  get binaryType(): string {
    return this.ws.binaryType;
  }
  set binaryType(v: string) {
    this.ws.binaryType = v as "arraybuffer";
  }
  get readyState(): number {
    return this.ws.readyState;
  }
  get protocol(): string {
    return this.ws.protocol;
  }
  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }
  send(data: string | Uint8Array): void {
    this.ws.send(data);
  }
  close(code?: number, reason?: string): void {
    this.ws.close(code, reason);
  }
  addEventListener(type: string, fn: (ev: any) => void): void {
    this.ws.addEventListener(type as "message", fn);
  }
}

test("attach: a pty job with resize, through a standard WebSocket (the token as a subprotocol entry)", async () => {
  const r = await c.run({ script: 'read line; echo "got $line"; stty size; read x', timeout: 0.001, terminal: { cols: 80, rows: 24 } });
  const conn = await c.attach(r.job_id, { WebSocket: StandardWebSocket });
  const first = await conn.next();
  assert.equal(first?.type, "redraw");
  await conn.resize(100, 30);
  await conn.send("hello\r");
  let out = "";
  for await (const m of conn) {
    if (m.type === "output") out += Buffer.from(m.bytes).toString("latin1");
    if (out.includes("30 100")) break;
  }
  assert.match(out, /got hello/);
  await conn.send("\r");
  let last: AttachMessage | null = null;
  for await (const m of conn) last = m;
  assert.equal(last?.type, "exit");
  // A standard WebSocket cannot send the header.
  await assert.rejects(c.attach(r.job_id, { WebSocket: StandardWebSocket, auth: "header" }), /cannot send an Authorization header/);
});

test("attach: refusals are the API's errors (ws), a bare close (standard WebSocket)", async () => {
  await rejectsWith(c.attach("no-such-job", { WebSocket: WsWebSocket }), 404, "job_not_found");
  const plain = await started();
  await rejectsWith(c.attach(plain.job_id, { WebSocket: WsWebSocket }), 409, "input_unsupported");
  await c.terminate(plain.job_id, 0);
  const bad = new ShellctlClient({ baseUrl: srv.url, token: "wrong" });
  await assert.rejects(bad.attach(plain.job_id, { WebSocket: WsWebSocket }), (e: unknown) => e instanceof ShellctlError && e.status === 401);
  // The token in the subprotocol list is checked as the header is.
  await assert.rejects(bad.attach(plain.job_id, { WebSocket: WsWebSocket, auth: "subprotocol" }), (e: unknown) => e instanceof ShellctlError && e.status === 401);
  await assert.rejects(c.attach("no-such-job", { WebSocket: StandardWebSocket }), (e: unknown) => e instanceof Error && !(e instanceof ShellctlError));
});

// tarNames lists the names of a tar's entries (ustar headers, 512-byte blocks).
function tarNames(tar: Uint8Array): string[] {
  const names: string[] = [];
  for (let at = 0; at + 512 <= tar.length; ) {
    const h = tar.subarray(at, at + 512);
    if (h.every((b) => b === 0)) break;
    const field = (o: number, n: number) => Buffer.from(h.subarray(o, o + n)).toString("latin1").replace(/\0.*$/s, "");
    const prefix = field(345, 155);
    const name = prefix ? `${prefix}/${field(0, 100)}` : field(0, 100);
    const size = parseInt(field(124, 12).trim() || "0", 8);
    const type = field(156, 1);
    if (type !== "x" && type !== "g") names.push(name);
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return names;
}
