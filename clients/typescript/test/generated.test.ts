// The committed src/generated/openapi.ts must be what openapi-typescript
// makes of internal/api/openapi.json today: a route or field added to the
// document without `npm run generate` fails here.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { repoRoot } from "./harness.js";

const pkg = path.join(repoRoot, "clients", "typescript");

test("src/generated/openapi.ts is generated from internal/api/openapi.json as it is now", () => {
  const scripts = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8")).scripts as Record<string, string>;
  // The same command as `npm run generate`, writing elsewhere.
  const args = scripts.generate.split(/\s+/);
  assert.equal(args[0], "openapi-typescript");
  const out = args.indexOf("-o");
  const tmp = mkdtempSync(path.join(tmpdir(), "shellctl-ts-gen-"));
  try {
    const fresh = path.join(tmp, "openapi.ts");
    const committed = path.join(pkg, args[out + 1]);
    args[out + 1] = fresh;
    const cli = path.join(pkg, "node_modules", "openapi-typescript", "bin", "cli.js");
    execFileSync(process.execPath, [cli, ...args.slice(1)], { cwd: pkg, stdio: ["ignore", "ignore", "pipe"] });
    const want = readFileSync(fresh, "utf8");
    const have = readFileSync(committed, "utf8");
    assert.ok(
      have === want,
      `${path.relative(repoRoot, committed)} is stale: internal/api/openapi.json changed; run \`npm run generate\` in clients/typescript and commit the result`,
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
