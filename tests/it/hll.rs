//! HyperLogLog against a real redis-server: the same additions must leave the same bytes
//! (GET) and give the same counts (PFCOUNT), through the sparse encoding, the switch to
//! dense and beyond, and a value copied from one server into the other must keep working.

use crate::support::{Conn, RedisServer, sluice};

/// PFADDs `n` deterministic elements to `key` on both servers, `batch` at a time, checking
/// every reply and, when `compare_bytes`, the value after every batch.
fn add_both(
    r: &mut Conn,
    s: &mut Conn,
    key: &str,
    prefix: &str,
    n: usize,
    batch: usize,
    compare_bytes: bool,
) {
    let mut i = 0;
    while i < n {
        let end = (i + batch).min(n);
        let elements: Vec<String> = (i..end).map(|j| format!("{prefix}:{j}")).collect();
        let mut args: Vec<&[u8]> = vec![b"PFADD", key.as_bytes()];
        args.extend(elements.iter().map(|e| e.as_bytes()));
        assert_eq!(r.cmd(&args), s.cmd(&args), "PFADD {key} at {i}");
        if compare_bytes {
            let get: [&[u8]; 2] = [b"GET", key.as_bytes()];
            assert_eq!(r.cmd(&get), s.cmd(&get), "GET {key} after {end} elements");
        }
        i = end;
    }
}

fn same(r: &mut Conn, s: &mut Conn, args: &[&[u8]]) -> Vec<u8> {
    let a = r.cmd(args);
    let b = s.cmd(args);
    assert_eq!(
        String::from_utf8_lossy(&a[..a.len().min(200)]),
        String::from_utf8_lossy(&b[..b.len().min(200)]),
        "{:?}",
        args.iter()
            .map(|a| String::from_utf8_lossy(a))
            .collect::<Vec<_>>()
    );
    assert_eq!(a, b);
    a
}

#[test]
fn pfadd_10k_and_100k_match_redis_bytes_and_counts() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut r = Conn::connect(redis.addr());
    let mut s = Conn::connect(server.addr());

    // Small batches through the sparse stage and the switch to dense, bytes checked each time.
    add_both(&mut r, &mut s, "h10k", "el", 10_000, 50, true);
    same(&mut r, &mut s, &[b"PFCOUNT", b"h10k"]);
    same(&mut r, &mut s, &[b"GET", b"h10k"]);

    add_both(&mut r, &mut s, "h100k", "user", 100_000, 1_000, false);
    let count = same(&mut r, &mut s, &[b"PFCOUNT", b"h100k"]);
    assert!(count.starts_with(b":"), "{count:?}");
    same(&mut r, &mut s, &[b"GET", b"h100k"]);
    same(&mut r, &mut s, &[b"PFCOUNT", b"h10k", b"h100k", b"nokey"]);
    same(&mut r, &mut s, &[b"PFMERGE", b"merged", b"h10k", b"h100k"]);
    same(&mut r, &mut s, &[b"GET", b"merged"]);
    same(&mut r, &mut s, &[b"PFCOUNT", b"merged"]);

    // Sparse HLLs of a few elements each, merged: the result stays sparse.
    add_both(&mut r, &mut s, "a", "a", 30, 7, true);
    add_both(&mut r, &mut s, "b", "b", 40, 9, true);
    same(&mut r, &mut s, &[b"PFMERGE", b"ab", b"a", b"b"]);
    same(&mut r, &mut s, &[b"GET", b"ab"]);
    same(&mut r, &mut s, &[b"PFMERGE", b"a", b"h10k"]);
    same(&mut r, &mut s, &[b"GET", b"a"]);
}

#[test]
fn values_copied_between_servers_keep_working() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut r = Conn::connect(redis.addr());
    let mut s = Conn::connect(server.addr());
    for (key, n) in [("sparse", 300), ("dense", 5_000)] {
        // Built by Redis, copied into sluice (and the reverse), then grown on both.
        let mut args: Vec<Vec<u8>> = vec![b"PFADD".to_vec(), key.as_bytes().to_vec()];
        args.extend((0..n).map(|i| format!("k{i}").into_bytes()));
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        r.cmd(&refs);
        let bytes = get_bulk(&mut r, key);
        let set: [&[u8]; 3] = [b"SET", key.as_bytes(), &bytes];
        assert_eq!(s.cmd(&set), b"+OK\r\n");
        let rkey = format!("{key}-from-sluice");
        s.cmd(&[b"PFADD", rkey.as_bytes(), b"x", b"y", b"z"]);
        let back = get_bulk(&mut s, &rkey);
        assert_eq!(r.cmd(&[b"SET", rkey.as_bytes(), &back]), b"+OK\r\n");
        for k in [key, rkey.as_str()] {
            same(&mut r, &mut s, &[b"PFCOUNT", k.as_bytes()]);
            same(
                &mut r,
                &mut s,
                &[b"PFADD", k.as_bytes(), b"new1", b"new2", b"new3"],
            );
            same(&mut r, &mut s, &[b"PFCOUNT", k.as_bytes()]);
            same(&mut r, &mut s, &[b"GET", k.as_bytes()]);
        }
    }
}

/// The bytes of a bulk-string reply.
fn get_bulk(c: &mut Conn, key: &str) -> Vec<u8> {
    let reply = c.cmd(&[b"GET", key.as_bytes()]);
    let start = reply.iter().position(|&b| b == b'\n').map_or(0, |p| p + 1);
    reply[start..reply.len() - 2].to_vec()
}
