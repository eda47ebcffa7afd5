//! Connection and server commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, CLIENT, COMMAND,
//! INFO, CONFIG, TIME, DEBUG, FUNCTION, SHUTDOWN.
//!
//! These are what clients send when they connect (redis-py 8 opens with `HELLO 3` and
//! `CLIENT SETINFO`, redis-cli with `COMMAND DOCS`) and what operators and monitoring read
//! (INFO's sections and field names are parsed by tools, so they follow Redis's exactly).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use super::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, VariantCommand, run, run_as, run_sub,
    run_sub_as,
};
use crate::cmd::args::{glob_match, parse_f64, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

/// The connection and server commands.
pub static COMMANDS: &[C] = &[
    C::new("ping", -1, &["fast"], C::keys(0, 0, 0), run::<Ping>)
        .with_acl(&["@fast", "@connection"]),
    C::new(
        "echo",
        2,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        run::<Echo>,
    )
    .with_acl(&["@fast", "@connection"]),
    C::new(
        "quit",
        -1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        C::keys(0, 0, 0),
        run::<Quit>,
    )
    .immediate()
    .with_acl(&["@fast", "@connection"]),
    C::new(
        "reset",
        1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        C::keys(0, 0, 0),
        run::<Reset>,
    )
    .immediate()
    .self_locking()
    .with_acl(&["@fast", "@connection"]),
    C::new(
        "hello",
        -1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        C::keys(0, 0, 0),
        run::<Hello>,
    )
    .with_acl(&["@fast", "@connection"]),
    C::new(
        "auth",
        -2,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        C::keys(0, 0, 0),
        run::<Auth>,
    )
    .with_acl(&["@fast", "@connection"]),
    C::new("client", -2, &[], C::keys(0, 0, 0), run::<Help>).with_subcommands(CLIENT),
    C::new(
        "command",
        -1,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        |c, a| run_as::<CommandList>(c, a, CommandListing::Infos),
    )
    .with_subcommands(COMMAND)
    .with_acl(&["@slow", "@connection"]),
    C::new(
        "info",
        -1,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run::<Info>,
    )
    .whole_keyspace()
    .with_acl(&["@slow", "@dangerous"]),
    C::new("config", -2, &[], C::keys(0, 0, 0), run::<Help>).with_subcommands(CONFIG),
    C::new(
        "time",
        1,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        run::<Time>,
    )
    .with_acl(&["@fast"]),
    C::new(
        "debug",
        -2,
        &["admin", "noscript", "loading", "stale"],
        C::keys(0, 0, 0),
        run::<DebugCmd>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new("function", -2, &[], C::keys(0, 0, 0), run::<Help>)
        .with_subcommands(super::functions::FUNCTION),
    C::new(
        "monitor",
        1,
        &["admin", "noscript", "loading", "stale"],
        C::keys(0, 0, 0),
        run::<super::monitor::Monitor>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "shutdown",
        -1,
        &[
            "admin",
            "noscript",
            "loading",
            "stale",
            "no_multi",
            "allow_busy",
        ],
        C::keys(0, 0, 0),
        run::<Shutdown>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
];

static CLIENT: &[C] = &[
    C::new(
        "client|setname",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientSetName>,
    ),
    C::new(
        "client|getname",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientGetName>,
    ),
    C::new(
        "client|id",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientId>,
    ),
    C::new(
        "client|info",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientInfoCmd>,
    ),
    C::new(
        "client|list",
        -2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientList>,
    ),
    C::new(
        "client|kill",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientKill>,
    ),
    C::new(
        "client|setinfo",
        4,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientSetInfo>,
    ),
    C::new(
        "client|no-evict",
        3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<ClientFlag>(c, a, ClientOption::NoEvict),
    ),
    C::new(
        "client|no-touch",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<ClientFlag>(c, a, ClientOption::NoTouch),
    ),
    C::new(
        "client|unblock",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        super::blocking::client_unblock,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"]),
    C::new(
        "client|pause",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        super::pause::client_pause,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"]),
    C::new(
        "client|unpause",
        2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<super::pause::ClientUnpause>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"]),
    C::new(
        "client|reply",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientReply>,
    )
    .with_acl(&["@slow", "@connection"]),
    C::new(
        "client|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    ),
];

static COMMAND: &[C] = &[
    C::new(
        "command|count",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandCount>,
    ),
    C::new(
        "command|info",
        -2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandInfo>,
    ),
    C::new(
        "command|docs",
        -2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandDocs>,
    ),
    C::new(
        "command|list",
        -2,
        &["loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<CommandList>(c, a, CommandListing::Names),
    ),
    C::new(
        "command|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    ),
    C::new(
        "command|getkeys",
        -4,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandGetKeys>,
    )
    .with_acl(&["@slow", "@connection"]),
];

/// COMMAND GETKEYS command [arg …]: the keys the table finds in a request.
#[derive(Debug)]
pub struct CommandGetKeys {
    args: Vec<Bytes>,
}

impl Command for CommandGetKeys {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandGetKeys {
            args: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let spec = match super::lookup(&ctx.shared.table, &self.args) {
            super::Lookup::Found(spec) => spec,
            super::Lookup::Error(CmdError::WrongArity(_)) => {
                return Err(CmdError::msg(
                    "ERR Invalid number of arguments specified for command",
                ));
            }
            super::Lookup::Error(_) => return Err(CmdError::msg("ERR Invalid command specified")),
        };
        if let KeySpec::Keynum {
            begin,
            keynumidx,
            firstkey,
            step,
            ..
        } = spec.keys
        {
            // A key count the arguments cannot hold is an error, as Redis's getkeys says.
            let count = self
                .args
                .get((begin + keynumidx).max(0) as usize)
                .and_then(|b| parse_i64(b));
            let fits = count.is_some_and(|c| {
                c >= 0
                    && (c == 0
                        || i64::from(begin + firstkey) + (c - 1) * i64::from(step.max(1))
                            < self.args.len() as i64)
            });
            if !fits {
                if spec.has(super::CmdFlags::NO_MANDATORY_KEYS) {
                    return Ok(Reply::Array(Vec::new()));
                }
                return Err(CmdError::msg("ERR Invalid arguments specified for command"));
            }
        } else if matches!(spec.keys, KeySpec::None) {
            return Err(CmdError::msg("ERR The command has no key arguments"));
        }
        Ok(Reply::Array(
            spec.keys
                .positions(&self.args)
                .map(|i| Reply::Bulk(self.args[i].clone()))
                .collect(),
        ))
    }
}

static CONFIG: &[C] = &[
    C::new(
        "config|get",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigGet>,
    ),
    C::new(
        "config|set",
        -4,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigSet>,
    ),
    C::new(
        "config|resetstat",
        2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigResetStat>,
    )
    .whole_keyspace(),
    C::new(
        "config|rewrite",
        2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigRewrite>,
    ),
    C::new(
        "config|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    ),
];

/// `<CMD> HELP` and bare containers: a short help text.
#[derive(Debug)]
pub struct Help;

impl Command for Help {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Help)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(vec![Reply::Status(
            "See https://redis.io/commands for this command's subcommands.".into(),
        )]))
    }
}

/// `PING [message]`
#[derive(Debug)]
pub struct Ping {
    message: Option<Bytes>,
}

impl Command for Ping {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        if a.remaining() > 1 {
            return Err(CmdError::WrongArity("ping".into()));
        }
        Ok(Ping {
            message: a.rest().first().cloned(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if ctx.client.resp == 2 && ctx.client.subscribed() {
            // Redis answers a subscribed RESP2 client in the shape of a message.
            return Ok(Reply::Array(vec![
                Reply::Bulk(Bytes::from_static(b"pong")),
                Reply::Bulk(self.message.unwrap_or_default()),
            ]));
        }
        Ok(self.message.map_or(Reply::status("PONG"), Reply::Bulk))
    }
}

/// ECHO message
#[derive(Debug)]
pub struct Echo {
    message: Bytes,
}

impl Command for Echo {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Echo {
            message: a.next()?.clone(),
        })
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Bulk(self.message))
    }
}

/// QUIT
#[derive(Debug)]
pub struct Quit;

impl Command for Quit {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        // Redis ignores QUIT's arguments.
        a.rest();
        Ok(Quit)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.client.close_after_reply = true;
        Ok(Reply::ok())
    }
}

/// RESET: back to a fresh connection's state.
#[derive(Debug)]
pub struct Reset;

impl Command for Reset {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Reset)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.client.end_multi();
        super::txn::unwatch_all(ctx);
        ctx.shared.pubsub.drop_client(ctx.client);
        ctx.client.set_db(0);
        ctx.client.set_resp(2);
        ctx.client.authenticated = ctx.shared.config().requirepass.is_none();
        if let Ok(mut name) = ctx.client.info.name.lock() {
            *name = None;
        }
        ctx.client.info.no_evict.store(false, Ordering::Relaxed);
        ctx.client.info.no_touch.store(false, Ordering::Relaxed);
        Ok(Reply::status("RESET"))
    }
}

/// Checks AUTH / HELLO AUTH credentials against the default user, as Redis 7 does: with no
/// password configured the default user takes any password (but `AUTH <password>` alone is an
/// error), otherwise the password must match; other users do not exist. As Redis's ACL does,
/// the SHA-256 digests of both passwords are compared, in constant time: the time taken
/// depends neither on where they differ nor on either password's length.
fn check_password(ctx: &Ctx<'_>, user: Option<&[u8]>, pass: &[u8]) -> CmdResult<()> {
    use subtle::ConstantTimeEq;
    let wrongpass = CmdError::msg("WRONGPASS invalid username-password pair or user is disabled.");
    if user.is_some_and(|u| u != b"default") {
        return Err(wrongpass);
    }
    match ctx.shared.config().requirepass {
        None if user.is_none() => Err(CmdError::msg(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        )),
        None => Ok(()),
        Some(expected) => {
            let digest = |b: &[u8]| ring::digest::digest(&ring::digest::SHA256, b);
            let (want, got) = (digest(expected.as_bytes()), digest(pass));
            let same: bool = want.as_ref().ct_eq(got.as_ref()).into();
            if same { Ok(()) } else { Err(wrongpass) }
        }
    }
}

/// `AUTH [username] password`
#[derive(Debug)]
pub struct Auth {
    user: Option<Bytes>,
    pass: Bytes,
}

impl Command for Auth {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        match a.remaining() {
            1 => Ok(Auth {
                user: None,
                pass: a.next()?.clone(),
            }),
            2 => Ok(Auth {
                user: Some(a.next()?.clone()),
                pass: a.next()?.clone(),
            }),
            _ => Err(CmdError::Syntax),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        check_password(ctx, self.user.as_deref(), &self.pass)?;
        ctx.client.authenticated = true;
        Ok(Reply::ok())
    }
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]
#[derive(Debug)]
pub struct Hello {
    proto: Option<i64>,
    auth: Option<(Bytes, Bytes)>,
    name: Option<Bytes>,
}

impl Command for Hello {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut h = Hello {
            proto: None,
            auth: None,
            name: None,
        };
        if a.remaining() == 0 {
            return Ok(h);
        }
        let v = parse_i64(a.next()?).ok_or(CmdError::msg(
            "ERR Protocol version is not an integer or out of range",
        ))?;
        if !(2..=3).contains(&v) {
            // Redis checks the version before looking at the options.
            return Err(CmdError::msg("NOPROTO unsupported protocol version"));
        }
        h.proto = Some(v);
        while let Some(opt) = a.peek() {
            let left = a.remaining() - 1;
            if opt.eq_ignore_ascii_case(b"AUTH") && left >= 2 {
                a.next()?;
                h.auth = Some((a.next()?.clone(), a.next()?.clone()));
            } else if opt.eq_ignore_ascii_case(b"SETNAME") && left >= 1 {
                a.next()?;
                h.name = Some(a.next()?.clone());
            } else {
                return Err(CmdError::owned(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    super::printable(opt, 128)
                )));
            }
        }
        Ok(h)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Some(v) = self.proto
            && (!(2..=3).contains(&v) || (v == 3 && !ctx.shared.config().resp3))
        {
            return Err(CmdError::msg("NOPROTO unsupported protocol version"));
        }
        if let Some((user, pass)) = &self.auth {
            check_password(ctx, Some(user), pass)?;
            ctx.client.authenticated = true;
        } else if !ctx.client.authenticated {
            return Err(CmdError::msg(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            ));
        }
        if let Some(name) = &self.name {
            validate_client_name(name)?;
            set_name(ctx, name);
        }
        if let Some(v) = self.proto {
            ctx.client.set_resp(v as u8);
        }
        let version = ctx.shared.config().redis_version;
        Ok(Reply::Map(vec![
            (Reply::bulk(b"server"), Reply::bulk(b"redis")),
            (Reply::bulk(b"version"), Reply::Bulk(Bytes::from(version))),
            (Reply::bulk(b"proto"), Reply::Int(ctx.client.resp as i64)),
            (Reply::bulk(b"id"), Reply::Int(ctx.client.id() as i64)),
            (Reply::bulk(b"mode"), Reply::bulk(mode(ctx))),
            (Reply::bulk(b"role"), Reply::bulk(b"master")),
            (Reply::bulk(b"modules"), Reply::Array(vec![])),
        ]))
    }
}

/// Redis's server mode name, as HELLO and INFO report it.
fn mode(ctx: &Ctx<'_>) -> &'static [u8] {
    if ctx.shared.cluster.is_some() {
        b"cluster"
    } else {
        b"standalone"
    }
}

fn validate_client_name(name: &[u8]) -> CmdResult<()> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn set_name(ctx: &mut Ctx<'_>, name: &[u8]) {
    if let Ok(mut n) = ctx.client.info.name.lock() {
        *n = if name.is_empty() {
            None
        } else {
            Some(Bytes::copy_from_slice(name))
        };
    }
}

/// CLIENT SETNAME name
#[derive(Debug)]
pub struct ClientSetName {
    name: Bytes,
}

impl Command for ClientSetName {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientSetName {
            name: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        validate_client_name(&self.name)?;
        set_name(ctx, &self.name);
        Ok(Reply::ok())
    }
}

/// CLIENT GETNAME
#[derive(Debug)]
pub struct ClientGetName;

impl Command for ClientGetName {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientGetName)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(ctx.client.info.name().into())
    }
}

/// CLIENT ID
#[derive(Debug)]
pub struct ClientId;

impl Command for ClientId {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientId)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(ctx.client.id() as i64))
    }
}

/// CLIENT REPLY ON|OFF|SKIP: the connection loop drops the replies (see
/// `ClientState::reply_suppressed`).
#[derive(Debug)]
pub struct ClientReply(u8);

impl Command for ClientReply {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mode = a.next()?;
        for (i, m) in ["on", "off", "skip"].iter().enumerate() {
            if mode.eq_ignore_ascii_case(m.as_bytes()) {
                return Ok(ClientReply(i as u8));
            }
        }
        Err(CmdError::Syntax)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let c = &mut *ctx.client;
        match self.0 {
            0 => {
                c.reply_off = false;
                c.reply_skip = false;
            }
            1 => c.reply_off = true,
            _ => {
                if !c.reply_off {
                    c.reply_skip_next = true;
                }
            }
        }
        // OFF and SKIP have no reply of their own: the loop drops this one.
        Ok(Reply::ok())
    }
}

/// CLIENT INFO
#[derive(Debug)]
pub struct ClientInfoCmd;

impl Command for ClientInfoCmd {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientInfoCmd)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut line = ctx.client.info.render();
        line.push('\n');
        Ok(Reply::Verbatim(Bytes::from(line)))
    }
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub | ID id …] (one filter, as in Redis 7.0)
#[derive(Debug)]
pub struct ClientList {
    /// Listed in this order, repeats included, unknown ids skipped (as Redis does).
    ids: Option<Vec<i64>>,
    normal_only: Option<bool>,
}

impl Command for ClientList {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut l = ClientList {
            ids: None,
            normal_only: None,
        };
        if a.remaining() == 2 && a.eat("TYPE") {
            let t = a.next()?;
            l.normal_only = Some(match &t.to_ascii_lowercase()[..] {
                b"normal" => true,
                b"master" | b"replica" | b"slave" | b"pubsub" => false,
                _ => {
                    return Err(CmdError::owned(format!(
                        "ERR Unknown client type '{}'",
                        super::printable(t, usize::MAX)
                    )));
                }
            });
        } else if a.remaining() >= 2 && a.eat("ID") {
            let ids = a
                .rest()
                .iter()
                .map(|id| parse_i64(id).ok_or(CmdError::msg("ERR Invalid client ID")));
            l.ids = Some(ids.collect::<CmdResult<_>>()?);
        } else if a.remaining() > 0 {
            return Err(CmdError::Syntax);
        }
        Ok(l)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut out = String::new();
        let clients = ctx.shared.clients.snapshot();
        let listed: Vec<_> = match &self.ids {
            Some(ids) => ids
                .iter()
                .filter_map(|&id| clients.iter().find(|c| c.id as i64 == id))
                .collect(),
            None if self.normal_only == Some(false) => Vec::new(),
            None => clients.iter().collect(),
        };
        for c in listed {
            out.push_str(&c.render());
            out.push('\n');
        }
        Ok(Reply::Verbatim(Bytes::from(out)))
    }
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [ADDR a] [LADDR a] [SKIPME yes|no] [TYPE t] [USER u]
#[derive(Debug)]
pub struct ClientKill {
    legacy: Option<Bytes>,
    id: Option<u64>,
    addr: Option<Bytes>,
    laddr: Option<Bytes>,
    skipme: bool,
    /// TYPE filter: `Some(true)` for normal, `Some(false)` for a type no sluice client has.
    normal: Option<bool>,
}

impl Command for ClientKill {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut k = ClientKill {
            legacy: None,
            id: None,
            addr: None,
            laddr: None,
            skipme: true,
            normal: None,
        };
        if a.remaining() == 1 {
            k.legacy = Some(a.next()?.clone());
            return Ok(k);
        }
        while a.remaining() > 0 {
            let opt = a.next()?.to_ascii_lowercase();
            let val = a.next()?;
            match &opt[..] {
                b"id" => match parse_i64(val) {
                    Some(n) if n > 0 => k.id = Some(n as u64),
                    _ => return Err(CmdError::msg("ERR client-id should be greater than 0")),
                },
                b"addr" => k.addr = Some(val.clone()),
                b"laddr" => k.laddr = Some(val.clone()),
                b"skipme" => {
                    k.skipme = match &val.to_ascii_lowercase()[..] {
                        b"yes" => true,
                        b"no" => false,
                        _ => return Err(CmdError::Syntax),
                    }
                }
                b"type" => {
                    k.normal = Some(match &val.to_ascii_lowercase()[..] {
                        b"normal" => true,
                        b"master" | b"replica" | b"slave" | b"pubsub" => false,
                        _ => {
                            return Err(CmdError::owned(format!(
                                "ERR Unknown client type '{}'",
                                super::printable(val, usize::MAX)
                            )));
                        }
                    })
                }
                // Only the default user exists, and every client is logged in as it.
                b"user" if &val[..] == b"default" => {}
                b"user" => {
                    return Err(CmdError::owned(format!(
                        "ERR No such user '{}'",
                        super::printable(val, usize::MAX)
                    )));
                }
                _ => return Err(CmdError::Syntax),
            }
        }
        Ok(k)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let me = ctx.client.id();
        let mut killed = 0;
        for c in ctx.shared.clients.snapshot() {
            let matches = if let Some(addr) = &self.legacy {
                c.addr.as_bytes() == &addr[..]
            } else {
                self.id.is_none_or(|id| id == c.id)
                    && self
                        .addr
                        .as_ref()
                        .is_none_or(|a| c.addr.as_bytes() == &a[..])
                    && self
                        .laddr
                        .as_ref()
                        .is_none_or(|a| c.laddr.as_bytes() == &a[..])
                    && self.normal != Some(false)
                    && !(self.skipme && c.id == me)
            };
            if matches {
                killed += 1;
                if c.id == me {
                    ctx.client.close_after_reply = true;
                } else {
                    c.kill.cancel();
                }
            }
        }
        if self.legacy.is_some() {
            return if killed == 0 {
                Err(CmdError::msg("ERR No such client"))
            } else {
                Ok(Reply::ok())
            };
        }
        Ok(Reply::Int(killed))
    }
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value
#[derive(Debug)]
pub struct ClientSetInfo {
    attr: Bytes,
    value: Bytes,
}

impl Command for ClientSetInfo {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientSetInfo {
            attr: a.next()?.clone(),
            value: a.next()?.clone(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let attr = self.attr.to_ascii_lowercase();
        let which = match &attr[..] {
            b"lib-name" => 0,
            b"lib-ver" => 1,
            _ => {
                return Err(CmdError::owned(format!(
                    "ERR Unrecognized option '{}'",
                    super::printable(&self.attr, 128)
                )));
            }
        };
        if self.value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err(CmdError::owned(format!(
                "ERR {} cannot contain spaces, newlines or special characters.",
                String::from_utf8_lossy(&attr)
            )));
        }
        if let Ok(mut lib) = ctx.client.info.lib.lock() {
            let v = (!self.value.is_empty()).then(|| self.value.clone());
            if which == 0 { lib.0 = v } else { lib.1 = v }
        }
        Ok(Reply::ok())
    }
}

/// A client's on/off option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientOption {
    /// CLIENT NO-EVICT.
    NoEvict,
    /// CLIENT NO-TOUCH.
    NoTouch,
}

/// CLIENT NO-EVICT / NO-TOUCH on|off
#[derive(Debug)]
pub struct ClientFlag {
    option: ClientOption,
    on: bool,
}

impl VariantCommand for ClientFlag {
    type Variant = ClientOption;

    fn parse(a: &mut ArgCursor<'_>, option: ClientOption) -> CmdResult<Self> {
        let v = a.next()?.to_ascii_lowercase();
        let on = match &v[..] {
            b"on" => true,
            b"off" => false,
            _ => return Err(CmdError::Syntax),
        };
        Ok(ClientFlag { option, on })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let flag = match self.option {
            ClientOption::NoEvict => &ctx.client.info.no_evict,
            ClientOption::NoTouch => &ctx.client.info.no_touch,
        };
        flag.store(self.on, Ordering::Relaxed);
        Ok(Reply::ok())
    }
}

fn status_set(items: &[&'static str]) -> Reply {
    Reply::Set(items.iter().map(|f| Reply::status(f)).collect())
}

/// The fields of one COMMAND INFO key spec: its flags, an `index` begin_search at `begin`,
/// and a find_keys of `find_type` with the given spec fields.
fn key_spec_fields(
    flags: &[&'static str],
    begin: i64,
    find_type: &'static str,
    find_spec: &[(&'static str, i64)],
) -> Vec<(Reply, Reply)> {
    let field = |name: &'static str, value: Reply| (Reply::bulk(name.as_bytes()), value);
    vec![
        field("flags", status_set(flags)),
        field(
            "begin_search",
            Reply::Map(vec![
                field("type", Reply::bulk(b"index")),
                field("spec", Reply::Map(vec![field("index", Reply::Int(begin))])),
            ]),
        ),
        field(
            "find_keys",
            Reply::Map(vec![
                field("type", Reply::bulk(find_type.as_bytes())),
                field(
                    "spec",
                    Reply::Map(
                        find_spec
                            .iter()
                            .map(|&(k, v)| field(k, Reply::Int(v)))
                            .collect(),
                    ),
                ),
            ]),
        ),
    ]
}

/// One key spec given explicitly in the table.
fn key_spec_doc(d: &crate::cmd::KeySpecDoc) -> Reply {
    use crate::cmd::FindKeys;
    let field = |name: &'static str, value: Reply| (Reply::bulk(name.as_bytes()), value);
    let ints = |pairs: &[(&'static str, i64)]| {
        Reply::Map(
            pairs
                .iter()
                .map(|&(k, v)| field(k, Reply::Int(v)))
                .collect(),
        )
    };
    let mut fields = Vec::with_capacity(4);
    if let Some(notes) = d.notes {
        fields.push(field("notes", Reply::bulk(notes.as_bytes())));
    }
    fields.push(field("flags", status_set(d.flags)));
    let begin = match d.begin {
        Some(i) => Reply::Map(vec![
            field("type", Reply::bulk(b"index")),
            field("spec", ints(&[("index", i)])),
        ]),
        None => Reply::Map(vec![
            field("type", Reply::bulk(b"unknown")),
            field("spec", Reply::Map(vec![])),
        ]),
    };
    fields.push(field("begin_search", begin));
    let (kind, spec) = match d.find {
        FindKeys::Range(last, step, limit) => (
            "range",
            ints(&[("lastkey", last), ("keystep", step), ("limit", limit)]),
        ),
        FindKeys::Keynum(idx, first, step) => (
            "keynum",
            ints(&[("keynumidx", idx), ("firstkey", first), ("keystep", step)]),
        ),
        FindKeys::Unknown => ("unknown", Reply::Map(vec![])),
    };
    fields.push(field(
        "find_keys",
        Reply::Map(vec![
            field("type", Reply::bulk(kind.as_bytes())),
            field("spec", spec),
        ]),
    ));
    Reply::Map(fields)
}

/// The COMMAND INFO entry of one command, as Redis 7 shapes it.
pub fn command_info(spec: &C) -> Reply {
    let (first, last, step) = spec.keys.triple();
    let key_specs = if !spec.key_specs.is_empty() {
        spec.key_specs.iter().map(key_spec_doc).collect()
    } else if let KeySpec::Keynum {
        begin,
        keynumidx,
        firstkey,
        step,
        flags,
        notes,
    } = spec.keys
    {
        let mut fields = Vec::with_capacity(4);
        if let Some(notes) = notes {
            fields.push((Reply::bulk(b"notes"), Reply::bulk(notes.as_bytes())));
        }
        fields.extend(key_spec_fields(
            flags,
            begin as i64,
            "keynum",
            &[
                ("keynumidx", keynumidx as i64),
                ("firstkey", firstkey as i64),
                ("keystep", step as i64),
            ],
        ));
        vec![Reply::Map(fields)]
    } else if first > 0 {
        let flags: &[&'static str] = if spec.has(super::table::CmdFlags::WRITE) {
            &["RW", "update"]
        } else {
            &["RO", "access"]
        };
        let lastkey = if last < 0 { last } else { last - first };
        vec![Reply::Map(key_spec_fields(
            flags,
            first as i64,
            "range",
            &[
                ("lastkey", lastkey as i64),
                ("keystep", step as i64),
                ("limit", 0),
            ],
        ))]
    } else {
        vec![]
    };
    Reply::Array(vec![
        Reply::bulk(spec.name.as_bytes()),
        Reply::Int(spec.reported_arity.unwrap_or(spec.arity) as i64),
        status_set(&spec.flags.names()),
        Reply::Int(first as i64),
        Reply::Int(last as i64),
        Reply::Int(step as i64),
        status_set(spec.acl),
        Reply::Set(
            spec.tips
                .iter()
                .map(|t| Reply::bulk(t.as_bytes()))
                .collect(),
        ),
        // Sets, as Redis 7.0 sends them (they differ from arrays in RESP3 only).
        Reply::Set(key_specs),
        Reply::Set(spec.subcommands.iter().map(command_info).collect()),
    ])
}

/// What a whole-table COMMAND listing gives per command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandListing {
    /// COMMAND: every command's full info.
    Infos,
    /// COMMAND LIST: the names.
    Names,
}

/// COMMAND (all infos) / COMMAND LIST (names)
#[derive(Debug)]
pub struct CommandList(CommandListing);

impl VariantCommand for CommandList {
    type Variant = CommandListing;

    fn parse(_: &mut ArgCursor<'_>, listing: CommandListing) -> CmdResult<Self> {
        Ok(CommandList(listing))
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let all = ctx.shared.table.commands();
        Ok(Reply::Array(match self.0 {
            CommandListing::Names => all.iter().map(|c| Reply::bulk(c.name.as_bytes())).collect(),
            CommandListing::Infos => all.iter().map(|c| command_info(c)).collect(),
        }))
    }
}

/// COMMAND COUNT
#[derive(Debug)]
pub struct CommandCount;

impl Command for CommandCount {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandCount)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(ctx.shared.table.commands().len() as i64))
    }
}

fn find_spec(ctx: &Ctx<'_>, name: &[u8]) -> Option<&'static C> {
    let lower = name.to_ascii_lowercase();
    match lower.iter().position(|&c| c == b'|') {
        None => ctx.shared.table.get(&lower),
        Some(p) => ctx
            .shared
            .table
            .get(&lower[..p])?
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes() == &lower[..]),
    }
}

/// COMMAND INFO [name …]
#[derive(Debug)]
pub struct CommandInfo {
    names: Vec<Bytes>,
}

impl Command for CommandInfo {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandInfo {
            names: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.names.is_empty() {
            return VariantCommand::apply(CommandList(CommandListing::Infos), ctx);
        }
        Ok(Reply::Array(
            self.names
                .iter()
                .map(|n| find_spec(ctx, n).map_or(Reply::Null, command_info))
                .collect(),
        ))
    }
}

/// COMMAND DOCS [name …]: each command's documentation (`cmd::docs`); a name sluice does not
/// know is left out of the map, as in Redis.
#[derive(Debug)]
pub struct CommandDocs {
    names: Vec<Bytes>,
}

impl Command for CommandDocs {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandDocs {
            names: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let specs: Vec<&C> = if self.names.is_empty() {
            ctx.shared.table.commands()
        } else {
            self.names
                .iter()
                .filter_map(|n| find_spec(ctx, n))
                .collect()
        };
        Ok(Reply::Map(
            specs
                .into_iter()
                .map(|s| {
                    let subs: Vec<&str> = s.subcommands.iter().map(|c| c.name).collect();
                    (
                        Reply::bulk(s.name.as_bytes()),
                        super::docs::docs_reply(s.name, &subs),
                    )
                })
                .collect(),
        ))
    }
}

/// TIME
#[derive(Debug)]
pub struct Time;

impl Command for Time {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Time)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let us = ctx.now_ns / 1000;
        Ok(Reply::Array(vec![
            Reply::bulk_int((us / 1_000_000) as i64),
            Reply::bulk_int((us % 1_000_000) as i64),
        ]))
    }
}

/// DEBUG HELP | DEBUG SLEEP seconds (fractions allowed; delays this client only).
///
/// As in Redis, DEBUG is one command that reads its own subcommand (it has no subcommand
/// table), so anything else gets Redis's "unknown subcommand or wrong number of arguments".
#[derive(Debug)]
pub enum DebugCmd {
    /// DEBUG HELP
    Help,
    /// DEBUG SLEEP seconds
    Sleep(f64),
}

impl Command for DebugCmd {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let sub = a.next()?;
        match (sub.to_ascii_lowercase().as_slice(), a.remaining()) {
            (b"help", 0) => Ok(DebugCmd::Help),
            (b"sleep", 1) => Ok(DebugCmd::Sleep(parse_f64(a.next()?).unwrap_or(0.0))),
            _ => Err(CmdError::owned(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                super::printable(sub, 128)
            ))),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        match self {
            DebugCmd::Help => Help.apply(ctx),
            DebugCmd::Sleep(secs) => {
                if secs > 0.0 {
                    ctx.client.sleep = Some(Duration::from_secs_f64(secs.min(3600.0)));
                }
                Ok(Reply::ok())
            }
        }
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`
#[derive(Debug)]
pub struct Shutdown {
    save: bool,
    nosave: bool,
    force: bool,
    abort: bool,
}

impl Command for Shutdown {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut s = Shutdown {
            save: false,
            nosave: false,
            force: false,
            abort: false,
        };
        let mut other = false;
        for opt in a.rest() {
            if opt.eq_ignore_ascii_case(b"nosave") {
                s.nosave = true;
            } else if opt.eq_ignore_ascii_case(b"save") {
                s.save = true;
            } else if opt.eq_ignore_ascii_case(b"now") {
                other = true;
            } else if opt.eq_ignore_ascii_case(b"force") {
                s.force = true;
            } else if opt.eq_ignore_ascii_case(b"abort") {
                s.abort = true;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        // Redis's illegal combinations.
        if (s.abort && (s.save || s.nosave || s.force || other)) || (s.save && s.nosave) {
            return Err(CmdError::Syntax);
        }
        Ok(s)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.abort {
            // sluice never waits for replicas, so no shutdown is ever in progress.
            return Err(CmdError::msg("ERR No shutdown in progress."));
        }
        // A script past its threshold holds every shard: only NOSAVE may stop the server.
        if !self.nosave && ctx.shared.scripts.busy.is_running() {
            let busy = &ctx.shared.scripts.busy;
            if busy.running_for().is_some_and(|d| {
                d.as_millis() >= u128::from(ctx.shared.config().busy_reply_threshold)
            }) {
                return Err(CmdError::msg(if busy.running_function().is_some() {
                    super::scripting::BUSY_FUNCTION
                } else {
                    super::scripting::BUSY
                }));
            }
        }
        if super::persist::shutdown_save(ctx.shared, self.save, self.nosave, self.force).is_err() {
            return Err(CmdError::msg("ERR Errors trying to SHUTDOWN. Check logs."));
        }
        tracing::warn!("SHUTDOWN requested by client {}", ctx.client.id());
        ctx.shared.shutdown.cancel();
        // Redis closes the connection without replying when it shuts down.
        ctx.client.close_after_reply = true;
        ctx.client.no_reply = true;
        Ok(Reply::ok())
    }
}

/// CONFIG GET pattern [pattern …]
#[derive(Debug)]
pub struct ConfigGet {
    patterns: Vec<Bytes>,
}

impl Command for ConfigGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ConfigGet {
            patterns: a.rest().to_vec(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let cfg = ctx.shared.config();
        let overrides = ctx
            .shared
            .params
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        // As Redis 7.0: a name without glob characters is answered under the spelling the
        // client used; a pattern under the parameters' own names; each parameter once.
        let mut found: Vec<(Bytes, &'static str, &'static str)> = Vec::new();
        for p in &self.patterns {
            let literal = !p.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
            for (name, default) in crate::config::REDIS_PARAMS {
                let hit = if literal {
                    p.eq_ignore_ascii_case(name.as_bytes())
                } else {
                    glob_match(&p.to_ascii_lowercase(), name.as_bytes(), true)
                };
                if hit && !found.iter().any(|(_, n, _)| n == name) {
                    let shown = if literal {
                        p.clone()
                    } else {
                        Bytes::from_static(name.as_bytes())
                    };
                    found.push((shown, name, default));
                }
            }
        }
        let out = found
            .into_iter()
            .map(|(shown, name, default)| {
                let value = cfg
                    .param(name)
                    .or_else(|| overrides.get(name).cloned())
                    .unwrap_or_else(|| default.to_string());
                (Reply::Bulk(shown), Reply::Bulk(Bytes::from(value)))
            })
            .collect();
        Ok(Reply::Map(out))
    }
}

/// CONFIG SET name value [name value …]
///
/// As Redis 7.0: every name is looked up first (the first unknown, immutable or repeated
/// name fails the whole call), then every value is checked and applied to a copy, which
/// replaces the configuration only if all of them pass.
#[derive(Debug)]
pub struct ConfigSet {
    pairs: Vec<(Bytes, Bytes)>,
}

impl Command for ConfigSet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let rest = a.rest();
        if !rest.len().is_multiple_of(2) {
            return Err(CmdError::Syntax);
        }
        Ok(ConfigSet {
            pairs: rest
                .chunks_exact(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let failed = |name: &[u8], why: &str| {
            CmdError::owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                super::printable(name, 128)
            ))
        };
        let mut names: Vec<String> = Vec::with_capacity(self.pairs.len());
        for (typed, _) in &self.pairs {
            let name = String::from_utf8_lossy(typed).to_ascii_lowercase();
            if !crate::config::REDIS_PARAMS.iter().any(|(n, _)| *n == name) {
                return Err(CmdError::owned(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                    super::printable(typed, 128)
                )));
            }
            if crate::config::is_immutable(&name) {
                return Err(failed(typed, "can't set immutable config"));
            }
            if names.contains(&name) {
                return Err(failed(typed, "duplicate parameter"));
            }
            names.push(name);
        }
        let Ok(mut cfg) = ctx.shared.config.write() else {
            return Err(CmdError::msg("ERR configuration is unavailable"));
        };
        let mut next = cfg.clone();
        let mut recorded = Vec::new();
        for (name, (_, value)) in names.iter().zip(&self.pairs) {
            let value = String::from_utf8_lossy(value);
            let checked = crate::config::check_set_value(name, &value)
                .and_then(|v| next.set_param(name, &v).map(|acted| (v, acted)));
            match checked {
                Ok((_, true)) => {}
                Ok((v, false)) => recorded.push((name.clone(), v)),
                Err(why) => return Err(failed(name.as_bytes(), &why)),
            }
        }
        ctx.shared.live.store(&next);
        *cfg = next;
        if let Ok(mut params) = ctx.shared.params.lock() {
            params.extend(recorded);
        }
        Ok(Reply::ok())
    }
}

/// CONFIG RESETSTAT
#[derive(Debug)]
pub struct ConfigResetStat;

impl Command for ConfigResetStat {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ConfigResetStat)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared.table.reset_stats();
        let s = &ctx.shared.stats;
        for c in [
            &s.total_commands,
            &s.total_connections,
            &s.rejected_connections,
            &s.net_input_bytes,
            &s.net_output_bytes,
            &s.total_error_replies,
            &s.evicted_keys,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        ctx.store.reset_stats();
        Ok(Reply::ok())
    }
}

/// CONFIG REWRITE
#[derive(Debug)]
pub struct ConfigRewrite;

impl Command for ConfigRewrite {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ConfigRewrite)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Err(CmdError::msg(
            "ERR The server is running without a config file",
        ))
    }
}

/// INFO [section …]
#[derive(Debug)]
pub struct Info {
    sections: Vec<String>,
}

impl Command for Info {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Info {
            sections: a
                .rest()
                .iter()
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
                .collect(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Verbatim(Bytes::from(info_text(ctx, &self.sections))))
    }
}

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

fn human_bytes(n: usize) -> String {
    let n = n as f64;
    if n < 1024.0 {
        format!("{n}B")
    } else if n < 1024.0 * 1024.0 {
        format!("{:.2}K", n / 1024.0)
    } else if n < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}M", n / (1024.0 * 1024.0))
    } else {
        format!("{:.2}G", n / (1024.0 * 1024.0 * 1024.0))
    }
}

/// Builds INFO's text for the requested sections (Redis's names and formats).
///
/// INFO holds every shard (it is a whole-keyspace command) and reads the keyspace counters
/// through those locks, so it also works inside EXEC, which already holds them.
pub fn info_text(ctx: &mut Ctx<'_>, requested: &[String]) -> String {
    let structure_memory = ctx.store.fold(0usize, |acc, s| acc + s.structure_memory());
    let keyspace_stats = ctx.store.stats();
    let db_summary = ctx.store.db_summary(ctx.now_ms);
    let ctx = &*ctx;
    let all = requested.iter().any(|s| s == "all" || s == "everything");
    let wanted = |name: &str| -> bool {
        if requested.is_empty() || requested.iter().any(|s| s == "default") {
            return DEFAULT_SECTIONS.contains(&name);
        }
        // "all" is every default section plus commandstats and latencystats; `sluice` is
        // printed only when asked for by name, so no Redis-aware tool ever sees it.
        (all && (DEFAULT_SECTIONS.contains(&name)
            || name == "commandstats"
            || name == "latencystats"))
            || requested.iter().any(|s| s == name)
    };
    let shared = ctx.shared;
    let cfg = shared.config();
    let uptime = shared.started.elapsed().as_secs();
    let mut out = String::new();
    let mut section = |title: &str, body: String| {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n{body}");
    };
    // Each section is a list of (field, value), in Redis 7.0.15's order and with only its
    // field names: tools tell servers apart by INFO, so sluice's own identity is kept out of
    // every section Redis has (it is in `INFO sluice`, below).
    let fields = |section: &mut dyn FnMut(&str, String), title: &str, list: &[(&str, String)]| {
        let mut b = String::new();
        for (k, v) in list {
            let _ = write!(b, "{k}:{v}\r\n");
        }
        section(title, b);
    };
    if wanted("server") {
        let executable = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        fields(
            &mut section,
            "Server",
            &[
                ("redis_version", cfg.redis_version.clone()),
                ("redis_git_sha1", "00000000".into()),
                ("redis_git_dirty", "0".into()),
                ("redis_build_id", "0".into()),
                (
                    "redis_mode",
                    String::from_utf8_lossy(mode(ctx)).into_owned(),
                ),
                (
                    "os",
                    format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                ),
                ("arch_bits", usize::BITS.to_string()),
                ("monotonic_clock", "POSIX clock_gettime".into()),
                ("multiplexing_api", "epoll".into()),
                ("atomicvar_api", "c11-builtin".into()),
                ("gcc_version", "0.0.0".into()),
                ("process_id", std::process::id().to_string()),
                ("process_supervised", "no".into()),
                ("run_id", shared.run_id.clone()),
                ("tcp_port", shared.port.load(Ordering::Relaxed).to_string()),
                ("server_time_usec", (ctx.now_ns / 1000).to_string()),
                ("uptime_in_seconds", uptime.to_string()),
                ("uptime_in_days", (uptime / 86400).to_string()),
                ("hz", "10".into()),
                ("configured_hz", "10".into()),
                (
                    "lru_clock",
                    ((ctx.now_ms / 1000) & ((1 << 24) - 1)).to_string(),
                ),
                ("executable", executable),
                ("config_file", String::new()),
                ("io_threads_active", "0".into()),
            ],
        );
    }
    if wanted("clients") {
        fields(
            &mut section,
            "Clients",
            &[
                ("connected_clients", shared.clients.len().to_string()),
                ("cluster_connections", "0".into()),
                ("maxclients", cfg.maxclients.to_string()),
                ("client_recent_max_input_buffer", "0".into()),
                ("client_recent_max_output_buffer", "0".into()),
                (
                    "blocked_clients",
                    (shared.pause.waiting() + shared.blocked.len()).to_string(),
                ),
                ("tracking_clients", "0".into()),
                ("clients_in_timeout_table", "0".into()),
            ],
        );
    }
    if wanted("memory") {
        let used = crate::alloc_stats::allocated();
        let rss = crate::alloc_stats::rss();
        let peak = crate::alloc_stats::peak();
        // O(shards), not O(keys): monitoring polls INFO, and walking every key would hold
        // each shard's lock for milliseconds on a large keyspace (as Redis, dataset is what
        // remains of used_memory once the structures are counted out).
        let overhead = structure_memory;
        let dataset = used.saturating_sub(overhead);
        let ratio = |a: usize, b: usize| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let zero = || "0".to_string();
        fields(
            &mut section,
            "Memory",
            &[
                ("used_memory", used.to_string()),
                ("used_memory_human", human_bytes(used)),
                ("used_memory_rss", rss.to_string()),
                ("used_memory_rss_human", human_bytes(rss)),
                ("used_memory_peak", peak.to_string()),
                ("used_memory_peak_human", human_bytes(peak)),
                (
                    "used_memory_peak_perc",
                    format!(
                        "{:.2}%",
                        if peak > 0 {
                            ratio(used, peak) * 100.0
                        } else {
                            100.0
                        }
                    ),
                ),
                (
                    "used_memory_overhead",
                    used.saturating_sub(dataset).to_string(),
                ),
                ("used_memory_startup", zero()),
                ("used_memory_dataset", dataset.to_string()),
                (
                    "used_memory_dataset_perc",
                    format!("{:.2}%", ratio(dataset, used) * 100.0),
                ),
                ("allocator_allocated", used.to_string()),
                ("allocator_active", used.to_string()),
                ("allocator_resident", rss.to_string()),
                ("total_system_memory", zero()),
                ("total_system_memory_human", human_bytes(0)),
                ("used_memory_lua", zero()),
                ("used_memory_vm_eval", zero()),
                ("used_memory_lua_human", human_bytes(0)),
                ("used_memory_scripts_eval", zero()),
                ("number_of_cached_scripts", shared.scripts.len().to_string()),
                ("number_of_functions", zero()),
                ("number_of_libraries", zero()),
                ("used_memory_vm_functions", zero()),
                ("used_memory_vm_total", zero()),
                ("used_memory_vm_total_human", human_bytes(0)),
                ("used_memory_functions", zero()),
                ("used_memory_scripts", zero()),
                ("used_memory_scripts_human", human_bytes(0)),
                ("maxmemory", cfg.maxmemory.to_string()),
                ("maxmemory_human", human_bytes(cfg.maxmemory)),
                ("maxmemory_policy", cfg.maxmemory_policy.name().to_string()),
                ("allocator_frag_ratio", "1.00".into()),
                ("allocator_frag_bytes", zero()),
                ("allocator_rss_ratio", format!("{:.2}", ratio(rss, used))),
                (
                    "allocator_rss_bytes",
                    (rss as i64 - used as i64).to_string(),
                ),
                ("rss_overhead_ratio", "1.00".into()),
                ("rss_overhead_bytes", zero()),
                (
                    "mem_fragmentation_ratio",
                    format!("{:.2}", ratio(rss, used)),
                ),
                (
                    "mem_fragmentation_bytes",
                    (rss as i64 - used as i64).to_string(),
                ),
                ("mem_not_counted_for_evict", zero()),
                ("mem_replication_backlog", zero()),
                ("mem_total_replication_buffers", zero()),
                ("mem_clients_slaves", zero()),
                ("mem_clients_normal", zero()),
                ("mem_cluster_links", zero()),
                ("mem_aof_buffer", zero()),
                ("mem_allocator", "libc".into()),
                ("active_defrag_running", zero()),
                ("lazyfree_pending_objects", zero()),
                ("lazyfreed_objects", zero()),
            ],
        );
    }
    if wanted("persistence") {
        let mut list: Vec<(&str, String)> =
            super::persist::info_fields(shared, keyspace_stats.changes);
        list.extend(
            [
                ("aof_enabled", "0"),
                ("aof_rewrite_in_progress", "0"),
                ("aof_rewrite_scheduled", "0"),
                ("aof_last_rewrite_time_sec", "-1"),
                ("aof_current_rewrite_time_sec", "-1"),
                ("aof_last_bgrewrite_status", "ok"),
                ("aof_rewrites", "0"),
                ("aof_rewrites_consecutive_failures", "0"),
                ("aof_last_write_status", "ok"),
                ("aof_last_cow_size", "0"),
                ("module_fork_in_progress", "0"),
                ("module_fork_last_cow_size", "0"),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_string())),
        );
        fields(&mut section, "Persistence", &list);
    }
    if wanted("stats") {
        let s = &shared.stats;
        let ks = keyspace_stats;
        let pubsub_counts = shared.pubsub.counts();
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).to_string();
        let zero = || "0".to_string();
        fields(
            &mut section,
            "Stats",
            &[
                ("total_connections_received", n(&s.total_connections)),
                ("total_commands_processed", n(&s.total_commands)),
                ("instantaneous_ops_per_sec", zero()),
                ("total_net_input_bytes", n(&s.net_input_bytes)),
                ("total_net_output_bytes", n(&s.net_output_bytes)),
                ("total_net_repl_input_bytes", zero()),
                ("total_net_repl_output_bytes", zero()),
                ("instantaneous_input_kbps", "0.00".into()),
                ("instantaneous_output_kbps", "0.00".into()),
                ("instantaneous_input_repl_kbps", "0.00".into()),
                ("instantaneous_output_repl_kbps", "0.00".into()),
                ("rejected_connections", n(&s.rejected_connections)),
                ("sync_full", zero()),
                ("sync_partial_ok", zero()),
                ("sync_partial_err", zero()),
                ("expired_keys", ks.expired_keys.to_string()),
                ("expired_stale_perc", "0.00".into()),
                ("expired_time_cap_reached_count", zero()),
                ("expire_cycle_cpu_milliseconds", zero()),
                ("evicted_keys", n(&s.evicted_keys)),
                ("evicted_clients", zero()),
                ("total_eviction_exceeded_time", zero()),
                ("current_eviction_exceeded_time", zero()),
                ("keyspace_hits", ks.keyspace_hits.to_string()),
                ("keyspace_misses", ks.keyspace_misses.to_string()),
                ("pubsub_channels", pubsub_counts[0].to_string()),
                ("pubsub_patterns", pubsub_counts[1].to_string()),
                ("pubsubshard_channels", pubsub_counts[2].to_string()),
                ("latest_fork_usec", zero()),
                ("total_forks", zero()),
                ("migrate_cached_sockets", zero()),
                ("slave_expires_tracked_keys", zero()),
                ("active_defrag_hits", zero()),
                ("active_defrag_misses", zero()),
                ("active_defrag_key_hits", zero()),
                ("active_defrag_key_misses", zero()),
                ("total_active_defrag_time", zero()),
                ("current_active_defrag_time", zero()),
                ("tracking_total_keys", zero()),
                ("tracking_total_items", zero()),
                ("tracking_total_prefixes", zero()),
                ("unexpected_error_replies", zero()),
                ("total_error_replies", n(&s.total_error_replies)),
                ("dump_payload_sanitizations", zero()),
                ("total_reads_processed", zero()),
                ("total_writes_processed", zero()),
                ("io_threaded_reads_processed", zero()),
                ("io_threaded_writes_processed", zero()),
                ("reply_buffer_shrinks", zero()),
                ("reply_buffer_expands", zero()),
            ],
        );
    }
    if wanted("replication") {
        let list: Vec<(&str, String)> = [
            ("role", "master"),
            ("connected_slaves", "0"),
            ("master_failover_state", "no-failover"),
            ("master_replid", "0000000000000000000000000000000000000000"),
            ("master_replid2", "0000000000000000000000000000000000000000"),
            ("master_repl_offset", "0"),
            ("second_repl_offset", "-1"),
            ("repl_backlog_active", "0"),
            ("repl_backlog_size", "1048576"),
            ("repl_backlog_first_byte_offset", "0"),
            ("repl_backlog_histlen", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect();
        fields(&mut section, "Replication", &list);
    }
    if wanted("cpu") {
        let (user, sys) = crate::alloc_stats::cpu_times();
        fields(
            &mut section,
            "CPU",
            &[
                ("used_cpu_sys", format!("{sys:.6}")),
                ("used_cpu_user", format!("{user:.6}")),
                ("used_cpu_sys_children", "0.000000".into()),
                ("used_cpu_user_children", "0.000000".into()),
                ("used_cpu_sys_main_thread", format!("{sys:.6}")),
                ("used_cpu_user_main_thread", format!("{user:.6}")),
            ],
        );
    }
    if wanted("modules") {
        section("Modules", String::new());
    }
    if wanted("commandstats") {
        let mut b = String::new();
        for (spec, st) in shared.table.stats() {
            let calls = st.calls.load(Ordering::Relaxed);
            let usec = st.usec.load(Ordering::Relaxed);
            let failed = st.failed.load(Ordering::Relaxed);
            let _ = write!(
                b,
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={:.2},rejected_calls=0,failed_calls={failed}\r\n",
                spec.name,
                if calls > 0 {
                    usec as f64 / calls as f64
                } else {
                    0.0
                }
            );
        }
        section("Commandstats", b);
    }
    if wanted("errorstats") {
        section("Errorstats", String::new());
    }
    if wanted("latencystats") {
        // Redis 7.0 fills this with per-command latency percentiles; sluice keeps none.
        section("Latencystats", String::new());
    }
    if wanted("cluster") {
        let enabled = shared.cluster.is_some() as u8;
        section("Cluster", format!("cluster_enabled:{enabled}\r\n"));
    }
    if wanted("keyspace") {
        let mut b = String::new();
        for &(db, keys, expires, avg_ttl) in &db_summary {
            let _ = write!(
                b,
                "db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}\r\n"
            );
        }
        section("Keyspace", b);
    }
    if requested.iter().any(|s| s == "sluice") {
        fields(
            &mut section,
            "Sluice",
            &[
                ("sluice_version", env!("CARGO_PKG_VERSION").to_string()),
                ("redis_version_reported", cfg.redis_version.clone()),
                ("test_mode", u8::from(cfg.test_mode).to_string()),
            ],
        );
    }
    out
}
