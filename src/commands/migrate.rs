//! MIGRATE and RESTORE-ASKING: moving keys to another server with DUMP payloads, as Redis
//! 7.0's `migrateCommand` does (`redis-cli --cluster reshard` moves slots with it).
//!
//! `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password |
//! AUTH2 username password] [KEYS key ...]` connects to the target, sends AUTH and SELECT if
//! asked, then one `RESTORE` (`RESTORE-ASKING` in cluster mode) per existing key with its
//! remaining TTL, reads the replies, and deletes the keys the target accepted unless COPY
//! (propagated to replicas as DEL). It answers `+NOKEY` when none of the keys exists.
//!
//! The command holds its keys' shard locks from the first read to the delete, so no command
//! here can change a key between its copy and its removal: a counter moved while clients
//! increment it is never counted twice nor lost. Like Redis, it waits for the target (up to
//! `timeout` ms per operation) on the thread that runs it; no connection is cached.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;

use crate::engine::{CommandSpec as C, Ctx, FindKeys, InfoDoc, KeySpec, KeySpecDoc};
use crate::error::CmdError;
use crate::protocol::Reply;

const MIGRATE_KEYS: KeySpec = KeySpec::Custom {
    first: 3,
    last: 3,
    step: 1,
    find: migrate_keys,
};

/// The key positions, as Redis's `migrateGetKeys`: every argument after KEYS when the key
/// argument is empty, none when it is not (a syntax error MIGRATE itself reports), else the
/// key argument. KEYS is looked for after the fixed arguments, skipping AUTH's password
/// and AUTH2's user name and password (either may be spelled "KEYS").
fn migrate_keys(args: &[&[u8]]) -> Vec<usize> {
    if args.len() < 6 {
        return Vec::new();
    }
    let mut i = 6;
    while i < args.len() {
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"KEYS") {
            return if args[3].is_empty() {
                (i + 1..args.len()).collect()
            } else {
                Vec::new()
            };
        }
        if a.eq_ignore_ascii_case(b"AUTH") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"AUTH2") {
            i += 2;
        }
        i += 1;
    }
    vec![3]
}

static MIGRATE_INFO: InfoDoc = InfoDoc {
    tips: &["nondeterministic_output"],
    key_specs: &[
        KeySpecDoc::range(&["RW", "access", "delete"], 3, 0),
        KeySpecDoc {
            notes: None,
            flags: &["RW", "access", "delete", "incomplete"],
            begin: Some(-2),
            keyword: Some("KEYS"),
            find: FindKeys::Range(-1, 1, 0),
        },
    ],
};

/// MIGRATE and RESTORE-ASKING.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "migrate",
        -6,
        &["write", "movablekeys"],
        MIGRATE_KEYS,
        migrate,
    )
    .with_effect(crate::repl::effects::Effect::Handled)
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .with_info(&MIGRATE_INFO),
    C::new(
        "restore-asking",
        -4,
        &["write", "denyoom", "asking"],
        C::keys(1, 1, 1),
        crate::engine::run::<super::dump::Restore>,
    )
    .with_effect(crate::repl::effects::Effect::KeyState)
    .with_acl(&["@keyspace", "@write", "@slow", "@dangerous"])
    .with_info(&InfoDoc {
        tips: &[],
        key_specs: &[KeySpecDoc::range(&["OW", "update"], 1, 0)],
    }),
];

struct Args {
    host: String,
    port: u16,
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    auth: Option<(Option<Bytes>, Bytes)>,
    keys: Vec<Bytes>,
}

fn parse(args: &[&[u8]]) -> Result<Args, CmdError> {
    let mut copy = false;
    let mut replace = false;
    let mut auth = None;
    let mut keys_at = None;
    let mut i = 6;
    while i < args.len() {
        let more = args.len() - i - 1;
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"COPY") {
            copy = true;
        } else if a.eq_ignore_ascii_case(b"REPLACE") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"AUTH") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            auth = Some((None, Bytes::copy_from_slice(args[i + 1])));
            i += 1;
        } else if a.eq_ignore_ascii_case(b"AUTH2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some((
                Some(Bytes::copy_from_slice(args[i + 1])),
                Bytes::copy_from_slice(args[i + 2]),
            ));
            i += 2;
        } else if a.eq_ignore_ascii_case(b"KEYS") {
            if !args[3].is_empty() {
                return Err(CmdError::msg(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys_at = Some(i + 1);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let timeout = crate::num::parse_i64(args[5]).ok_or(CmdError::NotInteger)?;
    let db = crate::num::parse_i64(args[4]).ok_or(CmdError::NotInteger)?;
    let timeout = if timeout <= 0 { 1000 } else { timeout };
    let port = crate::num::parse_i64(args[2])
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
    let keys = match keys_at {
        Some(at) => &args[at..],
        None => &args[3..4],
    };
    Ok(Args {
        host: String::from_utf8_lossy(args[1]).into_owned(),
        port,
        db,
        timeout: Duration::from_millis(timeout as u64),
        copy,
        replace,
        auth,
        keys: crate::engine::args::owned(keys),
    })
}

fn encode(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
    for p in parts {
        out.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
}

/// Reads one reply line (MIGRATE's targets answer +OK or -ERR… to each command).
fn read_line(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<String> {
    loop {
        if let Some(end) = buf.windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 2);
            return Ok(line);
        }
        if buf.len() > 1 << 20 {
            return Err(std::io::Error::other("reply line too long"));
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn err(text: impl Into<String>) -> Reply {
    Reply::Error(std::borrow::Cow::Owned(text.into()))
}

fn migrate(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => return e.into(),
    };
    let (db, now) = (ctx.db(), ctx.now_ms);
    // The keys that exist, with their payloads and remaining TTLs.
    let mut found: Vec<(Bytes, Vec<u8>, u64)> = Vec::new();
    for k in &a.keys {
        let ttl = match ctx.store.lookup_untouched(db, k, now) {
            None => continue,
            Some(e) => e.expire_at().map_or(0, |at| at.saturating_sub(now).max(1)),
        };
        if let Some(v) = ctx.store.read_value(db, k, now) {
            found.push((k.clone(), crate::rdb::dump(v), ttl));
        }
    }
    if found.is_empty() {
        return Reply::status("NOKEY");
    }
    let connect = (a.host.as_str(), a.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .and_then(|addr| TcpStream::connect_timeout(&addr, a.timeout).ok());
    let Some(mut s) = connect else {
        return err("IOERR error or timeout connecting to the client");
    };
    let _ = s.set_read_timeout(Some(a.timeout));
    let _ = s.set_write_timeout(Some(a.timeout));
    let _ = s.set_nodelay(true);
    let mut out = Vec::new();
    if let Some((user, pass)) = &a.auth {
        match user {
            Some(u) => encode(&mut out, &[b"AUTH", u, pass]),
            None => encode(&mut out, &[b"AUTH", pass]),
        }
    }
    let db_text = a.db.to_string();
    encode(&mut out, &[b"SELECT", db_text.as_bytes()]);
    let restore: &[u8] = if ctx.shared.cluster.is_some() {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    for (k, payload, ttl) in &found {
        let ttl = ttl.to_string();
        if a.replace {
            encode(&mut out, &[restore, k, ttl.as_bytes(), payload, b"REPLACE"]);
        } else {
            encode(&mut out, &[restore, k, ttl.as_bytes(), payload]);
        }
    }
    if s.write_all(&out).is_err() {
        return err("IOERR error or timeout writing to target instance");
    }
    let mut buf = Vec::new();
    let mut error: Option<String> = None;
    for _ in 0..usize::from(a.auth.is_some()) + 1 {
        match read_line(&mut s, &mut buf) {
            Ok(line) if line.starts_with('-') => {
                error.get_or_insert(line[1..].to_string());
            }
            Ok(_) => {}
            Err(_) => return err("IOERR error or timeout reading to target instance"),
        }
    }
    if let Some(e) = error {
        return err(format!("ERR Target instance replied with error: {e}"));
    }
    let mut moved = Vec::new();
    for (k, _, _) in &found {
        match read_line(&mut s, &mut buf) {
            Ok(line) if line.starts_with('-') => {
                error.get_or_insert(line[1..].to_string());
            }
            Ok(_) => moved.push(k.clone()),
            Err(_) => {
                error.get_or_insert_with(|| "IOERR".into());
                break;
            }
        }
    }
    if !a.copy {
        for k in &moved {
            if ctx.store.remove(db, k, now).is_some() {
                ctx.notify(crate::services::notify::class::GENERIC, "del", k);
                ctx.propagate
                    .push((db, vec![Bytes::from_static(b"DEL"), k.clone()]));
            }
        }
    }
    match error {
        None => Reply::ok(),
        Some(e) if e == "IOERR" => err("IOERR error or timeout reading to target instance"),
        Some(e) => err(format!("ERR Target instance replied with error: {e}")),
    }
}
