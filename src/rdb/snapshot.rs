//! Whole RDB files (format version 10, as Redis 7.0 writes them, or 12 when they hold hashes
//! with field TTLs, as Redis 7.4 does; versions up to 12 load): the writer behind SAVE,
//! BGSAVE and SHUTDOWN SAVE, and the loader used at start and by DEBUG RELOAD. Replication's
//! full sync can reuse both ([`write_to`], [`load_from`]).
//!
//! This module owns the file layout (magic, AUX fields, function libraries, SELECTDB /
//! RESIZEDB, per-key expiry, EOF and the CRC64 trailer); the value payloads are the parent
//! module's, shared with DUMP/RESTORE. It uses [`crate::store`] (the keyspace it reads from
//! and loads into) and nothing of the server: the caller passes the function libraries'
//! code in and takes the loaded ones out.
//!
//! **Consistency of a snapshot.** The writer takes one shard at a time: it locks the shard,
//! clones the live entries of every database in it, releases the lock and then serializes
//! the copy. Each shard is thus copied at one instant (and a key's value is never torn),
//! but two shards are copied at different instants, so a snapshot is not one point in time
//! as a Redis fork is: a write to shard 7 that happened after shard 2 was copied is in the
//! file, one to shard 2 is not. Keys of all databases live in the shard their name hashes
//! to, so MOVE of a key is atomic with respect to a snapshot; SWAPDB, FLUSHALL and
//! multi-key writes across shards may be seen half done. A shard is held only while it is
//! cloned (strings are reference-counted; aggregates are copied), never while writing.
//!
//! **Loading.** The whole file is read into memory, then parsed; every length is checked
//! against the bytes that remain before anything is allocated, so a hostile file costs at
//! most its own size plus the values it really holds. Everything Redis 7.0 writes is read
//! (AUX, RESIZEDB, EXPIRETIME, EXPIRETIME_MS, IDLE, FREQ, FUNCTION2, every value encoding
//! of the parent module, including the ziplist/zipmap encodings of RDB 9 and older); streams,
//! module values and MODULE_AUX are refused with a clear error. Keys whose expiry has
//! passed are skipped, as a Redis master does.

use std::io::{self, Read, Write};

use bytes::Bytes;

use super::{RdbError, Reader, crc64, read_value, write_len, write_string, write_value};
use crate::store::Value;
use crate::store::zset::ZsetLimits;
use crate::store::{Keyspace, Locked};

/// The RDB format version this writer produces (Redis 7.0's).
pub(crate) const FILE_VERSION: u32 = 10;

/// The newest file version the loader reads: Redis 7.4's. Versions 11 (7.2: set listpacks,
/// stream listpacks 3) and 12 (7.4: hashes with field TTLs, cluster slot info) add types and
/// an opcode, not changes to the ones before.
pub(crate) const NEWEST_LOADABLE_VERSION: u32 = 12;

/// Redis 7.4's per-slot sizes (cluster mode only): a hint, skipped.
const OPCODE_SLOT_INFO: u8 = 244;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_MODULE_AUX: u8 = 247;
const OPCODE_IDLE: u8 = 248;
const OPCODE_FREQ: u8 = 249;
const OPCODE_AUX: u8 = 250;
const OPCODE_RESIZEDB: u8 = 251;
const OPCODE_EXPIRETIME_MS: u8 = 252;
const OPCODE_EXPIRETIME: u8 = 253;
const OPCODE_SELECTDB: u8 = 254;
const OPCODE_EOF: u8 = 255;

/// A key copied out of its shard: name, value, expiry.
type CopiedEntry = (Bytes, Value, Option<u64>);

/// What the writer puts in the file besides the data.
#[derive(Debug, Clone)]
pub(crate) struct SaveOptions {
    /// The `redis-ver` AUX field.
    pub redis_version: String,
    /// `ctime`: the save time, Unix seconds.
    pub ctime_s: u64,
    /// `used-mem`: bytes in use.
    pub used_mem: u64,
    /// Write the CRC64 trailer (`rdbchecksum yes`); otherwise eight zero bytes, which a
    /// loader takes as "not checked".
    pub checksum: bool,
    /// Keys whose expiry is before this Unix ms are left out (already logically gone).
    pub now_ms: u64,
    /// The file is an append-only file's base (the `aof-base` AUX field is 1).
    pub aof_base: bool,
}

/// What a save wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SaveStats {
    /// Keys written.
    pub keys: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// A `Write` that counts and checksums what goes through it.
struct CrcWriter<W: Write> {
    inner: W,
    crc: u64,
    bytes: u64,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc = crc64(self.crc, b);
        self.bytes += b.len() as u64;
        self.inner.write_all(b)
    }
}

/// The live keys of one shard, copied out of it: per database, (key, value, expiry).
pub(crate) type ShardCopy = Vec<(usize, Vec<CopiedEntry>)>;

/// Copies the live keys (expiry not before `now_ms`) of every database of `shard`.
fn copy_shard(shard: &crate::store::Shard, now_ms: u64) -> ShardCopy {
    let mut per_db: ShardCopy = Vec::new();
    for db in 0..shard.databases() {
        let d = shard.db(db);
        if d.is_empty() {
            continue;
        }
        let live: Vec<_> = d
            .iter()
            .filter(|e| !e.is_expired(now_ms))
            .map(|e| {
                (
                    Bytes::copy_from_slice(&e.key),
                    e.value.clone(),
                    e.expire_at(),
                )
            })
            .collect();
        if !live.is_empty() {
            per_db.push((db, live));
        }
    }
    per_db
}

/// Copies the live keys of every shard `locked` holds, at the instant of that hold: the
/// caller keeps the hold for as long as what it reads must match the copy (a master reads
/// its replication offset before releasing), then serializes with [`write_copies`] with no
/// lock held. `now_ms` 0 copies keys whose expiry has passed too (a master's full sync: the
/// replica gets them and the master's DEL later).
pub(crate) fn copy_locked(locked: &mut Locked<'_>, now_ms: u64) -> Vec<ShardCopy> {
    locked.fold(Vec::new(), |mut copies, shard| {
        copies.push(copy_shard(shard, now_ms));
        copies
    })
}

/// Locks `shard` of `ks`, unless it is held and `give_way(shard)`: then a [`GaveWay`]
/// error (see [`write_to`]).
pub(crate) fn lock_shard<'k>(
    ks: &'k Keyspace,
    shard: usize,
    give_way: &dyn Fn(usize) -> bool,
) -> io::Result<Locked<'k>> {
    match ks.try_lock_indexes(&[shard]) {
        Some(locked) => Ok(locked),
        None if give_way(shard) => Err(io::Error::new(io::ErrorKind::Interrupted, GaveWay(shard))),
        None => Ok(ks.lock_indexes(&[shard])),
    }
}

/// Why [`write_to`] stopped early: the shard it found held and gave way on. Carried as the
/// payload of an `io::ErrorKind::Interrupted` error.
#[derive(Debug, thiserror::Error)]
#[error("the walk gave way on shard {0}")]
pub(crate) struct GaveWay(pub(crate) usize);

impl GaveWay {
    /// The shard `e` gave way on, if `e` is [`write_to`]'s giving way.
    pub(crate) fn of(e: &io::Error) -> Option<usize> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<GaveWay>())
            .map(|g| g.0)
    }
}

/// Writes a whole RDB file of `ks` (every database) and the function libraries `functions`
/// (their code, as FUNCTION LOAD took it) to `out`. Takes one shard at a time (see the
/// module's notes on consistency); `out` is not flushed to disk here.
///
/// A walk that must not wait on some holders of a shard (SAVE, on a connection's thread,
/// must not wait on a shard a script took after SAVE passed the busy gate) is told so by
/// `give_way`: asked when a shard is held, true stops the walk with a [`GaveWay`] error
/// (what was written is of no use: the caller drops it), false waits for the lock.
pub(crate) fn write_to<'a>(
    ks: &Keyspace,
    functions: impl IntoIterator<Item = &'a [u8]>,
    opts: &SaveOptions,
    out: impl Write,
    give_way: &dyn Fn(usize) -> bool,
) -> io::Result<SaveStats> {
    let lock = |shard: usize| lock_shard(ks, shard, give_way);

    // The header comes first, so a pass of type checks decides it before anything is copied.
    let mut field_ttls = false;
    for shard in 0..ks.shard_count() {
        let locked = lock(shard)?;
        if locked.held_shard(shard).is_some_and(|s| {
            (0..s.databases()).any(|db| s.db(db).iter().any(|e| holds_field_ttls(&e.value)))
        }) {
            field_ttls = true;
            break;
        }
    }
    // Copy under the shard's lock, serialize after releasing it.
    let copies = (0..ks.shard_count()).map(|shard| {
        let locked = lock(shard)?;
        Ok(locked
            .held_shard(shard)
            .map(|s| copy_shard(s, opts.now_ms))
            .unwrap_or_default())
    });
    write_file(functions, opts, out, file_version(field_ttls), copies)
}

/// Writes a whole RDB file from shard copies ([`copy_locked`]) and the function libraries
/// `functions`.
pub(crate) fn write_copies<'a>(
    functions: impl IntoIterator<Item = &'a [u8]>,
    opts: &SaveOptions,
    out: impl Write,
    copies: Vec<ShardCopy>,
) -> io::Result<SaveStats> {
    let field_ttls = copies
        .iter()
        .flatten()
        .any(|(_, entries)| entries.iter().any(|(_, v, _)| holds_field_ttls(v)));
    write_file(
        functions,
        opts,
        out,
        file_version(field_ttls),
        copies.into_iter().map(Ok),
    )
}

/// A hash in a form with field TTLs, written as RDB type 24 or 25 (Redis 7.4's).
fn holds_field_ttls(v: &Value) -> bool {
    matches!(v, Value::Hash(h) if h.is_volatile())
}

/// The header's version: Redis 7.0's, so Redis 7.0 loads the file, unless it holds hashes
/// with field TTLs, which only Redis 7.4 and later read: then 7.4's, as Redis 7.4 writes it.
fn file_version(field_ttls: bool) -> u32 {
    if field_ttls {
        NEWEST_LOADABLE_VERSION
    } else {
        FILE_VERSION
    }
}

fn write_file<'a>(
    functions: impl IntoIterator<Item = &'a [u8]>,
    opts: &SaveOptions,
    out: impl Write,
    version: u32,
    copies: impl IntoIterator<Item = io::Result<ShardCopy>>,
) -> io::Result<SaveStats> {
    let mut w = CrcWriter {
        inner: io::BufWriter::with_capacity(64 * 1024, out),
        crc: 0,
        bytes: 0,
    };
    w.put(format!("REDIS{version:04}").as_bytes())?;
    let mut buf = Vec::with_capacity(256);
    let ctime = opts.ctime_s.to_string();
    let used = opts.used_mem.to_string();
    for (k, v) in [
        ("redis-ver", opts.redis_version.as_str()),
        ("redis-bits", "64"),
        ("ctime", ctime.as_str()),
        ("used-mem", used.as_str()),
        ("aof-base", if opts.aof_base { "1" } else { "0" }),
    ] {
        buf.clear();
        buf.push(OPCODE_AUX);
        write_string(&mut buf, k.as_bytes());
        write_string(&mut buf, v.as_bytes());
        w.put(&buf)?;
    }
    for code in functions {
        buf.clear();
        buf.push(OPCODE_FUNCTION2);
        write_string(&mut buf, code);
        w.put(&buf)?;
    }
    let mut keys = 0u64;
    for copy in copies {
        for (db, entries) in copy? {
            buf.clear();
            buf.push(OPCODE_SELECTDB);
            write_len(&mut buf, db as u64);
            buf.push(OPCODE_RESIZEDB);
            write_len(&mut buf, entries.len() as u64);
            write_len(
                &mut buf,
                entries.iter().filter(|e| e.2.is_some()).count() as u64,
            );
            w.put(&buf)?;
            for (key, value, expire) in entries {
                buf.clear();
                if let Some(at) = expire {
                    buf.push(OPCODE_EXPIRETIME_MS);
                    buf.extend_from_slice(&at.to_le_bytes());
                }
                let start = buf.len();
                write_value(&mut buf, &value);
                // write_value puts the type byte first; the key goes between it and the
                // payload.
                let payload = buf.split_off(start + 1);
                write_string(&mut buf, &key);
                w.put(&buf)?;
                w.put(&payload)?;
                keys += 1;
            }
        }
    }
    w.put(&[OPCODE_EOF])?;
    let crc = if opts.checksum { w.crc } else { 0 };
    w.put(&crc.to_le_bytes())?;
    w.inner.flush()?;
    Ok(SaveStats {
        keys,
        bytes: w.bytes,
    })
}

/// How to load.
#[derive(Debug, Clone)]
pub(crate) struct LoadOptions {
    /// Keys whose expiry is before this Unix ms are skipped.
    pub now_ms: u64,
    /// Sorted-set encoding thresholds in force.
    pub limits: ZsetLimits,
}

/// What a load found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    /// Keys stored.
    pub keys_loaded: u64,
    /// Keys skipped because their expiry had passed.
    pub keys_expired: u64,
    /// The function libraries' code, in file order (the caller loads them).
    pub functions: Vec<Bytes>,
}

/// Why a file was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    /// Reading failed.
    #[error("error reading the RDB file: {0}")]
    Io(#[from] io::Error),
    /// Not an RDB file.
    #[error("Wrong signature trying to load DB from file")]
    Signature,
    /// A version this loader does not know.
    #[error("Can't handle RDB format version {0}")]
    Version(u32),
    /// The file does not parse.
    #[error("Short read or corrupt RDB file at byte {offset}: {what}")]
    Corrupt {
        /// Where it went wrong.
        offset: u64,
        /// What was being read.
        what: &'static str,
    },
    /// The checksum trailer does not match.
    #[error("Wrong RDB checksum expected: ({expected:x}) got: ({got:x})")]
    Checksum {
        /// The trailer's value.
        expected: u64,
        /// What the file's bytes sum to.
        got: u64,
    },
    /// Something Redis writes that sluice does not hold.
    #[error("Unsupported RDB content at byte {offset}: {what}")]
    Unsupported {
        /// Where.
        offset: u64,
        /// What it is.
        what: String,
    },
    /// A SELECTDB beyond `databases`.
    #[error("Data file was created with a server configured to handle more than {0} databases")]
    TooManyDatabases(usize),
    /// The same key twice in one database.
    #[error("Duplicated key '{key}' in DB {db} of the RDB file")]
    DuplicateKey {
        /// The database.
        db: usize,
        /// The key (lossy UTF-8).
        key: String,
    },
}

/// Loads an RDB file from `input` into `ks` (which the caller has emptied), and returns the
/// function libraries for the caller to install. On error `ks` may hold part of the file.
pub(crate) fn load_from(
    mut input: impl Read,
    ks: &Keyspace,
    opts: &LoadOptions,
) -> Result<Loaded, LoadError> {
    let mut data = Vec::new();
    input.read_to_end(&mut data)?;
    load_bytes(&data, ks, opts)
}

/// [`load_from`] over bytes already in memory.
pub(crate) fn load_bytes(
    data: &[u8],
    ks: &Keyspace,
    opts: &LoadOptions,
) -> Result<Loaded, LoadError> {
    load_records(
        data,
        ks.databases(),
        opts,
        &mut |db, key, value, expire_at, idle| {
            let mut locked = ks.lock_keys([key]);
            store(&mut locked, db, key, value, expire_at, idle, opts.now_ms)
        },
    )
}

/// [`load_bytes`] through shards the caller holds (all of them: DEBUG RELOAD empties and
/// reloads the keyspace in one hold, so no client sees it half loaded).
pub(crate) fn load_bytes_locked(
    data: &[u8],
    locked: &mut Locked<'_>,
    opts: &LoadOptions,
) -> Result<Loaded, LoadError> {
    let databases = locked.keyspace().databases();
    load_records(
        data,
        databases,
        opts,
        &mut |db, key, value, expire_at, idle| {
            store(locked, db, key, value, expire_at, idle, opts.now_ms)
        },
    )
}

/// Where a loaded key goes: (db, key, value, expiry, idle seconds).
type Sink<'s> =
    dyn FnMut(usize, &[u8], Value, Option<u64>, Option<u64>) -> Result<(), LoadError> + 's;

fn load_records(
    data: &[u8],
    databases: usize,
    opts: &LoadOptions,
    sink: &mut Sink<'_>,
) -> Result<Loaded, LoadError> {
    if data.len() < 9 || &data[..5] != b"REDIS" {
        return Err(LoadError::Signature);
    }
    let version = std::str::from_utf8(&data[5..9])
        .ok()
        .filter(|s| s.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or(LoadError::Signature)?;
    if !(1..=NEWEST_LOADABLE_VERSION).contains(&version) {
        return Err(LoadError::Version(version));
    }
    let total = data.len() as u64;
    let mut r = Reader { buf: &data[9..] };
    let mut loaded = Loaded::default();
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    let mut idle_s: Option<u64> = None;
    loop {
        let offset = total - r.buf.len() as u64;
        let corrupt = |_: &Reader<'_>, what: &'static str| {
            move |_: RdbError| LoadError::Corrupt { offset, what }
        };
        let op = r.byte().map_err(corrupt(&r, "an opcode or value type"))?;
        match op {
            OPCODE_EOF => break,
            OPCODE_SELECTDB => {
                let n = r.len().map_err(corrupt(&r, "a database number"))?;
                if n >= databases as u64 {
                    return Err(LoadError::TooManyDatabases(databases));
                }
                db = n as usize;
            }
            OPCODE_RESIZEDB => {
                r.len().map_err(corrupt(&r, "RESIZEDB's key count"))?;
                r.len().map_err(corrupt(&r, "RESIZEDB's expires count"))?;
            }
            OPCODE_SLOT_INFO => {
                for what in [
                    "SLOT_INFO's slot",
                    "SLOT_INFO's size",
                    "SLOT_INFO's expires size",
                ] {
                    r.len().map_err(corrupt(&r, what))?;
                }
            }
            OPCODE_AUX => {
                r.string().map_err(corrupt(&r, "an AUX field name"))?;
                r.string().map_err(corrupt(&r, "an AUX field value"))?;
            }
            OPCODE_EXPIRETIME => {
                let b = r.take(4).map_err(corrupt(&r, "an expire time"))?;
                let s = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                expire = Some(i64::from(s).saturating_mul(1000));
            }
            OPCODE_EXPIRETIME_MS => {
                let b = r.take(8).map_err(corrupt(&r, "an expire time"))?;
                let mut x = [0u8; 8];
                x.copy_from_slice(b);
                expire = Some(i64::from_le_bytes(x));
            }
            OPCODE_IDLE => {
                idle_s = Some(r.len().map_err(corrupt(&r, "an idle time"))?);
            }
            OPCODE_FREQ => {
                r.byte().map_err(corrupt(&r, "an LFU frequency"))?;
            }
            OPCODE_FUNCTION2 => {
                let code = r.string().map_err(corrupt(&r, "a function library"))?;
                loaded.functions.push(code);
            }
            OPCODE_FUNCTION_PRE_GA => {
                return Err(LoadError::Unsupported {
                    offset,
                    what: "functions in the format of Redis 7.0's release candidates".into(),
                });
            }
            OPCODE_MODULE_AUX => {
                return Err(LoadError::Unsupported {
                    offset,
                    what: "module data (MODULE_AUX); sluice loads no modules".into(),
                });
            }
            t => {
                if let Some(what) = unsupported_type(t) {
                    return Err(LoadError::Unsupported {
                        offset,
                        what: what.into(),
                    });
                }
                let key = r.string().map_err(corrupt(&r, "a key"))?;
                let value = read_value(&mut r, t, &opts.limits).map_err(corrupt(&r, "a value"))?;
                let exp = expire.take();
                let idle = idle_s.take();
                let expire_at = match exp {
                    // Already gone: skipped, as a master does.
                    Some(ms) if ms < 0 || (ms as u64) < opts.now_ms => {
                        loaded.keys_expired += 1;
                        continue;
                    }
                    // u64::MAX is the store's "no expiry"; no real deadline reaches it.
                    Some(ms) => Some(ms as u64),
                    None => None,
                };
                sink(db, &key, value, expire_at, idle)?;
                loaded.keys_loaded += 1;
            }
        }
    }
    if version >= 5 {
        let sum_end = data.len() - r.buf.len();
        let b = r.take(8).map_err(|_| LoadError::Corrupt {
            offset: sum_end as u64,
            what: "the checksum",
        })?;
        let mut x = [0u8; 8];
        x.copy_from_slice(b);
        let expected = u64::from_le_bytes(x);
        if expected != 0 {
            let got = crc64(0, &data[..sum_end]);
            if got != expected {
                return Err(LoadError::Checksum { expected, got });
            }
        }
    }
    Ok(loaded)
}

fn store(
    locked: &mut Locked<'_>,
    db: usize,
    key: &[u8],
    value: Value,
    expire_at: Option<u64>,
    idle_s: Option<u64>,
    now_ms: u64,
) -> Result<(), LoadError> {
    if locked.lookup_untouched(db, key, 0).is_some() {
        return Err(LoadError::DuplicateKey {
            db,
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    locked.set(db, key, value, expire_at);
    if let Some(idle) = idle_s
        && let Some(e) = locked.lookup_untouched(db, key, 0)
    {
        e.set_idle(now_ms, idle.saturating_mul(1000));
    }
    Ok(())
}

/// Value types Redis 7.0 may write that sluice does not hold, with the reason.
fn unsupported_type(t: u8) -> Option<&'static str> {
    Some(match t {
        6 | 7 => "a module value type; sluice loads no modules",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
