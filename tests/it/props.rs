//! Property tests over the whole command path (the parser's own are in
//! `src/protocol/request.rs`): random argument vectors through `engine::execute` never panic and
//! always produce well-formed RESP, and a pipeline sent in arbitrary pieces over a real
//! connection gets exactly the replies it gets when sent whole. The cargo-fuzz targets in
//! `fuzz/` explore the same properties for longer.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use sluice::client::ClientState;
use sluice::engine::execute;
use sluice::server::Shared;
use sluice::{Clock, Config};

use crate::support::{encode_command, frame_len};

const WORDS: &[&str] = &[
    "k",
    "k2",
    "h",
    "l",
    "s",
    "z",
    "",
    "0",
    "1",
    "-1",
    "10",
    "9223372036854775807",
    "1.5",
    "inf",
    "-inf",
    "nan",
    "(1",
    "[a",
    "-",
    "+",
    "abc",
    "EX",
    "PX",
    "NX",
    "XX",
    "GT",
    "CH",
    "INCR",
    "KEEPTTL",
    "GET",
    "LIMIT",
    "WITHSCORES",
    "BYSCORE",
    "BYLEX",
    "REV",
    "COUNT",
    "MATCH",
    "*",
    "f",
    "v",
    "m",
];

/// Commands that sleep, stop the server, block, run scripts or write files (SAVE, BGSAVE):
/// not what these look at.
const SKIP: &[&str] = &[
    "shutdown", "debug", "monitor", "eval", "evalsha", "script", "function", "cluster", "save",
    "bgsave",
];

fn shared() -> &'static (Arc<Shared>, Vec<&'static str>) {
    static SHARED: OnceLock<(Arc<Shared>, Vec<&'static str>)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let shared = Shared::new(
            Config {
                shards: 4,
                ..Config::default()
            },
            Clock::frozen(),
        );
        let names = shared
            .table
            .commands()
            .into_iter()
            .map(|s| s.name)
            .filter(|n| !SKIP.contains(n))
            .collect();
        (Arc::new(shared), names)
    })
}

/// One argument: a dictionary word or a few arbitrary bytes.
fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0..WORDS.len()).prop_map(|i| WORDS[i].as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..6),
    ]
}

fn command() -> impl Strategy<Value = (usize, Vec<Vec<u8>>)> {
    (any::<usize>(), prop::collection::vec(arg(), 0..7))
}

/// One or more complete RESP2 or RESP3 frames and nothing more (`support::frame_len` also
/// measures the valid RESP3 the `redis-protocol` crate refuses, such as COMMAND INFO's set of
/// maps).
fn whole_frames(mut out: &[u8]) -> bool {
    if out.is_empty() {
        return false;
    }
    while !out.is_empty() {
        match crate::support::frame_len(out) {
            Ok(Some(n)) if n > 0 => out = &out[n..],
            _ => return false,
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_commands_never_panic_and_reply_well_formed_resp(
        cmds in prop::collection::vec(command(), 1..24)
    ) {
        let (shared, names) = shared();
        let info = shared.clients.register("127.0.0.1:1".into(), "127.0.0.1:2".into());
        let mut client = ClientState::new(info.clone());
        client.authenticated = true;
        // Each case in its own database, so cases running side by side do not meet.
        let db = (info.id % 16).to_string();
        execute(shared, &mut client, &[Bytes::from_static(b"SELECT"), Bytes::from(db)]);
        for (name, rest) in cmds {
            let mut args = vec![Bytes::from_static(names[name % names.len()].as_bytes())];
            args.extend(rest.into_iter().map(Bytes::from));
            let reply = execute(shared, &mut client, &args);
            // Pub/sub confirmations reach a subscribed client through its push queue, before
            // the reply (which is then empty, or EXEC's array): together they must be whole
            // frames, at least one.
            let mut pushed = BytesMut::new();
            if let Some(q) = client.push_queue() {
                q.take_into(&mut pushed);
            }
            for resp in [2u8, 3] {
                let mut out = pushed.clone();
                reply.encode(resp, &mut out);
                prop_assert!(whole_frames(&out), "{:?} → {:?}", args, out);
            }
        }
        shared.pubsub.drop_client(&mut client);
        client.subs = None;
        execute(shared, &mut client, &[Bytes::from_static(b"FLUSHDB")]);
        sluice::engine::txn::unwatch_client(shared, &mut client);
        shared.clients.unregister(info.id);
    }
}

/// Sends `bytes` in the given pieces and reads until `replies` complete replies arrived.
fn exchange(addr: std::net::SocketAddr, bytes: &[u8], cuts: &[usize], replies: usize) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    let mut last = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(last, bytes.len());
        s.write_all(&bytes[last..cut]).unwrap();
        last = cut;
        std::thread::sleep(Duration::from_micros(200));
    }
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut n = 0;
        let mut rest = &got[..];
        while let Ok(Some(len)) = frame_len(rest) {
            rest = &rest[len..];
            n += 1;
        }
        if n >= replies || Instant::now() > deadline {
            return got;
        }
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(k) => got.extend_from_slice(&buf[..k]),
            Err(_) => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The connection path (read buffer, parser, pipelined execution, one write per batch)
    /// gives the same replies however the bytes are cut.
    #[test]
    fn a_pipeline_cut_anywhere_gets_the_same_replies(
        keys in prop::collection::vec(0u8..4, 1..30),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        static SERVER: OnceLock<sluice::TestServer> = OnceLock::new();
        let server = SERVER.get_or_init(|| sluice::TestServer::start().unwrap());
        // INCRs on per-case keys, so the whole and the cut run see the same counters.
        let tag = format!("{:x}", rand_tag());
        let mut bytes = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let key = format!("{tag}:{k}");
            if i % 3 == 2 {
                bytes.extend_from_slice(format!("GET {key}\r\n").as_bytes());
            } else {
                bytes.extend_from_slice(&encode_command(&[b"INCR", key.as_bytes()]));
            }
        }
        let whole_tag = format!("{tag}w");
        let cut_tag = format!("{tag}c");
        let whole_bytes = String::from_utf8(bytes.clone()).unwrap().replace(&tag, &whole_tag);
        let cut_bytes = String::from_utf8(bytes).unwrap().replace(&tag, &cut_tag);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(cut_bytes.len() + 1)).collect();
        points.sort();
        let whole = exchange(server.addr(), whole_bytes.as_bytes(), &[], keys.len());
        let cut = exchange(server.addr(), cut_bytes.as_bytes(), &points, keys.len());
        prop_assert_eq!(whole, cut);
    }
}

fn rand_tag() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed)
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64)
            .rotate_left(17)
}
