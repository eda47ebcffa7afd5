//! The io_uring transport: TCP connections whose reads and writes are io_uring operations,
//! submitted in one batch per turn of their event loop.
//!
//! Owns one ring per event loop (`Ring`), the task that drives it (`drive`), the probe that
//! decides at start whether io_uring can be used at all (`probe`), and the stream type the
//! connection code serves (`UringStream`, a `connection::Transport` like a tokio socket).
//! It uses tokio (the loop's runtime, its reactor for the ring's own descriptor), `io-uring`
//! for the ring and `libc`; nothing above `server` knows it exists.
//!
//! How a turn goes: a connection's task queues a receive or a send on its loop's ring and
//! waits; the ring's driver task is told once that there is something to submit, and first
//! yields, so every other task of the loop that is ready runs and queues its own operations;
//! then one `io_uring_enter` submits them all. Completions (many arrive during that same
//! call: a receive with data already there, a send with room in the socket's buffer) are
//! reaped right away and their tasks woken; later ones make the ring's descriptor readable,
//! which wakes the driver through the loop's epoll, as any socket would. The loop itself is
//! unchanged: the same one-worker tokio runtime, timers and `block_in_place` (a long script
//! hands the loop to another thread; the ring is behind a mutex, so that thread may use it).
//!
//! Buffers: the kernel writes into a receive buffer and reads from a send buffer after the
//! call that queued them has returned, so both belong to the operation, not to a caller's
//! slice: a stream copies received bytes out to its reader and copies written bytes in.
//! That is what makes every read and write here cancel-safe (the connection code drops
//! read and write futures in `select!` all the time): a dropped read leaves its receive
//! in flight, and the next read takes its bytes. One receive is kept in flight while the
//! stream is open (queued again as soon as the previous one's bytes are taken), so a
//! request is received as soon as it arrives, in the same submission as the last reply.
//!
//! A stream dropped with operations in flight cancels them; each operation holds the
//! socket's descriptor open until its completion is reaped, so the descriptor number cannot
//! be reused by a new connection while the kernel may still act on it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use io_uring::{IoUring, opcode, squeue, types};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::sync::Notify;

/// Submission queue slots: how many operations one batch can queue before it is submitted
/// early (a full queue is submitted on the spot, so this bounds a batch, not the number of
/// operations in flight).
const SQ_ENTRIES: u32 = 256;
/// Completion queue slots. The kernel keeps completions beyond these (IORING_FEAT_NODROP)
/// and hands them over at the next submission.
const CQ_ENTRIES: u32 = 4096;
/// A stream's receive buffer, allocated once per connection.
const RECV_BUF: usize = 16 * 1024;
/// Most bytes one write takes; the caller writes the rest once they are sent.
const SEND_MAX: usize = 64 * 1024;
/// The user data of cancel requests, whose completions are ignored.
const CANCEL: u64 = u64::MAX;
/// Set to any value, io_uring counts as unavailable (as on a kernel without it, or under a
/// seccomp profile that denies it): for testing the fallback, and for operators.
pub const DISABLE_ENV: &str = "SLUICE_NO_IO_URING";

/// Checks once, at start, that io_uring can be used here: the ring can be created and the
/// kernel knows the operations this module queues. The error says why not.
pub fn probe() -> io::Result<()> {
    if std::env::var_os(DISABLE_ENV).is_some() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("disabled by {DISABLE_ENV}"),
        ));
    }
    let ring: IoUring = IoUring::new(2)?;
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    for (code, name) in [
        (opcode::Recv::CODE, "RECV"),
        (opcode::Send::CODE, "SEND"),
        (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    ] {
        if !probe.is_supported(code) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the kernel's io_uring lacks {name}"),
            ));
        }
    }
    Ok(())
}

/// One event loop's ring.
pub struct Ring {
    state: Mutex<State>,
    /// The ring's descriptor (owned by `state.uring`), for the reactor.
    fd: RawFd,
    /// True while queued operations wait for the driver (so it is told only once per batch).
    wanted: AtomicBool,
    /// Tells the driver there is something to submit.
    kick: Notify,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("fd", &self.fd).finish()
    }
}

/// The ring and the operations in flight on it. Only touched under `Ring::state`.
struct State {
    uring: IoUring,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Operations queued since the last submission.
    queued: usize,
    /// Tasks whose operations were reaped outside the driver (see `push`), woken by it.
    woken: Vec<Waker>,
}

struct Slot {
    /// Bumped each time the slot is freed, so a stale id (or cancel) never matches.
    generation: u32,
    op: Option<Op>,
}

/// An operation the kernel may still be working on: it owns the buffer and keeps the
/// socket's descriptor open until its completion is reaped.
struct Op {
    buf: Vec<u8>,
    _fd: Arc<OwnedFd>,
    status: Status,
}

enum Status {
    /// In flight; the task to wake when it completes.
    Pending(Option<Waker>),
    /// Completed with this result (bytes, or -errno), not yet collected.
    Done(i32),
    /// Its stream is gone: freed when its completion arrives.
    Abandoned,
}

/// An operation on the ring: its slot and that slot's generation when it was queued.
#[derive(Clone, Copy, Debug)]
struct OpId {
    key: u32,
    generation: u32,
}

impl OpId {
    fn user_data(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.key)
    }
}

impl Ring {
    /// A new ring for one event loop.
    pub fn new() -> io::Result<Arc<Ring>> {
        let uring = IoUring::builder()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)?;
        let fd = uring.as_raw_fd();
        Ok(Arc::new(Ring {
            state: Mutex::new(State {
                uring,
                slots: Vec::new(),
                free: Vec::new(),
                queued: 0,
                woken: Vec::new(),
            }),
            fd,
            wanted: AtomicBool::new(false),
            kick: Notify::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing in State is left half-updated by a panic elsewhere: keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the driver to submit what is queued (once per batch).
    fn want_submit(&self) {
        if !self.wanted.swap(true, Ordering::AcqRel) {
            self.kick.notify_one();
        }
    }

    /// Submits what is queued and wakes the tasks whose operations completed.
    fn turn(&self, wake: &mut Vec<Waker>) {
        self.wanted.store(false, Ordering::Release);
        let mut state = self.lock();
        wake.append(&mut state.woken);
        state.submit();
        state.reap(wake);
        // Completions the kernel kept back because the completion queue was full come over
        // with the next call into the kernel.
        while state.uring.submission().cq_overflow() {
            state.submit_now();
            if state.reap(wake) == 0 {
                break;
            }
        }
    }

    /// The readiness registration of the ring's descriptor with the current runtime's
    /// reactor (call inside the loop's runtime context).
    pub fn register(self: &Arc<Self>) -> io::Result<AsyncFd<RingFd>> {
        // SAFETY: the descriptor belongs to the ring that `RingFd` holds alive, so it stays
        // open, and the same, for as long as the registration exists.
        unsafe { AsyncFd::register_with_interest(RingFd(self.clone()), Interest::READABLE) }
            .map_err(io::Error::from)
    }
}

/// The ring's descriptor, as the reactor sees it; holds the ring alive while registered.
pub struct RingFd(Arc<Ring>);

impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.fd
    }
}

/// Drives one loop's ring for as long as the loop runs: submits each batch, reaps
/// completions, wakes their tasks.
pub async fn drive(registered: AsyncFd<RingFd>) {
    let ring = registered.get_ref().0.clone();
    let mut wake = Vec::new();
    loop {
        tokio::select! {
            biased;
            ready = registered.readable() => match ready {
                Ok(mut guard) => guard.clear_ready(),
                Err(e) => {
                    tracing::error!("io_uring driver stopped: {e}");
                    return;
                }
            },
            _ = ring.kick.notified() => {
                // Let every other ready task of this loop queue its operations first, so
                // that one submission carries them all (a yielded task runs again once the
                // loop has polled its reactor, after the tasks already queued).
                tokio::task::yield_now().await;
            }
        }
        ring.turn(&mut wake);
        for w in wake.drain(..) {
            w.wake();
        }
    }
}

impl State {
    /// Queues an operation built by `build` (given the buffer's pointer and the id's user
    /// data) that owns `buf` and holds `fd` open until it completes.
    fn start(
        &mut self,
        fd: &Arc<OwnedFd>,
        mut buf: Vec<u8>,
        cx: &Context<'_>,
        build: impl FnOnce(*mut u8) -> squeue::Entry,
    ) -> OpId {
        // The kernel uses the buffer's heap memory, which stays where it is when the Vec
        // moves into the slot (it is never resized while the operation is in flight).
        let entry = build(buf.as_mut_ptr());
        let op = Op {
            buf,
            _fd: fd.clone(),
            status: Status::Pending(Some(cx.waker().clone())),
        };
        let id = match self.free.pop() {
            Some(key) => {
                let slot = &mut self.slots[key as usize];
                slot.op = Some(op);
                OpId {
                    key,
                    generation: slot.generation,
                }
            }
            None => {
                let key = self.slots.len() as u32;
                self.slots.push(Slot {
                    generation: 0,
                    op: Some(op),
                });
                OpId { key, generation: 0 }
            }
        };
        self.push(entry.user_data(id.user_data()));
        id
    }

    /// Puts an entry on the submission queue, submitting on the spot when it is full.
    fn push(&mut self, entry: squeue::Entry) {
        loop {
            // SAFETY: the entry's buffer belongs to its operation's slot until the
            // completion is reaped (see `start`); a cancel entry refers to no memory.
            if unsafe { self.uring.submission().push(&entry) }.is_ok() {
                self.queued += 1;
                return;
            }
            if !self.submit_now() {
                // The kernel takes nothing until completions are taken off (EBUSY): take
                // them (their tasks are woken by the driver), then retry.
                let mut woken = std::mem::take(&mut self.woken);
                if self.reap(&mut woken) == 0 {
                    std::thread::yield_now();
                }
                // Every push is followed by a kick to the driver, whose turn wakes them.
                self.woken = woken;
            }
        }
    }

    /// Submits what is queued, if anything.
    fn submit(&mut self) {
        if self.queued > 0 || self.uring.submission().cq_overflow() {
            self.submit_now();
        }
    }

    /// One `io_uring_enter`; false when the kernel took nothing.
    fn submit_now(&mut self) -> bool {
        loop {
            match self.uring.submit() {
                Ok(_) => {
                    self.queued = self.uring.submission().len();
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EBUSY/EAGAIN: completions must be reaped first; the driver does.
                    tracing::debug!("io_uring submit: {e}");
                    return false;
                }
            }
        }
    }

    /// Moves completions to their operations; returns how many there were.
    fn reap(&mut self, wake: &mut Vec<Waker>) -> usize {
        let mut n = 0;
        let State {
            uring, slots, free, ..
        } = self;
        for cqe in uring.completion() {
            n += 1;
            let data = cqe.user_data();
            if data == CANCEL {
                continue;
            }
            let key = data as u32;
            let generation = (data >> 32) as u32;
            let Some(slot) = slots.get_mut(key as usize) else {
                continue;
            };
            if slot.generation != generation {
                continue;
            }
            let Some(op) = slot.op.as_mut() else {
                continue;
            };
            match &mut op.status {
                Status::Pending(waker) => {
                    if let Some(w) = waker.take() {
                        wake.push(w);
                    }
                    op.status = Status::Done(cqe.result());
                }
                Status::Abandoned => {
                    slot.op = None;
                    slot.generation = slot.generation.wrapping_add(1);
                    free.push(key);
                }
                Status::Done(_) => {}
            }
        }
        n
    }

    /// The operation's result and buffer once it has completed (freeing its slot), or None
    /// after noting `cx`'s waker.
    fn poll(&mut self, id: OpId, cx: &Context<'_>) -> Option<(i32, Vec<u8>)> {
        let slot = self.slots.get_mut(id.key as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        match &mut slot.op.as_mut()?.status {
            Status::Done(res) => {
                let res = *res;
                let op = slot.op.take()?;
                slot.generation = slot.generation.wrapping_add(1);
                self.free.push(id.key);
                Some((res, op.buf))
            }
            Status::Pending(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                None
            }
            Status::Abandoned => None,
        }
    }

    /// Gives up an operation whose stream is gone: freed now if it has completed, else
    /// cancelled and freed when its completion arrives. True when a cancel was queued.
    fn abandon(&mut self, id: OpId) -> bool {
        let Some(slot) = self.slots.get_mut(id.key as usize) else {
            return false;
        };
        if slot.generation != id.generation {
            return false;
        }
        let Some(op) = slot.op.as_mut() else {
            return false;
        };
        match op.status {
            Status::Done(_) => {
                slot.op = None;
                slot.generation = slot.generation.wrapping_add(1);
                self.free.push(id.key);
                false
            }
            Status::Pending(_) => {
                op.status = Status::Abandoned;
                self.push(
                    opcode::AsyncCancel::new(id.user_data())
                        .build()
                        .user_data(CANCEL),
                );
                true
            }
            Status::Abandoned => false,
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // Closing the ring cancels what is in flight asynchronously: the buffers of operations
        // not yet completed are leaked rather than freed under the kernel (this happens once,
        // when the server stops).
        for slot in &mut self.slots {
            if let Some(op) = slot.op.take()
                && !matches!(op.status, Status::Done(_))
            {
                std::mem::forget(op.buf);
            }
        }
    }
}

/// The error an operation's negative result stands for.
fn os_error(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

/// A TCP connection served through its loop's ring.
pub struct UringStream {
    ring: Arc<Ring>,
    fd: Arc<OwnedFd>,
    /// The receive buffer while no receive is in flight; `recv_buf[pos..len]` not yet read.
    recv_buf: Option<Vec<u8>>,
    pos: usize,
    len: usize,
    recv: Option<OpId>,
    /// The peer closed its side (a receive returned 0), or the receive failed.
    read_end: Option<io::ErrorKind>,
    /// The send buffer while no send is in flight.
    send_buf: Option<Vec<u8>>,
    send: Option<OpId>,
    /// Bytes of the send in flight not yet sent (`send_buf[sent..]`).
    sent: usize,
    unsent: usize,
}

impl std::fmt::Debug for UringStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringStream")
            .field("fd", &self.fd.as_raw_fd())
            .finish()
    }
}

impl UringStream {
    /// Serves `stream` through `ring` from now on.
    pub fn new(stream: std::net::TcpStream, ring: Arc<Ring>) -> io::Result<UringStream> {
        // io_uring never blocks the thread that submits; a blocking socket lets the kernel
        // wait for readiness itself instead of answering EAGAIN.
        stream.set_nonblocking(false)?;
        Ok(UringStream {
            ring,
            fd: Arc::new(OwnedFd::from(stream)),
            recv_buf: Some(vec![0; RECV_BUF]),
            pos: 0,
            len: 0,
            recv: None,
            read_end: None,
            send_buf: Some(Vec::new()),
            send: None,
            sent: 0,
            unsent: 0,
        })
    }

    fn start_recv(&mut self, state: &mut State, cx: &Context<'_>) {
        let Some(buf) = self.recv_buf.take() else {
            return;
        };
        let fd = types::Fd(self.fd.as_raw_fd());
        let len = buf.len() as u32;
        self.recv = Some(state.start(&self.fd, buf, cx, |ptr| {
            opcode::Recv::new(fd, ptr, len).build()
        }));
        self.pos = 0;
        self.len = 0;
    }

    fn start_send(&mut self, state: &mut State, buf: Vec<u8>, cx: &Context<'_>) {
        let fd = types::Fd(self.fd.as_raw_fd());
        let from = self.sent.min(buf.len());
        let len = (buf.len() - from) as u32;
        self.unsent = len as usize;
        self.send = Some(state.start(&self.fd, buf, cx, |ptr| {
            // SAFETY: `from` is within the buffer.
            let ptr = unsafe { ptr.add(from) };
            opcode::Send::new(fd, ptr, len)
                .flags(libc::MSG_NOSIGNAL)
                .build()
        }));
    }

    /// Waits until the send in flight (if any) has sent everything it was given.
    fn poll_sent(&mut self, cx: &Context<'_>) -> Poll<io::Result<()>> {
        let ring = self.ring.clone();
        let mut state = ring.lock();
        while let Some(id) = self.send {
            let Some((res, buf)) = state.poll(id, cx) else {
                return Poll::Pending;
            };
            self.send = None;
            self.unsent = 0;
            if res < 0 {
                let err = os_error(res);
                if matches!(
                    err.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    self.start_send(&mut state, buf, cx);
                    drop(state);
                    self.ring.want_submit();
                    return Poll::Pending;
                }
                self.send_buf = Some(buf);
                return Poll::Ready(Err(err));
            }
            if res == 0 {
                self.send_buf = Some(buf);
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += res as usize;
            if self.sent < buf.len() {
                // A short send: the rest goes next.
                self.start_send(&mut state, buf, cx);
                drop(state);
                self.ring.want_submit();
                return Poll::Pending;
            }
            self.send_buf = Some(buf);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for UringStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let ring = this.ring.clone();
        let mut state = ring.lock();
        if let Some(id) = this.recv {
            let Some((res, buf)) = state.poll(id, cx) else {
                return Poll::Pending;
            };
            this.recv = None;
            this.recv_buf = Some(buf);
            if res < 0 {
                let err = os_error(res);
                if matches!(
                    err.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    this.start_recv(&mut state, cx);
                    drop(state);
                    ring.want_submit();
                    return Poll::Pending;
                }
                this.read_end = Some(err.kind());
                return Poll::Ready(Err(err));
            }
            this.pos = 0;
            this.len = res as usize;
            if res == 0 {
                this.read_end = Some(io::ErrorKind::UnexpectedEof);
            }
        }
        if this.pos < this.len {
            let Some(buf) = this.recv_buf.as_ref() else {
                return Poll::Ready(Ok(()));
            };
            let n = out.remaining().min(this.len - this.pos);
            out.put_slice(&buf[this.pos..this.pos + n]);
            this.pos += n;
            if this.pos == this.len && this.read_end.is_none() {
                // Keep a receive in flight: the next request is taken as it arrives.
                this.start_recv(&mut state, cx);
                drop(state);
                ring.want_submit();
            }
            return Poll::Ready(Ok(()));
        }
        match this.read_end {
            Some(io::ErrorKind::UnexpectedEof) => return Poll::Ready(Ok(())),
            Some(kind) => return Poll::Ready(Err(kind.into())),
            None => {}
        }
        this.start_recv(&mut state, cx);
        drop(state);
        ring.want_submit();
        Poll::Pending
    }
}

impl AsyncWrite for UringStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // One send in flight at a time: the next write waits for it.
        std::task::ready!(this.poll_sent(cx))?;
        let mut buf = this.send_buf.take().unwrap_or_default();
        let n = data.len().min(SEND_MAX);
        buf.clear();
        buf.extend_from_slice(&data[..n]);
        this.sent = 0;
        let ring = this.ring.clone();
        let mut state = ring.lock();
        this.start_send(&mut state, buf, cx);
        drop(state);
        ring.want_submit();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_sent(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_sent(cx))?;
        // SAFETY: shutdown(2) on a socket this stream owns.
        if unsafe { libc::shutdown(this.fd.as_raw_fd(), libc::SHUT_WR) } != 0 {
            return Poll::Ready(Err(io::Error::last_os_error()));
        }
        Poll::Ready(Ok(()))
    }
}

impl UringStream {
    /// Bytes written to this stream that the peer has not taken yet: the send in flight's
    /// unsent part and the kernel's send queue.
    pub fn unsent(&self) -> usize {
        self.unsent + super::connection::kernel_unsent(&*self.fd)
    }
}

impl Drop for UringStream {
    fn drop(&mut self) {
        let mut state = self.ring.lock();
        let mut cancelled = false;
        for id in [self.recv.take(), self.send.take()].into_iter().flatten() {
            cancelled |= state.abandon(id);
        }
        drop(state);
        if cancelled {
            self.ring.want_submit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-worker runtime (as the event loops are) with a driven ring, or None where
    /// io_uring is unavailable (the test then has nothing to check).
    fn loop_with_ring() -> Option<(tokio::runtime::Runtime, Arc<Ring>)> {
        if let Err(e) = probe() {
            eprintln!("io_uring unavailable here ({e}): nothing to test");
            return None;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let ring = Ring::new().unwrap();
        let registered = {
            let _in = rt.enter();
            ring.register().unwrap()
        };
        rt.spawn(drive(registered));
        Some((rt, ring))
    }

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (s, c)
    }

    #[test]
    fn echoes_large_writes_and_sees_the_close() {
        let Some((rt, ring)) = loop_with_ring() else {
            return;
        };
        let (server, client) = pair();
        let echoed = rt.spawn(async move {
            let mut s = UringStream::new(server, ring).unwrap();
            let mut buf = vec![0u8; 100_000];
            let mut total = 0;
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
                s.flush().await.unwrap();
                total += n;
            }
            total
        });
        // 1 MB through a 16 KiB receive buffer and 64 KiB sends, while reading the echo.
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let mut writer = client.try_clone().unwrap();
        let sent = data.clone();
        let w = std::thread::spawn(move || {
            std::io::Write::write_all(&mut writer, &sent).unwrap();
            writer.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        let mut client = client;
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        std::io::Read::read_to_end(&mut client, &mut back).unwrap();
        w.join().unwrap();
        assert_eq!(back.len(), data.len());
        assert!(back == data);
        assert_eq!(rt.block_on(echoed).unwrap(), data.len());
    }

    #[test]
    fn a_dropped_read_loses_nothing_and_a_dropped_stream_closes_the_socket() {
        let Some((rt, ring)) = loop_with_ring() else {
            return;
        };
        let (server, mut client) = pair();
        let mut s = UringStream::new(server, ring).unwrap();
        rt.block_on(async {
            let mut buf = [0u8; 8];
            // A read that times out (dropped in flight), then the data arrives.
            let r = tokio::time::timeout(Duration::from_millis(20), s.read(&mut buf)).await;
            assert!(r.is_err());
            std::io::Write::write_all(&mut client, b"hello").unwrap();
            let n = s.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"hello");
        });
        // Dropped with a receive in flight: the cancel goes out and the client sees EOF.
        drop(s);
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut client, &mut rest).unwrap();
        assert!(rest.is_empty());
    }
}
