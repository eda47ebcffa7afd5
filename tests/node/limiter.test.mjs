// A Node test of a rate limiter against sluice with ioredis: no sleeping, the clock is moved.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import Redis from "ioredis";

let server;
let redis;

before(async () => {
  // Start sluice on a free port in test mode and read the port it prints.
  server = spawn(process.env.SLUICE_BIN ?? "../../target/debug/sluice", ["--port", "0", "--test-mode"]);
  let out = "";
  while (!/listening on [\d.]+:(\d+)/.test(out)) {
    const [chunk] = await once(server.stdout, "data");
    out += chunk;
  }
  const port = Number(out.match(/listening on [\d.]+:(\d+)/)[1]);
  redis = new Redis({ host: "127.0.0.1", port });
});

after(async () => {
  await redis.quit();
  server.kill();
});

test("CL.THROTTLE: 16 allowed, then one more after advancing 2 s", async () => {
  await redis.call("CLOCK", "FREEZE");
  const replies = [];
  for (let i = 0; i < 20; i++) {
    replies.push(await redis.call("CL.THROTTLE", "laoqian:reply", 15, 30, 60, 1));
  }
  assert.deepEqual(replies[0], [0, 16, 15, -1, 2]);
  assert.equal(replies.filter((r) => r[0] === 0).length, 16);
  await redis.call("CLOCK", "ADVANCE", 2000);
  assert.equal((await redis.call("CL.THROTTLE", "laoqian:reply", 15, 30, 60, 1))[0], 0);
});

test("fixed window: 5 allowed, then a new window after the TTL", async () => {
  await redis.call("CLOCK", "FREEZE");
  const hit = async () => {
    const [[, count]] = await redis.multi().incr("rate:u1").expire("rate:u1", 60, "NX").exec();
    return count <= 5;
  };
  const allowed = [];
  for (let i = 0; i < 8; i++) allowed.push(await hit());
  assert.deepEqual(allowed, [true, true, true, true, true, false, false, false]);
  await redis.call("CLOCK", "ADVANCE", 60_001);
  assert.equal(await hit(), true);
});
