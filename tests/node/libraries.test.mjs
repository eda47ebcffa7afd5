// The rate-limiting libraries themselves, from npm, limiting against sluice with ioredis:
// rate-limiter-flexible (RateLimiterRedis, which runs its Lua script through EVALSHA/EVAL)
// and rate-limit-redis behind express-rate-limit (SCRIPT LOAD + EVALSHA). Their windows live
// in server-side TTLs, so the tests move sluice's clock instead of sleeping.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { startSluice } from "./sluice.mjs";
import Redis from "ioredis";
import { RateLimiterRedis, RateLimiterRes } from "rate-limiter-flexible";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";

let server;
let redis;

before(async () => {
  let port;
  ({ proc: server, port } = await startSluice());
  redis = new Redis({ host: "127.0.0.1", port });
  await redis.call("CLOCK", "FREEZE");
});

after(async () => {
  await redis.quit();
  server.kill();
});

const advance = (ms) => redis.call("CLOCK", "ADVANCE", ms);

test("rate-limiter-flexible: consume allows 5, refuses, then allows after the duration", async () => {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlf1", points: 5, duration: 60 });
  for (let i = 1; i <= 5; i++) {
    const res = await limiter.consume("user1");
    assert.equal(res.consumedPoints, i);
    assert.equal(res.remainingPoints, 5 - i);
    assert.equal(res.msBeforeNext, 60_000, "the clock is frozen: the TTL does not run down");
  }
  await assert.rejects(limiter.consume("user1"), (res) => {
    assert.ok(res instanceof RateLimiterRes, "refusals reject with a RateLimiterRes");
    assert.equal(res.remainingPoints, 0);
    assert.equal(res.consumedPoints, 6);
    return true;
  });
  await advance(30_000);
  await assert.rejects(limiter.consume("user1"));
  assert.equal((await limiter.get("user1")).msBeforeNext, 30_000);
  await advance(30_001);
  const res = await limiter.consume("user1");
  assert.equal(res.consumedPoints, 1, "a new window");
  // Each key has its own budget; consuming several points at once.
  assert.equal((await limiter.consume("user2", 5)).remainingPoints, 0);
  await assert.rejects(limiter.consume("user2", 1));
});

test("rate-limiter-flexible: penalty, reward, get, delete", async () => {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlf2", points: 5, duration: 10 });
  assert.equal(await limiter.get("u"), null);
  await limiter.consume("u", 2);
  assert.equal((await limiter.penalty("u", 2)).consumedPoints, 4);
  assert.equal((await limiter.get("u")).remainingPoints, 1);
  assert.equal((await limiter.reward("u", 3)).consumedPoints, 1);
  assert.equal((await limiter.consume("u", 4)).remainingPoints, 0);
  await assert.rejects(limiter.consume("u"));
  assert.equal(await limiter.delete("u"), true);
  assert.equal(await limiter.delete("u"), false);
  assert.equal(await limiter.get("u"), null);
  assert.equal((await limiter.consume("u")).consumedPoints, 1);
});

test("rate-limiter-flexible: block refuses for the block duration", async () => {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlf3", points: 5, duration: 10 });
  const blocked = await limiter.block("ip", 120);
  assert.equal(blocked.msBeforeNext, 120_000);
  await assert.rejects(limiter.consume("ip"), (res) => res.msBeforeNext === 120_000);
  await advance(60_000);
  await assert.rejects(limiter.consume("ip"), "still blocked after the points' duration");
  await advance(60_001);
  assert.equal((await limiter.consume("ip")).consumedPoints, 1);
});

test("rate-limiter-flexible: the EVALSHA → EVAL fallback after SCRIPT FLUSH", async () => {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "rlf4", points: 2, duration: 10 });
  await limiter.consume("k");
  await redis.script("FLUSH");
  assert.equal((await limiter.consume("k")).consumedPoints, 2);
  await assert.rejects(limiter.consume("k"));
});

async function listen(app) {
  const srv = app.listen(0, "127.0.0.1");
  await once(srv, "listening");
  return srv;
}

test("express-rate-limit with rate-limit-redis: 3 requests, 429, then allowed after the window", async () => {
  const app = express();
  app.use(
    rateLimit({
      windowMs: 60_000,
      limit: 3,
      standardHeaders: "draft-7",
      legacyHeaders: false,
      store: new RedisStore({ sendCommand: (...args) => redis.call(...args), prefix: "erl:" }),
    }),
  );
  app.get("/", (_req, res) => res.send("ok"));
  const srv = await listen(app);
  try {
    const url = `http://127.0.0.1:${srv.address().port}/`;
    const statuses = [];
    let last;
    for (let i = 0; i < 5; i++) {
      last = await fetch(url);
      statuses.push(last.status);
      await last.text();
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
    assert.match(last.headers.get("ratelimit"), /limit=3, remaining=0, reset=60/);
    // rate-limit-redis loaded its scripts with SCRIPT LOAD and runs them by SHA.
    const keys = await redis.keys("erl:*");
    assert.equal(keys.length, 1);
    assert.equal(await redis.get(keys[0]), "5");
    await advance(60_001);
    const again = await fetch(url);
    assert.equal(again.status, 200, "a new window after the TTL");
    assert.match(again.headers.get("ratelimit"), /remaining=2/);
    await again.text();
    await redis.script("FLUSH");
    const after = await fetch(url);
    assert.equal(after.status, 200, "NOSCRIPT → SCRIPT LOAD → EVALSHA again");
    await after.text();
  } finally {
    srv.close();
  }
});
