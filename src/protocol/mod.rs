//! The wire: the request parser (RESP multibulk and inline) and the reply encoder.
//!
//! Nothing here knows about commands or data; the connection feeds bytes in and gets
//! argument lists out, and commands hand back `Reply` values to encode.

pub mod batch;
pub mod reply;
pub mod request;

pub use reply::Reply;
pub use request::{Args, Limits, ProtocolError, Request, RequestParser};
