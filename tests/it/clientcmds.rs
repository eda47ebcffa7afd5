//! CLIENT PAUSE / UNPAUSE and CLIENT REPLY end to end (timing-dependent parts the transcripts
//! cannot show), CLIENT LIST's live fields, INFO's field names against redis-server's, and
//! SSCAN/HSCAN never repeating an element while others are deleted.

use std::time::Duration;

use crate::support::{Conn, Read1, RedisServer, sluice};

/// A reply must not arrive within this long (the command is held back).
const HELD: Duration = Duration::from_millis(150);

fn info_field(conn: &mut Conn, section: &str, field: &str) -> String {
    let reply = conn.cmd(&[b"INFO", section.as_bytes()]);
    let text = String::from_utf8_lossy(&reply).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .to_string()
}

fn assert_held(conn: &mut Conn) {
    match conn.read_one(HELD) {
        Read1::Timeout(_) => {}
        other => panic!("the command should wait for the pause to end, got {other:?}"),
    }
}

#[test]
fn pause_write_holds_writes_until_unpause_and_lets_reads_through() {
    let server = sluice();
    let mut admin = Conn::connect(server.addr());
    let mut writer = Conn::connect(server.addr());
    let mut reader = Conn::connect(server.addr());
    assert_eq!(admin.cmd(&[b"SET", b"k", b"v0"]), b"+OK\r\n");
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
        b"+OK\r\n"
    );

    writer.send(&[b"SET", b"k", b"v1"]);
    assert_held(&mut writer);
    assert_eq!(reader.cmd(&[b"GET", b"k"]), b"$2\r\nv0\r\n");
    // Errors are answered at once (Redis rejects them before the pause check).
    assert_eq!(
        reader.cmd(&[b"SET", b"k"]),
        b"-ERR wrong number of arguments for 'set' command\r\n"
    );
    assert_eq!(info_field(&mut reader, "clients", "blocked_clients"), "1");

    assert_eq!(admin.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    assert_eq!(reader.cmd(&[b"GET", b"k"]), b"$2\r\nv1\r\n");
    assert_eq!(info_field(&mut reader, "clients", "blocked_clients"), "0");
}

/// Redis's guarantee, on a server running commands on two event loops: once CLIENT PAUSE
/// WRITE has answered OK, no write is still running. A SUNIONSTORE of a large set (about
/// half a second) that began on the other loop before the pause has finished when OK
/// arrives: INFO counts its call (counted as it ends; INFO waits for no key).
#[test]
fn client_pause_answers_once_the_writes_already_running_have_ended() {
    let server = crate::proc::SluiceProcess::start(&["--threads", "2"]);
    // Connections are dealt to the loops in turn: these two run on different loops.
    let mut admin = Conn::connect(server.addr());
    let mut slow = Conn::connect(server.addr());
    let calls = |conn: &mut Conn| -> u64 {
        let info = String::from_utf8_lossy(&conn.cmd(&[b"INFO", b"commandstats"])).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("cmdstat_sunionstore:calls="))
            .and_then(|v| v.split(',').next())
            .map_or(0, |v| v.parse().unwrap())
    };
    // Calibrated: a set whose copy takes about half a second here (bounded).
    let mut size = 0u64;
    while size < 2_000_000 {
        let members: Vec<String> = (size..size + 100_000).map(|i| i.to_string()).collect();
        let mut args: Vec<&[u8]> = vec![b"SADD", b"big"];
        args.extend(members.iter().map(|m| m.as_bytes()));
        assert_eq!(admin.cmd(&args), b":100000\r\n");
        size += 100_000;
        if !size.is_multiple_of(400_000) {
            continue;
        }
        let started = std::time::Instant::now();
        assert_eq!(
            admin.cmd(&[b"SUNIONSTORE", b"copy", b"big"]),
            format!(":{size}\r\n").as_bytes()
        );
        if started.elapsed() >= Duration::from_millis(400) {
            break;
        }
    }
    let before = calls(&mut admin);
    slow.send(&[b"SUNIONSTORE", b"copy", b"big"]);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
        b"+OK\r\n"
    );
    assert_eq!(
        calls(&mut admin),
        before + 1,
        "the SUNIONSTORE under way has ended"
    );
    assert_eq!(slow.read_reply(), format!(":{size}\r\n").as_bytes());
    assert_eq!(admin.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
}

#[test]
fn pause_all_holds_every_command_and_the_server_clock_ends_it() {
    let server = sluice();
    let mut admin = Conn::connect(server.addr());
    let mut other = Conn::connect(server.addr());
    let frozen = admin.cmd(&[b"CLOCK", b"FREEZE"]);
    assert!(frozen.starts_with(b":"), "{frozen:?}");
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]),
        b"+OK\r\n"
    );
    other.send(&[b"INCR", b"n"]);
    assert_held(&mut other);
    // Time only moves by hand: the pause ends when the server clock passes its end.
    let _ = admin.cmd(&[b"CLOCK", b"ADVANCE", b"60001"]);
    assert_eq!(other.read_reply(), b":1\r\n");

    // ALL: reads wait too, and so does the client that paused.
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"PAUSE", b"60000", b"ALL"]),
        b"+OK\r\n"
    );
    other.send(&[b"GET", b"n"]);
    assert_held(&mut other);
    admin.send(&[b"PING"]);
    assert_held(&mut admin);
    // Only the clock can end it now: move it from outside the protocol.
    server
        .clock()
        .advance(Duration::from_millis(60_001))
        .unwrap();
    assert_eq!(other.read_reply(), b"$1\r\n1\r\n");
    assert_eq!(admin.read_reply(), b"+PONG\r\n");
}

#[test]
fn pause_write_holds_exec_of_writes_and_scripts_that_may_write() {
    let server = sluice();
    let mut admin = Conn::connect(server.addr());
    let mut tx = Conn::connect(server.addr());
    let mut ro = Conn::connect(server.addr());
    let mut script = Conn::connect(server.addr());
    assert_eq!(
        admin.cmd(&[
            b"FUNCTION",
            b"LOAD",
            b"#!lua name=ro\nredis.register_function{function_name='reader', callback=function() return 9 end, flags={'no-writes'}}\nredis.register_function('writer', function() return 10 end)",
        ]),
        b"$2\r\nro\r\n"
    );

    assert_eq!(tx.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(tx.cmd(&[b"SET", b"a", b"1"]), b"+QUEUED\r\n");
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
        b"+OK\r\n"
    );
    tx.send(&[b"EXEC"]);
    assert_held(&mut tx);

    // A read-only transaction and a script declaring no-writes go through.
    assert_eq!(ro.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ro.cmd(&[b"GET", b"a"]), b"+QUEUED\r\n");
    assert_eq!(ro.cmd(&[b"EXEC"]), b"*1\r\n$-1\r\n");
    assert_eq!(
        ro.cmd(&[b"EVAL", b"#!lua flags=no-writes\nreturn 7", b"0"]),
        b":7\r\n"
    );
    assert_eq!(ro.cmd(&[b"EVAL_RO", b"return 8", b"0"]), b":8\r\n");
    // A function declared no-writes, by FCALL or FCALL_RO (its flags replace the command's).
    assert_eq!(ro.cmd(&[b"FCALL", b"reader", b"0"]), b":9\r\n");
    assert_eq!(ro.cmd(&[b"FCALL_RO", b"READER", b"0"]), b":9\r\n");
    let mut fwriter = Conn::connect(server.addr());
    fwriter.send(&[b"FCALL", b"writer", b"0"]);
    assert_held(&mut fwriter);
    // EVAL without flags, or with a shebang lacking no-writes, may write.
    script.send(&[b"EVAL", b"return 1", b"0"]);
    assert_held(&mut script);

    assert_eq!(admin.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    assert_eq!(tx.read_reply(), b"*1\r\n+OK\r\n");
    assert_eq!(script.read_reply(), b":1\r\n");
    assert_eq!(fwriter.read_reply(), b":10\r\n");
}

/// TTL, PTTL, TYPE and EXISTS do not use the key (Redis's LOOKUP_NOTOUCH): OBJECT IDLETIME
/// keeps counting; GET and TOUCH reset it. Time moves with the test clock.
#[test]
fn ttl_type_and_exists_leave_the_idle_time() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    assert!(c.cmd(&[b"CLOCK", b"FREEZE"]).starts_with(b":"));
    assert_eq!(c.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"5000"]);
    for read in [
        &[&b"TTL"[..], b"k"][..],
        &[b"PTTL", b"k"],
        &[b"TYPE", b"k"],
        &[b"EXISTS", b"k"],
    ] {
        let _ = c.cmd(read);
    }
    assert_eq!(c.cmd(&[b"OBJECT", b"IDLETIME", b"k"]), b":5\r\n");
    let _ = c.cmd(&[b"TOUCH", b"k"]);
    assert_eq!(c.cmd(&[b"OBJECT", b"IDLETIME", b"k"]), b":0\r\n");
    let _ = c.cmd(&[b"CLOCK", b"ADVANCE", b"3000"]);
    let _ = c.cmd(&[b"GET", b"k"]);
    assert_eq!(c.cmd(&[b"OBJECT", b"IDLETIME", b"k"]), b":0\r\n");
    // TYPE still counts a keyspace hit and a miss, as Redis's read lookups do.
    let _ = c.cmd(&[b"CONFIG", b"RESETSTAT"]);
    let _ = c.cmd(&[b"TYPE", b"k"]);
    let _ = c.cmd(&[b"TYPE", b"missing"]);
    assert_eq!(info_field(&mut c, "stats", "keyspace_hits"), "1");
    assert_eq!(info_field(&mut c, "stats", "keyspace_misses"), "1");
}

/// COMMAND LIST names the subcommands too, each after its command, as Redis 7.0 does.
#[test]
fn command_list_includes_subcommands() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let list = String::from_utf8_lossy(&c.cmd(&[b"COMMAND", b"LIST"])).to_string();
    let names: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with(['*', '$']))
        .collect();
    for name in ["config|get", "client|tracking", "object|idletime", "get"] {
        assert!(names.contains(&name), "{name} missing");
    }
    let config = names.iter().position(|n| *n == "config").unwrap();
    assert!(names[config + 1].starts_with("config|"));
}

#[test]
fn a_paused_client_can_be_killed() {
    let server = sluice();
    let mut admin = Conn::connect(server.addr());
    let mut victim = Conn::connect(server.addr());
    let id = String::from_utf8(victim.cmd(&[b"CLIENT", b"ID"])).unwrap();
    let id = id.trim_start_matches(':').trim().to_string();
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]),
        b"+OK\r\n"
    );
    victim.send(&[b"SET", b"x", b"1"]);
    assert_held(&mut victim);
    assert_eq!(
        admin.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]),
        b":1\r\n"
    );
    match victim.read_one(Duration::from_secs(2)) {
        Read1::Eof(rest) => assert!(rest.is_empty()),
        other => panic!("expected the connection to close, got {other:?}"),
    }
    assert_eq!(admin.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
    assert_eq!(admin.cmd(&[b"EXISTS", b"x"]), b":0\r\n");
}

/// CLIENT REPLY, pipelined, against redis-server: the bytes that come back must be the same.
#[test]
fn client_reply_matches_redis() {
    let redis = RedisServer::start();
    let server = sluice();
    let script: &[u8] = b"CLIENT REPLY SKIP\r\nSET a 1\r\nGET a\r\nCLIENT REPLY OFF\r\nGET a\r\nFOO\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nGET a\r\nCLIENT REPLY BAR\r\nCLIENT REPLY SKIP\r\nFOO\r\nPING\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nPING x\r\nPING y\r\nCLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nPING z\r\nCLIENT REPLY ON\r\nPING end\r\n";
    let mut got = Vec::new();
    for addr in [redis.addr(), server.addr()] {
        let mut c = Conn::connect(addr);
        c.send_raw(script);
        let mut out = Vec::new();
        loop {
            match c.read_one(Duration::from_secs(2)) {
                Read1::Reply(r) => {
                    let end = r == b"$3\r\nend\r\n";
                    out.extend(r);
                    if end {
                        break;
                    }
                }
                other => panic!("{other:?} after {:?}", String::from_utf8_lossy(&out)),
            }
        }
        got.push(out);
    }
    assert_eq!(
        String::from_utf8_lossy(&got[1]),
        String::from_utf8_lossy(&got[0])
    );
}

/// INFO's sections as (title, field names), in order.
fn info_layout(conn: &mut Conn, args: &[&[u8]]) -> Vec<(String, Vec<String>)> {
    let reply = conn.cmd(args);
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    // Skip the bulk/verbatim header line.
    for line in text.split("\r\n").skip(1) {
        if let Some(title) = line.strip_prefix("# ") {
            out.push((title.to_string(), Vec::new()));
        } else if let Some((name, _)) = line.split_once(':')
            && let Some(last) = out.last_mut()
        {
            last.1.push(name.to_string());
        }
    }
    out
}

/// Field names that depend on what ran (commands, errors, databases): compared by shape.
fn shape(section: &str, name: &str) -> String {
    let prefix = match section {
        "Commandstats" => "cmdstat_",
        "Errorstats" => "errorstat_",
        "Latencystats" => "latency_percentiles_usec_",
        "Keyspace" => "db",
        _ => return name.to_string(),
    };
    assert!(name.starts_with(prefix), "{section}: {name}");
    prefix.to_string()
}

#[test]
fn info_has_exactly_the_sections_and_fields_of_redis_7_0() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut layouts = Vec::new();
    for addr in [redis.addr(), server.addr()] {
        let mut c = Conn::connect(addr);
        let _ = c.cmd(&[b"SET", b"k", b"v"]);
        let _ = c.cmd(&[b"GET", b"k"]);
        let mut per_request = Vec::new();
        for args in [
            &[&b"INFO"[..]][..],
            &[b"INFO", b"everything"],
            &[b"INFO", b"all"],
            &[b"INFO", b"default"],
            &[b"INFO", b"server", b"stats"],
            &[b"INFO", b"nosuchsection"],
        ] {
            let layout: Vec<(String, Vec<String>)> = info_layout(&mut c, args)
                .into_iter()
                .map(|(title, names)| {
                    let mut names: Vec<String> = names.iter().map(|n| shape(&title, n)).collect();
                    names.dedup();
                    (title, names)
                })
                .collect();
            per_request.push(layout);
        }
        layouts.push(per_request);
    }
    let (redis_layouts, sluice_layouts) = (&layouts[0], &layouts[1]);
    for (r, s) in redis_layouts.iter().zip(sluice_layouts) {
        let titles =
            |l: &Vec<(String, Vec<String>)>| l.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(titles(s), titles(r), "section list");
        for ((title, rf), (_, sf)) in r.iter().zip(s) {
            // Sections sluice leaves empty (Errorstats, Latencystats) carry no foreign field.
            if sf.is_empty() && matches!(title.as_str(), "Errorstats" | "Latencystats") {
                continue;
            }
            assert_eq!(sf, rf, "fields of section {title}");
        }
    }

    // sluice's own identity: only when asked for by name.
    let mut c = Conn::connect(server.addr());
    let own = info_layout(&mut c, &[b"INFO", b"sluice"]);
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].0, "Sluice");
    assert!(own[0].1.contains(&"sluice_version".to_string()));
    let mut r = Conn::connect(redis.addr());
    assert!(info_layout(&mut r, &[b"INFO", b"sluice"]).is_empty());
}

/// The CLIENT INFO fields that must equal Redis's (tot-mem and qbuf-free depend on the
/// allocator and buffer sizes, so they are only checked to be numbers).
fn client_fields(line: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(line).into_owned();
    let body = text
        .split("\r\n")
        .nth(1)
        .unwrap_or("")
        .trim_end()
        .to_string();
    let mut out = Vec::new();
    for kv in body.split(' ') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            // Output-buffer fields: sluice writes replies per batch, Redis per event loop turn.
            "id" | "addr" | "laddr" | "age" | "idle" | "fd" | "rbs" | "rbp" | "qbuf-free"
            | "obl" | "oll" | "omem" => {}
            "tot-mem" => {
                assert!(v.parse::<u64>().is_ok_and(|n| n > 0), "tot-mem={v}");
                out.push((k.to_string(), "N".to_string()));
            }
            _ => out.push((k.to_string(), v.to_string())),
        }
    }
    out
}

#[test]
fn client_info_reports_the_current_command_buffers_and_transaction_as_redis() {
    let redis = RedisServer::start();
    let server = sluice();
    let steps: &[&[&[u8]]] = &[
        &[b"CLIENT", b"INFO"],
        &[b"SET", b"key", b"value"],
        &[b"CLIENT", b"INFO"],
        &[b"MULTI"],
        &[b"SET", b"a", b"1"],
        &[b"INCR", b"counter"],
        &[b"CLIENT", b"INFO"],
        &[b"EXEC"],
    ];
    let mut seen = Vec::new();
    for addr in [redis.addr(), server.addr()] {
        let mut c = Conn::connect(addr);
        let mut fields = Vec::new();
        for step in steps {
            let reply = c.cmd(step);
            if step[0] == b"CLIENT" && step[1] == b"INFO" {
                fields.push(client_fields(&reply));
            }
            if step[0] == b"EXEC" {
                // The queued CLIENT INFO ran inside EXEC: its reply is the array's third item.
                let text = String::from_utf8_lossy(&reply).into_owned();
                let line = text
                    .split("\r\n")
                    .find(|l| l.starts_with("id="))
                    .unwrap_or_default()
                    .to_string();
                fields.push(client_fields(format!("$0\r\n{line}\r\n").as_bytes()));
            }
        }
        seen.push(fields);
    }
    assert_eq!(seen[1], seen[0]);
}

#[test]
fn an_idle_clients_line_shows_no_arguments_or_query_buffer_as_redis() {
    let redis = RedisServer::start();
    let server = sluice();
    let mut seen = Vec::new();
    for addr in [redis.addr(), server.addr()] {
        let mut idle = Conn::connect(addr);
        let mut observer = Conn::connect(addr);
        assert_eq!(
            idle.cmd(&[b"SET", b"keykeykey", b"valuevaluevaluevalue1"]),
            b"+OK\r\n"
        );
        let list = observer.cmd(&[b"CLIENT", b"LIST"]);
        let text = String::from_utf8_lossy(&list).into_owned();
        let line = text
            .split(['\r', '\n'])
            .find(|l| l.contains(" cmd=set "))
            .unwrap_or_else(|| panic!("no idle SET client in {text}"))
            .to_string();
        seen.push(client_fields(format!("$0\r\n{line}\r\n").as_bytes()));
    }
    assert!(
        seen[0].contains(&("argv-mem".to_string(), "0".to_string())),
        "{:?}",
        seen[0]
    );
    assert_eq!(seen[1], seen[0]);
}

/// Parses a RESP2 SCAN-family reply: (next cursor, elements).
fn scan_reply(reply: &[u8]) -> (u64, Vec<String>) {
    let text = String::from_utf8_lossy(reply).into_owned();
    let lines: Vec<&str> = text.split("\r\n").collect();
    // *2, $n, cursor, *m, then ($len, value) pairs.
    let cursor = lines[2].parse().unwrap();
    let items = lines[4..]
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| c[1].to_string())
        .collect();
    (cursor, items)
}

/// SSCAN and HSCAN over large (hash-table encoded) aggregates while another client deletes
/// members: no member comes back twice, and every member never deleted comes back.
#[test]
fn sscan_and_hscan_never_repeat_a_member_while_others_are_deleted() {
    let server = sluice();
    let mut c = Conn::connect(server.addr());
    let mut other = Conn::connect(server.addr());
    const N: usize = 2000;
    for chunk in (0..N).collect::<Vec<_>>().chunks(500) {
        let members: Vec<String> = chunk.iter().map(|i| format!("m{i}")).collect();
        let mut sadd: Vec<&[u8]> = vec![b"SADD", b"s"];
        let mut hset: Vec<&[u8]> = vec![b"HSET", b"h"];
        for m in &members {
            sadd.push(m.as_bytes());
            hset.push(m.as_bytes());
            hset.push(b"v");
        }
        let _ = c.cmd(&sadd);
        let _ = c.cmd(&hset);
    }
    for (scan, del, key, pairs) in [
        (&b"SSCAN"[..], &b"SREM"[..], &b"s"[..], false),
        (b"HSCAN", b"HDEL", b"h", true),
    ] {
        let mut seen = std::collections::HashSet::new();
        let mut deleted = std::collections::HashSet::new();
        let mut cursor = 0u64;
        let mut victim = 0;
        for _ in 0..N {
            let reply = c.cmd(&[scan, key, cursor.to_string().as_bytes(), b"COUNT", b"7"]);
            let (next, items) = scan_reply(&reply);
            let members: Vec<String> = if pairs {
                items.chunks(2).map(|p| p[0].clone()).collect()
            } else {
                items
            };
            for m in members {
                assert!(
                    seen.insert(m.clone()),
                    "{}: {m} returned twice",
                    String::from_utf8_lossy(scan)
                );
            }
            // Delete members from the start of the insertion order, three per call, from
            // another connection (swap-removal fills each hole with the last member).
            for _ in 0..3 {
                if victim < N / 2 {
                    let m = format!("m{victim}");
                    victim += 1;
                    let _ = other.cmd(&[del, key, m.as_bytes()]);
                    deleted.insert(m);
                }
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(cursor, 0, "the scan must end");
        for i in 0..N {
            let m = format!("m{i}");
            if !deleted.contains(&m) {
                assert!(seen.contains(&m), "{m} never returned");
            }
        }
    }
}
