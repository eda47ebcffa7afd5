#!/usr/bin/env node
// The package's `sluice` command (`npx sluice --port 0`): runs the binary for this platform
// with the same arguments, passes signals on, and exits as it does.
import { spawn } from "node:child_process";
import { binaryPath } from "../binary.mjs";

let bin;
try {
  bin = binaryPath();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
const forward = ["SIGINT", "SIGTERM", "SIGHUP"];
for (const signal of forward) process.on(signal, () => child.kill(signal));
child.on("error", (e) => {
  console.error(`sluice-server: cannot run ${bin}: ${e.message}. Set SLUICE_BIN to the path of a working sluice binary.`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    for (const s of forward) process.removeAllListeners(s);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
