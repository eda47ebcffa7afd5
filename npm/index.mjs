// Start sluice (the binary in this package) for a test, reset it, move its clock, stop it.
// No dependencies: the helpers speak RESP over one socket of their own.
//
// `sharedSluice()` gives the tests of one process (a node:test file; a Jest or Vitest
// worker) one server, to be reset before each test (`sluice.reset(redis)`: TESTMODE RESET
// queued on the test's client ahead of its first command, no round trip of its own; or
// `await sluice.reset()` on the helper's connection, one round trip); `startSluice()` starts
// a server of a test's own, a few milliseconds to start and to stop. Either runs in a
// private temporary directory with persistence off, so a dump.rdb in the working directory
// is never loaded and nothing is written there, and listens on a Unix socket there as well
// as on TCP: `new Redis({ path: sluice.socketPath })` (ioredis) or `createClient({ socket:
// { path: sluice.socketPath } })` (node-redis) make each round trip cheaper for both
// processes than loopback TCP.
import { spawn } from "node:child_process";
import { createConnection } from "node:net";
import { fileURLToPath } from "node:url";
import { dirname, join, resolve } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import realProcess from "node:process";
import { threadId } from "node:worker_threads";
import { binaryPath } from "./binary.mjs";

// The path of the sluice binary: $SLUICE_BIN, else the platform package's (binary.mjs).
export { binaryPath };

const MAX_UNIX_PATH = 100;
// How long (µs) the server polls for a test's next command before it sleeps (`--busy-poll`).
const BUSY_POLL_US = 100;

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

// Sends a command on a test's client: ioredis (`call`) or node-redis (`sendCommand`).
function sendOn(client, args) {
  if (typeof client?.call === "function") return client.call(...args);
  if (typeof client?.sendCommand === "function") return client.sendCommand(args);
  throw new TypeError("reset(client): client is not an ioredis or node-redis client");
}

function resetError(why, cause) {
  return new Error(`sluice: TESTMODE RESET sent on the test's client failed: ${why}`, { cause });
}

/**
 * Starts sluice on 127.0.0.1 and a free port, in test mode, in a private temporary directory
 * with persistence off.
 */
export async function startSluice({ args = [], bin = binaryPath(), timeoutMs = 10_000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-"));
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  // Absolute: the server runs in its own directory, and SLUICE_BIN may be relative to ours.
  if (bin.includes("/")) bin = resolve(bin);
  // One event loop, as redis-server has: a test's few connections need no more. A test sends
  // one command at a time and waits for each reply: the loop polls for the next one for a
  // while before it sleeps (while a core is idle), so the client's send need not wake it.
  const base = ["--port", "0", "--test-mode", "--save", "", "--dir", dir, "--threads", "1",
    "--busy-poll", String(BUSY_POLL_US)];
  // sun_path holds 108 bytes: under a longer temporary directory, TCP only.
  const sock = join(dir, "sluice.sock");
  const unix = Buffer.byteLength(sock) <= MAX_UNIX_PATH && !args.includes("--unixsocket");
  if (unix) base.push("--unixsocket", sock, "--unixsocketperm", "700");
  const child = spawn(bin, [...base, ...args], {
    cwd: dir,
    stdio: ["ignore", "pipe", "ignore"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // With arguments of the caller's, the server may have something to save: stop() then lets
  // it exit by itself (SIGTERM). Otherwise there is nothing to keep, and SIGKILL is instant.
  const disposable = args.length === 0;
  let host, port, socketPath;
  try {
    ({ host, port, socketPath } = await new Promise((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`sluice did not start within ${timeoutMs} ms`));
      }, timeoutMs);
      child.once("error", (e) => {
        clearTimeout(timer);
        if (e.code === "ENOENT") {
          e.message = `${e.message}: no sluice binary at ${bin}; set SLUICE_BIN to the path of one`;
        }
        reject(e);
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`sluice exited (${code}) before listening`));
      });
      child.stdout.on("data", (chunk) => {
        out += chunk;
        // The TCP address, then (once it listens too) the Unix socket's.
        const m = out.match(/sluice listening on ([\d.]+):(\d+)\r?\n/);
        const u = out.match(/sluice listening on unix:(.+?)\r?\n/);
        if (m && (u || !unix)) {
          clearTimeout(timer);
          child.stdout.resume(); // keep draining, never block the server
          resolve({ host: m[1], port: Number(m[2]), socketPath: u ? u[1] : undefined });
        }
      });
    }));
  } catch (e) {
    removeDir();
    throw e;
  }

  // One connection for the helpers' commands, replies matched in order.
  const socket = socketPath ? createConnection({ path: socketPath }) : createConnection({ host, port });
  if (!socketPath) socket.setNoDelay(true);
  await new Promise((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let pending = Buffer.alloc(0);
  const waiting = [];
  socket.on("data", (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    for (;;) {
      const r = parse(pending);
      if (!r) break;
      pending = pending.subarray(r[1]);
      const w = waiting.shift();
      if (w) (r[0] instanceof Error ? w.reject(r[0]) : w.resolve(r[0]));
    }
    // An unref'd helper holds the event loop only while it waits for a reply.
    if (weak && waiting.length === 0) socket.unref();
  });
  socket.on("error", (e) => {
    while (waiting.length) waiting.shift().reject(e);
  });
  let weak = false;
  const send = (a) =>
    new Promise((resolve, reject) => {
      waiting.push({ resolve, reject });
      if (weak) socket.ref();
      socket.write(encode(a));
    });
  // A reset sent on a test's client (reset(client)) until its reply arrives, and its error
  // until the helper has reported it.
  let pipelined = null;
  let failed = null;
  const takeFailure = () => {
    const e = failed;
    failed = null;
    return e;
  };
  // The helper's own commands go on another connection than the test's client: they wait
  // for a reset sent there, which the server may otherwise read after them (a test that
  // starts with freeze() would have its clock unfrozen by the reset).
  const command = (...a) => {
    if (failed) return Promise.reject(takeFailure());
    if (!pipelined) return send(a);
    return pipelined.then(
      () => send(a),
      (e) => {
        if (failed === e) failed = null;
        throw e;
      },
    );
  };
  const resetOn = (client) => {
    if (failed) return Promise.reject(takeFailure());
    let reply;
    try {
      reply = sendOn(client, ["TESTMODE", "RESET"]);
    } catch (e) {
      return Promise.reject(e);
    }
    // Nobody waits for the reply (that is the point), so a failure is kept for the helper's
    // next call and left unhandled: unless a helper command that waited for the reply
    // rejected with it first, the runner reports it when the reply comes and fails the run
    // (node:test against the hook, Jest's circus runner against the running test).
    const mine = Promise.resolve(reply).then(
      (r) => {
        if (pipelined === mine) pipelined = null;
        if (String(r) !== "OK") throw (failed = resetError(`replied ${JSON.stringify(String(r))}`));
      },
      (e) => {
        if (pipelined === mine) pipelined = null;
        throw (failed = resetError(e?.message, e));
      },
    );
    pipelined = mine;
    return Promise.resolve();
  };

  let stopped = false;
  return {
    host,
    port,
    url: `redis://${host}:${port}`,
    /**
     * The server's Unix socket (in its private directory), or undefined where that
     * directory's path is too long for one or `args` named a `--unixsocket` of their own.
     */
    socketPath,
    /** The server's private directory (its `dir`), removed by stop(). */
    dir,
    /** The server process (a ChildProcess). */
    process: child,
    /** Sends one command on the helper's connection; resolves to the reply. */
    command,
    /**
     * Returns the server to the state it started in (TESTMODE RESET): every database empty,
     * the clock on real time, no faults, scripts, functions or CONFIG SET changes.
     *
     * `reset()` sends it on the helper's own connection and resolves when it is done (one
     * round trip). `reset(client)`, given the test's ioredis or node-redis client, queues it
     * on that client's connection ahead of the test's first command and resolves at once:
     * the server runs it before anything the test sends on that client, and the helper's own
     * commands (freeze(), command(), ...) wait for its reply. A failed reset rejects the
     * helper's next call and is thrown, unhandled, when its reply arrives.
     */
    reset: (client) => (client === undefined ? command("TESTMODE", "RESET") : resetOn(client)),
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
    /** True while the server process runs. */
    get alive() {
      return child.exitCode === null && child.signalCode === null;
    },
    /**
     * Stops the server and resolves when it has exited (SIGKILL without extra arguments;
     * else SIGTERM, then SIGKILL after 5 s), then removes its directory.
     */
    async stop() {
      if (stopped) return;
      stopped = true;
      socket.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(disposable ? "SIGKILL" : "SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
      removeDir();
    },
    /** Lets the process exit while the server runs (sharedSluice does; it stops it at exit). */
    unref() {
      weak = true;
      child.unref();
      child.stdout.unref?.();
      if (waiting.length === 0) socket.unref();
    },
    /** Kills the server at once, synchronously (for an "exit" handler). */
    killNow() {
      if (!stopped) {
        stopped = true;
        child.kill("SIGKILL");
        try {
          removeDir();
        } catch {
          // The process is exiting: a leftover empty directory is all that can remain.
        }
      }
    },
  };
}

// The shared servers, one per thread of this process, kept on the real `process` (not a
// module variable): Jest evaluates this module again for every test file, and its workers
// would otherwise start a server per file.
const SHARED = Symbol.for("sluice-server.shared");

/**
 * The server the tests of this process (this worker thread) share, started on first use and
 * killed when the process exits; reset it before each test:
 *
 *   const sluice = await sharedSluice();
 *   const redis = new Redis({ path: sluice.socketPath });
 *   beforeEach(() => sluice.reset(redis));
 *
 * If a test stopped it, the next call starts another.
 */
export function sharedSluice(options = {}) {
  const all = (realProcess[SHARED] ??= new Map());
  const known = all.get(threadId);
  if (known) {
    return known.then((s) => {
      if (s.alive) return s;
      all.delete(threadId);
      return sharedSluice(options);
    });
  }
  const starting = startSluice(options).then((s) => {
    s.unref();
    realProcess.once("exit", () => s.killNow());
    return s;
  });
  starting.catch(() => all.delete(threadId));
  all.set(threadId, starting);
  return starting;
}
