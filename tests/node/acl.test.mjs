// A tenant user through ioredis against sluice and a real redis-server 7.0.15 side by side:
// logged in as a user that may only touch `tenant1:*` with the rate limiter's commands, the
// limiter's calls (EVALSHA of a limiter script, INCR, EXPIRE, ZADD…) succeed on its keys and
// every other key, command or channel gets the same NOPERM error from both. CL.THROTTLE,
// sluice's own, is checked under the same rules.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSluice } from "./sluice.mjs";
import Redis from "ioredis";

const LIMITER = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
`;
const RULES = [
  "on", ">tenant-pw", "resetkeys", "~tenant1:*", "resetchannels", "&tenant1:*", "-@all",
  "+incr", "+expire", "+get", "+zadd", "+zrange", "+evalsha", "+ping", "+publish", "+info",
];

let sluice;
let sluicePort;
let redisProc;
let redisPort;
let redisDir;
const opened = [];

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

const connect = (port, extra = {}) => {
  const c = new Redis({ host: "127.0.0.1", port, retryStrategy: (n) => (n > 100 ? null : 50), ...extra });
  opened.push(c);
  return c;
};

before(async () => {
  ({ proc: sluice, port: sluicePort } = await startSluice());
  redisPort = await freePort();
  redisDir = mkdtempSync(join(tmpdir(), "redis-acl-"));
  redisProc = spawn(
    "redis-server",
    ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--dir", redisDir],
    { stdio: "ignore" },
  );
  await connect(redisPort).ping();
});

after(async () => {
  for (const c of opened) c.disconnect();
  sluice.kill();
  redisProc.kill();
  rmSync(redisDir, { recursive: true, force: true });
});

const settle = (p) => p.then((v) => ["ok", v], (e) => ["err", e.message]);

async function tenant(port) {
  const admin = connect(port);
  await admin.acl("SETUSER", "tenant1", ...RULES);
  const sha = await admin.script("LOAD", LIMITER);
  const t = connect(port, {
    username: "tenant1",
    password: "tenant-pw",
    enableReadyCheck: false,
    // CLIENT SETINFO is Redis 7.2's: 7.0 does not know it, sluice refuses it to this user.
    disableClientInfo: true,
  });
  const out = [];
  out.push(await settle(t.evalsha(sha, 1, "tenant1:rate", 60)));
  out.push(await settle(t.evalsha(sha, 1, "tenant1:rate", 60)));
  out.push(await settle(t.incr("tenant1:count")));
  out.push(await settle(t.expire("tenant1:count", 30)));
  out.push(await settle(t.zadd("tenant1:window", 1, "r1", 2, "r2")));
  out.push(await settle(t.zrange("tenant1:window", 0, -1)));
  out.push(await settle(t.publish("tenant1:events", "x")));
  out.push(await settle(t.evalsha(sha, 1, "tenant2:rate", 60)));
  out.push(await settle(t.incr("tenant2:count")));
  out.push(await settle(t.get("other")));
  out.push(await settle(t.set("tenant1:x", "1")));
  out.push(await settle(t.flushall()));
  out.push(await settle(t.publish("tenant2:events", "x")));
  const log = await admin.acl("LOG");
  // Each entry is a flat list of field, value pairs; keep the ones that are not timing.
  out.push(
    log
      .map((e) => {
        const m = {};
        for (let i = 0; i < e.length; i += 2) m[e[i]] = e[i + 1];
        return [m.reason, m.context, m.object, m.username, m.count].join(" ");
      })
      .sort(),
  );
  return { out, t, admin };
}

test("a tenant user gets from sluice what Redis gives it", async () => {
  const ours = await tenant(sluicePort);
  const theirs = await tenant(redisPort);
  assert.deepEqual(ours.out, theirs.out);
  assert.match(ours.out.at(-2)[1], /^NOPERM this user has no permissions to access one of the channels/);
  await ours.admin.acl("SETUSER", "tenant1", "+cl.throttle");
  const [limited] = await ours.t.call("CL.THROTTLE", "tenant1:api", 5, 10, 60);
  assert.equal(limited, 0);
  await assert.rejects(ours.t.call("CL.THROTTLE", "tenant2:api", 5, 10, 60), { message: /^NOPERM / });
});
