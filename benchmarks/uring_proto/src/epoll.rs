//! The epoll backend, in the shape of sluice's event loop (`src/server/eventloop/turn.rs`):
//! edge-triggered epoll; a turn is one `epoll_wait`, one `recvfrom` per ready connection,
//! then every connection read is run inline, then one `sendto` per connection with replies.
//! A read that fills the room it was given is looked at again next turn without sleeping
//! (edge-triggered readiness is not reported again for data already there).

use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};

use crate::resp::{Buffers, MAX_INPUT, Store};
use crate::{accept_one, close_fd, errno};

const LISTENER: u64 = u64::MAX;
/// Room a receive is given at least.
const RECV_ROOM: usize = 16 * 1024;

struct Conn {
    fd: RawFd,
    buf: Buffers,
    /// The last read filled its room: read again next turn.
    more: bool,
    /// Output not yet taken by the kernel (a short send): sent again next turn.
    stalled: bool,
}

pub fn serve(listener: TcpListener) -> std::io::Result<()> {
    // SAFETY: plain system calls on descriptors this function owns.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    add(epfd, listener.as_raw_fd(), LISTENER, libc::EPOLLIN as u32)?;
    let mut store = Store::default();
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut ready: Vec<usize> = Vec::new();
    let mut again: Vec<usize> = Vec::new();
    let mut to_run: Vec<usize> = Vec::new();
    let mut writes: Vec<usize> = Vec::new();
    loop {
        let timeout = if again.is_empty() { -1 } else { 0 };
        // SAFETY: `events` has room for its length.
        let n =
            unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), events.len() as i32, timeout) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return Err(std::io::Error::last_os_error());
        }
        for ev in &events[..n as usize] {
            if ev.u64 == LISTENER {
                while let Some(fd) = accept_one(listener.as_raw_fd()) {
                    let token = free.pop().unwrap_or_else(|| {
                        conns.push(None);
                        conns.len() - 1
                    });
                    let et = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
                    if add(epfd, fd, token as u64, et).is_err() {
                        close_fd(fd);
                        free.push(token);
                        continue;
                    }
                    conns[token] = Some(Conn {
                        fd,
                        buf: Buffers::new(),
                        more: false,
                        stalled: false,
                    });
                }
            } else {
                ready.push(ev.u64 as usize);
            }
        }
        ready.append(&mut again);
        ready.sort_unstable();
        ready.dedup();
        // Read every ready connection once.
        for &token in &ready {
            let Some(Some(c)) = conns.get_mut(token) else {
                continue;
            };
            if c.stalled {
                writes.push(token);
            }
            match read(c) {
                Some(true) => to_run.push(token),
                Some(false) => {}
                None => {
                    close(epfd, &mut conns, &mut free, token);
                    continue;
                }
            }
            if let Some(Some(c)) = conns.get(token)
                && c.more
            {
                again.push(token);
            }
        }
        ready.clear();
        // Run them.
        for token in to_run.drain(..) {
            let Some(Some(c)) = conns.get_mut(token) else {
                continue;
            };
            let ok = c.buf.run(&mut store).is_ok();
            if !c.buf.output.is_empty() {
                writes.push(token);
            }
            if !ok {
                let _ = write(c);
                close(epfd, &mut conns, &mut free, token);
            }
        }
        // One send per connection with replies.
        writes.sort_unstable();
        writes.dedup();
        for token in writes.drain(..) {
            let Some(Some(c)) = conns.get_mut(token) else {
                continue;
            };
            match write(c) {
                Some(true) => c.stalled = false,
                Some(false) => {
                    c.stalled = true;
                    again.push(token);
                }
                None => close(epfd, &mut conns, &mut free, token),
            }
        }
    }
}

/// One `recvfrom`: Some(true) if something was read, Some(false) if nothing, None if the
/// peer closed or the read failed.
fn read(c: &mut Conn) -> Option<bool> {
    let input = &mut c.buf.input;
    if input.capacity() - input.len() < RECV_ROOM / 4 {
        if input.len() >= MAX_INPUT {
            return None;
        }
        input.reserve(RECV_ROOM);
    }
    let room = input.capacity() - input.len();
    // SAFETY: recvfrom writes at most `room` bytes into the spare capacity; `set_len`
    // covers only what it wrote. The system call itself, as sluice's loop makes it.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            c.fd,
            input.as_mut_ptr().add(input.len()),
            room,
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    c.more = false;
    if n == 0 {
        return None;
    }
    if n < 0 {
        return match errno() {
            libc::EAGAIN | libc::EINTR => {
                c.more = errno() == libc::EINTR;
                Some(false)
            }
            _ => None,
        };
    }
    let n = n as usize;
    // SAFETY: the kernel wrote `n` bytes there.
    unsafe { input.set_len(input.len() + n) };
    c.more = n == room;
    Some(true)
}

/// One `sendto` of the whole output: Some(true) when all of it went, Some(false) when some
/// is left for next turn, None if the connection failed.
fn write(c: &mut Conn) -> Option<bool> {
    let out = &mut c.buf.output;
    if out.is_empty() {
        return Some(true);
    }
    // SAFETY: sendto reads `out.len()` initialised bytes.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            c.fd,
            out.as_ptr(),
            out.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    };
    if n < 0 {
        return match errno() {
            libc::EAGAIN | libc::EINTR => Some(false),
            _ => None,
        };
    }
    let n = n as usize;
    if n == out.len() {
        out.clear();
        Some(true)
    } else {
        out.drain(..n);
        Some(false)
    }
}

fn add(epfd: RawFd, fd: RawFd, data: u64, events: u32) -> std::io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: a plain system call.
    if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn close(epfd: RawFd, conns: &mut [Option<Conn>], free: &mut Vec<usize>, token: usize) {
    if let Some(c) = conns.get_mut(token).and_then(Option::take) {
        // SAFETY: a plain system call; closing removes it from the epoll set anyway.
        unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_DEL, c.fd, std::ptr::null_mut()) };
        close_fd(c.fd);
        free.push(token);
    }
}
