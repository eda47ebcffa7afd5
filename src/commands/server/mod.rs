//! Connection and server commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, CLIENT, COMMAND,
//! INFO, CONFIG, TIME, DEBUG, FUNCTION, SHUTDOWN.
//!
//! These are what clients send when they connect (redis-py 8 opens with `HELLO 3` and
//! `CLIENT SETINFO`, redis-cli with `COMMAND DOCS`) and what operators and monitoring read
//! (INFO's sections and field names are parsed by tools, so they follow Redis's exactly).
//!
//! This file holds their table and the `Help` reply other families share; each family has
//! its file: `connection` (PING … HELLO), `client`, `command`, `config`, `info`, `admin`
//! (TIME, DEBUG, SHUTDOWN, MONITOR), `pause` (CLIENT PAUSE / UNPAUSE). FUNCTION lives in
//! `commands::functions`.

mod admin;
mod client;
mod command;
mod config;
mod connection;
mod info;
mod pause;
mod tracking;

use admin::{DebugCmd, Shutdown, Time};
use client::CLIENT;
use command::{COMMAND, CommandList, CommandListing};
use config::CONFIG;
use connection::{Auth, Echo, Hello, Ping, Quit, Reset};
use info::Info;

use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, run, run_as};
use crate::error::CmdResult;
use crate::protocol::Reply;

/// The connection and server commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new("ping", -1, &["fast"], C::keys(0, 0, 0), run::<Ping>)
        .with_roles(
            crate::engine::Roles::WHILE_SUBSCRIBED
                .union(crate::engine::Roles::REFUSED_BY_MISCONF)
                .union(crate::engine::Roles::KEEPALIVE),
        )
        .with_acl(&["@fast", "@connection"])
        .with_tips(&["request_policy:all_shards", "response_policy:all_succeeded"]),
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
    .with_roles(crate::engine::Roles::ENDS_MULTI.union(crate::engine::Roles::WHILE_SUBSCRIBED))
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
    .with_roles(crate::engine::Roles::ENDS_MULTI.union(crate::engine::Roles::WHILE_SUBSCRIBED))
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
        connection::run_auth::<Hello>,
    )
    .with_redaction(crate::services::monitor::Redaction::HelloAuth)
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
        connection::run_auth::<Auth>,
    )
    .with_redaction(crate::services::monitor::Redaction::AllArguments)
    .with_acl(&["@fast", "@connection"]),
    C::new("client", -2, &[], C::keys(0, 0, 0), run::<Help>)
        .with_subcommands(CLIENT)
        .with_acl(&["@slow"]),
    C::new(
        "command",
        -1,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        |c, a| run_as::<CommandList>(c, a, CommandListing::Infos),
    )
    .with_subcommands(COMMAND)
    .with_acl(&["@slow", "@connection"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "info",
        -1,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        run::<Info>,
    )
    .with_roles(crate::engine::Roles::LOCKS_ITSELF)
    .whole_keyspace()
    .with_acl(&["@slow", "@dangerous"])
    .with_tips(&[
        "nondeterministic_output",
        "request_policy:all_shards",
        "response_policy:special",
    ]),
    C::new("config", -2, &[], C::keys(0, 0, 0), run::<Help>)
        .with_subcommands(CONFIG)
        .with_acl(&["@slow"]),
    C::new(
        "time",
        1,
        &["loading", "stale", "fast"],
        C::keys(0, 0, 0),
        run::<Time>,
    )
    .with_acl(&["@fast"])
    .with_tips(&["nondeterministic_output"]),
    C::new(
        "debug",
        -2,
        &["admin", "noscript", "loading", "stale"],
        C::keys(0, 0, 0),
        run::<DebugCmd>,
    )
    // DEBUG RELOAD and the like lock shards by themselves: the busy gate must hold them.
    .with_roles(crate::engine::Roles::PROTECTED.union(crate::engine::Roles::NEEDS_SHARDS))
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new("function", -2, &[], C::keys(0, 0, 0), run::<Help>)
        .with_subcommands(crate::commands::functions::FUNCTION)
        .with_acl(&["@slow"]),
    C::new(
        "monitor",
        1,
        &["admin", "noscript", "loading", "stale"],
        C::keys(0, 0, 0),
        run::<admin::Monitor>,
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

/// `<CMD> HELP` and bare containers: a short help text.
#[derive(Debug)]
pub(crate) struct Help;

impl Command<'_> for Help {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(Help)
    }
    fn apply(self, _: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Array(vec![Reply::Status(
            "See https://redis.io/commands for this command's subcommands.".into(),
        )]))
    }
}
