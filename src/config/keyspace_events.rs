//! `notify-keyspace-events`: the class bits and Redis 7.0's letters for them.

/// `g`: generic commands (DEL, EXPIRE, RENAME…).
pub(crate) const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub(crate) const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub(crate) const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub(crate) const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub(crate) const HASH: u32 = 1 << 6;
/// `z`: sorted set commands.
pub(crate) const ZSET: u32 = 1 << 7;
/// `x`: a key expired (lazily or by the reaper).
pub(crate) const EXPIRED: u32 = 1 << 8;
/// `e`: a key was evicted by maxmemory.
pub(crate) const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub(crate) const STREAM: u32 = 1 << 10;
/// `m`: a read found no key.
pub(crate) const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (sluice has none; accepted for compatibility).
pub(crate) const MODULE: u32 = 1 << 12;
/// `n`: a key was created.
pub(crate) const NEW: u32 = 1 << 13;
/// `K`: publish on `__keyspace@<db>__:<key>`.
pub(crate) const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub(crate) const KEYEVENT: u32 = 1 << 1;
/// `A`: every class but `m` and `n`, as in Redis.
pub(crate) const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's reason for a value with a letter that names no class.
pub(crate) const INVALID: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// The class bits of a `notify-keyspace-events` value; None if a character names no
/// class (Redis's `keyspaceEventsStringToFlags`: repeats are fine, order is free).
pub(crate) fn parse(classes: &str) -> Option<u32> {
    classes.bytes().try_fold(0, |flags, c| {
        Some(
            flags
                | match c {
                    b'A' => ALL,
                    b'g' => GENERIC,
                    b'$' => STRING,
                    b'l' => LIST,
                    b's' => SET,
                    b'h' => HASH,
                    b'z' => ZSET,
                    b'x' => EXPIRED,
                    b'e' => EVICTED,
                    b'K' => KEYSPACE,
                    b'E' => KEYEVENT,
                    b't' => STREAM,
                    b'm' => KEY_MISS,
                    b'd' => MODULE,
                    b'n' => NEW,
                    _ => return None,
                },
        )
    })
}

/// The normalised letters CONFIG GET shows (Redis's `keyspaceEventsFlagsToString`: `A`
/// stands for all its classes, and then `n` is not shown even when set).
pub(crate) fn format(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_as_redis_normalises_them() {
        for (given, shown) in [
            ("", ""),
            ("KEA", "AKE"),
            ("EKnmg$lshzxetd", "AKEm"),
            ("ggK", "gK"),
            ("K", "K"),
            ("Exn", "xnE"),
            ("mzhsl$gK", "g$lshzKm"),
        ] {
            assert_eq!(parse(given).map(format).as_deref(), Some(shown), "{given}");
        }
        assert_eq!(parse("KEA "), None);
        assert_eq!(parse("xyz"), None);
        assert_eq!(parse("a"), None);
    }
}
