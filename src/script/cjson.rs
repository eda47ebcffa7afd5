//! `cjson`: JSON encoding and decoding for scripts, behaving like the lua-cjson 2.1 module
//! Redis ships (same output for the same table, same error texts).
//!
//! Encoding: numbers in `%.14g`; strings escaped with `\/` and `\u00XX` for control bytes,
//! other bytes passed through; a table whose keys are all positive integers is an array
//! (holes become `null`), unless it is "excessively sparse" (largest index over twice the
//! number of items and over 10), which is an error; an empty table is `{}`; any other table
//! is an object whose keys must be strings or numbers, in the table's iteration order.
//! `cjson.null` (a NULL light userdata) encodes as `null` and is what `null` decodes to.
//!
//! The functions here never raise: they return `(true, value)` or `(false, message)`, and a
//! small Lua wrapper raises the message at the caller's level, as `luaL_error` would.

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use crate::num::fmt_g;

/// Deepest nesting encoded or decoded, as `cjson.encode_max_depth()` and
/// `cjson.decode_max_depth()` report: lua-cjson's default, Redis's. sluice encodes and decodes
/// recursively; 1000 levels fit the scripts' worker stack (`script::WORKER_STACK`) in a
/// debug build, as `script::tests` checks on a stack of that size.
pub(super) const MAX_DEPTH: usize = 1000;

thread_local! {
    /// The nesting limits of the encode or decode running on this thread: the VM's
    /// `cjson.encode_max_depth` / `decode_max_depth` settings, at most `MAX_DEPTH` (deeper
    /// would not fit the stack; a setting above it is reported as set).
    static ENCODE_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_DEPTH) };
    static DECODE_LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_DEPTH) };
}

thread_local! {
    /// `cjson.encode_invalid_numbers` for the encode running on this thread: 0 refuse NaN
    /// and Inf (the default), 1 write `nan` / `inf` / `-inf` (as Redis's cjson), 2 `null`.
    static INVALID_NUMBERS: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

const INVALID_NUMBERS_KEY: &str = "sluice.cjson.encode_invalid_numbers";

/// `cjson.encode_invalid_numbers([setting])`: `true`/`"on"`, `false`/`"off"` or `"null"`
/// sets it; returns it (a boolean, or `"null"`), as lua-cjson.
pub(super) fn encode_invalid_numbers(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if let Some(v) = args.iter().next().filter(|v| !v.is_nil()) {
        let mode = match v {
            Value::Boolean(b) => Some(u8::from(*b)),
            Value::String(s) => match &s.as_bytes()[..] {
                b"off" => Some(0),
                b"on" => Some(1),
                b"null" => Some(2),
                _ => None,
            },
            _ => None,
        };
        let Some(mode) = mode else {
            let shown = match v {
                Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                other => lua_type_name(other).to_string(),
            };
            return fail(
                lua,
                format!("bad argument #1 to '?' (invalid option '{shown}')"),
            );
        };
        lua.set_named_registry_value(INVALID_NUMBERS_KEY, mode)?;
    }
    let mode: u8 = lua
        .named_registry_value::<Option<u8>>(INVALID_NUMBERS_KEY)?
        .unwrap_or(0);
    ok(match mode {
        0 => Value::Boolean(false),
        1 => Value::Boolean(true),
        _ => Value::String(lua.create_string("null")?),
    })
}

const ENCODE_DEPTH_KEY: &str = "sluice.cjson.encode_max_depth";
const DECODE_DEPTH_KEY: &str = "sluice.cjson.decode_max_depth";

fn depth_setting(lua: &Lua, key: &str) -> usize {
    lua.named_registry_value::<Option<usize>>(key)
        .ok()
        .flatten()
        .unwrap_or(MAX_DEPTH)
}

/// `cjson.encode_max_depth([depth])` / `cjson.decode_max_depth([depth])`: sets the VM's
/// limit when given one (1 to 2^31-1, as lua-cjson checks), and returns it.
pub(super) fn max_depth(lua: &Lua, args: MultiValue, decode: bool) -> mlua::Result<MultiValue> {
    let key = if decode {
        DECODE_DEPTH_KEY
    } else {
        ENCODE_DEPTH_KEY
    };
    if let Some(v) = args.iter().next().filter(|v| !v.is_nil()) {
        let n = match v {
            Value::Integer(i) => Some(*i as f64),
            Value::Number(n) => Some(*n),
            Value::String(s) => std::str::from_utf8(&s.as_bytes())
                .ok()
                .and_then(|t| t.trim().parse::<f64>().ok()),
            _ => None,
        };
        let name = if decode {
            "decode_max_depth"
        } else {
            "encode_max_depth"
        };
        match n {
            Some(n) if (1.0..=2_147_483_647.0).contains(&n) => {
                lua.set_named_registry_value(key, n as usize)?;
            }
            None => {
                let got = if matches!(v, Value::String(_)) {
                    "string"
                } else {
                    lua_type_name(v)
                };
                return fail(
                    lua,
                    format!("bad argument #1 to '{name}' (number expected, got {got})"),
                );
            }
            Some(_) => {
                return fail(
                    lua,
                    format!(
                        "bad argument #1 to '{name}' (expected integer between 1 and 2147483647)"
                    ),
                );
            }
        }
    }
    ok(Value::Integer(depth_setting(lua, key) as i64))
}

/// `cjson.null`.
pub(super) fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn fail(lua: &Lua, msg: String) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![
        Value::Boolean(false),
        Value::String(lua.create_string(msg)?),
    ]))
}

fn ok(v: Value) -> mlua::Result<MultiValue> {
    Ok(MultiValue::from_vec(vec![Value::Boolean(true), v]))
}

/// `cjson.encode(value)`.
pub(super) fn encode(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() != 1 {
        return fail(
            lua,
            "bad argument #1 to 'encode' (expected 1 argument)".into(),
        );
    }
    ENCODE_LIMIT.set(depth_setting(lua, ENCODE_DEPTH_KEY).min(MAX_DEPTH));
    INVALID_NUMBERS.set(
        lua.named_registry_value::<Option<u8>>(INVALID_NUMBERS_KEY)
            .ok()
            .flatten()
            .unwrap_or(0),
    );
    let mut out = Vec::new();
    match encode_value(&args[0], 0, &mut out) {
        Ok(()) => ok(Value::String(lua.create_string(&out)?)),
        Err(msg) => fail(lua, msg),
    }
}

/// Lua's name for a value's type.
pub(super) fn lua_type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        match INVALID_NUMBERS.get() {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
            // Redis's cjson prints them as C does.
            1 if n.is_nan() => out.extend_from_slice(b"nan"),
            1 if n < 0.0 => out.extend_from_slice(b"-inf"),
            1 => out.extend_from_slice(b"inf"),
            _ => out.extend_from_slice(b"null"),
        }
        return Ok(());
    }
    out.extend_from_slice(fmt_g(n, 14).as_bytes());
    Ok(())
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode_value(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => encode_number(*i as f64, out)?,
        Value::Number(n) => encode_number(*n, out)?,
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => encode_table(t, depth + 1, out)?,
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                lua_type_name(other)
            ));
        }
    }
    Ok(())
}

/// Some(max index) if every key is a positive integer; None for an object.
fn array_length(t: &Table) -> Result<Option<usize>, String> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if n < 1.0 || n.fract() != 0.0 {
            return Ok(None);
        }
        max = max.max(n as usize);
        items += 1;
    }
    if max > items * 2 && max > 10 {
        return Err("Cannot serialise table: excessively sparse array".into());
    }
    Ok(Some(max))
}

fn encode_table(t: &Table, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    if depth > ENCODE_LIMIT.get() {
        return Err(format!("Cannot serialise, excessive nesting ({depth})"));
    }
    match array_length(t)? {
        Some(len) if len > 0 => {
            out.push(b'[');
            for i in 1..=len {
                if i > 1 {
                    out.push(b',');
                }
                let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                encode_value(&v, depth, out)?;
            }
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            let mut first = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                if !first {
                    out.push(b',');
                }
                first = false;
                match &k {
                    Value::String(s) => encode_string(&s.as_bytes(), out),
                    Value::Integer(_) | Value::Number(_) => {
                        out.push(b'"');
                        let n = match k {
                            Value::Integer(i) => i as f64,
                            Value::Number(n) => n,
                            _ => 0.0,
                        };
                        encode_number(n, out)?;
                        out.push(b'"');
                    }
                    other => {
                        return Err(format!(
                            "Cannot serialise {}: table key must be a number or string",
                            lua_type_name(other)
                        ));
                    }
                }
                out.push(b':');
                encode_value(&v, depth, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// `cjson.decode(text)`.
pub(super) fn decode(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    if args.len() != 1 {
        return fail(
            lua,
            "bad argument #1 to 'decode' (expected 1 argument)".into(),
        );
    }
    DECODE_LIMIT.set(depth_setting(lua, DECODE_DEPTH_KEY).min(MAX_DEPTH));
    let text = match &args[0] {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Integer(i) => i.to_string().into_bytes(),
        Value::Number(n) => fmt_g(*n, 14).into_bytes(),
        other => {
            return fail(
                lua,
                format!(
                    "bad argument #1 to 'decode' (string expected, got {})",
                    lua_type_name(other)
                ),
            );
        }
    };
    let mut p = Parser {
        lua,
        s: &text,
        pos: 0,
    };
    match p.document() {
        Ok(v) => ok(v),
        Err(Fail::Msg(m)) => fail(lua, m),
        Err(Fail::Lua(e)) => Err(e),
    }
}

enum Fail {
    Msg(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

/// A token, as lua-cjson names them in its errors.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num => "T_NUMBER",
            Tok::Bool => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(e) => e,
        }
    }
}

struct Parser<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    /// Reads the next token: (token, its value if any, its 1-based start character).
    fn next(&mut self) -> Result<(Tok, Value, usize), Fail> {
        self.skip_ws();
        let start = self.pos + 1;
        let Some(&c) = self.s.get(self.pos) else {
            return Ok((Tok::End, Value::Nil, start));
        };
        let simple = |t| Ok((t, Value::Nil, start));
        match c {
            b'{' => {
                self.pos += 1;
                simple(Tok::ObjBegin)
            }
            b'}' => {
                self.pos += 1;
                simple(Tok::ObjEnd)
            }
            b'[' => {
                self.pos += 1;
                simple(Tok::ArrBegin)
            }
            b']' => {
                self.pos += 1;
                simple(Tok::ArrEnd)
            }
            b':' => {
                self.pos += 1;
                simple(Tok::Colon)
            }
            b',' => {
                self.pos += 1;
                simple(Tok::Comma)
            }
            b'"' => match self.string()? {
                Ok(v) => Ok((Tok::Str, v, start)),
                // lua-cjson reports a bad string where the scan stopped.
                Err((e, at)) => Ok((Tok::Error(e), Value::Nil, at + 1)),
            },
            b'-' | b'0'..=b'9' | b'I' | b'i' | b'N' | b'n' if self.number_start() => {
                match self.number() {
                    Some(n) => Ok((Tok::Num, Value::Number(n), start)),
                    None => Ok((Tok::Error("invalid number"), Value::Nil, start)),
                }
            }
            _ => {
                for (word, tok, v) in [
                    (&b"true"[..], Tok::Bool, Value::Boolean(true)),
                    (b"false", Tok::Bool, Value::Boolean(false)),
                    (b"null", Tok::Null, null()),
                ] {
                    if self.s[self.pos..].starts_with(word) {
                        self.pos += word.len();
                        return Ok((tok, v, start));
                    }
                }
                Ok((Tok::Error("invalid token"), Value::Nil, start))
            }
        }
    }

    fn number_start(&self) -> bool {
        let rest = &self.s[self.pos..];
        let rest = rest.strip_prefix(b"-").unwrap_or(rest);
        match rest.first() {
            Some(b'0'..=b'9') => true,
            _ => {
                let lower: Vec<u8> = rest.iter().take(3).map(u8::to_ascii_lowercase).collect();
                lower == b"inf" || lower == b"nan"
            }
        }
    }

    /// strtod-like, as lua-cjson accepts (hex, inf and nan included).
    fn number(&mut self) -> Option<f64> {
        let rest = &self.s[self.pos..];
        let mut end = 0;
        while end < rest.len()
            && (rest[end].is_ascii_alphanumeric() || matches!(rest[end], b'.' | b'+' | b'-'))
        {
            end += 1;
        }
        let text = std::str::from_utf8(&rest[..end]).ok()?;
        // Find the longest prefix that parses (strtod stops where the number ends).
        let mut best = None;
        for len in (1..=text.len()).rev() {
            if let Some(n) = super::convert::parse_lua_number(&text.as_bytes()[..len]) {
                best = Some((n, len));
                break;
            }
        }
        let (n, len) = best?;
        self.pos += len;
        Some(n)
    }

    /// A string token; Ok(Err((reason, offset))) for a malformed one.
    fn string(&mut self) -> Result<Result<Value, (&'static str, usize)>, Fail> {
        self.pos += 1; // opening quote
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Ok(Err(("unexpected end of string", self.pos)));
            };
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let escape_at = self.pos - 1;
                    let Some(&e) = self.s.get(self.pos) else {
                        return Ok(Err(("invalid escape code", escape_at)));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => match self.unicode_escape() {
                            Some(cp) => {
                                let mut buf = [0u8; 4];
                                out.extend_from_slice(cp.encode_utf8(&mut buf).as_bytes());
                            }
                            None => return Ok(Err(("invalid unicode escape code", escape_at))),
                        },
                        _ => return Ok(Err(("invalid escape code", escape_at))),
                    }
                }
                _ => out.push(c),
            }
        }
        Ok(Ok(Value::String(self.lua.create_string(&out)?)))
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    fn unicode_escape(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        if (0xd800..0xdc00).contains(&hi) {
            if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                return None;
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xdc00..0xe000).contains(&lo) {
                return None;
            }
            return char::from_u32(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00));
        }
        if (0xdc00..0xe000).contains(&hi) {
            return None;
        }
        char::from_u32(hi)
    }

    fn document(&mut self) -> Result<Value, Fail> {
        let tok = self.next()?;
        let v = self.value(tok, 0)?;
        let (t, _, at) = self.next()?;
        if t != Tok::End {
            return Err(expected("the end", t, at));
        }
        Ok(v)
    }

    fn value(&mut self, (tok, v, at): (Tok, Value, usize), depth: usize) -> Result<Value, Fail> {
        match tok {
            Tok::Str | Tok::Num | Tok::Bool | Tok::Null => Ok(v),
            Tok::ObjBegin => self.object(depth + 1, at),
            Tok::ArrBegin => self.array(depth + 1, at),
            other => Err(expected("value", other, at)),
        }
    }

    fn nesting(&self, depth: usize, at: usize) -> Result<(), Fail> {
        if depth > DECODE_LIMIT.get() {
            return Err(Fail::Msg(format!(
                "Found too many nested data structures ({depth}) at character {at}"
            )));
        }
        Ok(())
    }

    fn object(&mut self, depth: usize, at: usize) -> Result<Value, Fail> {
        self.nesting(depth, at)?;
        let t = self.lua.create_table()?;
        let mut tok = self.next()?;
        if tok.0 == Tok::ObjEnd {
            return Ok(Value::Table(t));
        }
        loop {
            if tok.0 != Tok::Str {
                return Err(expected("object key string", tok.0, tok.2));
            }
            let key = tok.1;
            let (c, _, cat) = self.next()?;
            if c != Tok::Colon {
                return Err(expected("colon", c, cat));
            }
            let vt = self.next()?;
            let v = self.value(vt, depth)?;
            t.raw_set(key, v)?;
            let (sep, _, sat) = self.next()?;
            match sep {
                Tok::ObjEnd => return Ok(Value::Table(t)),
                Tok::Comma => tok = self.next()?,
                other => return Err(expected("comma or object end", other, sat)),
            }
        }
    }

    fn array(&mut self, depth: usize, at: usize) -> Result<Value, Fail> {
        self.nesting(depth, at)?;
        let t = self.lua.create_table()?;
        let mut tok = self.next()?;
        if tok.0 == Tok::ArrEnd {
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value(tok, depth)?;
            t.raw_set(i, v)?;
            i += 1;
            let (sep, _, sat) = self.next()?;
            match sep {
                Tok::ArrEnd => return Ok(Value::Table(t)),
                Tok::Comma => tok = self.next()?,
                other => return Err(expected("comma or array end", other, sat)),
            }
        }
    }
}

fn expected(what: &str, found: Tok, at: usize) -> Fail {
    Fail::Msg(format!(
        "Expected {what} but found {} at character {at}",
        found.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        lua: &Lua,
        f: fn(&Lua, MultiValue) -> mlua::Result<MultiValue>,
        code: &str,
    ) -> Result<Vec<u8>, String> {
        let v: Value = lua.load(code).eval().unwrap();
        let out = f(lua, MultiValue::from_vec(vec![v])).unwrap();
        match (&out[0], &out[1]) {
            (Value::Boolean(true), Value::String(s)) => Ok(s.as_bytes().to_vec()),
            (Value::Boolean(false), Value::String(s)) => Err(s.to_str().unwrap().to_string()),
            (Value::Boolean(true), _) => Ok(b"<value>".to_vec()),
            _ => panic!("unexpected"),
        }
    }

    #[test]
    fn encodes_like_lua_cjson() {
        let lua = Lua::new();
        let e = |code: &str| run(&lua, encode, code);
        assert_eq!(e("return {1,2,3}").unwrap(), b"[1,2,3]");
        assert_eq!(e("return {}").unwrap(), b"{}");
        assert_eq!(e("return {a=1}").unwrap(), b"{\"a\":1}");
        assert_eq!(e("return 0.1").unwrap(), b"0.1");
        assert_eq!(e("return 123456789012345").unwrap(), b"1.2345678901234e+14");
        assert_eq!(
            e("return '\\1\\127/\\128'").unwrap(),
            b"\"\\u0001\\u007f\\/\x80\""
        );
        assert_eq!(e("return {[1]=1,[3]=3}").unwrap(), b"[1,null,3]");
        assert_eq!(e("return {{}}").unwrap(), b"[{}]");
        assert_eq!(
            e("return {[1]=1,[30]=3}").unwrap_err(),
            "Cannot serialise table: excessively sparse array"
        );
        assert_eq!(
            e("return 1/0").unwrap_err(),
            "Cannot serialise number: must not be NaN or Inf"
        );
        assert_eq!(
            e("return function() end").unwrap_err(),
            "Cannot serialise function: type not supported"
        );
    }

    #[test]
    fn decodes_like_lua_cjson() {
        let lua = Lua::new();
        let d = |code: &str| run(&lua, decode, code);
        assert_eq!(
            d("return 'bad'").unwrap_err(),
            "Expected value but found invalid token at character 1"
        );
        assert_eq!(
            d("return '[1,2'").unwrap_err(),
            "Expected comma or array end but found T_END at character 5"
        );
        assert_eq!(
            d("return '{\"a\":}'").unwrap_err(),
            "Expected value but found T_OBJ_END at character 6"
        );
        assert_eq!(d("return '\"\\\\u00e9\"'").unwrap(), "é".as_bytes());
        assert!(d("return '[1, {\"a\": null}, true]'").is_ok());
    }
}
