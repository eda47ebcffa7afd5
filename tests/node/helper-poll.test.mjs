// The npm helper's reply poll: on a client given to `sluice.reset(client)`, each command
// sent keeps a chain of setImmediate (so node polls its sockets instead of sleeping) until
// the reply comes or 100 µs have passed. Bounded, ended by the reply, and invisible to the
// test: the same replies and errors as a client the helper does not know.
// (A file of its own: sharedSluice() gives it a server of its own.)
import { test, beforeEach, after, mock } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

process.env.SLUICE_BIN ??= new URL("../../target/debug/sluice", import.meta.url).pathname;
const { sharedSluice } = await import("../../npm/index.mjs");
const { default: Redis } = await import("ioredis");
const { createClient } = await import("redis");

const sluice = await sharedSluice();
const redis = new Redis({ path: sluice.socketPath });
// A client the helper never sees: no poll on it.
const plain = new Redis({ path: sluice.socketPath });
const nodeRedis = createClient({ socket: { path: sluice.socketPath } });
const plainNodeRedis = createClient({ socket: { path: sluice.socketPath } });
await nodeRedis.connect();
await plainNodeRedis.connect();
beforeEach(() => sluice.reset(redis));
after(async () => {
  await redis.quit();
  await plain.quit();
  await nodeRedis.quit();
  await plainNodeRedis.quit();
});

const immediates = () => process.getActiveResourcesInfo().filter((r) => r === "Immediate").length;
// One turn of the event loop: the poll's pending tick (scheduled before this one) runs first.
const realSetImmediate = setImmediate;
const turn = () => new Promise((resolve) => realSetImmediate(resolve));

test("a command on the reset client is polled for until its reply", async () => {
  // A bound far longer than the round trip, so that only the reply can end the poll.
  process.env.SLUICE_REPLY_POLL_US = "5000000";
  try {
    await sluice.reset(redis);
  } finally {
    delete process.env.SLUICE_REPLY_POLL_US;
  }
  await redis.ping();
  await turn();
  assert.equal(immediates(), 0);
  const reply = redis.incr("k");
  assert.equal(immediates(), 1, "no poll after a command on the reset client");
  assert.equal(await reply, 1);
  // Its tick is still pending when the reply is handed over; the next one sees the reply
  // and ends the chain, well before its 100 µs bound.
  assert.equal(immediates(), 1);
  await turn();
  assert.equal(immediates(), 0, "the poll went on after the reply");
});

test("SLUICE_REPLY_POLL_US=0: no poll", async () => {
  process.env.SLUICE_REPLY_POLL_US = "0";
  try {
    await sluice.reset(redis);
  } finally {
    delete process.env.SLUICE_REPLY_POLL_US;
  }
  await redis.ping();
  await turn();
  const reply = redis.incr("k");
  assert.equal(immediates(), 0);
  assert.equal(await reply, 1);
});

test("a command nobody answers is polled for 100 µs, not until its reply", async () => {
  const popped = redis.blpop("queue", 5);
  await sleep(20);
  assert.equal(immediates(), 0, "the poll is not bounded");
  assert.equal(await sluice.command("RPUSH", "queue", "job"), 1);
  assert.deepEqual(await popped, ["queue", "job"]);
});

test("a client the helper does not know is not polled for", async () => {
  await redis.ping(); // the reset's poll (and the ping's) end with this reply
  await turn();
  const reply = plain.incr("k");
  assert.equal(immediates(), 0);
  assert.equal(await reply, 1);
});

// The same commands on the reset client and on a plain one, replies and errors side by side.
async function session(client, p) {
  const shown = (v) => (v instanceof Error ? [v.name, v.message] : v);
  const out = [];
  out.push(await client.set(`${p}s`, "text"));
  out.push(await client.incr(`${p}s`).catch(shown));
  out.push(await client.call("NOSUCHCOMMAND").catch(shown));
  const txn = await client.multi().incr(`${p}n`).incr(`${p}s`).rpush(`${p}l`, "a", "b").exec();
  out.push(txn.map(([e, v]) => [e && shown(e), v]));
  const piped = await client.pipeline().incrby(`${p}n`, 2).lrange(`${p}l`, 0, -1).exec();
  out.push(piped.map(([e, v]) => [e && shown(e), v]));
  out.push(await Promise.all([client.get(`${p}n`), client.llen(`${p}l`), client.exists(`${p}x`)]));
  return out;
}

test("replies and errors are the client's own", async () => {
  const mine = await session(redis, "a:");
  assert.deepEqual(mine, await session(plain, "b:"));
  assert.deepEqual(mine[1], ["ReplyError", "ERR value is not an integer or out of range"]);
  assert.deepEqual(mine[5], ["3", 2, 0]);
});

test("node-redis: the reset client's commands are polled for, for 100 µs at most", async () => {
  await sluice.reset(nodeRedis);
  await sleep(5); // the reset's poll, bounded by time alone, is over
  // node-redis schedules its own write with an immediate: one more than that.
  const theirs = plainNodeRedis.sendCommand(["INCR", "other"]);
  const own = immediates();
  await theirs;
  await sleep(5);
  const reply = nodeRedis.sendCommand(["INCR", "k"]);
  assert.equal(immediates(), own + 1, "no poll after a command on the reset client");
  assert.equal(await reply, 1);
  assert.equal(await nodeRedis.incr("k"), 2);
  const popped = nodeRedis.blPop("queue", 5);
  await sleep(20);
  assert.equal(immediates(), 0, "the poll is not bounded");
  await sluice.command("RPUSH", "queue", "job");
  assert.deepEqual(await popped, { key: "queue", element: "job" });
});

test("a test's fake timers neither hold nor see the poll", async (t) => {
  await redis.ping();
  await turn();
  mock.timers.enable({ apis: ["setImmediate", "setTimeout"] });
  t.after(() => mock.timers.reset());
  const reply = redis.incr("k");
  // node's own immediate, not the fake one the test would have to run.
  assert.equal(immediates(), 1);
  assert.equal(await reply, 1);
  await turn();
  assert.equal(immediates(), 0);
  mock.timers.runAll(); // nothing of the helper's in there
  mock.timers.reset();
  const next = redis.incr("k");
  assert.equal(immediates(), 1, "the poll stopped working after the fake timers");
  assert.equal(await next, 2);
});
