//! A connection's handshake and liveness: PING, ECHO, QUIT, RESET, AUTH, HELLO.
//!
//! These are what clients send when they connect (redis-py 8 opens with `HELLO 3`).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

/// `PING [message]`
#[derive(Debug)]
pub(super) struct Ping {
    message: Option<Bytes>,
}

impl Command<'_> for Ping {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        if a.remaining() > 1 {
            return Err(CmdError::WrongArity("ping".into()));
        }
        Ok(Ping {
            message: a.rest().first().cloned().map(Bytes::copy_from_slice),
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
pub(super) struct Echo {
    message: Bytes,
}

impl Command<'_> for Echo {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Echo {
            message: a.next_owned()?,
        })
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Bulk(self.message))
    }
}

/// QUIT
#[derive(Debug)]
pub(super) struct Quit;

impl Command<'_> for Quit {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        // Redis ignores QUIT's arguments.
        a.rest();
        Ok(Quit)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.next = crate::engine::Next::Close;
        Ok(Reply::ok())
    }
}

/// RESET: back to a fresh connection's state.
#[derive(Debug)]
pub(super) struct Reset;

impl Command<'_> for Reset {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Reset)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if !crate::engine::txn::unwatch_all_or_regate(ctx) {
            return Ok(Reply::Null);
        }
        ctx.client.end_multi();
        ctx.shared.pubsub.drop_client(ctx.client);
        if ctx.client.tracking {
            ctx.shared.keyspace.tracking().disable(&ctx.client.info);
            ctx.client.tracking = false;
        }
        ctx.client.caching = false;
        ctx.client.set_db(0);
        ctx.client.set_resp(2);
        ctx.client
            .set_user(Bytes::from_static(crate::services::acl::DEFAULT_USER));
        ctx.client.authenticated = ctx.shared.acl.default_nopass();
        if let Ok(mut name) = ctx.client.info.name.lock() {
            *name = None;
        }
        ctx.client.info.no_evict.store(false, Ordering::Relaxed);
        ctx.client.info.no_touch.store(false, Ordering::Relaxed);
        ctx.client.info.readonly.store(false, Ordering::Relaxed);
        Ok(Reply::status("RESET"))
    }
}

/// Logs the client in as `user` if `pass` is one of its passwords and it is on (Redis's
/// `ACLAuthenticateUser`); a failure is logged in ACL LOG under the command's name as sent.
fn authenticate(ctx: &mut Ctx<'_>, command: &[u8], user: &[u8], pass: &[u8]) -> CmdResult<()> {
    if ctx.shared.acl.authenticate(user, pass) {
        ctx.client.set_user(Bytes::copy_from_slice(user));
        return Ok(());
    }
    ctx.shared
        .acl
        .log_auth_failure(ctx.client, command, user, ctx.now_ms);
    Err(CmdError::msg(
        "WRONGPASS invalid username-password pair or user is disabled.",
    ))
}

/// `AUTH [username] password`
#[derive(Debug)]
pub(super) struct Auth {
    /// The command's name as sent (ACL LOG's object for a failure).
    command: Bytes,
    user: Option<Bytes>,
    pass: Bytes,
}

impl Command<'_> for Auth {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        match a.remaining() {
            1 => Ok(Auth {
                command: Bytes::new(),
                user: None,
                pass: a.next_owned()?,
            }),
            2 => Ok(Auth {
                command: Bytes::new(),
                user: Some(a.next_owned()?),
                pass: a.next_owned()?,
            }),
            _ => Err(CmdError::Syntax),
        }
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let user = match &self.user {
            Some(user) => &user[..],
            None => {
                // Redis's old behaviour for the one-argument form with no password set.
                if ctx
                    .shared
                    .acl
                    .user(crate::services::acl::DEFAULT_USER)
                    .is_some_and(|u| u.nopass)
                {
                    return Err(CmdError::msg(
                        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                    ));
                }
                crate::services::acl::DEFAULT_USER
            }
        };
        authenticate(ctx, &self.command, user, &self.pass)?;
        Ok(Reply::ok())
    }
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]
#[derive(Debug)]
pub(super) struct Hello {
    /// The command's name as sent (ACL LOG's object for a failed AUTH).
    command: Bytes,
    proto: Option<i64>,
    auth: Option<(Bytes, Bytes)>,
    name: Option<Bytes>,
}

impl Command<'_> for Hello {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let mut h = Hello {
            command: Bytes::new(),
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
                h.auth = Some((a.next_owned()?, a.next_owned()?));
            } else if opt.eq_ignore_ascii_case(b"SETNAME") && left >= 1 {
                a.next()?;
                h.name = Some(a.next_owned()?);
            } else {
                return Err(CmdError::owned(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    crate::engine::printable(opt, 128)
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
            authenticate(ctx, &self.command, user, pass)?;
        } else if !ctx.client.authenticated && !ctx.shared.acl.default_nopass() {
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
pub(super) fn mode(ctx: &Ctx<'_>) -> &'static [u8] {
    if ctx.shared.cluster.is_some() {
        b"cluster"
    } else {
        b"standalone"
    }
}

pub(super) fn validate_client_name(name: &[u8]) -> CmdResult<()> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::msg(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

pub(super) fn set_name(ctx: &mut Ctx<'_>, name: &[u8]) {
    if let Ok(mut n) = ctx.client.info.name.lock() {
        *n = if name.is_empty() {
            None
        } else {
            Some(Bytes::copy_from_slice(name))
        };
    }
}

/// The handler of AUTH and HELLO: `run`, keeping the command's name as sent for ACL LOG.
pub(super) fn run_auth<C: for<'x> Command<'x> + Named>(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let mut cursor = ArgCursor::new(args.get(1..).unwrap_or(&[]));
    let parsed = C::parse(&mut cursor).and_then(|c| cursor.finish().map(|()| c));
    let name = args.first().copied().unwrap_or_default();
    match parsed.and_then(|c| c.named(Bytes::copy_from_slice(name)).apply(ctx)) {
        Ok(r) => r,
        Err(e) => e.into(),
    }
}

/// A command that keeps the name it was sent under.
pub(super) trait Named {
    /// Itself with `name`.
    fn named(self, name: Bytes) -> Self;
}

impl Named for Auth {
    fn named(mut self, name: Bytes) -> Self {
        self.command = name;
        self
    }
}

impl Named for Hello {
    fn named(mut self, name: Bytes) -> Self {
        self.command = name;
        self
    }
}
