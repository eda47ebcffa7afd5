//! This node as a replica: REPLICAOF's state changes, and the link to the master.
//!
//! The link connects, says PING, AUTH (`masterauth`), REPLCONF listening-port and
//! `capa eof psync2`, then PSYNC with the history it has (its replication id and offset, or
//! `? -1` when it never had any). A full resynchronization flushes every database and loads
//! the master's RDB payload (`$<len>` or the diskless `$EOF:<mark>` form) under all the
//! shard locks (INFO `loading:1` meanwhile); a `+CONTINUE` keeps the data. Then it applies
//! the stream as a client whose writes a read-only replica accepts and for which no key
//! expires (`ClientState::master_link`; the master's DELs do that), appends what it applied
//! to its own backlog (its offset is its master's), answers REPLCONF GETACK at once and
//! acknowledges every second. A broken link is retried with a backoff of 100 ms doubling
//! to 1 s; each new connection resynchronizes (partially when the master still has the
//! bytes).
//!
//! One supervisor task per server (started by `Server::run`) starts a link whenever
//! REPLICAOF (or, in cluster mode, the slot map) names a master, and sends the master's PING into the stream every
//! `repl-ping-replica-period` while replicas are attached.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::{Link, encode_command};

/// How many more reads a replica with `appendfsync always` applies before it syncs what it
/// applied (see the link's loop).
const MORE_BEFORE_SYNC: u32 = 16;
use crate::client::ClientState;
use crate::engine::Roles;
use crate::protocol::{Limits, RequestParser};
use crate::rdb::snapshot::{LoadOptions, load_bytes_locked};
use crate::server::Shared;
use crate::{commands, engine};

/// Makes this node a replica of `host:port` (REPLICAOF, or `replicaof` at start). The
/// supervisor starts the link.
pub(crate) fn follow(shared: &Shared, host: String, port: u16) {
    let stop = CancellationToken::new();
    // Read-only before ROLE says replica (ROLE reads the link), as `promote` is the other
    // way round.
    shared.keyspace.deletions().set_replica(true);
    {
        let mut link = shared.repl.link.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = link.take() {
            old.stop.cancel();
        }
        *link = Some(Link {
            host,
            port,
            state: "connect",
            last_io: None,
            down_since: Some(Instant::now()),
            stop,
        });
    }
    // Replicas of this node follow its new history: they reconnect and resynchronize.
    for r in shared.repl.replicas() {
        if let Some(c) = shared.clients.get(r.client) {
            c.kill.cancel();
        }
    }
    shared.repl.link_changed.send_modify(|n| *n += 1);
}

/// REPLICAOF NO ONE: stops the link and starts a new history, the old id kept as
/// `master_replid2` so replicas that followed the same master can continue.
pub(crate) fn promote(shared: &Shared) {
    // Writable before ROLE says master (ROLE reads the link): a client that saw "master"
    // must not then get -READONLY.
    shared.keyspace.deletions().set_replica(false);
    if let Some(old) = shared
        .repl
        .link
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        old.stop.cancel();
    }
    shared.repl.feed().shift_replid();
    shared.repl.activate();
}

/// The supervisor: starts a link task whenever REPLICAOF names a master (and for
/// `replicaof` in the configuration), pings replicas and counts the good ones once a
/// second. Ends at shutdown.
pub(crate) async fn supervise(shared: Arc<Shared>) {
    let config = shared.config();
    if let Some((host, port)) = config.repl.replicaof.clone() {
        follow(&shared, host, port);
    }
    // Cluster mode: the map says whether this node replicates another.
    commands::cluster::sync_role(&shared);
    let mut changed = shared.repl.link_changed.subscribe();
    changed.mark_changed();
    let mut ping = tokio::time::interval(Duration::from_secs(config.repl.ping_period.max(1)));
    ping.tick().await;
    let mut failover = tokio::time::interval(Duration::from_millis(100));
    failover.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Redis's replicationCron counts the good replicas once a second.
    let mut good = tokio::time::interval(Duration::from_secs(1));
    good.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            r = changed.changed() => {
                if r.is_err() {
                    return;
                }
                if let Some(l) = shared.repl.link() {
                    tokio::spawn(run_link(shared.clone(), l.host, l.port, l.stop));
                }
            }
            _ = ping.tick() => {
                // No PING while a FAILOVER waits: the replicas must be able to catch up
                // with an offset that stands still.
                if !shared.repl.is_replica()
                    && !shared.repl.replicas().is_empty()
                    && super::failover::state(&shared) == super::FailoverState::None
                {
                    shared.repl.propagate_plain(&[Bytes::from_static(b"PING")]);
                }
            }
            _ = failover.tick() => super::failover::tick(&shared),
            _ = good.tick() => {
                shared.repl.refresh_good_replicas(shared.live.min_replicas().1);
            }
            _ = shared.shutdown.cancelled() => return,
        }
    }
}

async fn run_link(shared: Arc<Shared>, host: String, port: u16, stop: CancellationToken) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if stop.is_cancelled() || shared.shutdown.is_cancelled() {
            return;
        }
        shared.repl.update_link(|l| l.state = "connecting");
        let outcome = tokio::select! {
            r = session(&shared, &host, port) => r,
            _ = stop.cancelled() => return,
            _ = shared.shutdown.cancelled() => return,
        };
        shared.repl.loading.store(false, Ordering::Relaxed);
        let was_up = matches!(shared.repl.link(), Some(l) if l.state == "connected");
        if let Err(e) = outcome {
            tracing::warn!("replication link to {host}:{port}: {e}");
        }
        shared.repl.update_link(|l| {
            l.state = "connect";
            if l.down_since.is_none() {
                l.down_since = Some(Instant::now());
            }
        });
        if was_up {
            backoff = Duration::from_millis(100);
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.cancelled() => return,
            _ = shared.shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

type Io<T> = std::io::Result<T>;

fn broken(why: impl Into<String>) -> std::io::Error {
    std::io::Error::other(why.into())
}

/// Reads one line (without CRLF) from the socket, skipping the bare newlines a master
/// sends while it prepares the payload.
async fn read_line(sock: &mut TcpStream, buf: &mut BytesMut, timeout: Duration) -> Io<String> {
    loop {
        while buf.first() == Some(&b'\n') {
            let _ = buf.split_to(1);
        }
        if let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line = buf.split_to(pos + 1);
            let text = String::from_utf8_lossy(&line[..pos]);
            return Ok(text.trim_end_matches('\r').to_string());
        }
        if buf.len() > 64 * 1024 {
            return Err(broken("line too long from master"));
        }
        read_more(sock, buf, timeout).await?;
    }
}

async fn read_more(sock: &mut TcpStream, buf: &mut BytesMut, timeout: Duration) -> Io<()> {
    match tokio::time::timeout(timeout, sock.read_buf(buf)).await {
        Err(_) => Err(broken("timeout reading from master")),
        Ok(Ok(0)) => Err(broken("master closed the connection")),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
    }
}

async fn command(sock: &mut TcpStream, argv: &[&[u8]]) -> Io<()> {
    let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::copy_from_slice(a)).collect();
    let mut out = Vec::new();
    encode_command(&mut out, &argv);
    sock.write_all(&out).await
}

async fn session(shared: &Arc<Shared>, host: &str, port: u16) -> Io<()> {
    let config = shared.config();
    let timeout = Duration::from_secs(config.repl.timeout.max(1));
    let mut sock = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| broken("timeout connecting to master"))??;
    let _ = sock.set_nodelay(true);
    let mut buf = BytesMut::with_capacity(16 * 1024);

    command(&mut sock, &[b"PING"]).await?;
    let pong = read_line(&mut sock, &mut buf, timeout).await?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
        return Err(broken(format!("error reply to PING from master: {pong}")));
    }
    if let Some(pass) = &config.repl.masterauth {
        match &config.repl.masteruser {
            Some(user) => command(&mut sock, &[b"AUTH", user.as_bytes(), pass.as_bytes()]).await?,
            None => command(&mut sock, &[b"AUTH", pass.as_bytes()]).await?,
        }
        let ok = read_line(&mut sock, &mut buf, timeout).await?;
        if ok.starts_with('-') {
            return Err(broken(format!("unable to AUTH to MASTER: {ok}")));
        }
    }
    let my_port = match config.repl.announce_port {
        0 => shared.port.load(Ordering::Relaxed),
        p => p,
    }
    .to_string();
    command(
        &mut sock,
        &[b"REPLCONF", b"listening-port", my_port.as_bytes()],
    )
    .await?;
    read_line(&mut sock, &mut buf, timeout).await?;
    if let Some(ip) = &config.repl.announce_ip {
        command(&mut sock, &[b"REPLCONF", b"ip-address", ip.as_bytes()]).await?;
        read_line(&mut sock, &mut buf, timeout).await?;
    }
    command(
        &mut sock,
        &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
    )
    .await?;
    read_line(&mut sock, &mut buf, timeout).await?;

    shared.repl.update_link(|l| l.state = "sync");
    // A master handing over (FAILOVER) asks its target to take over, with its own history.
    let failing_over = super::failover::state(shared) == super::FailoverState::InProgress;
    let (replid, next) = {
        let f = shared.repl.feed();
        if f.offset == 0 && !shared.repl.had_master.load(Ordering::Relaxed) && !failing_over {
            ("?".to_string(), "-1".to_string())
        } else {
            (f.replid.clone(), (f.offset + 1).to_string())
        }
    };
    if failing_over {
        command(
            &mut sock,
            &[b"PSYNC", replid.as_bytes(), next.as_bytes(), b"FAILOVER"],
        )
        .await?;
    } else {
        command(&mut sock, &[b"PSYNC", replid.as_bytes(), next.as_bytes()]).await?;
    }
    let answer = read_line(&mut sock, &mut buf, timeout).await?;
    if failing_over {
        if answer.starts_with("+FULLRESYNC") || answer.starts_with("+CONTINUE") {
            super::failover::done(shared);
        } else {
            super::failover::abort(shared, "Failover target rejected psync request");
            return Err(broken(format!("failover target refused PSYNC: {answer}")));
        }
    }
    if let Some(rest) = answer.strip_prefix("+FULLRESYNC ") {
        let mut parts = rest.split(' ');
        let id = parts.next().unwrap_or_default().to_string();
        let offset: u64 = parts
            .next()
            .and_then(|o| o.parse().ok())
            .ok_or_else(|| broken(format!("bad FULLRESYNC reply: {answer}")))?;
        let payload = read_payload(&mut sock, &mut buf, timeout).await?;
        load_payload(shared, &payload)?;
        shared.repl.feed().adopt(&id, offset);
        shared.repl.master_db.store(0, Ordering::Relaxed);
        tracing::info!(
            "MASTER <-> REPLICA sync: Finished with success ({} bytes)",
            payload.len()
        );
    } else if let Some(rest) = answer.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        if !id.is_empty() {
            let mut f = shared.repl.feed();
            if f.replid != id {
                f.replid2 = std::mem::replace(&mut f.replid, id.to_string());
                f.second_offset = f.offset as i64 + 1;
            }
        }
        tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.");
    } else {
        return Err(broken(format!("unexpected reply to PSYNC: {answer}")));
    }
    shared.repl.had_master.store(true, Ordering::Relaxed);
    shared.repl.update_link(|l| {
        l.state = "connected";
        l.last_io = Some(Instant::now());
        l.down_since = None;
    });
    stream(shared, sock, buf, timeout).await
}

/// The RDB payload after +FULLRESYNC: `$<len>\r\n<bytes>` or `$EOF:<40-byte mark>\r\n<bytes><mark>`.
async fn read_payload(sock: &mut TcpStream, buf: &mut BytesMut, timeout: Duration) -> Io<Vec<u8>> {
    let header = read_line(sock, buf, timeout).await?;
    let spec = header
        .strip_prefix('$')
        .ok_or_else(|| broken(format!("bad payload header from master: {header}")))?;
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            return Err(broken("bad EOF mark from master"));
        }
        loop {
            if buf.len() >= mark.len() && buf.ends_with(&mark) {
                let n = buf.len() - mark.len();
                let payload = buf.split_to(n).to_vec();
                buf.clear();
                return Ok(payload);
            }
            read_more(sock, buf, timeout).await?;
        }
    }
    let len: usize = spec
        .parse()
        .map_err(|_| broken(format!("bad payload length from master: {header}")))?;
    while buf.len() < len {
        // Grown as the bytes arrive, never by what the master claims.
        buf.reserve((len - buf.len()).min(1 << 20));
        read_more(sock, buf, timeout).await?;
    }
    Ok(buf.split_to(len).to_vec())
}

/// Flushes everything and loads the payload, under every shard lock.
fn load_payload(shared: &Shared, payload: &[u8]) -> Io<()> {
    shared.repl.loading.store(true, Ordering::Relaxed);
    let opts = LoadOptions {
        // A replica keeps keys whose time has passed: the master's DEL removes them.
        now_ms: 0,
        limits: shared.live.zset_limits(),
    };
    let databases = shared.keyspace.databases();
    let mut store = shared.keyspace.lock_all();
    for s in store.shards_mut() {
        for db in 0..databases {
            s.flush_db(db);
        }
    }
    let loaded = load_bytes_locked(payload, &mut store, &opts);
    drop(store);
    shared.repl.loading.store(false, Ordering::Relaxed);
    let loaded =
        loaded.map_err(|e| broken(format!("cannot load the master's RDB payload: {e}")))?;
    // The append-only file starts over from the new data set, as Redis's replica restarts
    // it after a full resynchronization.
    crate::services::aof::restart_after_full_sync(shared);
    let dump = crate::rdb::dump_functions(loaded.functions.iter().map(|c| &c[..]));
    if let Err(e) = shared
        .scripts
        .function_restore(&dump, crate::script::functions::RestorePolicy::Flush)
    {
        tracing::warn!("functions of the master's payload not loaded: {e}");
    }
    Ok(())
}

/// Applies the master's stream until the link breaks.
async fn stream(
    shared: &Arc<Shared>,
    sock: TcpStream,
    mut buf: BytesMut,
    timeout: Duration,
) -> Io<()> {
    let (mut rd, mut wr) = sock.into_split();
    let peer = rd.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let local = rd.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let info = shared.clients.register(peer, local);
    let _registered = Unregister(shared, info.id);
    info.kind
        .store(crate::client::KIND_MASTER, Ordering::Relaxed);
    let mut client = ClientState::new(info.clone());
    client.master_link = true;
    client.authenticated = true;
    // The stream continues where the last link left it: in the database it had selected.
    client.db = shared.repl.master_db.load(Ordering::Relaxed);
    let mut parser = RequestParser::new(Limits {
        max_bulk_len: shared.config().proto_max_bulk_len,
        ..Limits::default()
    });
    // A transaction's bytes count (and reach this node's own replicas) once its EXEC has
    // run, as Redis advances a replica's offset only outside MULTI: a link broken inside one
    // resumes from its MULTI, never from its middle.
    let mut in_multi: Vec<u8> = Vec::new();
    let mut ack = tokio::time::interval(Duration::from_secs(1));
    let mut args: Vec<Bytes> = Vec::new();
    let mut more_without_sync = 0;
    loop {
        // Everything complete in the buffer.
        loop {
            let req = match parser.parse(&buf) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => return Err(broken(format!("protocol error from master: {e}"))),
            };
            let frame = buf.split_to(req.consumed).freeze();
            parser.fill_args(req.args, frame.clone(), &mut args);
            // What the command is, from its table row (an unknown one has no roles).
            let roles = args
                .first()
                .and_then(|name| shared.table.get(name))
                .map_or(Roles::empty(), |spec| spec.roles);
            let getack = roles.contains(Roles::REPLICATION_LINK)
                && args
                    .get(1)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"getack"));
            if getack {
                // The acknowledged offset excludes the GETACK itself, as Redis's does.
                send_ack(shared, &mut wr).await?;
            } else if !args.is_empty() && !roles.contains(Roles::KEEPALIVE) {
                let reply = engine::execute(
                    shared,
                    &mut client,
                    &crate::protocol::request::borrowed_args(&args),
                );
                if let crate::protocol::Reply::Error(e) = &reply {
                    tracing::warn!("command from master answered an error: {e}");
                }
                // A replica's append-only file logs what it applies from its master (the
                // file selects databases itself; REPLCONF is the link's, not data).
                if shared.repl.aof.on()
                    && !roles.intersects(Roles::SELECTS_DB.union(Roles::REPLICATION_LINK))
                {
                    shared.repl.aof.append(&[(client.db, args.clone())]);
                }
            }
            if client.multi.is_some() {
                in_multi.extend_from_slice(&frame);
            } else if !in_multi.is_empty() {
                in_multi.extend_from_slice(&frame);
                shared.repl.append_from_master(&in_multi);
                in_multi.clear();
            } else {
                shared.repl.append_from_master(&frame);
            }
            shared.repl.master_db.store(client.db, Ordering::Relaxed);
        }
        // The master feeds each write as it is made: what has come meanwhile is applied
        // before syncing, so that one sync covers it too (Redis's replica syncs once per
        // event-loop turn). Bounded, so a master that never pauses still gets its sync, its
        // acknowledgements and the kill switch looked at.
        if shared.repl.aof.sync_due() && more_without_sync < MORE_BEFORE_SYNC {
            tokio::task::yield_now().await;
            match rd.try_read_buf(&mut buf) {
                Ok(0) => return Err(broken("master closed the connection")),
                Ok(_) => {
                    more_without_sync += 1;
                    shared
                        .repl
                        .update_link(|l| l.last_io = Some(Instant::now()));
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        more_without_sync = 0;
        // What was applied reaches this replica's append-only file, as a master's writes do
        // before their replies.
        shared.repl.aof.before_reply();
        tokio::select! {
            r = tokio::time::timeout(timeout, rd.read_buf(&mut buf)) => match r {
                Err(_) => return Err(broken("timeout: no data from master")),
                Ok(Ok(0)) => return Err(broken("master closed the connection")),
                Ok(Ok(_)) => shared.repl.update_link(|l| l.last_io = Some(Instant::now())),
                Ok(Err(e)) => return Err(e),
            },
            _ = ack.tick() => send_ack(shared, &mut wr).await?,
            _ = info.kill.cancelled() => return Err(broken("master link killed")),
        }
    }
}

async fn send_ack(shared: &Shared, wr: &mut tokio::net::tcp::OwnedWriteHalf) -> Io<()> {
    // An acknowledged offset is in this replica's append-only file first (and on disk with
    // `appendfsync always`), as Redis's ACK leaves after its AOF flush.
    shared.repl.aof.before_reply();
    let offset = shared.repl.offset().to_string();
    let mut out = Vec::new();
    encode_command(
        &mut out,
        &[
            Bytes::from_static(b"REPLCONF"),
            Bytes::from_static(b"ACK"),
            offset.into(),
        ],
    );
    wr.write_all(&out).await
}

struct Unregister<'a>(&'a Shared, u64);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.0.clients.unregister(self.1);
    }
}
