//! Conversions between Redis replies and Lua values, both ways, as Redis 7.0 does them.
//!
//! Replies a script receives from `redis.call` depend on the protocol the script chose with
//! `redis.setresp` (2 by default): in RESP2 a nil bulk becomes `false`, maps become flat
//! arrays and doubles become strings; in RESP3 nulls become `nil`, maps `{map={…}}`, sets
//! `{set={…}}`, doubles `{double=n}` and booleans Lua booleans. Status and error replies are
//! `{ok=…}` and `{err=…}` tables in both.
//!
//! What a script returns is turned into a reply: numbers are truncated to integers, `true`
//! is `:1` (RESP3 scripts: `#t`), `false` and `nil` are a nil reply (RESP3 scripts: `#f` for
//! `false`), tables are arrays that stop at the first `nil`, and `{err=…}`, `{ok=…}`,
//! `{double=…}`, `{big_number=…}`, `{map=…}`, `{set=…}` become the matching reply types.

use std::borrow::Cow;

use bytes::Bytes;
#[cfg(test)]
use mlua::Lua;
use mlua::{Table, Value};

use crate::num::c_cast_i64;
#[cfg(test)]
use crate::num::fmt_g;
use crate::protocol::Reply;

/// Deepest table nesting turned into a reply: a value inside more tables than this becomes
/// the error `reached lua stack limit`, as in Redis, whose limit comes from its Lua stack
/// (about 7994 for nested arrays). sluice stops earlier because replies are built, encoded
/// and dropped recursively (sized to fit a 2 MiB stack in a debug build).
pub(crate) const MAX_DEPTH: usize = 200;

/// Most values one script reply may hold. A table reachable more than once is converted
/// each time it is reached, so a few small tables that refer to each other (`t = {t, t}`)
/// would otherwise expand to an exponential reply; Redis has the same expansion and no limit.
pub(crate) const MAX_REPLY_ELEMENTS: usize = 1 << 23;

/// The reply when a script's return value expands past [`MAX_REPLY_ELEMENTS`].
pub(crate) const REPLY_TOO_LARGE: &str =
    "ERR reply too large: a script reply may hold at most 8388608 values";

/// A Redis reply as the Lua value a script sees (`resp` is the script's protocol).
#[cfg(test)]
pub(crate) fn reply_to_lua(lua: &Lua, reply: &Reply, resp: u8) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Status(s) => Value::Table(single(lua, "ok", s.as_bytes())?),
        Reply::Error(e) => Value::Table(single(lua, "err", e.as_bytes())?),
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Short(s) => Value::String(lua.create_string(s.as_bytes())?),
        Reply::FlagInts(flag, ints) => {
            let items = Reply::flag_ints_items(*flag, ints);
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, n) in items.into_iter().enumerate() {
                t.raw_set(i + 1, n as f64)?;
            }
            Value::Table(t)
        }
        Reply::Verbatim(b) if resp < 3 => Value::String(lua.create_string(b)?),
        Reply::Verbatim(b) => {
            let inner = lua.create_table_with_capacity(0, 2)?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", lua.create_string(b)?)?;
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        Reply::Null | Reply::NullArray => {
            if resp >= 3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        // Scripts cannot run the commands that answer with these (they are `noscript`).
        Reply::Array(items) | Reply::Push(items) | Reply::Multi(items) => array(lua, items, resp)?,
        Reply::Set(items) if resp >= 3 => {
            let inner = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                let k = reply_to_lua(lua, item, resp)?;
                if !k.is_nil() {
                    inner.raw_set(k, true)?;
                }
            }
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("set", inner)?;
            Value::Table(t)
        }
        Reply::Set(items) => array(lua, items, resp)?,
        Reply::Map(pairs) if resp >= 3 => {
            let inner = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                let k = reply_to_lua(lua, k, resp)?;
                let v = reply_to_lua(lua, v, resp)?;
                if !k.is_nil() {
                    inner.raw_set(k, v)?;
                }
            }
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("map", inner)?;
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            let mut i = 1;
            for (k, v) in pairs {
                t.raw_set(i, reply_to_lua(lua, k, resp)?)?;
                t.raw_set(i + 1, reply_to_lua(lua, v, resp)?)?;
                i += 2;
            }
            Value::Table(t)
        }
        Reply::Double(d) if resp >= 3 => {
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("double", *d)?;
            Value::Table(t)
        }
        Reply::Double(d) => {
            let mut text = Vec::with_capacity(24);
            crate::num::format_double(*d, &mut text);
            Value::String(lua.create_string(&text)?)
        }
        // Lua reads a RESP3 double's text with strtod, as Redis's script bridge does.
        Reply::DoubleText(t) if resp >= 3 => {
            let t2 = lua.create_table_with_capacity(0, 1)?;
            t2.raw_set("double", crate::num::parse_f64(t).unwrap_or(0.0))?;
            Value::Table(t2)
        }
        Reply::DoubleText(t) => Value::String(lua.create_string(t)?),
        Reply::Bool(b) if resp >= 3 => Value::Boolean(*b),
        Reply::Bool(b) => Value::Number(if *b { 1.0 } else { 0.0 }),
        Reply::BigNumber(b) if resp >= 3 => Value::Table(single(lua, "big_number", b)?),
        Reply::BigNumber(b) => Value::String(lua.create_string(b)?),
    })
}

#[cfg(test)]
fn single(lua: &Lua, field: &str, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(field, lua.create_string(text)?)?;
    Ok(t)
}

#[cfg(test)]
fn array(lua: &Lua, items: &[Reply], resp: u8) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, item, resp)?)?;
    }
    Ok(Value::Table(t))
}

/// A Lua value a script returned (or an element of it) as a reply; `resp` is the script's
/// protocol, which decides how booleans are sent.
#[cfg(test)]
pub(crate) fn lua_to_reply(v: &Value, resp: u8) -> Reply {
    lua_to_reply_limited(v, resp, MAX_REPLY_ELEMENTS, &|| false)
}

/// Like [`lua_to_reply`], giving up (with `None`) as soon as `stop` says so: converting a
/// large reply takes time, and SCRIPT KILL must still end the script.
pub(crate) fn lua_to_reply_stoppable(
    v: &Value,
    resp: u8,
    stop: &dyn Fn() -> bool,
) -> Option<Reply> {
    let mut state = Budget {
        left: MAX_REPLY_ELEMENTS + 1,
        stop,
        stopped: false,
    };
    let reply = to_reply(v, resp, 0, &mut state);
    if state.stopped {
        return None;
    }
    Some(finish(reply, &state))
}

#[cfg(test)]
fn lua_to_reply_limited(v: &Value, resp: u8, max: usize, stop: &dyn Fn() -> bool) -> Reply {
    // One spare: the budget reaching zero means some value was left out.
    let mut state = Budget {
        left: max + 1,
        stop,
        stopped: false,
    };
    let reply = to_reply(v, resp, 0, &mut state);
    finish(reply, &state)
}

fn finish(reply: Reply, state: &Budget<'_>) -> Reply {
    if state.left == 0 {
        return Reply::Error(Cow::Borrowed(REPLY_TOO_LARGE));
    }
    reply
}

/// How many more values a reply may take, and whether to stop.
struct Budget<'a> {
    left: usize,
    stop: &'a dyn Fn() -> bool,
    stopped: bool,
}

impl Budget<'_> {
    /// Takes one value from the budget; false when there is none left.
    fn take(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        // Every 4096 values (not at the first: a short reply never reads the clock).
        if self.left % 4096 == 1 && (self.stop)() {
            self.stopped = true;
            self.left = 0;
            return false;
        }
        true
    }
}

fn to_reply(v: &Value, resp: u8, depth: usize, budget: &mut Budget<'_>) -> Reply {
    if !budget.take() {
        return Reply::Null;
    }
    match v {
        Value::Nil => Reply::Null,
        Value::Boolean(true) if resp >= 3 => Reply::Bool(true),
        Value::Boolean(false) if resp >= 3 => Reply::Bool(false),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Null,
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(c_cast_i64(*n)),
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Reply::Error(Cow::Borrowed("ERR reached lua stack limit"));
            }
            table_to_reply(t, resp, depth, budget)
        }
        _ => Reply::Null,
    }
}

fn field(t: &Table, name: &str) -> Value {
    t.raw_get::<Value>(name).unwrap_or(Value::Nil)
}

/// Error and status texts go on one line: CR and LF become spaces, as Redis does.
pub(crate) fn one_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).replace(['\r', '\n'], " ")
}

fn table_to_reply(t: &Table, resp: u8, depth: usize, budget: &mut Budget<'_>) -> Reply {
    if let Value::String(s) = field(t, "err") {
        return Reply::Error(Cow::Owned(one_line(&s.as_bytes())));
    }
    if let Value::String(s) = field(t, "ok") {
        return Reply::Status(Cow::Owned(one_line(&s.as_bytes())));
    }
    match field(t, "double") {
        Value::Number(d) => return Reply::Double(d),
        Value::Integer(i) => return Reply::Double(i as f64),
        _ => {}
    }
    if let Value::String(s) = field(t, "big_number") {
        return Reply::BigNumber(Bytes::copy_from_slice(&s.as_bytes()));
    }
    if let Value::Table(m) = field(t, "map") {
        let mut pairs = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            if budget.left == 0 {
                break;
            }
            let k = to_reply(&k, resp, depth + 1, budget);
            pairs.push((k, to_reply(&v, resp, depth + 1, budget)));
        }
        return Reply::Map(pairs);
    }
    if let Value::Table(s) = field(t, "set") {
        let mut items = Vec::new();
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            if budget.left == 0 {
                break;
            }
            items.push(to_reply(&k, resp, depth + 1, budget));
        }
        return Reply::Set(items);
    }
    if let Value::Table(v) = field(t, "verbatim_string")
        && let (Value::String(_), Value::String(s)) = (field(&v, "format"), field(&v, "string"))
    {
        return Reply::Verbatim(Bytes::copy_from_slice(&s.as_bytes()));
    }
    let mut items = Vec::new();
    let mut i = 1usize;
    while budget.left > 0 {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(to_reply(&v, resp, depth + 1, budget)),
        }
        i += 1;
    }
    Reply::Array(items)
}

/// The bytes a `redis.call` argument stands for: strings as they are, numbers in `%.17g`;
/// anything else is not allowed.
#[cfg(test)]
pub(crate) fn arg_bytes(v: &Value) -> Option<Bytes> {
    match v {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(i) if i.unsigned_abs() < 100_000_000_000_000_000 => {
            Some(Bytes::from(i.to_string()))
        }
        Value::Integer(i) => Some(Bytes::from(fmt_g(*i as f64, 17))),
        Value::Number(n) => Some(Bytes::from(fmt_g(*n, 17))),
        _ => None,
    }
}

/// A Lua number (or numeric string, as Lua coerces it) as a double.
pub(crate) fn to_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => parse_lua_number(&s.as_bytes()),
        _ => None,
    }
}

/// Lua 5.1's string → number coercion (`lua_str2number` plus hex, surrounding spaces).
pub(crate) fn parse_lua_number(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b)
        .ok()?
        .trim_matches(|c: char| c.is_ascii_whitespace());
    if s.is_empty() {
        return None;
    }
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let n = u64::from_str_radix(hex, 16).ok()? as f64;
        return Some(if neg { -n } else { n });
    }
    let lower = body.to_ascii_lowercase();
    if lower.starts_with("inf") || lower.starts_with("nan") {
        // strtod accepts these; Lua 5.1 does too.
        let n: f64 = lower.parse().ok().or(match lower.as_str() {
            "inf" | "infinity" => Some(f64::INFINITY),
            _ => None,
        })?;
        return Some(if neg { -n } else { n });
    }
    if !body
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    let n: f64 = body.parse().ok()?;
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        Lua::new()
    }

    #[test]
    fn resp2_replies_to_lua() {
        let lua = lua();
        assert_eq!(
            reply_to_lua(&lua, &Reply::Null, 2).unwrap(),
            Value::Boolean(false)
        );
        assert_eq!(
            reply_to_lua(&lua, &Reply::Int(7), 2).unwrap(),
            Value::Number(7.0)
        );
        let Value::Table(t) = reply_to_lua(&lua, &Reply::ok(), 2).unwrap() else {
            panic!("status is a table")
        };
        assert_eq!(t.get::<String>("ok").unwrap(), "OK");
        let Value::Table(t) = reply_to_lua(&lua, &Reply::Error("ERR x".into()), 2).unwrap() else {
            panic!("error is a table")
        };
        assert_eq!(t.get::<String>("err").unwrap(), "ERR x");
        let Value::String(s) = reply_to_lua(&lua, &Reply::Double(1.5), 2).unwrap() else {
            panic!("RESP2 double is a string")
        };
        assert_eq!(s.to_str().unwrap(), "1.5");
        let m = Reply::Map(vec![(Reply::bulk(b"a"), Reply::Int(1))]);
        let Value::Table(t) = reply_to_lua(&lua, &m, 2).unwrap() else {
            panic!("map")
        };
        assert_eq!(t.raw_len(), 2);
    }

    #[test]
    fn resp3_replies_to_lua() {
        let lua = lua();
        assert_eq!(reply_to_lua(&lua, &Reply::Null, 3).unwrap(), Value::Nil);
        assert_eq!(
            reply_to_lua(&lua, &Reply::Bool(true), 3).unwrap(),
            Value::Boolean(true)
        );
        let Value::Table(t) = reply_to_lua(&lua, &Reply::Double(1.5), 3).unwrap() else {
            panic!("double")
        };
        assert_eq!(t.get::<f64>("double").unwrap(), 1.5);
        let m = Reply::Map(vec![(Reply::bulk(b"a"), Reply::Int(1))]);
        let Value::Table(t) = reply_to_lua(&lua, &m, 3).unwrap() else {
            panic!("map")
        };
        let inner: Table = t.get("map").unwrap();
        assert_eq!(inner.get::<i64>("a").unwrap(), 1);
        let s = Reply::Set(vec![Reply::bulk(b"x")]);
        let Value::Table(t) = reply_to_lua(&lua, &s, 3).unwrap() else {
            panic!("set")
        };
        let inner: Table = t.get("set").unwrap();
        assert!(inner.get::<bool>("x").unwrap());
    }

    fn eval(lua: &Lua, code: &str) -> Value {
        lua.load(code).eval().unwrap()
    }

    #[test]
    fn lua_values_to_replies() {
        let lua = lua();
        assert_eq!(lua_to_reply(&eval(&lua, "return 3.99"), 2), Reply::Int(3));
        assert_eq!(lua_to_reply(&eval(&lua, "return -3.99"), 2), Reply::Int(-3));
        assert_eq!(lua_to_reply(&eval(&lua, "return true"), 2), Reply::Int(1));
        assert_eq!(lua_to_reply(&eval(&lua, "return false"), 2), Reply::Null);
        assert_eq!(
            lua_to_reply(&eval(&lua, "return false"), 3),
            Reply::Bool(false)
        );
        assert_eq!(lua_to_reply(&eval(&lua, "return nil"), 2), Reply::Null);
        assert_eq!(
            lua_to_reply(&eval(&lua, "return {1,2,nil,4}"), 2),
            Reply::Array(vec![Reply::Int(1), Reply::Int(2)])
        );
        assert_eq!(
            lua_to_reply(&eval(&lua, "return {err='E\\r\\nx', 1}"), 2),
            Reply::Error("E  x".into())
        );
        assert_eq!(
            lua_to_reply(&eval(&lua, "return {ok='fine'}"), 2),
            Reply::Status("fine".into())
        );
        assert_eq!(
            lua_to_reply(&eval(&lua, "return {err=3}"), 2),
            Reply::Array(vec![])
        );
        assert_eq!(
            lua_to_reply(&eval(&lua, "return {double=1.5}"), 2),
            Reply::Double(1.5)
        );
        assert_eq!(
            lua_to_reply(&eval(&lua, "return 1/0"), 2),
            Reply::Int(i64::MIN)
        );
        assert!(matches!(
            lua_to_reply(&eval(&lua, "local t = {} t[1] = t return t"), 2),
            Reply::Array(_)
        ));
        // Shared tables that would expand exponentially stop at the element budget.
        let shared = eval(&lua, "local t = {} t[1] = t t[2] = t t[3] = t return t");
        assert_eq!(
            lua_to_reply_limited(&shared, 2, 10_000, &|| false),
            Reply::Error(REPLY_TOO_LARGE.into())
        );
        let three = eval(&lua, "return {1, 2, 3}");
        assert_eq!(
            lua_to_reply_limited(&three, 2, 4, &|| false),
            Reply::Array(vec![Reply::Int(1), Reply::Int(2), Reply::Int(3)])
        );
        assert_eq!(
            lua_to_reply_limited(&three, 2, 3, &|| false),
            Reply::Error(REPLY_TOO_LARGE.into())
        );
        // A kill stops a long conversion.
        assert_eq!(lua_to_reply_stoppable(&shared, 2, &|| true), None);
    }

    #[test]
    fn nesting_limit() {
        let lua = lua();
        fn depth(r: &Reply) -> (usize, &Reply) {
            match r {
                Reply::Array(items) if items.len() == 1 => {
                    let (d, leaf) = depth(&items[0]);
                    (d + 1, leaf)
                }
                other => (0, other),
            }
        }
        let nested = |n: usize| {
            lua_to_reply(
                &eval(
                    &lua,
                    &format!("local t = 1 for i = 1, {n} do t = {{t}} end return t"),
                ),
                2,
            )
        };
        let r = nested(MAX_DEPTH);
        assert_eq!(depth(&r), (MAX_DEPTH, &Reply::Int(1)));
        let r = nested(MAX_DEPTH + 1);
        assert_eq!(
            depth(&r),
            (
                MAX_DEPTH,
                &Reply::Error("ERR reached lua stack limit".into())
            )
        );
    }

    #[test]
    fn call_arguments() {
        let lua = lua();
        let args = |code: &str| arg_bytes(&eval(&lua, code));
        assert_eq!(args("return 1.0").unwrap(), "1");
        assert_eq!(args("return 0.1").unwrap(), "0.10000000000000001");
        assert_eq!(args("return -0.0").unwrap(), "-0");
        assert_eq!(
            args("return 123456789012345678").unwrap(),
            "1.2345678901234568e+17"
        );
        assert_eq!(args("return 'x'").unwrap(), "x");
        assert!(args("return true").is_none());
        assert!(args("return {}").is_none());
        assert!(args("return nil").is_none());
    }

    #[test]
    fn lua_numeric_strings() {
        assert_eq!(parse_lua_number(b" 12 "), Some(12.0));
        assert_eq!(parse_lua_number(b"0x10"), Some(16.0));
        assert_eq!(parse_lua_number(b"1e2"), Some(100.0));
        assert_eq!(parse_lua_number(b"-2.5"), Some(-2.5));
        assert_eq!(parse_lua_number(b"x"), None);
        assert_eq!(parse_lua_number(b""), None);
    }
}
