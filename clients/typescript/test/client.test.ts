// Every route group of the server today, through @shellctl/client, against
// a real server (harness.ts). The client runs in this test process: jobs
// cannot reach the API (403 forbidden_from_job).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, rmSync, existsSync } from "node:fs";
import path from "node:path";
import { ShellctlClient, ShellctlError, type JobWindow } from "../src/index.js";
import { startServer, waitDone as waitDoneOf, CuttingProxy, repoRoot, type TestServer } from "./harness.js";

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

async function rejectsWith(p: Promise<unknown>, status: number, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ShellctlError, `want a ShellctlError, got ${String(err)}`);
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

test("run, stderr, wait, status, list, tail, terminate, delete", async () => {
  const r = await c.run({ script: "echo hello; echo oops >&2; exit 3", mode: "stdio", timeout: 30 });
  assert.equal(r.done, true);
  assert.equal(r.status, "exited");
  assert.equal(r.exit_code, 3);
  assert.equal(r.output, "hello\n");
  assert.equal(r.inputWait, null, "a stdio job has no X-Shellctl-Input-Wait");
  const e = await c.stderr(r.job_id);
  assert.equal(e.output, "oops\n");

  const long = await c.run({ script: "echo started; exec sleep 300", mode: "stdio", timeout: 5, idle_flush_seconds: 0.2 });
  assert.equal(long.done, false);
  const w = await c.wait(long.job_id, { offset: long.offset, timeout: 0 });
  assert.equal(w.done, false);
  assert.equal(w.offset, long.offset);
  const st = await c.status(long.job_id);
  assert.equal(st.status, "running");
  const running = await c.list({ status: "running" });
  assert.ok(running.some((j) => j.job_id === long.job_id), "list?status=running holds the running job");
  assert.ok(!running.some((j) => j.job_id === r.job_id), "and not the exited one");
  const t = await c.terminate(long.job_id, 1);
  assert.equal(t.done, true);
  assert.equal(t.status, "terminated");

  const seq = await c.run({ script: "seq 1 1000", mode: "stdio", timeout: 30 });
  const tail = await c.tail(seq.job_id, 10);
  assert.ok(tail.output.endsWith("999\n1000\n"), tail.output);
  assert.ok(tail.output.length <= 10);

  await c.delete(long.job_id);
  await rejectsWith(c.status(long.job_id), 404, "job_not_found");
  await rejectsWith(c.delete(long.job_id), 404, "job_not_found");
});

test("input answers when the program waits for it (pty)", async () => {
  const r = await c.run({
    script: 'printf "name? "; read n; echo "hi $n"',
    timeout: 30,
    idle_flush_seconds: 20,
    return_on_input_wait: true,
  });
  assert.equal(r.done, false);
  assert.equal(r.inputWait, true);
  assert.ok(r.output.endsWith("name? "), r.output);
  const a = await c.input(r.job_id, { text: "ada\n", offset: r.offset, timeout: 30 });
  const done = a.done ? a : await waitDone(r.job_id);
  assert.equal(done.exit_code, 0);
  assert.match(a.output, /hi ada/);
});

test("a wrong token is a 401 with the API's code", async () => {
  const bad = new ShellctlClient({ baseUrl: srv.url, token: "wrong" });
  await assert.rejects(bad.list(), (err: unknown) => err instanceof ShellctlError && err.status === 401 && err.code.length > 0 && err.requestId !== null);
});

test("stream: byte-exact, resumed after a dropped connection", async () => {
  const n = 60000;
  const want = Array.from({ length: n }, (_, i) => `${i + 1}\n`).join("");
  const r = await c.run({ script: `seq 1 ${n}`, mode: "stdio", timeout: 30 });
  await waitDone(r.job_id);
  // The first connection is cut 100 000 bytes into its answer: after the
  // first output event (at most 64 KiB of the file), in the middle of the
  // second.
  const proxy = new CuttingProxy(new URL(srv.url), [{ cutAfter: 100_000 }]);
  const via = new ShellctlClient({ baseUrl: await proxy.listen(), token: srv.token });
  try {
    const resumedAt: number[] = [];
    const s = via.stream(r.job_id, { onReconnect: (off) => resumedAt.push(off) });
    const { bytes, end } = await s.collect();
    assert.equal(Buffer.from(bytes).toString("utf8"), want);
    assert.equal(end.status, "exited");
    assert.equal(end.exit_code, 0);
    assert.equal(end.offset, want.length);
    assert.equal(s.reconnects, 1);
    assert.ok(resumedAt[0] > 0 && resumedAt[0] < 100_000, `resumed from ${resumedAt[0]}`);
    assert.equal(proxy.header(0, "Last-Event-ID"), null);
    assert.equal(proxy.header(1, "Last-Event-ID"), String(resumedAt[0]), "the second connection resumes after the last chunk");
  } finally {
    await proxy.close();
  }
});

test("stream: state, input_wait and end events of a live pty job; stderr channel; bad offset", async () => {
  const r = await c.run({ script: 'printf "ready? "; read x; echo "got $x"', timeout: 0.001 });
  const seen: string[] = [];
  let text = "";
  for await (const ev of c.stream(r.job_id)) {
    seen.push(ev.type === "input_wait" ? `input_wait:${ev.waiting}` : ev.type);
    if (ev.type === "output") text += Buffer.from(ev.bytes).toString("utf8");
    if (ev.type === "input_wait" && ev.waiting) await c.input(r.job_id, { text: "yes\n", offset: 0, timeout: 0 });
    if (ev.type === "end") assert.equal(ev.exit_code, 0);
  }
  assert.equal(seen[0], "state");
  assert.ok(seen.includes("input_wait:true"), seen.join(","));
  assert.equal(seen[seen.length - 1], "end");
  assert.match(text, /ready\? .*got yes/s);

  const e = await c.run({ script: "echo to-err >&2", mode: "stdio", timeout: 30 });
  const got = await c.stream(e.job_id, { channel: "stderr" }).collect();
  assert.equal(Buffer.from(got.bytes).toString(), "to-err\n");
  const from = await c.stream(e.job_id, { channel: "stderr", offset: 3 }).collect();
  assert.equal(Buffer.from(from.bytes).toString(), "err\n");
  await rejectsWith(c.stream(e.job_id, { offset: 1 << 20 }).collect(), 400, "invalid_offset");
  await rejectsWith(c.stream(r.job_id, { channel: "stderr" }).collect(), 409, "channel_unsupported");
});

test("record", async () => {
  const r = await c.run({ script: "exit 7", mode: "stdio", timeout: 30, env: { B: "2", A: "1" } });
  const rec = await c.record(r.job_id);
  assert.equal(rec.job_id, r.job_id);
  assert.equal(rec.mode, "stdio");
  assert.equal(rec.exit_code, 7);
  assert.equal(rec.reason, "exited");
  assert.equal(rec.terminal, null);
  assert.deepEqual(rec.env_names, ["A", "B"]);
  assert.equal(rec.idempotency_key, null);
});

test("screen, keys, resize, signal", async () => {
  const r = await c.run({ script: 'echo ready; read line; echo "got $line"; read x', timeout: 5, terminal: { cols: 80, rows: 24 } });
  const s0 = await c.screen(r.job_id);
  assert.equal(s0.cols, 80);
  assert.equal(s0.rows, 24);
  assert.equal(s0.lines[0], "ready");
  const s1 = await c.keys(r.job_id, { keys: ["hello", "Enter"] });
  assert.ok(s1.lines.includes("got hello"), JSON.stringify(s1.lines));
  const rec = await c.resize(r.job_id, { cols: 100, rows: 30 });
  assert.deepEqual(rec.terminal, { cols: 100, rows: 30 });
  const s2 = await c.screen(r.job_id, 10);
  assert.equal(s2.cols, 100);
  assert.deepEqual(s2.scrollback, []);
  await rejectsWith(c.keys(r.job_id, { keys: [""] }), 422, "validation_error");

  // The run answers once "up" is out: the job has started.
  const sig = await c.run({ script: "echo up; exec sleep 300", mode: "stdio", timeout: 30, idle_flush_seconds: 0.05 });
  assert.equal(sig.output, "up\n");
  await rejectsWith(c.resize(sig.job_id, { cols: 10, rows: 10 }), 409, "input_unsupported");
  await c.signal(sig.job_id, "TERM");
  await waitDone(sig.job_id);
  const after = await c.record(sig.job_id);
  assert.equal(after.reason, "signaled");
  assert.match(after.signal ?? "", /TERM/);
  await rejectsWith(c.signal(sig.job_id, "TERM"), 409, "job_not_running");
  await rejectsWith(c.resize(sig.job_id, { cols: 10, rows: 10 }), 409, "job_not_running");
});

test("info, health, metrics, and the served OpenAPI document is the one the types come from", async () => {
  const info = await c.info();
  assert.ok(info.version.length > 0);
  assert.equal(info.state_dir, srv.stateDir);
  assert.equal(info.auth_required, true);
  assert.deepEqual(await c.health(), { status: "ok" });
  assert.match(await c.metrics(), /^shellctl_/m);
  const doc = JSON.parse(readFileSync(path.join(repoRoot, "internal", "api", "openapi.json"), "utf8"));
  assert.deepEqual(await c.openapi(), doc);
});

test("idempotent run: a repeat answers the same job; a lost answer is sent again, and the job starts once", async () => {
  const key = `ts-${Date.now()}`;
  const a = await c.runIdempotent({ script: "echo once", mode: "stdio", timeout: 30 }, { key });
  assert.equal(a.key, key);
  assert.equal(a.replayed, false);
  const b = await c.runIdempotent({ script: "echo once", mode: "stdio", timeout: 30 }, { key });
  assert.equal(b.job_id, a.job_id);
  assert.equal(b.replayed, true);
  await rejectsWith(c.run({ script: "echo other", mode: "stdio" }, { idempotencyKey: key }), 422, "idempotency_key_reused");

  // The first request reaches the server, its answer is lost on the way back.
  const proxy = new CuttingProxy(new URL(srv.url), [{ dropAnswer: true }]);
  const via = new ShellctlClient({ baseUrl: await proxy.listen(), token: srv.token });
  try {
    const before = (await c.list({ limit: 200 })).length;
    const w = await via.runIdempotent({ script: "echo lost-answer", mode: "stdio", timeout: 30 });
    assert.equal(proxy.requests.length, 2, "sent twice");
    assert.equal(proxy.header(0, "Idempotency-Key"), w.key);
    assert.equal(proxy.header(1, "Idempotency-Key"), w.key);
    assert.equal(w.replayed, true, "the second answer is the first request's job");
    assert.equal((await c.list({ limit: 200 })).length, before + 1, "one job, not two");
    assert.equal((await c.record(w.job_id)).idempotency_key, w.key);
  } finally {
    await proxy.close();
  }
});

test("snapshot save and restore of Home", async () => {
  const file = path.join(srv.home, "notes.txt");
  writeFileSync(file, "kept across a restore\n");
  const archive = await c.snapshotSave();
  assert.deepEqual([...archive.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
  rmSync(file);
  const res = await c.snapshotRestore(archive);
  assert.ok(res.entries >= 1);
  assert.ok(existsSync(file));
  assert.equal(readFileSync(file, "utf8"), "kept across a restore\n");
});

async function runExample(name: string, code: string): Promise<string> {
  // Inside the package, so its import of @shellctl/client resolves to it.
  const file = path.join(repoRoot, "clients", "typescript", "dist", name);
  writeFileSync(file, code);
  const { execFile } = await import("node:child_process");
  return new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [file], { env: { ...process.env, SHELLCTL_URL: srv.url, SHELLCTL_TOKEN: srv.token } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

test("the README's example runs as written", async () => {
  const readme = readFileSync(path.join(repoRoot, "clients", "typescript", "README.md"), "utf8");
  const m = /## Example[\s\S]*?```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "README.md has a js block under ## Example");
  assert.equal(await runExample("readme-example.mjs", m[1]), "line 1\nline 2\nline 3\nexit 0\n");
});

test("the project's front page example runs as written", async () => {
  const readme = readFileSync(path.join(repoRoot, "README.md"), "utf8");
  const m = /<!-- client-example-js:[^\n]*\n```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(m, "the project's README.md has a js block under <!-- client-example-js -->");
  assert.equal(await runExample("front-page-example.mjs", m[1]), "line 1\nline 2\nline 3\nexit 0\n");
});
