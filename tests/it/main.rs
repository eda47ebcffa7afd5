//! The integration-test binary: one binary for every integration test, so the crate is
//! linked once. Shared helpers live in `support`; each area of the server gets a module.

// Test helpers are `pub` for their sibling modules; the crate is a test binary.
#![allow(unreachable_pub)]

mod acl;
mod alloc;
mod aof;
mod blocking;
mod clientcmds;
mod cluster;
mod cluster_bus;
mod cmdinfo;
mod core;
mod diff;
mod dockerfile;
mod docs;
mod dump;
mod eventloop;
mod functions;
mod geo;
mod hashttl;
mod hll;
mod hostile;
mod hostile_blocking;
mod hostile_config;
mod hostile_lua;
mod hostile_probe;
mod hostile_repl;
mod iobackend;
mod layers;
mod limits;
mod memory;
mod min_replicas;
mod notifications;
mod observe;
mod operators;
mod proc;
mod props;
mod pubsub;
mod random_diff;
mod rdb;
mod repl;
mod scripting;
mod sentinel_reconfig;
mod shutdown;
mod soak;
mod stream;
mod support;
mod testmode;
mod testmode_reset;
mod throttle;
mod tls;
mod tracking;
mod unix_socket;
mod workloads;
mod zset_store;
