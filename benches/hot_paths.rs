//! Micro-benchmarks of sluice's hot paths: request parsing, reply encoding, whole commands
//! through `engine::execute` (table lookup, arity, shard lock, clock, handler, stats) for the
//! rate-limiting patterns, the GCRA arithmetic alone, TTL refresh and a reaper drain.
//!
//! `cargo bench --bench hot_paths` (add `-- <filter>` to run one group). The end-to-end
//! comparison with Redis over TCP is `scripts/bench.sh`; these isolate the CPU cost of each
//! step without the network.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sluice::client::ClientState;
use sluice::engine;
use sluice::limiter::gcra::{self, ThrottleArgs};
use sluice::protocol::{Args, Limits, Reply, RequestParser};
use sluice::server::Shared;
use sluice::store::{Keyspace, Value};
use sluice::{Clock, Config};

/// Encodes one RESP multibulk request.
fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    sluice::protocol::request::encode(&mut out, args);
    out
}

fn argv(args: &[&[u8]]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

/// Parses every request in `buf` the way the connection does; returns the argument count.
fn parse_all(parser: &mut RequestParser, buf: &[u8]) -> usize {
    let mut at = 0;
    let mut n = 0;
    while let Ok(Some(req)) = parser.parse(&buf[at..]) {
        n += match &req.args {
            Args::Ranges(r) => r.len(),
            Args::Owned(o) => o.len(),
        };
        at += req.consumed;
    }
    n
}

fn protocol(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    let single = request(&[b"INCR", b"rate:user:123456"]);
    g.throughput(Throughput::Elements(1));
    g.bench_function("single_incr", |b| {
        let mut p = RequestParser::new(Limits::default());
        b.iter(|| parse_all(&mut p, black_box(&single)))
    });
    let mut pipelined = Vec::new();
    for i in 0..16 {
        let key = format!("rate:user:{i}");
        match i % 3 {
            0 => pipelined.extend(request(&[
                b"SET",
                key.as_bytes(),
                b"1",
                b"EX",
                b"61",
                b"NX",
            ])),
            1 => pipelined.extend(request(&[b"INCR", key.as_bytes()])),
            _ => pipelined.extend(request(&[b"GET", key.as_bytes()])),
        }
    }
    g.throughput(Throughput::Elements(16));
    g.bench_function("pipelined_16", |b| {
        let mut p = RequestParser::new(Limits::default());
        b.iter(|| parse_all(&mut p, black_box(&pipelined)))
    });
    g.finish();

    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(1));
    let cases = [
        ("ok", Reply::ok()),
        ("int", Reply::Int(1_700_000_000_123)),
        ("bulk_16", Reply::bulk(b"0123456789abcdef")),
        (
            "throttle_5_ints",
            Reply::Array([0, 16, 15, -1, 2].map(Reply::Int).to_vec()),
        ),
        (
            "exec_4_ints",
            Reply::Array([1, 0, 5, 1].map(Reply::Int).to_vec()),
        ),
    ];
    for (name, reply) in cases {
        g.bench_function(name, |b| {
            let mut out = BytesMut::with_capacity(64 * 1024);
            b.iter(|| {
                if out.len() > 60 * 1024 {
                    out.clear();
                }
                black_box(&reply).encode(2, &mut out);
            })
        });
    }
    g.finish();
}

/// A server's shared state and one client, as a connection has them.
fn server() -> (Shared, ClientState) {
    let shared = Shared::new(Config::default(), Clock::system());
    let info = shared
        .clients
        .register("127.0.0.1:1".into(), "127.0.0.1:6379".into());
    (shared, ClientState::new(info))
}

const KEYS: usize = 10_000;

/// Runs `make(i)` through `execute` for i = 0, 1, 2…, cycling over `KEYS` precomputed requests.
fn bench_cmd(
    c: &mut Criterion,
    group: &str,
    name: &str,
    setup: &[Vec<Bytes>],
    make: impl Fn(usize) -> Vec<Bytes>,
) {
    let (shared, mut client) = server();
    for args in setup {
        engine::execute(&shared, &mut client, args);
    }
    let reqs: Vec<Vec<Bytes>> = (0..KEYS).map(make).collect();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function(name, |b| {
        b.iter(|| {
            i = (i + 1) % reqs.len();
            let reply = engine::execute(&shared, &mut client, &reqs[i]);
            black_box(reply)
        })
    });
    g.finish();
}

fn key(i: usize) -> String {
    format!("rate:user:{i}")
}

fn keyspace(c: &mut Criterion) {
    let fill: Vec<Vec<Bytes>> = (0..KEYS)
        .map(|i| argv(&[b"SET", key(i).as_bytes(), b"41"]))
        .collect();
    bench_cmd(c, "execute", "get", &fill, |i| {
        argv(&[b"GET", key(i).as_bytes()])
    });
    bench_cmd(c, "execute", "set", &[], |i| {
        argv(&[b"SET", key(i).as_bytes(), b"xyz"])
    });
    bench_cmd(c, "execute", "incr", &fill, |i| {
        argv(&[b"INCR", key(i).as_bytes()])
    });
    bench_cmd(c, "execute", "set_nx_ex", &fill, |i| {
        argv(&[b"SET", key(i).as_bytes(), b"0", b"EX", b"61", b"NX"])
    });
    // TTL refresh: every key already has a TTL; EXPIRE moves its timer in the wheel.
    let with_ttl: Vec<Vec<Bytes>> = (0..KEYS)
        .map(|i| argv(&[b"SET", key(i).as_bytes(), b"1", b"EX", b"60"]))
        .collect();
    bench_cmd(c, "ttl", "expire_refresh", &with_ttl, |i| {
        argv(&[b"EXPIRE", key(i).as_bytes(), b"61"])
    });
}

/// W1's step on one key: ZADD now, ZREMRANGEBYSCORE 0 now-window, ZCARD; about ten entries
/// stay in the window.
fn sliding(c: &mut Criterion) {
    let (shared, mut client) = server();
    let mut g = c.benchmark_group("sliding");
    g.throughput(Throughput::Elements(1));
    let mut now: u64 = 1_700_000_000_000;
    let window = 10;
    g.bench_function("zadd_zremrangebyscore_zcard", |b| {
        b.iter(|| {
            now += 1;
            let ts = now.to_string();
            let cutoff = (now - window).to_string();
            let k = b"hist:u:a".as_slice();
            let r1 = engine::execute(
                &shared,
                &mut client,
                &argv(&[b"ZADD", k, ts.as_bytes(), ts.as_bytes()]),
            );
            let r2 = engine::execute(
                &shared,
                &mut client,
                &argv(&[b"ZREMRANGEBYSCORE", k, b"0", cutoff.as_bytes()]),
            );
            let r3 = engine::execute(&shared, &mut client, &argv(&[b"ZCARD", k]));
            black_box((r1, r2, r3))
        })
    });
    g.finish();
}

fn throttle(c: &mut Criterion) {
    let args = ThrottleArgs::parse(&[&b"15"[..], b"30", b"60", b"1"]).expect("valid arguments");
    let mut g = c.benchmark_group("gcra");
    g.throughput(Throughput::Elements(1));
    let mut now: i64 = 1_700_000_000_000_000_000;
    let mut tat = None;
    g.bench_function("decision", |b| {
        b.iter(|| {
            now += 1_000_000;
            let d = gcra::throttle(black_box(now), tat, &args).expect("in range");
            if let Some((t, _)) = d.write {
                tat = Some(t);
            }
            black_box(d.reply())
        })
    });
    g.finish();
    bench_cmd(c, "execute", "cl_throttle", &[], |i| {
        argv(&[b"CL.THROTTLE", key(i).as_bytes(), b"15", b"30", b"60", b"1"])
    });
}

/// Deletes 10,000 keys that expired at the same millisecond, in reaper-sized batches.
fn reaper(c: &mut Criterion) {
    let mut g = c.benchmark_group("reaper");
    g.throughput(Throughput::Elements(KEYS as u64));
    g.measurement_time(Duration::from_secs(5));
    let now = 1_700_000_000_000u64;
    g.bench_function("drain_10k_same_ms", |b| {
        b.iter_batched(
            || {
                let ks = Keyspace::new(8, 1, now);
                for i in 0..KEYS {
                    let k = key(i);
                    let mut locked = ks.lock_keys([k.as_bytes()]);
                    locked.set(0, k.as_bytes(), Value::Int(1), Some(now + 1000));
                }
                ks
            },
            |ks| {
                let n = ks.lock_all().reap_due(now + 1001);
                assert_eq!(n, KEYS);
                ks
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = protocol, keyspace, sliding, throttle, reaper
}
criterion_main!(benches);
