// ioredis's brpop against sluice: a push from another connection wakes it, and CLOCK ADVANCE
// ends a timeout instead of waiting for it.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import Redis from "ioredis";
import { startSluice } from "./sluice.mjs";

let server;
let admin;
let waiter;

async function waitBlocked(n) {
  const deadline = Date.now() + 5000;
  while (!(await admin.info("clients")).includes(`blocked_clients:${n}\r\n`)) {
    assert.ok(Date.now() < deadline, `never ${n} blocked clients`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

before(async () => {
  server = await startSluice();
  admin = new Redis({ host: "127.0.0.1", port: server.port });
  waiter = new Redis({ host: "127.0.0.1", port: server.port });
});

after(async () => {
  await admin.quit();
  await waiter.quit();
  server.proc.kill();
});

test("brpop is woken by a push from another connection", async () => {
  const popped = waiter.brpop("queue", 0);
  await waitBlocked(1);
  assert.equal(await admin.lpush("queue", "job1", "job2"), 2);
  assert.deepEqual(await popped, ["queue", "job1"]);
  assert.equal(await admin.llen("queue"), 1);
});

test("brpop's timeout ends when the test clock moves past it", async () => {
  await admin.call("CLOCK", "FREEZE");
  const popped = waiter.brpop("empty", 10);
  await waitBlocked(1);
  await admin.call("CLOCK", "ADVANCE", 10000);
  assert.equal(await popped, null);
});
