// A rate-limit workload through ioredis's Cluster client, driven by another test
// (tests/py/test_cluster_reshard.py): it INCRs counters and asks CL.THROTTLE of limiters,
// following -MOVED, -ASK and -TRYAGAIN while the slots move, until its stdin closes; then it
// prints one JSON line: the increments acknowledged per counter, the requests allowed per
// limiter, and the errors it got. Not a test file itself (`node --test` does not pick it up).
//
// Usage: node cluster-load.mjs <seed port> <counters,comma,separated> <limiters,...>
import Redis from "ioredis";

const [seedPort, counterList, limiterList] = process.argv.slice(2);
const counters = counterList.split(",");
const limiters = limiterList.split(",");
const acked = {};
const allowed = {};
const errors = [];
let requests = 0;
let stopping = false;

const cluster = new Redis.Cluster([{ host: "127.0.0.1", port: Number(seedPort) }], {
  // Retry redirections and TRYAGAIN for a while rather than fail the request: the test
  // counts a failure as an error, never retries on its own (which could count twice).
  maxRedirections: 64,
  retryDelayOnTryAgain: 20,
  retryDelayOnMoved: 0,
  retryDelayOnClusterDown: 50,
  slotsRefreshTimeout: 2000,
  // A request in flight when a link drops is not sent again (it may have been applied).
  redisOptions: { autoResendUnfulfilledCommands: false },
});

process.stdin.on("end", () => {
  stopping = true;
});
process.stdin.resume();

await new Promise((resolve, reject) => {
  cluster.once("ready", resolve);
  cluster.once("error", reject);
});
process.stdout.write("ready\n");

let i = 0;
while (!stopping) {
  const c = counters[i % counters.length];
  try {
    await cluster.incr(c);
    acked[c] = (acked[c] ?? 0) + 1;
  } catch (e) {
    errors.push(`INCR ${c}: ${e.message}`);
  }
  const t = limiters[i % limiters.length];
  try {
    const r = await cluster.call("CL.THROTTLE", t, 9, 1, 3600);
    if (r[0] === 0) allowed[t] = (allowed[t] ?? 0) + 1;
  } catch (e) {
    errors.push(`CL.THROTTLE ${t}: ${e.message}`);
  }
  requests += 2;
  i += 1;
}
process.stdout.write(JSON.stringify({ acked, allowed, errors: errors.slice(0, 20), requests }) + "\n");
cluster.disconnect();
