//! Replication commands: REPLICAOF / SLAVEOF, ROLE, REPLCONF, PSYNC / SYNC, FAILOVER, and
//! INFO's replication section. The state and the connections are `crate::repl`'s; PSYNC only
//! marks the client, and the connection then hands its socket to `repl::master`.

use std::sync::atomic::Ordering;

use crate::engine::{CommandSpec as C, Ctx};
use crate::protocol::Reply;
use crate::server::Shared;

/// The replication commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "replicaof",
        3,
        &["admin", "noscript", "stale", "no_async_loading"],
        C::keys(0, 0, 0),
        replicaof,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "slaveof",
        3,
        &["admin", "noscript", "stale", "no_async_loading"],
        C::keys(0, 0, 0),
        replicaof,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "role",
        1,
        &["noscript", "loading", "stale", "fast"],
        C::keys(0, 0, 0),
        role,
    )
    .with_acl(&["@admin", "@fast", "@dangerous"]),
    C::new(
        "replconf",
        -1,
        &["admin", "noscript", "loading", "stale", "allow_busy"],
        C::keys(0, 0, 0),
        replconf,
    )
    .with_roles(crate::engine::Roles::REPLICATION_LINK)
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "psync",
        -3,
        &["admin", "noscript", "no_async_loading", "no_multi"],
        C::keys(0, 0, 0),
        psync,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "failover",
        -1,
        &["admin", "noscript", "stale"],
        C::keys(0, 0, 0),
        failover,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "sync",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
        C::keys(0, 0, 0),
        sync,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
];

fn err(msg: &'static str) -> Reply {
    Reply::Error(msg.into())
}

/// REPLICAOF host port | NO ONE.
fn replicaof(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let shared = ctx.shared;
    if shared.cluster.is_some() {
        return err("ERR REPLICAOF not allowed in cluster mode.");
    }
    if crate::repl::failover::state(shared) != crate::repl::FailoverState::None {
        return err("ERR REPLICAOF not allowed while failing over.");
    }
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        if shared.repl.is_replica() {
            crate::repl::replica::promote(shared);
            tracing::info!(
                "MASTER MODE enabled (user request from '{}')",
                ctx.client.info.addr
            );
        }
        return Reply::ok();
    }
    let port = match crate::num::parse_i64(args[2]) {
        Some(p) if (0..=65535).contains(&p) => p as u16,
        _ => return err("ERR Invalid master port"),
    };
    let host = String::from_utf8_lossy(args[1]).into_owned();
    if let Some(l) = shared.repl.link()
        && l.host.eq_ignore_ascii_case(&host)
        && l.port == port
    {
        return Reply::status("OK Already connected to specified master");
    }
    crate::repl::replica::follow(shared, host.clone(), port);
    tracing::info!(
        "REPLICAOF {host}:{port} enabled (user request from '{}')",
        ctx.client.info.addr
    );
    Reply::ok()
}

/// ROLE.
fn role(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> Reply {
    let repl = &ctx.shared.repl;
    match repl.link() {
        None => {
            let replicas = repl
                .replicas()
                .iter()
                .filter(|r| r.state == "online")
                .map(|r| {
                    Reply::Array(vec![
                        Reply::bulk(r.ip.as_bytes()),
                        Reply::bulk(r.port.to_string().as_bytes()),
                        Reply::bulk(r.ack.load(Ordering::Relaxed).to_string().as_bytes()),
                    ])
                })
                .collect();
            Reply::Array(vec![
                Reply::bulk(b"master"),
                Reply::Int(repl.offset() as i64),
                Reply::Array(replicas),
            ])
        }
        Some(l) => Reply::Array(vec![
            Reply::bulk(b"slave"),
            Reply::bulk(l.host.as_bytes()),
            Reply::Int(i64::from(l.port)),
            Reply::bulk(l.state.as_bytes()),
            Reply::Int(if l.state == "connected" {
                repl.offset() as i64
            } else {
                -1
            }),
        ]),
    }
}

/// REPLCONF option value [option value …]: what a replica says about itself before PSYNC.
fn replconf(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len().is_multiple_of(2) {
        return err("ERR syntax error");
    }
    for pair in args[1..].chunks(2) {
        let (opt, val) = (&pair[0], &pair[1]);
        match opt.to_ascii_lowercase().as_slice() {
            b"listening-port" => match crate::num::parse_i64(val) {
                // Redis keeps any integer; a port that cannot be one is shown as 0.
                Some(p) => ctx.client.repl_port = u16::try_from(p).unwrap_or(0),
                None => return err("ERR value is not an integer or out of range"),
            },
            b"ip-address" => {
                ctx.client.repl_ip = Some(String::from_utf8_lossy(val).into_owned());
            }
            b"capa" | b"rdb-only" | b"rdb-filter-only" => {}
            // Acknowledgements come on a replica's feed connection (repl::master); from
            // anyone else they mean nothing. GETACK is for replicas (repl::replica). Redis
            // answers neither (a reply would land in a master's stream).
            b"ack" | b"getack" => return Reply::Multi(Vec::new()),
            _ => {
                return Reply::Error(
                    format!(
                        "ERR Unrecognized REPLCONF option: {}",
                        crate::engine::printable(opt, 128)
                    )
                    .into(),
                );
            }
        }
    }
    Reply::ok()
}

/// PSYNC replid offset \[FAILOVER\]: the connection becomes a replica's feed (see
/// `repl::master`). With FAILOVER (sent by a master handing over to this replica, see
/// `repl::failover`) this node first becomes a master, if it followed that master's history.
fn psync(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    if args.len() > 3 && args[3].eq_ignore_ascii_case(b"failover") {
        let shared = ctx.shared;
        tracing::info!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(args[1])
        );
        if !shared.repl.is_replica() {
            return err("ERR PSYNC FAILOVER can't be sent to a master.");
        }
        if shared.repl.feed().replid.as_bytes() != args[1] {
            return err("ERR PSYNC FAILOVER replid must match my replid.");
        }
        crate::repl::replica::promote(shared);
        tracing::info!(
            "MASTER MODE enabled (failover request from '{}')",
            ctx.client.info.addr
        );
    }
    let offset = crate::num::parse_i64(args[2]).unwrap_or(-1);
    start_sync(ctx, String::from_utf8_lossy(args[1]).into_owned(), offset)
}

/// SYNC: the old full synchronization (no +FULLRESYNC line).
fn sync(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> Reply {
    start_sync(ctx, String::new(), -1)
}

fn start_sync(ctx: &mut Ctx<'_>, replid: String, offset: i64) -> Reply {
    if crate::repl::failover::state(ctx.shared) != crate::repl::FailoverState::None {
        return err("NOMASTERLINK Can't SYNC while failing over");
    }
    if let Some(l) = ctx.shared.repl.link()
        && l.state != "connected"
    {
        return err("NOMASTERLINK Can't SYNC while not connected with my master");
    }
    ctx.next = crate::engine::Next::Replicate { replid, offset };
    Reply::ok()
}

/// `FAILOVER [TO host port [FORCE]] [TIMEOUT ms]` or `FAILOVER ABORT`: checked as Redis 7.0
/// checks it, then run by `repl::failover`.
fn failover(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    use crate::repl::{FailoverState, failover};
    let shared = ctx.shared;
    if shared.cluster.is_some() {
        return err("ERR FAILOVER not allowed in cluster mode.");
    }
    if args.len() == 2 && args[1].eq_ignore_ascii_case(b"abort") {
        if failover::state(shared) == FailoverState::None {
            return err("ERR No failover in progress.");
        }
        failover::abort(shared, "Failover manually aborted");
        return Reply::ok();
    }
    let long = |a: &[u8]| crate::num::parse_i64(a);
    let not_int = || err("ERR value is not an integer or out of range");
    let mut timeout_ms: i64 = 0;
    let mut force = false;
    let mut to: Option<(String, i64)> = None;
    let mut j = 1;
    while j < args.len() {
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"timeout") && j + 1 < args.len() && timeout_ms == 0 {
            let Some(t) = long(args[j + 1]) else {
                return not_int();
            };
            if t <= 0 {
                return err("ERR FAILOVER timeout must be greater than 0");
            }
            timeout_ms = t;
            j += 2;
        } else if a.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && to.is_none() {
            let Some(port) = long(args[j + 2]) else {
                return not_int();
            };
            to = Some((String::from_utf8_lossy(args[j + 1]).into_owned(), port));
            j += 3;
        } else if a.eq_ignore_ascii_case(b"force") && !force {
            force = true;
            j += 1;
        } else {
            return err("ERR syntax error");
        }
    }
    if failover::state(shared) != FailoverState::None {
        return err("ERR FAILOVER already in progress.");
    }
    if shared.repl.is_replica() {
        return err("ERR FAILOVER is not valid when server is a replica.");
    }
    let replicas = shared.repl.replicas();
    if replicas.is_empty() {
        return err("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || to.is_none()) {
        return err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match to {
        None => None,
        Some((host, port)) => {
            let Some(r) = replicas
                .iter()
                .find(|r| r.ip == host && i64::from(r.port) == port)
            else {
                return err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if r.state != "online" {
                return err("ERR FAILOVER target replica is not online.");
            }
            Some((host, r.port))
        }
    };
    let end_ms = (timeout_ms > 0).then(|| shared.clock.now_ms().saturating_add(timeout_ms as u64));
    failover::start(shared, target, end_ms, force);
    Reply::ok()
}

/// INFO's replication section, Redis 7.0.15's fields in its order.
pub(crate) fn info_fields(shared: &Shared) -> Vec<(String, String)> {
    let repl = &shared.repl;
    let config = shared.config();
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| out.push((k.to_string(), v));
    let link = repl.link();
    let (replid, replid2, offset, second, first, histlen, active) = {
        let f = repl.feed();
        (
            f.replid.clone(),
            f.replid2.clone(),
            f.offset,
            f.second_offset,
            f.backlog_first(),
            f.backlog_len(),
            repl.active() || link.is_some(),
        )
    };
    match &link {
        None => add("role", "master".into()),
        Some(l) => {
            add("role", "slave".into());
            add("master_host", l.host.clone());
            add("master_port", l.port.to_string());
            let up = l.state == "connected";
            add("master_link_status", if up { "up" } else { "down" }.into());
            add(
                "master_last_io_seconds_ago",
                match l.last_io {
                    Some(t) if up => t.elapsed().as_secs().to_string(),
                    _ => "-1".into(),
                },
            );
            add(
                "master_sync_in_progress",
                if l.state == "sync" { "1" } else { "0" }.into(),
            );
            add("slave_read_repl_offset", offset.to_string());
            add("slave_repl_offset", offset.to_string());
            if !up {
                add(
                    "master_link_down_since_seconds",
                    match l.down_since {
                        Some(t) => t.elapsed().as_secs().to_string(),
                        None => "-1".into(),
                    },
                );
            }
            add("slave_priority", config.repl.priority.to_string());
            add(
                "slave_read_only",
                if config.repl.read_only { "1" } else { "0" }.into(),
            );
            add(
                "replica_announced",
                if config.repl.announced { "1" } else { "0" }.into(),
            );
        }
    }
    let replicas = repl.replicas();
    add("connected_slaves", replicas.len().to_string());
    let r = &config.repl;
    if r.min_replicas_to_write > 0 && r.min_replicas_max_lag > 0 {
        add("min_slaves_good_slaves", repl.good_replicas().to_string());
    }
    for (i, r) in replicas.iter().enumerate() {
        let lag = r.ack_at.lock().map(|t| t.elapsed().as_secs()).unwrap_or(0);
        add(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={},offset={},lag={}",
                r.ip,
                r.port,
                r.state,
                r.ack.load(Ordering::Relaxed),
                lag
            ),
        );
    }
    add(
        "master_failover_state",
        crate::repl::failover::state(shared).name().into(),
    );
    add("master_replid", replid);
    add("master_replid2", replid2);
    add("master_repl_offset", offset.to_string());
    add("second_repl_offset", second.to_string());
    add("repl_backlog_active", if active { "1" } else { "0" }.into());
    add("repl_backlog_size", config.repl.backlog_size.to_string());
    add(
        "repl_backlog_first_byte_offset",
        if active { first } else { 0 }.to_string(),
    );
    add("repl_backlog_histlen", histlen.to_string());
    out
}
