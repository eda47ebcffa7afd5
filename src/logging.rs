//! Where the binary's log goes: standard error or `logfile`, written by a thread of its own.
//!
//! Owns the log sink only (formatting is tracing-subscriber's). Logging must never stop the
//! server: a log line is handed to the writer thread without waiting, and dropped if the
//! thread is behind (a stderr pipe nobody reads fills up), and write errors (the reader of
//! the pipe has gone: EPIPE) are ignored. So a closed or stuck stderr can neither block a
//! worker thread nor kill the task that handles SIGTERM. Uses nothing else of the crate.

use std::io::{self, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// Lines that may wait for the writer thread before new ones are dropped.
const QUEUE_LINES: usize = 4096;

enum Msg {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// The sink: cheap to clone, one per log event (tracing-subscriber's `MakeWriter`).
#[derive(Clone)]
pub struct LogSink {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
}

impl LogSink {
    /// Starts the writer thread over `out` (stderr, or the opened logfile).
    pub fn spawn(out: Box<dyn Write + Send>) -> io::Result<LogSink> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_LINES);
        std::thread::Builder::new()
            .name("sluice-log".into())
            .spawn(move || write_loop(out, rx))?;
        Ok(LogSink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Waits at most `limit` for the lines queued so far to be written (at exit).
    pub fn flush(&self, limit: Duration) {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        if self.tx.try_send(Msg::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(limit);
        }
    }

    /// Lines dropped because the writer was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn write_loop(mut out: Box<dyn Write + Send>, rx: Receiver<Msg>) {
    for msg in rx {
        match msg {
            // Errors are ignored on purpose: there is nowhere left to report them.
            Msg::Line(line) => {
                let _ = out.write_all(&line);
            }
            Msg::Flush(ack) => {
                let _ = out.flush();
                let _ = ack.try_send(());
            }
        }
    }
}

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.tx.try_send(Msg::Line(buf.to_vec())) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = LogSink;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Whether log lines to standard error should carry ANSI colours: only on a terminal, and
/// not when `NO_COLOR` is set to anything non-empty (no-color.org).
pub fn stderr_wants_colour() -> bool {
    colour_allowed(
        std::env::var_os("NO_COLOR").as_deref(),
        io::stderr().is_terminal(),
    )
}

fn colour_allowed(no_color: Option<&std::ffi::OsStr>, terminal: bool) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour_allowed(None, true));
        assert!(colour_allowed(Some(OsStr::new("")), true));
        assert!(!colour_allowed(Some(OsStr::new("1")), true));
        assert!(!colour_allowed(None, false));
    }

    /// A writer that fails every write, like a pipe whose reader has gone.
    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn a_broken_sink_neither_fails_nor_blocks_the_logger() {
        let mut sink = LogSink::spawn(Box::new(Broken)).unwrap();
        for _ in 0..10 * QUEUE_LINES {
            assert_eq!(sink.write(b"line\n").unwrap(), 5);
        }
        sink.flush(Duration::from_millis(200));
    }

    /// A writer that never returns, like a full pipe nobody reads.
    struct Stuck(Receiver<()>);
    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.0.recv(); // returns once the test drops the sender
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_sink_drops_lines_instead_of_blocking() {
        let (release, stuck) = mpsc::channel();
        let mut sink = LogSink::spawn(Box::new(Stuck(stuck))).unwrap();
        for _ in 0..2 * QUEUE_LINES {
            sink.write_all(b"line\n").unwrap();
        }
        assert!(sink.dropped() > 0);
        let t = std::time::Instant::now();
        sink.flush(Duration::from_millis(100));
        assert!(t.elapsed() < Duration::from_secs(2));
        // Let the writer thread go (it then drains the queue and waits for more).
        drop(release);
    }
}
