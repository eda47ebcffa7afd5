//! Numbers as Redis reads and writes them: the bottom floor of sluice, used by every layer
//! above and using nothing of the server (a crate of its own, so the compiler keeps it so;
//! the server reaches it as `sluice::num`).
//!
//! Redis's replies depend on C's number routines byte for byte, so they are emulated here in
//! one place: `string2ll` ([`parse_i64`]), glibc's `strtod` ([`strtod`], [`parse_double`]),
//! the `%.17g` Redis prints doubles with ([`format_double`]) and `%.Ng` in general
//! ([`fmt_g`]), the x87 `long double` of INCRBYFLOAT/HINCRBYFLOAT ([`long_double`]), and C's
//! `isspace` and hex digits. The protocol parser, the reply encoder, the sorted set, the
//! commands and the Lua bridge all call these.

#![deny(missing_docs)]

mod double;
mod int;
pub mod long_double;

pub use double::{Strtod, c_cast_i64, fmt_g, format_double, parse_double, parse_f64, strtod};
pub use int::{hex_digit, is_c_space, parse_i64};
