//! Rate-limiting algorithms, free of I/O: the command layer feeds them `now` and stored
//! state and writes back what they decide.

pub mod gcra;
