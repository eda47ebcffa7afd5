//! A whole RDB file (version 10, as Redis 7.0 writes it), in memory: what a master sends a
//! replica for a full resynchronization, and what a replica loads from a master (sluice or
//! redis-server).
//!
//! This is the small form replication needs now: the header, a few aux fields, function
//! libraries, per database the RESIZEDB hint, then each key with its absolute expiry in ms,
//! the EOF opcode and the CRC64. The values themselves use the same encoders as DUMP. The
//! loader accepts what Redis 7.0 writes (aux fields, expiries in s or ms, LRU/LFU hints,
//! function libraries) and refuses module data, the old function opcode and anything newer
//! than version 10. Every length is checked against what remains (see the parent module).

use bytes::Bytes;

use super::{R, RDB_VERSION, RdbError, Reader, crc64, read_value, write_len, write_string};
use crate::store::Value;
use crate::store::zset::ZsetLimits;

const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION_OLD: u8 = 246;
const OPCODE_MODULE_AUX: u8 = 247;
const OPCODE_IDLE: u8 = 248;
const OPCODE_FREQ: u8 = 249;
const OPCODE_AUX: u8 = 250;
const OPCODE_RESIZEDB: u8 = 251;
const OPCODE_EXPIRETIME_MS: u8 = 252;
const OPCODE_EXPIRETIME: u8 = 253;
const OPCODE_SELECTDB: u8 = 254;
const OPCODE_EOF: u8 = 255;

/// Builds an RDB file: call `aux`, `function`, then per database `db` and its `key`s, then
/// `finish`.
#[derive(Debug)]
pub struct Writer {
    out: Vec<u8>,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    /// Starts a file with the magic and version.
    pub fn new() -> Self {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        Writer { out }
    }

    /// An aux field (`redis-ver`, `repl-id`…).
    pub fn aux(&mut self, name: &str, value: &[u8]) {
        self.out.push(OPCODE_AUX);
        write_string(&mut self.out, name.as_bytes());
        write_string(&mut self.out, value);
    }

    /// A function library's code.
    pub fn function(&mut self, code: &[u8]) {
        self.out.push(OPCODE_FUNCTION2);
        write_string(&mut self.out, code);
    }

    /// Starts database `db`, which holds `keys` keys, `expires` of them with a TTL.
    pub fn db(&mut self, db: usize, keys: usize, expires: usize) {
        self.out.push(OPCODE_SELECTDB);
        write_len(&mut self.out, db as u64);
        self.out.push(OPCODE_RESIZEDB);
        write_len(&mut self.out, keys as u64);
        write_len(&mut self.out, expires as u64);
    }

    /// One key of the current database, with its absolute expiry (Unix ms).
    pub fn key(&mut self, key: &[u8], value: &Value, expire_at: Option<u64>) {
        if let Some(at) = expire_at {
            self.out.push(OPCODE_EXPIRETIME_MS);
            self.out.extend_from_slice(&at.to_le_bytes());
        }
        // The value's type byte comes first, then the key, then the payload.
        let mut v = Vec::new();
        super::write_value(&mut v, value);
        let Some((&t, payload)) = v.split_first() else {
            return;
        };
        self.out.push(t);
        write_string(&mut self.out, key);
        self.out.extend_from_slice(payload);
    }

    /// Ends the file: EOF and the checksum.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(OPCODE_EOF);
        let crc = crc64(0, &self.out);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.out
    }
}

/// One thing an RDB file holds.
#[derive(Debug)]
pub enum Item {
    /// A key of database `db`, with its absolute expiry (Unix ms).
    Key {
        /// The database.
        db: usize,
        /// The key.
        key: Bytes,
        /// The value.
        value: Value,
        /// Absolute expiry in Unix ms.
        expire_at: Option<u64>,
    },
    /// A function library's code.
    Function(Bytes),
}

/// Reads an RDB file, handing each key and library to `each` in file order. A database
/// index at or past `databases` is refused. Fails without side effects other than the
/// items already handed over, so a caller flushes first and on error starts over.
pub fn load(
    file: &[u8],
    databases: usize,
    limits: &ZsetLimits,
    mut each: impl FnMut(Item),
) -> R<()> {
    if file.len() < 9 || &file[..5] != b"REDIS" {
        return Err(RdbError::BadFormat);
    }
    let version: u16 = std::str::from_utf8(&file[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(RdbError::BadFormat)?;
    if !(1..=RDB_VERSION).contains(&version) {
        return Err(RdbError::VersionOrChecksum);
    }
    let mut r = Reader { buf: &file[9..] };
    let mut db = 0usize;
    let mut expire_at = None;
    loop {
        let op = r.byte()?;
        match op {
            OPCODE_EOF => break,
            OPCODE_AUX => {
                r.string()?;
                r.string()?;
            }
            OPCODE_RESIZEDB => {
                r.len()?;
                r.len()?;
            }
            OPCODE_SELECTDB => {
                let n = r.len()?;
                if n >= databases as u64 {
                    return Err(RdbError::BadFormat);
                }
                db = n as usize;
            }
            OPCODE_EXPIRETIME_MS => {
                let b = r.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                expire_at = Some(u64::from_le_bytes(a));
            }
            OPCODE_EXPIRETIME => {
                let b = r.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                expire_at = Some(u64::from(u32::from_le_bytes(a)) * 1000);
            }
            OPCODE_IDLE => {
                r.len()?;
            }
            OPCODE_FREQ => {
                r.byte()?;
            }
            OPCODE_FUNCTION2 => each(Item::Function(r.string()?)),
            OPCODE_FUNCTION_OLD | OPCODE_MODULE_AUX => return Err(RdbError::BadFormat),
            t => {
                let key = r.string()?;
                let value = read_value(&mut r, t, limits)?;
                each(Item::Key {
                    db,
                    key,
                    value,
                    expire_at: expire_at.take(),
                });
            }
        }
    }
    // Version 5 on carries a CRC64 of everything before it (0: the writer did not compute it).
    if version >= 5 {
        let consumed = file.len() - r.buf.len();
        let b = r.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        let want = u64::from_le_bytes(a);
        if want != 0 && crc64(0, &file[..consumed]) != want {
            return Err(RdbError::VersionOrChecksum);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keys_functions_and_expiries() {
        let mut w = Writer::new();
        w.aux("redis-ver", b"7.0.15");
        w.function(b"#!lua name=lib\nredis.register_function('f', function() return 1 end)");
        w.db(0, 2, 1);
        w.key(b"a", &Value::Int(5), Some(1_700_000_000_123));
        w.key(b"b", &Value::from_bytes(b"hello"), None);
        w.db(3, 1, 0);
        w.key(b"c", &Value::Int(-1), None);
        let file = w.finish();
        let mut items = Vec::new();
        load(&file, 16, &ZsetLimits::default(), |i| items.push(i)).unwrap();
        assert_eq!(items.len(), 4);
        assert!(matches!(&items[0], Item::Function(_)));
        assert!(matches!(
            &items[1],
            Item::Key {
                db: 0,
                expire_at: Some(1_700_000_000_123),
                ..
            }
        ));
        assert!(matches!(
            &items[3],
            Item::Key {
                db: 3,
                expire_at: None,
                ..
            }
        ));
        // A flipped byte fails the checksum; a truncated file is bad data, never a panic.
        let mut bad = file.clone();
        bad[12] ^= 1;
        assert!(load(&bad, 16, &ZsetLimits::default(), |_| {}).is_err());
        for n in 0..file.len() {
            assert!(load(&file[..n], 16, &ZsetLimits::default(), |_| {}).is_err());
        }
        // A database past the configured count is refused.
        assert!(load(&file, 2, &ZsetLimits::default(), |_| {}).is_err());
    }
}
