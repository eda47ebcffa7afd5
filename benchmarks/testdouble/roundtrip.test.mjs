// One round trip at a time, per round trip: N INCRs from ioredis on the npm helper's shared
// server (its Unix socket, the client given to sluice.reset), awaited one by one inside a
// node:test test (whose async hooks a suite pays for too). Prints wall, the test process's
// CPU and voluntary / involuntary context switches, and the server's CPU and voluntary
// switches, each per round trip. Run from target/bench-testdouble/node (ioredis installed):
//   SLUICE_BIN=... SLUICE_HELPER=.../npm/index.mjs N=20000 node --test roundtrip.test.mjs
// Linux (/proc). Compare helpers or binaries by running it with each, interleaved.
import { test, after } from "node:test";
import { readdirSync, readFileSync } from "node:fs";
import Redis from "ioredis";

const helper = await import(process.env.SLUICE_HELPER);
const sluice = await helper.sharedSluice();
const redis = new Redis({ path: sluice.socketPath });
const N = Number(process.env.N ?? 20000);
after(() => redis.quit());

// The server's CPU (µs) and voluntary switches, every thread's.
function server() {
  const dir = `/proc/${sluice.process.pid}`;
  const f = readFileSync(`${dir}/stat`, "utf8").split(") ")[1].split(" ");
  let vcs = 0;
  for (const t of readdirSync(`${dir}/task`)) {
    vcs += Number(readFileSync(`${dir}/task/${t}/status`, "utf8").match(/^voluntary_ctxt_switches:\s*(\d+)/m)[1]);
  }
  return { cpu: (Number(f[11]) + Number(f[12])) * 10_000, vcs };
}

test(`${N} INCRs one at a time`, async () => {
  await sluice.reset(redis);
  for (let i = 0; i < 500; i++) await redis.incr("warm");
  const s0 = server();
  const r0 = process.resourceUsage();
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await redis.incr("k");
  const t1 = performance.now();
  const r1 = process.resourceUsage();
  const s1 = server();
  const per = (x) => (x / N).toFixed(2);
  const cpu = r1.userCPUTime + r1.systemCPUTime - r0.userCPUTime - r0.systemCPUTime;
  console.log(
    `per round trip: wall ${per(1000 * (t1 - t0))} µs, ` +
      `node CPU ${per(cpu)} µs, vcs ${per(r1.voluntaryContextSwitches - r0.voluntaryContextSwitches)}, ` +
      `ivcs ${per(r1.involuntaryContextSwitches - r0.involuntaryContextSwitches)}; ` +
      `server CPU ${per(s1.cpu - s0.cpu)} µs, vcs ${per(s1.vcs - s0.vcs)}`,
  );
});
