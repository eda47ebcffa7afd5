// Start sluice (the binary for this platform, see binary.mjs) for a test, move its clock, stop it.
// No dependencies: the clock helpers speak RESP over one socket of their own.
import { spawn } from "node:child_process";
import { createConnection } from "node:net";
import { binaryPath } from "./binary.mjs";

// The path of the sluice binary: $SLUICE_BIN, else the platform package's (binary.mjs).
export { binaryPath };

function encode(args) {
  let out = `*${args.length}\r\n`;
  for (const a of args) {
    const s = String(a);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

// Parses one RESP2 reply from buf at i; returns [value, next] or null when incomplete.
function parse(buf, i = 0) {
  const end = buf.indexOf("\r\n", i);
  if (end < 0) return null;
  const type = String.fromCharCode(buf[i]);
  const line = buf.toString("utf8", i + 1, end);
  const next = end + 2;
  switch (type) {
    case "+": return [line, next];
    case "-": return [new Error(line), next];
    case ":": return [Number(line), next];
    case "$": {
      const n = Number(line);
      if (n < 0) return [null, next];
      if (buf.length < next + n + 2) return null;
      return [buf.toString("utf8", next, next + n), next + n + 2];
    }
    case "*": {
      const n = Number(line);
      const items = [];
      let at = next;
      for (let k = 0; k < n; k++) {
        const r = parse(buf, at);
        if (!r) return null;
        items.push(r[0]);
        at = r[1];
      }
      return [n < 0 ? null : items, at];
    }
    default: throw new Error(`unexpected reply byte ${type}`);
  }
}

/** Starts sluice on 127.0.0.1 and a free port, in test mode. */
export async function startSluice({ args = [], bin = binaryPath(), timeoutMs = 10_000 } = {}) {
  const child = spawn(bin, ["--port", "0", "--test-mode", ...args], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const { host, port } = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`sluice did not start within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sluice exited (${code}) before listening`));
    });
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/sluice listening on ([\d.]+):(\d+)/);
      if (m) {
        clearTimeout(timer);
        child.stdout.resume(); // keep draining, never block the server
        resolve({ host: m[1], port: Number(m[2]) });
      }
    });
  });

  // One connection for the helpers' commands, replies matched in order.
  const socket = createConnection({ host, port });
  socket.setNoDelay(true);
  await new Promise((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let pending = Buffer.alloc(0);
  const waiting = [];
  socket.on("data", (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      const r = parse(pending);
      if (!r) break;
      pending = pending.subarray(r[1]);
      const w = waiting.shift();
      if (w) (r[0] instanceof Error ? w.reject(r[0]) : w.resolve(r[0]));
    }
  });
  socket.on("error", (e) => {
    while (waiting.length) waiting.shift().reject(e);
  });
  const command = (...a) =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve, reject });
      socket.write(encode(a));
    });

  return {
    host,
    port,
    url: `redis://${host}:${port}`,
    /** Sends one command on the helper's connection; resolves to the reply. */
    command,
    /** Stops the clock; resolves to its time in Unix ms. */
    freeze: () => command("CLOCK", "FREEZE"),
    /** Moves the frozen clock forward by ms (expired keys are reaped first). */
    advance: (ms) => command("CLOCK", "ADVANCE", ms),
    /** Sets the frozen clock (never backwards). */
    set: (unixMs) => command("CLOCK", "SET", unixMs),
    /** Lets the clock run again. */
    resume: () => command("CLOCK", "RESUME"),
    /** The server's time in Unix ms. */
    now: () => command("CLOCK", "NOW"),
    /** Stops the server (SIGTERM, SIGKILL after 5 s) and resolves when it has exited. */
    async stop() {
      socket.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}
