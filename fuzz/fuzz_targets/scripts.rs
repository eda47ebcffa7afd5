//! Scripts as untrusted code: random Lua from a small grammar (steered by the input bytes),
//! plus the known sandbox-escape and wedge shapes, run on the script engine. No panic, no
//! abort, every script ends by itself or when killed (a watchdog kills it after 50 ms; still
//! running 10 s later aborts as a finding), and a canary script run afterwards on the same VM
//! must see exactly what it sees in a fresh engine. The grammar and the check live in
//! `sluice::script::fuzzing`, which `tests/it/hostile_lua.rs` also runs, bounded, in
//! `cargo test`.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice::protocol::Reply;
use sluice::script::{Scripts, fuzzing};

fn expected() -> &'static Reply {
    static EXPECTED: OnceLock<Reply> = OnceLock::new();
    EXPECTED.get_or_init(fuzzing::canary_expected)
}

fn scripts() -> &'static Scripts {
    static SCRIPTS: OnceLock<Scripts> = OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts::new("7.0.15"))
}

fuzz_target!(|data: &[u8]| {
    let body = fuzzing::script_from_bytes(data);
    // On a thread with the server workers' stack size, as scripts run in the server.
    let run = std::thread::Builder::new()
        .stack_size(sluice::script::WORKER_STACK)
        .spawn(move || fuzzing::check_script(scripts(), body.as_bytes(), expected()))
        .expect("spawn a script thread");
    if let Err(panic) = run.join() {
        std::panic::resume_unwind(panic);
    }
});
