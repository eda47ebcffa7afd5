//! This node as a master: a connection that sent PSYNC or SYNC becomes a replica's feed,
//! and WAIT counts the replicas' acknowledgements.
//!
//! PSYNC with this node's replication id (or the previous one, up to where it ended) and
//! an offset the backlog still holds gets `+CONTINUE <id>` and the bytes from there.
//! Otherwise a full resynchronization: `+FULLRESYNC <id> <offset>` then `$<len>` and the
//! RDB payload, made under every shard lock together with the offset it corresponds to, so
//! the stream continues exactly after it (Redis forks; sluice holds the locks while it
//! serializes, which is fine for a limiter's data). Then the stream, from the backlog, as it
//! grows. A replica that falls behind by more than the backlog is disconnected (it
//! resynchronizes), which bounds what the master holds for it. The replica's
//! `REPLCONF ACK <offset>` lines update what INFO, ROLE and WAIT report.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{Attached, fullsync};
use crate::client::ClientState;
use crate::engine::Roles;
use crate::protocol::{Args, Limits, Reply, RequestParser};
use crate::rdb::snapshot::SaveOptions;
use crate::server::Shared;

/// What a full resynchronization's snapshot needs from the server besides the data.
fn snapshot_inputs(shared: &Shared) -> fullsync::Inputs {
    let config = shared.config();
    let opts = SaveOptions {
        redis_version: config.redis_version.clone(),
        ctime_s: shared.clock.now_ms() / 1000,
        used_mem: crate::alloc_stats::allocated() as u64,
        checksum: true,
        // Keys whose time has passed go too: the replica drops them on the master's DEL.
        now_ms: 0,
        aof_base: false,
    };
    drop(config);
    fullsync::Inputs {
        keyspace: shared.keyspace.clone(),
        functions: shared
            .scripts
            .function_libraries()
            .into_iter()
            .map(|lib| lib.code.clone())
            .collect(),
        opts,
    }
}

/// The snapshot to send (shared with every replica syncing now; made off the loops), or
/// None if the client was killed or the server stops while it is made.
async fn obtain_snapshot(
    shared: &Shared,
    client: &ClientState,
) -> std::io::Result<Option<Arc<fullsync::Made>>> {
    let ticket = shared
        .repl
        .fullsync
        .ticket(&shared.repl, || snapshot_inputs(shared))?;
    let mut rx = match ticket {
        fullsync::Ticket::Ready(made) => return Ok(Some(made)),
        fullsync::Ticket::Wait(rx) => rx,
    };
    tokio::select! {
        r = rx.wait_for(Option::is_some) => match r {
            Ok(made) => Ok(made.clone()),
            Err(_) => Err(std::io::Error::other("the snapshot for replicas failed")),
        },
        _ = client.info.kill.cancelled() => Ok(None),
        _ = shared.shutdown.cancelled() => Ok(None),
    }
}

/// How much is written to a replica in one go: its progress is checked against
/// `repl-timeout` per chunk, and the backlog is read (under the feed's lock) a chunk at a
/// time.
const CHUNK: usize = 256 * 1024;

/// Writes `bytes` as the peer takes them. Every second without all of it written, drops
/// the peer (Ok(false)) if it has taken nothing for `timeout` (as Redis drops a replica that
/// stops reading), or if `still_ok(written so far)` says so (the output limits); also when
/// it is killed or the server stops.
async fn write_bounded<S: AsyncWrite + Unpin>(
    shared: &Shared,
    stream: &mut S,
    client: &ClientState,
    bytes: &[u8],
    timeout: Duration,
    mut still_ok: impl FnMut(usize) -> bool,
) -> std::io::Result<bool> {
    let mut pos = 0;
    let mut progress = Instant::now();
    let mut check = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    while pos < bytes.len() {
        let end = (pos + CHUNK).min(bytes.len());
        tokio::select! {
            // `write` is cancel safe: when another branch wins, nothing was written.
            r = stream.write(&bytes[pos..end]) => {
                let n = r?;
                if n == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                pos += n;
                progress = Instant::now();
                shared
                    .stats
                    .net_output_bytes
                    .add(n as u64);
            }
            _ = check.tick() => {
                if progress.elapsed() > timeout {
                    tracing::warn!(
                        "Disconnecting timedout replica {}: it read nothing for {} s",
                        client.info.addr,
                        timeout.as_secs()
                    );
                    return Ok(false);
                }
                if !still_ok(pos) {
                    return Ok(false);
                }
            }
            _ = client.info.kill.cancelled() => return Ok(false),
            _ = shared.shutdown.cancelled() => return Ok(false),
        }
    }
    Ok(true)
}

/// The replica class of `client-output-buffer-limit`, applied to the stream a replica has
/// not taken yet (its output buffer), as Redis 7.0 applies it: a hard limit below
/// `repl-backlog-size` counts as the backlog's size (a replica shares the backlog's
/// memory), the soft one as set.
struct OutputLimit {
    hard: u64,
    soft: u64,
    soft_seconds: u64,
    over_soft_since: Option<Instant>,
}

impl OutputLimit {
    /// Read from the configuration; Redis's default is `256mb 64mb 60`.
    fn new(config: &crate::config::Config) -> Self {
        let words: Vec<&str> = config
            .output_buffer_limit_other
            .split_whitespace()
            .collect();
        let (hard, soft, soft_seconds) = words
            .chunks(4)
            .find(|c| c.len() == 4 && c[0] == "slave")
            .and_then(|c| Some((c[1].parse().ok()?, c[2].parse().ok()?, c[3].parse().ok()?)))
            .unwrap_or((256 << 20, 64 << 20, 60));
        OutputLimit {
            hard,
            soft,
            soft_seconds,
            over_soft_since: None,
        }
    }

    /// True if a replica `lag` bytes behind must be dropped (`backlog`: the backlog's size).
    fn exceeded(&mut self, lag: u64, backlog: u64) -> bool {
        if self.hard > 0 && lag > self.hard.max(backlog) {
            return true;
        }
        if self.soft > 0 && lag > self.soft {
            let since = *self.over_soft_since.get_or_insert_with(Instant::now);
            return since.elapsed() > Duration::from_secs(self.soft_seconds);
        }
        self.over_soft_since = None;
        false
    }
}

/// Serves a replica on this connection after its PSYNC (`replid` empty: SYNC) until it
/// closes, is killed, falls out of the backlog, or the server stops.
pub(crate) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    shared: &Shared,
    mut stream: S,
    client: &mut ClientState,
    (replid, offset): (String, i64),
) -> std::io::Result<()> {
    let legacy = replid.is_empty();
    shared.repl.activate();
    let partial = !legacy && offset >= 1 && {
        let f = shared.repl.feed();
        let known = replid == f.replid || (replid == f.replid2 && offset <= f.second_offset);
        known && f.since(offset as u64 - 1).is_some()
    };
    let mut sent: u64;
    if partial {
        let id = shared.repl.feed().replid.clone();
        stream
            .write_all(format!("+CONTINUE {id}\r\n").as_bytes())
            .await?;
        sent = offset as u64 - 1;
        tracing::info!(
            "Partial resynchronization request from {} accepted",
            client.info.addr
        );
    } else {
        let Some(made) = obtain_snapshot(shared, client).await? else {
            return Ok(());
        };
        let timeout = Duration::from_secs(shared.config().repl.timeout.max(1));
        let mut head = String::new();
        if !legacy {
            head.push_str(&format!("+FULLRESYNC {} {}\r\n", made.replid, made.offset));
        }
        head.push_str(&format!("${}\r\n", made.payload.len()));
        let whole = |_| true;
        if !write_bounded(shared, &mut stream, client, head.as_bytes(), timeout, whole).await?
            || !write_bounded(shared, &mut stream, client, &made.payload, timeout, whole).await?
        {
            return Ok(());
        }
        sent = made.offset;
        tracing::info!(
            "Synchronization with replica {} succeeded ({} bytes)",
            client.info.addr,
            made.payload.len()
        );
    }
    stream.flush().await?;
    let config = shared.config();
    let mut limit = OutputLimit::new(&config);
    let ip = match &client.repl_ip {
        Some(ip) => ip.clone(),
        None => client
            .info
            .addr
            .rsplit_once(':')
            .map(|(ip, _)| ip.trim_matches(['[', ']']).to_string())
            .unwrap_or_default(),
    };
    let me = Arc::new(Attached {
        client: client.info.id,
        ip,
        port: client.repl_port,
        state: "online",
        ack: AtomicU64::new(0),
        ack_at: std::sync::Mutex::new(Instant::now()),
    });
    shared.repl.attach(me.clone());
    shared
        .repl
        .refresh_good_replicas(shared.live.min_replicas().1);
    client
        .info
        .kind
        .store(crate::client::KIND_REPLICA, Ordering::Relaxed);
    let _detach = Detach(shared, client.info.id);
    let mut grown = shared.repl.grown.subscribe();
    let mut parser = RequestParser::new(Limits::default());
    let mut rbuf = BytesMut::with_capacity(1024);
    let timeout = Duration::from_secs(config.repl.timeout.max(1));
    drop(config);
    // Redis drops a replica whose acknowledgements stop for repl-timeout (SYNC's replicas
    // never send any).
    let mut ack_check = tokio::time::interval(Duration::from_secs(1));
    loop {
        // With `appendfsync always`, the writes of the clients served alongside go out
        // together (one yield lets them run first): the replica then applies them with one
        // sync of its own file, not one each, as Redis's stream leaves once per event-loop
        // turn.
        if shared.repl.aof.sync_due() {
            tokio::task::yield_now().await;
        }
        let (pending, lag, backlog) = {
            let f = shared.repl.feed();
            let lag = f.offset.saturating_sub(sent);
            (f.since_at_most(sent, CHUNK), lag, f.capacity() as u64)
        };
        let Some(bytes) = pending else {
            tracing::warn!(
                "closing replica {}: it fell behind the replication backlog",
                client.info.addr
            );
            return Ok(());
        };
        if limit.exceeded(lag, backlog) {
            over_limit(client);
            return Ok(());
        }
        if !bytes.is_empty() {
            let mut dropped = false;
            let still_ok = |written: usize| {
                let lag = shared
                    .repl
                    .feed()
                    .offset
                    .saturating_sub(sent + written as u64);
                dropped = limit.exceeded(lag, backlog);
                !dropped
            };
            if !write_bounded(shared, &mut stream, client, &bytes, timeout, still_ok).await? {
                if dropped {
                    over_limit(client);
                }
                return Ok(());
            }
            stream.flush().await?;
            sent += bytes.len() as u64;
            continue;
        }
        tokio::select! {
            _ = ack_check.tick() => {
                let silent = me.ack_at.lock().map(|t| t.elapsed()).unwrap_or_default();
                if !legacy && silent > timeout {
                    tracing::warn!(
                        "Disconnecting timedout replica (streaming sync) {}",
                        client.info.addr
                    );
                    return Ok(());
                }
            }
            r = grown.changed() => if r.is_err() { return Ok(()) },
            r = stream.read_buf(&mut rbuf) => {
                if r? == 0 {
                    return Ok(());
                }
                read_acks(shared, &me, &mut parser, &mut rbuf)?;
            }
            _ = client.info.kill.cancelled() => return Ok(()),
            _ = shared.shutdown.cancelled() => return Ok(()),
        }
    }
}

/// Takes the replica's REPLCONF ACK lines out of the buffer.
fn read_acks(
    shared: &Shared,
    me: &Attached,
    parser: &mut RequestParser,
    rbuf: &mut BytesMut,
) -> std::io::Result<()> {
    loop {
        let req = match parser.parse(rbuf) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(std::io::Error::other(format!("replica: {e}"))),
        };
        let frame = rbuf.split_to(req.consumed).freeze();
        let args: Vec<Bytes> = match req.args {
            Args::Ranges(r) => r.iter().map(|r| frame.slice(r.clone())).collect(),
            Args::Owned(o) => o,
        };
        if args.len() >= 3
            && shared
                .table
                .get(&args[0])
                .is_some_and(|spec| spec.roles.contains(Roles::REPLICATION_LINK))
            && args[1].eq_ignore_ascii_case(b"ack")
            && let Some(off) = crate::num::parse_i64(&args[2])
        {
            me.ack.fetch_max(off.max(0) as u64, Ordering::Relaxed);
            if let Ok(mut t) = me.ack_at.lock() {
                *t = Instant::now();
            }
            shared.repl.acked.notify_waiters();
        }
    }
    if rbuf.len() > 1024 * 1024 {
        return Err(std::io::Error::other("replica sent too much"));
    }
    Ok(())
}

/// Logs a replica dropped for its output limit (Redis's words).
fn over_limit(client: &ClientState) {
    tracing::warn!(
        "Client {} closed for overcoming of output buffer limits.",
        client.info.addr
    );
}

struct Detach<'a>(&'a Shared, u64);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        self.0.repl.detach(self.1);
        self.0
            .repl
            .refresh_good_replicas(self.0.live.min_replicas().1);
    }
}

/// WAIT's wait: until `want` replicas acknowledged `offset`, or `timeout_ms` (0: no
/// limit) passed; answers how many did.
pub(crate) async fn wait(
    shared: &Shared,
    client: &ClientState,
    (want, timeout_ms, offset): (u64, u64, u64),
) -> Reply {
    let deadline =
        (timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout_ms));
    loop {
        let notified = shared.repl.acked.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let n = shared.repl.acked_at_least(offset);
        if n as u64 >= want {
            return Reply::Int(n as i64);
        }
        let until = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = notified => {}
            _ = until => return Reply::Int(shared.repl.acked_at_least(offset) as i64),
            _ = client.info.kill.cancelled() => return Reply::Int(n as i64),
            _ = shared.shutdown.cancelled() => return Reply::Int(n as i64),
        }
    }
}
