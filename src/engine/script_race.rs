//! Test support: a connection racing a simulated script for one shard.
//!
//! The busy-script window (a request that passed the busy gate before a script took its
//! shard) is tested the same way wherever a handler locks shards: a connection thread runs
//! requests while the test's main thread plays the script, marked busy on the shard and
//! holding its lock, at the moments the connection cues. The outcome then does not depend
//! on timing: a request that waited on the script's lock would never answer, and the test
//! fails on the script's timeout instead of hanging.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;

use crate::client::ClientState;
use crate::engine::{Next, execute_may_block};
use crate::protocol::Reply;
use crate::script::Held;
use crate::server::Shared;

/// How long the script waits for the connection's next cue: only a connection stuck on
/// the script's lock takes this long.
const CUE_TIMEOUT: Duration = Duration::from_secs(20);

/// What the connection asks of the script.
#[derive(Debug, PartialEq)]
enum Cue {
    /// Run: marked busy on the shard, holding its lock.
    Take,
    /// End the script: unlock, then unmark.
    End,
    /// Hold the shard's lock as a command does (no script), released a moment later.
    HoldAsCommand,
    /// The connection is done.
    Done,
}

/// The connection's side: each call returns once the script has done what it asks.
pub(crate) struct Script {
    to_script: Sender<Cue>,
    from_script: Receiver<()>,
}

impl Script {
    fn cue(&self, cue: Cue) {
        self.to_script.send(cue).unwrap();
        self.from_script.recv().unwrap();
    }

    /// A script starts on the shard: marked busy on it and holding its lock.
    pub(crate) fn take(&self) {
        self.cue(Cue::Take);
    }

    /// The script ends: its lock is released and it is no longer busy.
    pub(crate) fn end(&self) {
        self.cue(Cue::End);
    }

    /// A command (no script) holds the shard's lock; it lets go 50 ms later.
    pub(crate) fn hold_as_command(&self) {
        self.cue(Cue::HoldAsCommand);
    }
}

/// Runs `connection` on a thread of its own for a newly registered client, as the client's
/// connection would; its result comes with the thread's join.
pub(crate) fn on_a_connection<T: Send + 'static>(
    shared: &Arc<Shared>,
    connection: impl FnOnce(&Shared, &mut ClientState) -> T + Send + 'static,
) -> JoinHandle<T> {
    let shared = shared.clone();
    std::thread::spawn(move || connection(&shared, &mut crate::engine::tests::client(&shared)))
}

/// Runs `args` as a connection would (it can wait): the reply, and whether the request
/// was sent back to the busy gate. None of these requests block on a key.
pub(crate) fn run(shared: &Shared, client: &mut ClientState, args: &[&str]) -> (Reply, bool) {
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
    let ran = execute_may_block(shared, client, &crate::engine::args::borrowed(&args));
    assert!(!matches!(ran.next, Next::Block(_)), "{:?}", ran.reply);
    (ran.reply, matches!(ran.next, Next::Regate))
}

/// Runs `connection` on a thread of its own, as a registered client, while this thread
/// plays the script on `shard` whenever the connection cues it; returns when the
/// connection has finished. Fails if the connection gives no cue for [`CUE_TIMEOUT`]
/// (it waited on the script's lock) or panics.
pub(crate) fn race_a_script(
    shared: &Arc<Shared>,
    shard: usize,
    connection: impl FnOnce(&Shared, &mut ClientState, &Script) + Send + 'static,
) {
    let (to_script, cues) = channel();
    let (to_client, from_script) = channel();
    let thread = on_a_connection(shared, move |shared, client| {
        let script = Script {
            to_script,
            from_script,
        };
        connection(shared, client, &script);
        // Sent only when the connection returned: a panic there ends the wait below
        // with a disconnect rather than a cue.
        script.to_script.send(Cue::Done).unwrap();
    });
    let next = || match cues.recv_timeout(CUE_TIMEOUT) {
        Ok(cue) => Some(cue),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("a request waited on the script's shard lock")
        }
        // The connection panicked: its join below says why.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
    };
    while let Some(cue) = next() {
        match cue {
            Cue::Take => {
                let running = shared
                    .scripts
                    .busy
                    .begin_as(None, Held::Some([shard].into_iter().collect()));
                let lock = shared.keyspace.lock_indexes(&[shard]);
                to_client.send(()).unwrap();
                assert_eq!(
                    next(),
                    Some(Cue::End),
                    "the script ends before anything else"
                );
                drop(lock);
                drop(running);
                to_client.send(()).unwrap();
            }
            Cue::HoldAsCommand => {
                let lock = shared.keyspace.lock_indexes(&[shard]);
                to_client.send(()).unwrap();
                // Released a moment later, as a command's hold is.
                std::thread::sleep(Duration::from_millis(50));
                drop(lock);
            }
            Cue::End => panic!("the script ended without having started"),
            Cue::Done => break,
        }
    }
    thread.join().unwrap();
}
