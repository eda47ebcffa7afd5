//! What a client's command leaves its connection to do: [`Next`], returned with the reply
//! in `Ran` by `engine::execute_may_block`.
//!
//! A handler never reaches into the connection. It says what comes after its reply by
//! setting `Ctx::next` (QUIT: close; MONITOR: become a feed; PSYNC: become a replica's
//! feed; WAIT: wait for acknowledgements; a blocking pop that blocked: wait for the
//! waiter), and the connection loops (`server::connection`, the event loop's
//! `server::eventloop::serve`) match on the value once the command returns. The value lives
//! for one request: nothing is left on the client for the next command to trip over.
//!
//! Two things are not a mode of the connection but wrap the reply whatever comes next, so
//! they sit beside [`Next`] in `Ran`: how long the reply is held (DEBUG SLEEP, FAULT
//! LATENCY; counted as the command's own time) and a test fault's disconnect after it.
//!
//! `Next::Continue`, the hot path's value, holds nothing: returning it allocates nothing.

use std::sync::Arc;
use std::time::Duration;

use crate::protocol::Reply;
use crate::services::blocking::Waiter;

/// What the connection does once a command returned.
#[derive(Debug, Default)]
pub enum Next {
    /// Write the reply, read the next request.
    #[default]
    Continue,
    /// Write the reply, then close (QUIT, CLIENT KILL of itself, ACL removing its user).
    Close,
    /// Close without writing the reply (SHUTDOWN, as Redis).
    CloseWithoutReply,
    /// The request did not run: a script took a shard it needs after it passed the busy
    /// gate. The connection sends it through the gate again (see `engine::call`); the
    /// reply is a placeholder.
    Regate,
    /// A blocking command found nothing and registered this waiter: the connection waits
    /// for the waiter's reply, holding no lock (see `services::blocking`); the reply is a
    /// placeholder.
    Block(Arc<Waiter>),
    /// Write the reply (MONITOR's `+OK`), then stream the MONITOR feed.
    Monitor,
    /// PSYNC/SYNC: the connection becomes a replica's feed (see `repl::master`). An empty
    /// `replid` is SYNC.
    Replicate {
        /// The replication id the replica asked for.
        replid: String,
        /// The offset it asked for.
        offset: i64,
    },
    /// WAIT that must wait: flush, wait for `replicas` acknowledgements of `offset` (or
    /// `timeout_ms`; 0 waits forever), and reply how many came instead.
    WaitAcks {
        /// How many replicas must acknowledge.
        replicas: u64,
        /// The timeout in ms (0: none).
        timeout_ms: u64,
        /// The replication offset to acknowledge.
        offset: u64,
    },
}

/// A client's request, run: the reply, what the connection does next, and what wraps the
/// reply whatever comes next.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The reply (a placeholder for [`Next::Regate`] and [`Next::Block`]).
    pub(crate) reply: Reply,
    /// What the connection does next.
    pub(crate) next: Next,
    /// Hold the reply this long before writing it (DEBUG SLEEP, FAULT LATENCY).
    pub(crate) hold: Duration,
    /// FAULT DISCONNECT: close the connection once this reply is written.
    pub(crate) disconnect: bool,
}

impl Ran {
    /// A reply with nothing after it (a request refused before it ran).
    pub(crate) fn reply(reply: Reply) -> Ran {
        Ran {
            reply,
            next: Next::Continue,
            hold: Duration::ZERO,
            disconnect: false,
        }
    }
}
