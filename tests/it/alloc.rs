//! Heap allocations per request on the hot paths, counted: each workload runs through the
//! real connection code (`server::connection::serve`: bytes in the read buffer → parse →
//! `engine::call` → encode into the output buffer → write) over an in-memory transport, on one
//! current-thread runtime, so `alloc_stats::thread_allocations` sees every allocation the
//! request makes and nothing else's. After a warm-up (buffers grown, keys present), each
//! request must allocate nothing, in RESP2 and in RESP3; where a request must store
//! something new, the exact count is asserted and the comment says why.
//!
//! To see where an unexpected allocation comes from, run with `SLUICE_ALLOC_TRACE=1`
//! (`cargo test --test it alloc:: -- --nocapture --test-threads 1`): every allocation made
//! while measuring prints its size and backtrace.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sluice::alloc_stats::{set_thread_hook, thread_allocations};
use sluice::server::Shared;
use sluice::server::connection::{Transport, serve};
use sluice::{Clock, Config};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Requests run before counting: buffers and tables reach their working size.
const WARMUP: usize = 200;
/// Requests counted.
const MEASURED: usize = 500;

/// Both ends of the in-memory connection: what the client sent and the server has not read
/// yet, and what the server wrote.
#[derive(Default)]
struct Pipe {
    input: Vec<u8>,
    read_at: usize,
    output: Vec<u8>,
    eof: bool,
    /// The server waits for input (its read returned Pending with nothing left).
    waiting: bool,
    reader: Option<Waker>,
}

/// The server's end: a `Transport` over the pipe, allocation-free once the vectors are
/// grown.
struct Mem(Rc<RefCell<Pipe>>);

impl AsyncRead for Mem {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut p = self.0.borrow_mut();
        let Pipe {
            input,
            read_at,
            eof,
            waiting,
            reader,
            ..
        } = &mut *p;
        if *read_at < input.len() {
            let n = (input.len() - *read_at).min(buf.remaining());
            buf.put_slice(&input[*read_at..*read_at + n]);
            *read_at += n;
            if *read_at == input.len() {
                input.clear();
                *read_at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        if *eof {
            return Poll::Ready(Ok(()));
        }
        *waiting = true;
        if !reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *reader = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl AsyncWrite for Mem {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.borrow_mut().output.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Transport for Mem {}

/// Returns Pending once (waking itself), so `join!` polls the server again.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// What a request's replies must be.
enum Expect {
    Exact(Vec<u8>),
    Prefix(Vec<u8>),
}

/// One request (a batch of commands sent in one write) with its expected replies.
struct Step {
    request: Vec<u8>,
    expect: Expect,
    /// Moves the server's clock forward before the request.
    advance: Duration,
}

fn command(parts: &[&[u8]]) -> Vec<u8> {
    crate::support::encode_command(parts)
}

fn null(resp: u8) -> &'static [u8] {
    if resp == 3 { b"_\r\n" } else { b"$-1\r\n" }
}

/// Runs `setup` (not counted), then `steps(i)` for i in 0..WARMUP+MEASURED through one
/// connection, checking every reply; returns the allocations the measured steps made.
fn allocations(resp: u8, setup: &[Vec<u8>], steps: impl Fn(usize) -> Step) -> u64 {
    // Not test mode: its command log records every request. No SLOWLOG: on a loaded
    // machine a request may pass its threshold, and an entry is stored (allocated).
    let config = Config {
        slowlog_log_slower_than: -1,
        ..Config::default()
    };
    let clock = Clock::frozen();
    let shared = Arc::new(Shared::new(config, clock));
    let steps: Vec<Step> = (0..WARMUP + MEASURED).map(steps).collect();
    let pipe = Rc::new(RefCell::new(Pipe {
        input: Vec::with_capacity(64 * 1024),
        output: Vec::with_capacity(64 * 1024),
        ..Pipe::default()
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let trace = std::env::var_os("SLUICE_ALLOC_TRACE").is_some();
    let server = serve(
        shared.clone(),
        Mem(pipe.clone()),
        "127.0.0.1:40000".into(),
        "127.0.0.1:6379".into(),
    );
    let client = async {
        // Sends `request`, then lets the server run until it waits for more input.
        let exchange = |request: &[u8]| {
            let pipe = &pipe;
            {
                let mut p = pipe.borrow_mut();
                p.output.clear();
                p.input.extend_from_slice(request);
                p.waiting = false;
                if let Some(w) = &p.reader {
                    w.wake_by_ref();
                }
            }
            async move {
                loop {
                    YieldOnce(false).await;
                    let p = pipe.borrow();
                    if p.waiting && p.input.is_empty() {
                        break;
                    }
                }
            }
        };
        let hello = command(&[b"HELLO", if resp == 3 { b"3" } else { b"2" }]);
        exchange(&hello).await;
        for request in setup {
            exchange(request).await;
            let p = pipe.borrow();
            assert!(
                !p.output.starts_with(b"-"),
                "setup failed: {}",
                String::from_utf8_lossy(&p.output)
            );
        }
        let mut before = 0;
        for (i, step) in steps.iter().enumerate() {
            if i == WARMUP {
                before = thread_allocations();
                if trace {
                    set_thread_hook(Some(print_allocation));
                }
            }
            if !step.advance.is_zero() {
                shared.clock.advance(step.advance).unwrap();
            }
            exchange(&step.request).await;
            let p = pipe.borrow();
            let ok = match &step.expect {
                Expect::Exact(e) => p.output == *e,
                Expect::Prefix(e) => p.output.starts_with(e),
            };
            if !ok {
                set_thread_hook(None);
                panic!(
                    "step {i}: {:?} answered {:?}",
                    String::from_utf8_lossy(&step.request),
                    String::from_utf8_lossy(&p.output)
                );
            }
        }
        let after = thread_allocations();
        set_thread_hook(None);
        pipe.borrow_mut().eof = true;
        if let Some(w) = &pipe.borrow().reader {
            w.wake_by_ref();
        }
        after - before
    };
    let ((), counted) = runtime.block_on(async { tokio::join!(server, client) });
    counted
}

fn print_allocation(size: usize) {
    eprintln!(
        "allocation of {size} bytes:\n{}",
        std::backtrace::Backtrace::force_capture()
    );
}

/// Asserts `allocations` is `expected` per measured request, in both protocols.
fn assert_per_request(
    name: &str,
    expected: u64,
    setup: &[Vec<u8>],
    steps: impl Fn(u8, usize) -> Step,
) {
    for resp in [2, 3] {
        let got = allocations(resp, setup, |i| steps(resp, i));
        assert_eq!(
            got,
            expected * MEASURED as u64,
            "{name} (RESP{resp}): {got} allocations in {MEASURED} requests, expected {expected} each"
        );
    }
}

fn exact(request: Vec<u8>, reply: Vec<u8>) -> Step {
    Step {
        request,
        expect: Expect::Exact(reply),
        advance: Duration::ZERO,
    }
}

#[test]
fn get_and_set_allocate_nothing() {
    // The seeds' getset workload: a 3-byte value, stored inline in the key's entry.
    assert_per_request("GET/SET", 0, &[], |_, i| {
        if i % 2 == 0 {
            exact(command(&[b"SET", b"k", b"xyz"]), b"+OK\r\n".to_vec())
        } else {
            exact(command(&[b"GET", b"k"]), b"$3\r\nxyz\r\n".to_vec())
        }
    });
    // A GET of a counter (its text is made inside the reply).
    assert_per_request(
        "GET of an integer",
        0,
        &[command(&[b"INCR", b"n"])],
        |_, _| exact(command(&[b"GET", b"n"]), b"$1\r\n1\r\n".to_vec()),
    );
    // A GET of a missing key, and of a value too long to be stored inline (the reply shares
    // the stored bytes).
    let long = vec![b'v'; 100];
    let mut long_reply = b"$100\r\n".to_vec();
    long_reply.extend_from_slice(&long);
    long_reply.extend_from_slice(b"\r\n");
    assert_per_request(
        "GET",
        0,
        &[command(&[b"SET", b"long", &long])],
        |resp, i| {
            if i % 2 == 0 {
                exact(command(&[b"GET", b"long"]), long_reply.clone())
            } else {
                exact(command(&[b"GET", b"missing"]), null(resp).to_vec())
            }
        },
    );
}

#[test]
fn fixed_window_allocates_nothing() {
    // SET k 0 EX 60 NX + INCR k in one write (the seeds' fixed window); the key exists after
    // the first request, so SET answers nil and INCR changes the integer in place.
    assert_per_request("SET NX EX + INCR", 0, &[], |resp, i| {
        let mut request = command(&[b"SET", b"k", b"0", b"EX", b"60", b"NX"]);
        request.extend_from_slice(&command(&[b"INCR", b"k"]));
        let mut reply = if i == 0 {
            b"+OK\r\n".to_vec()
        } else {
            null(resp).to_vec()
        };
        reply.extend_from_slice(format!(":{}\r\n", i + 1).as_bytes());
        exact(request, reply)
    });
    assert_per_request("EXPIRE", 0, &[command(&[b"SET", b"k", b"1"])], |_, _| {
        exact(command(&[b"EXPIRE", b"k", b"60"]), b":1\r\n".to_vec())
    });
}

/// The seeds' sliding window: MULTI; ZADD k now now; ZREMRANGEBYSCORE k 0 now-window;
/// ZCARD k; EXPIRE k window+1; EXEC, one request every 100 ms of a 1 s window (so the set
/// keeps 10 members).
fn sliding(i: usize) -> Step {
    let now = (1_700_000_000_000 + 100 * i as u64).to_string();
    let cutoff = (1_700_000_000_000 + 100 * i as u64 - 1000).to_string();
    let mut request = command(&[b"MULTI"]);
    request.extend_from_slice(&command(&[b"ZADD", b"k", now.as_bytes(), now.as_bytes()]));
    request.extend_from_slice(&command(&[
        b"ZREMRANGEBYSCORE",
        b"k",
        b"0",
        cutoff.as_bytes(),
    ]));
    request.extend_from_slice(&command(&[b"ZCARD", b"k"]));
    request.extend_from_slice(&command(&[b"EXPIRE", b"k", b"2"]));
    request.extend_from_slice(&command(&[b"EXEC"]));
    let removed = usize::from(i >= 10);
    let card = (i + 1).min(10);
    let reply = format!(
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n:1\r\n:{removed}\r\n:{card}\r\n:1\r\n"
    );
    exact(request, reply.into_bytes())
}

#[test]
fn sliding_window_allocates_nothing() {
    // ZADD stores a new member each time, but in the sorted set's packed buffer, which was
    // grown during the warm-up and is edited in place as the oldest member leaves. The
    // queued commands keep their slices of the read buffer until EXEC: when a transaction
    // straddles the end of that buffer, the connection's second buffer takes over (the
    // measured requests pass the end of the buffer several times).
    assert_per_request("sliding window (MULTI ... EXEC)", 0, &[], |_, i| sliding(i));
}

#[test]
fn sorted_set_commands_allocate_nothing() {
    let setup = [command(&[
        b"ZADD", b"z", b"1", b"a", b"2", b"b", b"3", b"c",
    ])];
    assert_per_request(
        "ZADD (update) / ZCARD / ZREMRANGEBYSCORE",
        0,
        &setup,
        |_, i| match i % 3 {
            0 => exact(
                command(&[b"ZADD", b"z", if i % 2 == 0 { b"5" } else { b"6" }, b"b"]),
                b":0\r\n".to_vec(),
            ),
            1 => exact(command(&[b"ZCARD", b"z"]), b":3\r\n".to_vec()),
            _ => exact(
                command(&[b"ZREMRANGEBYSCORE", b"z", b"100", b"200"]),
                b":0\r\n".to_vec(),
            ),
        },
    );
}

#[test]
fn cl_throttle_allocates_nothing() {
    // An existing key, allowed every time: one request per emission interval (2 s).
    assert_per_request("CL.THROTTLE (allowed)", 0, &[], |_, _| Step {
        request: command(&[b"CL.THROTTLE", b"t", b"15", b"30", b"60", b"1"]),
        expect: Expect::Prefix(b"*5\r\n:0\r\n:16\r\n".to_vec()),
        advance: Duration::from_secs(2),
    });
    // Limited every time once the burst is spent (the clock does not move).
    assert_per_request("CL.THROTTLE (limited)", 0, &[], |_, i| Step {
        request: command(&[b"CL.THROTTLE", b"t", b"15", b"30", b"60", b"1"]),
        expect: Expect::Prefix(if i < 16 {
            b"*5\r\n:0\r\n:16\r\n".to_vec()
        } else {
            b"*5\r\n:1\r\n:16\r\n:0\r\n".to_vec()
        }),
        advance: Duration::ZERO,
    });
}
