//! DUMP/RESTORE between sluice and a real redis-server 7.0.15: every type in every encoding
//! (small and large collections, int-encoded and binary strings, strings Redis compresses
//! with LZF) is dumped by one server, restored into the other, and read back the same on both.

use crate::support::{Conn, RedisServer, sluice};

/// The bulk payload of a `$n\r\n…\r\n` reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(
        reply[0],
        b'$',
        "not a bulk reply: {:?}",
        String::from_utf8_lossy(reply)
    );
    let nl = reply.iter().position(|&c| c == b'\n').expect("header");
    let n: usize = std::str::from_utf8(&reply[1..nl - 1])
        .expect("len")
        .parse()
        .expect("len");
    reply[nl + 1..nl + 1 + n].to_vec()
}

/// Writes the fixture keys through `c`; returns their names.
pub(crate) fn fill(c: &mut Conn) -> Vec<String> {
    let mut keys = Vec::new();
    let run = |c: &mut Conn, args: Vec<Vec<u8>>| {
        let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
        let r = c.cmd(&refs);
        assert_ne!(
            r[0],
            b'-',
            "{:?}: {}",
            String::from_utf8_lossy(&args[0]),
            String::from_utf8_lossy(&r)
        );
    };
    let s = |x: &str| x.as_bytes().to_vec();
    let strings: Vec<(&str, Vec<u8>)> = vec![
        ("s:int8", s("7")),
        ("s:int16", s("-30000")),
        ("s:int32", s("2000000000")),
        ("s:int64", s("-9223372036854775808")),
        ("s:float", s("3.25")),
        ("s:empty", s("")),
        ("s:bin", (0..=255u8).collect()),
        ("s:lzf", b"abcabcabc-".repeat(500)),
        (
            "s:long-raw",
            (0..3000u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                .collect(),
        ),
    ];
    for (k, v) in strings {
        run(c, vec![s("SET"), s(k), v]);
        keys.push(k.to_string());
    }
    // Lists: one small listpack node; many nodes with every integer width and long items.
    run(
        c,
        vec![
            s("RPUSH"),
            s("l:small"),
            s("1"),
            s("abc"),
            s("-300"),
            s("70000"),
            s(""),
        ],
    );
    let mut big = vec![s("RPUSH"), s("l:big")];
    for i in 0..3000i64 {
        big.push(match i % 4 {
            0 => (i * 7919 - 10_000_000).to_string().into_bytes(),
            1 => format!("item-{i}").into_bytes(),
            2 => vec![b'x'; (i % 300) as usize],
            _ => (i64::MAX - i).to_string().into_bytes(),
        });
    }
    run(c, big);
    // Sets: small intset (16, 32, 64-bit widths), hashtable, and > 512 integers.
    run(c, vec![s("SADD"), s("set:i16"), s("1"), s("-2"), s("300")]);
    run(c, vec![s("SADD"), s("set:i32"), s("1"), s("100000")]);
    run(c, vec![s("SADD"), s("set:i64"), s("1"), s("5000000000")]);
    run(c, vec![s("SADD"), s("set:hash"), s("a"), s("b"), s("1")]);
    let mut ints = vec![s("SADD"), s("set:manyints")];
    ints.extend((0..600).map(|i| (i * 3).to_string().into_bytes()));
    run(c, ints);
    // Sorted sets: listpack (integer, fractional, infinite scores), skiplist by size and by
    // member length.
    run(
        c,
        vec![
            s("ZADD"),
            s("z:small"),
            s("1"),
            s("a"),
            s("2.5"),
            s("b"),
            s("-inf"),
            s("c"),
            s("inf"),
            s("d"),
            s("0.1"),
            s("e"),
        ],
    );
    let mut zbig = vec![s("ZADD"), s("z:big")];
    for i in 0..500 {
        zbig.push(format!("{}", f64::from(i) / 7.0 - 30.0).into_bytes());
        zbig.push(format!("m{i}").into_bytes());
    }
    run(c, zbig);
    run(
        c,
        vec![s("ZADD"), s("z:longmember"), s("1"), vec![b'm'; 100]],
    );
    // Hashes: listpack, hashtable by size, hashtable by value length.
    run(
        c,
        vec![
            s("HSET"),
            s("h:small"),
            s("f"),
            s("v"),
            s("n"),
            s("123"),
            s("e"),
            s(""),
        ],
    );
    let mut hbig = vec![s("HSET"), s("h:big")];
    for i in 0..600 {
        hbig.push(format!("f{i}").into_bytes());
        hbig.push(format!("{}", i * 11).into_bytes());
    }
    run(c, hbig);
    run(
        c,
        vec![s("HSET"), s("h:longvalue"), s("f"), vec![b'v'; 200]],
    );
    // Streams: one node, several nodes with a deleted entry and long values, a group.
    run(c, vec![s("XADD"), s("x:small"), s("1-1"), s("f"), s("v")]);
    for i in 1..=130u32 {
        let v = if i % 40 == 0 {
            vec![b'z'; 300]
        } else {
            i.to_string().into_bytes()
        };
        run(
            c,
            vec![
                s("XADD"),
                s("x:big"),
                format!("{i}-0").into_bytes(),
                s("f"),
                v,
            ],
        );
    }
    run(c, vec![s("XDEL"), s("x:big"), s("7-0")]);
    run(
        c,
        vec![s("XGROUP"), s("CREATE"), s("x:big"), s("g"), s("5")],
    );
    run(
        c,
        vec![s("XGROUP"), s("CREATECONSUMER"), s("x:big"), s("g"), s("c")],
    );
    keys.extend(
        [
            "x:small",
            "x:big",
            "l:small",
            "l:big",
            "set:i16",
            "set:i32",
            "set:i64",
            "set:hash",
            "set:manyints",
            "z:small",
            "z:big",
            "z:longmember",
            "h:small",
            "h:big",
            "h:longvalue",
        ]
        .iter()
        .map(|k| k.to_string()),
    );
    keys
}

/// What a key reads as, in a form both servers must agree on.
pub(crate) fn contents(c: &mut Conn, key: &str) -> Vec<Vec<u8>> {
    let k = key.as_bytes();
    let t = c.cmd(&[b"TYPE", k]);
    let mut out = vec![t.clone(), c.cmd(&[b"OBJECT", b"ENCODING", k])];
    match &t[..] {
        b"+string\r\n" => out.push(c.cmd(&[b"GET", k])),
        b"+list\r\n" => out.push(c.cmd(&[b"LRANGE", k, b"0", b"-1"])),
        b"+set\r\n" => out.push(c.cmd(&[b"SORT", k, b"ALPHA"])),
        b"+zset\r\n" => out.push(c.cmd(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"])),
        b"+stream\r\n" => {
            // Everything but a consumer's seen-time, which each server sets from its clock.
            out.push(c.cmd(&[b"XINFO", b"STREAM", k]));
            out.push(c.cmd(&[b"XINFO", b"GROUPS", k]));
            out.push(c.cmd(&[b"XRANGE", k, b"-", b"+"]));
        }
        b"+hash\r\n" => {
            out.push(c.cmd(&[b"HLEN", k]));
            let fields = c.cmd(&[b"SORT", k, b"ALPHA"]); // WRONGTYPE: just compared
            out.push(fields);
            for i in 0..600 {
                let f = format!("f{i}");
                out.push(c.cmd(&[b"HGET", k, f.as_bytes()]));
            }
            for f in [&b"f"[..], b"n", b"e"] {
                out.push(c.cmd(&[b"HGET", k, f]));
            }
        }
        other => panic!("unexpected type {:?}", String::from_utf8_lossy(other)),
    }
    out
}

fn transfer(from: &mut Conn, to: &mut Conn, keys: &[String]) {
    for key in keys {
        let payload = bulk(&from.cmd(&[b"DUMP", key.as_bytes()]));
        let r = to.cmd(&[b"RESTORE", key.as_bytes(), b"0", &payload]);
        assert_eq!(
            r,
            b"+OK\r\n",
            "RESTORE {key}: {}",
            String::from_utf8_lossy(&r)
        );
    }
}

#[test]
fn dumps_round_trip_between_redis_and_sluice() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut r = Conn::connect(redis.addr());
    let mut s = Conn::connect(server.addr());

    // Redis → sluice.
    let keys = fill(&mut r);
    transfer(&mut r, &mut s, &keys);
    for key in &keys {
        assert_eq!(
            contents(&mut r, key),
            contents(&mut s, key),
            "Redis → sluice: {key}"
        );
    }

    // sluice → Redis: fresh values written on sluice, restored into an empty Redis.
    assert_eq!(r.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    assert_eq!(s.cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    let keys = fill(&mut s);
    transfer(&mut s, &mut r, &keys);
    for key in &keys {
        assert_eq!(
            contents(&mut r, key),
            contents(&mut s, key),
            "sluice → Redis: {key}"
        );
    }

    // And a payload that went through both comes back byte-identical from sluice.
    for key in &keys {
        let once = bulk(&s.cmd(&[b"DUMP", key.as_bytes()]));
        s.cmd(&[b"DEL", key.as_bytes()]);
        let r2 = s.cmd(&[b"RESTORE", key.as_bytes(), b"0", &once]);
        assert_eq!(r2, b"+OK\r\n");
        assert_eq!(bulk(&s.cmd(&[b"DUMP", key.as_bytes()])), once, "{key}");
    }
}
