//! Test-double commands, registered only with `--test-mode`: CLOCK moves time, FAULT injects
//! the errors, delays and disconnects real Redis produces, CMDLOG records what clients sent.
//!
//! Real Redis offers no way to move time, so limiter tests sleep through their windows. Here a
//! test freezes the clock, advances it past a window, and sees exactly what a real wait would
//! have produced: expiry, TTLs, CL.THROTTLE and TIME all read this clock. Advancing reaps the
//! keys that became due before replying, so DBSIZE and INFO are exact right after.
//!
//! Faults and the log are checked in `engine::call` only when the server runs in test mode,
//! so production servers pay nothing for them.
//!
//! TESTMODE RESET returns the whole server to the state it started in, in one command, so
//! that a test suite can share one server between its tests instead of starting one per
//! test: [`RESET_HELP`] lists what it resets, and `tests/it/testmode_reset.rs` compares a
//! reset server with a new one.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;

use crate::client::ClientState;
use crate::config::Config;
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, VariantCommand, run, run_sub, run_sub_as,
};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// The test-mode commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new(
        "clock",
        -2,
        &["admin", "fast"],
        C::keys(0, 0, 0),
        run::<crate::commands::server::Help>,
    )
    .with_subcommands(CLOCK),
    C::new(
        "fault",
        -2,
        &["admin", "fast"],
        C::keys(0, 0, 0),
        run::<crate::commands::server::Help>,
    )
    .with_subcommands(FAULT),
    C::new(
        "cmdlog",
        -2,
        &["admin"],
        C::keys(0, 0, 0),
        run::<crate::commands::server::Help>,
    )
    .with_subcommands(CMDLOG),
    C::new(
        "testmode",
        -2,
        &["admin"],
        C::keys(0, 0, 0),
        run::<crate::commands::server::Help>,
    )
    .with_subcommands(TESTMODE),
];

static TESTMODE: &[C] = &[
    C::new(
        "testmode|reset",
        2,
        // skip_slowlog: the reset empties SLOWLOG, and must not be its first entry.
        &["admin", "noscript", "skip_slowlog"],
        KeySpec::None,
        run_sub::<TestModeReset>,
    )
    .whole_keyspace(),
    C::new(
        "testmode|help",
        2,
        &["admin", "fast"],
        KeySpec::None,
        run_sub::<TestModeHelp>,
    ),
];

static FAULT: &[C] = &[
    C::new(
        "fault|error",
        -3,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<AddFault>(c, a, FaultType::Error),
    ),
    C::new(
        "fault|latency",
        -3,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<AddFault>(c, a, FaultType::Latency),
    ),
    C::new(
        "fault|disconnect",
        -2,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<AddFault>(c, a, FaultType::Disconnect),
    ),
    C::new(
        "fault|panic",
        -2,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<AddFault>(c, a, FaultType::Panic),
    ),
    C::new(
        "fault|clear",
        2,
        &["admin", "fast"],
        KeySpec::None,
        run_sub::<FaultClear>,
    ),
    C::new(
        "fault|list",
        2,
        &["admin", "fast"],
        KeySpec::None,
        run_sub::<FaultList>,
    ),
];

static CMDLOG: &[C] = &[
    C::new(
        "cmdlog|get",
        -2,
        &["admin"],
        KeySpec::None,
        run_sub::<CmdLogGet>,
    ),
    C::new(
        "cmdlog|len",
        2,
        &["admin"],
        KeySpec::None,
        run_sub::<CmdLogLen>,
    ),
    C::new(
        "cmdlog|reset",
        2,
        &["admin"],
        KeySpec::None,
        run_sub::<CmdLogReset>,
    ),
];

/// How many commands the log keeps (oldest dropped first).
pub(crate) const CMDLOG_CAPACITY: usize = 100_000;

/// What a fault does to a matching command.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FaultKind {
    /// Reply this error line instead of running the command.
    Error(String),
    /// Run the command, but hold its reply this long.
    Latency(Duration),
    /// Run the command, reply, then close the connection.
    Disconnect,
    /// Panic in the connection's task instead of running the command: proves that a task
    /// that dies still releases what the connection held.
    Panic,
}

/// One injected fault.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// Only commands with this (lowercase) name, or all.
    pub command: Option<String>,
    /// Only clients with this CLIENT SETNAME name, or all.
    pub client: Option<Bytes>,
    /// Matching commands still to hit; None = until cleared.
    pub remaining: Option<u64>,
}

/// One logged command.
#[derive(Debug, Clone)]
pub(crate) struct LogEntry {
    /// Sequence number.
    pub id: u64,
    /// Server time, Unix ms.
    pub time_ms: u64,
    /// CLIENT ID.
    pub client_id: u64,
    /// CLIENT SETNAME, if any.
    pub client_name: Option<Bytes>,
    /// CLIENT SETINFO lib-name, if any.
    pub lib_name: Option<Bytes>,
    /// Selected database.
    pub db: usize,
    /// The arguments, name first.
    pub args: Vec<Bytes>,
}

/// Faults and the command log of a test-mode server, and the configuration it started
/// with (for TESTMODE RESET).
#[derive(Debug, Default)]
pub struct TestHooks {
    any_faults: AtomicBool,
    faults: Mutex<Vec<Fault>>,
    log: Mutex<VecDeque<LogEntry>>,
    next_id: AtomicU64,
    started_with: Config,
}

impl TestHooks {
    /// The hooks of a server that starts with `config`.
    pub fn new(config: &Config) -> TestHooks {
        TestHooks {
            started_with: config.clone(),
            ..TestHooks::default()
        }
    }

    /// No fault, an empty log numbered from 0.
    fn clear(&self) {
        if let Ok(mut f) = self.faults.lock() {
            f.clear();
        }
        self.any_faults.store(false, Ordering::Relaxed);
        if let Ok(mut l) = self.log.lock() {
            *l = VecDeque::new();
        }
        self.next_id.store(0, Ordering::Relaxed);
    }

    /// Records a command in the log.
    pub fn record(&self, now_ms: u64, client: &ClientState, args: &[&[u8]]) {
        let (lib_name, _) = client
            .info
            .lib
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        let entry = LogEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            time_ms: now_ms,
            client_id: client.id(),
            client_name: client.info.name(),
            lib_name,
            db: client.db,
            args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
        };
        if let Ok(mut log) = self.log.lock() {
            if log.len() >= CMDLOG_CAPACITY {
                log.pop_front();
            }
            log.push_back(entry);
        }
    }

    /// Applies the first fault matching this command, if any: an error reply to send instead
    /// of running it, or a hold / disconnect noted in the command's `Ctx` for its connection.
    pub fn check(&self, command: &str, ctx: &mut Ctx<'_>) -> Option<Reply> {
        // FAULT and TESTMODE themselves are never faulted: a fault on every command must not
        // lock the test out of removing it.
        if !self.any_faults.load(Ordering::Relaxed) || matches!(command, "fault" | "testmode") {
            return None;
        }
        let name = ctx.client.info.name();
        let mut faults = self.faults.lock().ok()?;
        let idx = faults.iter().position(|f| {
            f.command.as_deref().is_none_or(|c| c == command)
                && f.client.as_ref().is_none_or(|c| Some(c) == name.as_ref())
        })?;
        let fault = &mut faults[idx];
        let kind = fault.kind.clone();
        if let Some(n) = fault.remaining.as_mut() {
            *n -= 1;
            if *n == 0 {
                faults.remove(idx);
                self.any_faults.store(!faults.is_empty(), Ordering::Relaxed);
            }
        }
        match kind {
            FaultKind::Error(text) => Some(Reply::Error(text.into())),
            FaultKind::Latency(d) => {
                ctx.hold = d;
                None
            }
            FaultKind::Disconnect => {
                ctx.disconnect = true;
                None
            }
            FaultKind::Panic => {
                drop(faults);
                panic!("FAULT PANIC injected for client {}", ctx.client.id())
            }
        }
    }
}

/// `FAULT ERROR <error line> | LATENCY <ms> | DISCONNECT | PANIC`, then
/// `[COUNT n] [COMMAND name] [CLIENT name]`
///
/// COUNT defaults to 1 (0 = until FAULT CLEAR). The error line is sent as given, so it
/// carries its own prefix: `FAULT ERROR "BUSY Redis is busy running a script."`.
#[derive(Debug)]
pub(crate) struct AddFault {
    fault: Fault,
}

/// Which FAULT subcommand: the kind of fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultType {
    /// FAULT ERROR text: reply this error line instead of running the command.
    Error,
    /// FAULT LATENCY ms: sleep before running the command.
    Latency,
    /// FAULT DISCONNECT: close the connection instead of replying.
    Disconnect,
    /// FAULT PANIC: panic in the handler (tests the connection's panic guard).
    Panic,
}

impl VariantCommand<'_> for AddFault {
    type Variant = FaultType;

    fn parse(a: &mut ArgCursor<'_>, fault_type: FaultType) -> CmdResult<Self> {
        let kind = match fault_type {
            FaultType::Error => {
                let text = String::from_utf8_lossy(a.next()?).replace(['\r', '\n'], " ");
                if text.is_empty() {
                    return Err(CmdError::msg("ERR the error text must not be empty"));
                }
                FaultKind::Error(text)
            }
            FaultType::Latency => {
                let ms = a.next_i64()?;
                if !(0..=60_000).contains(&ms) {
                    return Err(CmdError::msg("ERR latency must be between 0 and 60000 ms"));
                }
                FaultKind::Latency(Duration::from_millis(ms as u64))
            }
            FaultType::Disconnect => FaultKind::Disconnect,
            FaultType::Panic => FaultKind::Panic,
        };
        let mut fault = Fault {
            kind,
            command: None,
            client: None,
            remaining: Some(1),
        };
        while a.remaining() > 0 {
            if a.eat("COUNT") {
                let n = a.next_i64()?;
                if n < 0 {
                    return Err(CmdError::NotInteger);
                }
                fault.remaining = (n > 0).then_some(n as u64);
            } else if a.eat("COMMAND") {
                fault.command = Some(String::from_utf8_lossy(a.next()?).to_ascii_lowercase());
            } else if a.eat("CLIENT") {
                fault.client = Some(a.next_owned()?);
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(AddFault { fault })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let hooks = hooks(ctx)?;
        let mut faults = hooks
            .faults
            .lock()
            .map_err(|_| CmdError::msg("ERR fault table unavailable"))?;
        faults.push(self.fault);
        hooks.any_faults.store(true, Ordering::Relaxed);
        Ok(Reply::ok())
    }
}

fn hooks<'a>(ctx: &Ctx<'a>) -> CmdResult<&'a TestHooks> {
    ctx.shared
        .test
        .as_ref()
        .ok_or(CmdError::msg("ERR test mode is off"))
}

/// FAULT CLEAR
#[derive(Debug)]
pub(crate) struct FaultClear;

impl Command<'_> for FaultClear {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FaultClear)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let hooks = hooks(ctx)?;
        if let Ok(mut f) = hooks.faults.lock() {
            f.clear();
        }
        hooks.any_faults.store(false, Ordering::Relaxed);
        Ok(Reply::ok())
    }
}

/// FAULT LIST: one line per active fault.
#[derive(Debug)]
pub(crate) struct FaultList;

impl Command<'_> for FaultList {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(FaultList)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let faults = hooks(ctx)?
            .faults
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        Ok(Reply::Array(
            faults
                .iter()
                .map(|f| {
                    let kind = match &f.kind {
                        FaultKind::Error(e) => format!("error {e:?}"),
                        FaultKind::Latency(d) => format!("latency {}", d.as_millis()),
                        FaultKind::Disconnect => "disconnect".into(),
                        FaultKind::Panic => "panic".into(),
                    };
                    Reply::Bulk(Bytes::from(format!(
                        "{kind} count={} command={} client={}",
                        f.remaining.map_or("unlimited".into(), |n| n.to_string()),
                        f.command.as_deref().unwrap_or("*"),
                        f.client
                            .as_ref()
                            .map_or("*".into(), |c| String::from_utf8_lossy(c).into_owned()),
                    )))
                })
                .collect(),
        ))
    }
}

/// `CMDLOG GET [count] [CLIENT name]`: the most recent commands, oldest first, each as
/// [id, time-ms, client-id, client-name, lib-name, db, [args…]].
#[derive(Debug)]
pub(crate) struct CmdLogGet {
    count: Option<usize>,
    client: Option<Bytes>,
}

impl Command<'_> for CmdLogGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut g = CmdLogGet {
            count: None,
            client: None,
        };
        while a.remaining() > 0 {
            if a.eat("CLIENT") {
                g.client = Some(a.next_owned()?);
            } else {
                let n = a.next_i64()?;
                if n < 0 {
                    return Err(CmdError::NotInteger);
                }
                g.count = Some(n as usize);
            }
        }
        Ok(g)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let hooks = hooks(ctx)?;
        let log = hooks
            .log
            .lock()
            .map_err(|_| CmdError::msg("ERR log unavailable"))?;
        let matching: Vec<&LogEntry> = log
            .iter()
            .filter(|e| {
                self.client
                    .as_ref()
                    .is_none_or(|c| e.client_name.as_ref() == Some(c))
            })
            .collect();
        let skip = self.count.map_or(0, |n| matching.len().saturating_sub(n));
        let opt = |b: &Option<Bytes>| b.clone().map_or(Reply::Null, Reply::Bulk);
        Ok(Reply::Array(
            matching[skip..]
                .iter()
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Int(e.id as i64),
                        Reply::Int(e.time_ms as i64),
                        Reply::Int(e.client_id as i64),
                        opt(&e.client_name),
                        opt(&e.lib_name),
                        Reply::Int(e.db as i64),
                        Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
                    ])
                })
                .collect(),
        ))
    }
}

/// CMDLOG LEN
#[derive(Debug)]
pub(crate) struct CmdLogLen;

impl Command<'_> for CmdLogLen {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CmdLogLen)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(
            hooks(ctx)?.log.lock().map_or(0, |l| l.len()) as i64
        ))
    }
}

/// CMDLOG RESET
#[derive(Debug)]
pub(crate) struct CmdLogReset;

impl Command<'_> for CmdLogReset {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CmdLogReset)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Ok(mut l) = hooks(ctx)?.log.lock() {
            // Give the memory back too: a reset log should cost nothing.
            *l = VecDeque::new();
        }
        Ok(Reply::ok())
    }
}

static CLOCK: &[C] = &[
    C::new(
        "clock|freeze",
        2,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<ClockCmd>(c, a, ClockVerb::Freeze),
    ),
    C::new(
        "clock|advance",
        3,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<ClockCmd>(c, a, ClockVerb::Advance),
    )
    .with_roles(crate::engine::Roles::LOCKS_ITSELF)
    .whole_keyspace(),
    C::new("clock|set", 3, &["admin", "fast"], KeySpec::None, |c, a| {
        run_sub_as::<ClockCmd>(c, a, ClockVerb::Set)
    })
    .with_roles(crate::engine::Roles::LOCKS_ITSELF)
    .whole_keyspace(),
    C::new(
        "clock|resume",
        2,
        &["admin", "fast"],
        KeySpec::None,
        |c, a| run_sub_as::<ClockCmd>(c, a, ClockVerb::Resume),
    ),
    C::new("clock|now", 2, &["admin", "fast"], KeySpec::None, |c, a| {
        run_sub_as::<ClockCmd>(c, a, ClockVerb::Now)
    }),
    C::new(
        "clock|help",
        2,
        &["admin", "fast"],
        KeySpec::None,
        run_sub::<ClockHelp>,
    ),
];

/// CLOCK FREEZE | ADVANCE ms | SET unix-ms | RESUME | NOW
///
/// FREEZE, ADVANCE and SET reply with the clock's new time in Unix ms; ADVANCE and SET freeze
/// a running clock first. RESUME lets real time run on from the frozen value. NOW replies the
/// current time in Unix ms.
#[derive(Debug)]
pub(crate) struct ClockCmd {
    verb: ClockVerb,
    ms: i64,
}

/// Which CLOCK subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClockVerb {
    /// CLOCK FREEZE.
    Freeze,
    /// CLOCK ADVANCE ms.
    Advance,
    /// CLOCK SET unix-ms.
    Set,
    /// CLOCK RESUME.
    Resume,
    /// CLOCK NOW.
    Now,
}

impl VariantCommand<'_> for ClockCmd {
    type Variant = ClockVerb;

    fn parse(a: &mut ArgCursor<'_>, verb: ClockVerb) -> CmdResult<Self> {
        let moves = matches!(verb, ClockVerb::Advance | ClockVerb::Set);
        let ms = if moves { a.next_i64()? } else { 0 };
        if ms < 0 {
            return Err(CmdError::msg("ERR the clock cannot move backwards"));
        }
        Ok(ClockCmd { verb, ms })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let clock = &ctx.shared.clock;
        let result = match self.verb {
            ClockVerb::Freeze => {
                clock.freeze();
                Ok(clock.now_ns())
            }
            ClockVerb::Advance => {
                clock.freeze();
                clock.advance(Duration::from_millis(self.ms as u64))
            }
            ClockVerb::Set => {
                clock.freeze();
                clock.set((self.ms as u64).saturating_mul(1_000_000))
            }
            ClockVerb::Resume => {
                clock.resume();
                return Ok(Reply::ok());
            }
            ClockVerb::Now => Ok(clock.now_ns()),
        };
        let now_ns = result.map_err(|e| CmdError::owned(e.to_string()))?;
        if matches!(self.verb, ClockVerb::Advance | ClockVerb::Set) {
            ctx.store.reap_due(now_ns / 1_000_000);
        }
        Ok(Reply::Int((now_ns / 1_000_000) as i64))
    }
}

/// CLOCK HELP
#[derive(Debug)]
pub(crate) struct ClockHelp;

impl Command<'_> for ClockHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClockHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            [
                "CLOCK FREEZE -- stop time at its current value; replies the time in Unix ms.",
                "CLOCK ADVANCE <ms> -- move frozen time forward (freezes first); expired keys are reaped before the reply.",
                "CLOCK SET <unix-ms> -- set frozen time (never backwards).",
                "CLOCK RESUME -- let real time run again from the current value.",
                "CLOCK NOW -- the current time in Unix ms.",
            ]
            .into_iter()
            .map(|s| Reply::Status(s.into()))
            .collect(),
        ))
    }
}

/// What TESTMODE RESET resets, as TESTMODE HELP shows it (README's test-double section says
/// the same).
pub(crate) const RESET_HELP: &[&str] = &[
    "TESTMODE RESET -- return the server to the state it started in, in one step:",
    "  * every database emptied (watchers of its keys see the change, as after FLUSHALL);",
    "  * the clock running on real time again (after CLOCK FREEZE/ADVANCE/SET);",
    "  * no fault (FAULT), an empty command log (CMDLOG) numbered from 0;",
    "  * no cached script (SCRIPT EXISTS answers 0), no function library;",
    "  * the configuration it started with (every CONFIG SET undone);",
    "  * no other connection subscribed (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE), in MONITOR or",
    "    blocked (BLPOP...): those connections are closed, as a new server has none;",
    "  * no CLIENT PAUSE; statistics as CONFIG RESETSTAT leaves them, with",
    "    total_connections_received counting the connections still open; keyspace hits,",
    "    misses and expiries, persistence counters (rdb_changes_since_last_save 0, LASTSAVE",
    "    now), SLOWLOG (numbered from 0 again) and LATENCY emptied.",
    "Left as they are: the process (run_id, uptime, port), the open connections of clients",
    "not named above with their own state (database, name, protocol, MULTI), the client id",
    "counter, replication and cluster roles (nothing is sent to replicas), and a file loaded",
    "at start, which is not loaded again.",
    "TESTMODE HELP -- this text.",
];

/// TESTMODE RESET: see [`RESET_HELP`].
#[derive(Debug)]
pub(crate) struct TestModeReset;

impl Command<'_> for TestModeReset {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(TestModeReset)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let hooks = hooks(ctx)?;
        let shared = ctx.shared;
        let me = ctx.client.id();
        // Other connections holding what a new server would not have: closed, and taken out
        // of the registries now, so the reply's successor already sees them gone.
        let mut closed = shared.pubsub.drop_all_but(me);
        for info in shared.clients.snapshot() {
            if info.id != me && info.blocked.load(Ordering::Relaxed) && !closed.contains(&info.id) {
                closed.push(info.id);
            }
        }
        // Counted before any of them goes: a killed connection unregisters on its own loop,
        // maybe before this handler ends.
        let monitoring = shared.monitors.count();
        let open = shared
            .clients
            .len()
            .saturating_sub(closed.len() + monitoring);
        for id in &closed {
            if let Some(info) = shared.clients.get(*id) {
                info.kill.cancel();
            }
            crate::services::blocking::unblock(shared, *id, false);
        }
        shared.monitors.close_all();
        shared.pause.unpause();
        crate::services::pause::hold_expiry(shared);

        // The clock first: the keyspace and the counters below start from real time.
        shared.clock.reset();
        let now_ms = shared.clock.now_ms();
        ctx.now_ms = now_ms;
        ctx.now_ns = now_ms.saturating_mul(1_000_000);
        for shard in ctx.store.shards_mut() {
            shard.reset(now_ms);
        }
        hooks.clear();
        if !shared.scripts.is_empty() {
            shared.scripts.flush();
        }
        if shared.scripts.function_counts().0 > 0 {
            shared.scripts.function_flush();
        }

        let started = &hooks.started_with;
        if let Ok(mut cfg) = shared.config.write() {
            shared.live.store(started);
            shared
                .repl
                .refresh_good_replicas(started.repl.min_replicas_max_lag);
            *cfg = started.clone();
        }
        shared.configure_notifications();
        shared.acl.reset(&shared.table, started);
        crate::services::aof::configured(shared);
        shared.repl.feed().resize(started.repl.backlog_size);
        if let Ok(mut params) = shared.params.lock() {
            params.clear();
        }

        shared.table.reset_stats();
        shared.errors.reset();
        shared.stats.reset();
        shared
            .stats
            .total_connections
            .store(open as u64, Ordering::Relaxed);
        shared.slowlog.clear();
        shared.latency.clear();
        shared.persist.reset(now_ms / 1000);
        Ok(Reply::ok())
    }
}

/// TESTMODE HELP
#[derive(Debug)]
pub(crate) struct TestModeHelp;

impl Command<'_> for TestModeHelp {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(TestModeHelp)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            RESET_HELP
                .iter()
                .map(|s| Reply::Status((*s).into()))
                .collect(),
        ))
    }
}
