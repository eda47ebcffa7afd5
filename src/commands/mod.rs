//! The command families: one module per family, each a `COMMANDS` slice of table rows and
//! the handlers they name (parse the arguments into a typed struct, then apply it to the
//! store through the [`Ctx`](crate::engine::Ctx)). The engine joins the slices into its
//! table ([`all_families`]); the handlers reach the long-lived subsystems through
//! `crate::services`.

pub(crate) mod acl;
pub(crate) mod bitmap;
pub(crate) mod blocking;
pub(crate) mod cluster;
pub(crate) mod cluster_bus;
pub(crate) mod dump;
pub(crate) mod functions;
pub(crate) mod geo;
pub(crate) mod hash;
pub(crate) mod hashex;
pub(crate) mod hashttl;
pub(crate) mod hll;
pub(crate) mod keys;
pub(crate) mod latency;
pub(crate) mod list;
pub(crate) mod lolwut;
pub(crate) mod memory;
pub(crate) mod migrate;
pub(crate) mod persist;
pub(crate) mod pubsub;
pub(crate) mod replication;
pub(crate) mod scripting;
pub(crate) mod server;
pub(crate) mod set;
pub(crate) mod slowlog;
pub(crate) mod sort;
pub(crate) mod stream;
pub(crate) mod strex;
pub(crate) mod strings;
pub(crate) mod strrange;
pub(crate) mod testmode;
pub(crate) mod throttle;
pub(crate) mod zset;
pub(crate) mod zsetops;

use crate::engine::{CommandSpec, txn};

/// Every family's commands, in the order the table joins them.
pub(crate) fn all_families() -> [&'static [CommandSpec]; 34] {
    [
        strings::COMMANDS,
        keys::COMMANDS,
        server::COMMANDS,
        txn::COMMANDS,
        zset::COMMANDS,
        hash::COMMANDS,
        hashttl::COMMANDS,
        hashex::COMMANDS,
        strex::COMMANDS,
        list::COMMANDS,
        set::COMMANDS,
        throttle::COMMANDS,
        testmode::COMMANDS,
        scripting::COMMANDS,
        cluster::COMMANDS,
        zsetops::COMMANDS,
        sort::COMMANDS,
        dump::COMMANDS,
        migrate::COMMANDS,
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
        geo::COMMANDS,
        acl::COMMANDS,
        stream::COMMANDS,
        lolwut::COMMANDS,
    ]
}
