//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, over strings in Redis's exact HLL
//! representation (`store::hll`).
//!
//! As in Redis, an HLL is an ordinary string: GET returns its bytes, SET of bytes taken
//! from Redis makes a working HLL, and a string that is not one gets
//! `WRONGTYPE Key is not a valid HyperLogLog string value.`. PFCOUNT of one key writes the
//! recomputed cardinality into the value's cache (and so signals WATCH), as Redis does.

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpecDoc, run};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::Value;
use crate::store::access::{StringMut, StringValue};
use crate::store::hll::{self, Corrupt};

/// The HyperLogLog commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[C] = &[
    C::new("pfadd", -2, &["write", "denyoom", "fast"], C::keys(1, 1, 1), run::<PfAdd>).with_acl(&["@write", "@hyperloglog", "@fast"])
        .with_key_specs(&[KeySpecDoc::range(&["RW", "insert"], 1, 0)]),
    C::new("pfcount", -2, &["readonly"], C::keys(1, -1, 1), run::<PfCount>).with_roles(crate::engine::Roles::MAY_REPLICATE).with_acl(&["@read", "@hyperloglog", "@slow"])
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

/// `hll-sparse-max-bytes`: when a sparse HyperLogLog turns dense.
fn sparse_max(ctx: &Ctx<'_>) -> usize {
    ctx.shared.live.hll_sparse_max_bytes()
}

/// PFADD key [element …]
#[derive(Debug)]
pub(crate) struct PfAdd {
    key: Bytes,
    elements: Vec<Bytes>,
}

impl Command<'_> for PfAdd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(PfAdd {
            key: a.next_owned()?,
            elements: crate::engine::args::owned(a.rest()),
        })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let (db, now) = (ctx.db(), ctx.now_ms);
        let max_bytes = sparse_max(ctx);
        let (updated, result) = {
            let mut s: StringMut = ctx
                .store
                .modify_or_create(db, &self.key, now, || StringValue::raw(hll::new_sparse()))?;
            // A created key counts as updated, and is stored even if an add fails, as in
            // Redis.
            let created = s.is_created();
            if !created {
                check_hll(s.value())?;
            }
            let (updated, result) = s.edit(|h| {
                let mut updated = created;
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
            });
            // Registers changed before a corrupt part was met stay changed, unsignalled, as
            // in Redis.
            if !updated || result.is_err() {
                s.mark_unchanged();
            }
            (updated, result)
        };
        result.map_err(corrupt)?;
        if updated {
            ctx.notify(crate::services::notify::class::STRING, "pfadd", &self.key);
        }
        Ok(Reply::Int(updated as i64))
    }
}

/// PFCOUNT key [key …]
#[derive(Debug)]
pub(crate) struct PfCount {
    keys: Vec<Bytes>,
}

impl Command<'_> for PfCount {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(PfCount {
            keys: crate::engine::args::owned(a.rest()),
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
        let r = match ctx.store.modify::<StringValue>(db, key, now)? {
            None => Ok(0),
            Some(mut s) => {
                let r = s.edit(|h| match hll::cached(h) {
                    Some(card) => Ok((card, false)),
                    None => {
                        let card = hll::count(h)?;
                        hll::set_cached(h, card);
                        Ok((card, true))
                    }
                });
                // Only a cache write is a change (signalled as in Redis).
                if !matches!(r, Ok((_, true))) {
                    s.mark_unchanged();
                }
                r.map(|(card, _)| card)
            }
        };
        let card = r.map_err(corrupt)?;
        Ok(Reply::Int(card as i64))
    }
}

/// PFMERGE destkey [sourcekey …]
#[derive(Debug)]
pub(crate) struct PfMerge {
    dest: Bytes,
    sources: Vec<Bytes>,
}

impl Command<'_> for PfMerge {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(PfMerge {
            dest: a.next_owned()?,
            sources: crate::engine::args::owned(a.rest()),
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
        let result = {
            let mut s: StringMut = ctx
                .store
                .modify_or_create(db, &self.dest, now, || StringValue::raw(hll::new_sparse()))?;
            let r = s.edit(write);
            // A failed conversion is not signalled (a created key is stored all the same).
            if r.is_err() {
                s.mark_unchanged();
            }
            r
        };
        result.map_err(corrupt)?;
        ctx.notify(crate::services::notify::class::STRING, "pfadd", &self.dest);
        Ok(Reply::ok())
    }
}
