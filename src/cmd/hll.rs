//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, over strings in Redis's exact HLL
//! representation (`store::hll`).
//!
//! As in Redis, an HLL is an ordinary string: GET returns its bytes, SET of bytes taken
//! from Redis makes a working HLL, and a string that is not one gets
//! `WRONGTYPE Key is not a valid HyperLogLog string value.`. PFCOUNT of one key writes the
//! recomputed cardinality into the value's cache (and so signals WATCH), as Redis does.

use bytes::Bytes;

use super::strrange::edit_string;
use super::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpecDoc, run};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::hll::{self, Corrupt};

/// The HyperLogLog commands.
#[rustfmt::skip]
pub static COMMANDS: &[C] = &[
    C::new("pfadd", -2, &["write", "denyoom", "fast"], C::keys(1, 1, 1), run::<PfAdd>).with_acl(&["@write", "@hyperloglog", "@fast"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    C::new("pfcount", -2, &["readonly"], C::keys(1, -1, 1), run::<PfCount>).with_acl(&["@read", "@hyperloglog", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access"], 1, -1)
            .with_notes("RW because it may change the internal representation of the key, and propagate to replicas")]),
    C::new("pfmerge", -2, &["write", "denyoom"], C::keys(1, -1, 1), run::<PfMerge>).with_acl(&["@write", "@hyperloglog", "@slow"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "access", "insert"], 1, 0), KeySpecDoc::range(&["RO", "access"], 2, -1)]),
];

fn not_hll() -> CmdError {
    CmdError::msg("WRONGTYPE Key is not a valid HyperLogLog string value.")
}

fn corrupt(_: Corrupt) -> CmdError {
    CmdError::msg("INVALIDOBJ Corrupted HLL object detected")
}

/// Redis's isHLLObjectOrReply: WRONGTYPE for other types; the HLL error for a string that
/// is not an HLL (an integer-encoded string never is).
fn check_hll(v: &Value) -> CmdResult<()> {
    match v {
        Value::Str(b) | Value::Raw(b) if hll::is_hll(b) => Ok(()),
        Value::Str(_) | Value::Raw(_) | Value::Int(_) => Err(not_hll()),
        _ => Err(CmdError::WrongType),
    }
}

/// `hll-sparse-max-bytes`: Redis's default unless CONFIG SET gave another value.
fn sparse_max(ctx: &Ctx<'_>) -> usize {
    ctx.shared
        .params
        .lock()
        .ok()
        .and_then(|p| p.get("hll-sparse-max-bytes").cloned())
        .and_then(|v| crate::config::parse_memory(&v))
        .unwrap_or(hll::SPARSE_MAX_BYTES)
}

/// PFADD key [element …]
#[derive(Debug)]
pub struct PfAdd {
    key: Bytes,
    elements: Vec<Bytes>,
}

impl Command for PfAdd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(PfAdd {
            key: a.next()?.clone(),
            elements: a.rest().to_vec(),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let max_bytes = sparse_max(ctx);
        let add_all = |h: &mut Vec<u8>, mut updated: bool| -> Result<bool, Corrupt> {
            for e in &self.elements {
                updated |= hll::add(h, e, max_bytes)?;
            }
            if updated {
                hll::invalidate(h);
            }
            Ok(updated)
        };
        let existing = match ctx.store.lookup(db, &self.key, now) {
            None => None,
            Some(e) => {
                check_hll(&e.value)?;
                Some(())
            }
        };
        let updated = match existing {
            None => {
                let mut h = hll::new_sparse();
                // Even a failed add leaves the key created, as in Redis.
                let r = add_all(&mut h, true);
                ctx.store.set(db, &self.key, Value::Raw(h.into()), None);
                r.map_err(corrupt)?
            }
            Some(()) => {
                let r = edit_string(&mut ctx.store, db, &self.key, now, |h| {
                    let mut updated = false;
                    for e in &self.elements {
                        match hll::add(h, e, max_bytes) {
                            Ok(u) => updated |= u,
                            Err(c) => return (updated, Err(c)),
                        }
                    }
                    if updated {
                        hll::invalidate(h);
                    }
                    (updated, Ok(()))
                })?;
                let (updated, result) = r.unwrap_or((false, Ok(())));
                // Registers changed before a corrupt part was met stay changed, unsignalled,
                // as in Redis.
                result.map_err(corrupt)?;
                if updated {
                    ctx.store.touch(db, &self.key);
                }
                updated
            }
        };
        if updated {
            ctx.notify(super::notify::class::STRING, "pfadd", &self.key);
        }
        Ok(Reply::Int(updated as i64))
    }
}

/// PFCOUNT key [key …]
#[derive(Debug)]
pub struct PfCount {
    keys: Vec<Bytes>,
}

impl Command for PfCount {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(PfCount {
            keys: a.rest().to_vec(),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        if self.keys.len() > 1 {
            let mut max = vec![0u8; hll::REGISTERS];
            for k in &self.keys {
                let Some(v) = ctx.store.read_value(db, k, now) else {
                    continue;
                };
                check_hll(v)?;
                let bytes = v.as_bytes()?;
                hll::merge_into(&mut max, &bytes).map_err(corrupt)?;
            }
            return Ok(Reply::Int(hll::count_registers(&max) as i64));
        }
        let key = &self.keys[0];
        let Some(v) = ctx.store.read_value(db, key, now) else {
            return Ok(Reply::Int(0));
        };
        check_hll(v)?;
        // Redis unshares the value (it becomes `raw`) before reading the cache.
        let r = edit_string(&mut ctx.store, db, key, now, |h| match hll::cached(h) {
            Some(card) => Ok((card, false)),
            None => {
                let card = hll::count(h)?;
                hll::set_cached(h, card);
                Ok((card, true))
            }
        })?;
        let (card, recomputed) = r.unwrap_or(Ok((0, false))).map_err(corrupt)?;
        if recomputed {
            ctx.store.touch(db, key);
        }
        Ok(Reply::Int(card as i64))
    }
}

/// PFMERGE destkey [sourcekey …]
#[derive(Debug)]
pub struct PfMerge {
    dest: Bytes,
    sources: Vec<Bytes>,
}

impl Command for PfMerge {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(PfMerge {
            dest: a.next()?.clone(),
            sources: a.rest().to_vec(),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let max_bytes = sparse_max(ctx);
        let mut max = vec![0u8; hll::REGISTERS];
        let mut use_dense = false;
        // The destination is merged too, first, as in Redis.
        for k in std::iter::once(&self.dest).chain(&self.sources) {
            let Some(v) = ctx.store.read_value(db, k, now) else {
                continue;
            };
            check_hll(v)?;
            let bytes = v.as_bytes()?;
            use_dense |= bytes[4] == 0;
            hll::merge_into(&mut max, &bytes).map_err(corrupt)?;
        }
        let write = |h: &mut Vec<u8>| -> Result<(), Corrupt> {
            if use_dense {
                hll::to_dense(h)?;
            }
            for (i, &m) in max.iter().enumerate() {
                if m != 0 {
                    // A corrupt sparse destination is left as it is, as in Redis.
                    let _ = hll::set_register(h, i, m, max_bytes);
                }
            }
            hll::invalidate(h);
            Ok(())
        };
        let result = match edit_string(&mut ctx.store, db, &self.dest, now, write)? {
            Some(r) => r,
            None => {
                let mut h = hll::new_sparse();
                let r = write(&mut h);
                ctx.store.set(db, &self.dest, Value::Raw(h.into()), None);
                r
            }
        };
        result.map_err(corrupt)?;
        ctx.store.touch(db, &self.dest);
        ctx.notify(super::notify::class::STRING, "pfadd", &self.dest);
        Ok(Reply::ok())
    }
}
