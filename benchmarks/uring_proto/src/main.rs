//! `uring-proto`: a one-thread RESP server answering what `loadgen --workload getset` sends
//! (GET, SET; PING and SHUTDOWN besides), with two I/O backends that share the parser, the
//! store and the commands and differ only in how bytes get in and out:
//!
//! - `epoll`: sluice's event loop's shape (edge-triggered epoll, one `recvfrom` per ready
//!   connection, run inline, one `sendto` per connection with replies, one `epoll_wait` per
//!   turn);
//! - `uring`: an io_uring ring, by default `SINGLE_ISSUER | DEFER_TASKRUN`, a multishot
//!   receive per connection from a provided-buffer ring, one SEND per connection with
//!   replies per turn (its buffer kept until its completion), registered (fixed) files, one
//!   `submit_and_wait(1)` per turn. Each of those choices has a flag (see `--help`).
//!
//! It exists to measure server CPU per request of the two I/O shapes side by side (issue 32;
//! `run.sh` beside this file takes the whole comparison, benchmarks/notes.md has the results).
//! It is not sluice and serves nothing else: no expiry, no other command, no limits beyond
//! a bounded input buffer.
//!
//!     uring-proto --port 7740 --backend epoll
//!     uring-proto --port 7741 --backend uring [--taskrun defer|coop|none] [--fixed-files on|off]
//!                 [--recv multishot|oneshot] [--ring-fd on|off] [--wait sends+1|one]
//!                 [--bufs N] [--buf-size BYTES]

mod epoll;
mod resp;
mod uring;

use std::net::TcpListener;
use std::os::fd::RawFd;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taskrun {
    /// `SINGLE_ISSUER | DEFER_TASKRUN`: completions' task work runs only when the loop waits.
    Defer,
    /// `SINGLE_ISSUER | COOP_TASKRUN | TASKRUN_FLAG`: no interrupt, run at the next entry.
    Coop,
    /// Neither: task work interrupts the loop's thread as it comes.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvMode {
    /// One multishot receive per connection, into buffers of the provided-buffer ring.
    Multishot,
    /// One receive at a time into the connection's own buffer, queued again after each run.
    Oneshot,
}

#[derive(Debug, Clone, Copy)]
pub struct UringOpts {
    pub taskrun: Taskrun,
    pub fixed_files: bool,
    pub recv: RecvMode,
    pub ring_fd: bool,
    /// Wait for one completion more than the sends queued (else for one).
    pub wait_sends: bool,
    /// Buffers in the provided-buffer ring (a power of two).
    pub bufs: u16,
    pub buf_size: u32,
}

fn usage() -> ! {
    eprintln!(
        "usage: uring-proto --port N --backend epoll|uring [--taskrun defer|coop|none] \
         [--fixed-files on|off] [--recv multishot|oneshot] [--ring-fd on|off] \
         [--wait sends+1|one] [--bufs N] [--buf-size BYTES]"
    );
    std::process::exit(2);
}

fn on_off(v: &str) -> bool {
    match v {
        "on" => true,
        "off" => false,
        _ => usage(),
    }
}

fn main() {
    let mut port: u16 = 7740;
    let mut backend = String::from("epoll");
    let mut u = UringOpts {
        taskrun: Taskrun::Defer,
        fixed_files: true,
        recv: RecvMode::Multishot,
        ring_fd: false,
        wait_sends: true,
        bufs: 1024,
        buf_size: 4096,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(v) = it.next() else { usage() };
        match flag.as_str() {
            "--port" => port = v.parse().unwrap_or_else(|_| usage()),
            "--backend" => backend = v.clone(),
            "--taskrun" => {
                u.taskrun = match v.as_str() {
                    "defer" => Taskrun::Defer,
                    "coop" => Taskrun::Coop,
                    "none" => Taskrun::None,
                    _ => usage(),
                }
            }
            "--fixed-files" => u.fixed_files = on_off(v),
            "--ring-fd" => u.ring_fd = on_off(v),
            "--wait" => {
                u.wait_sends = match v.as_str() {
                    "sends+1" => true,
                    "one" => false,
                    _ => usage(),
                }
            }
            "--recv" => {
                u.recv = match v.as_str() {
                    "multishot" => RecvMode::Multishot,
                    "oneshot" => RecvMode::Oneshot,
                    _ => usage(),
                }
            }
            "--bufs" => {
                u.bufs = v
                    .parse()
                    .ok()
                    .filter(|n: &u16| n.is_power_of_two())
                    .unwrap_or_else(|| usage())
            }
            "--buf-size" => u.buf_size = v.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("uring-proto: bind 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = listener.set_nonblocking(true) {
        eprintln!("uring-proto: {e}");
        std::process::exit(1);
    }
    let result = match backend.as_str() {
        "epoll" => epoll::serve(listener),
        "uring" => uring::serve(listener, u),
        _ => usage(),
    };
    if let Err(e) = result {
        eprintln!("uring-proto: {e}");
        std::process::exit(1);
    }
}

pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Accepts one pending connection (non-blocking, TCP_NODELAY as sluice and Redis set it).
pub fn accept_one(listener: RawFd) -> Option<RawFd> {
    // SAFETY: a plain system call.
    let fd = unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    set_nodelay(fd);
    Some(fd)
}

pub fn set_nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: `one` outlives the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

pub fn close_fd(fd: RawFd) {
    // SAFETY: the caller owns `fd` and forgets it.
    unsafe { libc::close(fd) };
}
