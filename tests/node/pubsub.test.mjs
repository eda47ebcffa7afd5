// ioredis pub/sub against sluice: subscribe / psubscribe on one connection, publish from
// another, and the subscriber's "message" / "pmessage" events.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { startSluice } from "./sluice.mjs";
import Redis from "ioredis";

let server;
let port;

before(async () => {
  ({ proc: server, port } = await startSluice());
});

after(() => {
  server.kill();
});

test("ioredis: subscribe, psubscribe, publish, unsubscribe", async () => {
  const sub = new Redis({ host: "127.0.0.1", port });
  const pub = new Redis({ host: "127.0.0.1", port });
  try {
    assert.equal(await sub.subscribe("news", "sports"), 2);
    assert.equal(await sub.psubscribe("n*"), 3);
    const message = once(sub, "message");
    const pmessage = once(sub, "pmessage");
    assert.equal(await pub.publish("news", "hello"), 2);
    assert.deepEqual(await message, ["news", "hello"]);
    assert.deepEqual(await pmessage, ["n*", "news", "hello"]);
    assert.deepEqual(await pub.pubsub("NUMSUB", "news", "sports"), ["news", 1, "sports", 1]);
    await sub.unsubscribe("news", "sports");
    await sub.punsubscribe("n*");
    assert.equal(await pub.publish("news", "x"), 0);
    // Out of subscribed mode, the connection takes ordinary commands again.
    assert.equal(await sub.ping(), "PONG");
  } finally {
    sub.disconnect();
    pub.disconnect();
  }
});
