// The npm helper's pipelined reset, `sluice.reset(client)`: TESTMODE RESET queued on the
// test's own client ahead of its first command, with no round trip of its own. Each test
// still gets an empty server, the helper's own commands wait for the reset, and a reset that
// fails is not lost. (A file of its own: sharedSluice() gives it a server of its own.)
import { test, beforeEach, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createServer } from "node:net";

const UNKNOWN = "-ERR unknown command 'TESTMODE', with args beginning with: 'RESET' \r\n";
import { fileURLToPath } from "node:url";

process.env.SLUICE_BIN ??= new URL("../../target/debug/sluice", import.meta.url).pathname;
const { sharedSluice } = await import("../../npm/index.mjs");
const { default: Redis } = await import("ioredis");
const { createClient } = await import("redis");

const sluice = await sharedSluice();
const redis = new Redis({ path: sluice.socketPath });
const nodeRedis = createClient({ socket: { path: sluice.socketPath } });
await nodeRedis.connect();
beforeEach(() => sluice.reset(redis));
after(async () => {
  await redis.quit();
  await nodeRedis.quit();
});

// What one test leaves behind, on the client the reset goes on, on another one and on the
// helper's connection.
async function leaveEverythingBehind() {
  await redis.set("left", "behind");
  await nodeRedis.sendCommand(["HSET", "other", "f", "v"]);
  await redis.call("SCRIPT", "LOAD", "return 1");
  await redis.call("CONFIG", "SET", "maxmemory", "1gb");
  await redis.call("FAULT", "ERROR", "LOADING left behind", "COUNT", "0", "COMMAND", "get");
  await sluice.freeze();
  await sluice.advance(3_600_000);
}

async function assertEmpty(client) {
  const call = client === redis ? (...a) => redis.call(...a) : (...a) => client.sendCommand(a);
  assert.equal(await call("DBSIZE"), 0);
  // node-redis speaks RESP3: a map, an object to it.
  assert.deepEqual(Object.values(await call("CONFIG", "GET", "maxmemory")).slice(-1), ["0"]);
  assert.deepEqual(await call("FAULT", "LIST"), []);
  assert.deepEqual(await call("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"), [0]);
  const now = Number(await call("CLOCK", "NOW"));
  assert.ok(Math.abs(now - Date.now()) < 5_000, `CLOCK NOW ${now} is not real time`);
}

test("a test leaves keys, a script, config, a fault and a moved clock", leaveEverythingBehind);

test("the next test's first command, on the reset client, sees none of it", () => assertEmpty(redis));

test("a test leaves it all again", leaveEverythingBehind);

test("the next test, on another client once the reset client has had a reply", async () => {
  // Across connections the server orders commands by arrival: one reply on the reset client
  // (or any helper command, which waits for the reset) comes after the reset.
  assert.equal(await redis.ping(), "PONG");
  await assertEmpty(nodeRedis);
});

test("a test starting with the helper's clock: the reset runs before it, not after", async () => {
  const frozen = await sluice.freeze();
  await sluice.advance(3_600_000);
  // Had the reset on the test's client run after the freeze, the clock would be running on
  // real time again.
  assert.equal(Number(await redis.call("CLOCK", "NOW")), frozen + 3_600_000);
  await redis.set("k", "v", "PX", 1000);
  await sluice.advance(1001);
  assert.equal(await redis.exists("k"), 0);
});

test("node-redis: reset(client) with sendCommand", async () => {
  await nodeRedis.sendCommand(["SET", "k", "v"]);
  await sluice.reset(nodeRedis);
  assert.equal(await nodeRedis.sendCommand(["DBSIZE"]), 0);
});

test("a client that is not one: a TypeError, nothing sent", async () => {
  await assert.rejects(sluice.reset({}), TypeError);
  assert.equal(await sluice.command("PING"), "PONG");
});

// A server that answers every command with Redis's unknown-command error (a client pointed
// at something else than this sluice).
async function notSluice() {
  const server = createServer((s) =>
    s.on("data", (chunk) => {
      // One error per command in the chunk (ioredis may send several at once).
      for (const _ of String(chunk).matchAll(/(?:^|\r\n)\*\d+\r\n/g)) s.write(UNKNOWN);
    }),
  );
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

test("a failed reset rejects the helper's next command", async () => {
  const server = await notSluice();
  const elsewhere = new Redis({ port: server.address().port, host: "127.0.0.1", enableReadyCheck: false, maxRetriesPerRequest: 0 });
  try {
    await sluice.reset(elsewhere);
    await assert.rejects(sluice.command("PING"), /TESTMODE RESET sent on the test's client failed: .*unknown command 'TESTMODE'/);
    // Reported once: the helper works again.
    assert.equal(await sluice.command("PING"), "PONG");
  } finally {
    elsewhere.disconnect();
    server.close();
  }
});

test("a failed reset nobody waits for fails the run, and the next reset rejects", () => {
  const fixture = fileURLToPath(new URL("./workers/failed-reset.mjs", import.meta.url));
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // a run of its own, not a file of this one
  const run = spawnSync(process.execPath, ["--test", fixture], { encoding: "utf8", timeout: 60_000, env });
  const out = run.stdout + run.stderr;
  assert.notEqual(run.status, 0, out);
  assert.match(out, /TESTMODE RESET sent on the test's client failed: .*unknown command 'TESTMODE'/);
  // The second test's reset rejected with the first one's failure.
  assert.match(out, /not ok 2 - the next test/, out);
});
