//! The pure GCRA core of `CL.THROTTLE`, bit-compatible with redis-cell v0.5.0.
//!
//! This module does no I/O, reads no clock and touches no store. The command
//! wrapper reads the clock once, looks the key up, and passes both in. It then
//! applies the [`Decision`] this module returns: it sends the reply and
//! performs the write, if there is one. The behaviour, and the decisions where sluice
//! departs from redis-cell (cited below as "decision N"), are described in
//! `docs/cl-throttle.md`.
//!
//! # Terms
//!
//! GCRA (the generic cell rate algorithm) is a leaky bucket that stores a
//! single timestamp per key.
//!
//! * **Emission interval `T`**: the nominal time between two units at the
//!   sustained rate, `period / count`, in nanoseconds. Each unit of work moves
//!   the key's schedule `T` into the future.
//! * **Delay variation tolerance (DVT)**: how far ahead of "now" the schedule
//!   may run before calls are refused, `T * (max_burst + 1)`. This is the
//!   bucket size expressed as time.
//! * **Theoretical arrival time (TAT)**: the instant at which the key's
//!   schedule is fully paid off, so that the bucket is full again. It is the
//!   only state. It is stored under the key as the decimal text of
//!   nanoseconds since the Unix epoch. A missing key, or a TAT in the past,
//!   means a full bucket.
//! * **Limit**: `max_burst + 1`, the number of units a full bucket holds.
//!   It is reply field 2.
//! * **Quantity**: the number of units that one call asks for. It defaults
//!   to 1. With quantity 0 the call only reports the state, but it still
//!   rewrites the key, as redis-cell does.
//!
//! A call is allowed when `max(TAT, now) + T * quantity - DVT <= now`. An
//! allowed call stores the new TAT and makes the key expire at that TAT.
//! A refused call writes nothing.
//!
//! # Why integer nanoseconds
//!
//! The TAT is an integer count of nanoseconds because redis-cell stores it
//! that way, so `GET` shows the same format and keys keep working when a
//! workload moves between redis-cell and sluice. Integer arithmetic is also
//! exact: floats would drift, and they would make two servers disagree on a
//! decision at the boundary. Finally, integer arithmetic can detect overflow.
//! redis-cell wraps silently on absurd inputs. Decision 3 says sluice reports
//! `ERR value is not an integer or out of range` and writes nothing, and
//! checked integer arithmetic is what makes that possible. The products
//! `max_burst + 1`, `T * (max_burst + 1)` and `T * quantity` are checked in
//! `i64`, the type redis-cell wraps them in. The rest of the time arithmetic
//! is defined in `i128`, so it cannot overflow: a call runs it in `i64` with
//! every step checked, and takes the `i128` form only where a step would
//! leave `i64` (a test compares the two). redis-cell's own time types are
//! wider than 64-bit nanoseconds too. The one time value that must fit is
//! the TAT that gets written: it must lie in `0..=i64::MAX`, which is up to
//! the year 2262.
//!
//! redis-cell uses `f64` in exactly three places whose results reach the
//! reply:
//!
//! * the derivation of `T`;
//! * the microsecond-truncated `remaining`;
//! * the conversion of durations to seconds.
//!
//! These three are reproduced operation for operation, because decision 1
//! asks for identical replies, quirks included. Two examples: `6000 6000 1`
//! reports 6024 remaining, and a `T` under 1 µs reports `i64::MAX`. When `T`
//! is at least 1 µs and the values stay under 2^53 ns (about 104 days), these
//! `f64` steps give the same results as integer division would. Tests check
//! this. The conversion of durations to seconds takes that integer form
//! there (no float arithmetic on the common path), and the `f64` one beyond.
//!
//! # What the command wrapper must do
//!
//! 1. Call [`parse_command`] with every argument after the command name, or
//!    call [`ThrottleArgs::parse`] with the arguments after the key (or
//!    [`parse_command_checked`], or [`LastArgs::parse_command`] to skip the
//!    work when a call repeats the last one's arguments). Each one reports, in redis-cell's order, all errors that depend only on the
//!    arguments: the usage error (wrong argument count), the parse error, the
//!    zero-rate error, and argument overflow (decision 3). They must be
//!    reported *before* the key is read, because redis-cell answers
//!    `Zero rates are not supported` even for a key of the wrong type.
//!    The usage error must come from here and not from a generic arity
//!    check. `CL.THROTTLE k` must get the usage error, even though
//!    `COMMAND INFO` advertises arity -5 (decision 7).
//! 2. Look the key up. If it holds a non-string type, reply
//!    [`ThrottleError::WrongType`] (this module never returns it). If it is a
//!    string, convert it with [`parse_stored_tat`]. If the key is absent or
//!    expired, pass `None`.
//! 3. Read the clock once, in nanoseconds since the epoch (decision 6), and
//!    call [`throttle`].
//! 4. On `Ok`, if [`Decision::write`] is `Some((tat, ttl_ms))`, set the key to
//!    the decimal text of `tat` as a plain string. This replaces any old value
//!    and TTL. Then make the key expire `ttl_ms` milliseconds after `now`,
//!    with Redis semantics: the key is gone once the current millisecond is
//!    *past* the expiry millisecond. A `ttl_ms` of 0 therefore leaves the key
//!    visible for the rest of the current millisecond, as with redis-cell's
//!    `PEXPIRE 0`. Then reply with [`Decision::reply`]. On `Err`, write
//!    nothing and send the error line. [`ThrottleError::error_line`] gives
//!    its exact bytes.

/// Nanoseconds per second.
const NANOS_PER_SEC: i64 = 1_000_000_000;
/// Nanoseconds per millisecond.
const NANOS_PER_MS: i64 = 1_000_000;
/// Nanoseconds per microsecond.
const NANOS_PER_US: i64 = 1_000;

/// Errors of `CL.THROTTLE`. The `Display` text of each variant is its exact
/// Redis error line, without the leading `-` and the trailing CRLF.
///
/// The redis-cell errors carry redis-cell's `Cell error: Store error: `
/// prefix and no `ERR` (decision 1). For [`ThrottleError::InvalidInteger`],
/// `Display` has to show the argument lossily when it is not UTF-8. Use
/// [`ThrottleError::error_line`] for the exact bytes on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThrottleError {
    /// The command did not get exactly 4 or 5 arguments after its name.
    /// The text always says `cl.throttle` in lowercase.
    #[error(
        "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
    )]
    Usage,
    /// A numeric argument is not an `i64` in Rust's `str::parse` syntax. It
    /// holds the argument exactly as sent. Decision 2: non-UTF-8 input is
    /// handled as bytes and gets this error.
    #[error(
        "Cell error: Store error: Couldn't parse as integer: {}",
        String::from_utf8_lossy(.0)
    )]
    InvalidInteger(Vec<u8>),
    /// `count` or `period` is 0, or the emission interval truncates to 0 ns.
    #[error("Cell error: Store error: Zero rates are not supported")]
    ZeroRates,
    /// An allowed call whose new TAT lies 2 ms or more in the past. Only a
    /// negative increment (negative quantity, or negative `count`/`period`)
    /// can cause it. redis-cell fails to set the expiry and leaves the key
    /// behind with no TTL. sluice writes nothing (decision 4).
    #[error("Cell error: Store error: Error while setting key expire")]
    SetExpire,
    /// An arithmetic overflow (decision 3), or a stored value that is not an
    /// unsigned integer or does not fit in `i64` (decision 2).
    #[error("ERR value is not an integer or out of range")]
    OutOfRange,
    /// The key holds a value that is not a string (decision 2). This module
    /// never returns it. It exists so that the command wrapper can report
    /// every `CL.THROTTLE` error through one type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
}

impl ThrottleError {
    /// The exact bytes of the error line, without the leading `-` and the
    /// trailing CRLF.
    ///
    /// The argument inside [`ThrottleError::InvalidInteger`] is copied byte
    /// for byte. The line is then cleaned the way a Redis module's error
    /// reply is, which keeps the line valid RESP and matches redis-cell:
    /// * it is cut at the first NUL byte (the message passes through a
    ///   C string);
    /// * trailing CR and LF bytes are removed;
    /// * any other CR or LF becomes a space.
    #[must_use]
    pub fn error_line(&self) -> Vec<u8> {
        let mut line = match self {
            Self::InvalidInteger(arg) => {
                let mut line = b"Cell error: Store error: Couldn't parse as integer: ".to_vec();
                line.extend_from_slice(arg);
                line
            }
            other => other.to_string().into_bytes(),
        };
        if let Some(nul) = line.iter().position(|&b| b == 0) {
            line.truncate(nul);
        }
        while matches!(line.last(), Some(b'\r' | b'\n')) {
            line.pop();
        }
        for b in &mut line {
            if matches!(*b, b'\r' | b'\n') {
                *b = b' ';
            }
        }
        line
    }
}

/// The four numeric arguments that follow the key, as parsed from the
/// command line.
///
/// The fields are public and no range is enforced: negative values are
/// legal and keep redis-cell's replies (decision 3). [`throttle`] checks the
/// values again, so a value built by hand is safe to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleArgs {
    /// Extra units allowed in a burst. The bucket holds `max_burst + 1`.
    pub max_burst: i64,
    /// Number of units allowed per `period_s`.
    pub count: i64,
    /// Length of the period, in whole seconds.
    pub period_s: i64,
    /// Units this call consumes. The default is 1; 0 only reports the state.
    pub quantity: i64,
}

impl ThrottleArgs {
    /// Parses the arguments *after the key*. There must be 3 or 4 of them:
    /// `max_burst`, `count`, `period`, and optionally `quantity`, which
    /// defaults to 1.
    ///
    /// # Errors
    ///
    /// Errors come in redis-cell's order:
    /// 1. [`ThrottleError::Usage`] if there are not 3 or 4 arguments;
    /// 2. [`ThrottleError::InvalidInteger`] for the first argument, in the
    ///    order above, that is not an `i64` under Rust's `str::parse` rules.
    ///    Those rules allow one optional `+` or `-` and then ASCII digits
    ///    only. They allow no whitespace and no `.`, `e` or `0x`, and reject
    ///    values out of range;
    /// 3. [`ThrottleError::ZeroRates`];
    /// 4. [`ThrottleError::OutOfRange`] if `max_burst + 1`, `T * (max_burst + 1)`
    ///    or `T * quantity` overflows `i64` (decision 3).
    pub fn parse<A: AsRef<[u8]>>(args: &[A]) -> Result<Self, ThrottleError> {
        Self::parse_checked(args).map(|checked| checked.args)
    }

    /// [`ThrottleArgs::parse`], keeping what its checks derived from the arguments, so that
    /// [`CheckedArgs::throttle`] does not derive it again.
    ///
    /// # Errors
    ///
    /// Those of [`ThrottleArgs::parse`].
    #[inline]
    pub fn parse_checked<A: AsRef<[u8]>>(args: &[A]) -> Result<CheckedArgs, ThrottleError> {
        // In order, the first bad one reported; the quantity defaults to 1. The error (and
        // its copy of the argument) is built only on the cold path. Each argument by its
        // position, with no array of values to fill and read back.
        let (max_burst, count, period_s, quantity) = match args {
            [b, c, p] => (number_arg(b)?, number_arg(c)?, number_arg(p)?, 1),
            [b, c, p, q] => (
                number_arg(b)?,
                number_arg(c)?,
                number_arg(p)?,
                number_arg(q)?,
            ),
            _ => return Err(ThrottleError::Usage),
        };
        let args = Self {
            max_burst,
            count,
            period_s,
            quantity,
        };
        args.check()
    }

    /// Checks the values (zero rates, overflow; see [`ThrottleArgs::parse`]) and derives
    /// what a call needs from them.
    ///
    /// # Errors
    ///
    /// [`ThrottleError::ZeroRates`] or [`ThrottleError::OutOfRange`], as
    /// [`ThrottleArgs::parse`] reports them.
    pub fn check(&self) -> Result<CheckedArgs, ThrottleError> {
        Ok(CheckedArgs {
            args: *self,
            params: self.params()?,
        })
    }

    /// Derives `T`, the limit, the DVT and the increment, rejecting zero
    /// rates and `i64` overflow.
    fn params(&self) -> Result<Params, ThrottleError> {
        let emission_ns = emission_interval_ns(self.count, self.period_s);
        if emission_ns == 0 {
            return Err(ThrottleError::ZeroRates);
        }
        let limit = self
            .max_burst
            .checked_add(1)
            .ok_or(ThrottleError::OutOfRange)?;
        let dvt_ns = emission_ns
            .checked_mul(limit)
            .ok_or(ThrottleError::OutOfRange)?;
        let increment_ns = emission_ns
            .checked_mul(self.quantity)
            .ok_or(ThrottleError::OutOfRange)?;
        Ok(Params {
            emission_ns,
            limit,
            dvt_ns,
            increment_ns,
        })
    }
}

/// [`ThrottleArgs`] that passed every check, with the values derived from them: what a
/// command parses once and runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedArgs {
    args: ThrottleArgs,
    params: Params,
}

impl CheckedArgs {
    /// The arguments as parsed.
    #[must_use]
    pub fn args(&self) -> &ThrottleArgs {
        &self.args
    }

    /// [`throttle`] with these arguments, without checking them again.
    ///
    /// # Errors
    ///
    /// Those of [`throttle`] that do not depend on the arguments alone:
    /// [`ThrottleError::SetExpire`] and [`ThrottleError::OutOfRange`] for the new TAT.
    #[inline]
    pub fn throttle(
        &self,
        now_ns: i64,
        stored_tat: Option<i64>,
    ) -> Result<Decision, ThrottleError> {
        decide(now_ns, stored_tat, &self.params)
    }
}

/// [`parse_command`], keeping the derived values ([`ThrottleArgs::parse_checked`]).
///
/// # Errors
///
/// Those of [`parse_command`].
#[inline]
pub fn parse_command_checked<A: AsRef<[u8]>>(
    args: &[A],
) -> Result<(&[u8], CheckedArgs), ThrottleError> {
    let (key, rest) = split_key(args)?;
    Ok((key, ThrottleArgs::parse_checked(rest)?))
}

/// The key and the 3 or 4 numeric arguments after it; the usage error for any other count.
#[inline(always)]
fn split_key<A: AsRef<[u8]>>(args: &[A]) -> Result<(&[u8], &[A]), ThrottleError> {
    match args {
        [key, rest @ ..] if matches!(rest.len(), 3 | 4) => Ok((key.as_ref(), rest)),
        _ => Err(ThrottleError::Usage),
    }
}

/// The numeric arguments of the last `CL.THROTTLE` that parsed, with what they gave: a
/// limiter sends the same ones call after call, so a call repeating them byte for byte
/// takes the result instead of parsing, checking and deriving again. One entry of a few
/// words, kept by the caller (the server keeps one per thread).
#[derive(Debug, Clone, Copy, Default)]
pub struct LastArgs {
    /// The arguments' bytes as [`pack`] makes them (0 for an absent quantity) and what
    /// [`ThrottleArgs::parse_checked`] made of them; `None` until arguments of 1 to 4 bytes
    /// each have parsed.
    last: Option<([u64; 4], CheckedArgs)>,
}

impl LastArgs {
    /// Nothing remembered yet.
    #[must_use]
    pub const fn new() -> Self {
        Self { last: None }
    }

    /// [`parse_command_checked`], answered from the last call when the numeric arguments
    /// are those it parsed (the same bytes: the result cannot differ), and remembering
    /// this call's otherwise. Errors are never remembered, so they come as
    /// `parse_command_checked` reports them, in its order.
    ///
    /// # Errors
    ///
    /// Those of [`parse_command`].
    #[inline]
    pub fn parse_command<'a, A: AsRef<[u8]>>(
        &mut self,
        args: &'a [A],
    ) -> Result<(&'a [u8], CheckedArgs), ThrottleError> {
        let (key, rest) = split_key(args)?;
        let packed = pack_all(rest);
        if let (Some(packed), Some((last, checked))) = (packed, &self.last)
            && packed == *last
        {
            return Ok((key, *checked));
        }
        let checked = ThrottleArgs::parse_checked(rest)?;
        if let Some(packed) = packed {
            self.last = Some((packed, checked));
        }
        Ok((key, checked))
    }
}

/// The 3 or 4 numeric arguments as [`LastArgs`] compares them, or `None` if one of them
/// is not 1 to 4 bytes long.
#[inline(always)]
fn pack_all<A: AsRef<[u8]>>(args: &[A]) -> Option<[u64; 4]> {
    match args {
        [b, c, p] => Some([pack(b.as_ref())?, pack(c.as_ref())?, pack(p.as_ref())?, 0]),
        [b, c, p, q] => Some([
            pack(b.as_ref())?,
            pack(c.as_ref())?,
            pack(p.as_ref())?,
            pack(q.as_ref())?,
        ]),
        _ => None,
    }
}

/// An argument of 1 to 4 bytes as one word: its bytes, and its length above them (so
/// that no two arguments give the same word, NUL bytes included, and none gives 0).
/// `None` for any other length.
#[inline(always)]
fn pack(arg: &[u8]) -> Option<u64> {
    let bytes = match *arg {
        [a] => u32::from(a),
        [a, b] => u32::from_le_bytes([a, b, 0, 0]),
        [a, b, c] => u32::from_le_bytes([a, b, c, 0]),
        [a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
        _ => return None,
    };
    Some(u64::from(bytes) | (arg.len() as u64) << 32)
}

/// Parses every argument of `CL.THROTTLE` after the command name: the key,
/// then the numeric arguments. Returns the key (binary-safe) and the parsed
/// arguments.
///
/// # Errors
///
/// If there are not 4 or 5 arguments, it returns [`ThrottleError::Usage`]
/// before it parses anything. The other errors are those of
/// [`ThrottleArgs::parse`].
pub fn parse_command<A: AsRef<[u8]>>(args: &[A]) -> Result<(&[u8], ThrottleArgs), ThrottleError> {
    let (key, rest) = split_key(args)?;
    Ok((key, ThrottleArgs::parse(rest)?))
}

/// Parses the value stored under the key into a TAT in nanoseconds since
/// the epoch.
///
/// It accepts what redis-cell accepts: an unsigned decimal integer in Rust's
/// `u64` syntax, with one optional leading `+`.
///
/// # Errors
///
/// Any other value (`abc`, the
/// empty string, `-5`, `1.5`, surrounding whitespace, non-UTF-8) gives
/// [`ThrottleError::OutOfRange`]. Under decision 2 that is sluice's reply
/// where redis-cell crashes. A value above `i64::MAX` (after the year 2262)
/// also gives [`ThrottleError::OutOfRange`], because sluice's time
/// arithmetic cannot represent it (decision 3).
pub fn parse_stored_tat(value: &[u8]) -> Result<i64, ThrottleError> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .and_then(|tat| i64::try_from(tat).ok())
        .ok_or(ThrottleError::OutOfRange)
}

/// The outcome of one `CL.THROTTLE` call: the reply, and the write to
/// perform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Reply field 1: `true` if the call was refused.
    pub limited: bool,
    /// Reply field 2: `max_burst + 1`, a constant of the arguments.
    pub limit: i64,
    /// Reply field 3: units left after this call. redis-cell computes it from
    /// microsecond-truncated values, and sluice reproduces its quirks.
    pub remaining: i64,
    /// Reply field 4: seconds until the same call could succeed. It is -1
    /// when the call was allowed, and also when the quantity can never fit
    /// (`quantity > max_burst + 1`).
    pub retry_after_s: i64,
    /// Reply field 5: seconds until the bucket is full again.
    pub reset_after_s: i64,
    /// `Some((new_tat_ns, ttl_ms))` when the state must be written. This
    /// happens on every allowed call, quantity 0 included. The key must be
    /// set to the decimal text of `new_tat_ns`, which is always
    /// non-negative. It must then expire `ttl_ms` milliseconds after the
    /// call's `now`. `ttl_ms` is `new_tat - now` rounded *up* to the next
    /// millisecond (decision 5), or 0 if the new TAT is not in the future.
    /// `None` means that neither the value nor its TTL may be touched.
    pub write: Option<(i64, u64)>,
}

impl Decision {
    /// The five integers of the RESP reply, in wire order.
    #[must_use]
    pub fn reply(&self) -> [i64; 5] {
        [
            i64::from(self.limited),
            self.limit,
            self.remaining,
            self.retry_after_s,
            self.reset_after_s,
        ]
    }
}

/// Runs one GCRA step: should a call of `args.quantity` units be allowed at
/// `now_ns`, given the stored TAT?
///
/// * `now_ns`: the current time, in nanoseconds since the Unix epoch. Read
///   it once per call.
/// * `stored_tat`: the TAT read from the key with [`parse_stored_tat`], or
///   `None` if the key is absent.
///
/// # Errors
///
/// The errors are those of [`ThrottleArgs::parse`], because the arguments
/// are checked again here. In addition:
/// * [`ThrottleError::SetExpire`] for an allowed call whose new TAT is 2 ms
///   or more in the past (decision 4);
/// * [`ThrottleError::OutOfRange`] for an allowed call whose new TAT is
///   outside `0..=i64::MAX` (decision 3).
///
/// Nothing is written on an error. A refused call never fails on time
/// arithmetic.
pub fn throttle(
    now_ns: i64,
    stored_tat: Option<i64>,
    args: &ThrottleArgs,
) -> Result<Decision, ThrottleError> {
    args.check()?.throttle(now_ns, stored_tat)
}

/// The GCRA step of [`throttle`], with the arguments' derived values: in `i64` when no step
/// overflows (every call a limiter makes: times near now, rates of seconds), else in `i128`.
#[inline]
fn decide(
    now_ns: i64,
    stored_tat: Option<i64>,
    params: &Params,
) -> Result<Decision, ThrottleError> {
    match decide_narrow(now_ns, stored_tat, params) {
        Some(decision) => decision,
        None => decide_wide(now_ns, stored_tat, params),
    }
}

/// [`decide_wide`] step for step in `i64`, or `None` where one of its steps would leave
/// `i64` (then `decide_wide` answers, exactly). Where it answers, its result is
/// `decide_wide`'s: the same operations on the same values, narrower (the `f64` steps take
/// the same `i64` values either way). It saves the 128-bit adds, compares and conversions
/// of the common call.
#[inline]
fn decide_narrow(
    now: i64,
    stored_tat: Option<i64>,
    params: &Params,
) -> Option<Result<Decision, ThrottleError>> {
    let (emission, dvt, increment) = (params.emission_ns, params.dvt_ns, params.increment_ns);
    let tat = stored_tat.unwrap_or(now);

    let new_tat = tat.max(now).checked_add(increment)?;
    let allow_at = new_tat.checked_sub(dvt)?;
    let diff = now.checked_sub(allow_at)?;

    let (limited, retry_after, ttl, write) = if diff < 0 {
        let retry_after = if increment <= dvt {
            Some(diff.checked_neg()?)
        } else {
            None
        };
        (true, retry_after, tat.checked_sub(now)?, None)
    } else {
        let ttl = new_tat.checked_sub(now)?;
        let ttl_ms = match expiry_ms_narrow(ttl)? {
            Ok(ms) => ms,
            Err(e) => return Some(Err(e)),
        };
        if new_tat < 0 {
            return Some(Err(ThrottleError::OutOfRange));
        }
        (false, None, ttl, Some((new_tat, ttl_ms)))
    };

    Some(Ok(Decision {
        limited,
        limit: params.limit,
        remaining: remaining_narrow(dvt.checked_sub(ttl)?, emission),
        retry_after_s: retry_after.map_or(-1, reply_seconds_narrow),
        reset_after_s: reply_seconds_narrow(ttl),
        write,
    }))
}

/// The GCRA step in `i128`, where no input can overflow.
#[inline(never)]
fn decide_wide(
    now_ns: i64,
    stored_tat: Option<i64>,
    params: &Params,
) -> Result<Decision, ThrottleError> {
    let emission = i128::from(params.emission_ns);
    let dvt = i128::from(params.dvt_ns);
    let increment = i128::from(params.increment_ns);
    let now = i128::from(now_ns);
    let tat = stored_tat.map_or(now, i128::from);

    let new_tat = tat.max(now) + increment;
    let allow_at = new_tat - dvt;
    let diff = now - allow_at;

    let (limited, retry_after, ttl, write) = if diff < 0 {
        // Refused. A request larger than the bucket can never succeed, so it
        // gets the -1 sentinel instead of a wait time.
        let retry_after = (increment <= dvt).then_some(-diff);
        (true, retry_after, tat - now, None)
    } else {
        let ttl = new_tat - now;
        let ttl_ms = expiry_ms(ttl)?;
        let stored = i64::try_from(new_tat)
            .ok()
            .filter(|tat| *tat >= 0)
            .ok_or(ThrottleError::OutOfRange)?;
        (false, None, ttl, Some((stored, ttl_ms)))
    };

    Ok(Decision {
        limited,
        limit: params.limit,
        remaining: remaining(dvt - ttl, emission),
        retry_after_s: retry_after.map_or(-1, reply_seconds),
        reset_after_s: reply_seconds(ttl),
        write,
    })
}

/// Values derived from [`ThrottleArgs`], in nanoseconds where they are
/// durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Params {
    /// Emission interval `T`. Never 0.
    emission_ns: i64,
    /// `max_burst + 1`.
    limit: i64,
    /// Delay variation tolerance, `T * limit`.
    dvt_ns: i64,
    /// How far this call moves the TAT, `T * quantity`.
    increment_ns: i64,
}

/// Parses one numeric argument with Rust's `i64` rules. Anything that is
/// not UTF-8 is rejected.
#[cfg(test)]
fn parse_i64_arg(arg: &[u8]) -> Result<i64, ThrottleError> {
    parse_rust_i64(arg).ok_or_else(|| invalid_integer(arg))
}

/// One numeric argument: [`parse_rust_i64`], or the error that quotes it.
#[inline(always)]
fn number_arg<A: AsRef<[u8]>>(arg: &A) -> Result<i64, ThrottleError> {
    let arg = arg.as_ref();
    match parse_rust_i64(arg) {
        Some(n) => Ok(n),
        None => Err(invalid_integer(arg)),
    }
}

#[cold]
fn invalid_integer(arg: &[u8]) -> ThrottleError {
    ThrottleError::InvalidInteger(arg.to_vec())
}

/// `str::parse::<i64>` on bytes, without the UTF-8 check (a byte that is not
/// an ASCII digit fails either way): one optional `+` or `-`, then one or more
/// ASCII digits, and no overflow. Accumulating negative values towards
/// `i64::MIN` reaches it exactly.
///
/// Always inlined, for the short form only: the arguments limiters send are one to three
/// plain digits, read here with no call, no sign and no loop (as a call, four of them cost
/// ~80 instructions a command). Anything else (a sign among them) takes
/// [`parse_rust_i64_general`], out of line.
#[inline(always)]
fn parse_rust_i64(arg: &[u8]) -> Option<i64> {
    let digit = |b: u8| {
        let d = b.wrapping_sub(b'0');
        (d <= 9).then_some(i64::from(d))
    };
    let short = match *arg {
        [a] => digit(a),
        [a, b] => digit(a).zip(digit(b)).map(|(a, b)| a * 10 + b),
        [a, b, c] => digit(a)
            .zip(digit(b))
            .zip(digit(c))
            .map(|((a, b), c)| a * 100 + b * 10 + c),
        _ => None,
    };
    if short.is_some() {
        return short;
    }
    parse_rust_i64_general(arg)
}

/// [`parse_rust_i64`] for any input.
#[inline(never)]
fn parse_rust_i64_general(arg: &[u8]) -> Option<i64> {
    let (negative, digits) = match arg {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, arg),
    };
    if digits.is_empty() {
        return None;
    }
    // Up to 18 digits stay below 10^18 < i64::MAX: no step can overflow.
    if digits.len() <= 18 {
        let mut n: i64 = 0;
        for &b in digits {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            n = n * 10 + i64::from(d);
        }
        return Some(if negative { -n } else { n });
    }
    let mut n: i64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?;
        n = if negative {
            n.checked_sub(i64::from(d))?
        } else {
            n.checked_add(i64::from(d))?
        };
    }
    Some(n)
}

/// `x as f64`, through `i64` when `x` fits one: the same round-to-nearest
/// result without the 128-bit conversion routine (the values here are
/// nanosecond counts, which almost always fit).
#[allow(clippy::cast_precision_loss)] // deliberate, see module doc
#[inline]
fn to_f64(x: i128) -> f64 {
    match i64::try_from(x) {
        Ok(v) => v as f64,
        Err(_) => wide_to_f64(x),
    }
}

/// `x as f64` for an `x` beyond `i64`, out of line: inlined, the compiler called the
/// 128-bit conversion routine (`__floattidf`, ~45 instructions) before the branch, on
/// every call, and then threw its result away.
#[cold]
#[inline(never)]
#[allow(clippy::cast_precision_loss)] // deliberate, see module doc
fn wide_to_f64(x: i128) -> f64 {
    x as f64
}

/// `x / d` and `x % d` (truncating, as for `i128`) for a positive `d`, in
/// 64-bit arithmetic when `x` fits an `i64`.
fn div_rem(x: i128, d: i64) -> (i128, i128) {
    match i64::try_from(x) {
        Ok(v) => (i128::from(v / d), i128::from(v % d)),
        Err(_) => (x / i128::from(d), x % i128::from(d)),
    }
}

/// `T = period_s * 1e9 / count`, computed as redis-cell does. The period is
/// turned into exact nanoseconds, the quotient is taken in `f64`, and the
/// result is truncated toward zero, saturating at the `i64` bounds. Returns
/// 0 when `count` or `period_s` is 0.
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)] // deliberate, see module doc
fn emission_interval_ns(count: i64, period_s: i64) -> i64 {
    if count == 0 || period_s == 0 {
        return 0;
    }
    // Exact in i64 for any period up to 292 years; beyond, in i128.
    let period_ns = match period_s.checked_mul(NANOS_PER_SEC) {
        Some(ns) => ns as f64,
        None => wide_to_f64(i128::from(period_s) * i128::from(NANOS_PER_SEC)),
    };
    (period_ns / count as f64) as i64
}

/// Field 3, as redis-cell computes it. `next` is `DVT - ttl`. If `next` is
/// not above `-T` the result is 0. Otherwise both operands are truncated to
/// whole microseconds and divided in `f64`. The cast to `i64` saturates,
/// and NaN becomes 0.
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)] // deliberate, see module doc
fn remaining(next: i128, emission: i128) -> i64 {
    if next <= -emission {
        return 0;
    }
    let next_us = div_rem(next, NANOS_PER_US).0;
    let emission_us = div_rem(emission, NANOS_PER_US).0;
    (to_f64(next_us) / to_f64(emission_us)) as i64
}

/// [`remaining`] for `i64` operands: the same truncations and `f64` division.
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)] // deliberate, see module doc
#[inline]
fn remaining_narrow(next: i64, emission: i64) -> i64 {
    // `-emission` is 2^63 for an `emission` of `i64::MIN` (negative arguments): above any `next`.
    if emission == i64::MIN || next <= -emission {
        return 0;
    }
    ((next / NANOS_PER_US) as f64 / (emission / NANOS_PER_US) as f64) as i64
}

/// [`reply_seconds`] for an `i64` duration.
#[inline]
fn reply_seconds_narrow(d: i64) -> i64 {
    const EXACT: u64 = 1 << 53;
    if d.unsigned_abs() < EXACT {
        d / NANOS_PER_SEC + i64::from(d % NANOS_PER_SEC >= NANOS_PER_MS)
    } else {
        reply_seconds_f64(i128::from(d))
    }
}

/// [`expiry_ms`] for an `i64` ttl; `None` where rounding up would leave `i64`.
#[inline]
fn expiry_ms_narrow(ttl: i64) -> Option<Result<u64, ThrottleError>> {
    if ttl <= -2 * NANOS_PER_MS {
        return Some(Err(ThrottleError::SetExpire));
    }
    if ttl <= 0 {
        return Some(Ok(0));
    }
    let ms = ttl.checked_add(NANOS_PER_MS - 1)? / NANOS_PER_MS;
    Some(Ok(ms.unsigned_abs()))
}

/// Fields 4 and 5: whole seconds, plus one if the sub-second part is at
/// least 1 ms. A remainder under 1 ms is dropped. A negative duration is
/// truncated toward zero with no +1. The seconds are formed in `f64`
/// exactly as redis-cell's time library does it.
///
/// Below 2^53 ns either side of zero (about 104 days), where the sum in `f64` cannot round
/// to the next whole second, that is the integer quotient and the +1, with no float
/// arithmetic: [`reply_seconds_f64`] is kept for the rest.
#[inline]
fn reply_seconds(duration_ns: i128) -> i64 {
    const EXACT: i64 = 1 << 53;
    match i64::try_from(duration_ns) {
        Ok(d) if d.unsigned_abs() < EXACT.unsigned_abs() => {
            d / NANOS_PER_SEC + i64::from(d % NANOS_PER_SEC >= NANOS_PER_MS)
        }
        _ => reply_seconds_f64(duration_ns),
    }
}

/// [`reply_seconds`] the way redis-cell computes it, for any duration.
#[cold]
#[inline(never)]
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)] // deliberate, see module doc
fn reply_seconds_f64(duration_ns: i128) -> i64 {
    let (secs, subsec_ns) = div_rem(duration_ns, NANOS_PER_SEC);
    let whole = (to_f64(secs) + to_f64(subsec_ns) / NANOS_PER_SEC as f64) as i64;
    if subsec_ns >= i128::from(NANOS_PER_MS) {
        whole.saturating_add(1)
    } else {
        whole
    }
}

/// The expiry of an allowed write, in milliseconds from now.
///
/// A positive `ttl` is rounded up to whole milliseconds (decision 5). A
/// `ttl` between -2 ms and 0 gives 0. redis-cell would set expiry 0 there,
/// or (from -2 ms to -1 ms) make the key persistent; either way the stored
/// TAT is already past. A `ttl` of -2 ms or less is where redis-cell's
/// `PEXPIRE` of `trunc_ms(ttl) < -1` fails. That gives the expire error,
/// and nothing is written (decision 4).
fn expiry_ms(ttl: i128) -> Result<u64, ThrottleError> {
    let ms = i128::from(NANOS_PER_MS);
    if ttl <= -2 * ms {
        return Err(ThrottleError::SetExpire);
    }
    if ttl <= 0 {
        return Ok(0);
    }
    // `ttl` is below 2^66 ns here, so its millisecond count fits in a u64.
    u64::try_from(div_rem(ttl + ms - 1, NANOS_PER_MS).0).map_err(|_| ThrottleError::OutOfRange)
}

#[cfg(test)]
mod tests;
