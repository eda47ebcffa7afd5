//! Command errors, each knowing the exact error line Redis sends for it.
//!
//! Clients classify errors by their prefix (`ERR`, `WRONGTYPE`, `EXECABORT`, …) and some by
//! their whole text, so the texts here are byte-for-byte Redis 7's. A command returns a
//! `CmdError`; the dispatcher turns it into a `-…\r\n` reply. Nothing here closes a connection:
//! protocol errors, which do, live in `protocol::request`.

use std::borrow::Cow;

/// An error a command replies with. `Display` is the reply line without the leading `-`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdError {
    /// Wrong argument count for a command (name as the client should see it, lowercase).
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    /// A malformed option list.
    #[error("ERR syntax error")]
    Syntax,
    /// An argument that must be a 64-bit integer is not.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// An argument that must be a double is not.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// The key holds another type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// INCR-family arithmetic left the i64 range.
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    /// A TTL argument that is non-positive or overflows (command name in the text).
    #[error("ERR invalid expire time in '{0}' command")]
    InvalidExpire(&'static str),
    /// RENAME and friends on a missing key.
    #[error("ERR no such key")]
    NoSuchKey,
    /// SELECT / SWAPDB / MOVE with a bad index.
    #[error("ERR DB index is out of range")]
    DbIndexOutOfRange,
    /// A command name the table does not have: Redis's whole line (name and the start of the
    /// arguments quoted). Its own variant so callers (scripts) tell it apart without reading
    /// the text.
    #[error("{0}")]
    UnknownCommand(String),
    /// Any other error: the whole line, prefix included.
    #[error("{0}")]
    Other(Cow<'static, str>),
}

impl CmdError {
    /// An error with a fixed text (prefix included).
    pub const fn msg(text: &'static str) -> Self {
        CmdError::Other(Cow::Borrowed(text))
    }

    /// An error with a computed text (prefix included).
    pub fn owned(text: String) -> Self {
        CmdError::Other(Cow::Owned(text))
    }
}

/// The result of parsing or applying a command.
pub(crate) type CmdResult<T> = Result<T, CmdError>;
