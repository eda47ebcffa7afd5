// The 300-test limiter suite for Node (node:test): 150 sliding windows in MULTI/EXEC and
// 150 fixed-window counters, about 30 commands each. TD_BACKEND (set by scripts/bench.py):
// `ioredis-mock` (in-process, flushed before each test), `sluice` (the npm helper's
// sharedSluice(), TESTMODE RESET before each test, sent on the test's client with its first command) or `sluice-fresh` (startSluice() per
// test); ioredis connects to the helper's Unix socket. TD_STATS names a JSON file that gets the time spent in the hooks and in the tests, and the test process's CPU time and sleeps (and the shared server's), which ab_node.py prints.
import { test, beforeEach, afterEach, after } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const BACKEND = process.env.TD_BACKEND ?? "ioredis-mock";
const WINDOW_MS = 60_000;
const spent = { hooks: 0, tests: 0, count: 0 };
let redis, sluice, helper, Redis;

if (BACKEND === "ioredis-mock") {
  Redis = (await import("ioredis-mock")).default;
} else {
  Redis = (await import("ioredis")).default;
  helper = await import(process.env.SLUICE_HELPER);
}
if (BACKEND === "sluice") {
  sluice = await helper.sharedSluice();
  // The helper's Unix socket, as its README suggests (TCP: { host: sluice.host, port: sluice.port }).
  redis = new Redis({ path: sluice.socketPath });
}

let t0;
beforeEach(async () => {
  const t = performance.now();
  if (BACKEND === "ioredis-mock") {
    redis = new Redis();
    await redis.flushall();
  } else if (BACKEND === "sluice") {
    // Queued on the test's client ahead of its first command: no round trip of its own.
    await sluice.reset(redis);
  } else {
    sluice = await helper.startSluice();
    redis = new Redis({ path: sluice.socketPath });
  }
  spent.hooks += performance.now() - t;
  t0 = performance.now();
});

afterEach(async () => {
  const t = performance.now();
  spent.tests += t - t0;
  spent.count += 1;
  if (BACKEND === "ioredis-mock") {
    redis.disconnect();
  } else if (BACKEND === "sluice-fresh") {
    redis.disconnect();
    await sluice.stop();
  }
  spent.hooks += performance.now() - t;
});

after(async () => {
  if (BACKEND === "sluice") {
    await redis.quit();
    // The shared server is killed at exit and never waited for, so its CPU time would not
    // reach the runner's children's usage: read it here (Linux; clock ticks of 10 ms).
    try {
      const f = readFileSync(`/proc/${sluice.process.pid}/stat`, "utf8").split(") ")[1].split(" ");
      spent.serverCpuMs = (Number(f[11]) + Number(f[12])) * 10;
      // The server's sleeps, every thread's: about one per round trip unless its busy-poll ran.
      spent.serverVcs = 0;
      for (const t of readdirSync(`/proc/${sluice.process.pid}/task`)) {
        const st = readFileSync(`/proc/${sluice.process.pid}/task/${t}/status`, "utf8");
        spent.serverVcs += Number(st.match(/^voluntary_ctxt_switches:\s*(\d+)/m)[1]);
      }
    } catch {
      // Not Linux: the CPU column leaves the server out.
    }
  }
  // The test process's own CPU and sleeps (voluntary context switches), whichever backend.
  const ru = process.resourceUsage();
  spent.nodeCpuMs = (ru.userCPUTime + ru.systemCPUTime) / 1000;
  spent.nodeVcs = ru.voluntaryContextSwitches;
  spent.nodeIvcs = ru.involuntaryContextSwitches;
  if (process.env.TD_STATS) writeFileSync(process.env.TD_STATS, JSON.stringify(spent));
});

async function slidingAllow(key, nowMs, limit) {
  const replies = await redis
    .multi()
    .zremrangebyscore(key, 0, nowMs - WINDOW_MS)
    .zadd(key, nowMs, String(nowMs))
    .zcard(key)
    .pexpire(key, WINDOW_MS)
    .exec();
  return replies[2][1] <= limit;
}

async function fixedAllow(key, limit) {
  const count = await redis.incr(key);
  await redis.expire(key, 60, "NX");
  return count <= limit;
}

for (let i = 0; i < 150; i++) {
  test(`sliding window ${i}`, async () => {
    const start = 1_700_000_000_000 + i;
    const allowed = [];
    for (let n = 0; n < 5; n++) allowed.push(await slidingAllow(`hist:${i}`, start + 1000 * n, 3));
    assert.deepEqual(allowed, [true, true, true, false, false]);
  });
  test(`fixed window ${i}`, async () => {
    const allowed = [];
    for (let n = 0; n < 15; n++) allowed.push(await fixedAllow(`rate:${i}`, 10));
    assert.deepEqual(allowed, [...Array(10).fill(true), ...Array(5).fill(false)]);
  });
}
