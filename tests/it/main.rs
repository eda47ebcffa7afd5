//! The integration-test binary: one binary for every integration test, so the crate is
//! linked once. Shared helpers live in `support`; each area of the server gets a module.

mod core;
mod diff;
mod limits;
mod proc;
mod support;
mod testmode;
mod throttle;
mod workloads;
