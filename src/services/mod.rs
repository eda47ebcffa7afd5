//! The server's services: long-lived subsystems the engine and the command handlers talk
//! to, each owning one piece of `Shared`: the pub/sub registry (`pubsub`), the blocked
//! clients (`blocking`), keyspace notifications (`notify`), the operators' statistics
//! (`stats`), SLOWLOG (`slowlog`), the latency monitor (`latency`), client pause (`pause`),
//! the MONITOR feed (`monitor`), RDB persistence's scheduling (`persist`) and the memory cap
//! at dispatch (`maxmemory`).

pub mod blocking;
pub mod latency;
pub mod maxmemory;
pub mod monitor;
pub mod notify;
pub mod pause;
pub mod persist;
pub mod pubsub;
pub mod slowlog;
pub mod stats;
