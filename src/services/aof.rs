//! The append-only file as the server runs it (the files and their writer are `crate::aof`):
//! loading at start (Redis's `loadAppendOnlyFiles`: the base, an RDB file or commands, then
//! the incremental files in order, `aof-load-truncated` for a last file cut short, the
//! start refused for anything else wrong), opening it after the load, BGREWRITEAOF's rewrite
//! (the command is `commands::persist`), the
//! automatic rewrite (`auto-aof-rewrite-percentage` / `-min-size`, checked by the save
//! timer's tick), CONFIG SET appendonly / appendfsync at run time, INFO's `aof_*` fields and
//! the MISCONF refusal after a failed write.
//!
//! Commands of the files run through `engine::execute` as a replica's master link runs
//! them: no key expires while loading (Redis's rule too: expired keys go once it serves).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::aof::manifest::Manifest;
use crate::aof::rewrite::{self, Inputs};
use crate::aof::{Aof, State};
use crate::client::ClientState;
use crate::protocol::Reply;
use crate::rdb::snapshot;
use crate::server::Shared;

/// What loading one file ended with.
#[derive(Debug, PartialEq, Eq)]
enum Loaded {
    Ok,
    Empty,
    /// Cut short; loaded up to the last whole command (the offset to truncate to).
    Truncated(u64),
}

/// Loads the AOF if `appendonly yes` (else the RDB file, `persist::load_at_start`), then
/// opens it for appending. Err: the start must stop, with Redis's reason.
pub(crate) fn load_at_start(shared: &Shared) -> Result<(), String> {
    let config = shared.config().clone();
    if !config.aof.enabled {
        return super::persist::load_at_start(shared);
    }
    let dir = config.aof_dir();
    let prefix = &config.aof.filename;
    let manifest_path = dir.join(crate::aof::manifest::manifest_name(prefix));
    let manifest = match std::fs::read(&manifest_path) {
        Ok(text) => Manifest::parse(&text)
            .map_err(|e| format!("*** FATAL AOF MANIFEST FILE ERROR *** {e}"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest file {}: {e}",
                manifest_path.display()
            ));
        }
    };
    let started = std::time::Instant::now();
    let files: Vec<&str> = manifest
        .base
        .iter()
        .chain(&manifest.incr)
        .map(|e| e.name.as_str())
        .collect();
    for (i, name) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let path = dir.join(name);
        let outcome = load_file(shared, &path, name, config.aof.load_truncated)?;
        if let Loaded::Truncated(valid) = outcome {
            if !last {
                return Err(format!(
                    "Fatal error: the truncated file is not the last file ({name})"
                ));
            }
            tracing::warn!("!!! Warning: short read while loading the AOF file {name}!!!");
            tracing::warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(valid))
                .map_err(|e| format!("Error truncating the AOF file {name}: {e}"))?;
            tracing::warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
        }
    }
    if !files.is_empty() {
        tracing::info!(
            "DB loaded from append only file: {:.3} seconds",
            started.elapsed().as_secs_f64()
        );
    }
    super::persist::nothing_to_save(shared);
    let aof = &shared.repl.aof;
    aof.open_at_start(&config.aof, &dir, manifest, |path| {
        let inputs = inputs(shared);
        let mut store = inputs.keyspace.lock_all();
        let copies = snapshot::copy_locked(&mut store, inputs.opts.now_ms);
        drop(store);
        rewrite::write_base(path, inputs.rdb, &inputs.functions, &inputs.opts, copies).map(|_| ())
    })
}

/// Loads one file (Redis's `loadSingleAppendOnlyFile`): an RDB file if it starts with
/// `REDIS`, else commands.
fn load_file(
    shared: &Shared,
    path: &Path,
    name: &str,
    truncated_ok: bool,
) -> Result<Loaded, String> {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("The append log file {name} doesn't exist: {e}"));
        }
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the append log file {name} for reading: {e}"
            ));
        }
    };
    if data.is_empty() {
        return Ok(Loaded::Empty);
    }
    if data.starts_with(b"REDIS") {
        // Nothing expires while loading (Redis's rule), as the commands' files load too.
        let opts = super::persist::load_options(shared, 0);
        let loaded = snapshot::load_bytes(&data, &shared.keyspace, &opts).map_err(|e| {
            format!("Error reading the RDB base file {name}, AOF loading aborted: {e}")
        })?;
        if !loaded.functions.is_empty() {
            let dump = crate::rdb::dump_functions(loaded.functions.iter().map(|c| &c[..]));
            shared
                .scripts
                .function_restore(&dump, crate::script::functions::RestorePolicy::Replace)
                .map_err(|e| format!("Error loading the functions of {name}: {e}"))?;
        }
        return Ok(Loaded::Ok);
    }
    run_commands(shared, &data, name, truncated_ok)
}

/// What reading the next command found.
enum Next {
    Command(Vec<Bytes>, usize),
    End,
    /// The data ends inside a command.
    Short,
    /// Not the format.
    Bad,
}

/// Reads one line (up to `\n`, at most 1023 bytes as Redis's `fgets` buffer; a longer one
/// is read in pieces, and the piece is then not a whole header).
fn line(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if at >= data.len() {
        return None;
    }
    let rest = &data[at..];
    let n = rest
        .iter()
        .take(1023)
        .position(|&b| b == b'\n')
        .map_or(rest.len().min(1023), |i| i + 1);
    Some((&rest[..n], at + n))
}

/// C's `atoi`/`strtol` on a header's digits.
fn leading_number(s: &[u8]) -> i64 {
    let mut i = 0;
    let neg = s.first() == Some(&b'-');
    if matches!(s.first(), Some(b'-' | b'+')) {
        i = 1;
    }
    let mut n: i64 = 0;
    while let Some(d) = s.get(i).filter(|d| d.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(d - b'0'));
        i += 1;
    }
    if neg { -n } else { n }
}

fn next_command(data: &[u8], mut at: usize) -> Next {
    let header = loop {
        let Some((l, next)) = line(data, at) else {
            return Next::End;
        };
        at = next;
        if l.first() == Some(&b'#') {
            continue; // an annotation
        }
        break l;
    };
    if header.first() != Some(&b'*') {
        return Next::Bad;
    }
    if header.len() < 2 || !header.ends_with(b"\n") && at >= data.len() {
        return Next::Short;
    }
    let argc = leading_number(&header[1..]);
    if argc < 1 {
        return Next::Bad;
    }
    let mut argv = Vec::with_capacity(argc.min(1024) as usize);
    for _ in 0..argc {
        let Some((l, next)) = line(data, at) else {
            return Next::Short;
        };
        if l.first() != Some(&b'$') {
            return Next::Bad;
        }
        if !l.ends_with(b"\n") && next >= data.len() {
            return Next::Short;
        }
        at = next;
        let Ok(len) = usize::try_from(leading_number(&l[1..])) else {
            return Next::Bad;
        };
        let Some(end) = at.checked_add(len).filter(|&e| e <= data.len()) else {
            return Next::Short;
        };
        argv.push(Bytes::copy_from_slice(&data[at..end]));
        if end + 2 > data.len() {
            return Next::Short;
        }
        at = end + 2;
    }
    Next::Command(argv, at)
}

/// Runs a file of commands in the context of one client.
fn run_commands(
    shared: &Shared,
    data: &[u8],
    name: &str,
    truncated_ok: bool,
) -> Result<Loaded, String> {
    let info = shared.clients.register("aof".into(), String::new());
    let id = info.id;
    let mut client = ClientState::new(info);
    client.master_link = true;
    client.authenticated = true;
    let result = (|| {
        let mut at = 0usize;
        let mut valid = 0usize;
        let mut before_multi = 0usize;
        loop {
            match next_command(data, at) {
                Next::End => break,
                Next::Bad => {
                    return Err(format!(
                        "Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
                    ));
                }
                Next::Short => {
                    return truncated(name, valid, truncated_ok);
                }
                Next::Command(argv, next) => {
                    let Some(entry) = shared.table.get_entry(&argv[0]) else {
                        return Err(format!(
                            "Unknown command '{}' reading the append only file {name}",
                            String::from_utf8_lossy(&argv[0])
                        ));
                    };
                    if entry
                        .spec
                        .roles
                        .contains(crate::engine::Roles::STARTS_MULTI)
                    {
                        before_multi = valid;
                    }
                    let reply = crate::engine::execute(
                        shared,
                        &mut client,
                        &crate::protocol::request::borrowed_args(&argv),
                    );
                    if let Reply::Error(e) = &reply {
                        tracing::debug!("AOF command answered an error: {e}");
                    }
                    at = next;
                    valid = at;
                }
            }
        }
        if client.multi.is_some() {
            tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
            return truncated(name, before_multi, truncated_ok);
        }
        Ok(Loaded::Ok)
    })();
    shared.clients.unregister(id);
    result
}

fn truncated(name: &str, valid: usize, ok: bool) -> Result<Loaded, String> {
    if ok {
        return Ok(Loaded::Truncated(valid as u64));
    }
    Err(format!(
        "Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
    ))
}

/// What a rewrite needs, read from the server's state.
fn inputs(shared: &Shared) -> Inputs {
    let config = shared.config();
    let (functions, opts) = crate::services::persist::snapshot_header(shared, true);
    Inputs {
        keyspace: shared.keyspace.clone(),
        functions,
        opts,
        rdb: config.aof.use_rdb_preamble,
        dir: config.aof_dir(),
        prefix: config.aof.filename.clone(),
    }
}

/// Starts a rewrite on its own thread; false if one runs already or the thread could not
/// start.
pub(crate) fn start_rewrite(shared: &Shared) -> bool {
    let aof = shared.repl.aof.clone();
    if aof
        .stats
        .rewriting
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    let inputs = inputs(shared);
    let spawned = std::thread::Builder::new()
        .name("sluice-aofrw".into())
        .spawn(move || {
            let _ = rewrite::run(&aof, inputs);
        });
    if let Err(e) = spawned {
        tracing::warn!("Can't rewrite the append only file in background: {e}");
        shared
            .repl
            .aof
            .stats
            .rewriting
            .store(false, Ordering::Release);
        return false;
    }
    tracing::info!("Background append only file rewriting started");
    true
}

/// After CONFIG SET: applies `appendfsync` and turns the AOF on (a rewrite makes its first
/// base while clients are served) or off.
pub(crate) fn configured(shared: &Shared) {
    let (enabled, fsync) = {
        let c = shared.config();
        (c.aof.enabled, c.aof.fsync)
    };
    let aof = &shared.repl.aof;
    aof.set_fsync(fsync);
    match (enabled, aof.state()) {
        // A rewrite already runs (BGREWRITEAOF with the AOF off): start after it.
        (true, State::Off) if !start_rewrite(shared) => {
            aof.stats.scheduled.store(true, Ordering::Release);
        }
        (false, State::On | State::WaitRewrite) => {
            aof.stop();
            tracing::info!("Background append only file rewriting stopped; AOF off");
        }
        _ => {}
    }
}

/// After a replica loaded its master's snapshot: the AOF (if on) starts over with a base
/// of the new data (the old files stay the loadable ones until that base is written).
pub(crate) fn restart_after_full_sync(shared: &Shared) {
    let aof = &shared.repl.aof;
    if aof.state() == State::Off {
        return;
    }
    aof.stop();
    if !start_rewrite(shared) {
        aof.stats.scheduled.store(true, Ordering::Release);
    }
}

/// One tick of the save timer: a scheduled rewrite, or the automatic one when the files
/// grew by `auto-aof-rewrite-percentage` over the last base (and past `-min-size`).
pub(crate) fn tick(shared: &Shared) {
    let aof = &shared.repl.aof;
    if aof.stats.rewriting.load(Ordering::Acquire) {
        return;
    }
    if aof.stats.scheduled.swap(false, Ordering::AcqRel) {
        start_rewrite(shared);
        return;
    }
    if aof.state() != State::On {
        return;
    }
    let (perc, min) = {
        let c = shared.config();
        (c.aof.rewrite_percentage, c.aof.rewrite_min_size)
    };
    let current = aof.stats.current_size.load(Ordering::Relaxed);
    if perc == 0 || current <= min {
        return;
    }
    let base = aof.stats.base_size.load(Ordering::Relaxed).max(1);
    let growth = (current * 100 / base).saturating_sub(100);
    if growth >= perc {
        tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
        start_rewrite(shared);
    }
}

/// At shutdown: what was appended reaches the disk.
pub(crate) fn flush_on_exit(shared: &Shared) {
    let aof = &shared.repl.aof;
    if aof.on() {
        aof.flush_all();
    }
    aof.stop_fsync_thread();
}

/// Redis's MISCONF for a failed AOF write (None while writes succeed).
#[inline]
pub(crate) fn write_error(shared: &Shared) -> Option<String> {
    // Inline: every write asks (`persist::misconf`), and the answer is almost always None.
    if !write_failed(shared) {
        return None;
    }
    failed_write_error(&shared.repl.aof)
}

/// Whether the append-only file is on and its last write failed ([`write_error`] answers).
#[inline]
pub(crate) fn write_failed(shared: &Shared) -> bool {
    let aof = &shared.repl.aof;
    aof.on() && !aof.stats.last_write_ok.load(Ordering::Relaxed)
}

#[cold]
fn failed_write_error(aof: &crate::aof::Aof) -> Option<String> {
    let e = aof
        .stats
        .last_write_error
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default();
    Some(format!("MISCONF Errors writing to the AOF file: {e}"))
}

/// INFO persistence's AOF fields, in Redis's order (the size fields only while on).
pub(crate) fn info_fields(shared: &Shared) -> Vec<(&'static str, String)> {
    let aof: &Arc<Aof> = &shared.repl.aof;
    let s = &aof.stats;
    let state = aof.state();
    let rewriting = s.rewriting.load(Ordering::Acquire);
    let current = s
        .rewrite_started
        .lock()
        .ok()
        .and_then(|t| *t)
        .map_or(-1, |t| t.elapsed().as_secs() as i64);
    let ok = |b: bool| if b { "ok" } else { "err" };
    let mut v = vec![
        ("aof_enabled", u8::from(state != State::Off).to_string()),
        ("aof_rewrite_in_progress", u8::from(rewriting).to_string()),
        (
            "aof_rewrite_scheduled",
            u8::from(s.scheduled.load(Ordering::Relaxed)).to_string(),
        ),
        (
            "aof_last_rewrite_time_sec",
            s.last_rewrite_s.load(Ordering::Relaxed).to_string(),
        ),
        (
            "aof_current_rewrite_time_sec",
            if rewriting { current } else { -1 }.to_string(),
        ),
        (
            "aof_last_bgrewrite_status",
            ok(s.last_rewrite_ok.load(Ordering::Relaxed)).into(),
        ),
        (
            "aof_rewrites",
            s.rewrites.load(Ordering::Relaxed).to_string(),
        ),
        (
            "aof_rewrites_consecutive_failures",
            s.failures.load(Ordering::Relaxed).to_string(),
        ),
        (
            "aof_last_write_status",
            ok(s.last_write_ok.load(Ordering::Relaxed)).into(),
        ),
        ("aof_last_cow_size", "0".into()),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
    ];
    if shared.config().aof.enabled {
        v.extend([
            (
                "aof_current_size",
                s.current_size.load(Ordering::Relaxed).to_string(),
            ),
            (
                "aof_base_size",
                s.base_size.load(Ordering::Relaxed).to_string(),
            ),
            (
                "aof_pending_rewrite",
                u8::from(s.scheduled.load(Ordering::Relaxed)).to_string(),
            ),
            ("aof_buffer_length", aof.buffer_len().to_string()),
            ("aof_pending_bio_fsync", "0".into()),
            ("aof_delayed_fsync", "0".into()),
        ]);
    }
    v
}

/// BGREWRITEAOF with the AOF off: a new base from a copy, a manifest naming only it.
pub(crate) fn start_off_rewrite(shared: &Shared) -> bool {
    let aof = shared.repl.aof.clone();
    if aof
        .stats
        .rewriting
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    let inputs = inputs(shared);
    std::thread::Builder::new()
        .name("sluice-aofrw".into())
        .spawn(move || {
            let _ = rewrite::run_off(&aof, inputs);
        })
        .map_err(|_| {
            shared
                .repl
                .aof
                .stats
                .rewriting
                .store(false, Ordering::Release)
        })
        .is_ok()
}
