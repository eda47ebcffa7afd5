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

use super::Attached;
use crate::client::ClientState;
use crate::protocol::{Args, Limits, Reply, RequestParser};
use crate::rdb::snapshot::{self, SaveOptions};
use crate::server::Shared;

/// The payload of a full resynchronization and the offset it stands for.
pub(crate) fn snapshot(shared: &Shared) -> (Vec<u8>, u64) {
    let config = shared.config();
    let opts = SaveOptions {
        redis_version: config.redis_version.clone(),
        ctime_s: shared.clock.now_ms() / 1000,
        used_mem: crate::alloc_stats::allocated() as u64,
        checksum: true,
        // Keys whose time has passed go too: the replica drops them on the master's DEL.
        now_ms: 0,
    };
    drop(config);
    let functions: Vec<Bytes> = shared
        .scripts
        .function_libraries()
        .into_iter()
        .map(|lib| lib.code.clone())
        .collect();
    // Every shard is copied in one hold and the offset read in it: no write falls between
    // the payload and the offset. The copy is serialized after the locks are released.
    let mut store = shared.keyspace.lock_all();
    let copies = snapshot::copy_locked(&mut store, 0);
    let offset = {
        let mut f = shared.repl.feed();
        f.reset_db();
        f.offset
    };
    drop(store);
    let mut payload = Vec::new();
    if let Err(e) = snapshot::write_copies(
        functions.iter().map(|c| &c[..]),
        &opts,
        &mut payload,
        copies,
    ) {
        // Writing into memory does not fail; keep the replica's load refusing a cut file.
        tracing::warn!("full resynchronization payload: {e}");
    }
    (payload, offset)
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
        let (payload, at) = snapshot(shared);
        let id = shared.repl.feed().replid.clone();
        let mut head = String::new();
        if !legacy {
            head.push_str(&format!("+FULLRESYNC {id} {at}\r\n"));
        }
        head.push_str(&format!("${}\r\n", payload.len()));
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&payload).await?;
        sent = at;
        tracing::info!(
            "Synchronization with replica {} succeeded ({} bytes)",
            client.info.addr,
            payload.len()
        );
    }
    stream.flush().await?;
    let config = shared.config();
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
    client
        .info
        .kind
        .store(crate::client::KIND_REPLICA, Ordering::Relaxed);
    let _detach = Detach(shared, client.info.id);
    let mut grown = shared.repl.grown.subscribe();
    let mut parser = RequestParser::new(Limits::default());
    let mut rbuf = BytesMut::with_capacity(1024);
    let timeout = Duration::from_secs(config.repl.timeout.max(1));
    loop {
        let pending = shared.repl.feed().since(sent);
        let Some(bytes) = pending else {
            tracing::warn!(
                "closing replica {}: it fell behind the replication backlog",
                client.info.addr
            );
            return Ok(());
        };
        if !bytes.is_empty() {
            let write = stream.write_all(&bytes);
            tokio::select! {
                r = tokio::time::timeout(timeout, write) => match r {
                    Ok(r) => r?,
                    Err(_) => return Ok(()),
                },
                _ = client.info.kill.cancelled() => return Ok(()),
                _ = shared.shutdown.cancelled() => return Ok(()),
            }
            stream.flush().await?;
            sent += bytes.len() as u64;
            shared
                .stats
                .net_output_bytes
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            continue;
        }
        tokio::select! {
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
            && args[0].eq_ignore_ascii_case(b"replconf")
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

struct Detach<'a>(&'a Shared, u64);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        self.0.repl.detach(self.1);
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
