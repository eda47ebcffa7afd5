//! The io_uring backend. One ring, one thread (so `SINGLE_ISSUER | DEFER_TASKRUN` can be
//! used: the ring never changes threads). A turn:
//!
//! 1. one `io_uring_enter` submits what the last turn queued (the sends, re-armed
//!    receives) and waits for completions;
//! 2. every completion is reaped: received bytes are appended to their connection's input
//!    (multishot: copied out of the provided buffer, which goes straight back to the buffer
//!    ring; one-shot: the kernel wrote them into the input's spare room), finished sends
//!    free their buffer;
//! 3. every connection that received runs its complete requests (the code the epoll
//!    backend runs);
//! 4. every connection with replies and no send in flight gets one SEND, whose buffer is
//!    kept (`Conn::sending`) until its completion; one-shot receives are queued again.
//!
//! The wait asks for one completion more than the sends the turn queued (`--wait
//! sends+1`, the default): a send to a socket with room completes during the submission,
//! and waiting for one completion only would return at once with nothing but those, costing
//! a second `io_uring_enter` per turn. `--wait one` measures that plain
//! `submit_and_wait(1)`. (A send that cannot complete at once holds the wait until it
//! does or one more completion comes: fine under load, which is all this measures.)

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::{IoUring, SubmissionQueue, Submitter, cqueue, opcode, squeue, types};

use crate::resp::{Buffers, MAX_INPUT, Store};
use crate::{RecvMode, Taskrun, UringOpts, close_fd, set_nodelay};

/// Most connections (the registered file table's size).
const MAX_CONNS: u32 = 4096;
/// The provided-buffer group multishot receives take from.
const BGID: u16 = 0;
/// Room a one-shot receive is given at least.
const RECV_ROOM: usize = 16 * 1024;

const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
const CANCEL: u64 = 4;

fn user_data(kind: u64, slot: usize, generation: u32) -> u64 {
    (kind << 60) | ((u64::from(generation) & 0x0fff_ffff) << 32) | slot as u64
}

fn kind_of(ud: u64) -> u64 {
    ud >> 60
}

fn slot_of(ud: u64) -> usize {
    (ud & 0xffff_ffff) as usize
}

fn generation_of(ud: u64) -> u32 {
    ((ud >> 32) & 0x0fff_ffff) as u32
}

struct Conn {
    fd: RawFd,
    generation: u32,
    buf: Buffers,
    /// The bytes of the SEND in flight (the kernel reads them until its completion).
    sending: Vec<u8>,
    sent: usize,
    send_in_flight: bool,
    /// A receive is armed (multishot: until a completion without `F_MORE`).
    recv_in_flight: bool,
    /// Peer gone or failed: freed once nothing is in flight.
    closing: bool,
    cancel_sent: bool,
    /// In this turn's run list already.
    queued: bool,
}

/// The provided-buffer ring: `entries` buffers of `size` bytes the kernel picks from for
/// multishot receives; a buffer goes back as soon as its bytes are copied out.
struct BufRing {
    ring: *mut BufRingEntry,
    ring_bytes: usize,
    mem: Vec<u8>,
    size: u32,
    mask: u16,
    tail: u16,
}

impl BufRing {
    fn new(submitter: &Submitter<'_>, entries: u16, size: u32) -> io::Result<BufRing> {
        let ring_bytes = usize::from(entries) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping (page-aligned, as the kernel requires).
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut r = BufRing {
            ring: ring.cast(),
            ring_bytes,
            mem: vec![0u8; usize::from(entries) * size as usize],
            size,
            mask: entries - 1,
            tail: 0,
        };
        // SAFETY: the mapping lives as long as `r`, which outlives the ring's use of it (the
        // ring is dropped first in `serve`).
        unsafe { submitter.register_buf_ring_with_flags(ring as u64, entries, BGID, 0)? };
        for bid in 0..entries {
            r.give(bid);
        }
        r.publish();
        Ok(r)
    }

    /// Puts buffer `bid` back (seen by the kernel after `publish`).
    fn give(&mut self, bid: u16) {
        let addr = self.mem.as_ptr() as u64 + u64::from(bid) * u64::from(self.size);
        // SAFETY: the index is masked into the mapping.
        let e = unsafe { &mut *self.ring.add(usize::from(self.tail & self.mask)) };
        e.set_addr(addr);
        e.set_len(self.size);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is a u16 inside the mapping, shared with the kernel.
        unsafe {
            let tail = BufRingEntry::tail(self.ring) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }

    fn bytes(&self, bid: u16, len: usize) -> Option<&[u8]> {
        let start = usize::from(bid) * self.size as usize;
        self.mem.get(start..start + len.min(self.size as usize))
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}

/// Queues `e`, submitting first if the submission queue is full.
fn push(sq: &mut SubmissionQueue<'_>, submitter: &Submitter<'_>, e: &squeue::Entry) {
    loop {
        // SAFETY: every buffer an entry names lives until its completion (see `Conn`).
        if unsafe { sq.push(e) }.is_ok() {
            return;
        }
        sq.sync();
        let _ = submitter.submit();
        sq.sync();
    }
}

struct Loop<'a> {
    o: UringOpts,
    submitter: Submitter<'a>,
    sq: SubmissionQueue<'a>,
    conns: Vec<Option<Conn>>,
    generations: Vec<u32>,
    free: Vec<usize>,
    bufs: Option<BufRing>,
    store: Store,
    to_run: Vec<usize>,
    writes: Vec<usize>,
    /// Sends queued this turn (what the wait counts on completing at once).
    sends_queued: usize,
}

pub fn serve(listener: TcpListener, o: UringOpts) -> io::Result<()> {
    // io_uring's accept waits in the kernel (poll-armed) for a blocking listener.
    listener.set_nonblocking(false)?;
    let mut builder = IoUring::builder();
    match o.taskrun {
        Taskrun::Defer => {
            builder.setup_single_issuer().setup_defer_taskrun();
        }
        Taskrun::Coop => {
            builder
                .setup_single_issuer()
                .setup_coop_taskrun()
                .setup_taskrun_flag();
        }
        Taskrun::None => {}
    }
    builder.setup_cqsize(4096);
    let mut ring: IoUring = builder.build(256)?;
    let (mut submitter, sq, mut cq) = ring.split();
    if o.ring_fd {
        submitter.register_ring_fd()?;
    }
    if o.fixed_files {
        submitter.register_files_sparse(MAX_CONNS)?;
    }
    let bufs = match o.recv {
        RecvMode::Multishot => Some(BufRing::new(&submitter, o.bufs, o.buf_size)?),
        RecvMode::Oneshot => None,
    };
    let mut l = Loop {
        o,
        submitter,
        sq,
        conns: Vec::new(),
        generations: Vec::new(),
        free: Vec::new(),
        bufs,
        store: Store::default(),
        to_run: Vec::new(),
        writes: Vec::new(),
        sends_queued: 0,
    };
    let lfd = listener.as_raw_fd();
    l.arm_accept(lfd);
    loop {
        l.sq.sync();
        let want = match l.o.wait_sends {
            true => l.sends_queued + 1,
            false => 1,
        };
        l.sends_queued = 0;
        if let Err(e) = l.submitter.submit_and_wait(want) {
            match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::ETIME) => {}
                _ => return Err(e),
            }
        }
        cq.sync();
        for cqe in &mut cq {
            l.complete(lfd, cqe.user_data(), cqe.result(), cqe.flags());
        }
        if let Some(b) = &l.bufs {
            b.publish();
        }
        l.turn();
    }
}

impl Loop<'_> {
    fn arm_accept(&mut self, lfd: RawFd) {
        let e = opcode::AcceptMulti::new(types::Fd(lfd))
            .build()
            .user_data(user_data(ACCEPT, 0, 0));
        push(&mut self.sq, &self.submitter, &e);
    }

    fn accepted(&mut self, fd: RawFd) {
        set_nodelay(fd);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.generations.push(0);
            self.conns.len() - 1
        });
        if slot >= MAX_CONNS as usize
            || (self.o.fixed_files
                && self
                    .submitter
                    .register_files_update(slot as u32, &[fd])
                    .is_err())
        {
            close_fd(fd);
            self.free.push(slot);
            return;
        }
        self.conns[slot] = Some(Conn {
            fd,
            generation: self.generations[slot],
            buf: Buffers::new(),
            sending: Vec::with_capacity(16 * 1024),
            sent: 0,
            send_in_flight: false,
            recv_in_flight: false,
            closing: false,
            cancel_sent: false,
            queued: false,
        });
        self.arm_recv(slot);
    }

    /// Queues the connection's receive: multishot, or one-shot into its input's spare room.
    fn arm_recv(&mut self, slot: usize) {
        let (o, sq, submitter) = (self.o, &mut self.sq, &self.submitter);
        let Some(Some(c)) = self.conns.get_mut(slot) else {
            return;
        };
        let ud = user_data(RECV, slot, c.generation);
        let e = match o.recv {
            RecvMode::Multishot => {
                if o.fixed_files {
                    opcode::RecvMulti::new(types::Fixed(slot as u32), BGID).build()
                } else {
                    opcode::RecvMulti::new(types::Fd(c.fd), BGID).build()
                }
            }
            RecvMode::Oneshot => {
                let input = &mut c.buf.input;
                if input.capacity() - input.len() < RECV_ROOM / 4 {
                    input.reserve(RECV_ROOM);
                }
                let room = (input.capacity() - input.len()) as u32;
                // SAFETY: the spare room is not touched (nor the vector grown) until this
                // receive completes: the connection runs only after its completion.
                let at = unsafe { input.as_mut_ptr().add(input.len()) };
                if o.fixed_files {
                    opcode::Recv::new(types::Fixed(slot as u32), at, room).build()
                } else {
                    opcode::Recv::new(types::Fd(c.fd), at, room).build()
                }
            }
        };
        c.recv_in_flight = true;
        push(sq, submitter, &e.user_data(ud));
    }

    fn queue_send(&mut self, slot: usize) {
        let (o, sq, submitter) = (self.o, &mut self.sq, &self.submitter);
        let Some(Some(c)) = self.conns.get_mut(slot) else {
            return;
        };
        let Some(rest) = c.sending.get(c.sent..) else {
            return;
        };
        let (at, len) = (rest.as_ptr(), rest.len() as u32);
        let e = if o.fixed_files {
            opcode::Send::new(types::Fixed(slot as u32), at, len)
        } else {
            opcode::Send::new(types::Fd(c.fd), at, len)
        }
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(user_data(SEND, slot, c.generation));
        c.send_in_flight = true;
        self.sends_queued += 1;
        push(sq, submitter, &e);
    }

    fn complete(&mut self, lfd: RawFd, ud: u64, res: i32, flags: u32) {
        match kind_of(ud) {
            ACCEPT => {
                if res >= 0 {
                    self.accepted(res);
                }
                if !cqueue::more(flags) {
                    self.arm_accept(lfd);
                }
                return;
            }
            CANCEL => return,
            _ => {}
        }
        let slot = slot_of(ud);
        let multishot = self.o.recv == RecvMode::Multishot;
        let Some(Some(c)) = self.conns.get_mut(slot) else {
            return;
        };
        if c.generation != generation_of(ud) {
            return;
        }
        match kind_of(ud) {
            RECV => {
                if !multishot || !cqueue::more(flags) {
                    c.recv_in_flight = false;
                }
                if res > 0 {
                    let n = res as usize;
                    if multishot {
                        let (Some(bufs), Some(bid)) =
                            (&mut self.bufs, cqueue::buffer_select(flags))
                        else {
                            c.closing = true;
                            return self.reap(slot);
                        };
                        if let Some(bytes) = bufs.bytes(bid, n) {
                            c.buf.input.extend_from_slice(bytes);
                        }
                        bufs.give(bid);
                    } else {
                        // SAFETY: the kernel wrote `n` bytes into the spare room armed.
                        unsafe { c.buf.input.set_len(c.buf.input.len() + n) };
                    }
                    if c.buf.input.len() > MAX_INPUT {
                        c.closing = true;
                    } else if !c.queued {
                        c.queued = true;
                        self.to_run.push(slot);
                    }
                } else if res == 0 || res != -libc::ENOBUFS {
                    // The peer closed, or the receive failed.
                    c.closing = true;
                }
                // A multishot receive that ended (out of buffers, or a full input) is
                // queued again; a one-shot one after its connection has run.
                let rearm = if multishot {
                    !c.recv_in_flight
                } else {
                    !c.queued
                };
                if rearm && !c.closing {
                    self.arm_recv(slot);
                }
            }
            SEND => {
                if res < 0 {
                    c.send_in_flight = false;
                    c.closing = true;
                } else {
                    c.sent += res as usize;
                    if c.sent < c.sending.len() {
                        self.queue_send(slot);
                        return;
                    }
                    c.send_in_flight = false;
                    c.sending.clear();
                    c.sent = 0;
                    if !c.buf.output.is_empty() {
                        self.writes.push(slot);
                    }
                }
            }
            _ => {}
        }
        self.reap(slot);
    }

    /// Frees a closing connection once nothing is in flight (cancelling its receive first).
    fn reap(&mut self, slot: usize) {
        let Some(Some(c)) = self.conns.get_mut(slot) else {
            return;
        };
        if !c.closing {
            return;
        }
        if c.recv_in_flight {
            if !c.cancel_sent {
                c.cancel_sent = true;
                let e = opcode::AsyncCancel::new(user_data(RECV, slot, c.generation))
                    .build()
                    .user_data(user_data(CANCEL, slot, c.generation));
                push(&mut self.sq, &self.submitter, &e);
            }
            return;
        }
        if c.send_in_flight {
            return;
        }
        if self.o.fixed_files {
            let _ = self.submitter.register_files_update(slot as u32, &[-1]);
        }
        close_fd(c.fd);
        self.conns[slot] = None;
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        self.free.push(slot);
    }

    /// Runs every connection that received, then queues one send per connection with
    /// replies (and the one-shot receives again).
    fn turn(&mut self) {
        let oneshot = self.o.recv == RecvMode::Oneshot;
        let mut to_run = std::mem::take(&mut self.to_run);
        for &slot in &to_run {
            let Some(Some(c)) = self.conns.get_mut(slot) else {
                continue;
            };
            c.queued = false;
            if c.closing {
                continue;
            }
            if c.buf.run(&mut self.store).is_err() {
                c.closing = true;
            }
            if !c.buf.output.is_empty() {
                self.writes.push(slot);
            }
            if oneshot && !c.closing && !c.recv_in_flight {
                self.arm_recv(slot);
            }
        }
        to_run.clear();
        self.to_run = to_run;
        let mut writes = std::mem::take(&mut self.writes);
        for &slot in &writes {
            let Some(Some(c)) = self.conns.get_mut(slot) else {
                continue;
            };
            if c.send_in_flight || c.buf.output.is_empty() {
                continue;
            }
            std::mem::swap(&mut c.buf.output, &mut c.sending);
            c.sent = 0;
            self.queue_send(slot);
        }
        for &slot in &writes {
            self.reap(slot);
        }
        writes.clear();
        self.writes = writes;
    }
}
