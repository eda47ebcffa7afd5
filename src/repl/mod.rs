//! Replication on Redis's protocol: the role (master, or replica of a host), the write
//! stream with its backlog, the replicas attached to this node, and the two connections
//! (`master.rs`: serving a replica after its PSYNC; `replica.rs`: this node's link to its
//! master).
//!
//! Two halves on two floors. The state here and `effects` (what a command propagates) sit
//! below `cmd`: `engine::execute`, EXEC and the script host note each write's effects in
//! `Ctx::propagate`, and `execute` feeds them to [`Repl::feed`] *while it still holds the
//! command's shard locks*, so two writes to one key reach the stream in the order they
//! were applied. The feed's mutex is a leaf (taken briefly, never while locking a shard).
//! Keys the store deletes on its own (expiry, eviction) reach the stream as DEL through
//! the keyspace's deletion hook, also under the key's shard lock. `master` and `replica`
//! sit beside `server`: they own sockets and run commands through `cmd`.
//!
//! `failover.rs` is the FAILOVER command's coordinated switch (sitting beside `server`, like
//! `master` and `replica`).
//!
//! Offsets are Redis's: the count of stream bytes since the replication id began. A
//! replica appends what it applies from its master to its own backlog verbatim, so its
//! offset is its master's, a promoted replica keeps the old id as `master_replid2`, and a
//! replica of it can continue (`+CONTINUE`) instead of loading everything again.

pub(crate) mod effects;
pub(crate) mod failover;
pub(crate) mod fullsync;
pub(crate) mod master;
pub(crate) mod replica;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

/// A 40-hex-digit replication id.
pub(crate) fn new_replid() -> String {
    (0..40)
        .map(|_| format!("{:x}", rand::random::<u8>() & 0xf))
        .collect()
}

/// The RESP encoding of a command, as the stream carries it: a client's request encoding.
pub(crate) use crate::protocol::request::encode as encode_command;

/// The write stream: ids, offset, the backlog of its last bytes.
#[derive(Debug)]
pub struct Feed {
    /// The current replication id.
    pub replid: String,
    /// The id this node followed before its last promotion (zeros if none).
    pub replid2: String,
    /// The first offset not valid under `replid2` (-1 if none).
    pub second_offset: i64,
    /// Bytes of the stream so far (`master_repl_offset`).
    pub offset: u64,
    backlog: VecDeque<u8>,
    capacity: usize,
    /// The database the stream last SELECTed (None: the next command selects).
    db: Option<usize>,
}

impl Feed {
    fn new(capacity: usize) -> Self {
        Feed {
            replid: new_replid(),
            replid2: "0".repeat(40),
            second_offset: -1,
            offset: 0,
            backlog: VecDeque::new(),
            capacity,
            db: None,
        }
    }

    /// The first offset the backlog holds (offset + 1 of the byte before it).
    pub fn backlog_first(&self) -> u64 {
        self.offset - self.backlog.len() as u64 + 1
    }

    /// The backlog's size (`repl-backlog-size`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes in the backlog.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// Appends raw stream bytes.
    pub fn append(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        self.backlog.extend(bytes);
        let over = self.backlog.len().saturating_sub(self.capacity);
        if over > 0 {
            self.backlog.drain(..over);
        }
    }

    fn append_command(&mut self, db: usize, argv: &[impl AsRef<[u8]>], scratch: &mut Vec<u8>) {
        if self.db != Some(db) {
            encode_command(
                scratch,
                &[Bytes::from_static(b"SELECT"), db.to_string().into()],
            );
            self.db = Some(db);
        }
        encode_command(scratch, argv);
    }

    /// The stream after `from` (an offset already sent), or None if the backlog no longer
    /// holds it.
    pub fn since(&self, from: u64) -> Option<Vec<u8>> {
        self.since_at_most(from, usize::MAX)
    }

    /// `since`, at most `max` bytes of it (a caller sending it a piece at a time copies
    /// no more than a piece under the feed's lock).
    pub fn since_at_most(&self, from: u64, max: usize) -> Option<Vec<u8>> {
        if from > self.offset || from + 1 < self.backlog_first() {
            return None;
        }
        let skip = (from + 1 - self.backlog_first()) as usize;
        Some(self.backlog.range(skip..).take(max).copied().collect())
    }

    /// Forgets the stream's current database (after a full resync: the next command
    /// SELECTs).
    pub fn reset_db(&mut self) {
        self.db = None;
    }

    /// Sets the backlog's size.
    pub fn resize(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        let over = self.backlog.len().saturating_sub(self.capacity);
        self.backlog.drain(..over);
    }

    /// Starts a new history (`REPLICAOF NO ONE`, or a fresh master): the old id stays valid
    /// up to the current offset as `replid2`.
    pub fn shift_replid(&mut self) {
        self.replid2 = std::mem::replace(&mut self.replid, new_replid());
        self.second_offset = self.offset as i64 + 1;
        self.db = None;
    }

    /// Adopts a master's history after a full resync: its id, its offset, an empty
    /// backlog.
    pub fn adopt(&mut self, replid: &str, offset: u64) {
        self.replid = replid.to_string();
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
        self.offset = offset;
        self.backlog.clear();
        self.db = None;
    }
}

/// A replica attached to this node.
#[derive(Debug)]
pub struct Attached {
    /// Its client id (CLIENT KILL reaches it).
    pub client: u64,
    /// The address Sentinel and INFO show (`replica-announce-ip` or the peer's).
    pub ip: String,
    /// Its listening port (REPLCONF listening-port).
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: &'static str,
    /// The last offset it acknowledged.
    pub ack: AtomicU64,
    /// When it last acknowledged.
    pub ack_at: Mutex<Instant>,
}

/// The link of a replica to its master, as INFO and ROLE show it.
#[derive(Debug, Clone)]
pub struct Link {
    /// The master's host.
    pub host: String,
    /// The master's port.
    pub port: u16,
    /// `connect`, `connecting`, `sync` or `connected` (ROLE's words).
    pub state: &'static str,
    /// When data last came from the master.
    pub last_io: Option<Instant>,
    /// Since when the link is down (None while connected).
    pub down_since: Option<Instant>,
    /// Stops the link task.
    pub stop: CancellationToken,
}

/// Where a FAILOVER is (`failover.rs` moves it on).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum FailoverState {
    /// None.
    #[default]
    None,
    /// Writes are held until a replica has the whole stream.
    WaitForSync,
    /// This node follows the target and asks it to take over.
    InProgress,
}

impl FailoverState {
    /// INFO's `master_failover_state`.
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// A FAILOVER's request and progress.
#[derive(Debug, Default, Clone)]
pub struct Failover {
    /// Where it is.
    pub state: FailoverState,
    /// The replica that takes over (named by TO, or the first one found caught up).
    pub target: Option<(String, u16)>,
    /// When the wait ends (server clock, Unix ms), if TIMEOUT was given.
    pub end_ms: Option<u64>,
    /// FORCE: at the end of the wait, fail over to the target even if it is behind.
    pub force: bool,
}

/// Replication's state in `Shared`.
#[derive(Debug)]
pub struct Repl {
    feed: Mutex<Feed>,
    /// Set once a replica has attached: from then on writes are propagated (Redis creates
    /// its backlog with the first replica).
    active: AtomicBool,
    /// The stream's offset, for the tasks sending it (they wait for it to move).
    pub grown: tokio::sync::watch::Sender<u64>,
    /// Replicas attached to this node.
    pub replicas: Mutex<Vec<Arc<Attached>>>,
    /// Woken when a replica acknowledges (WAIT).
    pub acked: tokio::sync::Notify,
    /// Set while this node is a replica: its link to its master.
    pub link: Mutex<Option<Link>>,
    /// True while a full resynchronization is being loaded (INFO `loading`).
    pub loading: AtomicBool,
    /// Bumped when REPLICAOF names a master: the supervisor starts a link.
    pub link_changed: tokio::sync::watch::Sender<u64>,
    /// This node followed a master once (its id and offset are a history to continue).
    pub had_master: AtomicBool,
    /// The database the master's stream has selected on this replica (kept across links,
    /// since a partial resynchronization continues the stream where it was).
    pub master_db: std::sync::atomic::AtomicUsize,
    /// A FAILOVER in progress (see `failover`).
    pub failover: Mutex<Failover>,
    /// The snapshot full resynchronizations share (see `fullsync`).
    pub(crate) fullsync: fullsync::Broker,
    /// The append-only file, fed the same effects as the stream (see `crate::aof`).
    pub(crate) aof: Arc<crate::aof::Aof>,
    /// Replicas good for `min-replicas-to-write` when last counted (Redis's
    /// `repl_good_slaves_count`; see `refresh_good_replicas`).
    good: AtomicU64,
    /// The stream's offset just after the last REPLCONF GETACK that `request_acks` put in
    /// it (0: none, or a replica attached since).
    getack_end: AtomicU64,
    /// Where that GETACK starts: what a replica answering it acknowledges.
    getack_start: AtomicU64,
    /// The origin of the whole seconds lags are judged in.
    epoch: Instant,
}

impl Repl {
    /// Fresh state: a master with a new id and an inactive backlog of `backlog` bytes.
    pub fn new(backlog: usize) -> Self {
        Repl {
            feed: Mutex::new(Feed::new(backlog)),
            active: AtomicBool::new(false),
            grown: tokio::sync::watch::Sender::new(0),
            replicas: Mutex::new(Vec::new()),
            acked: tokio::sync::Notify::new(),
            link: Mutex::new(None),
            loading: AtomicBool::new(false),
            link_changed: tokio::sync::watch::Sender::new(0),
            had_master: AtomicBool::new(false),
            master_db: std::sync::atomic::AtomicUsize::new(0),
            failover: Mutex::new(Failover::default()),
            fullsync: fullsync::Broker::default(),
            aof: Arc::new(crate::aof::Aof::new()),
            good: AtomicU64::new(0),
            getack_end: AtomicU64::new(0),
            getack_start: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// The feed, locked (a leaf lock: never lock a shard while holding it).
    pub fn feed(&self) -> std::sync::MutexGuard<'_, Feed> {
        self.feed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether writes are being propagated.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether writes' effects are wanted: by replicas or by the append-only file.
    #[inline]
    pub fn propagating(&self) -> bool {
        self.active() || self.aof.on()
    }

    /// Starts propagating (the first replica attached).
    pub fn activate(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    /// Whether this node is a replica.
    pub fn is_replica(&self) -> bool {
        self.link
            .lock()
            .map(|l| l.is_some())
            .unwrap_or_else(|e| e.into_inner().is_some())
    }

    /// A copy of the link's state, if this node is a replica.
    pub fn link(&self) -> Option<Link> {
        self.link.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Updates the link's state (no-op if not a replica any more).
    pub fn update_link(&self, f: impl FnOnce(&mut Link)) {
        if let Some(l) = self.link.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            f(l);
        }
    }

    /// Appends one call's effects to the stream: one command as is, several wrapped in
    /// MULTI/EXEC (Redis 7's effects replication of scripts and transactions). Called with
    /// the command's shard locks held.
    pub fn propagate(&self, cmds: &[(usize, Vec<Bytes>)]) {
        if cmds.is_empty() {
            return;
        }
        self.aof.append(cmds);
        if !self.active() {
            return;
        }
        let mut scratch = Vec::new();
        let mut feed = self.feed();
        let wrap = cmds.len() > 1;
        if wrap {
            encode_command(&mut scratch, &[Bytes::from_static(b"MULTI")]);
        }
        for (db, argv) in cmds {
            feed.append_command(*db, argv, &mut scratch);
        }
        if wrap {
            encode_command(&mut scratch, &[Bytes::from_static(b"EXEC")]);
        }
        feed.append(&scratch);
        let offset = feed.offset;
        drop(feed);
        self.grown.send_replace(offset);
    }

    /// Appends a command that belongs to no database (PING, REPLCONF GETACK).
    pub fn propagate_plain(&self, argv: &[impl AsRef<[u8]>]) {
        if !self.active() {
            return;
        }
        let mut scratch = Vec::new();
        encode_command(&mut scratch, argv);
        let mut feed = self.feed();
        feed.append(&scratch);
        let offset = feed.offset;
        drop(feed);
        self.grown.send_replace(offset);
    }

    /// Asks every replica to acknowledge at once (WAIT): a REPLCONF GETACK in the stream,
    /// unless the stream already ends with one (nothing was written since), which the
    /// replicas answer with this offset too. Several clients' WAITs between two writes
    /// then cost the replicas one acknowledgement (and, with `appendfsync always`, one
    /// sync), as Redis sends one GETACK per event-loop turn for all of them.
    pub fn request_acks(&self) {
        if !self.active() {
            return;
        }
        let mut scratch = Vec::new();
        encode_command(
            &mut scratch,
            &[
                Bytes::from_static(b"REPLCONF"),
                Bytes::from_static(b"GETACK"),
                Bytes::from_static(b"*"),
            ],
        );
        let mut feed = self.feed();
        if feed.offset != 0 && feed.offset == self.getack_end.load(Ordering::Relaxed) {
            return;
        }
        self.getack_start.store(feed.offset, Ordering::Relaxed);
        feed.append(&scratch);
        let offset = feed.offset;
        self.getack_end.store(offset, Ordering::Relaxed);
        drop(feed);
        self.grown.send_replace(offset);
    }

    /// Appends bytes a replica applied from its master (its own stream is its master's).
    pub fn append_from_master(&self, bytes: &[u8]) {
        let mut feed = self.feed();
        feed.append(bytes);
        let offset = feed.offset;
        drop(feed);
        self.grown.send_replace(offset);
    }

    /// The stream's offset.
    pub fn offset(&self) -> u64 {
        self.feed().offset
    }

    /// The stream's offset without a REPLCONF GETACK it ends with (see `request_acks`): what
    /// a WAIT waits for, since a replica's answer to that GETACK acknowledges the offset
    /// before it (the GETACK itself carries no write).
    pub fn written_offset(&self) -> u64 {
        let feed = self.feed();
        if feed.offset != 0 && feed.offset == self.getack_end.load(Ordering::Relaxed) {
            self.getack_start.load(Ordering::Relaxed)
        } else {
            feed.offset
        }
    }

    /// Counts again the replicas that are good for `min-replicas-to-write` (online, their
    /// last acknowledgement at most `max_lag_s` whole seconds old) and keeps the count,
    /// which writes and INFO read. As Redis's `refreshGoodSlavesCount`: called once a
    /// second (the supervisor's tick, as `replicationCron`), when a replica attaches or
    /// leaves and when CONFIG SET changes the settings, and judged in whole seconds, so a
    /// master whose replicas went silent stops between max-lag and max-lag + 2 s after
    /// their last acknowledgement, and a replica that acknowledges again counts at the
    /// next tick, not at once (docs/persistence.md, "Durability", measures both servers).
    pub fn refresh_good_replicas(&self, max_lag_s: u64) -> u64 {
        let now_s = self.epoch.elapsed().as_secs();
        let good = self
            .replicas()
            .iter()
            .filter(|r| {
                r.state == "online"
                    && r.ack_at
                        .lock()
                        .map(|t| {
                            let ack_s = t.saturating_duration_since(self.epoch).as_secs();
                            now_s.saturating_sub(ack_s) <= max_lag_s
                        })
                        .unwrap_or(false)
            })
            .count() as u64;
        self.good.store(good, Ordering::Relaxed);
        good
    }

    /// The replicas good for `min-replicas-to-write` when last counted (INFO's
    /// `min_slaves_good_slaves`).
    pub fn good_replicas(&self) -> u64 {
        self.good.load(Ordering::Relaxed)
    }

    /// Redis's `checkGoodReplicasStatus`: a master with `min-replicas-to-write` set has
    /// enough good replicas (a replica always has).
    pub fn enough_good_replicas(&self, needed: u64) -> bool {
        needed == 0 || self.is_replica() || self.good_replicas() >= needed
    }

    /// Replicas whose acknowledged offset is at least `offset`.
    pub fn acked_at_least(&self, offset: u64) -> usize {
        self.replicas()
            .iter()
            .filter(|r| r.ack.load(Ordering::Relaxed) >= offset)
            .count()
    }

    /// A copy of the attached replicas' list.
    pub fn replicas(&self) -> Vec<Arc<Attached>> {
        self.replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Attaches a replica.
    pub fn attach(&self, r: Arc<Attached>) {
        // A replica that joins after the last GETACK never saw it: the next WAIT sends one.
        self.getack_end.store(0, Ordering::Relaxed);
        self.replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r);
    }

    /// Detaches the replica of client `id`.
    pub fn detach(&self, id: u64) {
        self.replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|r| r.client != id);
    }
}

/// Installs the keyspace's deletion hook: keys the store expires or evicts on its own
/// reach the stream as DEL.
pub(crate) fn hook_deletions(repl: &Arc<Repl>, keyspace: &crate::store::Keyspace) {
    let r = Arc::downgrade(repl);
    keyspace
        .deletions()
        .set_field_hook(Box::new(move |db, key, field| {
            if let Some(r) = r.upgrade()
                && r.propagating()
            {
                r.propagate(&[(
                    db,
                    vec![
                        Bytes::from_static(b"HDEL"),
                        Bytes::copy_from_slice(key),
                        Bytes::copy_from_slice(field),
                    ],
                )]);
            }
        }));
    let r = Arc::downgrade(repl);
    keyspace.deletions().set_hook(Box::new(move |db, key| {
        if let Some(r) = r.upgrade()
            && r.propagating()
        {
            r.propagate(&[(
                db,
                vec![Bytes::from_static(b"DEL"), Bytes::copy_from_slice(key)],
            )]);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_encoded_as_resp_arrays() {
        let mut out = b"x".to_vec();
        let argv: Vec<Bytes> = [&b"SET"[..], b"", &[b'v'; 12][..]]
            .iter()
            .map(|a| Bytes::copy_from_slice(a))
            .collect();
        encode_command(&mut out, &argv);
        assert_eq!(
            out,
            b"x*3\r\n$3\r\nSET\r\n$0\r\n\r\n$12\r\nvvvvvvvvvvvv\r\n".to_vec()
        );
    }

    #[test]
    fn good_replicas_are_counted_at_each_refresh_in_whole_seconds() {
        use std::time::Duration;
        let mut r = Repl::new(1 << 20);
        let now = Instant::now();
        // Judged against an origin 100.5 s ago: "now" is whole second 100.
        r.epoch = now - Duration::from_millis(100_500);
        let replica = Arc::new(Attached {
            client: 1,
            ip: "127.0.0.1".into(),
            port: 1,
            state: "online",
            ack: AtomicU64::new(0),
            // Whole second 98: two seconds behind.
            ack_at: Mutex::new(now - Duration::from_millis(2_000)),
        });
        r.attach(replica.clone());
        assert_eq!(
            r.good_replicas(),
            0,
            "nothing counted before the first refresh"
        );
        assert_eq!(r.refresh_good_replicas(2), 1);
        assert_eq!(r.refresh_good_replicas(1), 0);
        assert!(!r.enough_good_replicas(1));
        // It acknowledges again: it counts only from the next refresh, as in Redis.
        *replica.ack_at.lock().unwrap() = now;
        assert!(!r.enough_good_replicas(1));
        assert_eq!(r.refresh_good_replicas(1), 1);
        assert!(r.enough_good_replicas(1));
        // 1.5 s old is whole second 99 against 100: within a lag of 1.
        *replica.ack_at.lock().unwrap() = now - Duration::from_millis(1_500);
        assert_eq!(r.refresh_good_replicas(1), 1);
        r.detach(1);
        assert_eq!(r.refresh_good_replicas(1), 0);
        assert!(r.enough_good_replicas(0));
    }

    #[test]
    fn waits_between_two_writes_share_one_getack() {
        let r = Repl::new(1 << 20);
        r.activate();
        r.propagate_plain(&[Bytes::from_static(b"PING")]);
        let written = r.offset();
        assert_eq!(r.written_offset(), written);
        r.request_acks();
        let one = r.offset();
        assert!(one > written, "the first WAIT puts a GETACK in the stream");
        // A second WAIT with nothing written since: no second GETACK, and it waits for
        // the offset the replicas' answer to the first one acknowledges.
        assert_eq!(r.written_offset(), written);
        r.request_acks();
        assert_eq!(r.offset(), one);
        let tail = r.feed().since(written).unwrap_or_default();
        assert_eq!(
            &tail[..],
            b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n"
        );
        // A write in between: the next WAIT asks again.
        r.propagate_plain(&[Bytes::from_static(b"PING")]);
        assert_eq!(r.written_offset(), r.offset());
        r.request_acks();
        assert!(r.offset() > one);
        // A replica attaching after a GETACK never saw it: the next WAIT sends one.
        let before = r.offset();
        r.attach(Arc::new(Attached {
            client: 1,
            ip: "127.0.0.1".into(),
            port: 1,
            state: "online",
            ack: AtomicU64::new(0),
            ack_at: Mutex::new(Instant::now()),
        }));
        r.request_acks();
        assert!(r.offset() > before);
    }

    #[test]
    fn backlog_keeps_the_last_bytes_and_answers_ranges() {
        let mut f = Feed::new(8);
        f.append(b"abcdef");
        assert_eq!(f.offset, 6);
        assert_eq!(f.since(0).as_deref(), Some(&b"abcdef"[..]));
        assert_eq!(f.since(4).as_deref(), Some(&b"ef"[..]));
        f.append(b"ghijk");
        assert_eq!(f.offset, 11);
        assert_eq!(f.backlog_first(), 4);
        assert_eq!(f.since(3).as_deref(), Some(&b"defghijk"[..]));
        assert_eq!(f.since(2), None);
        assert_eq!(f.since(11).as_deref(), Some(&b""[..]));
        assert_eq!(f.since(12), None);
    }

    #[test]
    fn several_effects_are_wrapped_and_select_is_emitted_once() {
        let r = Repl::new(1 << 20);
        r.activate();
        let set = |k: &'static [u8]| {
            vec![
                Bytes::from_static(b"SET"),
                Bytes::from_static(k),
                Bytes::from_static(b"1"),
            ]
        };
        r.propagate(&[(0, set(b"a"))]);
        r.propagate(&[(0, set(b"b")), (1, set(b"c"))]);
        let all = r.feed().since(0).unwrap();
        let text = String::from_utf8(all).unwrap();
        assert_eq!(
            text,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n\
             *1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n1\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n1\r\n\
             *1\r\n$4\r\nEXEC\r\n"
        );
    }
}
