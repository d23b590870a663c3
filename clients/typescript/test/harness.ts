// A real shellctl server for the tests: the freshly built bin/shellctl
// (SHELLCTL_BIN, else the checkout's bin/shellctl) on 127.0.0.1:0 with a
// temporary state dir and Home, and a TCP proxy in front of it that can cut
// a connection the way a network fault would.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ShellctlClient, type JobWindow } from "../src/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository's root (this file runs from clients/typescript/dist/test). */
export const repoRoot = path.resolve(here, "..", "..", "..", "..");

export interface TestServer {
  url: string;
  token: string;
  home: string;
  stateDir: string;
  client: ShellctlClient;
  stop(): Promise<void>;
}

export async function startServer(): Promise<TestServer> {
  const bin = process.env.SHELLCTL_BIN ?? path.join(repoRoot, "bin", "shellctl");
  if (!existsSync(bin)) {
    throw new Error(`no shellctl binary at ${bin}: build it first (make build), or set SHELLCTL_BIN`);
  }
  const root = mkdtempSync(path.join(tmpdir(), "shellctl-ts-client-"));
  const home = path.join(root, "home");
  const stateDir = path.join(root, "state");
  mkdirSync(home);
  mkdirSync(stateDir, { mode: 0o700 });
  const token = "ts-client-test-token";
  const args = ["serve", "--listen", "127.0.0.1:0", "--state-dir", stateDir, "--token", token];
  // The egress proxy, for prepare: its CA goes beside the state dir, not to
  // the machine-wide default another server shares.
  args.push("--egress-proxy", "127.0.0.1:0", "--egress-ca-out", path.join(root, "egress"));
  const proc = spawn(bin, args, {
    env: { HOME: home, PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`shellctl serve printed no "serving on" line in 20 s:\n${stderr}`)), 20_000);
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (chunk: string) => {
      stderr += chunk;
      // The text banner or a JSON log line's message both hold it.
      const m = /serving on (http:\/\/[^\s"()]+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`shellctl serve exited (${code}) before serving:\n${stderr}`));
    });
  });
  const client = new ShellctlClient({ baseUrl: url, token });
  return {
    url,
    token,
    home,
    stateDir,
    client,
    async stop() {
      // Jobs outlive their server (their runners are their own): end them
      // through the API first.
      try {
        for (const j of await client.list({ limit: 200 })) {
          await client.delete(j.job_id, { force: true, graceSeconds: 0 }).catch(() => {});
        }
      } finally {
        await stopProcess(proc);
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}

async function stopProcess(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  proc.kill("SIGTERM");
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * A TCP proxy to target. Each connection's first bytes from the client (its
 * request head) are kept in `requests`. `plan` says, per connection (in
 * order), what goes wrong: cut it after `cutAfter` bytes of the answer, or
 * drop the answer (forward the request, then close the connection when the
 * answer's first bytes come back, so the request took effect and its answer
 * is lost).
 */
export class CuttingProxy {
  readonly requests: string[] = [];
  url = "";
  private server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly target: URL,
    private readonly plan: Array<{ cutAfter?: number; dropAnswer?: boolean } | undefined>,
  ) {
    this.server = net.createServer((c) => this.handle(c));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    const addr = this.server.address() as net.AddressInfo;
    this.url = `http://127.0.0.1:${addr.port}`;
    return this.url;
  }

  private handle(c: net.Socket): void {
    const n = this.requests.length;
    this.requests.push("");
    const fault = this.plan[n];
    const up = net.connect(Number(this.target.port), this.target.hostname);
    this.sockets.add(c).add(up);
    let sent = 0;
    let cut = false;
    c.on("data", (b) => {
      if (this.requests[n].length < 4096) this.requests[n] += b.toString("latin1");
      up.write(b);
    });
    up.on("data", (b) => {
      if (cut) return;
      if (fault?.dropAnswer) {
        cut = true;
        c.destroy();
        up.destroy();
        return;
      }
      if (fault?.cutAfter !== undefined && sent + b.length >= fault.cutAfter) {
        c.write(b.subarray(0, Math.max(0, fault.cutAfter - sent)), () => {
          c.destroy();
          up.destroy();
        });
        cut = true;
        return;
      }
      sent += b.length;
      c.write(b);
    });
    const close = () => {
      c.destroy();
      up.destroy();
    };
    c.on("error", close).on("close", close);
    up.on("error", close).on("close", close);
  }

  /** The value of a header in connection n's request head, or null. */
  header(n: number, name: string): string | null {
    for (const line of (this.requests[n] ?? "").split("\r\n")) {
      const i = line.indexOf(":");
      if (i > 0 && line.slice(0, i).toLowerCase() === name.toLowerCase()) return line.slice(i + 1).trim();
    }
    return null;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// waitDone waits (server-side, no polling) until job id ends: its last window.
export async function waitDone(c: ShellctlClient, id: string): Promise<JobWindow> {
  for (;;) {
    const w = await c.wait(id, { offset: 0, timeout: 30, output_limit: 524288 });
    if (w.done) return w;
  }
}
