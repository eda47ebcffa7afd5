//! A full resynchronization's snapshot: made on a thread of its own (never on an event
//! loop), one at a time, and shared by every replica (or any client sending PSYNC or SYNC)
//! that asks while it is being made, or while a finished one is still being sent to some
//! replica and still lines up with the backlog. So eight replicas asking at once cost one
//! copy of the data, not eight, and the loops keep serving while it is made (Redis makes one
//! RDB for all the replicas waiting at that moment).
//!
//! The snapshot is the RDB payload and the stream offset it stands for, taken in one hold of
//! every shard (the copy is serialized after the hold, see `rdb::snapshot`). It is freed
//! when the last replica sending it lets go: the broker keeps only a weak reference to a
//! finished one. Sending it is `repl::master`'s work, in chunks, under `repl-timeout`.

use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use tokio::sync::watch;

use super::Repl;
use crate::rdb::snapshot::{self, SaveOptions};
use crate::store::Keyspace;

/// A finished snapshot: the RDB payload and where in the stream it stands.
#[derive(Debug)]
pub(crate) struct Made {
    /// The RDB file's bytes.
    pub(crate) payload: Bytes,
    /// The stream offset the payload corresponds to (the stream continues after it).
    pub(crate) offset: u64,
    /// The replication id the offset belongs to.
    pub(crate) replid: String,
}

/// Where a replica gets its snapshot from.
#[derive(Debug)]
pub(crate) enum Ticket {
    /// One that is finished and still usable.
    Ready(Arc<Made>),
    /// One being made: the value turns `Some` when it is done (the channel closes if the
    /// maker died).
    Wait(watch::Receiver<Option<Arc<Made>>>),
}

#[derive(Debug, Default)]
enum Current {
    /// No snapshot.
    #[default]
    None,
    /// Being made.
    Making(watch::Receiver<Option<Arc<Made>>>),
    /// Made; alive while some replica is still being sent it.
    Done(Weak<Made>),
}

/// The one snapshot for full resynchronizations, being made or being sent.
#[derive(Debug, Default)]
pub(crate) struct Broker {
    current: Mutex<Current>,
}

/// What a snapshot needs besides the data (read from the server's state by the caller).
#[derive(Debug)]
pub(crate) struct Inputs {
    /// The keyspace to copy.
    pub(crate) keyspace: Arc<Keyspace>,
    /// The function libraries' code.
    pub(crate) functions: Vec<Bytes>,
    /// The RDB's header fields.
    pub(crate) opts: SaveOptions,
}

impl Broker {
    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The snapshot a full resynchronization should send: the one being made, a finished
    /// one still in use whose offset the backlog still continues, or a new one, started on
    /// its own thread with `inputs()` (read only when one is started). Err if the thread
    /// could not be started.
    pub(crate) fn ticket(
        &self,
        repl: &Arc<Repl>,
        inputs: impl FnOnce() -> Inputs,
    ) -> std::io::Result<Ticket> {
        let mut current = self.lock();
        match &*current {
            Current::Making(rx) if rx.has_changed().is_ok() => {
                if let Some(made) = rx.borrow().clone() {
                    return Ok(Ticket::Ready(made));
                }
                return Ok(Ticket::Wait(rx.clone()));
            }
            Current::Done(weak) => {
                if let Some(made) = weak.upgrade()
                    && still_continues(repl, &made)
                {
                    return Ok(Ticket::Ready(made));
                }
            }
            _ => {}
        }
        let (tx, rx) = watch::channel(None);
        let inputs = inputs();
        let repl = repl.clone();
        std::thread::Builder::new()
            .name("sluice-fullsync".into())
            .spawn(move || {
                let made = Arc::new(make(&repl, inputs));
                tracing::info!(
                    "Snapshot for replicas made ({} bytes, offset {})",
                    made.payload.len(),
                    made.offset
                );
                // Kept weakly from now on: the replicas being sent it hold it.
                *repl.fullsync.lock() = Current::Done(Arc::downgrade(&made));
                let _ = tx.send(Some(made));
            })?;
        *current = Current::Making(rx.clone());
        Ok(Ticket::Wait(rx))
    }
}

/// True if the stream after `made` can still be sent: same history, and the backlog still
/// holds the byte after its offset.
pub(crate) fn still_continues(repl: &Repl, made: &Made) -> bool {
    let f = repl.feed();
    f.replid == made.replid && made.offset <= f.offset && made.offset + 1 >= f.backlog_first()
}

/// Copies every shard in one hold, reads the offset in it, releases, serializes.
fn make(repl: &Repl, inputs: Inputs) -> Made {
    let mut store = inputs.keyspace.lock_all();
    let copies = snapshot::copy_locked(&mut store, 0);
    let (offset, replid) = {
        let mut f = repl.feed();
        // The stream after a snapshot starts with a SELECT.
        f.reset_db();
        (f.offset, f.replid.clone())
    };
    drop(store);
    let mut payload = Vec::new();
    if let Err(e) = snapshot::write_copies(
        inputs.functions.iter().map(|c| &c[..]),
        &inputs.opts,
        &mut payload,
        copies,
    ) {
        // Writing into memory does not fail; keep the replica's load refusing a cut file.
        tracing::warn!("full resynchronization payload: {e}");
    }
    Made {
        payload: payload.into(),
        offset,
        replid,
    }
}
