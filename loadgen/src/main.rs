//! `loadgen`: a closed-loop load generator for sluice and Redis, loopback only.
//!
//! Every connection sends a batch of `--pipeline` decisions, waits for all their replies,
//! records the batch's round trip once per decision in an HDR histogram, and sends the next
//! batch. Request bytes are built before the clock starts; only the millisecond timestamps of
//! the sliding-window workload are patched in place per batch (fixed-width digits). A run is
//! bounded in time (`--duration`) and in count (`--max-decisions`).
//!
//! A *decision* is one rate-limit decision as a client library makes it:
//! - `sliding` (W1): `MULTI; ZADD k now now; ZREMRANGEBYSCORE k 0 now-window; ZCARD k;
//!   EXPIRE k window+1; EXEC`, sent in one write as redis-py's transactional pipeline does;
//! - `fixed` (W3): `SET k 0 EX window NX` + `INCR k`, sent together;
//! - `throttle` (W6): `CL.THROTTLE k 15 30 60 1`;
//! - `getset`: one `GET k` or `SET k xyz` (50/50);
//! - `get`: one `GET k`;
//! - `script`: `EVALSHA <sha> 1 k window` of a fixed-window script (INCRBY + EXPIRE), loaded
//!   first with `SCRIPT LOAD`.
//!
//! The `fill-*` workloads write `--keys` keys once each (for memory measurements) and report
//! how long that took.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The fixed-window script of the `script` workload.
const SCRIPT: &str = "local c = redis.call('INCRBY', KEYS[1], 1)\n\
if c == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end\n\
return c";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// W1: sliding-window log on a sorted set, in MULTI/EXEC.
    Sliding,
    /// W3: fixed window, SET NX EX + INCR.
    Fixed,
    /// W6: CL.THROTTLE.
    Throttle,
    /// 50/50 GET/SET.
    Getset,
    /// GET only.
    Get,
    /// EVALSHA of a fixed-window script.
    Script,
    /// SET k 1 EX 3600 for every key (counters with a TTL).
    FillCounter,
    /// CL.THROTTLE k 15 1 3600 1 for every key.
    FillThrottle,
    /// What redis-cell stores for such a throttle key, written with plain commands:
    /// SET k <19-digit TAT in ns> PX 3600000.
    FillThrottleState,
    /// ZADD k with 10 entries (13-digit scores and members) + EXPIRE k 3600.
    FillZset,
    /// ZADD k with 1,000 entries (13-digit scores and members, in 10 commands of 100) +
    /// EXPIRE k 3600.
    FillZset1000,
    /// The W5 funnel: HSET k capacity 15 leaking_rate 0.5 left_quota 14 leaking_ts <13
    /// digits> + EXPIRE k 3600.
    FillHash,
    /// SET k 1, no TTL.
    FillPlain,
    /// SET k 1 PXAT <--at-ms>: every key expires at the same instant.
    FillExpireAt,
}

impl Workload {
    fn is_fill(self) -> bool {
        matches!(
            self,
            Workload::FillCounter
                | Workload::FillThrottle
                | Workload::FillThrottleState
                | Workload::FillZset
                | Workload::FillZset1000
                | Workload::FillHash
                | Workload::FillPlain
                | Workload::FillExpireAt
        )
    }

    fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// Closed-loop load generator for Redis-protocol servers on loopback.
#[derive(Debug, Parser)]
#[command(name = "loadgen")]
struct Cli {
    /// Server address; must be a loopback address (or `localhost`).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Concurrent connections.
    #[arg(long, default_value_t = 1)]
    connections: usize,
    /// Decisions in flight per connection (one write per batch).
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Measured seconds (after the warm-up).
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Unmeasured seconds before the measurement.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Number of distinct keys (each decision picks one at random).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// The workload.
    #[arg(long, value_enum, default_value = "getset")]
    workload: Workload,
    /// Stop after this many decisions in total, whatever the duration.
    #[arg(long, default_value_t = 100_000_000)]
    max_decisions: u64,
    /// Window of the sliding/fixed/script limiters, in ms.
    #[arg(long, default_value_t = 1000)]
    window_ms: u64,
    /// Key prefix (keys are `<prefix>:<n>`); default: `lg:<workload>`.
    #[arg(long)]
    prefix: Option<String>,
    /// Deadline (Unix ms) of `fill-expire-at`.
    #[arg(long)]
    at_ms: Option<u64>,
    /// Seed of the key choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// One precomputed batch: its bytes, where the timestamps go, and what to expect back.
struct Batch {
    bytes: Vec<u8>,
    /// Offsets of 13-digit fields to overwrite with `now` (ms).
    now_at: Vec<usize>,
    /// Offsets of 13-digit fields to overwrite with `now - window`.
    cutoff_at: Vec<usize>,
    replies: usize,
    decisions: u64,
}

/// splitmix64: a small deterministic generator for key choice.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Appends one RESP multibulk request.
fn push_cmd(out: &mut Vec<u8>, args: &[&[u8]]) {
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        let _ = write!(out, "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends a request whose arguments may contain 13-digit placeholders: `Arg::Now` and
/// `Arg::Cutoff` are recorded so they can be patched per batch.
enum Arg<'a> {
    Lit(&'a [u8]),
    Now,
    Cutoff,
}

fn push_cmd_patched(
    out: &mut Vec<u8>,
    args: &[Arg<'_>],
    now_at: &mut Vec<usize>,
    cut: &mut Vec<usize>,
) {
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        match a {
            Arg::Lit(b) => {
                let _ = write!(out, "${}\r\n", b.len());
                out.extend_from_slice(b);
            }
            Arg::Now | Arg::Cutoff => {
                out.extend_from_slice(b"$13\r\n");
                if matches!(a, Arg::Now) {
                    now_at.push(out.len());
                } else {
                    cut.push(out.len());
                }
                out.extend_from_slice(b"0000000000000");
            }
        }
        out.extend_from_slice(b"\r\n");
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn write_13(buf: &mut [u8], at: usize, mut v: u64) {
    for i in (0..13).rev() {
        buf[at + i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

struct Plan {
    workload: Workload,
    window_ms: u64,
    at_ms: u64,
    prefix: String,
    sha: Option<String>,
}

impl Plan {
    /// Appends one decision for key number `k`; returns the number of replies it produces.
    fn decision(&self, k: u64, rng: &mut Rng, b: &mut Batch) -> usize {
        let key = format!("{}:{k}", self.prefix);
        let key = key.as_bytes();
        let window_s = (self.window_ms / 1000).max(1);
        let expire = (window_s + 1).to_string();
        match self.workload {
            Workload::Sliding => {
                let out = &mut b.bytes;
                push_cmd(out, &[b"MULTI"]);
                push_cmd_patched(
                    out,
                    &[Arg::Lit(b"ZADD"), Arg::Lit(key), Arg::Now, Arg::Now],
                    &mut b.now_at,
                    &mut b.cutoff_at,
                );
                push_cmd_patched(
                    out,
                    &[
                        Arg::Lit(b"ZREMRANGEBYSCORE"),
                        Arg::Lit(key),
                        Arg::Lit(b"0"),
                        Arg::Cutoff,
                    ],
                    &mut b.now_at,
                    &mut b.cutoff_at,
                );
                push_cmd(out, &[b"ZCARD", key]);
                push_cmd(out, &[b"EXPIRE", key, expire.as_bytes()]);
                push_cmd(out, &[b"EXEC"]);
                6
            }
            Workload::Fixed => {
                push_cmd(
                    &mut b.bytes,
                    &[
                        b"SET",
                        key,
                        b"0",
                        b"EX",
                        window_s.to_string().as_bytes(),
                        b"NX",
                    ],
                );
                push_cmd(&mut b.bytes, &[b"INCR", key]);
                2
            }
            Workload::Throttle => {
                push_cmd(
                    &mut b.bytes,
                    &[b"CL.THROTTLE", key, b"15", b"30", b"60", b"1"],
                );
                1
            }
            Workload::Getset => {
                if rng.next() & 1 == 0 {
                    push_cmd(&mut b.bytes, &[b"GET", key]);
                } else {
                    push_cmd(&mut b.bytes, &[b"SET", key, b"xyz"]);
                }
                1
            }
            Workload::Get => {
                push_cmd(&mut b.bytes, &[b"GET", key]);
                1
            }
            Workload::Script => {
                let sha = self.sha.as_deref().unwrap_or_default();
                push_cmd(
                    &mut b.bytes,
                    &[
                        b"EVALSHA",
                        sha.as_bytes(),
                        b"1",
                        key,
                        window_s.to_string().as_bytes(),
                    ],
                );
                1
            }
            Workload::FillCounter => {
                push_cmd(&mut b.bytes, &[b"SET", key, b"1", b"EX", b"3600"]);
                1
            }
            Workload::FillThrottle => {
                // One token per hour: the key's TTL (the emission interval) outlives the run.
                push_cmd(
                    &mut b.bytes,
                    &[b"CL.THROTTLE", key, b"15", b"1", b"3600", b"1"],
                );
                1
            }
            Workload::FillThrottleState => {
                // A TAT a little in the future, in ns, as redis-cell stores it.
                let tat = (unix_ms() + 3_600_000) * 1_000_000 + (k % 1_000_000);
                push_cmd(
                    &mut b.bytes,
                    &[b"SET", key, tat.to_string().as_bytes(), b"PX", b"3600000"],
                );
                1
            }
            Workload::FillZset => {
                let base = 1_700_000_000_000u64 + (rng.next() % 1_000_000);
                let mut args: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), key.to_vec()];
                for i in 0..10 {
                    let s = (base + i * 100).to_string().into_bytes();
                    args.push(s.clone());
                    args.push(s);
                }
                let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                push_cmd(&mut b.bytes, &refs);
                push_cmd(&mut b.bytes, &[b"EXPIRE", key, b"3600"]);
                2
            }
            Workload::FillZset1000 => {
                let base = 1_700_000_000_000u64 + (rng.next() % 1_000_000);
                for chunk in 0..10u64 {
                    let mut args: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), key.to_vec()];
                    for i in 0..100 {
                        let s = (base + (chunk * 100 + i) * 10).to_string().into_bytes();
                        args.push(s.clone());
                        args.push(s);
                    }
                    let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                    push_cmd(&mut b.bytes, &refs);
                }
                push_cmd(&mut b.bytes, &[b"EXPIRE", key, b"3600"]);
                11
            }
            Workload::FillHash => {
                let ts = (1_700_000_000_000u64 + (rng.next() % 1_000_000)).to_string();
                push_cmd(
                    &mut b.bytes,
                    &[
                        b"HSET",
                        key,
                        b"capacity",
                        b"15",
                        b"leaking_rate",
                        b"0.5",
                        b"left_quota",
                        b"14",
                        b"leaking_ts",
                        ts.as_bytes(),
                    ],
                );
                push_cmd(&mut b.bytes, &[b"EXPIRE", key, b"3600"]);
                2
            }
            Workload::FillPlain => {
                push_cmd(&mut b.bytes, &[b"SET", key, b"1"]);
                1
            }
            Workload::FillExpireAt => {
                let at = self.at_ms.to_string();
                push_cmd(&mut b.bytes, &[b"SET", key, b"1", b"PXAT", at.as_bytes()]);
                1
            }
        }
    }

    fn batch(&self, keys: impl Iterator<Item = u64>, rng: &mut Rng) -> Batch {
        let mut b = Batch {
            bytes: Vec::new(),
            now_at: Vec::new(),
            cutoff_at: Vec::new(),
            replies: 0,
            decisions: 0,
        };
        for k in keys {
            b.replies += self.decision(k, rng, &mut b);
            b.decisions += 1;
        }
        b
    }
}

/// Skips one RESP reply at `pos`; returns the position after it and the errors inside it, or
/// None if it is not complete yet.
fn skip_reply(
    buf: &[u8],
    pos: usize,
    errors: &mut u64,
    first_error: &mut Option<String>,
) -> Option<usize> {
    let line_end = pos + buf.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let kind = *buf.get(pos)?;
    let body = &buf[pos + 1..line_end];
    let after = line_end + 2;
    let num = || -> Option<i64> { std::str::from_utf8(body).ok()?.parse().ok() };
    match kind {
        b'+' | b':' | b'_' | b',' | b'#' | b'(' => Some(after),
        b'-' => {
            *errors += 1;
            if first_error.is_none() {
                *first_error = Some(String::from_utf8_lossy(body).into_owned());
            }
            Some(after)
        }
        b'$' | b'=' | b'!' => {
            let n = num()?;
            if n < 0 {
                return Some(after);
            }
            let end = after + n as usize + 2;
            (end <= buf.len()).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = num()?;
            let n = if kind == b'%' { n * 2 } else { n };
            let mut p = after;
            for _ in 0..n.max(0) {
                p = skip_reply(buf, p, errors, first_error)?;
            }
            Some(p)
        }
        _ => {
            *errors += 1;
            Some(after)
        }
    }
}

struct ConnResult {
    hist: Histogram<u64>,
    decisions: u64,
    errors: u64,
    first_error: Option<String>,
}

/// Sends `batch` and reads until all its replies are in; returns (errors).
async fn round_trip(
    stream: &mut TcpStream,
    batch: &Batch,
    rbuf: &mut Vec<u8>,
    errors: &mut u64,
    first_error: &mut Option<String>,
) -> std::io::Result<()> {
    stream.write_all(&batch.bytes).await?;
    rbuf.clear();
    let mut pos = 0;
    let mut got = 0;
    while got < batch.replies {
        match skip_reply(rbuf, pos, errors, first_error) {
            Some(p) => {
                pos = p;
                got += 1;
            }
            None => {
                if rbuf.capacity() - rbuf.len() < 4096 {
                    rbuf.reserve(16 * 1024);
                }
                let n = stream.read_buf(rbuf).await?;
                if n == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "server closed the connection",
                    ));
                }
            }
        }
    }
    Ok(())
}

async fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

/// Runs one closed-loop connection until `end` or until the shared budget is spent.
async fn run_conn(
    addr: SocketAddr,
    mut batches: Vec<Batch>,
    window_ms: u64,
    start: Instant,
    end: Instant,
    used: Arc<AtomicU64>,
    max_decisions: u64,
) -> std::io::Result<ConnResult> {
    let mut stream = connect(addr).await?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let mut rbuf = Vec::with_capacity(64 * 1024);
    let (mut decisions, mut errors, mut first_error) = (0u64, 0u64, None);
    let n_batches = batches.len();
    let mut i = 0;
    loop {
        if Instant::now() >= end {
            break;
        }
        let batch = &mut batches[i % n_batches];
        i += 1;
        if !batch.now_at.is_empty() || !batch.cutoff_at.is_empty() {
            let now = unix_ms();
            for &at in &batch.now_at {
                write_13(&mut batch.bytes, at, now);
            }
            for &at in &batch.cutoff_at {
                write_13(&mut batch.bytes, at, now.saturating_sub(window_ms));
            }
        }
        let batch = &*batch;
        let t0 = Instant::now();
        round_trip(&mut stream, batch, &mut rbuf, &mut errors, &mut first_error).await?;
        if t0 >= start {
            let us = t0.elapsed().as_micros().max(1) as u64;
            let _ = hist.record_n(us.min(60_000_000), batch.decisions);
            decisions += batch.decisions;
            if used.fetch_add(batch.decisions, Ordering::Relaxed) + batch.decisions >= max_decisions
            {
                break;
            }
        }
    }
    Ok(ConnResult {
        hist,
        decisions,
        errors,
        first_error,
    })
}

/// Writes every key once, `pipeline` decisions per round trip.
async fn fill_conn(
    addr: SocketAddr,
    plan: Arc<Plan>,
    keys: std::ops::Range<u64>,
    pipeline: usize,
) -> std::io::Result<ConnResult> {
    let mut stream = connect(addr).await?;
    let mut rng = Rng(keys.start ^ 0x5eed);
    let mut rbuf = Vec::with_capacity(64 * 1024);
    let (mut errors, mut first_error) = (0u64, None);
    let mut k = keys.start;
    while k < keys.end {
        let hi = (k + pipeline as u64).min(keys.end);
        let batch = plan.batch(k..hi, &mut rng);
        round_trip(
            &mut stream,
            &batch,
            &mut rbuf,
            &mut errors,
            &mut first_error,
        )
        .await?;
        k = hi;
    }
    Ok(ConnResult {
        hist: Histogram::new(3).expect("valid"),
        decisions: keys.end - keys.start,
        errors,
        first_error,
    })
}

/// One request on a fresh connection; returns the raw reply.
async fn one_request(addr: SocketAddr, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
    let mut s = connect(addr).await?;
    let mut req = Vec::new();
    push_cmd(&mut req, args);
    s.write_all(&req).await?;
    let mut buf = Vec::with_capacity(256);
    loop {
        let (mut e, mut f) = (0, None);
        if skip_reply(&buf, 0, &mut e, &mut f).is_some() {
            return Ok(buf);
        }
        if s.read_buf(&mut buf).await? == 0 {
            return Ok(buf);
        }
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    let ip: IpAddr = if host == "localhost" {
        IpAddr::from([127, 0, 0, 1])
    } else {
        host.parse()
            .map_err(|_| format!("--host {host}: not an IP address"))?
    };
    if !ip.is_loopback() {
        return Err(format!(
            "--host {host}: loadgen only drives servers on loopback"
        ));
    }
    Ok(SocketAddr::new(ip, port))
}

fn main() {
    let cli = Cli::parse();
    let addr = match resolve(&cli.host, cli.port) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let code = rt.block_on(run(cli, addr));
    std::process::exit(code);
}

async fn run(cli: Cli, addr: SocketAddr) -> i32 {
    let connections = cli.connections.max(1);
    let pipeline = cli.pipeline.max(1);
    let workload = cli.workload;
    let mut plan = Plan {
        workload,
        window_ms: cli.window_ms,
        at_ms: cli.at_ms.unwrap_or_else(|| unix_ms() + 5000),
        prefix: cli.prefix.clone().unwrap_or_else(|| {
            let name = workload.name();
            format!("lg:{}", name.strip_prefix("fill-").unwrap_or(&name))
        }),
        sha: None,
    };
    if workload == Workload::Script {
        let reply = match one_request(addr, &[b"SCRIPT", b"LOAD", SCRIPT.as_bytes()]).await {
            Ok(r) => r,
            Err(e) => return report_unavailable(&cli, &format!("connect: {e}")),
        };
        if reply.first() != Some(&b'$') {
            let text = String::from_utf8_lossy(&reply).trim().to_string();
            return report_unavailable(&cli, &format!("SCRIPT LOAD: {text}"));
        }
        let sha = String::from_utf8_lossy(&reply)
            .lines()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        plan.sha = Some(sha);
    }
    let plan = Arc::new(plan);

    if workload.is_fill() {
        let t0 = Instant::now();
        let per = cli.keys.div_ceil(connections as u64);
        let mut tasks = Vec::new();
        for c in 0..connections as u64 {
            let lo = (c * per).min(cli.keys);
            let hi = ((c + 1) * per).min(cli.keys);
            tasks.push(tokio::spawn(fill_conn(
                addr,
                plan.clone(),
                lo..hi,
                pipeline.max(64),
            )));
        }
        let (mut errors, mut first_error) = (0, None);
        for t in tasks {
            match t.await {
                Ok(Ok(r)) => {
                    errors += r.errors;
                    first_error = first_error.or(r.first_error);
                }
                Ok(Err(e)) => {
                    eprintln!("loadgen: {e}");
                    return 1;
                }
                Err(e) => {
                    eprintln!("loadgen: {e}");
                    return 1;
                }
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        if cli.json {
            println!(
                "{{\"workload\":\"{}\",\"keys\":{},\"seconds\":{:.3},\"errors\":{},\"first_error\":{}}}",
                workload.name(),
                cli.keys,
                secs,
                errors,
                json_str(first_error.as_deref())
            );
        } else {
            println!(
                "{}: {} keys in {secs:.2}s, {errors} errors",
                workload.name(),
                cli.keys
            );
            if let Some(e) = first_error {
                println!("first error: {e}");
            }
        }
        return if errors > 0 { 1 } else { 0 };
    }

    // Precompute every connection's batches before the clock starts.
    let per_conn = (4096usize.div_ceil(pipeline)).max(256);
    let mut conn_batches = Vec::with_capacity(connections);
    for c in 0..connections {
        let mut rng = Rng(cli.seed.wrapping_mul(1_000_003).wrapping_add(c as u64));
        let mut v = Vec::with_capacity(per_conn);
        for _ in 0..per_conn {
            let keys: Vec<u64> = (0..pipeline)
                .map(|_| rng.next() % cli.keys.max(1))
                .collect();
            v.push(plan.batch(keys.into_iter(), &mut rng));
        }
        conn_batches.push(v);
    }
    let t_begin = Instant::now();
    let start = t_begin + Duration::from_secs_f64(cli.warmup.max(0.0));
    let end = start + Duration::from_secs_f64(cli.duration.max(0.1));
    let used = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for batches in conn_batches {
        tasks.push(tokio::spawn(run_conn(
            addr,
            batches,
            cli.window_ms,
            start,
            end,
            used.clone(),
            cli.max_decisions.max(1),
        )));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    let (mut decisions, mut errors, mut first_error) = (0u64, 0u64, None);
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => {
                let _ = hist.add(&r.hist);
                decisions += r.decisions;
                errors += r.errors;
                first_error = first_error.or(r.first_error);
            }
            Ok(Err(e)) => {
                eprintln!("loadgen: {e}");
                return 1;
            }
            Err(e) => {
                eprintln!("loadgen: {e}");
                return 1;
            }
        }
    }
    let measured = Instant::now()
        .min(end)
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-9);
    let rate = decisions as f64 / measured;
    let (p50, p99, p999) = (
        hist.value_at_quantile(0.50),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
    );
    if cli.json {
        println!(
            "{{\"workload\":\"{}\",\"connections\":{connections},\"pipeline\":{pipeline},\"decisions\":{decisions},\"seconds\":{measured:.3},\"decisions_per_sec\":{rate:.1},\"p50_us\":{p50},\"p99_us\":{p99},\"p999_us\":{p999},\"max_us\":{},\"errors\":{errors},\"first_error\":{}}}",
            workload.name(),
            hist.max(),
            json_str(first_error.as_deref())
        );
    } else {
        println!(
            "{} c={connections} P={pipeline}: {rate:.0} decisions/s over {measured:.2}s ({decisions} decisions)",
            workload.name()
        );
        println!(
            "latency µs: p50 {p50}  p99 {p99}  p99.9 {p999}  max {}",
            hist.max()
        );
        if errors > 0 {
            println!(
                "{errors} error replies; first: {}",
                first_error.unwrap_or_default()
            );
        }
    }
    0
}

fn report_unavailable(cli: &Cli, why: &str) -> i32 {
    if cli.json {
        println!(
            "{{\"workload\":\"{}\",\"unavailable\":{}}}",
            cli.workload.name(),
            json_str(Some(why))
        );
    } else {
        println!("{}: not measured: {why}", cli.workload.name());
    }
    3
}

fn json_str(s: Option<&str>) -> String {
    match s {
        None => "null".into(),
        Some(s) => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
    }
}
