//! CLIENT: the connection's own settings (name, reply mode, flags, SETINFO) and the
//! registry of every connection (LIST, INFO, KILL).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::commands::server::Help;
use crate::commands::server::connection::{set_name, validate_client_name};
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, Roles, VariantCommand, run_sub, run_sub_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

pub(super) static CLIENT: &[C] = &[
    C::new(
        "client|setname",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientSetName>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|getname",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientGetName>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|id",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientId>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|info",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientInfoCmd>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING)
    .with_tips(&["nondeterministic_output"]),
    C::new(
        "client|list",
        -2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientList>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .with_roles(Roles::KEEPS_CACHING)
    .with_tips(&["nondeterministic_output"]),
    C::new(
        "client|kill",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientKill>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|setinfo",
        4,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientSetInfo>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING)
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    C::new(
        "client|no-evict",
        3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<ClientFlag>(c, a, ClientOption::NoEvict),
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    // What RESP3 "auto" clients (redis-py 7, go-redis, node-redis, Jedis, Lettuce) send at
    // connect. sluice has no maintenance events to announce: it accepts the opt-in (so those
    // clients log no warning) and never sends a MOVING/MIGRATING push.
    C::new(
        "client|maint_notifications",
        -3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientMaintNotifications>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|no-touch",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<ClientFlag>(c, a, ClientOption::NoTouch),
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|unblock",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        crate::commands::blocking::client_unblock,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|pause",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        super::pause::client_pause,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|unpause",
        2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<super::pause::ClientUnpause>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|reply",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ClientReply>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|tracking",
        -3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<super::tracking::ClientTracking>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|caching",
        3,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<super::tracking::ClientCaching>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|getredir",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<super::tracking::ClientGetRedir>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
    C::new(
        "client|trackinginfo",
        2,
        &["noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<super::tracking::ClientTrackingInfo>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_roles(Roles::KEEPS_CACHING),
];

/// CLIENT SETNAME name
#[derive(Debug)]
pub(super) struct ClientSetName {
    name: Bytes,
}

impl Command<'_> for ClientSetName {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientSetName {
            name: a.next_owned()?,
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
pub(super) struct ClientGetName;

impl Command<'_> for ClientGetName {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientGetName)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(ctx.client.info.name().into())
    }
}

/// CLIENT ID
#[derive(Debug)]
pub(super) struct ClientId;

impl Command<'_> for ClientId {
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
pub(super) struct ClientReply(u8);

impl Command<'_> for ClientReply {
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
pub(super) struct ClientInfoCmd;

impl Command<'_> for ClientInfoCmd {
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
pub(super) struct ClientList {
    /// Listed in this order, repeats included, unknown ids skipped (as Redis does).
    ids: Option<Vec<i64>>,
    /// TYPE filter: Redis's type name (`normal`, `slave`, `master`, `pubsub`).
    kind: Option<&'static str>,
}

impl Command<'_> for ClientList {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut l = ClientList {
            ids: None,
            kind: None,
        };
        if a.remaining() == 2 && a.eat("TYPE") {
            let t = a.next()?;
            l.kind = Some(match &t.to_ascii_lowercase()[..] {
                b"normal" => "normal",
                b"master" => "master",
                b"replica" | b"slave" => "slave",
                b"pubsub" => "pubsub",
                _ => {
                    return Err(CmdError::owned(format!(
                        "ERR Unknown client type '{}'",
                        crate::engine::printable(t, usize::MAX)
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
        // A killed client is gone for Redis at once (freeClient); here its connection task
        // unregisters it a moment later, so it is left out meanwhile.
        let mut clients = ctx.shared.clients.snapshot();
        clients.retain(|c| !c.kill.is_cancelled());
        let listed: Vec<_> = match &self.ids {
            Some(ids) => ids
                .iter()
                .filter_map(|&id| clients.iter().find(|c| c.id as i64 == id))
                .collect(),
            // As Redis's getClientType: a subscribed client is `pubsub`, not `normal`.
            None => clients
                .iter()
                .filter(|c| self.kind.is_none_or(|k| c.type_name() == k))
                .collect(),
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
pub(super) struct ClientKill {
    legacy: Option<Bytes>,
    id: Option<u64>,
    addr: Option<Bytes>,
    laddr: Option<Bytes>,
    skipme: bool,
    /// TYPE filter: Redis's type name (`normal`, `slave`, `master`, `pubsub`).
    kind: Option<&'static str>,
    /// USER filter: an ACL user's name.
    user: Option<Bytes>,
}

impl Command<'_> for ClientKill {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut k = ClientKill {
            legacy: None,
            id: None,
            addr: None,
            laddr: None,
            skipme: true,
            kind: None,
            user: None,
        };
        if a.remaining() == 1 {
            k.legacy = Some(a.next_owned()?);
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
                b"addr" => k.addr = Some(Bytes::copy_from_slice(val)),
                b"laddr" => k.laddr = Some(Bytes::copy_from_slice(val)),
                b"skipme" => {
                    k.skipme = match &val.to_ascii_lowercase()[..] {
                        b"yes" => true,
                        b"no" => false,
                        _ => return Err(CmdError::Syntax),
                    }
                }
                b"type" => {
                    k.kind = Some(match &val.to_ascii_lowercase()[..] {
                        b"normal" => "normal",
                        b"master" => "master",
                        b"replica" | b"slave" => "slave",
                        b"pubsub" => "pubsub",
                        _ => {
                            return Err(CmdError::owned(format!(
                                "ERR Unknown client type '{}'",
                                crate::engine::printable(val, usize::MAX)
                            )));
                        }
                    })
                }
                // Checked against the users in `apply`.
                b"user" => k.user = Some(Bytes::copy_from_slice(val)),
                _ => return Err(CmdError::Syntax),
            }
        }
        Ok(k)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if let Some(user) = &self.user
            && ctx.shared.acl.user(user).is_none()
        {
            return Err(CmdError::owned(format!(
                "ERR No such user '{}'",
                crate::engine::printable(user, usize::MAX)
            )));
        }
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
                    && self.kind.is_none_or(|k| k == c.type_name())
                    && self.user.as_ref().is_none_or(|u| *u == c.user())
                    && !(self.skipme && c.id == me)
            };
            if matches {
                killed += 1;
                if c.id == me {
                    ctx.next = crate::engine::Next::Close;
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
pub(super) struct ClientSetInfo {
    attr: Bytes,
    value: Bytes,
}

impl Command<'_> for ClientSetInfo {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientSetInfo {
            attr: a.next_owned()?,
            value: a.next_owned()?,
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
                    crate::engine::printable(&self.attr, 128)
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

/// CLIENT MAINT_NOTIFICATIONS ON|OFF [moving-endpoint-type internal-ip|internal-fqdn|
/// external-ip|external-fqdn|none]: `+OK`; nothing is ever announced.
#[derive(Debug)]
pub(super) struct ClientMaintNotifications;

impl Command<'_> for ClientMaintNotifications {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let on = a.next()?;
        if !on.eq_ignore_ascii_case(b"ON") && !on.eq_ignore_ascii_case(b"OFF") {
            return Err(CmdError::Syntax);
        }
        while a.remaining() > 0 {
            let opt = a.next()?;
            if !opt.eq_ignore_ascii_case(b"moving-endpoint-type") || a.remaining() == 0 {
                return Err(CmdError::Syntax);
            }
            let t = a.next()?.to_ascii_lowercase();
            if !matches!(
                &t[..],
                b"internal-ip" | b"internal-fqdn" | b"external-ip" | b"external-fqdn" | b"none"
            ) {
                return Err(CmdError::Syntax);
            }
        }
        Ok(ClientMaintNotifications)
    }
    fn apply(self, _ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::ok())
    }
}

/// A client's on/off option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClientOption {
    /// CLIENT NO-EVICT.
    NoEvict,
    /// CLIENT NO-TOUCH.
    NoTouch,
}

/// CLIENT NO-EVICT / NO-TOUCH on|off
#[derive(Debug)]
pub(super) struct ClientFlag {
    option: ClientOption,
    on: bool,
}

impl VariantCommand<'_> for ClientFlag {
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
