// The commands from Redis 7.4 to 8.8 (docs/newer-commands.md) from ioredis, in RESP2, and
// from node-redis, which opens with HELLO 3: the fixed-window limiter on INCREX and the
// sliding log on per-field TTLs, with the test clock moved instead of sleeping.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Redis from "ioredis";
import { createClient } from "redis";
import { startSluice } from "./sluice.mjs";

let server;
let io;
let nr;

before(async () => {
  let port;
  ({ proc: server, port } = await startSluice());
  io = new Redis({ host: "127.0.0.1", port });
  nr = createClient({ socket: { host: "127.0.0.1", port } });
  nr.on("error", () => {});
  await nr.connect();
});

after(async () => {
  await io.quit();
  await nr.quit();
  server.kill();
});

test("ioredis: a fixed window on INCREX (UBOUND caps, ENX keeps the window)", async () => {
  await io.call("CLOCK", "FREEZE");
  const allow = async () =>
    (await io.call("INCREX", "rl:io", "BYINT", 1, "UBOUND", 2, "EX", 10, "ENX"))[1] === 1;
  assert.deepEqual([await allow(), await allow(), await allow()], [true, true, false]);
  assert.equal(await io.ttl("rl:io"), 10);
  await io.call("CLOCK", "ADVANCE", 10001);
  assert.equal(await allow(), true);
});

test("ioredis: field TTLs expire with the clock, the key with its last field", async () => {
  await io.call("CLOCK", "FREEZE");
  await io.hset("log:io", "r1", 1, "r2", 1);
  assert.deepEqual(await io.call("HPEXPIRE", "log:io", 1000, "FIELDS", 1, "r1"), [1]);
  assert.deepEqual(await io.call("HTTL", "log:io", "FIELDS", 2, "r1", "r2"), [1, -1]);
  await io.call("CLOCK", "ADVANCE", 1001);
  assert.equal(await io.hlen("log:io"), 1);
  assert.equal(await io.call("HSETEX", "log:io", "PX", 5, "FIELDS", 1, "r2", 2), 1);
  await io.call("CLOCK", "ADVANCE", 6);
  assert.equal(await io.exists("log:io"), 0);
});

test("node-redis (RESP3): HGETEX, HGETDEL, SET IFEQ, DELEX, DIGEST", async () => {
  await nr.hSet("h", { a: "1", b: "2" });
  assert.deepEqual(await nr.sendCommand(["HGETEX", "h", "EX", "100", "FIELDS", "1", "a"]), ["1"]);
  assert.deepEqual(await nr.sendCommand(["HTTL", "h", "FIELDS", "2", "a", "b"]), [100, -1]);
  assert.deepEqual(await nr.sendCommand(["HGETDEL", "h", "FIELDS", "2", "a", "b"]), ["1", "2"]);
  assert.equal(await nr.exists("h"), 0);
  await nr.set("k", "v1");
  assert.equal(await nr.sendCommand(["SET", "k", "v2", "IFEQ", "nope"]), null);
  assert.equal(await nr.sendCommand(["SET", "k", "v2", "IFEQ", "v1"]), "OK");
  const digest = await nr.sendCommand(["DIGEST", "k"]);
  assert.match(digest, /^[0-9a-f]{16}$/);
  assert.equal(await nr.sendCommand(["DELEX", "k", "IFDEQ", digest]), 1);
  assert.equal(await nr.sendCommand(["CLIENT", "MAINT_NOTIFICATIONS", "ON"]), "OK");
});

test("ioredis and node-redis: Valkey's DELIFEQ releases only the owner's lock; INCREX NX/XX", async () => {
  assert.equal(await io.set("lock:io", "owner-a", "NX", "PX", 5000), "OK");
  assert.equal(await io.call("DELIFEQ", "lock:io", "owner-b"), 0);
  assert.equal(await nr.sendCommand(["DELIFEQ", "lock:io", "owner-a"]), 1);
  assert.equal(await io.exists("lock:io"), 0);
  assert.deepEqual(await io.call("INCREX", "once:io", "XX"), [0, 0]);
  assert.deepEqual(await io.call("INCREX", "once:io", "NX", "EX", 60), [1, 1]);
  assert.deepEqual(await nr.sendCommand(["INCREX", "once:io", "NX"]), [1, 0]);
});
