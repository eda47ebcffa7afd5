//! Commands: the table (name, arity, flags, key positions, handler), dispatch, MULTI
//! queueing, and one module per command family.
//!
//! A request goes through `execute`: the name is looked up (case-insensitively), arity is
//! checked against the table, and, inside MULTI, the command is queued (queue-time checks are
//! only these two, as in Redis). Otherwise the shards of the command's keys (from the
//! table's key positions) are locked in ascending order, the clock is read once, and the
//! handler parses its arguments into a typed struct and applies it. Every family module
//! follows that `parse → apply` split through the `Command` trait, so argument errors are
//! produced in one place per command.
//!
//! In cluster mode, `cluster::route` runs between the NOAUTH and OOM checks: a command whose
//! keys this node does not own gets `-MOVED`, keys in several slots `-CROSSSLOT` (Redis's
//! order and texts). With cluster mode off it is one test of a `None`.

pub mod args;
pub mod bitmap;
pub mod blocking;
pub mod cluster;
pub mod docs;
pub mod dump;
pub mod functions;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
/// Moved to [`crate::num::long_double`]; re-exported here for this wave's callers.
pub use crate::num::long_double;
pub mod maxmemory;
pub mod monitor;
pub mod notify;
pub mod pause;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod strings;
pub mod strrange;
pub mod table;
pub mod testmode;
pub mod throttle;
pub mod txn;
pub mod zset;
pub mod zsetops;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;

use crate::client::{ClientState, Registry};
use crate::clock::Clock;
use crate::config::Config;
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::store::{Keyspace, Locked};

pub use args::ArgCursor;
pub use table::{
    CmdFlags, CommandSpec, CommandTable, FindKeys, InfoDoc, KeySpec, KeySpecDoc, LockMode,
};

/// Server-wide state every command can reach.
#[derive(Debug)]
pub struct Shared {
    /// The data.
    pub keyspace: Arc<Keyspace>,
    /// The clock every command reads once.
    pub clock: Clock,
    /// The configuration in force (CONFIG SET changes it).
    pub config: std::sync::RwLock<Config>,
    /// Connected clients.
    pub clients: Registry,
    /// The command table.
    pub table: CommandTable,
    /// Server counters for INFO.
    pub stats: ServerStats,
    /// Cancelled to stop the server (SHUTDOWN, signals).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The port actually bound.
    pub port: std::sync::atomic::AtomicU16,
    /// When the server started.
    pub started: Instant,
    /// A random 40-hex-digit id (INFO run_id).
    pub run_id: String,
    /// Values CONFIG SET gave to parameters sluice reports but does not act on.
    pub params: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// The MONITOR feed.
    pub monitors: monitor::Monitors,
    /// Pub/sub subscriptions.
    pub pubsub: pubsub::PubSub,
    /// Faults and command log; present only in test mode.
    pub test: Option<testmode::TestHooks>,
    /// The settings the hot path reads (maxmemory, output limits...), kept in step with
    /// `config` by whoever changes it.
    pub live: crate::config::LiveSettings,
    /// The Lua script cache and the running script's state.
    pub scripts: crate::script::Scripts,
    /// Cluster mode's slot map; None when cluster mode is off (`Server::bind` sets it).
    pub cluster: Option<crate::cluster::Cluster>,
    /// Clients blocked on keys (BLPOP…).
    pub blocked: blocking::Registry,
    /// CLIENT PAUSE's state.
    pub pause: pause::Pause,
}

/// Counters INFO reports.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Commands run.
    pub total_commands: AtomicU64,
    /// Connections accepted.
    pub total_connections: AtomicU64,
    /// Connections refused (maxclients).
    pub rejected_connections: AtomicU64,
    /// Bytes read from clients.
    pub net_input_bytes: AtomicU64,
    /// Bytes written to clients.
    pub net_output_bytes: AtomicU64,
    /// Error replies sent.
    pub total_error_replies: AtomicU64,
    /// Keys evicted to stay under maxmemory.
    pub evicted_keys: AtomicU64,
}

impl Shared {
    /// Builds the shared state for `config`.
    pub fn new(config: Config, clock: Clock) -> Self {
        let keyspace = Arc::new(Keyspace::new(
            config.effective_shards(),
            config.databases,
            clock.now_ms(),
        ));
        let test_mode = config.test_mode;
        let live = crate::config::LiveSettings::new(&config);
        let scripts = crate::script::Scripts::new(&config.redis_version);
        let run_id: String = (0..40)
            .map(|_| format!("{:x}", rand::random::<u8>() & 0xf))
            .collect();
        let shared = Shared {
            keyspace,
            clock,
            config: std::sync::RwLock::new(config),
            clients: Registry::default(),
            table: CommandTable::build(),
            stats: ServerStats::default(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            port: std::sync::atomic::AtomicU16::new(0),
            started: Instant::now(),
            run_id,
            params: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            monitors: monitor::Monitors::default(),
            pubsub: pubsub::PubSub::default(),
            test: test_mode.then(testmode::TestHooks::default),
            live,
            scripts,
            cluster: None,
            blocked: blocking::Registry::default(),
            pause: pause::Pause::default(),
        };
        shared.configure_notifications();
        shared
    }

    /// Applies `notify-keyspace-events` (at start and after CONFIG SET): which key events
    /// the store logs for notifications.
    pub fn configure_notifications(&self) {
        notify::configure(self, self.live.notify_keyspace_events());
    }

    /// A copy of the configuration.
    pub fn config(&self) -> Config {
        self.config.read().map(|c| c.clone()).unwrap_or_default()
    }
}

/// What a handler works with: the server, the calling client, the locked shards and `now`.
pub struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Shared,
    /// The calling client.
    pub client: &'a mut ClientState,
    /// The shards this command holds.
    pub store: Locked<'a>,
    /// The command's time, read once (Unix ms).
    pub now_ms: u64,
    /// The same instant in ns (CL.THROTTLE).
    pub now_ns: u64,
    /// True while running the commands of an EXEC.
    pub in_exec: bool,
    /// A blocking command may block (a client outside MULTI, EXEC and scripts).
    pub may_block: bool,
    /// Set by a blocking command that blocked: the connection waits on it.
    pub blocked: Option<Arc<blocking::Waiter>>,
    /// Keys written that blocked clients wait on, served once the locks are released.
    pub ready: Vec<(usize, Bytes)>,
    /// Keyspace notifications emitted, published once the locks are released.
    pub events: notify::Events,
}

impl Ctx<'_> {
    /// The client's selected database.
    pub fn db(&self) -> usize {
        self.client.db
    }
}

/// A command parsed into a typed struct, then applied.
pub trait Command: Sized {
    /// Parses the arguments after the command name. Arity is already checked.
    fn parse(args: &mut ArgCursor<'_>) -> CmdResult<Self>;
    /// Runs the command.
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply>;
}

/// A table handler: gets the full argument list (name first).
pub type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Reply;

/// The handler for any `Command`: parse the arguments after the name (and, for
/// subcommands, after the subcommand name), check that the parse consumed them all, then
/// apply. That check is the one place extra arguments become `ERR syntax error`: a `parse`
/// reads what it accepts and leaves the rest, and never checks for leftovers itself.
pub fn run<C: Command>(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    parse_and_apply(ctx, args, 1, C::parse, C::apply)
}

/// `run` for subcommands: arguments start after the subcommand name.
pub fn run_sub<C: Command>(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    parse_and_apply(ctx, args, 2, C::parse, C::apply)
}

/// A command whose variants share one struct (EXPIRE/PEXPIRE/EXPIREAT…, LPUSH/RPUSH…): the
/// table entry names the variant with an enum value, and `parse` receives it. The entry is
/// a closure, `|ctx, args| run_as::<Expire>(ctx, args, ExpireKind::Pexpire)`, so the
/// variant's name is what the table shows.
pub trait VariantCommand: Sized {
    /// The enum naming the variants.
    type Variant: Copy;
    /// Parses the arguments after the command name, for `variant`. Arity is already checked.
    fn parse(args: &mut ArgCursor<'_>, variant: Self::Variant) -> CmdResult<Self>;
    /// Runs the command.
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply>;
}

/// Whether a command's variant may write: the `_RO` twins (EVAL_RO, EVALSHA_RO, SORT_RO…)
/// are the same command refusing writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The plain command.
    ReadWrite,
    /// The `_RO` variant.
    ReadOnly,
}

/// Where a command's result goes: replied (SINTER, ZUNION…) or stored at a destination key,
/// its size replied (the `STORE` forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Replied.
    Reply,
    /// Stored at the destination key (the first argument).
    Store,
}

/// `run` for a [`VariantCommand`].
pub fn run_as<C: VariantCommand>(ctx: &mut Ctx<'_>, args: &[Bytes], variant: C::Variant) -> Reply {
    parse_and_apply(ctx, args, 1, |a| C::parse(a, variant), C::apply)
}

/// `run_sub` for a [`VariantCommand`].
pub fn run_sub_as<C: VariantCommand>(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    variant: C::Variant,
) -> Reply {
    parse_and_apply(ctx, args, 2, |a| C::parse(a, variant), C::apply)
}

/// The one path from arguments to reply: parse what follows the first `skip` arguments,
/// refuse leftovers (`ERR syntax error`), apply.
fn parse_and_apply<C>(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    skip: usize,
    parse: impl FnOnce(&mut ArgCursor<'_>) -> CmdResult<C>,
    apply: impl FnOnce(C, &mut Ctx<'_>) -> CmdResult<Reply>,
) -> Reply {
    let mut cursor = ArgCursor::new(args.get(skip..).unwrap_or(&[]));
    let parsed = parse(&mut cursor).and_then(|c| cursor.finish().map(|()| c));
    match parsed.and_then(|c| apply(c, ctx)) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// Redis's reply to an unknown command, byte for byte (trailing space included).
pub fn unknown_command(args: &[Bytes]) -> CmdError {
    let name = args.first().map(|n| printable(n, 128)).unwrap_or_default();
    let mut rest = String::new();
    for a in args.iter().skip(1) {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        rest.push('\'');
        rest.push_str(&printable(a, room));
        rest.push_str("' ");
    }
    CmdError::UnknownCommand(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// Text of a client argument inside an error line: C-string semantics (stops at NUL),
/// truncated, with CR/LF turned into spaces so the reply stays one line.
pub fn printable(b: &[u8], max: usize) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(max);
    String::from_utf8_lossy(&b[..end]).replace(['\r', '\n'], " ")
}

/// Resolved command: the spec to run.
pub enum Lookup<'t> {
    /// Found; arity checked.
    Found(&'t CommandSpec),
    /// An error to reply (unknown command or subcommand, wrong arity).
    Error(CmdError),
}

/// Looks up and arity-checks a request.
pub fn lookup(table: &CommandTable, args: &[Bytes]) -> Lookup<'static> {
    let Some(spec) = args.first().and_then(|name| table.get(name)) else {
        return Lookup::Error(unknown_command(args));
    };
    let spec = if spec.subcommands.is_empty() || args.len() < 2 {
        spec
    } else {
        match spec
            .subcommands
            .iter()
            .find(|s| args[1].eq_ignore_ascii_case(s.short_name().as_bytes()))
        {
            Some(sub) => sub,
            None => {
                return Lookup::Error(CmdError::owned(format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    printable(&args[1], 128),
                    spec.name.to_ascii_uppercase()
                )));
            }
        }
    };
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Lookup::Error(CmdError::WrongArity(spec.full_name()));
    }
    Lookup::Found(spec)
}

/// Who is about to run a command; Redis refuses some commands by their flags for some
/// callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A client, outside MULTI.
    Client,
    /// A client inside MULTI (the command would be queued).
    Multi,
    /// EXEC running a queued command.
    Exec,
    /// A script's `redis.call` / `redis.pcall`.
    Script,
}

/// The one place where command flags refuse a command for its caller, with Redis 7.0's
/// texts: `no_multi` commands (SHUTDOWN…) inside MULTI, `noscript` ones (MULTI, WATCH,
/// MONITOR, AUTH, CLIENT…) from scripts. EXEC checks again what it runs, so nothing
/// refused at queue time can run through another path.
pub fn refused_for(spec: &CommandSpec, caller: Caller) -> Option<&'static str> {
    match caller {
        Caller::Multi | Caller::Exec if spec.has(CmdFlags::NO_MULTI) => {
            Some("ERR Command not allowed inside a transaction")
        }
        Caller::Script if spec.has(CmdFlags::NOSCRIPT) => {
            Some("ERR This Redis command is not allowed from script")
        }
        _ => None,
    }
}

/// Locks what `spec` needs for `args`. The key arguments' hashes are kept with the locks,
/// so the handler's lookups and writes do not hash them again.
pub fn lock_for<'a>(shared: &'a Shared, spec: &CommandSpec, args: &'a [Bytes]) -> Locked<'a> {
    match spec.lock {
        LockMode::None | LockMode::Stepwise => shared.keyspace.lock_none(),
        LockMode::All => shared.keyspace.lock_all(),
        LockMode::Keys => match spec.keys {
            // Most commands have exactly one key, at index 1: skip the position iterator.
            KeySpec::Range {
                first: 1, last: 1, ..
            } if args.len() > 1 => shared.keyspace.lock_args([&args[1][..]]),
            _ => shared
                .keyspace
                .lock_args(spec.keys.positions(args).map(|i| &args[i][..])),
        },
    }
}

/// Refuses a command before it runs (Redis's rejectCommand): counts the error and, inside
/// MULTI, dooms the transaction so EXEC answers EXECABORT.
fn reject(shared: &Shared, client: &mut ClientState, reply: Reply) -> Reply {
    if client.multi.is_some() {
        client.multi_failed = true;
    }
    shared
        .stats
        .total_error_replies
        .fetch_add(1, Ordering::Relaxed);
    reply
}

/// Runs one request for a client and returns the reply (queueing it inside MULTI). A
/// blocking command does not block here: it answers as inside MULTI (see
/// [`execute_blocking`]).
pub fn execute(shared: &Shared, client: &mut ClientState, args: &[Bytes]) -> Reply {
    execute_request(shared, client, args, false).0
}

/// `execute` for a connection that can wait: a blocking command that finds nothing returns
/// its registered waiter with a placeholder reply, and the connection waits for the
/// waiter's reply (see `blocking`).
pub fn execute_blocking(
    shared: &Shared,
    client: &mut ClientState,
    args: &[Bytes],
) -> (Reply, Option<Arc<blocking::Waiter>>) {
    execute_request(shared, client, args, true)
}

fn execute_request(
    shared: &Shared,
    client: &mut ClientState,
    args: &[Bytes],
    may_block: bool,
) -> (Reply, Option<Arc<blocking::Waiter>>) {
    let mut blocked = None;
    let reply = execute_inner(shared, client, args, may_block, &mut blocked);
    (reply, blocked)
}

fn execute_inner(
    shared: &Shared,
    client: &mut ClientState,
    args: &[Bytes],
    may_block: bool,
    blocked: &mut Option<Arc<blocking::Waiter>>,
) -> Reply {
    // Requests refused before authentication are not logged (nothing an unauthenticated
    // client sends is kept), and secrets are logged as `(redacted)`, as MONITOR shows them.
    let spec = match lookup(&shared.table, args) {
        Lookup::Found(spec) => spec,
        Lookup::Error(e) => {
            client.info.clear_last_cmd();
            if let Some(hooks) = &shared.test
                && client.authenticated
            {
                hooks.record(shared.clock.now_ms(), client, args);
            }
            return reject(shared, client, e.into());
        }
    };
    // CLIENT LIST shows the command being run (Redis sets it at lookup, before any check).
    let argv_mem: usize = args.iter().map(|a| a.len()).sum();
    client.info.set_last_cmd(&spec.name);
    client.info.argv_mem.store(argv_mem, Ordering::Relaxed);
    if !client.authenticated && !spec.has(CmdFlags::NO_AUTH) {
        return reject(
            shared,
            client,
            Reply::Error("NOAUTH Authentication required.".into()),
        );
    }
    if let Some(hooks) = &shared.test {
        hooks.record(
            shared.clock.now_ms(),
            client,
            &monitor::redact(spec.name, args),
        );
    }
    if client.multi.is_some()
        && let Some(text) = refused_for(spec, Caller::Multi)
    {
        return reject(shared, client, Reply::Error(text.into()));
    }
    // Cluster mode: MOVED / CROSSSLOT, or the guard to hold until the reply (see cluster.rs).
    let _routed = match cluster::route(shared, client, spec, args) {
        Ok(guard) => guard,
        Err(reply) => return reply,
    };
    if let Some(reply) = maxmemory::check(shared, client, spec) {
        return reject(shared, client, reply);
    }
    // A RESP2 connection that is subscribed only takes what Redis takes in that context.
    if client.resp == 2 && client.subscribed() && !pubsub::allowed_while_subscribed(spec.name) {
        return reject(
            shared,
            client,
            Reply::Error(
                format!(
                    "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                    spec.full_name()
                )
                .into(),
            ),
        );
    }
    if client.multi.is_some() && !spec.immediate {
        if let Some(queue) = client.multi.as_mut() {
            queue.push(args.to_vec());
            client
                .info
                .multi
                .store(queue.len() as i64, Ordering::Relaxed);
            client.info.multi_mem.fetch_add(
                argv_mem + args.len() * std::mem::size_of::<usize>(),
                Ordering::Relaxed,
            );
        }
        return Reply::status("QUEUED");
    }
    if let Some(hooks) = &shared.test
        && let Some(reply) = hooks.check(spec.name.split('|').next().unwrap_or(spec.name), client)
    {
        return reply;
    }
    // A script (EVAL, FCALL… : the whole-keyspace commands MONITOR skips) is marked busy
    // before it takes every shard, so commands arriving meanwhile wait at the busy gate.
    let _announced = (spec.lock == LockMode::All && spec.has(CmdFlags::SKIP_MONITOR))
        .then(|| shared.scripts.busy.announce());
    let store = lock_for(shared, spec, args);
    // One clock read gives the command's `now` and the start of its INFO commandstats time.
    let (now_ns, started) = shared.clock.now_ns_and_instant();
    let mut ctx = Ctx {
        shared,
        client,
        store,
        now_ms: now_ns / 1_000_000,
        now_ns,
        in_exec: false,
        may_block,
        blocked: None,
        ready: Vec::new(),
        events: notify::Events::new(shared),
    };
    let reply = (spec.handler)(&mut ctx, args);
    blocking::note_write(&mut ctx, spec, args);
    *blocked = ctx.blocked.take();
    let ready = std::mem::take(&mut ctx.ready);
    let events = ctx.take_events();
    drop(ctx);
    // Notifications go out with no lock held, before blocked clients are served (whose pops
    // emit their own), as Redis emits them during the command.
    notify::publish(shared, events);
    // Clients blocked on keys this command wrote are served before its reply goes out and
    // before the next command runs (Redis's handleClientsBlockedOnKeys).
    if !ready.is_empty() {
        blocking::serve(shared, ready);
    }
    if shared.monitors.active() && !spec.has(CmdFlags::ADMIN) {
        let hard = shared.live.output_buffer_limit().hard;
        let cap = if hard > 0 { hard } else { monitor::MONITOR_CAP };
        shared.monitors.publish(
            now_ns / 1000,
            client,
            &monitor::redact(spec.name, args),
            cap,
        );
    }
    shared
        .table
        .record(spec, started.elapsed(), reply.is_error());
    if reply.is_error() {
        shared
            .stats
            .total_error_replies
            .fetch_add(1, Ordering::Relaxed);
    }
    shared.stats.total_commands.fetch_add(1, Ordering::Relaxed);
    reply
}
