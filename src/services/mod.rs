//! The server's services: long-lived subsystems the engine and the command handlers talk
//! to, each owning one piece of `Shared`: the pub/sub registry (`pubsub`), the blocked
//! clients (`blocking`), keyspace notifications (`notify`), the operators' statistics
//! (`stats`), SLOWLOG (`slowlog`), the latency monitor (`latency`), client pause (`pause`) and knowing when the commands running as it began have ended
//! (`quiesce`),
//! the MONITOR feed (`monitor`), the per-request counters without shared atomics (`counter`), RDB persistence's scheduling (`persist`) and the memory cap
//! at dispatch (`maxmemory`), and ACL users with the permission check (`acl`).

pub(crate) mod acl;
pub(crate) mod aof;
pub(crate) mod blocking;
pub(crate) mod counter;
pub(crate) mod latency;
pub(crate) mod lazyfree;
pub(crate) mod maxmemory;
pub(crate) mod monitor;
pub(crate) mod notify;
pub(crate) mod pause;
pub(crate) mod persist;
pub(crate) mod pubsub;
pub(crate) mod quiesce;
pub(crate) mod slowlog;
pub(crate) mod stats;
