//! `cmsgpack`: MessagePack encoding for scripts, like the lua-cmsgpack 0.4.0 module Redis
//! ships: `pack(…)` encodes each argument and concatenates them; `unpack(s)` returns every
//! object in `s`; `unpack_one(s [, offset])` and `unpack_limit(s, limit [, offset])` return the
//! offset to continue from (-1 at the end) before the objects.
//!
//! Encoding: integral numbers as the smallest MessagePack integer, other numbers as float32
//! when exact, else float64; strings as str8/16/32 (fixstr when short); a table whose keys are
//! exactly 1..n is an array, any other a map (in iteration order); nesting deeper than 16,
//! functions and other values become nil.

use mlua::{Lua, MultiValue, Table, Value};

use super::convert::to_number;

const MAX_NESTING: usize = 16;

/// Deepest nesting decoded. Redis's lua-cmsgpack runs out of Lua stack at 4000 nested arrays;
/// sluice decodes recursively (sized to fit a 2 MiB stack in a debug build) and stops at 256,
/// with the same error.
pub(super) const MAX_DECODE_DEPTH: usize = 256;

/// Most values one `unpack` returns. Redis's limit is what fits on its Lua stack (7999 values);
/// mlua keeps a few of those slots for itself, so sluice stops at 7900, with Redis's error.
const MAX_RESULTS: usize = 7900;

/// `cmsgpack.pack(…)`.
pub(super) fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.is_empty() {
        return Err("bad argument #0 to 'pack' (MessagePack pack needs input.)".into());
    }
    let mut out = Vec::new();
    for v in args.iter() {
        encode(v, 0, &mut out).map_err(|e| e.to_string())?;
    }
    Ok(MultiValue::from_vec(vec![Value::String(
        lua.create_string(&out).map_err(|e| e.to_string())?,
    )]))
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(d: f64, out: &mut Vec<u8>) {
    if !d.is_infinite() && (d as i64) as f64 == d {
        encode_int(d as i64, out);
    } else if (d as f32) as f64 == d {
        out.push(0xca);
        out.extend_from_slice(&(d as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&d.to_be_bytes());
    }
}

fn encode_len(len: usize, fix: u8, fix_max: usize, codes: [u8; 3], out: &mut Vec<u8>) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if codes[0] != 0 && len <= 0xff {
        out.extend_from_slice(&[codes[0], len as u8]);
    } else if len <= 0xffff {
        out.push(codes[1]);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(codes[2]);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            encode_len(b.len(), 0xa0, 31, [0xd9, 0xda, 0xdb], out);
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_number(*i as f64, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level + 1, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    let mut count = 0usize;
    let mut max = 0f64;
    let mut array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        count += 1;
        match to_key_number(&k) {
            Some(n) if n > 0.0 && n.fract() == 0.0 => max = max.max(n),
            _ => array = false,
        }
    }
    if array && max == count as f64 {
        encode_len(count, 0x90, 15, [0, 0xdc, 0xdd], out);
        for i in 1..=count {
            encode(&t.raw_get::<Value>(i)?, level, out)?;
        }
    } else {
        encode_len(count, 0x80, 15, [0, 0xde, 0xdf], out);
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, level, out)?;
            encode(&v, level, out)?;
        }
    }
    Ok(())
}

fn to_key_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

enum DecodeError {
    Eof,
    BadFormat,
    TooDeep(&'static str),
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Eof)?;
        let b = self.s.get(self.pos..end).ok_or(DecodeError::Eof)?;
        self.pos = end;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn string(&mut self, n: usize) -> Result<Value, DecodeError> {
        let b = self.take(n)?.to_vec();
        Ok(Value::String(self.lua.create_string(&b)?))
    }

    fn enter(&mut self, what: &'static str) -> Result<(), DecodeError> {
        if self.depth >= MAX_DECODE_DEPTH {
            return Err(DecodeError::TooDeep(what));
        }
        self.depth += 1;
        Ok(())
    }

    fn array(&mut self, n: usize) -> Result<Value, DecodeError> {
        self.enter("mp_decode_to_lua_array")?;
        let t = self.lua.create_table()?;
        for i in 1..=n {
            let v = self.value()?;
            t.raw_set(i, v)?;
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }

    fn map(&mut self, n: usize) -> Result<Value, DecodeError> {
        self.enter("mp_decode_to_lua_hash")?;
        let t = self.lua.create_table()?;
        for _ in 0..n {
            let k = self.value()?;
            let v = self.value()?;
            if !k.is_nil() {
                t.raw_set(k, v)?;
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }

    /// One value. Containers recurse through here, so this frame (and `array`, `map`,
    /// `container`) stays small; the many scalar cases live in `scalar`, which a debug build
    /// would otherwise lay out in every level's frame.
    fn value(&mut self) -> Result<Value, DecodeError> {
        let c = self.take(1)?[0];
        match c {
            0x80..=0x8f => self.map((c & 0x0f) as usize),
            0x90..=0x9f => self.array((c & 0x0f) as usize),
            0xdc..=0xdf => self.container(c),
            _ => self.scalar(c),
        }
    }

    fn container(&mut self, c: u8) -> Result<Value, DecodeError> {
        let n = self.uint(if c & 1 == 0 { 2 } else { 4 })? as usize;
        if c < 0xde { self.array(n) } else { self.map(n) }
    }

    #[inline(never)]
    fn scalar(&mut self, c: u8) -> Result<Value, DecodeError> {
        Ok(match c {
            0x00..=0x7f => Value::Number(c as f64),
            0xa0..=0xbf => self.string((c & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(n)?
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(n)?
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(n)?
            }
            0xca => Value::Number(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.uint(8)?)),
            0xcc => Value::Number(self.uint(1)? as f64),
            0xcd => Value::Number(self.uint(2)? as f64),
            0xce => Value::Number(self.uint(4)? as f64),
            0xcf => Value::Number(self.uint(8)? as f64),
            0xd0 => Value::Number(self.uint(1)? as u8 as i8 as f64),
            0xd1 => Value::Number(self.uint(2)? as u16 as i16 as f64),
            0xd2 => Value::Number(self.uint(4)? as u32 as i32 as f64),
            0xd3 => Value::Number(self.uint(8)? as i64 as f64),
            0xe0..=0xff => Value::Number(c as i8 as f64),
            _ => return Err(DecodeError::BadFormat),
        })
    }
}

fn integer_arg(
    args: &MultiValue,
    n: usize,
    default: Option<i64>,
    func: &str,
) -> Result<i64, String> {
    match args.get(n - 1) {
        None | Some(Value::Nil) if default.is_some() => Ok(default.unwrap_or(0)),
        Some(v) => to_number(v).map(|x| x as i64).ok_or_else(|| {
            format!(
                "bad argument #{n} to '{func}' (number expected, got {})",
                super::cjson::lua_type_name(v)
            )
        }),
        None => Err(format!(
            "bad argument #{n} to '{func}' (number expected, got no value)"
        )),
    }
}

/// `unpack` (limit None), `unpack_one` (Some(1)) and `unpack_limit`.
pub(super) fn unpack(lua: &Lua, args: MultiValue, which: u8) -> Result<MultiValue, String> {
    let func = ["unpack", "unpack_one", "unpack_limit"][which as usize];
    let data = match args.front() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) => i.to_string().into_bytes(),
        Some(Value::Number(x)) => crate::num::fmt_g(*x, 14).into_bytes(),
        other => {
            return Err(format!(
                "bad argument #1 to '{func}' (string expected, got {})",
                other.map_or("no value", super::cjson::lua_type_name)
            ));
        }
    };
    let (limit, offset) = match which {
        0 => (0, 0),
        1 => (1, integer_arg(&args, 2, Some(0), func)?),
        _ => (
            integer_arg(&args, 2, None, func)?,
            integer_arg(&args, 3, Some(0), func)?,
        ),
    };
    let len = data.len() as i64;
    if offset < 0 || limit < 0 {
        return Err(format!(
            "Invalid request to unpack with offset of {offset} and limit of {len}."
        ));
    }
    if offset > len {
        return Err(format!(
            "Start offset {offset} greater than input length {len}."
        ));
    }
    let decode_all = which == 0;
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        lua,
        s: &data,
        pos: offset as usize,
        depth: 0,
    };
    let mut values = Vec::new();
    let mut count = 0;
    while c.pos < data.len() && count < limit {
        if values.len() >= MAX_RESULTS {
            return Err("stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)".into());
        }
        match c.value() {
            Ok(v) => values.push(v),
            Err(DecodeError::Eof) => return Err("Missing bytes in input.".into()),
            Err(DecodeError::BadFormat) => return Err("Bad data format in input.".into()),
            Err(DecodeError::TooDeep(f)) => {
                return Err(format!("stack overflow (in function {f})"));
            }
            Err(DecodeError::Lua(e)) => return Err(e.to_string()),
        }
        count += 1;
    }
    if !decode_all {
        let next = if c.pos >= data.len() {
            -1
        } else {
            c.pos as i64
        };
        values.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_vec(values))
}
