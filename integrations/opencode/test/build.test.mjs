// The committed dist/ is what opencode loads: it must be the build of src/ (run `npm run build` after editing src/).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const HERE = resolve(fileURLToPath(import.meta.url), "..", "..");

test("dist/ is the build of src/", { timeout: 120_000 }, () => {
  const out = mkdtempSync(join(tmpdir(), "memory-opencode-build-"));
  try {
    const done = spawnSync(process.execPath, [join(HERE, "node_modules", "typescript", "bin", "tsc"), "-p", HERE, "--outDir", out],
      { encoding: "utf-8" });
    assert.equal(done.status, 0, done.stdout + done.stderr);
    assert.deepEqual(readdirSync(join(HERE, "dist")).sort(), readdirSync(out).sort());
    for (const name of readdirSync(out)) {
      assert.equal(readFileSync(join(HERE, "dist", name), "utf-8"), readFileSync(join(out, name), "utf-8"),
        `dist/${name} is out of date: run npm run build`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
