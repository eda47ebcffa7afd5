// node-redis (the `redis` package, which opens with HELLO 3) against sluice: the handshake,
// strings and counters, a MULTI block, sorted sets and CL.THROTTLE, unchanged.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startSluice } from "./sluice.mjs";
import { createClient } from "redis";

let server;
let client;

before(async () => {
  let port;
  ({ proc: server, port } = await startSluice());
  client = createClient({ socket: { host: "127.0.0.1", port } });
  client.on("error", () => {});
  await client.connect();
});

after(async () => {
  await client.quit();
  server.kill();
});

test("node-redis: strings, counters and TTLs", async () => {
  assert.equal(await client.ping(), "PONG");
  assert.equal(await client.set("k", "v", { EX: 60 }), "OK");
  assert.equal(await client.get("k"), "v");
  assert.equal(await client.get("missing"), null);
  assert.equal(await client.incrBy("c", 5), 5);
  assert.equal(await client.ttl("k"), 60);
});

test("node-redis: the sliding window in MULTI/EXEC and CL.THROTTLE", async () => {
  const now = Date.now();
  const replies = await client
    .multi()
    .zAdd("hist:u1", { score: now, value: String(now) })
    .zRemRangeByScore("hist:u1", 0, now - 60_000)
    .zCard("hist:u1")
    .expire("hist:u1", 61)
    .exec();
  assert.deepEqual(replies.map(Number), [1, 0, 1, 1]);
  await client.sendCommand(["CLOCK", "FREEZE"]);
  const r = await client.sendCommand(["CL.THROTTLE", "laoqian:reply", "15", "30", "60", "1"]);
  assert.deepEqual(r, [0, 16, 15, -1, 2]);
});
