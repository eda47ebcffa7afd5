// An example test using the installed sluice-server npm package (no client library needed
// for this one: the helper's own command()).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startSluice } from "sluice-server";

let sluice;
before(async () => {
  sluice = await startSluice();
});
after(async () => {
  await sluice.stop();
});

test("fixed window resets after the clock moves", async () => {
  const start = await sluice.freeze();
  for (let i = 1; i <= 5; i++) assert.equal(await sluice.command("INCR", "rate:u1"), i);
  await sluice.command("EXPIRE", "rate:u1", 60);
  assert.equal(await sluice.advance(60_001), start + 60_001);
  assert.equal(await sluice.command("GET", "rate:u1"), null);
});

test("CL.THROTTLE refills", async () => {
  await sluice.freeze();
  assert.deepEqual(await sluice.command("CL.THROTTLE", "k", 15, 30, 60), [0, 16, 15, -1, 2]);
});
