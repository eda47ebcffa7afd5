//! sluice: a Redis-protocol-compatible, in-memory rate-limiter server.
//!
//! Clients speak RESP2 or RESP3 to it exactly as to Redis 7. Each connection is dealt to one
//! of `--threads` event loops (`server::loops`) when it is accepted and served there from read
//! to write. A request flows through `server::connection` (read a batch, one write per batch), `protocol::request` (our
//! resumable parser), `cmd` (table lookup, arity, MULTI queueing, typed parse, apply),
//! `store` (the key's shard locked, lazy expiry with the command's single `now`) and back
//! out through `protocol::reply`. Dependencies run one way: `server` → `cmd` → (`client`,
//! `store`, `limiter`, `protocol`, `script`, `cluster`) → (`config`, `clock`, `error`, `num`).
//!
//! `ARCHITECTURE.md` at the repository root is the map: every module with what it owns and
//! what it may use, the flow of one request (plain, inside EXEC, from a script), and the
//! invariants the code keeps (lock order, declared keys, WATCH, where `now` is read, expiry,
//! busy scripts). `CONTRIBUTING.md` has the checklists for adding a command and the tests.
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
pub mod error;
pub mod limiter;
pub mod logging;
pub mod num;
pub mod protocol;
pub(crate) mod rdb;
pub(crate) mod repl;
pub mod script;
pub mod server;
pub(crate) mod services;
pub mod store;
pub mod supervisor;
pub mod testing;

pub use clock::Clock;
pub use config::Config;
pub use server::{Server, ServerError};
pub use testing::{Pooled, TestServer};

#[global_allocator]
static GLOBAL: alloc_stats::CountingAlloc = alloc_stats::CountingAlloc;
