//! One connection on a loop: what a turn does for it. Read what its socket has (one
//! `recv`), then (once every ready connection has been read) run every complete request in
//! it inline, encode the replies into its output buffer, and (in the turn's write pass)
//! write them with one `send`; or say why the connection leaves the loop (closed, or handed
//! over to the tokio connection code).

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use bytes::{Buf, BytesMut};
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::stream::Stream;
use crate::engine::{Next, Ran};
use crate::protocol::batch::{ARGV_INLINE, Stop, Taken};
use crate::server::Admitted;
use crate::server::Shared;
use crate::server::connection::{self, Buffers, Registered, Resume};
use crate::{commands, engine};

/// Write the output early once it holds this much (as the tokio path does).
const FLUSH_AT: usize = 64 * 1024;

/// One connection served by a loop.
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) reg: Registered,
    pub(super) buf: Buffers,
    pub(super) _slot: Admitted,
    pub(super) _track: TaskTrackerToken,
    /// The last read filled the buffer: the socket may hold more (edge-triggered).
    pub(super) more: bool,
    /// In this turn's ready list already.
    pub(super) queued: bool,
    /// Close once the output is written (kill, shutdown, query buffer over its limit).
    pub(super) close_after_write: bool,
    /// `client-query-buffer-limit`, read once per connection as the tokio path does (the
    /// configuration is cloned to be read: not something to do per batch).
    pub(super) query_limit: usize,
}

/// What serving a connection's input left to do.
pub(super) enum Served {
    /// Keep it; its replies (if any) are written in this turn's write pass.
    Keep,
    /// Close it now, without writing (QUIT-like ends flush first themselves).
    Close,
    /// Hand it over to tokio.
    HandOver(Resume),
}

/// What reading a connection's socket found.
pub(super) enum Received {
    /// Requests to run (read now, or left in the buffer by a connection moved here).
    Run,
    /// Nothing to run.
    Idle,
    /// The peer closed, the read failed, or the client is ending: close it now.
    Close,
}

/// Reads what the socket has and runs every complete request (see the module docs): a
/// turn's two halves, [`read`] and [`run`], on one connection.
#[cfg(test)]
pub(super) fn serve(shared: &Shared, conn: &mut Conn) -> Served {
    match read(shared, conn) {
        Received::Run => run(shared, conn),
        Received::Idle => Served::Keep,
        Received::Close => Served::Close,
    }
}

/// Reads what the socket has (one `recv`) into the read buffer.
pub(super) fn read(shared: &Shared, conn: &mut Conn) -> Received {
    let client = &mut conn.reg.client;
    let buf = &mut conn.buf;
    if client.info.kill.is_ending() {
        return Received::Close;
    }
    // Read once.
    buf.make_room();
    if buf.rbuf.capacity() == buf.rbuf.len() {
        buf.rbuf.reserve(64);
    }
    let spare = buf.rbuf.spare_capacity_mut();
    let room = spare.len();
    // SAFETY: recv writes at most `room` bytes into the buffer's spare capacity, which we
    // own; `set_len` below covers only what it wrote.
    // The system call itself, not libc's `recv`: that wrapper is a thread-cancellation
    // point and pays to enable and disable cancellation around every call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            conn.stream.as_raw_fd(),
            spare.as_mut_ptr(),
            room,
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    conn.more = false;
    if n == 0 {
        return Received::Close;
    }
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => {
                conn.more = e.kind() == std::io::ErrorKind::Interrupted;
                // Nothing new; requests left in the buffer (a connection moved here) run.
                if buf.rbuf.is_empty() {
                    Received::Idle
                } else {
                    Received::Run
                }
            }
            _ => Received::Close,
        };
    }
    let n = n as usize;
    // SAFETY: the first `n` bytes of the spare capacity were written by recv.
    unsafe { buf.rbuf.set_len(buf.rbuf.len() + n) };
    conn.more = n == room;
    // Like Redis, a client's last interaction is its last read, not each command.
    client.info.mark_active();
    shared.stats.net_input_bytes.add(n as u64);
    Received::Run
}

/// Runs every complete request [`read`] left in the buffer, encoding the replies into the
/// output buffer.
pub(super) fn run(shared: &Shared, conn: &mut Conn) -> Served {
    // Killed since its read (by a command of a connection served before it in this turn).
    if conn.reg.client.info.kill.is_ending() {
        return Served::Close;
    }
    // A pipelined batch's keys are prefetched and their hashes kept until it ends, before
    // anything is read into this buffer again (`store::prefetch`).
    let hashes = crate::store::prefetch::BatchHashes::begin();
    // The batch's commands share clock reads (see `clock::lap`); none is kept past it.
    crate::clock::batch_begin();
    let served = run_requests(shared, conn);
    crate::clock::batch_end();
    drop(hashes);
    if matches!(served, Served::Keep) {
        after_batch(conn);
    }
    served
}

/// Runs every complete request in the read buffer: the tokio path's inner loop, minus
/// what it hands over for. The requests that ran leave the buffer once, at the end
/// (`BytesMut::advance` per request was ~35 instructions of a pipelined request's path);
/// a request handed over unrun stays at the buffer's front, where the tokio path parses it
/// again.
fn run_requests(shared: &Shared, conn: &mut Conn) -> Served {
    let mut ran = 0;
    let served = run_from(shared, conn, &mut ran);
    if !matches!(served, Served::Keep) {
        // What was parsed ahead and did not run is parsed again by the tokio path, from
        // the buffer's front (or goes with the connection).
        conn.buf.batch.discard(&mut conn.buf.parser);
    }
    conn.buf.rbuf.advance(ran);
    served
}

/// [`run_requests`]'s loop: runs the requests from the front of the read buffer,
/// counting in `ran` the bytes of those that ran (or were skipped), which the buffer
/// still holds. The requests are parsed a batch at a time, in one pass
/// (`protocol::batch`), and the batch's keys prefetched from what that pass found.
fn run_from(shared: &Shared, conn: &mut Conn, ran: &mut usize) -> Served {
    let client = &mut conn.reg.client;
    let buf = &mut conn.buf;
    let mut large = false;
    let keyspace = &shared.keyspace;
    // Whether the requests after the one listed alone are listed in `buf.batch`.
    let mut listed = false;
    // Another client's CONFIG SET of proto-max-bulk-len, since this connection's last batch.
    connection::refresh_limits(shared, &mut buf.parser, client.authenticated);
    // The batch's policy state, read once: its lean commands skip `call`'s per-command
    // checks (`engine::call::plain`); a command that may change it has it read again.
    let mut plain = engine::call::plain(shared, client);
    loop {
        let taken = if !listed {
            // A batch's first request is listed alone (at pipeline 1 it is the batch):
            // the requests behind it are listed in one pass, and their keys gathered as
            // they are and prefetched before the first runs (see `prefetch`).
            buf.parser.forget_listed();
            let pending = buf.rbuf.get(*ran..).unwrap_or_default();
            let req = match buf.parser.list(pending) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => {
                    connection::protocol_error(shared, &mut buf.wbuf, &e);
                    let _ = write_now(shared, &conn.stream, &mut buf.wbuf);
                    return Served::Close;
                }
            };
            // An inline request's arguments wait in the parser: nothing is listed after it.
            if req.consumed < pending.len() && !req.is_inline() {
                listed = true;
                let mut keys = super::prefetch::Keys::new();
                buf.batch.fill(
                    &mut buf.parser,
                    &buf.rbuf,
                    *ran + req.consumed,
                    |frame, args| keys.add(keyspace, frame, args),
                );
                keys.prefetch(keyspace, client.db);
            }
            Taken::new(*ran, req)
        } else {
            let Some(req) = buf.batch.take() else {
                match buf.batch.stop() {
                    Stop::Incomplete => break,
                    Stop::Bound => {
                        buf.parser.forget_listed();
                        buf.batch.fill(&mut buf.parser, &buf.rbuf, *ran, |_, _| {});
                        continue;
                    }
                    Stop::Error(e) => {
                        // After the replies to the complete requests before it, as Redis.
                        connection::protocol_error(shared, &mut buf.wbuf, e);
                        let _ = write_now(shared, &conn.stream, &mut buf.wbuf);
                        return Served::Close;
                    }
                }
            };
            req
        };
        let (start, consumed) = (taken.start, taken.end - taken.start);
        // The arguments are borrowed from the read buffer while the command runs (no
        // reference count per argument); the request leaves the buffer after the batch.
        let mut stack: [&[u8]; ARGV_INLINE] = [&[][..]; ARGV_INLINE];
        let mut heap: Vec<&[u8]> = Vec::new();
        let argv = buf.batch.slices(
            taken,
            &mut buf.parser,
            &buf.rbuf,
            &mut buf.args,
            &mut stack,
            &mut heap,
        );
        large |= consumed >= connection::LARGE_REQUEST;
        // Redis's qbuf: the unprocessed input, this command included.
        client
            .info
            .qbuf
            .store(buf.rbuf.len() - start, Ordering::Relaxed);
        if argv.is_empty() {
            buf.batch.recycle(heap);
            *ran += consumed;
            continue;
        }
        // CLIENT PAUSE and a running script's shards are waited for on the tokio path,
        // which parses the request again from the buffer.
        if shared.pause.is_set()
            || (commands::scripting::script_running(shared)
                && !commands::scripting::gate_clear(shared, client, argv))
        {
            buf.batch.recycle(heap);
            buf.args.clear();
            return Served::HandOver(Resume::Read);
        }
        // A lean command's reply is encoded by the engine when nothing else follows it
        // (`None`); anything else comes back for the checks below.
        let result = engine::execute_in_batch(shared, client, argv, &mut plain, &mut buf.wbuf);
        buf.batch.recycle(heap);
        buf.args.clear();
        if let Some(result) = result {
            if matches!(result.next, Next::Regate) {
                // A script took a shard this command needs after the check above: unrun, it
                // goes through the gate on the tokio path, from the buffer.
                return Served::HandOver(Resume::Read);
            }
            *ran += consumed;
            if let Next::Block(_) = result.next {
                // Blocked: the tokio path waits for the waiter's reply.
                return Served::HandOver(Resume::After(result));
            }
            if !result.hold.is_zero()
                || matches!(
                    result.next,
                    Next::Replicate { .. } | Next::WaitAcks { .. } | Next::Monitor
                )
                || client.push_queue().is_some()
            {
                // The tokio path knows what to do next (and answers, in order).
                return Served::HandOver(Resume::After(result));
            }
            let Ran {
                reply,
                next,
                disconnect,
                ..
            } = result;
            if matches!(next, Next::CloseWithoutReply) {
                return Served::Close;
            }
            if !client.reply_suppressed() {
                reply.encode(client.resp, &mut buf.wbuf);
            }
            reply.recycle();
            let close = disconnect || matches!(next, Next::Close);
            // Almost always `Continue`, which owns nothing: its drop glue (an out-of-line
            // call on every request) is left for the other values.
            if matches!(next, Next::Continue) {
                std::mem::forget(next);
            } else {
                drop(next);
            }
            if close {
                let _ = write_now(shared, &conn.stream, &mut buf.wbuf);
                return Served::Close;
            }
        } else {
            *ran += consumed;
        }
        // AUTH, RESET or CONFIG SET proto-max-bulk-len: the requests parsed ahead were
        // checked against the old limits; parse them again under the new ones, as Redis
        // parses each after the one before ran. (One load: the flag and the setting.)
        if connection::refresh_limits(shared, &mut buf.parser, client.authenticated) {
            buf.batch.discard(&mut buf.parser);
            listed = false;
        }
        if buf.wbuf.len() >= FLUSH_AT {
            match write_now(shared, &conn.stream, &mut buf.wbuf) {
                Flushed::Done => {}
                Flushed::Stalled => return Served::HandOver(Resume::Read),
                Flushed::Failed => return Served::Close,
            }
        }
    }
    buf.rbuf.advance(std::mem::take(ran));
    // Release what a large request left allocated.
    buf.release_large(large);
    Served::Keep
}

/// The end of a batch: CLIENT LIST's view of the buffers, and the checks the tokio path
/// makes between batches.
fn after_batch(conn: &mut Conn) {
    let info = &conn.reg.client.info;
    info.qbuf.store(conn.buf.rbuf.len(), Ordering::Relaxed);
    // Redis frees a command's arguments once it has run: an idle client shows none.
    info.argv_mem.store(0, Ordering::Relaxed);
    info.buf_mem.store(conn.buf.memory(), Ordering::Relaxed);
    if conn.buf.rbuf.len() > conn.query_limit {
        tracing::warn!(
            "closing client {}: query buffer over client-query-buffer-limit",
            info.id
        );
        conn.close_after_write = true;
    }
    if info.kill.is_ending() {
        conn.close_after_write = true;
    }
}

pub(super) enum Flushed {
    Done,
    /// Not all of it: the rest is still in the buffer.
    Stalled,
    Failed,
}

/// Writes the output buffer with one `send` (more only if the kernel took part of it).
fn write_now(shared: &Shared, stream: &Stream, wbuf: &mut BytesMut) -> Flushed {
    if wbuf.is_empty() {
        return Flushed::Done;
    }
    // Nothing acknowledged leaves before it is in the append-only file (a no-op after the
    // turn's own flush, unless another loop appended meanwhile).
    shared.repl.aof.before_reply();
    // `client-output-buffer-limit normal`: a client near its limits is the tokio path's
    // to judge (it closes it, or starts the soft limit's clock), before anything is
    // written, as Redis checks when it adds a reply. With no limit set (the default) this
    // is two loads.
    let limit = shared.live.output_buffer_limit();
    if limit.hard > 0 || limit.soft > 0 {
        let buffered = wbuf.len() + connection::kernel_unsent(stream);
        if (limit.hard > 0 && buffered > limit.hard) || (limit.soft > 0 && buffered > limit.soft) {
            return Flushed::Stalled;
        }
    }
    while !wbuf.is_empty() {
        // SAFETY: send reads `wbuf.len()` initialized bytes of a buffer we own.
        // The system call itself (see `serve`'s receive).
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendto,
                stream.as_raw_fd(),
                wbuf.as_ptr(),
                wbuf.len(),
                libc::MSG_NOSIGNAL,
                std::ptr::null::<libc::sockaddr>(),
                0 as libc::socklen_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => return Flushed::Stalled,
                _ => return Flushed::Failed,
            }
        }
        let n = n as usize;
        shared.stats.net_output_bytes.add(n as u64);
        if n == wbuf.len() {
            wbuf.clear();
        } else {
            wbuf.advance(n);
            return Flushed::Stalled;
        }
    }
    Flushed::Done
}

pub(super) fn flush(shared: &Shared, conn: &mut Conn) -> Flushed {
    write_now(shared, &conn.stream, &mut conn.buf.wbuf)
}
