//! Pub/sub's registry of who listens to what, and the fan-out of messages. The commands
//! (SUBSCRIBE … PUBSUB) are `commands::pubsub`.
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

/// The registry's lock was poisoned (a thread panicked holding it).
#[derive(Debug)]
pub(crate) struct Poisoned;

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

    /// The client's own set of this kind's names.
    pub(crate) fn set(self, s: &mut Subscriptions) -> &mut indexmap::IndexSet<Bytes> {
        match self {
            Kind::Channel => &mut s.channels,
            Kind::Pattern => &mut s.patterns,
            Kind::Shard => &mut s.shard_channels,
        }
    }

    pub(crate) fn words(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }

    /// The count a confirmation reports: channels + patterns, or shard channels.
    pub(crate) fn count(self, s: &Subscriptions) -> usize {
        match self {
            Kind::Shard => s.shard_channels.len(),
            _ => s.count(),
        }
    }

    /// Its index in `ClientInfo::subs` (CLIENT LIST's sub, psub, ssub).
    pub(crate) fn info_index(self) -> usize {
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

    /// Subscribes client `id` (its queue `queue`, its own sets `subs`) to `names` as `kind`;
    /// `confirm(name, count)` runs for each name while the registry's write lock is held,
    /// so a message published right after can never overtake its confirmation. `Err` if
    /// the registry's lock is poisoned.
    pub(crate) fn subscribe(
        &self,
        kind: Kind,
        id: u64,
        queue: &Arc<PushQueue>,
        subs: &mut Subscriptions,
        names: &[Bytes],
        mut confirm: impl FnMut(Option<&Bytes>, usize),
    ) -> Result<(), Poisoned> {
        let mut map = kind.map(self).write().map_err(|_| Poisoned)?;
        for name in names {
            if kind.set(subs).insert(name.clone()) {
                map.entry(name.clone())
                    .or_default()
                    .insert(id, queue.clone());
            }
            confirm(Some(name), kind.count(subs));
        }
        Ok(())
    }

    /// Unsubscribes client `id` from `names` as `kind`, or from all its names of that kind
    /// when `names` is empty (one `confirm(None, count)` if it has none); confirmations as
    /// in [`subscribe`](Self::subscribe).
    pub(crate) fn unsubscribe(
        &self,
        kind: Kind,
        id: u64,
        subs: &mut Subscriptions,
        names: &[Bytes],
        mut confirm: impl FnMut(Option<&Bytes>, usize),
    ) -> Result<(), Poisoned> {
        let mut map = kind.map(self).write().map_err(|_| Poisoned)?;
        let all: Vec<Bytes>;
        let names = if names.is_empty() {
            all = kind.set(subs).iter().cloned().collect();
            if all.is_empty() {
                confirm(None, kind.count(subs));
            }
            &all[..]
        } else {
            names
        };
        for name in names {
            // swap_remove: O(1); the order left only decides an unnamed UNSUBSCRIBE's order
            // of confirmations, which in Redis is its dict's (no order).
            if kind.set(subs).swap_remove(name) {
                remove_sub(&mut map, name, id);
            }
            confirm(Some(name), kind.count(subs));
        }
        Ok(())
    }

    /// The channels (or shard channels) of `kind` with a subscriber, matching `pattern`
    /// if given (PUBSUB CHANNELS / SHARDCHANNELS).
    pub(crate) fn active(&self, kind: Kind, pattern: Option<&Bytes>) -> Vec<Bytes> {
        let Ok(map) = kind.map(self).read() else {
            return Vec::new();
        };
        map.keys()
            .filter(|ch| pattern.is_none_or(|p| glob_match(p, ch, false)))
            .cloned()
            .collect()
    }

    /// How many clients subscribe to each of `names` as `kind` (PUBSUB NUMSUB /
    /// SHARDNUMSUB); None if the registry's lock is poisoned.
    pub(crate) fn subscribers(&self, kind: Kind, names: &[Bytes]) -> Option<Vec<usize>> {
        let map = kind.map(self).read().ok()?;
        Some(
            names
                .iter()
                .map(|ch| map.get(ch).map_or(0, Subs::len))
                .collect(),
        )
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
