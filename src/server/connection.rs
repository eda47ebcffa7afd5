//! One client connection: read a batch, parse every complete request in it, run them, and
//! write all their replies with one write.
//!
//! Buffering policy: requests are parsed straight out of the read buffer (arguments are
//! slices of it, frozen per request); replies accumulate in one output buffer that is written
//! when the batch is done or when it passes `FLUSH_AT`, so a pipeline of N commands costs one
//! write, not N. While the output is being written nothing more is read from this client,
//! which is the back-pressure that keeps a client that never reads from growing our memory.
//! A protocol error gets Redis's reply and closes the connection, as Redis does.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client::ClientState;
use crate::cmd::{self, Shared};
use crate::protocol::{Args, Limits, RequestParser};

/// Write the output early once it holds this much.
const FLUSH_AT: usize = 64 * 1024;

/// Serves one connection until it closes, is killed, or the server shuts down.
pub async fn serve(shared: Arc<Shared>, stream: TcpStream, addr: String, laddr: String) {
    let _ = stream.set_nodelay(true);
    let info = shared.clients.register(addr.clone(), laddr);
    let span = tracing::debug_span!("conn", id = info.id, peer = %addr);
    let _enter = span.enter();
    tracing::debug!("connected");
    let mut client = ClientState::new(info.clone());
    let outcome = run(&shared, stream, &mut client).await;
    if let Err(e) = outcome {
        tracing::debug!("connection ended: {e}");
    }
    cmd::txn::unwatch_client(&shared, &mut client);
    shared.clients.unregister(info.id);
    tracing::debug!("disconnected");
}

async fn run(
    shared: &Shared,
    mut stream: TcpStream,
    client: &mut ClientState,
) -> std::io::Result<()> {
    let config = shared.config();
    client.authenticated = config.requirepass.is_none();
    let limits = |authenticated: bool| Limits {
        max_bulk_len: config.proto_max_bulk_len,
        unauthenticated: !authenticated,
        ..Limits::default()
    };
    let mut parser = RequestParser::new(limits(client.authenticated));
    let query_limit = config.client_query_buffer_limit;
    let idle_timeout = (config.timeout > 0).then(|| Duration::from_secs(config.timeout));
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut wbuf = BytesMut::with_capacity(16 * 1024);
    let info = client.info.clone();

    loop {
        // Run every complete request already buffered.
        loop {
            let req = match parser.parse(&rbuf) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => {
                    wbuf.extend_from_slice(format!("-ERR {e}\r\n").as_bytes());
                    write_out(shared, &mut stream, &mut wbuf).await?;
                    return Ok(());
                }
            };
            let frame = rbuf.split_to(req.consumed).freeze();
            let args: Vec<Bytes> = match req.args {
                Args::Ranges(ranges) => ranges.into_iter().map(|r| frame.slice(r)).collect(),
                Args::Owned(args) => args,
            };
            if args.is_empty() {
                continue;
            }
            let was_authenticated = client.authenticated;
            let reply = cmd::execute(shared, client, &args);
            if client.authenticated != was_authenticated {
                parser.set_limits(limits(client.authenticated));
            }
            if client.no_reply {
                return Ok(());
            }
            if let Some(pause) = client.sleep.take() {
                write_out(shared, &mut stream, &mut wbuf).await?;
                tokio::time::sleep(pause).await;
            }
            reply.encode(client.resp, &mut wbuf);
            if let Some(n) = client.disconnect_after {
                if n <= 1 {
                    write_out(shared, &mut stream, &mut wbuf).await?;
                    return Ok(());
                }
                client.disconnect_after = Some(n - 1);
            }
            if client.monitor {
                write_out(shared, &mut stream, &mut wbuf).await?;
                return monitor(shared, stream, client).await;
            }
            if client.close_after_reply {
                write_out(shared, &mut stream, &mut wbuf).await?;
                return Ok(());
            }
            if wbuf.len() >= FLUSH_AT {
                write_out(shared, &mut stream, &mut wbuf).await?;
            }
        }
        write_out(shared, &mut stream, &mut wbuf).await?;
        info.qbuf.store(rbuf.len(), Ordering::Relaxed);
        if rbuf.len() > query_limit {
            tracing::warn!(
                "closing client {}: query buffer over client-query-buffer-limit",
                info.id
            );
            return Ok(());
        }
        if shared.shutdown.is_cancelled() {
            return Ok(());
        }

        let read = async {
            match idle_timeout {
                Some(t) => tokio::time::timeout(t, stream.read_buf(&mut rbuf))
                    .await
                    .ok(),
                None => Some(stream.read_buf(&mut rbuf).await),
            }
        };
        let n = tokio::select! {
            r = read => match r {
                Some(r) => r?,
                None => return Ok(()), // idle timeout
            },
            _ = info.kill.cancelled() => return Ok(()),
            _ = shared.shutdown.cancelled() => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        shared
            .stats
            .net_input_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Streams the MONITOR feed to this connection until it closes.
async fn monitor(
    shared: &Shared,
    mut stream: TcpStream,
    client: &ClientState,
) -> std::io::Result<()> {
    let mut feed = shared.monitors.join();
    let result = async {
        let mut scratch = [0u8; 512];
        loop {
            tokio::select! {
                line = feed.recv() => match line {
                    Ok(line) => stream.write_all(&line).await?,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return Ok(()),
                },
                n = stream.read(&mut scratch) => if n? == 0 { return Ok(()) },
                _ = client.info.kill.cancelled() => return Ok(()),
                _ = shared.shutdown.cancelled() => return Ok(()),
            }
        }
    }
    .await;
    shared.monitors.leave();
    result
}

async fn write_out(
    shared: &Shared,
    stream: &mut TcpStream,
    wbuf: &mut BytesMut,
) -> std::io::Result<()> {
    if wbuf.is_empty() {
        return Ok(());
    }
    stream.write_all(wbuf).await?;
    shared
        .stats
        .net_output_bytes
        .fetch_add(wbuf.len() as u64, Ordering::Relaxed);
    wbuf.clear();
    Ok(())
}
