//! The command families: one module per family, each a `COMMANDS` slice of table rows and
//! the handlers they name (parse the arguments into a typed struct, then apply it to the
//! store through the [`Ctx`](crate::engine::Ctx)). The engine joins the slices into its
//! table ([`all_families`]); the handlers reach the long-lived subsystems through
//! `crate::services`.

pub mod bitmap;
pub mod cluster;
pub mod dump;
pub mod functions;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod strings;
pub mod strrange;
pub mod testmode;
pub mod throttle;
pub mod zset;
pub mod zsetops;

use crate::engine::{CommandSpec, txn};
use crate::services::{blocking, latency, persist, pubsub, slowlog};

/// Every family's commands, in the order the table joins them.
pub fn all_families() -> [&'static [CommandSpec]; 26] {
    [
        strings::COMMANDS,
        keys::COMMANDS,
        server::COMMANDS,
        txn::COMMANDS,
        zset::COMMANDS,
        hash::COMMANDS,
        list::COMMANDS,
        set::COMMANDS,
        throttle::COMMANDS,
        testmode::COMMANDS,
        scripting::COMMANDS,
        cluster::COMMANDS,
        zsetops::COMMANDS,
        sort::COMMANDS,
        dump::COMMANDS,
        strrange::COMMANDS,
        bitmap::COMMANDS,
        set::ALGEBRA_COMMANDS,
        hll::COMMANDS,
        pubsub::COMMANDS,
        blocking::COMMANDS,
        functions::COMMANDS,
        persist::COMMANDS,
        slowlog::COMMANDS,
        latency::COMMANDS,
        replication::COMMANDS,
    ]
}
