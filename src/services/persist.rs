//! RDB persistence as the server runs it (SAVE, BGSAVE and LASTSAVE are
//! `commands::persist`): saving now or in the background, the `save` points' timer, loading `dir/dbfilename` at start, the save at shutdown, DEBUG RELOAD's
//! save-and-load, INFO's persistence section and the MISCONF refusal of writes after a
//! failed background save.
//!
//! The file format is `rdb::snapshot`'s; this module decides when to write and where, and
//! keeps the counters. A save writes `temp-<pid>-<n>.rdb` in `dir`, syncs it and renames
//! it over `dbfilename`, so a crash mid-save leaves the previous file whole. One save runs
//! at a time (SAVE answers "Background save already in progress" meanwhile, as Redis).
//! A background save runs on its own thread and takes the keyspace shard by shard (see
//! `rdb::snapshot` for what that means for consistency); clients are served throughout.
//!
//! Times (LASTSAVE, the save points' seconds) come from the server's clock, so in test
//! mode CLOCK ADVANCE moves them; the durations INFO reports are wall-clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::clock::Clock;
use crate::config::Config;
use crate::engine::{CmdFlags, CommandSpec, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::rdb::snapshot::{self, LoadOptions, SaveOptions, SaveStats};
use crate::server::Shared;
use crate::store::Keyspace;

/// Redis's retry delay after a failed background save before the save points try again.
const BGSAVE_RETRY_DELAY_S: u64 = 5;

/// Redis's reply to writes while the last background save failed (`shared.bgsaveerr`).
pub(crate) const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// The persistence counters and flags, shared with the background save threads.
#[derive(Debug)]
pub struct Persistence {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    /// A save (foreground or background) is writing.
    saving: AtomicBool,
    /// The running save is a BGSAVE (INFO rdb_bgsave_in_progress).
    background: AtomicBool,
    /// When the running background save started (wall clock), for INFO.
    bg_started: std::sync::Mutex<Option<Instant>>,
    /// Unix seconds of the last successful save (or of the start).
    lastsave_s: AtomicU64,
    /// `Keyspace::changes` when the last successful save began.
    baseline: AtomicU64,
    last_bgsave_ok: AtomicBool,
    last_bgsave_time_s: AtomicI64,
    /// Unix seconds of the last background save attempt.
    last_try_s: AtomicU64,
    saves: AtomicU64,
    /// BGSAVE inside MULTI: run once the current save (if any) ends.
    scheduled: AtomicBool,
    keys_loaded: AtomicU64,
    keys_expired: AtomicU64,
    /// SHUTDOWN dealt with saving already; the server's exit path must not save again.
    shutdown_handled: AtomicBool,
    /// Distinguishes temporary files.
    temp_seq: AtomicU64,
}

impl Persistence {
    /// Fresh counters; LASTSAVE starts at `now_s`, as Redis's does.
    pub fn new(now_s: u64) -> Self {
        Persistence {
            state: Arc::new(State {
                saving: AtomicBool::new(false),
                background: AtomicBool::new(false),
                bg_started: std::sync::Mutex::new(None),
                lastsave_s: AtomicU64::new(now_s),
                baseline: AtomicU64::new(0),
                last_bgsave_ok: AtomicBool::new(true),
                last_bgsave_time_s: AtomicI64::new(-1),
                last_try_s: AtomicU64::new(0),
                saves: AtomicU64::new(0),
                scheduled: AtomicBool::new(false),
                keys_loaded: AtomicU64::new(0),
                keys_expired: AtomicU64::new(0),
                shutdown_handled: AtomicBool::new(false),
                temp_seq: AtomicU64::new(0),
            }),
        }
    }

    /// The counters of a server that has just started without a file to load
    /// (`TESTMODE RESET`, which zeroes the keyspace's change count with it). A save still
    /// running finishes and records itself as usual.
    pub fn reset(&self, now_s: u64) {
        let s = &self.state;
        s.lastsave_s.store(now_s, Ordering::Release);
        s.baseline.store(0, Ordering::Release);
        s.last_bgsave_ok.store(true, Ordering::Release);
        s.last_bgsave_time_s.store(-1, Ordering::Release);
        s.last_try_s.store(0, Ordering::Release);
        s.saves.store(0, Ordering::Release);
        s.scheduled.store(false, Ordering::Release);
        s.keys_loaded.store(0, Ordering::Release);
        s.keys_expired.store(0, Ordering::Release);
    }

    /// True while a save runs.
    pub fn saving(&self) -> bool {
        self.state.saving.load(Ordering::Acquire)
    }

    /// BGSAVE inside EXEC: a background save starts once the transaction is over (Redis
    /// defers the fork the same way).
    pub(crate) fn schedule_bgsave(&self) {
        self.state.scheduled.store(true, Ordering::Release);
    }

    /// When the last save succeeded (LASTSAVE), Unix seconds on the server's clock.
    pub(crate) fn lastsave_s(&self) -> u64 {
        self.state.lastsave_s.load(Ordering::Acquire)
    }
}

/// Why a save failed (logged; clients get Redis's short errors).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SaveError(String);

/// What a save needs, detached from `Shared` so that a thread can own it.
struct Job {
    keyspace: Arc<Keyspace>,
    functions: Vec<Bytes>,
    opts: SaveOptions,
    dir: PathBuf,
    file: PathBuf,
    state: Arc<State>,
    clock: Clock,
}

/// What every snapshot of the running server writes besides the keys, read now: the
/// function libraries' code and the RDB header's fields (`aof_base`: the base of an AOF).
pub(crate) fn snapshot_header(shared: &Shared, aof_base: bool) -> (Vec<Bytes>, SaveOptions) {
    let config = shared.config();
    let now_ms = shared.clock.now_ms();
    let functions = shared
        .scripts
        .function_libraries()
        .iter()
        .map(|l| l.code.clone())
        .collect();
    let opts = SaveOptions {
        redis_version: config.redis_version.clone(),
        ctime_s: now_ms / 1000,
        used_mem: crate::alloc_stats::allocated() as u64,
        checksum: config.rdbchecksum,
        now_ms,
        aof_base,
    };
    (functions, opts)
}

impl Job {
    fn new(shared: &Shared) -> Job {
        let config = shared.config();
        let (functions, opts) = snapshot_header(shared, false);
        Job {
            keyspace: shared.keyspace.clone(),
            functions,
            opts,
            dir: config.rdb_dir(),
            file: config.rdb_path(),
            state: shared.persist.state.clone(),
            clock: shared.clock.clone(),
        }
    }

    /// Writes the file; on success records it as the last save.
    fn run(self) -> Result<SaveStats, SaveError> {
        self.run_giving_way(&|_| false)
            .unwrap_or_else(|shard| Err(SaveError(format!("gave way on shard {shard}"))))
    }

    /// [`Job::run`], giving way as [`snapshot::write_to`] does: `Err(shard)` when
    /// it did (no file written, nothing recorded).
    fn run_giving_way(
        self,
        give_way: &dyn Fn(usize) -> bool,
    ) -> Result<Result<SaveStats, SaveError>, usize> {
        // `Keyspace::changes`, giving way as the walk does.
        let mut start_changes = 0u64;
        for shard in 0..self.keyspace.shard_count() {
            let locked =
                snapshot::lock_shard(&self.keyspace, shard, give_way).map_err(|_| shard)?;
            let changes = locked.held_shard(shard).map_or(0, |s| s.stats.changes);
            start_changes = start_changes.wrapping_add(changes);
        }
        let seq = self.state.temp_seq.fetch_add(1, Ordering::Relaxed);
        let temp = self
            .dir
            .join(format!("temp-{}-{seq}.rdb", std::process::id()));
        let result = match write_file(&self, &temp, give_way) {
            Ok(stats) => Ok(stats),
            Err(gave_way_or_failed) => {
                let _ = std::fs::remove_file(&temp);
                match gave_way_or_failed {
                    Ok(shard) => return Err(shard),
                    Err(e) => Err(e),
                }
            }
        };
        if result.is_ok() {
            self.state.baseline.store(start_changes, Ordering::Release);
            self.state
                .lastsave_s
                .store(self.clock.now_ms() / 1000, Ordering::Release);
            self.state.saves.fetch_add(1, Ordering::Relaxed);
        }
        Ok(result)
    }
}

/// Writes the file at `temp` and renames it; `Err(Ok(shard))`: the walk gave way on `shard`.
fn write_file(
    job: &Job,
    temp: &Path,
    give_way: &dyn Fn(usize) -> bool,
) -> Result<SaveStats, Result<usize, SaveError>> {
    let fail =
        |what: &str, e: std::io::Error| Err(SaveError(format!("{what} '{}': {e}", temp.display())));
    let file =
        std::fs::File::create(temp).map_err(|e| fail("Failed opening the temp RDB file", e))?;
    let stats = snapshot::write_to(
        &job.keyspace,
        job.functions.iter().map(|c| &c[..]),
        &job.opts,
        &file,
        give_way,
    )
    .map_err(|e| match snapshot::GaveWay::of(&e) {
        Some(shard) => Ok(shard),
        None => fail("Write error saving DB on disk to", e),
    })?;
    file.sync_all()
        .map_err(|e| fail("Failed syncing the temp RDB file", e))?;
    std::fs::rename(temp, &job.file).map_err(|e| {
        Err(SaveError(format!(
            "Error moving temp DB file '{}' on the final destination '{}': {e}",
            temp.display(),
            job.file.display()
        )))
    })?;
    Ok(stats)
}

/// Claims the single save slot; false if a save already runs.
fn claim(state: &State) -> bool {
    state
        .saving
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// A foreground save (SAVE, SHUTDOWN, DEBUG RELOAD): waits for nothing, fails if a save
/// already runs.
pub(crate) fn save_now(shared: &Shared) -> Result<SaveStats, SaveError> {
    save_now_giving_way(shared, &|_| false)
        .unwrap_or_else(|shard| Err(SaveError(format!("gave way on shard {shard}"))))
}

/// [`save_now`] for a connection's SAVE, which must not wait on a shard a script took after
/// SAVE passed the busy gate: when a shard is held and `give_way(shard)`, the save stops
/// with `Err(shard)`, having written no file and recorded nothing (the caller sends the
/// request back to the gate: `engine::call::back_to_gate`).
pub(crate) fn save_now_giving_way(
    shared: &Shared,
    give_way: &dyn Fn(usize) -> bool,
) -> Result<Result<SaveStats, SaveError>, usize> {
    let state = &shared.persist.state;
    if !claim(state) {
        return Ok(Err(SaveError("Background save already in progress".into())));
    }
    let result = Job::new(shared).run_giving_way(give_way);
    state.saving.store(false, Ordering::Release);
    match &result {
        Ok(Ok(s)) => {
            // A successful save also clears a failed background save's MISCONF, as Redis's
            // rdbSave does.
            state.last_bgsave_ok.store(true, Ordering::Release);
            tracing::info!("DB saved on disk ({} keys)", s.keys);
        }
        Ok(Err(e)) => tracing::warn!("Failed saving the DB: {e}"),
        Err(_) => {}
    }
    result
}

/// SAVE as a connection runs it. A script may take a shard after SAVE passed the busy gate:
/// SAVE then goes back to the gate (which waits for a young script, or answers -BUSY)
/// rather than wait on the script's lock for the whole script, as nothing runs beside a
/// Redis script.
pub(crate) fn save_command(ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
    if ctx.shared.persist.saving() {
        return Err(CmdError::msg("ERR Background save already in progress"));
    }
    loop {
        let gives_way = gives_way(ctx);
        match save_now_giving_way(ctx.shared, &|shard| gives_way(&[shard])) {
            Ok(Ok(_)) => return Ok(Reply::ok()),
            // Redis answers a failed SAVE with a bare "-ERR".
            Ok(Err(_)) => return Err(CmdError::msg("ERR")),
            Err(shard) => {
                if crate::engine::call::back_to_gate(ctx, &[shard]) {
                    return Ok(Reply::Null);
                }
                // The script ended meanwhile: the save starts over.
            }
        }
    }
}

/// Whether a connection's command that locks shards by itself (SAVE, DEBUG RELOAD) gives
/// way on `shards`: a running script holds one of them and the request can go back to the
/// busy gate (the checks of `engine::call::back_to_gate`, which the caller then calls).
fn gives_way<'s>(ctx: &Ctx<'s>) -> impl Fn(&[usize]) -> bool + use<'s> {
    let can_go_back = ctx.may_block && !ctx.in_exec && !ctx.in_script;
    let shared: &'s Shared = ctx.shared;
    let busy = &shared.scripts.busy;
    move |shards: &[usize]| can_go_back && busy.blocking(Some(shards)).is_some()
}

/// Waits (bounded) for a running background save to end.
fn wait_idle(state: &State, limit: Duration) {
    let start = Instant::now();
    while state.saving.load(Ordering::Acquire) && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts a background save; false if a save already runs.
pub(crate) fn start_bgsave(shared: &Shared) -> bool {
    let state = shared.persist.state.clone();
    if !claim(&state) {
        return false;
    }
    state.background.store(true, Ordering::Release);
    if let Ok(mut t) = state.bg_started.lock() {
        *t = Some(Instant::now());
    }
    let now_s = shared.clock.now_ms() / 1000;
    state.last_try_s.store(now_s, Ordering::Release);
    let job = Job::new(shared);
    let spawned = std::thread::Builder::new()
        .name("sluice-bgsave".into())
        .spawn(move || {
            let started = Instant::now();
            let state = job.state.clone();
            let result = job.run();
            match &result {
                Ok(s) => tracing::info!(
                    "Background saving terminated with success ({} keys)",
                    s.keys
                ),
                Err(e) => tracing::warn!("Background saving error: {e}"),
            }
            state
                .last_bgsave_ok
                .store(result.is_ok(), Ordering::Release);
            state
                .last_bgsave_time_s
                .store(started.elapsed().as_secs() as i64, Ordering::Release);
            if let Ok(mut t) = state.bg_started.lock() {
                *t = None;
            }
            state.background.store(false, Ordering::Release);
            state.saving.store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        tracing::warn!("Can't save in background: {e}");
        let state = &shared.persist.state;
        state.last_bgsave_ok.store(false, Ordering::Release);
        state.background.store(false, Ordering::Release);
        state.saving.store(false, Ordering::Release);
        return false;
    }
    tracing::info!("Background saving started");
    true
}

/// Keys changed since the last successful save.
fn changes_since_save(shared: &Shared) -> u64 {
    shared
        .keyspace
        .changes()
        .wrapping_sub(shared.persist.state.baseline.load(Ordering::Acquire))
}

/// One tick of the save points' timer (Redis's serverCron part): a scheduled BGSAVE, or a
/// save point reached.
pub(crate) fn tick(shared: &Shared) {
    super::aof::tick(shared);
    let state = &shared.persist.state;
    if state.saving.load(Ordering::Acquire) {
        return;
    }
    if state.scheduled.swap(false, Ordering::AcqRel) {
        start_bgsave(shared);
        return;
    }
    let points = match shared.config.read() {
        Ok(c) if !c.save.is_empty() => c.save.clone(),
        _ => return,
    };
    let now_s = shared.clock.now_ms() / 1000;
    let since = changes_since_save(shared);
    let elapsed = now_s.saturating_sub(state.lastsave_s.load(Ordering::Acquire));
    let may_retry = state.last_bgsave_ok.load(Ordering::Acquire)
        || now_s.saturating_sub(state.last_try_s.load(Ordering::Acquire)) > BGSAVE_RETRY_DELAY_S;
    if let Some((secs, _)) = points
        .iter()
        .find(|&&(secs, changes)| since >= changes && elapsed > secs)
        && may_retry
    {
        tracing::info!("{since} changes in {secs} seconds. Saving...");
        start_bgsave(shared);
    }
}

/// Runs `tick` every 100 ms on its own thread until the server stops. It parks between
/// ticks rather than sleeping, so that stopping the server (`unpark` on its handle, then
/// join) does not wait out the rest of a tick: a server with nothing to save exits within
/// a millisecond or two of SIGTERM, which is what a test suite that starts and stops one
/// per test pays.
pub(crate) fn spawn_timer(shared: Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sluice-saver".into())
        .spawn(move || {
            let mut next = Instant::now() + Duration::from_millis(100);
            while !shared.shutdown.is_cancelled() {
                let now = Instant::now();
                if now < next {
                    // Wakes early on `unpark` (or spuriously): the loop re-checks both.
                    std::thread::park_timeout(next - now);
                    continue;
                }
                next = now + Duration::from_millis(100);
                tick(&shared);
            }
        })
        .map_err(|e| tracing::warn!("cannot start the save timer: {e}"))
        .ok()
}

/// Loads `dir/dbfilename` if it exists (at start, before clients are served). A file that
/// exists but cannot be read or does not load is an error: the server must not start with
/// part of its data, as Redis refuses to.
pub(crate) fn load_at_start(shared: &Shared) -> Result<(), String> {
    let path = shared.config().rdb_path();
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(format!(
                "Fatal error loading the DB ({}): {e}. Exiting.",
                path.display()
            ));
        }
    };
    let started = Instant::now();
    load_into(shared, std::io::BufReader::new(file)).map_err(|e| {
        format!(
            "Fatal error loading the DB ({}): {e}. Exiting.",
            path.display()
        )
    })?;
    tracing::info!(
        "DB loaded from disk: {:.3} seconds",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Loads an RDB stream into the (empty) keyspace and the function libraries, then resets
/// the change counter as Redis does after a load.
pub(crate) fn load_into(shared: &Shared, input: impl std::io::Read) -> Result<(), String> {
    let opts = LoadOptions {
        now_ms: shared.clock.now_ms(),
        limits: shared.live.zset_limits(),
    };
    let loaded = snapshot::load_from(input, &shared.keyspace, &opts).map_err(|e| e.to_string())?;
    install_functions(shared, &loaded.functions)?;
    record_load(shared, &loaded, shared.keyspace.changes());
    Ok(())
}

/// The largest RDB file DEBUG RELOAD loads. The load holds every shard, so every client
/// waits for it; past this size (a few tens of thousands of keys) it is refused rather
/// than stop the server for seconds. A restart loads any size.
pub(crate) const DEBUG_RELOAD_MAX_BYTES: usize = 4 << 20;

/// DEBUG RELOAD \[NOSAVE\]: saves (unless NOSAVE), then empties every database and loads the
/// file back while holding every shard, so no client sees the keyspace empty or half loaded.
/// Refused for a file over [`DEBUG_RELOAD_MAX_BYTES`]. The caller must hold no shard (not
/// inside EXEC). A script that took a shard after the command passed the busy gate sends
/// it back to the gate (`engine::call::back_to_gate`; the reply is then not sent) instead of
/// waiting on the script's lock, during the save or before the load; the request then runs
/// again whole, saving again, which changes nothing but the file's time.
pub(crate) fn debug_reload(ctx: &mut Ctx<'_>, save: bool) -> CmdResult<Reply> {
    loop {
        let gives_way = gives_way(ctx);
        let gave_way = reload_giving_way(ctx.shared, save, &gives_way)?;
        drop(gives_way);
        match gave_way {
            None => return Ok(Reply::ok()),
            Some(wanted) if crate::engine::call::back_to_gate(ctx, &wanted) => {
                return Ok(Reply::Null);
            }
            // The script ended meanwhile: the reload starts over.
            Some(_) => {}
        }
    }
}

/// DEBUG RELOAD's work; `Some(shards)`: it gave way on those (nothing loaded).
fn reload_giving_way(
    shared: &Shared,
    save: bool,
    give_way: &dyn Fn(&[usize]) -> bool,
) -> CmdResult<Option<Vec<usize>>> {
    if save {
        match save_now_giving_way(shared, &|shard| give_way(&[shard])) {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err(CmdError::msg("ERR")),
            Err(shard) => return Ok(Some(vec![shard])),
        }
    }
    let load_failed = "ERR Error trying to load the RDB dump, check server logs.";
    let path = shared.config().rdb_path();
    // Judged before reading, so a huge file is not even read into memory.
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    if size > DEBUG_RELOAD_MAX_BYTES as u64 {
        return Err(CmdError::owned(format!(
            "ERR DEBUG RELOAD refused: the RDB file is {size} bytes, more than the {DEBUG_RELOAD_MAX_BYTES} sluice reloads while holding every shard (restart the server to load it)"
        )));
    }
    let data = std::fs::read(&path).map_err(|e| {
        tracing::warn!("DEBUG RELOAD: cannot read {}: {e}", path.display());
        CmdError::msg(load_failed)
    })?;
    let opts = LoadOptions {
        now_ms: shared.clock.now_ms(),
        limits: shared.live.zset_limits(),
    };
    let mut locked = match shared.keyspace.try_lock_all() {
        Ok(locked) => locked,
        Err(every) if give_way(&every) => return Ok(Some(every.to_vec())),
        Err(_) => shared.keyspace.lock_all(),
    };
    for shard in locked.shards_mut() {
        for db in 0..shard.databases() {
            shard.flush_db(db);
        }
    }
    let loaded = snapshot::load_bytes_locked(&data, &mut locked, &opts).map_err(|e| {
        tracing::warn!("DEBUG RELOAD: {e}");
        CmdError::msg(load_failed)
    })?;
    let changes = locked.stats().changes;
    drop(locked);
    install_functions(shared, &loaded.functions).map_err(|e| {
        tracing::warn!("DEBUG RELOAD: {e}");
        CmdError::msg(load_failed)
    })?;
    record_load(shared, &loaded, changes);
    tracing::warn!("DB reloaded by DEBUG RELOAD");
    Ok(None)
}

fn install_functions(shared: &Shared, codes: &[Bytes]) -> Result<(), String> {
    if codes.is_empty() {
        return Ok(());
    }
    let payload = crate::rdb::dump_functions(codes.iter().map(|c| &c[..]));
    shared
        .scripts
        .function_restore(&payload, crate::script::functions::RestorePolicy::Flush)
        .map_err(|e| format!("cannot load the file's functions: {e}"))
}

fn record_load(shared: &Shared, loaded: &snapshot::Loaded, changes: u64) {
    let state = &shared.persist.state;
    state
        .keys_loaded
        .store(loaded.keys_loaded, Ordering::Relaxed);
    state
        .keys_expired
        .store(loaded.keys_expired, Ordering::Relaxed);
    // As after Redis's load: nothing to save yet.
    state.baseline.store(changes, Ordering::Release);
}

/// How RDB data is loaded: keys expired before `now_ms` skipped, the sorted sets' encoding
/// limits applied (the append-only file's RDB base loads with these too).
pub(crate) fn load_options(shared: &Shared, now_ms: u64) -> LoadOptions {
    LoadOptions {
        now_ms,
        limits: shared.live.zset_limits(),
    }
}

/// After a load (the append-only file's): nothing to save yet, as after Redis's load.
pub(crate) fn nothing_to_save(shared: &Shared) {
    shared
        .persist
        .state
        .baseline
        .store(shared.keyspace.changes(), Ordering::Release);
}

/// The save at exit when no SHUTDOWN decided it (a signal, or the embedding program
/// stopping the server): as Redis on SIGTERM, only when save points are configured.
pub(crate) fn save_on_exit(shared: &Shared) {
    let state = &shared.persist.state;
    if state.shutdown_handled.load(Ordering::Acquire) || shared.config().save.is_empty() {
        return;
    }
    wait_idle(state, Duration::from_secs(600));
    tracing::info!("Saving the final RDB snapshot before exiting.");
    let _ = save_now(shared);
}

/// SHUTDOWN's save, made before the server stops: `save` (SAVE given) or save points
/// configured, unless `nosave`; `Err`: the save failed, and SHUTDOWN must not stop the
/// server (unless FORCE). The connection's SHUTDOWN passed the busy gate: a script that
/// took a shard since (the save walks every shard) sends the request back to the gate
/// (`engine::call::back_to_gate`), which waits for a young script and lets SHUTDOWN answer
/// `-BUSY` past `busy-reply-threshold`, as Redis does, instead of waiting on the script's
/// lock for the whole script. `Ok(false)`: sent back (nothing saved, the reply not sent);
/// `Ok(true)`: saved as asked, the server may stop.
pub(crate) fn shutdown_save_command(
    ctx: &mut Ctx<'_>,
    save: bool,
    nosave: bool,
    force: bool,
) -> Result<bool, SaveError> {
    loop {
        let gives_way = gives_way(ctx);
        match shutdown_save_giving_way(ctx.shared, (save, nosave, force), &|shard| {
            gives_way(&[shard])
        }) {
            Ok(done) => return done.map(|()| true),
            Err(shard) => {
                if crate::engine::call::back_to_gate(ctx, &[shard]) {
                    return Ok(false);
                }
                // The script ended meanwhile: the save starts over.
            }
        }
    }
}

/// SHUTDOWN's save (`(save, nosave, force)` as given); `Err(shard)`: it gave way on that
/// shard, having saved nothing (see [`save_now_giving_way`]).
fn shutdown_save_giving_way(
    shared: &Shared,
    (save, nosave, force): (bool, bool, bool),
    give_way: &dyn Fn(usize) -> bool,
) -> Result<Result<(), SaveError>, usize> {
    let state = &shared.persist.state;
    let wanted = save || (!nosave && !shared.config().save.is_empty());
    if wanted {
        // A background save still writing would rename its older file over ours.
        wait_idle(state, Duration::from_secs(600));
        tracing::info!("Saving the final RDB snapshot before exiting.");
        if let Err(e) = save_now_giving_way(shared, give_way)?
            && !force
        {
            tracing::warn!("Error trying to save the DB, can't exit.");
            return Ok(Err(e));
        }
    }
    state.shutdown_handled.store(true, Ordering::Release);
    Ok(Ok(()))
}

/// Whether [`misconf`] may refuse a command now: the last background save, or the last
/// append-only file write, failed. (`engine::call::plain` asks once per batch.)
#[inline]
pub(crate) fn may_refuse_writes(shared: &Shared) -> bool {
    !shared.persist.state.last_bgsave_ok.load(Ordering::Acquire) || super::aof::write_failed(shared)
}

/// MISCONF: writes (and PING, as Redis) are refused while the last background save failed,
/// save points are configured and `stop-writes-on-bgsave-error` is on, or while the
/// append-only file cannot be written.
pub(crate) fn misconf(shared: &Shared, spec: &CommandSpec) -> Option<Reply> {
    if !(spec.has(CmdFlags::WRITE)
        || spec
            .roles
            .contains(crate::engine::Roles::REFUSED_BY_MISCONF))
    {
        return None;
    }
    let refuse = !shared.persist.state.last_bgsave_ok.load(Ordering::Acquire)
        && shared
            .config
            .read()
            .is_ok_and(|c: std::sync::RwLockReadGuard<'_, Config>| {
                c.stop_writes_on_bgsave_error && !c.save.is_empty()
            });
    if refuse {
        return Some(Reply::Error(MISCONF.into()));
    }
    // Then the append-only file's (Redis's `writeCommandsDeniedByDiskError` order).
    super::aof::write_error(shared).map(|e| Reply::Error(e.into()))
}

/// INFO's persistence fields, in Redis's order. `changes` is `Keyspace::changes` read
/// through the shards INFO holds.
pub(crate) fn info_fields(shared: &Shared, changes: u64) -> Vec<(&'static str, String)> {
    let s = &shared.persist.state;
    let bg = s.background.load(Ordering::Acquire);
    let current = s
        .bg_started
        .lock()
        .ok()
        .and_then(|t| *t)
        .map_or(-1, |t| t.elapsed().as_secs() as i64);
    let ok = |b: bool| if b { "ok" } else { "err" };
    vec![
        ("loading", "0".into()),
        ("async_loading", "0".into()),
        ("current_cow_peak", "0".into()),
        ("current_cow_size", "0".into()),
        ("current_cow_size_age", "0".into()),
        ("current_fork_perc", "0.00".into()),
        ("current_save_keys_processed", "0".into()),
        ("current_save_keys_total", "0".into()),
        (
            "rdb_changes_since_last_save",
            changes
                .wrapping_sub(s.baseline.load(Ordering::Acquire))
                .to_string(),
        ),
        ("rdb_bgsave_in_progress", u8::from(bg).to_string()),
        (
            "rdb_last_save_time",
            s.lastsave_s.load(Ordering::Acquire).to_string(),
        ),
        (
            "rdb_last_bgsave_status",
            ok(s.last_bgsave_ok.load(Ordering::Acquire)).into(),
        ),
        (
            "rdb_last_bgsave_time_sec",
            s.last_bgsave_time_s.load(Ordering::Acquire).to_string(),
        ),
        ("rdb_current_bgsave_time_sec", current.to_string()),
        ("rdb_saves", s.saves.load(Ordering::Relaxed).to_string()),
        ("rdb_last_cow_size", "0".into()),
        (
            "rdb_last_load_keys_expired",
            s.keys_expired.load(Ordering::Relaxed).to_string(),
        ),
        (
            "rdb_last_load_keys_loaded",
            s.keys_loaded.load(Ordering::Relaxed).to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use crate::engine::script_race::{race_a_script, run};
    use crate::protocol::Reply;
    use crate::server::Shared;

    fn server(dir: &std::path::Path) -> Arc<Shared> {
        let config = crate::config::Config {
            dir: Some(dir.display().to_string()),
            test_mode: true, // DEBUG allowed
            ..crate::config::Config::default()
        };
        Arc::new(Shared::new(config, crate::clock::Clock::system()))
    }

    /// SAVE and DEBUG RELOAD lock shards by themselves, after the busy gate: a script that
    /// took a shard since (here the last shard, so SAVE's walk has copied every other one
    /// when it meets it) sends them back to the gate unrun: no file, no save counted, the
    /// keyspace not reloaded; once the script ends each runs. The "script" is this test's
    /// main thread ([`race_a_script`]), holding the shard's lock and marked busy on it, so
    /// the outcome does not depend on timing: a command that waited on the lock would never
    /// answer, and the test would fail on its timeout. A shard held by a command (no
    /// script) is waited for.
    #[test]
    fn save_and_debug_reload_give_way_to_a_script_that_took_a_shard() {
        let dir = tempfile::tempdir().unwrap();
        let shared = server(dir.path());
        let last = shared.keyspace.shard_count() - 1;
        let key = (0u32..)
            .map(|i| format!("k{i}"))
            .find(|k| shared.keyspace.shard_of(k.as_bytes()) == last)
            .unwrap();
        let rdb = shared.config().rdb_path();
        race_a_script(&shared, last, move |shared, c, script| {
            let saves = || shared.persist.state.saves.load(Ordering::Relaxed);
            assert!(!run(shared, c, &["SET", &key, "1"]).1);

            script.take();
            let (_, back) = run(shared, c, &["SAVE"]);
            assert!(back, "SAVE goes back to the gate");
            assert!(!rdb.exists() && saves() == 0, "and saved nothing");
            let (_, back) = run(shared, c, &["DEBUG", "RELOAD"]);
            assert!(back, "DEBUG RELOAD goes back to the gate (in its save)");
            assert!(!rdb.exists() && saves() == 0);
            script.end();

            let (reply, back) = run(shared, c, &["SAVE"]);
            assert!(!back && matches!(reply, Reply::Status(_)), "{reply:?}");
            assert!(rdb.exists() && saves() == 1);
            // The file has k = 1; the keyspace now k = 2. A reload that ran would
            // bring 1 back.
            assert!(!run(shared, c, &["SET", &key, "2"]).1);
            script.take();
            let (_, back) = run(shared, c, &["DEBUG", "RELOAD", "NOSAVE"]);
            assert!(
                back,
                "DEBUG RELOAD NOSAVE goes back to the gate (at its lock)"
            );
            script.end();
            let (reply, back) = run(shared, c, &["GET", &key]);
            assert!(
                !back && format!("{reply:?}").contains(r#"b"2""#),
                "{reply:?}"
            );

            // A command's hold (no script): SAVE waits for the lock and saves.
            script.hold_as_command();
            let (reply, back) = run(shared, c, &["SAVE"]);
            assert!(!back && matches!(reply, Reply::Status(_)), "{reply:?}");
            assert_eq!(saves(), 2);
            let (reply, back) = run(shared, c, &["DEBUG", "RELOAD", "NOSAVE"]);
            assert!(!back && matches!(reply, Reply::Status(_)), "{reply:?}");
            let (reply, _) = run(shared, c, &["GET", &key]);
            assert!(format!("{reply:?}").contains(r#"b"2""#), "{reply:?}");
        });
    }
}
