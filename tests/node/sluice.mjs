// Starts the built sluice binary on a free port for a Node test and resolves its port.
// (limiter.test.mjs keeps its own copy: it is the README's self-contained example.)
import { spawn } from "node:child_process";
import { once } from "node:events";

const READY = /listening on [\d.]+:(\d+)/;

export async function startSluice(args = ["--test-mode"]) {
  const proc = spawn(process.env.SLUICE_BIN ?? "../../target/debug/sluice", ["--port", "0", ...args]);
  let out = "";
  while (!READY.test(out)) {
    const [chunk] = await once(proc.stdout, "data");
    out += chunk;
  }
  return { proc, port: Number(out.match(READY)[1]) };
}
