//! The command table: every command's name, arity, flags, key positions and handler.
//!
//! Redis clients read this table through COMMAND (cluster clients route by the key
//! positions), and sluice uses the same data to check arity at queue time and to know which
//! shards to lock. Each family module exports its own `COMMANDS` slice; this module joins them
//! into entries (a command resolved once: its spec, its statistics, its roles), which
//! lookups return and MULTI queues by id.

// hashbrown's default hasher (foldhash), not std's SipHash: the maps of `CommandTable` are
// looked up for every request whose name `ShortNames` does not hold (long or mixed-case).
use hashbrown::HashMap;

use crate::engine::Handler;
use crate::services::stats::CmdStat;

bitflags::bitflags! {
    /// What sluice must know about a few commands beyond their Redis flags (Redis compares
    /// their handlers), declared with the command's row ([`CommandSpec::with_roles`]).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Roles: u32 {
        /// EXEC: checks the whole queue (OOM, cluster slot, pause).
        const EXEC = 1 << 0;
        /// Runs inside MULTI even over maxmemory (EXEC, DISCARD, QUIT, RESET).
        const ENDS_MULTI = 1 << 1;
        /// Allowed to a subscribed RESP2 client ((P|S)(UN)SUBSCRIBE, PING, QUIT, RESET).
        const WHILE_SUBSCRIBED = 1 << 2;
        /// Its handler takes shard locks itself: a script, which holds them all, may not call it.
        const LOCKS_ITSELF = 1 << 3;
        /// Needs shard locks to run even with no key (EXEC, WATCH, SAVE, DEBUG: the busy gate
        /// waits for any running script).
        const NEEDS_SHARDS = 1 << 4;
        /// Replicated though not flagged `write` (Redis's `may-replicate`: CLIENT PAUSE WRITE
        /// holds it).
        const MAY_REPLICATE = 1 << 5;
        /// EVAL / EVAL_RO: the script's text is the first argument.
        const EVAL = 1 << 6;
        /// EVALSHA / EVALSHA_RO: the script's SHA1 is the first argument.
        const EVALSHA = 1 << 7;
        /// FCALL / FCALL_RO: runs a function.
        const FCALL = 1 << 8;
        /// Refused like a write after a failed background save (PING, as Redis does).
        const REFUSED_BY_MISCONF = 1 << 9;
        /// Sharded pub/sub (SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH): a cluster replica serves it
        /// for its master's slots to any client.
        const SHARDED_PUBSUB = 1 << 10;
        /// DEBUG: refused unless `enable-debug-command` admits the client (Redis's
        /// `CMD_PROTECTED`).
        const PROTECTED = 1 << 11;
        /// CLIENT's subcommands: CLIENT CACHING's flag holds across them to the next
        /// command (Redis compares `clientCommand`).
        const KEEPS_CACHING = 1 << 12;
        /// PING: on the replication stream, the master's keepalive, which a replica passes
        /// on without running it.
        const KEEPALIVE = 1 << 13;
        /// SELECT: a replica's append-only file writes its own SELECTs, so it does not log
        /// the ones its master sends.
        const SELECTS_DB = 1 << 14;
        /// REPLCONF: the replication link's own traffic (a replica answers GETACK on the
        /// link, a master reads ACKs off it); never logged as data.
        const REPLICATION_LINK = 1 << 15;
        /// MULTI: an append-only file that ends inside the transaction it starts is
        /// truncated before it.
        const STARTS_MULTI = 1 << 16;
    }
}

/// Where a command's keys are.
#[derive(Debug, Clone, Copy)]
pub enum KeySpec {
    /// No keys.
    None,
    /// Redis's (first, last, step); a negative `last` counts from the end (-1 = last arg).
    Range {
        /// Index of the first key.
        first: i32,
        /// Index of the last key (negative: from the end).
        last: i32,
        /// Distance between keys.
        step: i32,
    },
    /// Keys found by a function of the arguments (numkeys-style commands); the triple is what
    /// COMMAND reports.
    Custom {
        /// COMMAND's first key.
        first: i32,
        /// COMMAND's last key.
        last: i32,
        /// COMMAND's step.
        step: i32,
        /// The real positions.
        find: fn(&[&[u8]]) -> Vec<usize>,
    },
    /// Keys counted by a numkeys argument, as Redis's `keynum` key spec describes them
    /// (EVAL: `begin` 2, `keynumidx` 0, `firstkey` 1, `step` 1). COMMAND reports (0, 0, 0)
    /// and the `movablekeys` flag for these.
    Keynum {
        /// Index where the search begins (Redis's begin_search index).
        begin: i32,
        /// Position of numkeys, relative to `begin`.
        keynumidx: i32,
        /// Position of the first key, relative to `begin`.
        firstkey: i32,
        /// Distance between keys.
        step: i32,
        /// The key spec's flags, as COMMAND INFO reports them.
        flags: &'static [&'static str],
        /// The key spec's notes, if Redis gives one.
        notes: Option<&'static str>,
    },
}

impl KeySpec {
    /// The (first, last, step) triple COMMAND reports.
    pub fn triple(&self) -> (i32, i32, i32) {
        match *self {
            KeySpec::None | KeySpec::Keynum { .. } => (0, 0, 0),
            KeySpec::Range { first, last, step }
            | KeySpec::Custom {
                first, last, step, ..
            } => (first, last, step),
        }
    }

    /// Indexes of the keys in `args` (name at index 0), found as Redis's key specs find
    /// them. The one key-position function: locking (`lock_for`), cluster routing
    /// (`commands::cluster::keys_slot`) and COMMAND GETKEYS all use it.
    pub fn positions(&self, args: &[&[u8]]) -> Positions {
        match *self {
            KeySpec::None => Positions::none(),
            KeySpec::Range { first, last, step } => {
                let n = args.len() as i32;
                let last = if last < 0 { n + last } else { last.min(n - 1) };
                let step = step.max(1) as usize;
                if first <= 0 || last < first {
                    return Positions::none();
                }
                Positions::Range((first as usize..last as usize + 1).step_by(step))
            }
            KeySpec::Custom { find, .. } => Positions::Found(find(args).into_iter(), args.len()),
            KeySpec::Keynum {
                begin,
                keynumidx,
                firstkey,
                step,
                ..
            } => {
                // Redis's keynum spec: a count that is not positive, or names keys past
                // the arguments, finds no key (the command's parse then reports it).
                let count = args
                    .get((begin + keynumidx).max(0) as usize)
                    .and_then(|b| crate::num::parse_i64(b))
                    .filter(|&c| c > 0)
                    .unwrap_or(0) as usize;
                let first = begin + firstkey;
                let step = step.max(1) as usize;
                if count == 0 || first < 1 {
                    return Positions::none();
                }
                let first = first as usize;
                let last = (count - 1)
                    .checked_mul(step)
                    .and_then(|d| d.checked_add(first));
                match last {
                    Some(last) if last < args.len() => {
                        Positions::Range((first..last + 1).step_by(step))
                    }
                    _ => Positions::none(),
                }
            }
        }
    }
}

/// The key positions of one request ([`KeySpec::positions`]): an iterator that allocates
/// nothing unless a command's own finder (`KeySpec::Custom`) returns a vector.
#[derive(Debug, Clone)]
pub enum Positions {
    /// Evenly spaced positions.
    Range(std::iter::StepBy<std::ops::Range<usize>>),
    /// What a custom finder returned, kept below the argument count.
    Found(std::vec::IntoIter<usize>, usize),
}

impl Positions {
    fn none() -> Positions {
        Positions::Range((0..0).step_by(1))
    }
}

impl Iterator for Positions {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        match self {
            Positions::Range(r) => r.next(),
            Positions::Found(found, n) => found.find(|&i| i < *n),
        }
    }
}

impl KeySpecDoc {
    /// Whether a key spec with a known begin finds the argument at `pos` (arithmetic only, but
    /// for a keyword spec's one scan: a request may name very many keys).
    pub fn finds(&self, args: &[&[u8]], pos: usize) -> bool {
        let d = self;
        let Some(mut begin) = d.begin else {
            return false;
        };
        if let Some(keyword) = d.keyword {
            // Redis's keyword search: the first occurrence at or after `startfrom`, the key
            // range starting right after it.
            let from = usize::try_from(begin).unwrap_or(usize::MAX);
            let Some(at) = args
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, a)| a.eq_ignore_ascii_case(keyword.as_bytes()))
                .map(|(i, _)| i)
            else {
                return false;
            };
            begin = at as i64 + 1;
        }
        let n = args.len() as i64;
        let (first, last, step) = match d.find {
            FindKeys::Range(lastkey, step, _) => {
                let last = if lastkey >= 0 {
                    begin + lastkey
                } else {
                    n + lastkey
                };
                (begin, last, step)
            }
            FindKeys::Keynum(idx, firstkey, step) => {
                let count = usize::try_from(begin + idx)
                    .ok()
                    .and_then(|i| args.get(i))
                    .and_then(|b| crate::num::parse_i64(b))
                    .unwrap_or(0);
                let first = begin + firstkey;
                (
                    first,
                    first.saturating_add(count.saturating_sub(1).saturating_mul(step)),
                    step,
                )
            }
            FindKeys::Unknown => return false,
        };
        let pos = pos as i64;
        pos >= first && pos <= last.min(n - 1) && (pos - first) % step.max(1) == 0
    }

    /// A range spec starting at `begin` with `lastkey` (step 1, no limit).
    pub const fn range(flags: &'static [&'static str], begin: i64, lastkey: i64) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin: Some(begin),
            keyword: None,
            find: FindKeys::Range(lastkey, 1, 0),
        }
    }

    /// The same spec with notes.
    pub const fn with_notes(mut self, notes: &'static str) -> Self {
        self.notes = Some(notes);
        self
    }
}

bitflags::bitflags! {
    /// Redis's command flags, declared in the order COMMAND reports them (Redis 7.0's
    /// `addReplyCommandFlags`), so iterating the set gives Redis's reply.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CmdFlags: u32 {
        /// May modify the keyspace.
        const WRITE = 1 << 0;
        /// Only reads.
        const READONLY = 1 << 1;
        /// Refused over maxmemory (may grow memory).
        const DENYOOM = 1 << 2;
        /// Administrative: not fed to MONITOR.
        const ADMIN = 1 << 3;
        /// Pub/sub.
        const PUBSUB = 1 << 4;
        /// Refused from scripts (`redis.call`).
        const NOSCRIPT = 1 << 5;
        /// May block the client.
        const BLOCKING = 1 << 6;
        /// Allowed while loading.
        const LOADING = 1 << 7;
        /// Allowed on a stale replica.
        const STALE = 1 << 8;
        /// Not fed to MONITOR.
        const SKIP_MONITOR = 1 << 9;
        /// Not logged by SLOWLOG.
        const SKIP_SLOWLOG = 1 << 10;
        /// Cluster ASKING.
        const ASKING = 1 << 11;
        /// O(1) or O(log N).
        const FAST = 1 << 12;
        /// Allowed before AUTH.
        const NO_AUTH = 1 << 13;
        /// May run without any key.
        const NO_MANDATORY_KEYS = 1 << 14;
        /// Refused during async loading.
        const NO_ASYNC_LOADING = 1 << 15;
        /// Refused inside MULTI.
        const NO_MULTI = 1 << 16;
        /// Keys found by parsing the arguments.
        const MOVABLEKEYS = 1 << 17;
        /// Allowed while a script is busy.
        const ALLOW_BUSY = 1 << 18;
    }
}

/// Each flag with the name COMMAND gives it, in Redis's order.
const FLAG_NAMES: [(CmdFlags, &str); 19] = [
    (CmdFlags::WRITE, "write"),
    (CmdFlags::READONLY, "readonly"),
    (CmdFlags::DENYOOM, "denyoom"),
    (CmdFlags::ADMIN, "admin"),
    (CmdFlags::PUBSUB, "pubsub"),
    (CmdFlags::NOSCRIPT, "noscript"),
    (CmdFlags::BLOCKING, "blocking"),
    (CmdFlags::LOADING, "loading"),
    (CmdFlags::STALE, "stale"),
    (CmdFlags::SKIP_MONITOR, "skip_monitor"),
    (CmdFlags::SKIP_SLOWLOG, "skip_slowlog"),
    (CmdFlags::ASKING, "asking"),
    (CmdFlags::FAST, "fast"),
    (CmdFlags::NO_AUTH, "no_auth"),
    (CmdFlags::NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (CmdFlags::NO_ASYNC_LOADING, "no_async_loading"),
    (CmdFlags::NO_MULTI, "no_multi"),
    (CmdFlags::MOVABLEKEYS, "movablekeys"),
    (CmdFlags::ALLOW_BUSY, "allow_busy"),
];

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl CmdFlags {
    /// The flags named by Redis's names. The family tables are statics, so an unknown name
    /// stops the build.
    pub const fn from_names(names: &[&str]) -> CmdFlags {
        let mut flags = CmdFlags::empty();
        let mut i = 0;
        while i < names.len() {
            let mut j = 0;
            loop {
                if j == FLAG_NAMES.len() {
                    panic!("unknown command flag");
                }
                if same(names[i], FLAG_NAMES[j].1) {
                    flags = flags.union(FLAG_NAMES[j].0);
                    break;
                }
                j += 1;
            }
            i += 1;
        }
        flags
    }

    /// The names COMMAND reports, in Redis's order.
    pub fn names(self) -> Vec<&'static str> {
        FLAG_NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// What a command locks before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Nothing (no keys, or the handler locks by itself, like EXEC).
    None,
    /// The shards of its keys.
    Keys,
    /// Every shard (whole-keyspace commands).
    All,
    /// Called by a client: nothing, the handler locks one shard at a time (SCAN walks the
    /// shards so). Inside EXEC or a script, which must not take locks of their own: every
    /// shard, as `All`.
    Stepwise,
}

/// One command (or subcommand) of the table.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lowercase name; subcommands use Redis's full name (`client|setname`).
    pub name: &'static str,
    /// Redis arity: positive = exact argument count (name included), negative = minimum.
    pub arity: i32,
    /// Redis command flags.
    pub flags: CmdFlags,
    /// ACL categories, as COMMAND reports them.
    pub acl: &'static [&'static str],
    /// Key positions.
    pub keys: KeySpec,
    /// What to lock.
    pub lock: LockMode,
    /// The handler.
    pub handler: Handler,
    /// Subcommands (CLIENT, CONFIG, …).
    pub subcommands: &'static [CommandSpec],
    /// Runs immediately even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub immediate: bool,
    /// The arity COMMAND reports, where it differs from the one dispatch checks.
    pub reported_arity: Option<i32>,
    /// Command tips COMMAND INFO reports (`nondeterministic_output_order`…).
    pub tips: &'static [&'static str],
    /// Key specs COMMAND INFO reports instead of the one derived from `keys`.
    pub key_specs: &'static [KeySpecDoc],
    /// The flags of the key spec derived from a `Range` `keys` (Redis's `RW`/`RO`/`OW`/`RM`
    /// and the operation: `access`, `update`, `insert`, `delete`), when not the default
    /// (`RW update` for a write command, `RO access` otherwise).
    pub key_flags: Option<&'static [&'static str]>,
    /// The notes of that derived key spec, if Redis gives one.
    pub key_notes: Option<&'static str>,
    /// Where Redis's key spec says `variable_flags`: the flags its key has in one request,
    /// decided by the arguments (SET with or without GET, BITFIELD with only reads).
    pub variable_key_flags: Option<KeyFlagsFn>,
    /// What sluice must know of it beyond its flags.
    pub roles: Roles,
    /// How it propagates to replicas (see `repl::effects`).
    pub effect: crate::repl::effects::Effect,
    /// Which of its arguments MONITOR, SLOWLOG and the command log hide.
    pub redaction: crate::services::monitor::Redaction,
    /// Which of its arguments are pub/sub channels ACL rules (`&pattern`) check.
    pub channels: Channels,
}

/// A command's key flags in one request (see [`CommandSpec::variable_key_flags`]).
pub type KeyFlagsFn = fn(&[&[u8]]) -> &'static [&'static str];

/// The pub/sub channels among a command's arguments, as Redis's `getChannelsFromCommand`
/// finds those ACL rules check (publishing and subscribing; unsubscribing is never refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// No channel.
    None,
    /// The first argument is a channel one publishes to (PUBLISH, SPUBLISH).
    Publish,
    /// Every argument is a channel (SUBSCRIBE, SSUBSCRIBE).
    Subscribe,
    /// Every argument is a pattern, matched literally against the rules (PSUBSCRIBE).
    SubscribePattern,
}

impl Channels {
    /// The (position, is a pattern) of each channel in `args` (name at index 0).
    pub fn positions(self, args: &[&[u8]]) -> impl Iterator<Item = (usize, bool)> {
        let (range, pattern) = match self {
            Channels::None => (0..0, false),
            Channels::Publish => (1..args.len().min(2), false),
            Channels::Subscribe => (1..args.len(), false),
            Channels::SubscribePattern => (1..args.len(), true),
        };
        range.map(move |i| (i, pattern))
    }
}

/// What COMMAND INFO reports beyond the table's own fields.
#[derive(Debug)]
pub struct InfoDoc {
    /// Command tips (`request_policy:…`), in Redis's order.
    pub tips: &'static [&'static str],
    /// The key specs, in Redis's order.
    pub key_specs: &'static [KeySpecDoc],
}

/// One key spec as COMMAND INFO reports it, for commands Redis describes with several specs
/// (a destination and its sources) or with flags the single derived spec does not give.
#[derive(Debug, Clone, Copy)]
pub struct KeySpecDoc {
    /// Its notes, if Redis gives any.
    pub notes: Option<&'static str>,
    /// Its flags (`RO`, `access`, …).
    pub flags: &'static [&'static str],
    /// Where the search begins: `Some(index)`, or None for Redis's `unknown`.
    pub begin: Option<i64>,
    /// Redis's `keyword` begin_search: the key follows this keyword, searched for from the
    /// index `begin` (its `startfrom`) on. `None` for an `index` begin_search.
    pub keyword: Option<&'static str>,
    /// How keys are found from there.
    pub find: FindKeys,
}

/// The `find_keys` part of a key spec.
#[derive(Debug, Clone, Copy)]
pub enum FindKeys {
    /// `range`: last key (relative), step and limit.
    Range(i64, i64, i64),
    /// `keynum`: numkeys index, first key and step.
    Keynum(i64, i64, i64),
    /// `unknown`.
    Unknown,
}

impl CommandSpec {
    /// A command with the given keys; it locks their shards (or nothing if it has none).
    /// `flags` are Redis's flag names (checked when the table is compiled).
    pub const fn new(
        name: &'static str,
        arity: i32,
        flags: &'static [&'static str],
        keys: KeySpec,
        handler: Handler,
    ) -> Self {
        CommandSpec {
            name,
            arity,
            flags: CmdFlags::from_names(flags),
            acl: &[],
            lock: match keys {
                KeySpec::None => LockMode::None,
                _ => LockMode::Keys,
            },
            keys,
            handler,
            subcommands: &[],
            immediate: false,
            reported_arity: None,
            tips: &[],
            key_specs: &[],
            key_flags: None,
            key_notes: None,
            variable_key_flags: None,
            roles: Roles::empty(),
            effect: crate::repl::effects::Effect::Verbatim,
            redaction: crate::services::monitor::Redaction::None,
            channels: Channels::None,
        }
    }

    /// Declares which arguments are pub/sub channels (see [`Channels`]).
    pub const fn with_channels(mut self, channels: Channels) -> Self {
        self.channels = channels;
        self
    }

    /// Declares the function that gives its key's flags per request (see
    /// [`CommandSpec::variable_key_flags`]).
    pub const fn with_variable_key_flags(mut self, flags: KeyFlagsFn) -> Self {
        self.variable_key_flags = Some(flags);
        self
    }

    /// Declares the command's roles (see [`Roles`]).
    pub const fn with_roles(mut self, roles: Roles) -> Self {
        self.roles = roles;
        self
    }

    /// Declares how the command propagates to replicas, when not verbatim.
    pub(crate) const fn with_effect(mut self, effect: crate::repl::effects::Effect) -> Self {
        self.effect = effect;
        self
    }

    /// Declares which arguments MONITOR, SLOWLOG and the command log hide.
    pub(crate) const fn with_redaction(
        mut self,
        redaction: crate::services::monitor::Redaction,
    ) -> Self {
        self.redaction = redaction;
        self
    }

    /// True for the commands that run a script or a function (EVAL…, FCALL…).
    pub fn runs_script(&self) -> bool {
        self.roles
            .intersects(Roles::EVAL.union(Roles::EVALSHA).union(Roles::FCALL))
    }

    /// Sets the flags of the key spec COMMAND INFO derives from `keys` (the positions stay
    /// the ones locking uses).
    pub const fn with_key_flags(mut self, flags: &'static [&'static str]) -> Self {
        self.key_flags = Some(flags);
        self
    }

    /// Sets the notes of the key spec COMMAND INFO derives from `keys`.
    pub const fn with_key_notes(mut self, notes: &'static str) -> Self {
        self.key_notes = Some(notes);
        self
    }

    /// Sets the tips COMMAND INFO reports.
    pub const fn with_tips(mut self, tips: &'static [&'static str]) -> Self {
        self.tips = tips;
        self
    }

    /// Sets the key specs COMMAND INFO reports.
    pub const fn with_key_specs(mut self, specs: &'static [KeySpecDoc]) -> Self {
        self.key_specs = specs;
        self
    }

    /// Keys at positions first..=last by step.
    pub const fn keys(first: i32, last: i32, step: i32) -> KeySpec {
        if first == 0 {
            KeySpec::None
        } else {
            KeySpec::Range { first, last, step }
        }
    }

    /// Locks every shard instead.
    pub const fn whole_keyspace(mut self) -> Self {
        self.lock = LockMode::All;
        self
    }

    /// Locks one shard at a time by itself (see `LockMode::Stepwise`).
    pub const fn stepwise(mut self) -> Self {
        self.lock = LockMode::Stepwise;
        self
    }

    /// Locks nothing; the handler locks what it needs itself.
    pub const fn self_locking(mut self) -> Self {
        self.lock = LockMode::None;
        self
    }

    /// Sets the subcommands.
    pub const fn with_subcommands(mut self, subs: &'static [CommandSpec]) -> Self {
        self.subcommands = subs;
        self
    }

    /// Sets the ACL categories.
    pub const fn with_acl(mut self, acl: &'static [&'static str]) -> Self {
        self.acl = acl;
        self
    }

    /// Reports another arity in COMMAND than the one dispatch enforces.
    pub const fn with_reported_arity(mut self, arity: i32) -> Self {
        self.reported_arity = Some(arity);
        self
    }

    /// Sets what COMMAND INFO reports for key specs and tips.
    pub const fn with_info(mut self, info: &'static InfoDoc) -> Self {
        self.tips = info.tips;
        self.key_specs = info.key_specs;
        self
    }

    /// Runs even inside MULTI.
    pub const fn immediate(mut self) -> Self {
        self.immediate = true;
        self
    }

    /// The name Redis uses in errors and stats (`get`, `client|setname`).
    pub fn full_name(&self) -> String {
        self.name.to_string()
    }

    /// The name a client types for this (sub)command.
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('|').next().unwrap_or(self.name)
    }

    /// The flags of the key at `pos`, as COMMAND GETKEYSANDFLAGS gives them: those of the key spec
    /// that finds it; a key only an `unknown` spec finds (SORT's STORE) takes the last of those.
    /// Where Redis's spec says `variable_flags`, the arguments decide, as Redis's own key finders
    /// do.
    pub fn key_flags_at(&self, args: &[&[u8]], pos: usize) -> &'static [&'static str] {
        let spec = self;
        const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];
        if let Some(flags) = spec.variable_key_flags {
            return flags(args);
        }
        if !spec.key_specs.is_empty() {
            let found = spec.key_specs.iter().find(|d| d.finds(args, pos));
            let unknown = spec.key_specs.iter().rev().find(|d| d.begin.is_none());
            // A key its command's own finder returns that no spec finds (MIGRATE's after
            // KEYS, AUTH and AUTH2 skipped) takes the first spec's flags, as Redis's finder
            // gives its keys: never none, which would let ACL key patterns pass it unchecked.
            let first = spec.key_specs.first();
            return found
                .or(unknown)
                .or(first)
                .map_or(RW_ACCESS_UPDATE, |d| d.flags);
        }
        match spec.keys {
            KeySpec::Keynum { flags, .. } => flags,
            _ => match spec.key_flags {
                Some(flags) => flags,
                None if spec.has(CmdFlags::WRITE) => &["RW", "update"],
                None => &["RO", "access"],
            },
        }
    }

    /// True if the command has every flag of `f`.
    pub fn has(&self, f: CmdFlags) -> bool {
        self.flags.contains(f)
    }

    /// A data command that can take `engine::call`'s lean path (`call_lean`) in a plain
    /// batch: it locks the shards of its keys by the table, and it cannot change what made
    /// the batch plain (`call::plain`: the client's authentication, MULTI, tracking and
    /// subscriptions, the configuration, ACL users, MONITOR, pauses, the replication role),
    /// nor needs more than the plain checks (no script, no blocking, no admin command, none
    /// of the roles `call` treats apart). Any other command ends a lean run: the batch's
    /// state is read again after it, so the next command sees what it changed.
    pub fn is_lean(&self) -> bool {
        self.lock == LockMode::Keys
            && !self.runs_script()
            && !self.flags.intersects(
                CmdFlags::ADMIN
                    .union(CmdFlags::PUBSUB)
                    .union(CmdFlags::BLOCKING)
                    .union(CmdFlags::NO_AUTH)
                    .union(CmdFlags::NOSCRIPT),
            )
            && self.roles.is_empty()
    }

    /// A script may call it (`redis.call`): it is not `noscript`, and its handler takes no
    /// shard locks itself (a script already holds its shards). `engine::call` refuses the
    /// others from scripts.
    pub fn callable_from_scripts(&self) -> bool {
        !self.has(CmdFlags::NOSCRIPT) && !self.roles.contains(Roles::LOCKS_ITSELF)
    }

    /// Running it leaves what `engine::call::plain` read for the batch as it was, so the
    /// batch need not read it again: a lean command (see [`CommandSpec::is_lean`]), or a
    /// script command, which runs only commands callable from scripts, none of which
    /// changes that state (the configuration, ACL users, the client's authentication,
    /// MULTI, tracking and subscriptions, MONITOR, the replication role are all changed by
    /// `noscript` commands; the test `no_script_callable_command_changes_the_batch_policy`
    /// walks the table).
    pub fn keeps_batch_policy(&self) -> bool {
        self.is_lean() || self.runs_script()
    }
}

/// A resolved command: its table entry and the statistics kept with it. Lookups return it,
/// MULTI queues its [`CmdId`], and `engine::call` counts into it: no second lookup by name.
#[derive(Debug)]
pub struct CommandEntry {
    /// The command's spec.
    pub spec: &'static CommandSpec,
    /// Its index in the table (what a MULTI queue keeps).
    pub id: CmdId,
    /// INFO commandstats / latencystats counters.
    pub stats: CmdStat,
    /// Its subcommands' entries (indexes into the table).
    subs: std::ops::Range<u32>,
    /// It may take `engine::call`'s lean path in a plain batch ([`CommandSpec::is_lean`]).
    pub lean: bool,
    /// A batch need not read its policy state again after it
    /// ([`CommandSpec::keeps_batch_policy`]).
    pub keeps_policy: bool,
}

/// The index of a [`CommandEntry`] in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmdId(pub u32);

/// The joined table.
#[derive(Debug)]
pub struct CommandTable {
    /// The top-level commands by lowercase name.
    by_name: HashMap<Vec<u8>, u32>,
    /// The same, by each name in lower and in upper case, as clients send them: found
    /// with one hash and one compare of the bytes as they came (a name in mixed case
    /// goes through a lowercase copy and `by_name`). Names of up to 15 bytes are found in
    /// `short` instead.
    as_typed: HashMap<Vec<u8>, u32>,
    /// `as_typed`'s names of up to [`ShortNames::MAX_LEN`] bytes (every command a limiter
    /// sends), in a table of their own made for the lookup every request makes.
    short: ShortNames,
    entries: Vec<CommandEntry>,
}

/// Command names of up to [`ShortNames::MAX_LEN`] bytes, as typed, packed into two words
/// with their length: a lookup packs the name, multiplies, shifts and compares two words
/// per probe, where the hash map of byte vectors runs its hasher and a `memcmp`. Open
/// addressing with linear probing, at most half full.
#[derive(Debug)]
struct ShortNames {
    /// (packed name, entry id); `[0, 0]` is an empty slot (a packed name has its length,
    /// at least 1, in the top byte).
    slots: Vec<([u64; 2], u32)>,
    /// `slots.len() - 1` (a power of two less one).
    mask: usize,
}

impl ShortNames {
    /// The longest name held (the 16th byte of the packed words is the length).
    const MAX_LEN: usize = 15;

    /// The table of `names`' short ones.
    fn build<'n>(names: impl Iterator<Item = (&'n [u8], u32)> + Clone) -> Self {
        let held = names
            .clone()
            .filter(|(n, _)| Self::pack(n).is_some())
            .count();
        let size = (held * 2).next_power_of_two().max(16);
        let mut table = ShortNames {
            slots: vec![([0, 0], 0); size],
            mask: size - 1,
        };
        for (name, id) in names {
            if let Some(key) = Self::pack(name) {
                let mut i = Self::slot(key) & table.mask;
                while table.slots[i].0 != [0, 0] {
                    i = (i + 1) & table.mask;
                }
                table.slots[i] = (key, id);
            }
        }
        table
    }

    /// `name`'s bytes and length in two words; None if empty or longer than `MAX_LEN`.
    #[inline]
    fn pack(name: &[u8]) -> Option<[u64; 2]> {
        if name.is_empty() || name.len() > Self::MAX_LEN {
            return None;
        }
        let mut words = [0u64, (name.len() as u64) << 56];
        for (i, &b) in name.iter().enumerate() {
            words[i / 8] |= u64::from(b) << (8 * (i % 8));
        }
        Some(words)
    }

    #[inline]
    fn slot(key: [u64; 2]) -> usize {
        // Fibonacci hashing of the two words folded: the top bits are the well-mixed ones.
        ((key[0] ^ key[1].rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize
    }

    /// The id of `name` as typed, if it is held. `None` for a name too long to be held.
    #[inline]
    fn get(&self, name: &[u8]) -> Option<u32> {
        let key = Self::pack(name)?;
        let mut i = Self::slot(key) & self.mask;
        loop {
            let (k, id) = *self.slots.get(i)?;
            if k == key {
                return Some(id);
            }
            if k == [0, 0] {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

impl CommandTable {
    /// Joins every family's commands.
    pub fn build() -> Self {
        let mut table = CommandTable {
            by_name: HashMap::new(),
            as_typed: HashMap::new(),
            short: ShortNames::build(std::iter::empty()),
            entries: Vec::new(),
        };
        for family in crate::commands::all_families() {
            for spec in family {
                let id = table.push(spec);
                let first = table.entries.len() as u32;
                for sub in spec.subcommands {
                    table.push(sub);
                }
                let last = table.entries.len() as u32;
                table.entries[id as usize].subs = first..last;
                table.by_name.insert(spec.name.as_bytes().to_vec(), id);
                table
                    .as_typed
                    .insert(spec.name.to_ascii_lowercase().into_bytes(), id);
                table
                    .as_typed
                    .insert(spec.name.to_ascii_uppercase().into_bytes(), id);
            }
        }
        table.index_short_names();
        table
    }

    fn index_short_names(&mut self) {
        self.short = ShortNames::build(self.as_typed.iter().map(|(n, &id)| (&n[..], id)));
    }

    fn push(&mut self, spec: &'static CommandSpec) -> u32 {
        let id = self.entries.len() as u32;
        self.entries.push(CommandEntry {
            spec,
            id: CmdId(id),
            stats: CmdStat::default(),
            subs: 0..0,
            lean: spec.is_lean(),
            keeps_policy: spec.keeps_batch_policy(),
        });
        id
    }

    /// Removes a command (test-only commands outside test mode).
    pub fn remove(&mut self, name: &str) {
        self.by_name.remove(name.as_bytes());
        self.as_typed.remove(name.to_ascii_lowercase().as_bytes());
        self.as_typed.remove(name.to_ascii_uppercase().as_bytes());
        self.index_short_names();
    }

    /// Looks a command up by name, case-insensitively.
    pub fn get(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.get_entry(name).map(|e| e.spec)
    }

    /// Looks a command's entry up by name, case-insensitively.
    pub fn get_entry(&self, name: &[u8]) -> Option<&CommandEntry> {
        let typed = if name.len() <= ShortNames::MAX_LEN {
            self.short.get(name)
        } else {
            self.as_typed.get(name).copied()
        };
        if let Some(id) = typed {
            return self.entries.get(id as usize);
        }
        if name.len() > 64 {
            return None;
        }
        let mut buf = [0u8; 64];
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        let id = *self.by_name.get(&lower[..])?;
        self.entries.get(id as usize)
    }

    /// The subcommand of `entry` a client typed as `name`, case-insensitively.
    pub fn sub_entry(&self, entry: &CommandEntry, name: &[u8]) -> Option<&CommandEntry> {
        self.entries
            .get(entry.subs.start as usize..entry.subs.end as usize)?
            .iter()
            .find(|s| name.eq_ignore_ascii_case(s.spec.short_name().as_bytes()))
    }

    /// The ids of `entry`'s subcommands.
    pub fn sub_ids(&self, entry: &CommandEntry) -> std::ops::Range<u32> {
        entry.subs.clone()
    }

    /// The commands clients can call (not their subcommands), sorted by name: what ACL
    /// rules and ACL CAT walk (Redis's `orig_commands`).
    pub fn top_entries(&self) -> Vec<&CommandEntry> {
        let mut v: Vec<&CommandEntry> = self
            .by_name
            .values()
            .filter_map(|&id| self.entries.get(id as usize))
            .collect();
        v.sort_by_key(|e| e.spec.name);
        v
    }

    /// A command or `command|subcommand` by name, as ACL rules name them (Redis's
    /// `lookupCommandBySds`): more than one `|` names nothing, and a subcommand of a command
    /// without subcommands neither.
    pub fn lookup_full_name(&self, name: &[u8]) -> Option<&CommandEntry> {
        let mut parts = name.split(|&b| b == b'|');
        let base = self.get_entry(parts.next()?)?;
        match (parts.next(), parts.next()) {
            (None, _) => Some(base),
            (Some(sub), None) => self.sub_entry(base, sub),
            _ => None,
        }
    }

    /// The subcommands' entries of `entry` (none for a command without subcommands).
    pub fn sub_entries(&self, entry: &CommandEntry) -> &[CommandEntry] {
        self.entries
            .get(entry.subs.start as usize..entry.subs.end as usize)
            .unwrap_or(&[])
    }

    /// The entry a [`CmdId`] names.
    pub fn entry(&self, id: CmdId) -> Option<&CommandEntry> {
        self.entries.get(id.0 as usize)
    }

    /// All top-level commands, sorted by name.
    pub fn commands(&self) -> Vec<&'static CommandSpec> {
        let mut v: Vec<_> = self
            .by_name
            .values()
            .filter_map(|&id| self.entries.get(id as usize))
            .map(|e| e.spec)
            .collect();
        v.sort_by_key(|s| s.name);
        v
    }

    /// Every entry, commands and subcommands, in table order.
    pub fn entries(&self) -> &[CommandEntry] {
        &self.entries
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        for e in &self.entries {
            e.stats.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    /// The lean path is for keyed data commands only: none that changes the policy state
    /// a plain batch is read for (`call::plain`), runs a script, blocks or locks itself.
    #[test]
    fn only_keyed_data_commands_are_lean() {
        let table = CommandTable::build();
        let lean = |words: &[&str]| {
            let a = argv(words);
            match crate::engine::lookup(&table, &crate::engine::args::borrowed(&a)) {
                crate::engine::Lookup::Found(e) => e.lean,
                crate::engine::Lookup::Error(..) => panic!("{words:?}"),
            }
        };
        for words in [
            &["get", "k"][..],
            &["set", "k", "v"],
            &["incr", "k"],
            &["mset", "a", "1", "b", "2"],
            &["zadd", "z", "1", "m"],
            &["hget", "h", "f"],
            &["expire", "k", "10"],
            &["cl.throttle", "k", "15", "30", "60"],
            &["object", "encoding", "k"],
        ] {
            assert!(lean(words), "{words:?} is lean");
        }
        for words in [
            &["config", "set", "maxmemory", "1"][..],
            &["acl", "setuser", "u"],
            &["client", "pause", "10"],
            &["client", "tracking", "on"],
            &["multi"],
            &["exec"],
            &["watch", "k"],
            &["auth", "p"],
            &["hello", "3"],
            &["select", "1"],
            &["subscribe", "c"],
            &["spublish", "c", "m"],
            &["blpop", "l", "0"],
            &["eval", "return 1", "1", "k"],
            &[
                "evalsha",
                "0000000000000000000000000000000000000000",
                "1",
                "k",
            ],
            &["fcall", "f", "1", "k"],
            &["debug", "sleep", "0"],
            &["monitor"],
            &["replicaof", "no", "one"],
            &["flushall"],
            &["scan", "0"],
            &["keys", "*"],
            &["save"],
            &["reset"],
            &["ping"],
        ] {
            assert!(!lean(words), "{words:?} is not lean");
        }
    }

    /// A numkeys that names keys past the arguments finds no key, for locking as for
    /// routing and COMMAND GETKEYS (it once clipped for locking only).
    #[test]
    fn keynum_positions_follow_redis_key_specs() {
        let eval = KeySpec::Keynum {
            begin: 2,
            keynumidx: 0,
            firstkey: 1,
            step: 1,
            flags: &[],
            notes: None,
        };
        let at = |w: &[&str]| {
            eval.positions(&crate::engine::args::borrowed(&argv(w)))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(&["eval", "s", "2", "a", "b", "x"]), [3, 4]);
        assert_eq!(at(&["eval", "s", "2", "a", "b"]), [3, 4]);
        assert!(at(&["eval", "s", "3", "a", "b"]).is_empty());
        assert!(at(&["eval", "s", "0", "a"]).is_empty());
        assert!(at(&["eval", "s", "-1", "a"]).is_empty());
        assert!(at(&["eval", "s", "x", "a"]).is_empty());
        assert!(at(&["eval", "s", "9223372036854775807", "a"]).is_empty());
        assert!(at(&["eval", "s"]).is_empty());
        let zmpop = KeySpec::Keynum {
            begin: 1,
            keynumidx: 0,
            firstkey: 1,
            step: 1,
            flags: &[],
            notes: None,
        };
        assert_eq!(
            zmpop
                .positions(&crate::engine::args::borrowed(&argv(&[
                    "zmpop", "2", "a", "b", "min"
                ])))
                .collect::<Vec<_>>(),
            [2, 3]
        );
    }

    /// The short-name table answers what the map of names as typed answers: every short
    /// name its id, and nothing for a name it does not hold, however close (a NUL more or
    /// less, one byte off, another case mix), nor for one too long to be held.
    #[test]
    fn short_names_find_what_the_map_finds() {
        let table = CommandTable::build();
        let mut held = 0;
        for (name, &id) in &table.as_typed {
            if name.len() > ShortNames::MAX_LEN {
                assert_eq!(table.short.get(name), None);
                continue;
            }
            held += 1;
            assert_eq!(table.short.get(name), Some(id), "{name:?}");
            let mut longer = name.clone();
            longer.push(0);
            assert_eq!(
                table.short.get(&longer).map(|_| ()),
                table.as_typed.get(&longer).map(|_| ()),
                "{longer:?}"
            );
            let mut off = name.clone();
            off[0] ^= 0x01;
            assert_eq!(
                table.short.get(&off),
                table.as_typed.get(&off).copied(),
                "{off:?}"
            );
            assert_eq!(
                table.short.get(&name[..name.len() - 1]),
                table.as_typed.get(&name[..name.len() - 1]).copied()
            );
        }
        assert!(held > 300, "{held}");
        assert_eq!(table.short.get(b""), None);
        assert_eq!(table.short.get(b"\0\0\0"), None);
        assert!(table.short.slots.len() >= 2 * held);
    }

    /// Every command is found by its name in any letter case, and only by its name: not by
    /// a longer name, a name with a byte that differs by more than its case, or a
    /// subcommand's name; a removed command is gone in every case.
    #[test]
    fn commands_are_found_by_name_in_any_case() {
        let mut table = CommandTable::build();
        let names: Vec<&str> = table.commands().iter().map(|s| s.name).collect();
        assert!(names.len() > 200, "{}", names.len());
        for name in &names {
            let upper = name.to_ascii_uppercase();
            let mixed: String = name
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for typed in [name.to_string(), upper, mixed] {
                let found = table.get_entry(typed.as_bytes()).map(|e| e.spec.name);
                assert_eq!(found, Some(*name), "{typed:?}");
            }
            assert!(table.get_entry(format!("{name}~").as_bytes()).is_none());
            assert!(table.get_entry(format!("{name}\0").as_bytes()).is_none());
        }
        for absent in [
            &b"cl\x0ethrottle"[..],
            b"CL\x0eTHROTTLE",
            b"cl.throttl",
            b"",
            &[b'a'; 65],
            b"get|x",
            b"config|get",
        ] {
            assert!(table.get_entry(absent).is_none(), "{absent:?}");
        }
        table.remove("get");
        for typed in ["get", "GET", "Get"] {
            assert!(table.get_entry(typed.as_bytes()).is_none(), "{typed}");
        }
        assert!(table.get_entry(b"SET").is_some());
    }

    /// The attributes sluice once looked up by command name (roles, replication effect,
    /// redaction) are declared on exactly these rows, with the values those name tables
    /// gave (FCALL_RO gains the `FCALL` role, which marks the script commands).
    #[test]
    fn rows_declare_what_was_keyed_by_name() {
        use crate::repl::effects::{Effect, Side};
        use crate::services::monitor::Redaction;
        let table = CommandTable::build();
        let spec = |name: &str| {
            table
                .entries()
                .iter()
                .map(|e| e.spec)
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("{name} is not in the table"))
        };
        let r = |names: &[&'static str], roles: Roles| -> Vec<(&'static str, Roles)> {
            names.iter().map(|n| (*n, roles)).collect()
        };
        let mut roles = vec![
            (
                "exec",
                Roles::EXEC | Roles::ENDS_MULTI | Roles::NEEDS_SHARDS,
            ),
            ("discard", Roles::ENDS_MULTI),
            ("watch", Roles::NEEDS_SHARDS),
            ("fcall", Roles::MAY_REPLICATE | Roles::FCALL),
            ("fcall_ro", Roles::FCALL),
            (
                "ping",
                Roles::WHILE_SUBSCRIBED | Roles::REFUSED_BY_MISCONF | Roles::KEEPALIVE,
            ),
            ("select", Roles::SELECTS_DB),
            ("replconf", Roles::REPLICATION_LINK),
            ("multi", Roles::STARTS_MULTI),
            (
                "ssubscribe",
                Roles::WHILE_SUBSCRIBED | Roles::SHARDED_PUBSUB,
            ),
            (
                "sunsubscribe",
                Roles::WHILE_SUBSCRIBED | Roles::SHARDED_PUBSUB,
            ),
            ("spublish", Roles::MAY_REPLICATE | Roles::SHARDED_PUBSUB),
        ];
        roles.extend(r(
            &["quit", "reset"],
            Roles::ENDS_MULTI | Roles::WHILE_SUBSCRIBED,
        ));
        roles.extend(r(
            &["subscribe", "unsubscribe", "psubscribe", "punsubscribe"],
            Roles::WHILE_SUBSCRIBED,
        ));
        roles.extend(r(
            &["info", "config|resetstat", "clock|advance", "clock|set"],
            Roles::LOCKS_ITSELF,
        ));
        roles.extend(r(&["pfcount", "publish"], Roles::MAY_REPLICATE));
        roles.extend(r(&["eval", "eval_ro"], Roles::EVAL));
        roles.extend(r(&["evalsha", "evalsha_ro"], Roles::EVALSHA));
        roles.push(("debug", Roles::PROTECTED | Roles::NEEDS_SHARDS));
        roles.push(("save", Roles::NEEDS_SHARDS));
        roles.extend(r(
            &[
                "client|setname",
                "client|getname",
                "client|id",
                "client|info",
                "client|list",
                "client|kill",
                "client|setinfo",
                "client|no-evict",
                "client|maint_notifications",
                "client|no-touch",
                "client|unblock",
                "client|pause",
                "client|unpause",
                "client|reply",
                "client|help",
                "client|tracking",
                "client|caching",
                "client|getredir",
                "client|trackinginfo",
            ],
            Roles::KEEPS_CACHING,
        ));
        for (name, want) in &roles {
            assert_eq!(spec(name).roles, *want, "{name}");
        }
        let mut effects: Vec<(&str, Effect)> = [
            "exec",
            "eval",
            "evalsha",
            "eval_ro",
            "evalsha_ro",
            "fcall",
            "fcall_ro",
        ]
        .iter()
        .map(|n| (*n, Effect::Inner))
        .collect();
        for n in ["expire", "pexpire", "expireat", "pexpireat"] {
            effects.push((n, Effect::ExpireIfSet));
        }
        for n in [
            "setex",
            "psetex",
            "restore",
            "restore-asking",
            "cl.throttle",
            "increx",
        ] {
            effects.push((n, Effect::KeyState));
        }
        effects.extend([
            ("set", Effect::Set),
            ("getex", Effect::GetEx),
            ("getdel", Effect::GetDel),
            ("incrbyfloat", Effect::IncrByFloat),
            ("hincrbyfloat", Effect::HIncrByFloat),
            ("spop", Effect::SPop),
            ("blpop", Effect::BPop(Side::First)),
            ("brpop", Effect::BPop(Side::Last)),
            ("bzpopmin", Effect::BZPop(Side::First)),
            ("bzpopmax", Effect::BZPop(Side::Last)),
            ("blmpop", Effect::BMPop { zset: false }),
            ("bzmpop", Effect::BMPop { zset: true }),
            ("blmove", Effect::BLMove),
            ("brpoplpush", Effect::BRPopLPush),
        ]);
        for n in [
            "hexpire",
            "hpexpire",
            "hexpireat",
            "hpexpireat",
            "hgetex",
            "hsetex",
            "hgetdel",
            "delex",
            "delifeq",
            "msetex",
            "geoadd",
            "georadius",
            "georadiusbymember",
            "geosearchstore",
            "xadd",
            "xtrim",
            "xreadgroup",
            "xclaim",
            "xautoclaim",
            "xdel",
            "xsetid",
            "xack",
            "xgroup|create",
            "xgroup|setid",
            "xgroup|destroy",
            "xgroup|createconsumer",
            "xgroup|delconsumer",
            "migrate",
        ] {
            effects.push((n, Effect::Handled));
        }
        for (name, want) in &effects {
            assert_eq!(spec(name).effect, *want, "{name}");
        }
        let redactions = [
            ("auth", Redaction::AllArguments),
            ("hello", Redaction::HelloAuth),
            ("config|set", Redaction::ConfigSecrets),
            ("acl|setuser", Redaction::AfterSubcommand),
        ];
        for (name, want) in &redactions {
            assert_eq!(spec(name).redaction, *want, "{name}");
        }
        // Nothing else declares any of them.
        let specs: Vec<&CommandSpec> = table.entries().iter().map(|e| e.spec).collect();
        let count = |f: &dyn Fn(&CommandSpec) -> bool| specs.iter().filter(|s| f(s)).count();
        assert_eq!(count(&|s| !s.roles.is_empty()), roles.len());
        assert_eq!(count(&|s| s.effect != Effect::Verbatim), effects.len());
        assert_eq!(count(&|s| s.redaction != Redaction::None), redactions.len());
        let scripts: Vec<&str> = specs
            .iter()
            .filter(|s| s.runs_script())
            .map(|s| s.name)
            .collect();
        assert_eq!(
            scripts,
            [
                "eval",
                "evalsha",
                "eval_ro",
                "evalsha_ro",
                "fcall",
                "fcall_ro"
            ]
        );
    }
}
