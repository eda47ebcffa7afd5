//! ACL SETUSER / GETUSER / DELUSER / LIST / USERS / WHOAMI / CAT / GENPASS / LOG / DRYRUN /
//! SAVE / LOAD / HELP, over the users and the log of `services::acl`, with Redis 7.0.15's
//! replies and errors. Deleting a user (or ACL LOAD replacing them all) closes the
//! connections logged in as it, as Redis does.

use std::io::Write;

use bytes::Bytes;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;
use crate::services::acl::rules::{CATEGORIES, Selector, category_bit, has_spaces};
use crate::services::acl::{self, DEFAULT_USER, Denied};

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const ADMIN_ACL: &[&str] = &["@admin", "@slow", "@dangerous"];
const PLAIN: &[&str] = &["noscript", "loading", "stale"];

/// ACL and its subcommands.
pub(crate) static COMMANDS: &[C] = &[C::new(
    "acl",
    -2,
    &[],
    KeySpec::None,
    crate::engine::run::<crate::commands::server::Help>,
)
.with_subcommands(ACL)
.with_acl(&["@slow"])];

static ACL: &[C] = &[
    C::new("acl|cat", -2, PLAIN, KeySpec::None, |c, a| {
        at_most(c, a, 3, run_sub::<Cat>)
    })
    .with_acl(&["@slow"]),
    C::new("acl|deluser", -3, ADMIN, KeySpec::None, run_sub::<DelUser>).with_acl(ADMIN_ACL),
    C::new("acl|dryrun", -4, ADMIN, KeySpec::None, run_sub::<DryRun>).with_acl(ADMIN_ACL),
    C::new("acl|genpass", -2, PLAIN, KeySpec::None, |c, a| {
        at_most(c, a, 3, run_sub::<GenPass>)
    })
    .with_acl(&["@slow"]),
    C::new("acl|getuser", 3, ADMIN, KeySpec::None, run_sub::<GetUser>).with_acl(ADMIN_ACL),
    C::new(
        "acl|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    )
    .with_acl(&["@slow"]),
    C::new("acl|list", 2, ADMIN, KeySpec::None, run_sub::<List>).with_acl(ADMIN_ACL),
    C::new("acl|load", 2, ADMIN, KeySpec::None, run_sub::<Load>).with_acl(ADMIN_ACL),
    C::new("acl|log", -2, ADMIN, KeySpec::None, |c, a| {
        at_most(c, a, 3, run_sub::<Log>)
    })
    .with_acl(ADMIN_ACL),
    C::new("acl|save", 2, ADMIN, KeySpec::None, run_sub::<Save>).with_acl(ADMIN_ACL),
    C::new("acl|setuser", -3, ADMIN, KeySpec::None, run_sub::<SetUser>)
        .with_acl(ADMIN_ACL)
        .with_redaction(crate::services::monitor::Redaction::AfterSubcommand),
    C::new("acl|users", 2, ADMIN, KeySpec::None, run_sub::<Users>).with_acl(ADMIN_ACL),
    C::new("acl|whoami", 2, PLAIN, KeySpec::None, run_sub::<WhoAmI>).with_acl(&["@slow"]),
];

/// Redis's reply to a subcommand given more arguments than it takes, naming it as typed.
fn at_most(
    ctx: &mut Ctx<'_>,
    args: &[&[u8]],
    max: usize,
    run: fn(&mut Ctx<'_>, &[&[u8]]) -> Reply,
) -> Reply {
    if args.len() > max {
        return Reply::Error(
            format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
                crate::engine::printable(args[1], 128)
            )
            .into(),
        );
    }
    run(ctx, args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Closes the connections logged in as one of `users` (all but `default` when None), as
/// Redis's `ACLFreeUserAndKillClients` does: the calling connection after this reply.
fn kill_clients_of(ctx: &mut Ctx<'_>, users: Option<&[&[u8]]>) {
    let me = ctx.client.id();
    let doomed = |u: &Bytes| match users {
        Some(names) => names.iter().any(|n| n == u),
        None => &u[..] != DEFAULT_USER,
    };
    for c in ctx.shared.clients.snapshot() {
        if !doomed(&c.user()) {
            continue;
        }
        if c.id == me {
            ctx.next = crate::engine::Next::Close;
            ctx.client.user = Bytes::from_static(DEFAULT_USER);
            ctx.client.authenticated = false;
        } else {
            c.kill.cancel();
        }
    }
}

/// Closes the subscribed connections of `user` holding a channel or pattern `allowed` no
/// longer permits (Redis's `ACLKillPubsubClientsIfNeeded`).
fn kill_revoked_subscribers(ctx: &mut Ctx<'_>, user: &[u8], allowed: &[Bytes]) {
    let clients: Vec<_> = ctx
        .shared
        .clients
        .snapshot()
        .into_iter()
        .filter(|c| &c.user()[..] == user && c.type_name() == "pubsub")
        .collect();
    let ids: Vec<u64> = clients.iter().map(|c| c.id).collect();
    let mut doomed: Vec<u64> = ctx
        .shared
        .pubsub
        .subscribed_by(&ids)
        .into_iter()
        .filter(|(_, name, pattern)| !acl::channel_allowed_by(allowed, name, *pattern))
        .map(|(id, _, _)| id)
        .collect();
    doomed.dedup();
    for c in clients.iter().filter(|c| doomed.contains(&c.id)) {
        if c.id == ctx.client.id() {
            ctx.next = crate::engine::Next::Close;
        } else {
            c.kill.cancel();
        }
    }
}

/// ACL SETUSER username [rule ...]
#[derive(Debug)]
struct SetUser {
    name: Bytes,
    rules: Vec<Bytes>,
}

impl Command<'_> for SetUser {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(SetUser {
            name: a.next_owned()?,
            rules: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if has_spaces(&self.name) {
            return Err(CmdError::msg(
                "ERR Usernames can't contain spaces or null characters",
            ));
        }
        let revoked = ctx
            .shared
            .acl
            .set_user(
                &ctx.shared.table,
                &self.name,
                &crate::engine::args::borrowed(&self.rules),
            )
            .map_err(CmdError::owned)?;
        if let Some(allowed) = revoked {
            kill_revoked_subscribers(ctx, &self.name, &allowed);
        }
        Ok(Reply::ok())
    }
}

/// ACL DELUSER username [username ...]
#[derive(Debug)]
struct DelUser {
    names: Vec<Bytes>,
}

impl Command<'_> for DelUser {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(DelUser {
            names: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.names.iter().any(|n| &n[..] == DEFAULT_USER) {
            return Err(CmdError::msg("ERR The 'default' user cannot be removed"));
        }
        let deleted = ctx
            .shared
            .acl
            .delete_users(&crate::engine::args::borrowed(&self.names));
        kill_clients_of(ctx, Some(&crate::engine::args::borrowed(&self.names)));
        Ok(Reply::Int(deleted as i64))
    }
}

/// One selector as ACL GETUSER describes it.
fn selector_fields(ctx: &Ctx<'_>, s: &Selector) -> Vec<(Reply, Reply)> {
    let catalog = ctx.shared.acl.catalog();
    vec![
        (
            Reply::bulk(b"commands"),
            Reply::Bulk(Bytes::from(s.describe_commands(catalog))),
        ),
        (
            Reply::bulk(b"keys"),
            Reply::Bulk(Bytes::from(s.describe_keys())),
        ),
        (
            Reply::bulk(b"channels"),
            Reply::Bulk(Bytes::from(s.describe_channels())),
        ),
    ]
}

/// ACL GETUSER username
#[derive(Debug)]
struct GetUser {
    name: Bytes,
}

impl Command<'_> for GetUser {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GetUser {
            name: a.next_owned()?,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(user) = ctx.shared.acl.user(&self.name) else {
            return Ok(Reply::Null);
        };
        let mut fields = vec![
            (
                Reply::bulk(b"flags"),
                Reply::Set(
                    user.flag_names()
                        .into_iter()
                        .map(|f| Reply::bulk(f.as_bytes()))
                        .collect(),
                ),
            ),
            (
                Reply::bulk(b"passwords"),
                Reply::Array(
                    user.passwords
                        .iter()
                        .map(|p| Reply::Bulk(Bytes::from(p.clone())))
                        .collect(),
                ),
            ),
        ];
        fields.extend(selector_fields(ctx, user.root()));
        let selectors = user.selectors[1..]
            .iter()
            .map(|s| Reply::Map(selector_fields(ctx, s)))
            .collect();
        fields.push((Reply::bulk(b"selectors"), Reply::Array(selectors)));
        Ok(Reply::Map(fields))
    }
}

/// ACL LIST
#[derive(Debug)]
struct List;

impl Command<'_> for List {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(List)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            ctx.shared
                .acl
                .list()
                .into_iter()
                .map(|l| Reply::Bulk(Bytes::from(l)))
                .collect(),
        ))
    }
}

/// ACL USERS
#[derive(Debug)]
struct Users;

impl Command<'_> for Users {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Users)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(
            ctx.shared
                .acl
                .users()
                .iter()
                .map(|u| Reply::Bulk(u.name.clone()))
                .collect(),
        ))
    }
}

/// ACL WHOAMI
#[derive(Debug)]
struct WhoAmI;

impl Command<'_> for WhoAmI {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(WhoAmI)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Bulk(ctx.client.user.clone()))
    }
}

/// ACL CAT [category]
#[derive(Debug)]
struct Cat {
    category: Option<Bytes>,
}

impl Command<'_> for Cat {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Cat {
            category: if a.remaining() > 0 {
                Some(a.next_owned()?)
            } else {
                None
            },
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(category) = self.category else {
            return Ok(Reply::Array(
                CATEGORIES
                    .iter()
                    .map(|c| Reply::bulk(c.as_bytes()))
                    .collect(),
            ));
        };
        let bit = category_bit(&category);
        if bit == 0 {
            return Err(CmdError::owned(format!(
                "ERR Unknown category '{}'",
                crate::engine::printable(&category, 128)
            )));
        }
        Ok(Reply::Array(
            ctx.shared
                .acl
                .catalog()
                .walk()
                .filter(|c| c.cats & bit != 0)
                .map(|c| Reply::bulk(c.name.as_bytes()))
                .collect(),
        ))
    }
}

/// ACL GENPASS [bits]
#[derive(Debug)]
struct GenPass {
    bits: Option<Bytes>,
}

const GENPASS_MAX_BITS: i64 = 4096;

impl Command<'_> for GenPass {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(GenPass {
            bits: a.rest().first().cloned().map(Bytes::copy_from_slice),
        })
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        let bits = match &self.bits {
            Some(b) => crate::num::parse_i64(b).ok_or(CmdError::NotInteger)?,
            None => 256,
        };
        if bits <= 0 || bits > GENPASS_MAX_BITS {
            return Err(CmdError::owned(format!(
                "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_MAX_BITS}"
            )));
        }
        let chars = (bits as usize).div_ceil(4);
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let pass: Vec<u8> = (0..chars)
            .map(|_| HEX[(rand::random::<u8>() & 0xf) as usize])
            .collect();
        Ok(Reply::Bulk(Bytes::from(pass)))
    }
}

/// ACL LOG [count | RESET]
#[derive(Debug)]
struct Log {
    arg: Option<Bytes>,
}

impl Command<'_> for Log {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let arg = a.rest();
        Ok(Log {
            arg: arg.first().cloned().map(Bytes::copy_from_slice),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mut count = 10i64;
        if let Some(arg) = &self.arg {
            if arg.eq_ignore_ascii_case(b"reset") {
                ctx.shared.acl.log.reset();
                return Ok(Reply::ok());
            }
            count = crate::num::parse_i64(arg).ok_or(CmdError::NotInteger)?;
        }
        let now = ctx.shared.clock.now_ms();
        let entries = ctx.shared.acl.log.newest(count.max(0) as usize);
        Ok(Reply::Array(
            entries
                .into_iter()
                .map(|e| {
                    let age = now.saturating_sub(e.ctime_ms) as f64 / 1000.0;
                    Reply::Map(vec![
                        (Reply::bulk(b"count"), Reply::Int(e.count as i64)),
                        (
                            Reply::bulk(b"reason"),
                            Reply::bulk(e.reason.name().as_bytes()),
                        ),
                        (
                            Reply::bulk(b"context"),
                            Reply::bulk(e.context.name().as_bytes()),
                        ),
                        (Reply::bulk(b"object"), Reply::Bulk(e.object)),
                        (Reply::bulk(b"username"), Reply::Bulk(e.username)),
                        (Reply::bulk(b"age-seconds"), Reply::Double(age)),
                        (
                            Reply::bulk(b"client-info"),
                            Reply::Bulk(Bytes::from(e.client_info)),
                        ),
                    ])
                })
                .collect(),
        ))
    }
}

/// ACL DRYRUN username command [arg ...]
#[derive(Debug)]
struct DryRun {
    user: Bytes,
    args: Vec<Bytes>,
}

impl Command<'_> for DryRun {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(DryRun {
            user: a.next_owned()?,
            args: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(user) = ctx.shared.acl.user(&self.user) else {
            return Err(CmdError::owned(format!(
                "ERR User '{}' not found",
                text(&self.user)
            )));
        };
        let table = &ctx.shared.table;
        let not_found =
            || CmdError::owned(format!("ERR Command '{}' not found", text(&self.args[0])));
        let entry = table.get_entry(&self.args[0]).ok_or_else(not_found)?;
        let entry = if entry.spec.subcommands.is_empty() || self.args.len() < 2 {
            entry
        } else {
            table
                .sub_entry(entry, &self.args[1])
                .ok_or_else(not_found)?
        };
        let (arity, argc) = (entry.spec.arity, self.args.len() as i32);
        if (arity > 0 && arity != argc) || argc < -arity {
            return Err(CmdError::owned(format!(
                "ERR wrong number of arguments for '{}' command",
                entry.spec.name
            )));
        }
        let refused =
            match acl::check_user(&user, entry, &crate::engine::args::borrowed(&self.args)) {
                Ok(()) => return Ok(Reply::ok()),
                Err(Denied::Command) => format!(
                    "This user has no permissions to run the '{}' command",
                    entry.spec.name
                ),
                Err(Denied::Key(i)) => format!(
                    "This user has no permissions to access the '{}' key",
                    text(&self.args[i])
                ),
                Err(Denied::Channel(i)) => format!(
                    "This user has no permissions to access the '{}' channel",
                    text(&self.args[i])
                ),
            };
        Ok(Reply::Bulk(Bytes::from(refused)))
    }
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL LOAD
#[derive(Debug)]
struct Load;

impl Command<'_> for Load {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Load)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(path) = ctx.shared.config().aclfile else {
            return Err(CmdError::msg(NO_ACL_FILE));
        };
        let text = std::fs::read(&path).map_err(|e| {
            CmdError::owned(format!(
                "ERR Error loading ACLs, opening file '{path}': {}",
                strerror(&e)
            ))
        })?;
        ctx.shared
            .acl
            .load_text(&ctx.shared.table, &path, &text)
            .map_err(|e| CmdError::owned(format!("ERR {e}")))?;
        kill_clients_of(ctx, None);
        Ok(Reply::ok())
    }
}

/// ACL SAVE: the users written to a temporary file beside `aclfile`, then renamed over it.
#[derive(Debug)]
struct Save;

impl Command<'_> for Save {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Save)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let Some(path) = ctx.shared.config().aclfile else {
            return Err(CmdError::msg(NO_ACL_FILE));
        };
        let text = ctx.shared.acl.save_text();
        let tmp = format!(
            "{path}.tmp-{}-{}",
            std::process::id(),
            ctx.shared.clock.now_ms()
        );
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(&text).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!("Writing ACL file for ACL SAVE: {e}");
            return Err(CmdError::msg(
                "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
            ));
        }
        Ok(Reply::ok())
    }
}

/// ACL HELP
#[derive(Debug)]
struct Help;

impl Command<'_> for Help {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Help)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(crate::commands::slowlog::help(&[
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Prints this help.",
        ]))
    }
}

/// The C library's text for an I/O error (Redis prints `strerror(errno)`), without the
/// " (os error N)" Rust adds.
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
