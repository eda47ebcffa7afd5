//! Number formatting and conversion as Redis's Lua does them.
//!
//! Lua 5.1 has only doubles. Where Redis turns one into text it uses C's `%.17g` (arguments of
//! `redis.call`) or `%.14g` (`tostring`, cjson); where it turns one into an integer reply it
//! uses a C cast, which on x86-64 yields `i64::MIN` for NaN and out-of-range values.

pub use crate::num::{c_cast_i64 as lua_number_to_i64, fmt_g};
