//! sluice: a Redis-protocol-compatible, in-memory rate-limiter server.
//!
//! Clients speak RESP2 or RESP3 to it exactly as to Redis 7. Each connection is dealt to one
//! of the event loops when it is accepted and served there from read to write. A request
//! flows through `server` (the connection: read a batch, one write per batch),
//! `protocol::request` (the resumable parser), `engine` (one lookup in the command table,
//! arity, MULTI queueing, then `engine::call`: policy, locking the keys' shards, the
//! family's handler from `commands`), `store` (the key's shard, lazy expiry with the
//! command's single `now`) and back out through `protocol::reply`. Dependencies run down
//! the layers ARCHITECTURE.md draws: `server`; `engine` with the families in `commands`
//! (which the engine reaches only through their table rows); `services`; `repl`, `script`,
//! `cluster`, `rdb`, `aof`; `config`; `store`; the floor (`protocol`, `client`, `clock`,
//! `error`, and [`num`] and [`limiter`], crates of their own so the compiler keeps them
//! from reaching up). `tests/it/layers.rs` checks the directions inside this crate.
//!
//! `ARCHITECTURE.md` at the repository root is the map: every folder with what it owns, the
//! path of one request (plain, inside EXEC, from a script), and the invariants the code
//! keeps (lock order, declared keys, WATCH, where `now` is read, expiry, busy scripts).
//! `CONTRIBUTING.md` has the checklists for adding a command or a setting, and the tests.
//!
//! In cluster mode (`cluster`) a node is a member of a Redis 7.0 cluster: it speaks the
//! cluster bus with the other nodes (sluice or redis-server) and answers Redis Cluster
//! clients with `-MOVED` / `-ASK` / `-CROSSSLOT` as Redis does.
//!
//! Embed it with [`Server`] (bind, then run), or in tests with [`TestServer`].
#![deny(missing_docs)]

pub mod alloc_stats;
pub(crate) mod aof;
pub mod client;
pub mod clock;
pub mod cluster;
pub(crate) mod commands;
pub mod config;
pub mod engine;
pub(crate) mod error;
pub mod logging;
pub mod protocol;
pub(crate) mod rdb;
pub(crate) mod repl;
pub mod script;
pub mod server;
pub(crate) mod services;
pub mod store;
pub mod supervisor;
pub mod testing;

/// Rate-limiting algorithms, free of I/O: the crate `sluice-limiter` (`crates/limiter`).
pub use sluice_limiter as limiter;
/// Numbers as Redis reads and writes them: the crate `sluice-num` (`crates/num`).
pub use sluice_num as num;

pub use clock::Clock;
pub use config::Config;
pub use server::{Server, ServerError};
pub use testing::{Pooled, TestServer};

#[global_allocator]
static GLOBAL: alloc_stats::CountingAlloc = alloc_stats::CountingAlloc;
