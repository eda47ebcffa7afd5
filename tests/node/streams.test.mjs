// A stream consumer group through ioredis against sluice and against a real redis-server 7.0.15
// side by side: a producer, two consumers in one group, one stalling and the other taking its
// pending entries over with XAUTOCLAIM, acknowledgements, and a consumer blocked in XREADGROUP
// woken by the producer. Every parsed result must be the same from both.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSluice } from "./sluice.mjs";
import Redis from "ioredis";

let sluice;
let redisProc;
let redisDir;
let clients = [];

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

before(async () => {
  let port;
  ({ proc: sluice, port } = await startSluice());
  const redisPort = await freePort();
  redisDir = mkdtempSync(join(tmpdir(), "redis-streams-"));
  redisProc = spawn(
    "redis-server",
    ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--dir", redisDir],
    { stdio: "ignore" },
  );
  const real = new Redis({ host: "127.0.0.1", port: redisPort, retryStrategy: (n) => (n > 100 ? null : 50) });
  await real.ping();
  clients = [new Redis({ host: "127.0.0.1", port }), real];
});

after(async () => {
  for (const c of clients) await c.quit();
  sluice.kill();
  redisProc.kill();
  rmSync(redisDir, { recursive: true, force: true });
});

async function jobQueue(r, blocker) {
  const out = [];
  out.push(await r.xgroup("CREATE", "jobs", "workers", "$", "MKSTREAM"));
  for (let i = 1; i <= 6; i++) out.push(await r.xadd("jobs", `${i}-0`, "job", String(i)));
  out.push(await r.xreadgroup("GROUP", "workers", "alice", "COUNT", 3, "STREAMS", "jobs", ">"));
  out.push(await r.xreadgroup("GROUP", "workers", "bob", "COUNT", 3, "STREAMS", "jobs", ">"));
  out.push(await r.xack("jobs", "workers", "1-0"));
  out.push(await r.xpending("jobs", "workers"));
  // bob stalls: alice takes over what is pending.
  out.push(await r.xautoclaim("jobs", "workers", "alice", 0, "0-0", "COUNT", 10));
  out.push(await r.xclaim("jobs", "workers", "bob", 0, "2-0", "JUSTID"));
  out.push(await r.xpending("jobs", "workers", "-", "+", 10, "alice").then((rows) => rows.map((row) => [row[0], row[1], row[3]])));
  out.push(await r.xack("jobs", "workers", "2-0", "3-0", "4-0", "5-0", "6-0"));
  out.push(await r.xinfo("GROUPS", "jobs"));
  out.push(await r.xrange("jobs", "(2-0", "+", "COUNT", 2));
  out.push(await r.xlen("jobs"));
  // A consumer blocked on the group, woken by the producer.
  const waiting = blocker.xreadgroup("GROUP", "workers", "carol", "BLOCK", 5000, "STREAMS", "jobs", ">");
  for (let i = 0; i < 500; i++) {
    const info = await r.info("clients");
    if (/blocked_clients:[1-9]/.test(info)) break;
    await new Promise((res) => setTimeout(res, 10));
  }
  out.push(await r.xadd("jobs", "7-0", "job", "late"));
  out.push(await waiting);
  out.push(await r.xadd("jobs", "1-0", "f", "v").catch((e) => e.message));
  out.push(await r.xreadgroup("GROUP", "nogroup", "x", "STREAMS", "jobs", ">").catch((e) => e.message));
  return out;
}

test("ioredis: a consumer group with a claim gets Redis's results from sluice", async () => {
  const blockers = clients.map((c) => c.duplicate());
  const fromSluice = await jobQueue(clients[0], blockers[0]);
  const fromRedis = await jobQueue(clients[1], blockers[1]);
  for (const b of blockers) await b.quit();
  assert.deepEqual(fromSluice, fromRedis);
  // Not vacuous: the autoclaim moved the pending entries, and carol got the late job.
  assert.deepEqual(fromSluice[11][1].map((e) => e[0]), ["2-0", "3-0", "4-0", "5-0", "6-0"]);
  assert.deepEqual(fromSluice[19], [["jobs", [["7-0", ["job", "late"]]]]]);
});
