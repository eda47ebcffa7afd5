// Starts the built sluice binary on a free port for a Node test and resolves its port. It runs
// in a private temporary directory, so a dump.rdb in the working directory changes nothing.
// (limiter.test.mjs keeps its own copy: it is the README's self-contained example.)
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const READY = /listening on [\d.]+:(\d+)/;

export async function startSluice(args = ["--test-mode"]) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-node-"));
  const proc = spawn(
    process.env.SLUICE_BIN ?? new URL("../../target/debug/sluice", import.meta.url).pathname,
    ["--port", "0", "--save", "", "--dir", dir, ...args],
    { cwd: dir },
  );
  let out = "";
  while (!READY.test(out)) {
    const [chunk] = await once(proc.stdout, "data");
    out += chunk;
  }
  return { proc, port: Number(out.match(READY)[1]), dir };
}
