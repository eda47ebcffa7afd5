//! The append-only file, as Redis 7.0 keeps it: a folder (`dir/appenddirname`) holding a
//! base file (an RDB file by default, `aof-use-rdb-preamble`), incremental files of
//! commands, and the manifest naming them (`manifest.rs`). Both servers read each other's
//! folders: the names, the manifest and the command encoding are Redis's.
//!
//! What is logged is what replicas get: `repl::Repl::propagate` hands every write's
//! effects (absolute expiries: `SET … PXAT`, `RESTORE … ABSTTL`; effects of scripts and
//! transactions wrapped in MULTI/EXEC) to [`Aof::append`] while the command still holds its
//! shard locks, so the file's order is the order writes were applied. `append` only encodes
//! into a buffer (a leaf lock). The buffer reaches the file in [`Aof::before_reply`], which
//! every event loop (and the tokio connection code) calls before it writes replies, as
//! Redis's `beforeSleep` flushes before `handleClientsWithPendingWrites`:
//!
//! - `appendfsync always`: the write and the `fdatasync` happen there, so no reply leaves
//!   before what it acknowledges is on disk. One caller syncs for everyone: the file lock
//!   is held across the sync, and a caller that gets it after someone else synced past
//!   what it needs returns at once (group commit across connections and loops). Reads are
//!   covered too: a loop syncs up to everything appended so far, so a reply never shows a
//!   write that a crash could still lose.
//! - `everysec`: the write happens there (a process crash loses nothing written), the sync
//!   on the `sluice-aof-fsync` thread about once a second, off the loops.
//! - `no`: the write only.
//!
//! A rewrite (`rewrite.rs`: BGREWRITEAOF, the automatic rewrite, enabling the AOF at run
//! time) copies the keyspace in one hold of every shard and, inside that hold, starts a new
//! incremental file, so every write is either in the copy or in the new file, never both;
//! it then writes the new base on its own thread while clients are served, and swaps the
//! manifest atomically.
//!
//! Lock order: shard locks → `pending` (a leaf). `files` is taken with no shard held (the
//! flush), or inside the rewrite's hold of every shard; whoever holds `files` takes only
//! `pending`, never a shard.

pub(crate) mod manifest;
pub(crate) mod rewrite;

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::{AofSettings, Fsync};
use manifest::Manifest;

/// Where the AOF is (Redis's `aof_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Off: nothing is logged.
    Off,
    /// Being enabled: writes go to a temporary incremental file until the first rewrite
    /// ends.
    WaitRewrite,
    /// On.
    On,
}

/// Writes not yet in the file.
#[derive(Debug, Default)]
struct Pending {
    buf: Vec<u8>,
    /// The database the file last SELECTed (None: the next command selects).
    db: Option<usize>,
}

/// The open files and the manifest.
#[derive(Debug)]
pub(crate) struct Files {
    /// The incremental file written to.
    pub(crate) file: Option<Arc<File>>,
    /// The manifest as on disk.
    pub(crate) manifest: Manifest,
    /// The folder.
    pub(crate) dir: PathBuf,
    /// `appendfilename`.
    pub(crate) prefix: String,
    /// Bytes of the incremental file written to.
    pub(crate) incr_size: u64,
}

/// The append-only file's state in `Shared` (through `Repl`, which feeds it).
#[derive(Debug)]
pub(crate) struct Aof {
    /// Writes are logged (`WaitRewrite` or `On`).
    on: AtomicBool,
    state: Mutex<State>,
    fsync: AtomicU8,
    pending: Mutex<Pending>,
    /// Bytes appended, written to the file and synced, counted since the server started
    /// (the flush compares them; they are never reset).
    appended: AtomicU64,
    written: AtomicU64,
    durable: AtomicU64,
    files: Mutex<Files>,
    /// Wakes the fsync thread early (a stop).
    wake: Condvar,
    /// Set (under its lock, so no wake-up is missed) when the fsync thread must end.
    stop_sync: Mutex<bool>,
    /// INFO's counters.
    pub(crate) stats: Stats,
}

/// INFO persistence's `aof_*` values.
#[derive(Debug)]
pub(crate) struct Stats {
    /// A rewrite is running.
    pub(crate) rewriting: AtomicBool,
    /// A rewrite is scheduled (BGREWRITEAOF during a BGSAVE).
    pub(crate) scheduled: AtomicBool,
    /// When the running rewrite started.
    pub(crate) rewrite_started: Mutex<Option<Instant>>,
    /// Seconds the last rewrite took (-1: none yet).
    pub(crate) last_rewrite_s: AtomicI64,
    /// The last rewrite succeeded.
    pub(crate) last_rewrite_ok: AtomicBool,
    /// Rewrites done.
    pub(crate) rewrites: AtomicU64,
    /// Rewrites failed in a row.
    pub(crate) failures: AtomicU64,
    /// The last write or sync succeeded.
    pub(crate) last_write_ok: AtomicBool,
    /// The last write error's text (MISCONF).
    pub(crate) last_write_error: Mutex<String>,
    /// Base plus incremental files' bytes.
    pub(crate) current_size: AtomicU64,
    /// The base's bytes after the last rewrite (`aof_base_size`).
    pub(crate) base_size: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            rewriting: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            rewrite_started: Mutex::new(None),
            last_rewrite_s: AtomicI64::new(-1),
            last_rewrite_ok: AtomicBool::new(true),
            rewrites: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            last_write_ok: AtomicBool::new(true),
            last_write_error: Mutex::new(String::new()),
            current_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn policy_code(f: Fsync) -> u8 {
    match f {
        Fsync::Always => 0,
        Fsync::EverySec => 1,
        Fsync::No => 2,
    }
}

impl Default for Aof {
    fn default() -> Self {
        Aof::new()
    }
}

impl Aof {
    /// Off, with nothing open.
    pub(crate) fn new() -> Aof {
        Aof {
            on: AtomicBool::new(false),
            state: Mutex::new(State::Off),
            fsync: AtomicU8::new(policy_code(Fsync::EverySec)),
            pending: Mutex::new(Pending::default()),
            appended: AtomicU64::new(0),
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            files: Mutex::new(Files {
                file: None,
                manifest: Manifest::default(),
                dir: PathBuf::new(),
                prefix: String::new(),
                incr_size: 0,
            }),
            wake: Condvar::new(),
            stop_sync: Mutex::new(false),
            stats: Stats::default(),
        }
    }

    /// Whether writes are logged (one atomic load: the write path asks on every command).
    #[inline]
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Where the AOF is.
    pub(crate) fn state(&self) -> State {
        *lock(&self.state)
    }

    /// The sync policy.
    pub(crate) fn fsync(&self) -> Fsync {
        match self.fsync.load(Ordering::Relaxed) {
            0 => Fsync::Always,
            1 => Fsync::EverySec,
            _ => Fsync::No,
        }
    }

    /// Takes `appendfsync` from the configuration.
    pub(crate) fn set_fsync(&self, f: Fsync) {
        self.fsync.store(policy_code(f), Ordering::Relaxed);
    }

    /// Appends one call's effects (several wrapped in MULTI/EXEC). Called with the
    /// command's shard locks held.
    pub(crate) fn append(&self, cmds: &[(usize, Vec<Bytes>)]) {
        if !self.on() || cmds.is_empty() {
            return;
        }
        let mut p = lock(&self.pending);
        let before = p.buf.len();
        let wrap = cmds.len() > 1;
        if wrap {
            crate::repl::encode_command(&mut p.buf, &[Bytes::from_static(b"MULTI")]);
        }
        for (db, argv) in cmds {
            if p.db != Some(*db) {
                crate::repl::encode_command(
                    &mut p.buf,
                    &[Bytes::from_static(b"SELECT"), db.to_string().into()],
                );
                p.db = Some(*db);
            }
            crate::repl::encode_command(&mut p.buf, argv);
        }
        if wrap {
            crate::repl::encode_command(&mut p.buf, &[Bytes::from_static(b"EXEC")]);
        }
        let grown = (p.buf.len() - before) as u64;
        self.appended.fetch_add(grown, Ordering::Release);
    }

    /// Whether [`Aof::before_reply`] would have to sync the disk now (`appendfsync always`
    /// with appended bytes not yet durable): the moment for a caller that serves several
    /// clients to let the others append first, so that one sync covers them all, as Redis
    /// syncs once per event-loop turn. One or two atomic loads.
    pub(crate) fn sync_due(&self) -> bool {
        self.fsync() == Fsync::Always
            && self.durable.load(Ordering::Acquire) < self.appended.load(Ordering::Acquire)
    }

    /// Called before replies are written: puts what was appended into the file, and with
    /// `appendfsync always` on disk, before returning. Cheap when nothing is pending.
    pub(crate) fn before_reply(&self) {
        let target = self.appended.load(Ordering::Acquire);
        let always = self.fsync() == Fsync::Always;
        let done = if always { &self.durable } else { &self.written };
        if done.load(Ordering::Acquire) >= target {
            return;
        }
        let mut files = lock(&self.files);
        // Someone else may have written (and synced) past `target` while this waited.
        if done.load(Ordering::Acquire) >= target {
            return;
        }
        self.write_pending(&mut files, always);
    }

    /// Moves the buffer into the file (and syncs it if `sync`), with `files` held.
    fn write_pending(&self, files: &mut Files, sync: bool) {
        let (buf, upto) = {
            let mut p = lock(&self.pending);
            (
                std::mem::take(&mut p.buf),
                self.appended.load(Ordering::Acquire),
            )
        };
        let Some(file) = files.file.clone() else {
            return;
        };
        let result = (&*file)
            .write_all(&buf)
            .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
        match result {
            Ok(()) => {
                files.incr_size += buf.len() as u64;
                self.stats
                    .current_size
                    .fetch_add(buf.len() as u64, Ordering::Relaxed);
                self.written.store(upto, Ordering::Release);
                if sync {
                    self.durable.store(upto, Ordering::Release);
                }
                self.stats.last_write_ok.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                if self.fsync() == Fsync::Always {
                    // Redis's rule: a reply may already promise this write; there is no
                    // way to keep that promise, so stop rather than answer wrongly.
                    tracing::error!(
                        "Can't recover from AOF write error when the AOF fsync policy is 'always'. Exiting... ({e})"
                    );
                    std::process::exit(1);
                }
                tracing::warn!("Error writing to the AOF file: {e}");
                *lock(&self.stats.last_write_error) = e.to_string();
                self.stats.last_write_ok.store(false, Ordering::Relaxed);
                // Kept for the next try, in front of what came since. A partial write may
                // have put some bytes in the file; truncating back to the known size keeps
                // the file a whole number of commands.
                let _ = file.set_len(files.incr_size);
                let mut p = lock(&self.pending);
                let newer = std::mem::replace(&mut p.buf, buf);
                p.buf.extend_from_slice(&newer);
            }
        }
    }

    /// Writes and syncs everything appended (a stop, a shutdown, a rewrite's switch).
    pub(crate) fn flush_all(&self) {
        let mut files = lock(&self.files);
        self.write_pending(&mut files, true);
    }

    /// The everysec sync: if something was written since the last sync, syncs the file
    /// (outside the file lock, so the loops keep writing).
    fn sync_written(&self) {
        let upto = self.written.load(Ordering::Acquire);
        if self.durable.load(Ordering::Acquire) >= upto {
            return;
        }
        let file = lock(&self.files).file.clone();
        if let Some(file) = file {
            match file.sync_data() {
                Ok(()) => {
                    self.durable.fetch_max(upto, Ordering::AcqRel);
                }
                Err(e) => {
                    tracing::warn!("Error syncing the AOF file: {e}");
                    *lock(&self.stats.last_write_error) = e.to_string();
                    self.stats.last_write_ok.store(false, Ordering::Relaxed);
                }
            }
        }
    }

    /// Bytes waiting in the buffer (`aof_buffer_length`).
    pub(crate) fn buffer_len(&self) -> usize {
        lock(&self.pending).buf.len()
    }

    pub(crate) fn files(&self) -> MutexGuard<'_, Files> {
        lock(&self.files)
    }

    fn set_state(&self, s: State) {
        *lock(&self.state) = s;
        self.on.store(s != State::Off, Ordering::Release);
    }

    /// Opens the AOF at start (Redis's `aofOpenIfNeededOnServerStart`), after the data was
    /// loaded: with no file yet, a base is written from what is in memory; the last
    /// incremental file is opened for appending (a first one created); the manifest is
    /// written. `base` writes a base file into the given path.
    pub(crate) fn open_at_start(
        &self,
        settings: &AofSettings,
        dir: &Path,
        manifest: Manifest,
        base: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "Can't open or create append-only dir {}: {e}",
                settings.dirname
            )
        })?;
        let mut m = manifest;
        let prefix = &settings.filename;
        if m.is_empty() {
            let name = m.new_base(prefix, settings.use_rdb_preamble);
            base(&dir.join(&name)).map_err(|e| format!("Can't write the AOF base {name}: {e}"))?;
            tracing::info!("Creating AOF base file {name} on server start");
        }
        let name = match m.last_incr() {
            Some(n) => n.to_string(),
            None => m.new_incr(prefix),
        };
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.join(&name))
            .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
        m.persist(dir, prefix)
            .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
        let incr_size = file.metadata().map(|md| md.len()).unwrap_or(0);
        let base_size = m
            .base
            .as_ref()
            .and_then(|b| std::fs::metadata(dir.join(&b.name)).ok())
            .map_or(0, |md| md.len());
        let total: u64 = m
            .base
            .iter()
            .chain(&m.incr)
            .filter_map(|e| std::fs::metadata(dir.join(&e.name)).ok())
            .map(|md| md.len())
            .sum();
        self.stats.current_size.store(total, Ordering::Relaxed);
        self.stats.base_size.store(base_size, Ordering::Relaxed);
        let mut files = lock(&self.files);
        files.file = Some(Arc::new(file));
        files.manifest = m;
        files.dir = dir.to_path_buf();
        files.prefix = prefix.clone();
        files.incr_size = incr_size;
        drop(files);
        self.set_fsync(settings.fsync);
        lock(&self.pending).db = None;
        self.set_state(State::On);
        Ok(())
    }

    /// Stops logging (CONFIG SET appendonly no): what was appended is written and synced,
    /// the file closed. The files stay, as Redis leaves them.
    pub(crate) fn stop(&self) {
        let mut files = lock(&self.files);
        self.set_state(State::Off);
        self.write_pending(&mut files, true);
        files.file = None;
        lock(&self.pending).db = None;
    }

    /// Starts the `sluice-aof-fsync` thread: about once a second, what is still in the buffer
    /// goes into the file, and with everysec the file is synced; until
    /// [`Aof::stop_fsync_thread`].
    pub(crate) fn spawn_fsync_thread(self: &Arc<Self>) -> Option<std::thread::JoinHandle<()>> {
        *lock(&self.stop_sync) = false;
        let aof = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("sluice-aof-fsync".into())
            .spawn(move || {
                loop {
                    let Some(a) = aof.upgrade() else { return };
                    if a.on() {
                        // Writes no reply waits for (keys the reapers expire while no client
                        // is served) reach the file within about a second too.
                        a.before_reply();
                        if a.fsync() == Fsync::EverySec {
                            a.sync_written();
                        }
                    }
                    let stop = lock(&a.stop_sync);
                    if *stop {
                        return;
                    }
                    let (stop, _) = a
                        .wake
                        .wait_timeout(stop, Duration::from_secs(1))
                        .unwrap_or_else(|e| e.into_inner());
                    if *stop {
                        return;
                    }
                }
            })
            .map_err(|e| tracing::warn!("cannot start the AOF sync thread: {e}"))
            .ok()
    }

    /// Ends the fsync thread (at once: it is waiting, or checks the flag before waiting).
    pub(crate) fn stop_fsync_thread(&self) {
        *lock(&self.stop_sync) = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: &'static [u8]) -> Vec<Bytes> {
        vec![
            Bytes::from_static(b"SET"),
            Bytes::from_static(k),
            Bytes::from_static(b"1"),
        ]
    }

    #[test]
    fn appends_select_once_and_wraps_several_effects() {
        let dir = tempfile::tempdir().unwrap();
        let aof = Aof::new();
        aof.open_at_start(
            &AofSettings {
                fsync: Fsync::Always,
                ..AofSettings::default()
            },
            dir.path(),
            Manifest::default(),
            |p| std::fs::write(p, b""),
        )
        .unwrap();
        aof.append(&[(0, set(b"a"))]);
        aof.append(&[(0, set(b"b")), (1, set(b"c"))]);
        aof.before_reply();
        let text = std::fs::read_to_string(dir.path().join("appendonly.aof.1.incr.aof")).unwrap();
        assert_eq!(
            text,
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n\
             *1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n1\r\n\
             *2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n1\r\n\
             *1\r\n$4\r\nEXEC\r\n"
        );
        assert_eq!(aof.durable.load(Ordering::Relaxed), text.len() as u64);
        let manifest = std::fs::read_to_string(dir.path().join("appendonly.aof.manifest")).unwrap();
        assert_eq!(
            manifest,
            "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
        );
        aof.stop();
        aof.append(&[(0, set(b"d"))]);
        assert_eq!(aof.buffer_len(), 0);
    }
}
