// The npm package's helper (npm/index.mjs) as a test suite uses it: one shared server reset
// before each test, a server of a test's own, and a dump.rdb in the working directory that
// changes nothing.
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

process.env.SLUICE_BIN ??= new URL("../../target/debug/sluice", import.meta.url).pathname;
const { sharedSluice, startSluice } = await import("../../npm/index.mjs");

const sluice = await sharedSluice();
beforeEach(() => sluice.reset());

test("the shared server: the same process for every test", async () => {
  const again = await sharedSluice();
  assert.equal(again, sluice);
  await sluice.command("SET", "left", "behind");
  await sluice.freeze();
  await sluice.advance(3_600_000);
});

test("the shared server after a reset: empty, real time, config as started", async () => {
  assert.equal(await sluice.command("DBSIZE"), 0);
  const now = await sluice.now();
  assert.ok(Math.abs(now - Date.now()) < 5_000, `CLOCK NOW ${now} is not real time`);
  await sluice.command("CONFIG", "SET", "maxmemory", "1mb");
});

test("and again: CONFIG SET undone", async () => {
  assert.deepEqual(await sluice.command("CONFIG", "GET", "maxmemory"), ["maxmemory", "0"]);
  await sluice.command("FAULT", "ERROR", "LOADING left behind", "COUNT", "0", "COMMAND", "get");
  await sluice.command("SCRIPT", "LOAD", "return 1");
});

test("and again: no fault, no cached script", async () => {
  assert.deepEqual(await sluice.command("FAULT", "LIST"), []);
  assert.equal(await sluice.command("GET", "left"), null);
  assert.deepEqual(await sluice.command("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"), [0]);
});

test("ioredis over the Unix socket and over TCP reaches the same reset server", async () => {
  const { default: Redis } = await import("ioredis");
  assert.ok(sluice.socketPath?.startsWith(sluice.dir), `socketPath ${sluice.socketPath}`);
  const unix = new Redis({ path: sluice.socketPath });
  const tcp = new Redis({ host: sluice.host, port: sluice.port });
  try {
    assert.equal(await unix.dbsize(), 0);
    await unix.set("seen", "1");
    assert.equal(await tcp.get("seen"), "1");
  } finally {
    unix.disconnect();
    tcp.disconnect();
  }
});

test("a server of the test's own, in its own directory, gone after stop()", async () => {
  const own = await startSluice();
  assert.notEqual(own.port, sluice.port);
  assert.ok(existsSync(own.dir));
  assert.equal(await own.command("PING"), "PONG");
  await own.stop();
  assert.ok(!own.alive);
  assert.ok(!existsSync(own.dir), "the private directory is removed");
});

test("a dump.rdb in the working directory changes nothing", async () => {
  // 35 keys saved, as a server started by hand with save points leaves them behind.
  const saver = await startSluice();
  for (let i = 0; i < 35; i++) await saver.command("SET", `k${i}`, "v");
  await saver.command("SAVE");
  const work = mkdtempSync(join(tmpdir(), "sluice-cwd-"));
  copyFileSync(join(saver.dir, "dump.rdb"), join(work, "dump.rdb"));
  await saver.stop();
  const before = process.cwd();
  process.chdir(work);
  try {
    const own = await startSluice();
    assert.equal(await own.command("DBSIZE"), 0, "startSluice loaded the working directory's dump.rdb");
    assert.deepEqual(await own.command("CONFIG", "GET", "save"), ["save", ""]);
    await own.stop();
    assert.equal(await sluice.command("DBSIZE"), 0);
  } finally {
    process.chdir(before);
    rmSync(work, { recursive: true, force: true });
  }
});
