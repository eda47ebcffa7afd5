// Run by helper-reset.test.mjs under `node --test`: a reset queued on a client that is not
// connected to sluice fails, though no test waits for it; the run must fail.
import { test, beforeEach, after } from "node:test";
import { createServer } from "node:net";

const UNKNOWN = "-ERR unknown command 'TESTMODE', with args beginning with: 'RESET' \r\n";
import Redis from "ioredis";
import { sharedSluice } from "../../../npm/index.mjs";

const server = createServer((s) =>
  s.on("data", (chunk) => {
      // One error per command in the chunk (ioredis may send several at once).
      for (const _ of String(chunk).matchAll(/(?:^|\r\n)\*\d+\r\n/g)) s.write(UNKNOWN);
    }),
);
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const sluice = await sharedSluice();
const elsewhere = new Redis({ port: server.address().port, host: "127.0.0.1", enableReadyCheck: false });
beforeEach(() => sluice.reset(elsewhere));
after(() => {
  elsewhere.disconnect();
  server.close();
});

test("a test that waits for a reply on the client", async () => {
  await new Promise((resolve) => setTimeout(resolve, 50));
});
test("the next test", () => {});
