//! Pub/sub's commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB, with Redis 7.0's replies. The registry of who
//! listens to what, and the fan-out, are `services::pubsub` (its module docs say how
//! confirmations keep their order).
//!
//! In cluster mode SSUBSCRIBE, SUNSUBSCRIBE and SPUBLISH declare their channels as keys (with
//! Redis's `not_key` key spec), so `cluster::route` answers MOVED / CROSSSLOT for them as for
//! keys. Inside EXEC the confirmations are part of EXEC's reply, as in Redis (one element per
//! confirmation, so `SUBSCRIBE a b` inside MULTI gives the same over-long array Redis gives).

use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use crate::client::push::{PushLimit, PushQueue};
use crate::engine::{CommandSpec as C, Ctx, KeySpecDoc};
use crate::error::CmdError;
use crate::protocol::Reply;
use crate::services::pubsub::{Kind, push_limit};

/// Where a (un)subscribe command's confirmations go: the client's queue, or EXEC's reply.
struct Confirm {
    in_exec: bool,
    replies: Vec<Reply>,
    limit: PushLimit,
}

impl Confirm {
    fn send(&mut self, queue: &PushQueue, word: &'static str, name: Option<&Bytes>, n: usize) {
        let reply = Reply::Push(vec![
            Reply::Bulk(Bytes::from_static(word.as_bytes())),
            name.map_or(Reply::Null, |n| Reply::Bulk(n.clone())),
            Reply::Int(n as i64),
        ]);
        if self.in_exec {
            self.replies.push(reply);
        } else {
            let mut out = BytesMut::new();
            reply.encode(queue.resp(), &mut out);
            queue.push(out.freeze(), self.limit);
        }
    }

    /// Confirmations for the command `ctx` runs: into EXEC's reply inside MULTI, else pushed.
    fn new(ctx: &Ctx<'_>) -> Self {
        Confirm {
            in_exec: ctx.in_exec,
            replies: Vec::new(),
            limit: push_limit(ctx.shared),
        }
    }

    fn finish(self) -> Reply {
        Reply::Multi(self.replies)
    }
}

fn subscribe(ctx: &mut Ctx<'_>, kind: Kind, names: &[&[u8]]) -> Reply {
    if kind == Kind::Shard && ctx.in_exec {
        return CmdError::msg("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client").into();
    }
    let mut confirm = Confirm::new(ctx);
    let id = ctx.client.info.id;
    let subs = ctx.client.subscriptions();
    let queue = subs.queue.clone();
    let word = kind.words().0;
    let done = ctx.shared.pubsub.subscribe(
        kind,
        id,
        &queue,
        subs,
        &crate::engine::args::owned(names),
        |name, n| confirm.send(&queue, word, name, n),
    );
    if done.is_err() {
        return CmdError::msg("ERR pub/sub registry unavailable").into();
    }
    let n = kind.set(subs).len();
    ctx.client.info.subs[kind.info_index()].store(n, Ordering::Relaxed);
    confirm.finish()
}

fn unsubscribe(ctx: &mut Ctx<'_>, kind: Kind, names: &[&[u8]]) -> Reply {
    let mut confirm = Confirm::new(ctx);
    let id = ctx.client.info.id;
    let subs = ctx.client.subscriptions();
    let queue = subs.queue.clone();
    let word = kind.words().1;
    let done = ctx.shared.pubsub.unsubscribe(
        kind,
        id,
        subs,
        &crate::engine::args::owned(names),
        |name, n| confirm.send(&queue, word, name, n),
    );
    if done.is_err() {
        return CmdError::msg("ERR pub/sub registry unavailable").into();
    }
    let n = kind.set(subs).len();
    ctx.client.info.subs[kind.info_index()].store(n, Ordering::Relaxed);
    confirm.finish()
}

fn subscribe_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    subscribe(ctx, Kind::Channel, &args[1..])
}
fn psubscribe_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    subscribe(ctx, Kind::Pattern, &args[1..])
}
fn ssubscribe_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    subscribe(ctx, Kind::Shard, &args[1..])
}
fn unsubscribe_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    unsubscribe(ctx, Kind::Channel, &args[1..])
}
fn punsubscribe_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    unsubscribe(ctx, Kind::Pattern, &args[1..])
}
fn sunsubscribe_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    unsubscribe(ctx, Kind::Shard, &args[1..])
}

fn publish_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let limit = push_limit(ctx.shared);
    // A member of a Redis cluster sends it to every other node too (the count is local).
    if let Some(bus) = ctx.shared.cluster.as_ref().map(|c| c.bus()) {
        bus.propagate_publish(args[1], args[2], false);
    }
    Reply::Int(ctx.shared.pubsub.publish(args[1], args[2], limit) as i64)
}

fn spublish_cmd(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    let limit = push_limit(ctx.shared);
    // A member of a Redis cluster sends it to the other nodes of its shard (its master and
    // that master's replicas); the count is local.
    if let Some(bus) = ctx.shared.cluster.as_ref().map(|c| c.bus()) {
        bus.propagate_publish(args[1], args[2], true);
    }
    Reply::Int(ctx.shared.pubsub.spublish(args[1], args[2], limit) as i64)
}

fn syntax_error(sub: &[u8]) -> Reply {
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        crate::engine::printable(sub, 128)
    ))
    .into()
}

fn channels(ctx: &Ctx<'_>, kind: Kind, args: &[&[u8]]) -> Reply {
    if args.len() > 3 {
        return syntax_error(args[1]);
    }
    let pattern = args.get(2).map(|p| Bytes::copy_from_slice(p));
    let names = ctx.shared.pubsub.active(kind, pattern.as_ref());
    Reply::Array(names.into_iter().map(Reply::Bulk).collect())
}

fn numsub(ctx: &Ctx<'_>, kind: Kind, args: &[&[u8]]) -> Reply {
    let names = &crate::engine::args::owned(&args[2..]);
    let Some(counts) = ctx.shared.pubsub.subscribers(kind, names) else {
        return Reply::Array(Vec::new());
    };
    let mut out = Vec::with_capacity(2 * names.len());
    for (ch, n) in names.iter().zip(counts) {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(n as i64));
    }
    Reply::Array(out)
}

fn pubsub_channels(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    channels(ctx, Kind::Channel, args)
}
fn pubsub_shardchannels(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    channels(ctx, Kind::Shard, args)
}
fn pubsub_numsub(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    numsub(ctx, Kind::Channel, args)
}
fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> Reply {
    numsub(ctx, Kind::Shard, args)
}
fn pubsub_numpat(ctx: &mut Ctx<'_>, _: &[&[u8]]) -> Reply {
    Reply::Int(ctx.shared.pubsub.counts()[1] as i64)
}

fn pubsub_help(_: &mut Ctx<'_>, _: &[&[u8]]) -> Reply {
    const LINES: &[&str] = &[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    Reply::Array(LINES.iter().map(|l| Reply::status(l)).collect())
}

/// The container's handler runs only for `PUBSUB` alone (arity refuses it first).
fn pubsub_container(_: &mut Ctx<'_>, _: &[&[u8]]) -> Reply {
    CmdError::WrongArity("pubsub".into()).into()
}

const SUB_FLAGS: &[&str] = &["pubsub", "noscript", "loading", "stale"];
const SUB_ACL: &[&str] = &["@pubsub", "@slow"];
const PUBSUB_SUB_FLAGS: &[&str] = &["pubsub", "loading", "stale"];

static NOT_KEY_ALL: &[KeySpecDoc] = &[KeySpecDoc::range(&["not_key"], 1, -1)];
static NOT_KEY_ONE: &[KeySpecDoc] = &[KeySpecDoc::range(&["not_key"], 1, 0)];

static PUBSUB_SUBCOMMANDS: &[C] = &[
    C::new(
        "pubsub|help",
        2,
        &["loading", "stale"],
        C::keys(0, 0, 0),
        pubsub_help,
    )
    .with_acl(&["@slow"]),
    C::new(
        "pubsub|channels",
        -2,
        PUBSUB_SUB_FLAGS,
        C::keys(0, 0, 0),
        pubsub_channels,
    )
    .with_acl(SUB_ACL),
    C::new(
        "pubsub|numpat",
        2,
        PUBSUB_SUB_FLAGS,
        C::keys(0, 0, 0),
        pubsub_numpat,
    )
    .with_acl(SUB_ACL),
    C::new(
        "pubsub|numsub",
        -2,
        PUBSUB_SUB_FLAGS,
        C::keys(0, 0, 0),
        pubsub_numsub,
    )
    .with_acl(SUB_ACL),
    C::new(
        "pubsub|shardnumsub",
        -2,
        PUBSUB_SUB_FLAGS,
        C::keys(0, 0, 0),
        pubsub_shardnumsub,
    )
    .with_acl(SUB_ACL),
    C::new(
        "pubsub|shardchannels",
        -2,
        PUBSUB_SUB_FLAGS,
        C::keys(0, 0, 0),
        pubsub_shardchannels,
    )
    .with_acl(SUB_ACL),
];

/// The pub/sub commands.
pub(crate) static COMMANDS: &[C] = &[
    C::new("subscribe", -2, SUB_FLAGS, C::keys(0, 0, 0), subscribe_cmd)
        .with_roles(crate::engine::Roles::WHILE_SUBSCRIBED)
        .with_channels(crate::engine::Channels::Subscribe)
        .with_acl(SUB_ACL),
    C::new(
        "unsubscribe",
        -1,
        SUB_FLAGS,
        C::keys(0, 0, 0),
        unsubscribe_cmd,
    )
    .with_roles(crate::engine::Roles::WHILE_SUBSCRIBED)
    .with_acl(SUB_ACL),
    C::new(
        "psubscribe",
        -2,
        SUB_FLAGS,
        C::keys(0, 0, 0),
        psubscribe_cmd,
    )
    .with_roles(crate::engine::Roles::WHILE_SUBSCRIBED)
    .with_channels(crate::engine::Channels::SubscribePattern)
    .with_acl(SUB_ACL),
    C::new(
        "punsubscribe",
        -1,
        SUB_FLAGS,
        C::keys(0, 0, 0),
        punsubscribe_cmd,
    )
    .with_roles(crate::engine::Roles::WHILE_SUBSCRIBED)
    .with_acl(SUB_ACL),
    // The shard channels are declared as keys so cluster mode routes them by slot; they
    // name no key of the keyspace, so nothing is locked.
    C::new(
        "ssubscribe",
        -2,
        SUB_FLAGS,
        C::keys(1, -1, 1),
        ssubscribe_cmd,
    )
    .with_roles(crate::engine::Roles::WHILE_SUBSCRIBED.union(crate::engine::Roles::SHARDED_PUBSUB))
    .with_channels(crate::engine::Channels::Subscribe)
    .self_locking()
    .with_key_specs(NOT_KEY_ALL)
    .with_acl(SUB_ACL),
    C::new(
        "sunsubscribe",
        -1,
        SUB_FLAGS,
        C::keys(1, -1, 1),
        sunsubscribe_cmd,
    )
    .with_roles(crate::engine::Roles::WHILE_SUBSCRIBED.union(crate::engine::Roles::SHARDED_PUBSUB))
    .self_locking()
    .with_key_specs(NOT_KEY_ALL)
    .with_acl(SUB_ACL),
    C::new(
        "publish",
        3,
        &["pubsub", "loading", "stale", "fast"],
        C::keys(0, 0, 0),
        publish_cmd,
    )
    .with_roles(crate::engine::Roles::MAY_REPLICATE)
    .with_channels(crate::engine::Channels::Publish)
    .with_acl(&["@pubsub", "@fast"]),
    C::new(
        "spublish",
        3,
        &["pubsub", "loading", "stale", "fast"],
        C::keys(1, 1, 1),
        spublish_cmd,
    )
    .with_roles(crate::engine::Roles::MAY_REPLICATE.union(crate::engine::Roles::SHARDED_PUBSUB))
    .self_locking()
    .with_key_specs(NOT_KEY_ONE)
    .with_channels(crate::engine::Channels::Publish)
    .with_acl(&["@pubsub", "@fast"]),
    C::new("pubsub", -2, &[], C::keys(0, 0, 0), pubsub_container)
        .with_subcommands(PUBSUB_SUBCOMMANDS)
        .with_acl(&["@slow"]),
];
