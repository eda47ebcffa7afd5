//! `bit`: the LuaBitOp module Redis ships (32-bit operations on Lua numbers).
//!
//! Numbers are normalised to signed 32-bit integers the way LuaBitOp does (the double plus
//! 2^52 + 2^51, low 32 bits of the result), so `bit.tobit(2^32 + 5)` is 5 and results are
//! always in the signed 32-bit range. Like `cjson`, these functions return `(true, value)` or
//! `(false, message)` and a Lua wrapper raises the message at the caller's level.

use mlua::{Lua, MultiValue, Value};

use super::convert::to_number;

fn tobit(d: f64) -> i32 {
    (d + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn arg(name: &str, args: &MultiValue, i: usize) -> Result<i32, String> {
    match args.get(i) {
        Some(v) => match to_number(v) {
            Some(d) => Ok(tobit(d)),
            None => Err(format!(
                "bad argument #{} to '{name}' (number expected, got {})",
                i + 1,
                lua_type(v)
            )),
        },
        None => Err(format!(
            "bad argument #{} to '{name}' (number expected, got no value)",
            i + 1
        )),
    }
}

fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

fn compute(name: &str, args: &MultiValue) -> Result<Value, String> {
    let n = |v: i32| Value::Number(v as f64);
    Ok(match name {
        "tobit" => n(arg(name, args, 0)?),
        "bnot" => n(!arg(name, args, 0)?),
        "band" | "bor" | "bxor" => {
            let mut acc = arg(name, args, 0)?;
            for i in 1..args.len() {
                let b = arg(name, args, i)?;
                acc = match name {
                    "band" => acc & b,
                    "bor" => acc | b,
                    _ => acc ^ b,
                };
            }
            n(acc)
        }
        "lshift" | "rshift" | "arshift" | "rol" | "ror" => {
            let x = arg(name, args, 0)?;
            let s = (arg(name, args, 1)? & 31) as u32;
            let ux = x as u32;
            n(match name {
                "lshift" => (ux << s) as i32,
                "rshift" => (ux >> s) as i32,
                "arshift" => x >> s,
                "rol" => ux.rotate_left(s) as i32,
                _ => ux.rotate_right(s) as i32,
            })
        }
        "bswap" => n((arg(name, args, 0)? as u32).swap_bytes() as i32),
        _ => return Err(format!("unknown bit function {name}")),
    })
}

/// One `bit.<name>` call.
pub(super) fn call(lua: &Lua, name: &str, args: MultiValue) -> mlua::Result<MultiValue> {
    if name == "tohex" {
        return match tohex(&args) {
            Ok(s) => Ok(MultiValue::from_vec(vec![
                Value::Boolean(true),
                Value::String(lua.create_string(s)?),
            ])),
            Err(m) => Ok(MultiValue::from_vec(vec![
                Value::Boolean(false),
                Value::String(lua.create_string(m)?),
            ])),
        };
    }
    match compute(name, &args) {
        Ok(v) => Ok(MultiValue::from_vec(vec![Value::Boolean(true), v])),
        Err(m) => Ok(MultiValue::from_vec(vec![
            Value::Boolean(false),
            Value::String(lua.create_string(m)?),
        ])),
    }
}

fn tohex(args: &MultiValue) -> Result<String, String> {
    let x = arg("tohex", args, 0)? as u32;
    let mut digits = if args.len() > 1 && !matches!(args.get(1), Some(Value::Nil)) {
        arg("tohex", args, 1)?
    } else {
        8
    };
    let upper = digits < 0;
    if upper {
        digits = -digits;
    }
    let digits = digits.clamp(0, 8) as usize;
    let masked = if digits >= 8 {
        x
    } else {
        x & ((1u32 << (4 * digits)) - 1)
    };
    Ok(if upper {
        format!("{masked:0digits$X}")
    } else {
        format!("{masked:0digits$x}")
    })
}

/// The names of the module's functions.
pub(super) const FUNCTIONS: &[&str] = &[
    "tobit", "tohex", "bnot", "band", "bor", "bxor", "lshift", "rshift", "arshift", "rol", "ror",
    "bswap",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn num(name: &str, args: &[f64]) -> f64 {
        let mv = MultiValue::from_vec(args.iter().map(|&a| Value::Number(a)).collect());
        match compute(name, &mv).unwrap() {
            Value::Number(n) => n,
            _ => panic!("number"),
        }
    }

    #[test]
    fn luabitop_semantics() {
        assert_eq!(num("tobit", &[2f64.powi(32) + 5.0]), 5.0);
        assert_eq!(num("tobit", &[4294967295.0]), -1.0);
        assert_eq!(num("band", &[255.0, 15.0, 3.0]), 3.0);
        assert_eq!(num("bnot", &[0.0]), -1.0);
        assert_eq!(num("lshift", &[1.0, 33.0]), 2.0);
        assert_eq!(num("arshift", &[-256.0, 4.0]), -16.0);
        assert_eq!(num("rshift", &[-256.0, 28.0]), 15.0);
        assert_eq!(num("rol", &[0x12345678 as f64, 8.0]), 0x34567812 as f64);
        assert_eq!(num("bswap", &[0x12345678 as f64]), 0x78563412 as f64);
        assert_eq!(num("bxor", &[5.0, 3.0]), 6.0);
        assert_eq!(num("bor", &[1.0, 2.0, 4.0]), 7.0);
        let hex = |a: &[f64]| {
            tohex(&MultiValue::from_vec(
                a.iter().map(|&x| Value::Number(x)).collect(),
            ))
            .unwrap()
        };
        assert_eq!(hex(&[255.0]), "000000ff");
        assert_eq!(hex(&[-1.0, -4.0]), "FFFF");
        assert_eq!(hex(&[1.0, 20.0]), "00000001");
    }
}
