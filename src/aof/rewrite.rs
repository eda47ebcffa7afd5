//! A rewrite: a new base file from a copy of the keyspace, made without stopping clients.
//!
//! 1. In one hold of every shard: copy the keyspace (`rdb::snapshot::copy_locked`), write
//!    and sync what the buffer holds into the current incremental file, and start a new
//!    incremental file (named in the manifest at once, as Redis's `openNewIncrAofForAppend`;
//!    when the AOF is being enabled, a temporary one the manifest does not name yet). Every
//!    write is then in the copy or in the new file, never both, since `Aof::append` runs
//!    under the writer's shard locks.
//! 2. With no lock held: serialize the copy into `temp-rewriteaof-bg-<pid>.aof` in the AOF
//!    folder (an RDB file with `aof-use-rdb-preamble yes`, else commands) and sync it.
//! 3. Under the file lock: rename it to the next base name, turn the old base and every
//!    incremental file but the current one into history, write the manifest atomically,
//!    then delete the history files and write the manifest again without them.
//!
//! A crash at any point leaves a manifest naming a complete set of files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;

use super::{Aof, State, lock};
use crate::rdb::snapshot::{self, SaveOptions, ShardCopy};
use crate::store::Keyspace;
use crate::store::value::Value;

/// What a rewrite needs from the server (read by the caller).
#[derive(Debug)]
pub(crate) struct Inputs {
    /// The keyspace to copy.
    pub(crate) keyspace: Arc<Keyspace>,
    /// The function libraries' code.
    pub(crate) functions: Vec<Bytes>,
    /// The RDB header's fields.
    pub(crate) opts: SaveOptions,
    /// Write an RDB base (`aof-use-rdb-preamble`).
    pub(crate) rdb: bool,
    /// The AOF folder (when enabling: where to create it).
    pub(crate) dir: PathBuf,
    /// `appendfilename`.
    pub(crate) prefix: String,
}

/// Writes a base file from shard copies: an RDB file or commands.
pub(crate) fn write_base(
    path: &Path,
    rdb: bool,
    functions: &[Bytes],
    opts: &SaveOptions,
    copies: Vec<ShardCopy>,
) -> std::io::Result<u64> {
    let file = std::fs::File::create(path)?;
    if rdb {
        let mut opts = opts.clone();
        opts.aof_base = true;
        snapshot::write_copies(functions.iter().map(|c| &c[..]), &opts, &file, copies)?;
    } else {
        let mut w = std::io::BufWriter::with_capacity(64 * 1024, &file);
        write_commands(&mut w, functions, copies)?;
        w.flush()?;
    }
    file.sync_all()?;
    Ok(file.metadata()?.len())
}

/// The keyspace as commands: FUNCTION LOAD for each library, then per database a SELECT
/// and, per key, SET for a string or RESTORE with Redis's serialization for any other
/// type, and PEXPIREAT for a key with an expiry.
fn write_commands(
    w: &mut impl Write,
    functions: &[Bytes],
    copies: Vec<ShardCopy>,
) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(4096);
    for code in functions {
        crate::repl::encode_command(
            &mut out,
            &[
                Bytes::from_static(b"FUNCTION"),
                Bytes::from_static(b"LOAD"),
                code.clone(),
            ],
        );
    }
    let mut selected = None;
    for copy in copies {
        for (db, entries) in copy {
            if selected != Some(db) {
                crate::repl::encode_command(
                    &mut out,
                    &[Bytes::from_static(b"SELECT"), db.to_string().into()],
                );
                selected = Some(db);
            }
            for (key, value, expire) in entries {
                let argv = match value.as_bytes() {
                    Ok(v) => vec![Bytes::from_static(b"SET"), key.clone(), v],
                    Err(_) => restore(&key, &value),
                };
                crate::repl::encode_command(&mut out, &argv);
                if let Some(at) = expire {
                    crate::repl::encode_command(
                        &mut out,
                        &[
                            Bytes::from_static(b"PEXPIREAT"),
                            key.clone(),
                            at.to_string().into(),
                        ],
                    );
                }
                if out.len() > 64 * 1024 {
                    w.write_all(&out)?;
                    out.clear();
                }
            }
        }
    }
    w.write_all(&out)
}

fn restore(key: &Bytes, value: &Value) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"RESTORE"),
        key.clone(),
        Bytes::from_static(b"0"),
        crate::rdb::dump(value).into(),
        Bytes::from_static(b"REPLACE"),
    ]
}

/// Runs a whole rewrite (on the caller's thread: BGREWRITEAOF's, or the start of the AOF
/// at run time). Err with the reason if it failed; the AOF then goes on with its old files.
pub(crate) fn run(aof: &Aof, inputs: Inputs) -> Result<(), String> {
    let started = Instant::now();
    *lock(&aof.stats.rewrite_started) = Some(started);
    aof.stats.rewriting.store(true, Ordering::Release);
    let result = run_steps(aof, &inputs);
    aof.stats.rewriting.store(false, Ordering::Release);
    *lock(&aof.stats.rewrite_started) = None;
    aof.stats
        .last_rewrite_s
        .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
    aof.stats
        .last_rewrite_ok
        .store(result.is_ok(), Ordering::Relaxed);
    match &result {
        Ok(()) => {
            aof.stats.rewrites.fetch_add(1, Ordering::Relaxed);
            aof.stats.failures.store(0, Ordering::Relaxed);
            tracing::info!("Background AOF rewrite finished successfully");
        }
        Err(e) => {
            aof.stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("Background AOF rewrite failed: {e}");
        }
    }
    result
}

fn temp_incr_name(prefix: &str) -> String {
    format!("temp-{prefix}.incr")
}

fn run_steps(aof: &Aof, inputs: &Inputs) -> Result<(), String> {
    let enabling = aof.state() != State::On;
    if enabling {
        std::fs::create_dir_all(&inputs.dir).map_err(|e| {
            format!(
                "Can't open or create append-only dir {}: {e}",
                inputs.dir.display()
            )
        })?;
    }
    // Step 1, in one hold of every shard.
    let mut store = inputs.keyspace.lock_all();
    let copies = snapshot::copy_locked(&mut store, inputs.opts.now_ms);
    {
        let mut files = aof.files();
        if enabling {
            let name = temp_incr_name(&inputs.prefix);
            let file = std::fs::File::create(inputs.dir.join(&name))
                .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
            if files.manifest.is_empty() {
                // The folder's manifest, if Redis or an earlier run left one: the new
                // files continue its numbering.
                let path = inputs
                    .dir
                    .join(super::manifest::manifest_name(&inputs.prefix));
                if let Ok(text) = std::fs::read(&path)
                    && let Ok(m) = super::manifest::Manifest::parse(&text)
                {
                    files.manifest = m;
                }
            }
            files.file = Some(Arc::new(file));
            files.dir = inputs.dir.clone();
            files.prefix = inputs.prefix.clone();
            files.incr_size = 0;
            aof.stats.current_size.store(0, Ordering::Relaxed);
            lock(&aof.pending).db = None;
            aof.set_state(State::WaitRewrite);
        } else {
            aof.write_pending(&mut files, true);
            let mut next = files.manifest.clone();
            let name = next.new_incr(&files.prefix);
            let file = std::fs::File::create(files.dir.join(&name))
                .map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
            next.persist(&files.dir, &files.prefix)
                .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
            tracing::info!("Creating AOF incr file {name} on background rewrite");
            files.manifest = next;
            files.file = Some(Arc::new(file));
            files.incr_size = 0;
            lock(&aof.pending).db = None;
        }
    }
    drop(store);

    // Step 2, no lock held.
    let temp = inputs
        .dir
        .join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let base_size = match write_base(&temp, inputs.rdb, &inputs.functions, &inputs.opts, copies) {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            return Err(format!("Error writing the AOF base: {e}"));
        }
    };

    // Step 3, under the file lock.
    let mut files = aof.files();
    if aof.state() == State::Off {
        // Stopped meanwhile (CONFIG SET appendonly no).
        let _ = std::fs::remove_file(&temp);
        return Err("the AOF was turned off during the rewrite".into());
    }
    let dir = files.dir.clone();
    let prefix = files.prefix.clone();
    let mut next = files.manifest.clone();
    let base = next.new_base(&prefix, inputs.rdb);
    std::fs::rename(&temp, dir.join(&base)).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("Error trying to rename the temporary AOF base file: {e}")
    })?;
    if enabling {
        // Every incremental file of an earlier life of the folder is history: the new base
        // holds all the data.
        let name = next.new_incr(&prefix);
        std::fs::rename(dir.join(temp_incr_name(&prefix)), dir.join(&name))
            .map_err(|e| format!("Error renaming the temporary incr AOF file: {e}"))?;
    }
    next.retire_incr_but_last();
    next.persist(&dir, &prefix)
        .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
    tracing::info!("Successfully renamed the temporary AOF base file into {base}");
    for h in next.history.drain(..) {
        tracing::info!("Removing the history file {} in the background", h.name);
        let _ = std::fs::remove_file(dir.join(&h.name));
    }
    if let Err(e) = next.persist(&dir, &prefix) {
        tracing::warn!("Can't write the AOF manifest: {e}");
    }
    files.manifest = next;
    aof.stats.base_size.store(base_size, Ordering::Relaxed);
    aof.stats
        .current_size
        .store(base_size + files.incr_size, Ordering::Relaxed);
    drop(files);
    if enabling {
        aof.set_state(State::On);
    }
    Ok(())
}

/// BGREWRITEAOF with the AOF off (Redis's rewrite then writes a base and a manifest naming
/// only it: the incremental files of the folder become history).
pub(crate) fn run_off(aof: &Aof, inputs: Inputs) -> Result<(), String> {
    let started = Instant::now();
    *lock(&aof.stats.rewrite_started) = Some(started);
    aof.stats.rewriting.store(true, Ordering::Release);
    let result = (|| {
        std::fs::create_dir_all(&inputs.dir).map_err(|e| {
            format!(
                "Can't open or create append-only dir {}: {e}",
                inputs.dir.display()
            )
        })?;
        let mut store = inputs.keyspace.lock_all();
        let copies = snapshot::copy_locked(&mut store, inputs.opts.now_ms);
        drop(store);
        let temp = inputs
            .dir
            .join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
        write_base(&temp, inputs.rdb, &inputs.functions, &inputs.opts, copies).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            format!("Error writing the AOF base: {e}")
        })?;
        let path = inputs
            .dir
            .join(super::manifest::manifest_name(&inputs.prefix));
        let mut m = match std::fs::read(&path) {
            Ok(text) => super::manifest::Manifest::parse(&text)?,
            Err(_) => super::manifest::Manifest::default(),
        };
        let base = m.new_base(&inputs.prefix, inputs.rdb);
        std::fs::rename(&temp, inputs.dir.join(&base))
            .map_err(|e| format!("Error trying to rename the temporary AOF base file: {e}"))?;
        for mut e in m.incr.drain(..).rev() {
            e.kind = super::manifest::Kind::History;
            m.history.insert(0, e);
        }
        m.persist(&inputs.dir, &inputs.prefix)
            .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
        for h in m.history.drain(..) {
            let _ = std::fs::remove_file(inputs.dir.join(&h.name));
        }
        m.persist(&inputs.dir, &inputs.prefix)
            .map_err(|e| format!("Can't write the AOF manifest: {e}"))
    })();
    aof.stats.rewriting.store(false, Ordering::Release);
    *lock(&aof.stats.rewrite_started) = None;
    aof.stats
        .last_rewrite_ok
        .store(result.is_ok(), Ordering::Relaxed);
    if result.is_ok() {
        aof.stats.rewrites.fetch_add(1, Ordering::Relaxed);
    }
    result
}
