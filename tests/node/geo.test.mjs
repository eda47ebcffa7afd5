// A geo search through ioredis against sluice and against a real redis-server 7.0.15 side by
// side: a store finder's calls (GEOADD, GEOSEARCH with distances and coordinates, GEOPOS,
// GEODIST, GEOSEARCHSTORE) must return the same parsed results from both.
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
  redisDir = mkdtempSync(join(tmpdir(), "redis-geo-"));
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

async function storeFinder(r) {
  const out = [];
  out.push(await r.geoadd("stores", 13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"));
  out.push(await r.geoadd("stores", "NX", 13.583333, 37.316667, "Agrigento"));
  out.push(await r.geosearch("stores", "FROMLONLAT", 15, 37, "BYRADIUS", 200, "km", "ASC", "WITHCOORD", "WITHDIST", "WITHHASH"));
  out.push(await r.geosearch("stores", "FROMMEMBER", "Palermo", "BYBOX", 400, 300, "km", "DESC", "COUNT", 2));
  out.push(await r.geopos("stores", "Palermo", "nowhere"));
  out.push(await r.geodist("stores", "Palermo", "Catania", "km"));
  out.push(await r.geohash("stores", "Palermo", "Catania"));
  out.push(await r.geosearchstore("near", "stores", "FROMLONLAT", 15, 37, "BYRADIUS", 200, "km", "STOREDIST"));
  out.push(await r.zrange("near", 0, -1, "WITHSCORES"));
  out.push(await r.georadius("stores", 15, 37, 150, "km", "WITHDIST", "ASC"));
  out.push(await r.geoadd("stores", 200, 10, "far").catch((e) => e.message));
  return out;
}

test("ioredis: a store finder gets Redis's results from sluice", async () => {
  const [fromSluice, fromRedis] = [await storeFinder(clients[0]), await storeFinder(clients[1])];
  assert.deepEqual(fromSluice, fromRedis);
  assert.deepEqual(fromSluice[2][0].slice(0, 2), ["Catania", "56.4413"]);
});
