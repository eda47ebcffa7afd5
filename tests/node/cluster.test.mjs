// Cluster mode with ioredis's Cluster client: three sluice nodes on loopback ports form a Redis
// cluster over the bus, seeded from one slot map (--cluster-seed-map: each node's first
// nodes.conf). The client bootstraps from any node, runs W1 (a MULTI block on a {user}-tagged
// key), W3 (fixed window) and CL.THROTTLE on keys spread over every node with exact results
// (each node's clock frozen), follows MOVED after `redis-cli --cluster reshard` moves slots
// with their keys, gets CROSSSLOT where Redis gives it, and keeps serving the other nodes'
// keys while one node is down.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Redis from "ioredis";

// The hash slot of a key (CRC16-XMODEM of the key or its {tag}, mod 16384), computed here so
// the test checks the server's routing against its own copy of the rule.
function calculateSlot(key) {
  let k = Buffer.from(key);
  const open = k.indexOf("{");
  if (open >= 0) {
    const close = k.indexOf("}", open + 1);
    if (close > open + 1) k = k.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of k) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc & 16383;
}

const BIN = process.env.SLUICE_BIN ?? "../../target/debug/sluice";
const IDS = ["1", "2", "3"].map((d) => d.repeat(40));
const SPLIT = [[[0, 5460]], [[5461, 10922]], [[10923, 16383]]];
const USERS = Array.from({ length: 12 }, (_, i) => `user${i}`);

let dir;
let mapFile;
let ports;
let busPorts;
const procs = [null, null, null];

async function freePort() {
  const srv = createServer();
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address();
  srv.close();
  await once(srv, "close");
  return port;
}

function mapText(ranges) {
  const lines = ["# sluice seed map (tests/node/cluster.test.mjs)"];
  ranges.forEach((rs, i) => {
    const addr = `127.0.0.1:${ports[i]}@${busPorts[i]}`;
    lines.push(`node ${IDS[i]} ${addr} ${rs.map(([a, b]) => `${a}-${b}`).join(" ")}`);
  });
  return lines.join("\n") + "\n";
}

const owner = (ranges, slot) => ranges.findIndex((rs) => rs.some(([a, b]) => a <= slot && slot <= b));

async function startNode(i) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const proc = spawn(BIN, [
      "--port", String(ports[i]), "--test-mode", "--loglevel", "warning",
      "--cluster-enabled", "yes", "--cluster-port", String(busPorts[i]),
      "--cluster-seed-map", mapFile, "--cluster-config-file", `nodes-${i}.conf`, "--cluster-node-id", IDS[i],
      "--dir", dirname(mapFile), // not the working directory: a dump.rdb there changes nothing
    ]);
    let out = "";
    const ready = await new Promise((resolve) => {
      proc.stdout.on("data", (chunk) => {
        out += chunk;
        if (out.includes("listening on")) resolve(true);
      });
      proc.on("exit", () => resolve(false));
    });
    if (ready) {
      procs[i] = proc;
      return;
    }
    // The port may still be held by the node just killed.
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`sluice node ${i} did not start`);
}

async function killNode(i) {
  const proc = procs[i];
  procs[i] = null;
  if (proc && proc.exitCode === null) {
    proc.kill("SIGKILL");
    await once(proc, "exit");
  }
}

async function direct(i, f) {
  const r = new Redis({ host: "127.0.0.1", port: ports[i], lazyConnect: true });
  await r.connect();
  try {
    return await f(r);
  } finally {
    r.disconnect();
  }
}

// Every node's clock frozen at one instant (a limiter that moves keeps its time).
async function freezeAll() {
  const times = await Promise.all([0, 1, 2].map((i) => direct(i, (r) => r.call("CLOCK", "FREEZE"))));
  const t0 = Math.max(...times.map(Number));
  await Promise.all([0, 1, 2].map((i) => direct(i, (r) => r.call("CLOCK", "SET", t0))));
  return [t0];
}

// Until every node has a bus link to every other and says the cluster is ok.
async function waitOk() {
  const deadline = Date.now() + 15_000;
  for (const i of [0, 1, 2]) {
    for (;;) {
      const nodes = await direct(i, (r) => r.call("CLUSTER", "NODES"));
      const info = await direct(i, (r) => r.call("CLUSTER", "INFO"));
      if (String(nodes).split(" connected").length - 1 === 3 && String(info).includes("cluster_state:ok")) break;
      if (Date.now() > deadline) throw new Error(`the cluster did not form: ${nodes}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function cluster(seed) {
  return new Redis.Cluster([{ host: "127.0.0.1", port: ports[seed] }], {
    redisOptions: { commandTimeout: 500 },
    clusterRetryStrategy: () => 100,
  });
}

before(async () => {
  ports = [await freePort(), await freePort(), await freePort()];
  busPorts = [await freePort(), await freePort(), await freePort()];
  dir = mkdtempSync(join(tmpdir(), "sluice-node-cluster-"));
  mapFile = join(dir, "cluster.map");
  writeFileSync(mapFile, mapText(SPLIT));
  for (const i of [0, 1, 2]) await startNode(i);
  await waitOk();
});

after(async () => {
  for (const i of [0, 1, 2]) await killNode(i);
  rmSync(dir, { recursive: true, force: true });
});

test("ioredis Cluster: W1, W3 and CL.THROTTLE exact on every node; CROSSSLOT", async () => {
  const t0 = Number((await freezeAll())[0]);
  assert.deepEqual(new Set(USERS.map((u) => owner(SPLIT, calculateSlot(u)))), new Set([0, 1, 2]));
  const c = cluster(1);
  try {
    for (const u of USERS) {
      const hist = `hist:{${u}}:reply`;
      for (let i = 0; i < 20; i++) {
        const now = t0 + i;
        const replies = await c
          .multi()
          .zadd(hist, now, String(now))
          .zremrangebyscore(hist, 0, now - 60_000)
          .zcard(hist)
          .expire(hist, 61)
          .exec();
        assert.deepEqual(replies, [[null, 1], [null, 0], [null, i + 1], [null, 1]]);
      }
      assert.equal(await c.ttl(hist), 61);
      const rate = `rate:{${u}}:reply`;
      const allowed = [];
      for (let i = 0; i < 20; i++) {
        if ((await c.get(rate)) === null) {
          await c.set(rate, 1, "EX", 61);
          allowed.push(true);
        } else {
          allowed.push((await c.incr(rate)) <= 5);
        }
      }
      assert.deepEqual(allowed, [...Array(5).fill(true), ...Array(15).fill(false)]);
      const thr = [];
      for (let i = 0; i < 20; i++) thr.push(await c.call("CL.THROTTLE", `throttle:{${u}}`, 15, 30, 60, 1));
      assert.deepEqual(thr[0], [0, 16, 15, -1, 2]);
      assert.equal(thr.filter((r) => r[0] === 0).length, 16);
    }
    for (const i of [0, 1, 2]) {
      const mine = USERS.filter((u) => owner(SPLIT, calculateSlot(u)) === i).length;
      assert.equal(await direct(i, (r) => r.dbsize()), 3 * mine);
    }
    // x (16287) and foo (12182) are both node 3's: queued fine, refused at EXEC.
    await assert.rejects(c.multi().incr("x").incr("foo").exec(), /CROSSSLOT/);
    await assert.rejects(c.call("EVAL", "return 1", 2, "x", "foo"), /^ReplyError: CROSSSLOT Keys in request don't hash to the same slot/);
  } finally {
    c.disconnect();
  }
});

test("ioredis Cluster: follows MOVED after a reshard, survives a node loss", async () => {
  await freezeAll();
  const c = cluster(0);
  try {
    for (const u of USERS) assert.equal((await c.call("CL.THROTTLE", `gcra:{${u}}`, 15, 30, 60, 1))[0], 0);
    const moved = USERS.filter((u) => calculateSlot(u) >= 10923 && calculateSlot(u) <= 13000);
    assert.ok(moved.length > 0);
    const next = [[[0, 5460], [10923, 13000]], [[5461, 10922]], [[13001, 16383]]];
    // Slots 10923-13000 move from node 3 to node 1 with their keys, as operators move them.
    execFileSync("redis-cli", [
      "--cluster", "reshard", `127.0.0.1:${ports[0]}`, "--cluster-from", IDS[2], "--cluster-to", IDS[0],
      "--cluster-slots", "2078", "--cluster-yes",
    ], { stdio: "ignore" });
    const first = `gcra:{${moved[0]}}`;
    await assert.rejects(
      direct(2, (r) => r.get(first)),
      new RegExp(`^ReplyError: MOVED ${calculateSlot(first)} 127\\.0\\.0\\.1:${ports[0]}$`),
    );
    for (const u of USERS) {
      const r = await c.call("CL.THROTTLE", `gcra:{${u}}`, 15, 30, 60, 1);
      // Every limiter remembers: the moved ones moved with their state.
      assert.equal(r[2], 14, `${u}: ${r}`);
    }
    await killNode(2);
    for (const u of USERS) {
      const onDead = owner(next, calculateSlot(u)) === 2;
      const result = await c.incr(`count:{${u}}`).then(
        () => "ok",
        () => "failed",
      );
      assert.equal(result, onDead ? "failed" : "ok", u);
    }
    await startNode(2);
    assert.match(await direct(2, (r) => r.call("CLUSTER", "INFO")), /cluster_slots_assigned:16384\r\n/);
    await direct(2, (r) => r.call("CLOCK", "FREEZE"));
    const deadline = Date.now() + 10_000;
    for (const u of USERS) {
      for (;;) {
        try {
          assert.equal((await c.call("CL.THROTTLE", `gcra:{${u}}`, 15, 30, 60, 1))[0], 0);
          break;
        } catch (e) {
          if (Date.now() > deadline) throw e;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    }
  } finally {
    c.disconnect();
  }
});
