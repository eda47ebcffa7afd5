//! Rate-limiting algorithms, free of I/O: the command layer feeds them `now` and stored
//! state and writes back what they decide. A crate of its own, using nothing of the server
//! (the compiler keeps it so); the server reaches it as `sluice::limiter`.
#![deny(missing_docs)]

pub mod gcra;
