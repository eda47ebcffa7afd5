//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE,
//! PUBLISH, SPUBLISH and PUBSUB, with Redis 7.0's replies; and the registry of who listens
//! to what.
//!
//! The registry is three maps behind their own `RwLock`s (channels, shard channels,
//! patterns), leaves in the lock order: no shard lock is ever taken while one is held, and
//! publishing never runs under a shard lock (PUBLISH locks no shard; notifications are
//! published after the command's shards are released). Fan-out appends one encoded message
//! (two at most: RESP2 and RESP3 differ only in the first byte) to each subscriber's
//! `PushQueue`; the subscriber's own event loop writes it.
//!
//! In cluster mode SSUBSCRIBE, SUNSUBSCRIBE and SPUBLISH declare their channels as keys (with
//! Redis's `not_key` key spec), so `cluster::route` answers MOVED / CROSSSLOT for them as for
//! keys; PUBLISH reaches only this node's subscribers (there is no cluster bus).
//!
//! Confirmations (`subscribe ch 1`…) go through the subscriber's queue too, appended while
//! the registry's write lock is held, so a message published right after the subscription
//! can never overtake its confirmation. Inside EXEC they are part of EXEC's reply instead, as
//! in Redis (one element per confirmation, so `SUBSCRIBE a b` inside MULTI gives the same
//! over-long array Redis gives).
//!
//! Patterns are matched with `args::glob_match`, which is bounded (no recursion, time
//! proportional to pattern × channel).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use bytes::{Bytes, BytesMut};

use crate::client::ClientState;
use crate::client::push::{PushLimit, PushQueue, Subscriptions};
use crate::engine::args::glob_match;
use crate::engine::{CommandSpec as C, Ctx, KeySpecDoc};
use crate::error::CmdError;
use crate::protocol::Reply;

/// The subscribers of one channel or pattern: client id → its queue. Keyed, so that a
/// client leaves a channel in O(1) however many others listen to it.
type Subs = indexmap::IndexMap<u64, Arc<PushQueue>>;

/// Who listens to what.
#[derive(Debug, Default)]
pub struct PubSub {
    channels: RwLock<HashMap<Bytes, Subs>>,
    shard_channels: RwLock<HashMap<Bytes, Subs>>,
    patterns: RwLock<HashMap<Bytes, Subs>>,
}

/// The three kinds of subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// SUBSCRIBE.
    Channel,
    /// PSUBSCRIBE.
    Pattern,
    /// SSUBSCRIBE.
    Shard,
}

impl Kind {
    fn map(self, ps: &PubSub) -> &RwLock<HashMap<Bytes, Subs>> {
        match self {
            Kind::Channel => &ps.channels,
            Kind::Pattern => &ps.patterns,
            Kind::Shard => &ps.shard_channels,
        }
    }

    fn set(self, s: &mut Subscriptions) -> &mut indexmap::IndexSet<Bytes> {
        match self {
            Kind::Channel => &mut s.channels,
            Kind::Pattern => &mut s.patterns,
            Kind::Shard => &mut s.shard_channels,
        }
    }

    fn words(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }

    /// The count a confirmation reports: channels + patterns, or shard channels.
    fn count(self, s: &Subscriptions) -> usize {
        match self {
            Kind::Shard => s.shard_channels.len(),
            _ => s.count(),
        }
    }

    fn info_index(self) -> usize {
        match self {
            Kind::Channel => 0,
            Kind::Pattern => 1,
            Kind::Shard => 2,
        }
    }
}

/// A message encoded at most once per protocol.
struct Encoded<'a> {
    parts: &'a [&'a [u8]],
    resp2: Option<Bytes>,
    resp3: Option<Bytes>,
}

impl<'a> Encoded<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Self {
        Encoded {
            parts,
            resp2: None,
            resp3: None,
        }
    }

    fn get(&mut self, resp: u8) -> Bytes {
        let parts = self.parts;
        let slot = if resp >= 3 {
            &mut self.resp3
        } else {
            &mut self.resp2
        };
        slot.get_or_insert_with(|| {
            let reply = Reply::Push(parts.iter().map(|p| Reply::bulk(p)).collect());
            let mut out = BytesMut::new();
            reply.encode(resp, &mut out);
            out.freeze()
        })
        .clone()
    }
}

impl PubSub {
    /// Delivers `message` to the subscribers of `channel` and of every matching pattern;
    /// returns how many received it (Redis's PUBLISH reply).
    pub fn publish(&self, channel: &[u8], message: &[u8], limit: PushLimit) -> usize {
        let mut n = 0;
        if let Ok(map) = self.channels.read()
            && let Some(subs) = map.get(channel)
        {
            let parts: [&[u8]; 3] = [b"message", channel, message];
            let mut enc = Encoded::new(&parts);
            for (_, q) in subs {
                q.push(enc.get(q.resp()), limit);
            }
            n += subs.len();
        }
        if let Ok(map) = self.patterns.read() {
            for (pattern, subs) in map.iter() {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                let parts: [&[u8]; 4] = [b"pmessage", pattern, channel, message];
                let mut enc = Encoded::new(&parts);
                for (_, q) in subs {
                    q.push(enc.get(q.resp()), limit);
                }
                n += subs.len();
            }
        }
        n
    }

    /// SPUBLISH: delivers to the shard channel's subscribers.
    pub fn spublish(&self, channel: &[u8], message: &[u8], limit: PushLimit) -> usize {
        let Ok(map) = self.shard_channels.read() else {
            return 0;
        };
        let Some(subs) = map.get(channel) else {
            return 0;
        };
        let parts: [&[u8]; 3] = [b"smessage", channel, message];
        let mut enc = Encoded::new(&parts);
        for (_, q) in subs {
            q.push(enc.get(q.resp()), limit);
        }
        subs.len()
    }

    /// What the clients `ids` are subscribed to: (client, channel or pattern, is a
    /// pattern), channels and shard channels first. O(subscriptions): for ACL SETUSER, which
    /// closes the subscribers whose permissions it revokes (Redis's
    /// `ACLKillPubsubClientsIfNeeded`).
    pub fn subscribed_by(&self, ids: &[u64]) -> Vec<(u64, Bytes, bool)> {
        let mut out = Vec::new();
        for (kind, is_pattern) in [
            (Kind::Channel, false),
            (Kind::Shard, false),
            (Kind::Pattern, true),
        ] {
            if let Ok(map) = kind.map(self).read() {
                for (name, subs) in map.iter() {
                    for id in ids.iter().filter(|id| subs.contains_key(*id)) {
                        out.push((*id, name.clone(), is_pattern));
                    }
                }
            }
        }
        out
    }

    /// Channels, patterns and shard channels with at least one subscriber (INFO stats).
    pub fn counts(&self) -> [usize; 3] {
        [Kind::Channel, Kind::Pattern, Kind::Shard]
            .map(|k| k.map(self).read().map_or(0, |m| m.len()))
    }

    /// Removes every subscription of every client but `keep` (`TESTMODE RESET`) and returns
    /// the clients that had one, for the caller to close: their connections still hold the
    /// names, which `drop_client` then finds gone.
    pub fn drop_all_but(&self, keep: u64) -> Vec<u64> {
        let mut dropped = Vec::new();
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            if let Ok(mut map) = kind.map(self).write() {
                map.retain(|_, subs| {
                    subs.retain(|id, _| {
                        if *id == keep {
                            return true;
                        }
                        if !dropped.contains(id) {
                            dropped.push(*id);
                        }
                        false
                    });
                    !subs.is_empty()
                });
            }
        }
        dropped
    }

    /// Removes every subscription of a client (disconnect, RESET), without confirmations.
    pub fn drop_client(&self, client: &mut ClientState) {
        let Some(subs) = client.subs.as_mut() else {
            return;
        };
        let id = client.info.id;
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            let names: Vec<Bytes> = kind.set(subs).drain(..).collect();
            if names.is_empty() {
                continue;
            }
            if let Ok(mut map) = kind.map(self).write() {
                for name in names {
                    remove_sub(&mut map, &name, id);
                }
            }
            client.info.subs[kind.info_index()].store(0, Ordering::Relaxed);
        }
    }
}

fn remove_sub(map: &mut HashMap<Bytes, Subs>, name: &Bytes, id: u64) {
    if let Some(list) = map.get_mut(name) {
        list.swap_remove(&id);
        if list.is_empty() {
            map.remove(name);
            // Mostly empty: give the table back (amortized O(1), as Redis resizes dicts).
            if map.capacity() > 64 && map.len() * 4 < map.capacity() {
                map.shrink_to(map.len() * 2);
            }
        }
    }
}

/// The pubsub class of client-output-buffer-limit.
pub(crate) fn push_limit(ctx_shared: &crate::server::Shared) -> PushLimit {
    let l = ctx_shared.live.pubsub_buffer_limit();
    PushLimit {
        hard: l.hard,
        soft: l.soft,
        soft_seconds: l.soft_seconds,
    }
}

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

fn subscribe(ctx: &mut Ctx<'_>, kind: Kind, names: &[Bytes]) -> Reply {
    if kind == Kind::Shard && ctx.in_exec {
        return CmdError::msg("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client").into();
    }
    let mut confirm = Confirm::new(ctx);
    let resp = ctx.client.resp;
    let id = ctx.client.info.id;
    ctx.client.subscriptions();
    let subs = ctx
        .client
        .subs
        .get_or_insert_with(|| Box::new(Subscriptions::new(resp)));
    let queue = subs.queue.clone();
    let Ok(mut map) = kind.map(&ctx.shared.pubsub).write() else {
        return CmdError::msg("ERR pub/sub registry unavailable").into();
    };
    for name in names {
        if kind.set(subs).insert(name.clone()) {
            map.entry(name.clone())
                .or_default()
                .insert(id, queue.clone());
        }
        confirm.send(&queue, kind.words().0, Some(name), kind.count(subs));
    }
    drop(map);
    ctx.client.info.subs[kind.info_index()].store(kind.set(subs).len(), Ordering::Relaxed);
    confirm.finish()
}

fn unsubscribe(ctx: &mut Ctx<'_>, kind: Kind, names: &[Bytes]) -> Reply {
    let mut confirm = Confirm::new(ctx);
    let resp = ctx.client.resp;
    let id = ctx.client.info.id;
    ctx.client.subscriptions();
    let subs = ctx
        .client
        .subs
        .get_or_insert_with(|| Box::new(Subscriptions::new(resp)));
    let queue = subs.queue.clone();
    let Ok(mut map) = kind.map(&ctx.shared.pubsub).write() else {
        return CmdError::msg("ERR pub/sub registry unavailable").into();
    };
    let word = kind.words().1;
    let all: Vec<Bytes>;
    let names = if names.is_empty() {
        all = kind.set(subs).iter().cloned().collect();
        if all.is_empty() {
            confirm.send(&queue, word, None, kind.count(subs));
        }
        &all[..]
    } else {
        names
    };
    for name in names {
        // swap_remove: O(1); the order left only decides an unnamed UNSUBSCRIBE's order of
        // confirmations, which in Redis is its dict's (no order).
        if kind.set(subs).swap_remove(name) {
            remove_sub(&mut map, name, id);
        }
        confirm.send(&queue, word, Some(name), kind.count(subs));
    }
    drop(map);
    ctx.client.info.subs[kind.info_index()].store(kind.set(subs).len(), Ordering::Relaxed);
    confirm.finish()
}

fn subscribe_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    subscribe(ctx, Kind::Channel, &args[1..])
}
fn psubscribe_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    subscribe(ctx, Kind::Pattern, &args[1..])
}
fn ssubscribe_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    subscribe(ctx, Kind::Shard, &args[1..])
}
fn unsubscribe_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    unsubscribe(ctx, Kind::Channel, &args[1..])
}
fn punsubscribe_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    unsubscribe(ctx, Kind::Pattern, &args[1..])
}
fn sunsubscribe_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    unsubscribe(ctx, Kind::Shard, &args[1..])
}

fn publish_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let limit = push_limit(ctx.shared);
    // A member of a Redis cluster sends it to every other node too (the count is local).
    if let Some(bus) = ctx.shared.cluster.as_ref().and_then(|c| c.bus()) {
        bus.propagate_publish(&args[1], &args[2], false);
    }
    Reply::Int(ctx.shared.pubsub.publish(&args[1], &args[2], limit) as i64)
}

fn spublish_cmd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    let limit = push_limit(ctx.shared);
    // A member of a Redis cluster sends it to the other nodes of its shard (its master and
    // that master's replicas); the count is local.
    if let Some(bus) = ctx.shared.cluster.as_ref().and_then(|c| c.bus()) {
        bus.propagate_publish(&args[1], &args[2], true);
    }
    Reply::Int(ctx.shared.pubsub.spublish(&args[1], &args[2], limit) as i64)
}

fn syntax_error(sub: &Bytes) -> Reply {
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
        crate::engine::printable(sub, 128)
    ))
    .into()
}

fn channels(map: &RwLock<HashMap<Bytes, Subs>>, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return syntax_error(&args[1]);
    }
    let pattern = args.get(2);
    let Ok(map) = map.read() else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        map.keys()
            .filter(|ch| pattern.is_none_or(|p| glob_match(p, ch, false)))
            .map(|ch| Reply::Bulk(ch.clone()))
            .collect(),
    )
}

fn numsub(map: &RwLock<HashMap<Bytes, Subs>>, args: &[Bytes]) -> Reply {
    let Ok(map) = map.read() else {
        return Reply::Array(Vec::new());
    };
    let mut out = Vec::with_capacity(2 * (args.len() - 2));
    for ch in &args[2..] {
        out.push(Reply::Bulk(ch.clone()));
        out.push(Reply::Int(map.get(ch).map_or(0, Subs::len) as i64));
    }
    Reply::Array(out)
}

fn pubsub_channels(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    channels(&ctx.shared.pubsub.channels, args)
}
fn pubsub_shardchannels(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    channels(&ctx.shared.pubsub.shard_channels, args)
}
fn pubsub_numsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    numsub(&ctx.shared.pubsub.channels, args)
}
fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    numsub(&ctx.shared.pubsub.shard_channels, args)
}
fn pubsub_numpat(ctx: &mut Ctx<'_>, _: &[Bytes]) -> Reply {
    Reply::Int(ctx.shared.pubsub.patterns.read().map_or(0, |m| m.len()) as i64)
}

fn pubsub_help(_: &mut Ctx<'_>, _: &[Bytes]) -> Reply {
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
fn pubsub_container(_: &mut Ctx<'_>, _: &[Bytes]) -> Reply {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_encoded_once_per_protocol() {
        let parts: [&[u8]; 3] = [b"message", b"ch", b"hi"];
        let mut enc = Encoded::new(&parts);
        assert_eq!(
            &enc.get(2)[..],
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            &enc.get(3)[..],
            b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        );
    }

    #[test]
    fn publish_counts_channel_and_pattern_subscribers() {
        let ps = PubSub::default();
        let q = Arc::new(PushQueue::new(2));
        ps.channels
            .write()
            .unwrap()
            .insert(Bytes::from_static(b"news"), Subs::from([(1, q.clone())]));
        ps.patterns
            .write()
            .unwrap()
            .insert(Bytes::from_static(b"n*"), Subs::from([(1, q.clone())]));
        let limit = PushLimit::default();
        assert_eq!(ps.publish(b"news", b"x", limit), 2);
        assert_eq!(ps.publish(b"other", b"x", limit), 0);
        let mut out = BytesMut::new();
        q.take_into(&mut out);
        assert_eq!(
            &out[..],
            &b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\nx\r\n*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\nx\r\n"[..]
        );
    }
}
