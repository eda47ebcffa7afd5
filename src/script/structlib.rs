//! `struct`: packing numbers and strings into binary strings, like the `struct` module (by
//! Roberto Ierusalimschy) Redis ships: `struct.pack(fmt, …)`, `struct.unpack(fmt, s [, i])`
//! and `struct.size(fmt)`.
//!
//! Format: `<` little endian, `>` big endian, `=` native (little), `!n` alignment (`!` alone:
//! 8), `x` a zero byte, `b`/`B` char, `h`/`H` short, `l`/`L`/`T` 8 bytes, `i`/`I` with an
//! optional size (default 4, at most 32), `f` float, `d` double, `cn` n chars (`c0`: the
//! whole string when packing, the previous unpacked number as the size when unpacking), `s`
//! a zero-terminated string; spaces are ignored. Errors are returned as messages (raised by
//! the caller at the script's position, as `luaL_error` does).

use mlua::{Lua, MultiValue, Value};

use super::convert::to_number;

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

struct Header {
    little: bool,
    align: usize,
}

fn bad(n: usize, func: &str, msg: &str) -> String {
    format!("bad argument #{n} to '{func}' ({msg})")
}

/// One option of the format: (letter, size).
fn next_option(
    fmt: &[u8],
    i: &mut usize,
    h: &mut Header,
    func: &str,
) -> Result<Option<(u8, usize)>, String> {
    loop {
        let Some(&opt) = fmt.get(*i) else {
            return Ok(None);
        };
        *i += 1;
        let num = |i: &mut usize, default: usize| -> usize {
            if !fmt.get(*i).is_some_and(u8::is_ascii_digit) {
                return default;
            }
            let mut n = 0usize;
            while let Some(d) = fmt.get(*i).filter(|d| d.is_ascii_digit()) {
                n = n.saturating_mul(10).saturating_add((d - b'0') as usize);
                *i += 1;
            }
            n
        };
        let size = match opt {
            b' ' => continue,
            b'<' => {
                h.little = true;
                continue;
            }
            b'>' => {
                h.little = false;
                continue;
            }
            b'=' => {
                h.little = true;
                continue;
            }
            b'!' => {
                let a = num(i, MAXALIGN);
                if !a.is_power_of_two() {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
                continue;
            }
            b'x' | b'b' | b'B' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' => 8,
            b'f' => 4,
            b'd' => 8,
            b'i' | b'I' => {
                let n = num(i, 4);
                if n > MAXINTSIZE {
                    return Err(format!(
                        "integral size {n} is larger than limit of {MAXINTSIZE}"
                    ));
                }
                n
            }
            b'c' => num(i, 1),
            b's' => 0,
            other => {
                return Err(bad(
                    1,
                    func,
                    &format!("invalid format option '{}'", other as char),
                ));
            }
        };
        return Ok(Some((opt, size)));
    }
}

fn padding(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn fmt_arg(args: &MultiValue, func: &str) -> Result<Vec<u8>, String> {
    match args.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(i.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(crate::num::fmt_g(*n, 14).into_bytes()),
        other => Err(bad(
            1,
            func,
            &format!(
                "string expected, got {}",
                other.map_or("no value", lua_type)
            ),
        )),
    }
}

fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

fn number_arg(args: &MultiValue, n: usize) -> Result<f64, String> {
    let v = args.get(n - 1).unwrap_or(&Value::Nil);
    to_number(v).ok_or_else(|| bad(n, "pack", &format!("number expected, got {}", lua_type(v))))
}

fn string_arg(args: &MultiValue, n: usize) -> Result<Vec<u8>, String> {
    match args.get(n - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(i.to_string().into_bytes()),
        Some(Value::Number(x)) => Ok(crate::num::fmt_g(*x, 14).into_bytes()),
        other => Err(bad(
            n,
            "pack",
            &format!("string expected, got {}", other.map_or("nil", lua_type)),
        )),
    }
}

fn put_int(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let mut value: u64 = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
    let mut buf = vec![0u8; size];
    for i in 0..size {
        let at = if little { i } else { size - 1 - i };
        buf[at] = (value & 0xff) as u8;
        value = value.checked_shr(8).unwrap_or(0);
    }
    out.extend_from_slice(&buf);
}

/// `struct.pack(fmt, …)`.
pub(super) fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let fmt = fmt_arg(&args, "pack")?;
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out = Vec::new();
    let mut i = 0;
    let mut arg = 2;
    while let Some((opt, size)) = next_option(&fmt, &mut i, &mut h, "pack")? {
        let pad = padding(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number_arg(&args, arg)?;
                arg += 1;
                put_int(&mut out, n, h.little, size);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = number_arg(&args, arg)? as f32;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                });
            }
            b'd' => {
                let n = number_arg(&args, arg)?;
                arg += 1;
                out.extend_from_slice(&if h.little {
                    n.to_le_bytes()
                } else {
                    n.to_be_bytes()
                });
            }
            b'c' | b's' => {
                let s = string_arg(&args, arg)?;
                let size = if size == 0 { s.len() } else { size };
                if opt == b'c' {
                    if s.len() < size {
                        return Err(bad(arg + 1, "pack", "string too short"));
                    }
                    out.extend_from_slice(&s[..size]);
                } else {
                    out.extend_from_slice(&s);
                    out.push(0);
                }
                arg += 1;
            }
            _ => {}
        }
    }
    Ok(MultiValue::from_vec(vec![Value::String(
        lua.create_string(&out).map_err(|e| e.to_string())?,
    )]))
}

fn get_int(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = b.len();
    for i in 0..size {
        let byte = if little { b[size - 1 - i] } else { b[i] };
        l = (l << 8) | byte as u64;
    }
    if !signed {
        return l as f64;
    }
    if size < 8 {
        let mask = u64::MAX << (size * 8 - 1);
        if l & mask != 0 {
            l |= mask;
        }
    }
    l as i64 as f64
}

/// `struct.unpack(fmt, s [, i])`: the values, then the position after them.
pub(super) fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let fmt = fmt_arg(&args, "unpack")?;
    let data = match args.get(1) {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) => i.to_string().into_bytes(),
        Some(Value::Number(x)) => crate::num::fmt_g(*x, 14).into_bytes(),
        other => {
            return Err(bad(
                2,
                "unpack",
                &format!(
                    "string expected, got {}",
                    other.map_or("no value", lua_type)
                ),
            ));
        }
    };
    let mut pos = match args.get(2).and_then(to_number) {
        Some(n) if n >= 1.0 => n as usize - 1,
        Some(_) => return Err(bad(3, "unpack", "offset must be 1 or greater")),
        None => 0,
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out: Vec<Value> = Vec::new();
    let mut i = 0;
    let short = || bad(2, "unpack", "data string too short");
    while let Some((opt, mut size)) = next_option(&fmt, &mut i, &mut h, "unpack")? {
        pos += padding(pos, &h, opt, size);
        if pos + size > data.len() && opt != b'c' {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                out.push(Value::Number(get_int(
                    &data[pos..pos + size],
                    h.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let f = if h.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(f as f64));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let d = if h.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    match out.last().and_then(to_number) {
                        Some(n)
                            if matches!(out.last(), Some(Value::Number(_) | Value::Integer(_))) =>
                        {
                            size = n.max(0.0) as usize;
                            out.pop();
                        }
                        _ => return Err("format 'c0' needs a previous size".into()),
                    }
                }
                if pos + size > data.len() {
                    return Err(short());
                }
                out.push(Value::String(
                    lua.create_string(&data[pos..pos + size])
                        .map_err(|e| e.to_string())?,
                ));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err("unfinished string in data".into());
                };
                size = end + 1;
                out.push(Value::String(
                    lua.create_string(&data[pos..pos + end])
                        .map_err(|e| e.to_string())?,
                ));
            }
            _ => {}
        }
        pos += size;
    }
    out.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_vec(out))
}

/// `struct.size(fmt)`.
pub(super) fn size(_: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let fmt = fmt_arg(&args, "size")?;
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut pos = 0usize;
    let mut i = 0;
    while let Some((opt, size)) = next_option(&fmt, &mut i, &mut h, "size")? {
        if size == 0 && (opt == b's' || opt == b'c') {
            let name = if opt == b's' { "s" } else { "c0" };
            return Err(bad(
                1,
                "size",
                &format!("option '{name}' has no fixed size"),
            ));
        }
        pos += padding(pos, &h, opt, size) + size;
    }
    Ok(MultiValue::from_vec(vec![Value::Number(pos as f64)]))
}
