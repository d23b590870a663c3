// Drives shellctl's MCP server with the reference TypeScript SDK and prints
// a JSON report of what it saw on stdout; e2e/mcp_test.go checks it.
//
// node client.mjs '{"transport":"stdio","command":"…","args":[…]}'
// node client.mjs '{"transport":"http","url":"http://…/mcp","token":"…"}'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const cfg = JSON.parse(process.argv[2]);
const report = { steps: {} };

function transport(token) {
  if (cfg.transport === "stdio") {
    return new StdioClientTransport({ command: cfg.command, args: cfg.args, env: cfg.env, stderr: "inherit" });
  }
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers } });
}

// call returns what a step needs of one tools/call answer.
async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  return {
    isError: r.isError === true,
    text: (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n"),
    data: r.structuredContent ?? null,
  };
}

async function main() {
  if (cfg.transport === "http") {
    // Without the token: the route refuses, and so does the SDK's connect.
    const res = await fetch(cfg.url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "0" } } }),
    });
    report.noTokenStatus = res.status;
    const anon = new Client({ name: "shellctl-e2e-anon", version: "0.0.0" });
    try {
      await anon.connect(transport(""));
      report.noTokenConnect = "connected";
      await anon.close();
    } catch (e) {
      report.noTokenConnect = "refused: " + String(e && e.message ? e.message : e);
    }
  }

  const client = new Client({ name: "shellctl-e2e", version: "0.0.0" });
  await client.connect(transport(cfg.token));
  report.server = client.getServerVersion();
  report.instructions = client.getInstructions() ?? "";

  const tools = await client.listTools();
  report.tools = tools.tools.map((t) => ({ name: t.name, description: t.description, required: t.inputSchema.required ?? [], properties: Object.keys(t.inputSchema.properties ?? {}) }));

  // A prompt, then the answer to it.
  const s = report.steps;
  const p0 = performance.now();
  s.promptRun = await call(client, "shell_run", { script: "printf 'name? '; read n; echo hi $n", timeout_seconds: 20 });
  report.promptRunMs = performance.now() - p0;
  const pid = s.promptRun.data && s.promptRun.data.job_id;
  s.promptInput = await call(client, "shell_input", { job_id: pid, text: "ada", keys: ["Enter"], timeout_seconds: 10 });
  s.promptWait = s.promptInput.data && s.promptInput.data.done ? s.promptInput : await call(client, "shell_wait", { job_id: pid, timeout_seconds: 10 });
  s.promptStatus = await call(client, "shell_status", { job_id: pid });

  // A long output, read to its end in bounded pieces.
  const long = await call(client, "shell_run", { script: `seq 1 ${cfg.longLines}`, mode: "stdio", timeout_seconds: 30 });
  s.long = { first: { ...long, text: long.text.slice(-300) }, pieces: [long.data ? long.data.output : ""], calls: 1 };
  let last = long;
  while (last.data && !last.isError && (last.data.more_output_pending || !last.data.done) && s.long.calls < 200) {
    last = await call(client, "shell_wait", { job_id: long.data.job_id, timeout_seconds: 10 });
    s.long.pieces.push(last.data ? last.data.output : "");
    s.long.calls++;
  }
  s.long.last = { ...last, text: last.text.slice(-300) };

  // An interrupt that the job ignores, then a terminate that it cannot.
  s.intRun = await call(client, "shell_run", { script: "trap 'echo got INT' INT; while :; do sleep 0.1; done", timeout_seconds: 1 });
  const iid = s.intRun.data && s.intRun.data.job_id;
  s.intSignal = await call(client, "shell_interrupt", { job_id: iid, signal: "INT" });
  s.intTerminate = await call(client, "shell_interrupt", { job_id: iid, terminate: true, grace_seconds: 1 });
  // Ctrl-C as a key ends a plain sleep.
  s.ctrlcRun = await call(client, "shell_run", { script: "echo sleeping; sleep 30", timeout_seconds: 2 });
  s.ctrlc = await call(client, "shell_input", { job_id: s.ctrlcRun.data && s.ctrlcRun.data.job_id, keys: ["C-c"], timeout_seconds: 10 });

  // A stdio job with a stdin pipe, written with shell_input, ended by eof.
  s.pipeRun = await call(client, "shell_run", { script: "cat", mode: "stdio", stdin: "pipe", timeout_seconds: 0.5 });
  const cid = s.pipeRun.data && s.pipeRun.data.job_id;
  s.pipeInput = await call(client, "shell_input", { job_id: cid, text: "through the pipe\n", timeout_seconds: 10 });
  s.pipeEOF = await call(client, "shell_input", { job_id: cid, eof: true, timeout_seconds: 10 });
  s.pipeStatus = await call(client, "shell_status", { job_id: cid });

  // Errors are tool errors, not protocol errors.
  s.badCwd = await call(client, "shell_run", { script: "true", cwd: "/nonexistent/shellctl-e2e" });
  s.unknownJob = await call(client, "shell_wait", { job_id: "0123456789abcdef" });
  s.badKey = await call(client, "shell_input", { job_id: pid, keys: ["Hyper"] });

  // A full-screen program: less, read with shell_screen, driven with shell_keys.
  s.lessRun = await call(client, "shell_run", { script: "seq -f 'line %04g' 1 500 | less; echo after less", timeout_seconds: 10 });
  const lid = s.lessRun.data && s.lessRun.data.job_id;
  s.lessScreen = await call(client, "shell_screen", { job_id: lid });
  s.lessSpace = await call(client, "shell_keys", { job_id: lid, keys: ["Space"] });
  s.lessDown = await call(client, "shell_keys", { job_id: lid, keys: ["down", "Down"], timeout_seconds: 5 });
  s.lessQuit = await call(client, "shell_keys", { job_id: lid, keys: ["q"] });
  s.lessWait = await call(client, "shell_wait", { job_id: lid, timeout_seconds: 10 });
  s.lessAfter = await call(client, "shell_screen", { job_id: lid, scrollback: 10 });
  s.screenStdio = await call(client, "shell_screen", { job_id: long.data && long.data.job_id });
  s.keysEnded = await call(client, "shell_keys", { job_id: lid, keys: ["q"] });
  s.keysBad = await call(client, "shell_keys", { job_id: lid, keys: ["C-1"] });
  s.screenUnknown = await call(client, "shell_screen", { job_id: "0123456789abcdef" });

  s.list = await call(client, "shell_list", {});

  // The file tools: write, read a window of lines, edit (no match,
  // ambiguous, ok), list, and a binary file (made by the test) refused.
  if (cfg.filesDir) {
    const f = cfg.filesDir + "/notes.txt";
    const text = Array.from({ length: 50 }, (_, i) => `line ${i + 1}`).join("\n") + "\ndup\ndup\n";
    s.fileWrite = await call(client, "write_file", { path: f, content: text });
    s.fileRead = await call(client, "read_file", { path: f, offset: 10, limit: 5 });
    s.fileEditNoMatch = await call(client, "edit_file", { path: f, old_text: "line 99\n", new_text: "x" });
    s.fileEditAmbiguous = await call(client, "edit_file", { path: f, old_text: "dup", new_text: "x" });
    s.fileEditOk = await call(client, "edit_file", { path: f, old_text: "line 7\n", new_text: "seven\n" });
    s.fileReadAfter = await call(client, "read_file", { path: f, offset: 6, limit: 3 });
    s.fileList = await call(client, "list_dir", { path: cfg.filesDir });
    s.fileBinary = await call(client, "read_file", { path: cfg.filesDir + "/bin" });
    s.fileOutside = await call(client, "read_file", { path: "/etc/shadow" });
  }

  // How long a short job takes through the whole chain, client to client.
  const ms = [];
  for (let i = 0; i < cfg.timedRuns; i++) {
    const t0 = performance.now();
    const r = await call(client, "shell_run", { script: "true" });
    ms.push(performance.now() - t0);
    if (r.isError || !r.data.done) throw new Error("timed run: " + r.text);
  }
  ms.sort((a, b) => a - b);
  report.runMs = { min: ms[0], p50: ms[Math.floor(ms.length / 2)], max: ms[ms.length - 1] };
  await client.close();
}

// The report goes out whole before the process ends (a pipe is written
// asynchronously).
function finish(code) {
  process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(code));
}

main()
  .then(() => finish(0))
  .catch((e) => {
    report.fatal = String(e && e.stack ? e.stack : e);
    finish(1);
  });
