//! One client connection: read a batch, parse every complete request in it, run them, and
//! write all their replies with one write.
//!
//! Buffering policy: requests are parsed straight out of the read buffer (arguments are
//! slices of it, frozen per request); replies accumulate in one output buffer that is written
//! when the batch is done or when it passes `FLUSH_AT`, so a pipeline of N commands costs one
//! write, not N. While the output is being written nothing more is read from this client,
//! which is the back-pressure that keeps a client that never reads from growing our memory.
//! A protocol error gets Redis's reply and closes the connection, as Redis does.
//!
//! A client that sends but does not read therefore stalls only itself: its replies wait in
//! the output buffer (at most `FLUSH_AT` plus one reply) and its requests wait in the kernel.
//! It is disconnected when Redis would: its output buffer passes the hard limit of
//! `client-output-buffer-limit normal`, stays above the soft limit for the soft time, or a
//! write makes no progress for `timeout` seconds (Redis's idle timeout counts writes as
//! activity too). CLIENT KILL interrupts a stalled write.
//!
//! The output buffer of a connection, for those limits, is the replies the client has not
//! taken yet: what sluice holds unwritten plus what sits unsent in the kernel's send queue
//! (Linux reports it). Redis keeps all of it in its own memory; sluice leaves most of it in
//! the kernel and stops reading, but the client that is not reading is the same one, so the
//! same limits pick it out. It is checked whenever replies are written, as Redis checks when
//! it adds replies.
//!
//! The stream is anything byte-shaped (`Transport`): a TCP socket (on epoll, or served
//! through io_uring by `uring`), a TLS session over one, or a Unix socket.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::client::ClientState;
use crate::engine::{Next, Ran};
use crate::protocol::batch::Batch;
use crate::protocol::{Limits, RequestParser};
use crate::server::Shared;
use crate::{commands, engine, services};

/// The read buffer's size (it grows for a longer request).
const READ_BUF: usize = 16 * 1024;

/// Write the output early once it holds this much.
const FLUSH_AT: usize = 64 * 1024;

/// A client's byte stream: TCP (a tokio socket, or `uring::UringStream`), TLS over TCP, or a
/// Unix socket.
pub trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// Bytes already written to the socket that the peer has not taken yet (the kernel's
    /// send queue); 0 where the platform does not say.
    fn unsent_bytes(&self) -> usize {
        0
    }
}

impl Transport for TcpStream {
    fn unsent_bytes(&self) -> usize {
        kernel_unsent(self)
    }
}

impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    fn unsent_bytes(&self) -> usize {
        kernel_unsent(self.get_ref().0)
    }
}

impl Transport for tokio::net::UnixStream {
    fn unsent_bytes(&self) -> usize {
        kernel_unsent(self)
    }
}

#[cfg(target_os = "linux")]
impl Transport for super::uring::UringStream {
    fn unsent_bytes(&self) -> usize {
        self.unsent()
    }
}

#[cfg(target_os = "linux")]
pub(super) fn kernel_unsent(stream: &impl std::os::fd::AsRawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) on a socket we own writes one int.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 { n.max(0) as usize } else { 0 }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn kernel_unsent<S>(_: &S) -> usize {
    0
}

/// Serves one connection until it closes, is killed, or the server shuts down.
pub async fn serve<S: Transport>(shared: Arc<Shared>, stream: S, addr: String, laddr: String) {
    let conn = Registered::new(&shared, addr, laddr);
    let buffers = Buffers::new(&shared, &conn.client);
    resume(conn, stream, buffers, Resume::Read).await;
}

/// Serves a connection that was registered (and maybe served for a while) elsewhere: the
/// event loop of `server::eventloop` hands a connection over here, with everything it had
/// read and not answered yet, when it needs something only this code does (a wait, a
/// stalled write, a push feed). `resume` says where in the request cycle it stopped.
pub(super) async fn resume<S: Transport>(
    mut conn: Registered,
    stream: S,
    buffers: Buffers,
    resume: Resume,
) {
    let shared = conn.shared.clone();
    let span = tracing::debug_span!("conn", id = conn.client.id(), peer = %conn.client.info.addr);
    let _enter = span.enter();
    tracing::debug!("serving");
    let outcome = run(&shared, stream, &mut conn.client, buffers, resume).await;
    if let Err(e) = outcome {
        tracing::debug!("connection ended: {e}");
    }
    if !conn.client.watched.is_empty() {
        commands::scripting::wait_idle(&shared, &conn.client.watched).await;
    }
    drop(conn);
    tracing::debug!("disconnected");
}

/// A connection's entries in shared state (its registry entry and WATCHes), released when
/// this is dropped: at the end of `serve`, and equally when the task panics or is dropped
/// mid-await (tokio drops a task's future in both cases). The MONITOR slot is a guard of its
/// own; the maxclients slot is `server::Admitted`.
pub(super) struct Registered {
    shared: Arc<Shared>,
    pub(super) client: ClientState,
}

impl Registered {
    /// Registers a new connection (CLIENT LIST, CLIENT KILL, INFO clients see it from now on).
    pub(super) fn new(shared: &Arc<Shared>, addr: String, laddr: String) -> Registered {
        let info = shared.clients.register(addr, laddr);
        tracing::debug!(id = info.id, "connected");
        let mut client = ClientState::new(info);
        client.authenticated = shared.acl.default_nopass();
        Registered {
            shared: shared.clone(),
            client,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let id = self.client.id();
        let watched = std::mem::take(&mut self.client.watched);
        if !watched.is_empty() {
            let script_holds_shards = commands::scripting::script_running(&self.shared);
            match tokio::runtime::Handle::try_current() {
                // A script may hold the watched keys' shards: unwatch once it no longer
                // does, without blocking here.
                Ok(rt) if script_holds_shards => {
                    let shared = self.shared.clone();
                    rt.spawn(async move {
                        commands::scripting::wait_idle(&shared, &watched).await;
                        engine::txn::unwatch_keys(&shared, id, watched);
                    });
                }
                _ => engine::txn::unwatch_keys(&self.shared, id, watched),
            }
        }
        self.shared.pubsub.drop_client(&mut self.client);
        if self.client.tracking {
            self.shared.keyspace.tracking().disable(&self.client.info);
        }
        self.shared.clients.unregister(id);
    }
}

/// The parser's limits for a client authenticated or not, with `proto-max-bulk-len` as it
/// is now (CONFIG SET reaches open connections: Redis reads it on every parse).
#[inline]
pub(super) fn limits(shared: &Shared, authenticated: bool) -> Limits {
    Limits {
        max_bulk_len: shared.live.proto_max_bulk_len(),
        unauthenticated: !authenticated,
        ..Limits::default()
    }
}

/// Gives `parser` the limits [`limits`] says, if they changed: true if they did.
#[inline]
pub(super) fn refresh_limits(
    shared: &Shared,
    parser: &mut RequestParser,
    authenticated: bool,
) -> bool {
    let wanted = limits(shared, authenticated);
    let changed = parser.limits() != wanted;
    if changed {
        parser.set_limits(wanted);
    }
    changed
}

/// A connection's parser and buffers, which move with it from one serving loop to another.
pub(super) struct Buffers {
    pub(super) parser: RequestParser,
    pub(super) rbuf: BytesMut,
    /// The read buffer's twin (see `make_room`).
    pub(super) spare_rbuf: BytesMut,
    /// Whether `spare_rbuf` holds an allocation (from the first `make_room` that swapped).
    pub(super) spare_held: bool,
    pub(super) wbuf: BytesMut,
    /// The current request's arguments (slices of the read buffer); the vector is reused.
    pub(super) args: Vec<Bytes>,
    /// The event loop's requests parsed ahead (`protocol::batch`); the tokio code does not
    /// use it (a connection is handed over with nothing listed).
    pub(super) batch: Batch,
}

impl Buffers {
    pub(super) fn new(shared: &Shared, client: &ClientState) -> Buffers {
        Buffers {
            parser: RequestParser::new(limits(shared, client.authenticated)),
            rbuf: BytesMut::with_capacity(READ_BUF),
            spare_rbuf: BytesMut::new(),
            spare_held: false,
            wbuf: BytesMut::with_capacity(16 * 1024),
            args: Vec::new(),
            batch: Batch::new(),
        }
    }

    /// After a batch: see [`release_large`].
    pub(super) fn release_large(&mut self, large: bool) {
        release_large(
            large,
            &mut self.rbuf,
            &mut self.spare_rbuf,
            &mut self.spare_held,
            &mut self.args,
        );
        self.batch.release_large();
        self.parser.release_large();
    }

    /// What the buffers hold allocated, for CLIENT LIST's tot-mem and INFO's
    /// mem_clients_normal: a read buffer's `capacity()` counts only from its current
    /// start, so an allocation is counted at no less than the size it was made with.
    pub(super) fn memory(&self) -> usize {
        let spare_mem = if self.spare_held {
            READ_BUF.max(self.spare_rbuf.capacity())
        } else {
            0
        };
        READ_BUF.max(self.rbuf.capacity()) + spare_mem + self.wbuf.capacity()
    }

    /// Makes room in a read buffer that is short of it (see `make_room`), after taking an
    /// empty one back to its start (see `rewind`).
    pub(super) fn make_room(&mut self) {
        rewind(&mut self.rbuf);
        if short_of_room(&self.rbuf) {
            self.spare_held |= make_room(&mut self.rbuf, &mut self.spare_rbuf);
        }
    }
}

/// Where a connection handed over to `run` stopped in its request cycle.
pub(super) enum Resume {
    /// Between requests: run what is buffered, then read (an event loop hands a request
    /// it did not run over this way, still in the buffer: it is parsed again here).
    Read,
    /// The request ran and this is its reply, not yet written, with what comes next: what
    /// this code handles (a blocked command's wait, PSYNC, WAIT, a hold, MONITOR, a
    /// subscription).
    After(Ran),
}

async fn run<S: Transport>(
    shared: &Shared,
    mut stream: S,
    client: &mut ClientState,
    buffers: Buffers,
    resume: Resume,
) -> std::io::Result<()> {
    let config = shared.config();
    let Buffers {
        mut parser,
        mut rbuf,
        mut spare_rbuf,
        mut spare_held,
        mut wbuf,
        mut args,
        batch: _,
    } = buffers;
    let query_limit = config.client_query_buffer_limit;
    let info = client.info.clone();
    // Since when the output buffer has been over the soft limit.
    let mut soft = None;
    // Whether the batch had a request of LARGE_REQUEST bytes or more.
    let mut large = false;
    let mut resume = Some(resume);
    // CLIENT KILL and shutdown (which kills every client) end a read that waits. Kept for
    // the whole connection, so that it registers this task's waker once, not per request.
    let killed = info.kill.watch();
    tokio::pin!(killed);

    loop {
        // Run every complete request already buffered.
        loop {
            let ran = match resume.take() {
                Some(Resume::After(ran)) => ran,
                _ => {
                    // A CONFIG SET of proto-max-bulk-len (by any client) or an AUTH applies
                    // from the next request on.
                    refresh_limits(shared, &mut parser, client.authenticated);
                    let req = match parser.parse(&rbuf) {
                        Ok(Some(req)) => req,
                        Ok(None) => break,
                        Err(e) => {
                            protocol_error(shared, &mut wbuf, &e);
                            write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                            return Ok(());
                        }
                    };
                    large |= req.consumed >= LARGE_REQUEST;
                    let frame = rbuf.split_to(req.consumed).freeze();
                    // Redis's qbuf: the unprocessed input, this command included.
                    info.qbuf
                        .store(req.consumed + rbuf.len(), Ordering::Relaxed);
                    // The argument vectors (ours and the parser's) are reused from
                    // request to request.
                    parser.fill_args(req.args, frame, &mut args);
                    if args.is_empty() {
                        continue;
                    }
                    // CLIENT PAUSE: the one place a paused command waits (see services::pause).
                    if shared.pause.is_set()
                        && !services::pause::gate(
                            shared,
                            client,
                            &crate::engine::args::borrowed(&args),
                        )
                        .await
                    {
                        return Ok(());
                    }
                    // While a script runs it holds shards: wait without blocking this thread,
                    // or answer -BUSY past the threshold, if the command needs one (see
                    // commands::scripting).
                    let mut gated = if commands::scripting::script_running(shared) {
                        commands::scripting::busy_gate(
                            shared,
                            client,
                            &crate::engine::args::borrowed(&args),
                        )
                        .await
                    } else {
                        None
                    };
                    loop {
                        if let Some(reply) = gated.take() {
                            break Ran::reply(reply);
                        }
                        // The pause read again inside a turn, so that a pause beginning
                        // now waits for this command to end (see services::quiesce).
                        let ran = {
                            let _turn = services::quiesce::enter();
                            let argv = crate::engine::args::borrowed(&args);
                            (!shared.pause.is_set()
                                || services::pause::passes(shared, client, &argv))
                            .then(|| engine::execute_may_block(shared, client, &argv))
                        };
                        let Some(ran) = ran else {
                            if !services::pause::gate(
                                shared,
                                client,
                                &crate::engine::args::borrowed(&args),
                            )
                            .await
                            {
                                return Ok(());
                            }
                            continue;
                        };
                        // A script took a shard this command needs after it passed the
                        // gate: through the gate again (see `engine::call`).
                        if matches!(ran.next, Next::Regate) {
                            gated = commands::scripting::busy_gate(
                                shared,
                                client,
                                &crate::engine::args::borrowed(&args),
                            )
                            .await;
                            continue;
                        }
                        break ran;
                    }
                }
            };
            let Ran {
                reply,
                next,
                hold,
                disconnect,
            } = ran;
            // A blocking command that blocked: its reply is the waiter's.
            let (reply, next) = match next {
                Next::Block(waiter) => {
                    let waited = wait_for(
                        shared,
                        &mut stream,
                        &mut rbuf,
                        &mut wbuf,
                        client,
                        &mut soft,
                        waiter,
                        query_limit,
                    )
                    .await?;
                    match waited {
                        Some(reply) => (reply, Next::Continue),
                        None => return Ok(()),
                    }
                }
                next => (reply, next),
            };
            let reply = match next {
                // PSYNC/SYNC: this connection becomes a replica's feed (see repl::master).
                Next::Replicate { replid, offset } => {
                    write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                    return crate::repl::master::serve(shared, stream, client, (replid, offset))
                        .await;
                }
                // WAIT that must wait for acknowledgements: flush, then wait (no lock held).
                Next::WaitAcks {
                    replicas,
                    timeout_ms,
                    offset,
                } => {
                    write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                    crate::repl::master::wait(shared, client, (replicas, timeout_ms, offset)).await
                }
                Next::CloseWithoutReply => return Ok(()),
                _ => reply,
            };
            if !hold.is_zero() {
                write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                tokio::time::sleep(hold).await;
            }
            // Pushes this command caused for this client (its subscription confirmations, a
            // message it published to itself) go before its reply, as in Redis.
            if let Some(q) = client.push_queue() {
                q.take_into(&mut wbuf);
            }
            if !client.reply_suppressed() {
                reply.encode(client.resp, &mut wbuf);
            }
            // A tracking client's own invalidations come after the reply (client::tracking),
            // in the same write: a client that reads the reply and then checks its socket
            // for invalidations before answering from its cache (redis-py 8) must find them
            // there, as Redis appends them to the reply's output buffer.
            if client.tracking
                && let Some(q) = client.push_queue()
            {
                q.release_held();
                q.take_into(&mut wbuf);
            }
            // Its vectors go back to this thread's pool for the next reply (protocol::reply).
            reply.recycle();
            if disconnect {
                write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                return Ok(());
            }
            match next {
                Next::Monitor => {
                    // Joined before the +OK goes out, as in Redis: every command run after
                    // the client sees the reply is in its feed.
                    let slot = shared.monitors.join();
                    write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                    return monitor(shared, stream, client, slot).await;
                }
                Next::Close => {
                    write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
                    return Ok(());
                }
                _ => {}
            }
            if wbuf.len() >= FLUSH_AT {
                write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
            }
        }
        // Release the last request's slices of the read buffer, so that the next read can
        // reuse its memory instead of allocating a new one.
        args.clear();
        release_large(
            std::mem::take(&mut large),
            &mut rbuf,
            &mut spare_rbuf,
            &mut spare_held,
            &mut args,
        );
        write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
        // Messages published meanwhile, until none is left (each write may take a while).
        let queue = client.push_queue().cloned();
        if let Some(q) = &queue {
            while q.take_into(&mut wbuf) > 0 {
                write_out(shared, &mut stream, &mut wbuf, client, &mut soft).await?;
            }
            if q.dropped.is_cancelled() {
                return Ok(());
            }
        }
        info.qbuf.store(rbuf.len(), Ordering::Relaxed);
        // Redis frees a command's arguments once it has run: an idle client shows none.
        info.argv_mem.store(0, Ordering::Relaxed);
        // What the buffers hold allocated, for CLIENT LIST's tot-mem and INFO's
        // mem_clients_normal: a read buffer's `capacity()` counts only from its current
        // start, so an allocation is counted at no less than the size it was made with.
        let spare_mem = if spare_held {
            READ_BUF.max(spare_rbuf.capacity())
        } else {
            0
        };
        info.buf_mem.store(
            READ_BUF.max(rbuf.capacity()) + spare_mem + wbuf.capacity(),
            Ordering::Relaxed,
        );
        if rbuf.len() > query_limit {
            tracing::warn!(
                "closing client {}: query buffer over client-query-buffer-limit",
                info.id
            );
            return Ok(());
        }
        if info.kill.is_ending() {
            return Ok(());
        }

        rewind(&mut rbuf);
        if short_of_room(&rbuf) {
            spare_held |= make_room(&mut rbuf, &mut spare_rbuf);
        }
        // Read per batch, so CONFIG SET timeout reaches connected clients too, as in Redis.
        // Subscribed clients are not subject to the idle timeout (as in Redis).
        let idle_timeout = match shared.live.timeout() {
            _ if client.subscribed() => None,
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        };
        let read = async {
            match idle_timeout {
                Some(t) => tokio::time::timeout(t, stream.read_buf(&mut rbuf))
                    .await
                    .ok(),
                None => Some(stream.read_buf(&mut rbuf).await),
            }
        };
        // Biased, the read first: when data is already there (a busy client), nothing else
        // is polled. A kill or a shutdown still ends a read that waits, and the check per
        // batch catches a client that never lets its reads wait.
        // A subscribed connection also wakes for messages to write.
        let pushed = async {
            match &queue {
                Some(q) => q.ready.notified().await,
                None => std::future::pending().await,
            }
        };
        let n = tokio::select! {
            biased;
            r = read => match r {
                Some(r) => r?,
                None => return Ok(()), // idle timeout
            },
            _ = pushed => continue,
            _ = &mut killed => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        // Like Redis, a client's last interaction is its last read, not each command.
        info.mark_active();
        shared.stats.net_input_bytes.add(n as u64);
    }
}

/// Whether the read buffer has less than half a buffer of room for the next read. Requests
/// are split off its front, which takes its capacity with them; reading into what is left
/// would split a client's pipelined batch across two reads (and its replies across two
/// sends) every few batches, where Redis reads into 16 KiB of room each time.
fn short_of_room(rbuf: &BytesMut) -> bool {
    rbuf.capacity() - rbuf.len() < READ_BUF / 2
}

/// Takes an empty read buffer back to the start of its allocation, so that the next read
/// lands where the last one did, as Redis reads every request of a client into the start
/// of its query buffer. Requests leave the buffer from its front, so without this each read
/// lands past the last, walking half the buffer (8 KiB) before `make_room` brings it back:
/// with 50 connections at pipeline 1 that is a cache line the kernel's copy and the parser
/// find cold on nearly every request, where Redis's is still warm. No copy (the buffer is
/// empty) and never an allocation; a buffer whose memory a MULTI queue still shares stays
/// where it is.
fn rewind(rbuf: &mut BytesMut) {
    if rbuf.is_empty() {
        // Asking for more than the capacity from the current start succeeds only by taking
        // back the room before it; without any, this is false and changes nothing.
        let _ = rbuf.try_reclaim(rbuf.capacity() + 1);
    }
}

/// Gives a read buffer short of room (`short_of_room`) room for the next read without
/// allocating. Requests are slices
/// of the read buffer, and a MULTI queue keeps its commands' slices until EXEC, which may
/// come in a later read: then the buffer's memory is still shared when it fills up, and
/// growing it would allocate a new one each time. Instead the connection keeps two buffers
/// and moves the unparsed tail of a short request to the other one, which the queue of an
/// earlier transaction has let go of by then. A long request grows its buffer as before.
/// True when it swapped (the spare then holds the old buffer).
fn make_room(rbuf: &mut BytesMut, spare: &mut BytesMut) -> bool {
    const SHORT_TAIL: usize = 4 * 1024;
    if rbuf.len() > SHORT_TAIL || rbuf.try_reclaim(READ_BUF / 2) {
        return false;
    }
    let mut next = std::mem::take(spare);
    next.clear();
    if !next.try_reclaim(READ_BUF / 2) {
        next = BytesMut::with_capacity(READ_BUF);
    }
    next.extend_from_slice(rbuf);
    rbuf.clear();
    *spare = std::mem::replace(rbuf, next);
    true
}

/// A request at least this long (bytes) marks its batch as large (Redis's
/// PROTO_RESIZE_THRESHOLD).
pub(super) const LARGE_REQUEST: usize = 32 * 1024;

/// Argument vectors with more room than this are not kept between requests.
const MAX_KEPT_ARGS: usize = 1024;

/// After a batch whose arguments were released: memory one large request left behind is
/// given back, as Redis frees a command's argv and resizes a large query buffer, so that
/// (for example) INFO's used_memory falls back once a huge SADD's set is deleted. The read
/// buffers are replaced only when a request of the batch was `large` and nothing unread is
/// left in them, so ordinary traffic keeps reusing its buffers without allocating.
fn release_large(
    large: bool,
    rbuf: &mut BytesMut,
    spare: &mut BytesMut,
    spare_held: &mut bool,
    args: &mut Vec<Bytes>,
) {
    if args.capacity() > MAX_KEPT_ARGS {
        *args = Vec::new();
    }
    if large && rbuf.is_empty() {
        *rbuf = BytesMut::with_capacity(READ_BUF);
        *spare = BytesMut::new();
        *spare_held = false;
    }
}

/// A protocol error: Redis's reply, counted as Redis counts every error reply (INFO
/// errorstats). The connection closes after writing it.
pub(super) fn protocol_error(
    shared: &Shared,
    wbuf: &mut BytesMut,
    e: &crate::protocol::ProtocolError,
) {
    let line = format!("ERR {e}");
    engine::call::count_error(shared, &line);
    wbuf.extend_from_slice(format!("-{line}\r\n").as_bytes());
}

/// A request blocked: flush what earlier requests answered, then wait for the waiter's
/// reply without holding any lock (see services::blocking). The guard forgets the waiter however
/// this ends, a failed flush too. None: close the connection.
#[allow(clippy::too_many_arguments)]
async fn wait_for<S: Transport>(
    shared: &Shared,
    stream: &mut S,
    rbuf: &mut BytesMut,
    wbuf: &mut BytesMut,
    client: &ClientState,
    soft: &mut Option<Instant>,
    waiter: Arc<services::blocking::Waiter>,
    query_limit: usize,
) -> std::io::Result<Option<crate::protocol::Reply>> {
    let guard = BlockGuard { shared, waiter };
    write_out(shared, stream, wbuf, client, soft).await?;
    wait_blocked(shared, stream, rbuf, client, &guard, query_limit).await
}

/// Forgets a blocked client's waiter however its wait ends (reply, close, kill, or the
/// task being dropped), so that a gone client is never served.
struct BlockGuard<'s> {
    shared: &'s Shared,
    waiter: Arc<services::blocking::Waiter>,
}

impl Drop for BlockGuard<'_> {
    fn drop(&mut self) {
        services::blocking::release(self.shared, &self.waiter);
    }
}

/// Waits for a blocked client's reply: served by a push, timed out on the server's clock
/// (a CLOCK ADVANCE wakes it to look again), or unblocked. Meanwhile the socket is read
/// (requests wait in the buffer, as in Redis) to notice a close. None: close the connection.
async fn wait_blocked<S: Transport>(
    shared: &Shared,
    stream: &mut S,
    rbuf: &mut BytesMut,
    client: &ClientState,
    guard: &BlockGuard<'_>,
    query_limit: usize,
) -> std::io::Result<Option<crate::protocol::Reply>> {
    let w = &guard.waiter;
    loop {
        let clock_moved = shared.clock.changed();
        if let Some(reply) = w.take_reply() {
            return Ok(Some(reply));
        }
        let wait = match w.deadline_ms() {
            None => Duration::from_secs(3600),
            Some(deadline) => {
                let now = shared.clock.now_ms();
                if now >= deadline {
                    w.time_out();
                    continue;
                }
                Duration::from_millis(deadline - now)
            }
        };
        tokio::select! {
            _ = w.changed() => {}
            _ = clock_moved => {}
            _ = tokio::time::sleep(wait) => {}
            r = stream.read_buf(rbuf) => {
                let n = r?;
                if n == 0 {
                    return Ok(None);
                }
                shared.stats.net_input_bytes.add(n as u64);
                client.info.qbuf.store(rbuf.len(), Ordering::Relaxed);
                if rbuf.len() > query_limit {
                    return Ok(None);
                }
            }
            _ = client.info.kill.cancelled() => return Ok(None),
            _ = shared.shutdown.cancelled() => return Ok(None),
        }
    }
}

/// Streams the MONITOR feed to this connection until it closes, is killed, or falls behind
/// past its output-buffer limits (see `services::monitor`).
async fn monitor<S: Transport>(
    shared: &Shared,
    mut stream: S,
    client: &ClientState,
    slot: services::monitor::MonitorSlot<'_>,
) -> std::io::Result<()> {
    let queue = &slot.queue;
    let mut scratch = [0u8; 512];
    let mut over_soft_since: Option<Instant> = None;
    loop {
        if queue.overflowed() {
            tracing::warn!(
                "closing client {}: MONITOR output over the output-buffer limit",
                client.info.id
            );
            return Err(closed("monitor output over the limit"));
        }
        let limit = shared.live.output_buffer_limit();
        if limit.soft > 0 && limit.soft_seconds > 0 && queue.pending() > limit.soft {
            let since = *over_soft_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(limit.soft_seconds) {
                return Err(closed("monitor output over the soft limit for too long"));
            }
        } else {
            over_soft_since = None;
        }
        let lines = queue.take();
        if lines.is_empty() {
            tokio::select! {
                _ = queue.ready.notified() => {}
                n = stream.read(&mut scratch) => if n? == 0 { return Ok(()) },
                _ = client.info.kill.cancelled() => return Ok(()),
                _ = shared.shutdown.cancelled() => return Ok(()),
                // Re-checks the soft limit while the client is stalled.
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            continue;
        }
        let n: usize = lines.iter().map(Bytes::len).sum();
        let write = async {
            for line in &lines {
                stream.write_all(line).await?;
            }
            stream.flush().await
        };
        tokio::select! {
            r = write => r?,
            // The queue overflowing while this write is stuck ends the connection.
            _ = async { while !queue.overflowed() { queue.ready.notified().await } } => {}
            _ = client.info.kill.cancelled() => return Ok(()),
            _ = shared.shutdown.cancelled() => return Ok(()),
        }
        queue.written(n);
        shared.stats.net_output_bytes.add(n as u64);
    }
}

/// Why a connection was closed while writing.
fn closed(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, why.to_string())
}

/// Writes (and flushes) the whole output buffer, within the connection's output limits (see
/// the module docs). Nothing is read meanwhile: that is the back-pressure.
///
/// `over_soft_since` is the connection's soft-limit clock: set when the output buffer goes over
/// the soft limit, cleared when it is back under.
///
/// A write that completes at once (the usual case: the socket has room) costs the write
/// alone: the clock is read, and the kill and the deadlines are waited on, only once a
/// write has to wait.
async fn write_out<S: Transport>(
    shared: &Shared,
    stream: &mut S,
    wbuf: &mut BytesMut,
    client: &ClientState,
    over_soft_since: &mut Option<Instant>,
) -> std::io::Result<()> {
    if wbuf.is_empty() {
        return Ok(());
    }
    // What the replies acknowledge reaches the append-only file (and, with `appendfsync
    // always`, the disk) before they leave. Before a sync, the runtime's other ready
    // connections run their commands first (one yield), so one sync covers them all, as
    // Redis's one per event-loop turn does: without it, clients on one worker (every client
    // that ever ran WAIT, or a blocking command) each waited for a sync of their own.
    if shared.repl.aof.sync_due() {
        tokio::task::yield_now().await;
    }
    shared.repl.aof.before_reply();
    // A subscribed client is held to the pubsub class, counting its queued messages too.
    let queue = client.subscribed().then(|| client.push_queue()).flatten();
    let limit = match queue {
        Some(_) => shared.live.pubsub_buffer_limit(),
        None => shared.live.output_buffer_limit(),
    };
    let kill = &client.info.kill;
    let mut written = 0;
    loop {
        let pending = wbuf.len() - written;
        let queued = queue.map_or(0, |q| q.pending());
        let buffered = if limit.hard > 0 || limit.soft > 0 {
            pending + queued + stream.unsent_bytes()
        } else {
            pending
        };
        if limit.hard > 0 && buffered > limit.hard {
            tracing::warn!(
                "closing client {}: output buffer over the hard client-output-buffer-limit",
                client.info.id
            );
            return Err(closed("output buffer over the hard limit"));
        }
        // Since when the buffer is over the soft limit, if it must drain by a deadline.
        let mut soft_since = None;
        if limit.soft > 0 && limit.soft_seconds > 0 && buffered > limit.soft {
            soft_since = Some(*over_soft_since.get_or_insert_with(Instant::now));
        } else {
            *over_soft_since = None;
        }
        // What ends a write that waits: built, and the clock read, only if it does. The
        // idle timeout counts from the last progress: the write that waits starts right
        // after the previous one returned, so the moment it is found waiting stands for it.
        let stalled = async {
            let idle = shared.live.timeout();
            let since = Instant::now();
            // The earliest moment the stalled write gives up, if any. Checked: a deadline
            // too far away to represent is no deadline.
            let mut deadline =
                soft_since.and_then(|s| s.checked_add(Duration::from_secs(limit.soft_seconds)));
            if idle > 0
                && let Some(d) = since.checked_add(Duration::from_secs(idle))
            {
                deadline = Some(deadline.map_or(d, |x| x.min(d)));
            }
            let expired = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let dropped = async {
                match queue {
                    Some(q) => q.dropped.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = expired => {
                    tracing::warn!(
                        "closing client {}: output not drained within the output-buffer or idle limits",
                        client.info.id
                    );
                    closed("output not drained in time")
                }
                _ = dropped => {
                    tracing::warn!(
                        "closing client {}: pub/sub output over client-output-buffer-limit pubsub",
                        client.info.id
                    );
                    closed("pub/sub output over the limit")
                }
                _ = kill.watch_killed() => closed("killed"),
            }
        };
        // First without waiting: the usual case, and then nothing else is built or moved.
        let at_once = std::future::poll_fn(|cx| {
            let io = std::pin::Pin::new(&mut *stream);
            let polled = if pending == 0 {
                io.poll_flush(cx).map_ok(|()| 0)
            } else {
                io.poll_write(cx, &wbuf[written..])
            };
            std::task::Poll::Ready(match polled {
                std::task::Poll::Ready(r) => Some(r),
                std::task::Poll::Pending => None,
            })
        })
        .await;
        let n = match at_once {
            Some(r) => r?,
            // Biased: the write (or flush) first, the rest only while it waits.
            None if pending == 0 => tokio::select! {
                biased;
                r = stream.flush() => { r?; 0 }
                e = stalled => return Err(e),
            },
            None => tokio::select! {
                biased;
                r = stream.write(&wbuf[written..]) => r?,
                e = stalled => return Err(e),
            },
        };
        if pending == 0 {
            break;
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    shared.stats.net_output_bytes.add(wbuf.len() as u64);
    wbuf.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;

    #[test]
    fn an_emptied_read_buffer_reads_into_its_start_again() {
        let mut rbuf = BytesMut::with_capacity(READ_BUF);
        let start = rbuf.as_ptr();
        rbuf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        rbuf.advance(rbuf.len());
        assert_ne!(rbuf.as_ptr(), start);
        rewind(&mut rbuf);
        assert_eq!(rbuf.as_ptr(), start);
        assert_eq!(rbuf.capacity(), READ_BUF);
        // Already at its start: nothing to do, nothing allocated.
        rewind(&mut rbuf);
        assert_eq!((rbuf.as_ptr(), rbuf.capacity()), (start, READ_BUF));
    }

    #[test]
    fn a_buffer_with_unread_bytes_or_shared_memory_stays_where_it_is() {
        const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
        let mut rbuf = BytesMut::with_capacity(READ_BUF);
        let start = rbuf.as_ptr();
        rbuf.extend_from_slice(PING);
        rbuf.extend_from_slice(PING);
        rbuf.advance(PING.len());
        let at = (rbuf.as_ptr(), rbuf.capacity());
        rewind(&mut rbuf);
        assert_eq!((rbuf.as_ptr(), rbuf.capacity()), at);
        // A request split off and kept (as a MULTI queue keeps one): the memory is shared,
        // so it is neither overwritten nor replaced.
        let kept = rbuf.split_to(PING.len()).freeze();
        assert!(rbuf.is_empty());
        let at_empty = (rbuf.as_ptr(), rbuf.capacity());
        rewind(&mut rbuf);
        assert_eq!((rbuf.as_ptr(), rbuf.capacity()), at_empty);
        assert_eq!(&kept[..], PING);
        // Once the queue lets go, the buffer is taken back to the start of its allocation.
        drop(kept);
        rewind(&mut rbuf);
        assert_eq!((rbuf.as_ptr(), rbuf.capacity()), (start, READ_BUF));
    }
}
