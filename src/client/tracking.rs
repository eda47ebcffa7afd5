//! Client-side caching (CLIENT TRACKING, Redis 7.0's `tracking.c` behaviour): which clients
//! may hold which keys, and the invalidation messages they get when those keys change.
//!
//! Three tables, under one leaf lock (taken inside a shard's lock by the store's
//! `touch`, and never held while taking anything but a client's own small locks):
//! - the tracking table, key → the ids of the clients that read it in the default mode. A
//!   change of the key sends each of them one invalidation and forgets the key (the table
//!   holds only keys someone may still cache). It is bounded by `tracking-table-max-keys`:
//!   past it, keys picked at random are invalidated, 100 more per pass while it stays over,
//!   as Redis does; an `IndexMap` makes each pick and removal O(1);
//! - the prefix table of the BCAST mode, prefix → its clients and the keys under it changed
//!   since the last broadcast, sent as one message per prefix after the command that changed
//!   them (Redis sends once per event-loop turn);
//! - the set of tracking clients (INFO's `tracking_clients`; FLUSHALL tells each of them).
//!
//! A message goes to the tracking client in RESP3 (a `invalidate` push), or to the client it
//! redirects to: a push if that one speaks RESP3, a `__redis__:invalidate` pub/sub message if
//! it is subscribed in RESP2. A message for the client whose command is running is held
//! until its reply is out (Redis's pending invalidations), so it never comes between a reply
//! and its request; the thread-local [`Current`] says which client that is.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use indexmap::IndexMap;

use super::push::PushLimit;
use super::{ClientInfo, Registry};

/// One client's tracking mode (CLIENT TRACKING's options), kept in its `ClientInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mode {
    /// Tracking is on.
    pub on: bool,
    /// BCAST: every change under its prefixes, whatever it read.
    pub bcast: bool,
    /// OPTIN: only reads after CLIENT CACHING YES are tracked.
    pub optin: bool,
    /// OPTOUT: reads after CLIENT CACHING NO are not tracked.
    pub optout: bool,
    /// NOLOOP: not told of its own changes.
    pub noloop: bool,
    /// The client it redirects to was gone when a message was due.
    pub broken_redirect: bool,
    /// The id of the client its messages go to (0: itself).
    pub redirect: u64,
    /// BCAST's prefixes, in byte order (as Redis lists them).
    pub prefixes: BTreeSet<Bytes>,
}

/// What CLIENT TRACKING ON asks for.
#[derive(Debug, Default)]
pub struct Options {
    /// REDIRECT id (0: none).
    pub redirect: u64,
    /// BCAST.
    pub bcast: bool,
    /// OPTIN.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// NOLOOP.
    pub noloop: bool,
    /// PREFIX arguments, in the order given.
    pub prefixes: Vec<Bytes>,
}

#[derive(Debug, Default)]
struct Bcast {
    /// Keys changed under this prefix since the last broadcast, in byte order, each with the
    /// id of the client that changed it last (0: the server itself), for NOLOOP.
    keys: BTreeMap<Bytes, u64>,
    /// The clients listening to it.
    clients: BTreeSet<u64>,
}

#[derive(Debug, Default)]
struct Tables {
    /// Key → ids of the clients that may cache it.
    keys: IndexMap<Bytes, Vec<u64>>,
    /// The (key, client) pairs in `keys`.
    items: usize,
    prefixes: BTreeMap<Bytes, Bcast>,
    /// The tracking clients.
    clients: BTreeSet<u64>,
    /// Consecutive passes that left the table over its bound (more effort each time).
    over_passes: u32,
    /// State of the random picks of `limit`.
    seed: u64,
    /// The output limit messages are queued under (pub/sub's: `after_command` keeps it).
    push_limit: PushLimit,
    /// `tracking-table-max-keys`, as `after_command` last saw it, for `tick`.
    max_keys: u64,
}

/// The server's tracking state (one per keyspace).
#[derive(Debug, Default)]
pub struct Tracking {
    registry: OnceLock<Arc<Registry>>,
    /// Tracking clients: while 0, a key change costs one load.
    active: AtomicUsize,
    tables: Mutex<Tables>,
}

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// While alive, the client `id` is the one whose command runs on this thread (Redis's
/// `current_client` during `call`): its own invalidations wait for its reply.
#[derive(Debug)]
pub(crate) struct Current(u64);

impl Current {
    /// Marks `id` as running a command on this thread.
    pub(crate) fn enter(id: u64) -> Current {
        Current(CURRENT.replace(id))
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        CURRENT.set(self.0);
    }
}

/// `*1\r\n$<len>\r\n<key>\r\n`: one key as the message's value.
fn one_key(key: &[u8]) -> BytesMut {
    let mut b = BytesMut::with_capacity(key.len() + 16);
    b.put_slice(b"*1\r\n");
    bulk(&mut b, key);
    b
}

fn bulk(b: &mut BytesMut, s: &[u8]) {
    b.put_u8(b'$');
    b.put_slice(s.len().to_string().as_bytes());
    b.put_slice(b"\r\n");
    b.put_slice(s);
    b.put_slice(b"\r\n");
}

/// A prefix that is a prefix of the other (Redis's overlap rule).
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl Tracking {
    /// Gives the tracking state the registry it finds clients in (once, at start).
    pub fn set_registry(&self, registry: Arc<Registry>) {
        let _ = self.registry.set(registry);
    }

    /// True while any client tracks.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// INFO's (tracking_clients, tracking_total_keys, tracking_total_items,
    /// tracking_total_prefixes).
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        match self.tables.lock() {
            Ok(t) => (t.clients.len(), t.keys.len(), t.items, t.prefixes.len()),
            Err(_) => (0, 0, 0, 0),
        }
    }

    /// Checks CLIENT TRACKING ON's prefixes against the client's and each other: Redis's
    /// error text for the first overlap.
    pub fn check_prefixes(mode: &Mode, new: &[Bytes]) -> Result<(), String> {
        for (i, p) in new.iter().enumerate() {
            for old in &mode.prefixes {
                if overlaps(old, p) {
                    return Err(format!(
                        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(old)
                    ));
                }
            }
            for q in &new[i + 1..] {
                if overlaps(p, q) {
                    return Err(format!(
                        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                        String::from_utf8_lossy(p),
                        String::from_utf8_lossy(q)
                    ));
                }
            }
        }
        Ok(())
    }

    /// CLIENT TRACKING ON (options already checked).
    pub fn enable(&self, client: &ClientInfo, opts: Options) {
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        let Ok(mut mode) = client.tracking.lock() else {
            return;
        };
        if !mode.on {
            self.active.fetch_add(1, Ordering::Relaxed);
            t.clients.insert(client.id);
        }
        mode.on = true;
        mode.broken_redirect = false;
        mode.redirect = opts.redirect;
        mode.bcast = opts.bcast;
        mode.optin = opts.optin;
        mode.optout = opts.optout;
        mode.noloop = opts.noloop;
        if opts.bcast {
            let mut add = |p: Bytes, mode: &mut Mode| {
                let b = t.prefixes.entry(p.clone()).or_default();
                if b.clients.insert(client.id) {
                    mode.prefixes.insert(p);
                }
            };
            if opts.prefixes.is_empty() {
                add(Bytes::new(), &mut mode);
            }
            for p in opts.prefixes {
                add(p, &mut mode);
            }
        }
    }

    /// Gives `target` (a REDIRECT's) a push queue if it has none, for its connection to take
    /// up after its next command: a RESP3 client that neither subscribes nor tracks can then
    /// still receive the messages redirected to it.
    pub fn offer_queue(target: &ClientInfo) {
        let Ok(mut push) = target.push.lock() else {
            return;
        };
        if push.is_none() {
            *push = Some(Arc::new(super::push::PushQueue::new(
                target.resp.load(Ordering::Relaxed),
            )));
            target.push_offered.store(true, Ordering::Relaxed);
        }
    }

    /// CLIENT TRACKING OFF, RESET, or the connection closing. Its keys stay in the table
    /// (as in Redis: a later change finds the id gone or not tracking, and skips it).
    pub fn disable(&self, client: &ClientInfo) {
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        let Ok(mut mode) = client.tracking.lock() else {
            return;
        };
        for p in std::mem::take(&mut mode.prefixes) {
            if let Some(b) = t.prefixes.get_mut(&p) {
                b.clients.remove(&client.id);
                if b.clients.is_empty() {
                    t.prefixes.remove(&p);
                }
            }
        }
        if mode.on {
            self.active.fetch_sub(1, Ordering::Relaxed);
            t.clients.remove(&client.id);
        }
        *mode = Mode::default();
    }

    /// A tracking client read `keys`: remember it may cache them.
    pub fn remember<'k>(&self, client: u64, keys: impl Iterator<Item = &'k [u8]>) {
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        for key in keys {
            let ids = match t.keys.get_mut(key) {
                Some(ids) => ids,
                None => {
                    t.keys.insert(Bytes::copy_from_slice(key), Vec::new());
                    let Some((_, ids)) = t.keys.last_mut() else {
                        continue;
                    };
                    ids
                }
            };
            // Few clients read one key, so a scan beats a set here.
            if !ids.contains(&client) {
                ids.push(client);
                t.items += 1;
            }
        }
    }

    /// `key` changed (Redis's `trackingInvalidateKey` from `signalModifiedKey`): its
    /// readers are told, and the BCAST prefixes it falls under note it.
    pub fn invalidate(&self, key: &[u8]) {
        if !self.is_active() {
            return;
        }
        let current = CURRENT.get();
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        for (p, b) in t.prefixes.iter_mut() {
            if key.starts_with(p) {
                b.keys.insert(Bytes::copy_from_slice(key), current);
            }
        }
        self.invalidate_tracked(&mut t, key, current);
    }

    /// Tells the clients that read `key` and forgets it.
    fn invalidate_tracked(&self, t: &mut Tables, key: &[u8], current: u64) {
        let Some(ids) = t.keys.swap_remove(key) else {
            return;
        };
        t.items -= ids.len();
        let Some(registry) = self.registry.get() else {
            return;
        };
        for id in ids {
            let Some(target) = registry.get(id) else {
                continue;
            };
            let Ok(mut mode) = target.tracking.lock() else {
                continue;
            };
            if !mode.on || mode.bcast || (mode.noloop && id == current) {
                continue;
            }
            let held = id == current;
            send(
                registry,
                &target,
                &mut mode,
                &one_key(key),
                held,
                t.push_limit,
            );
        }
    }

    /// FLUSHALL / FLUSHDB: every tracking client is told that all its keys are invalid (a
    /// null), and the table is emptied.
    pub fn flush(&self) {
        if !self.is_active() {
            if let Ok(mut t) = self.tables.lock() {
                t.keys = IndexMap::new();
                t.items = 0;
            }
            return;
        }
        let current = CURRENT.get();
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        if let Some(registry) = self.registry.get() {
            for &id in &t.clients {
                let Some(target) = registry.get(id) else {
                    continue;
                };
                let Ok(mut mode) = target.tracking.lock() else {
                    continue;
                };
                let null: &[u8] = if target.resp.load(Ordering::Relaxed) > 2 {
                    b"_\r\n"
                } else {
                    b"$-1\r\n"
                };
                send(
                    registry,
                    &target,
                    &mut mode,
                    null,
                    id == current,
                    t.push_limit,
                );
            }
        }
        t.keys = IndexMap::new();
        t.items = 0;
    }

    /// After a command (or a reaper's pass): sends BCAST's collected keys, and brings the
    /// tracking table back under `max_keys` (0: no bound).
    pub fn after_command(&self, max_keys: u64, push_limit: PushLimit) {
        if !self.is_active() {
            return;
        }
        let current = CURRENT.get();
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        t.push_limit = push_limit;
        t.max_keys = max_keys;
        self.broadcast(&mut t);
        self.limit(&mut t, max_keys, current);
    }

    /// `after_command` for the store's own changes (a reaper's pass; Redis's `serverCron` and
    /// `beforeSleep`): with the bound and limit the last command saw.
    pub fn tick(&self) {
        if !self.is_active() {
            return;
        }
        let Ok(mut t) = self.tables.lock() else {
            return;
        };
        self.broadcast(&mut t);
        let max_keys = t.max_keys;
        self.limit(&mut t, max_keys, 0);
    }

    fn broadcast(&self, t: &mut Tables) {
        let Some(registry) = self.registry.get() else {
            return;
        };
        let limit = t.push_limit;
        for b in t.prefixes.values_mut() {
            if b.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut b.keys);
            let all = encode_keys(&keys, None);
            for &id in &b.clients {
                let Some(target) = registry.get(id) else {
                    continue;
                };
                let Ok(mut mode) = target.tracking.lock() else {
                    continue;
                };
                if mode.noloop {
                    if let Some(own) = encode_keys(&keys, Some(id)) {
                        send(registry, &target, &mut mode, &own, false, limit);
                    }
                } else if let Some(all) = &all {
                    send(registry, &target, &mut mode, all, false, limit);
                }
            }
        }
    }

    /// Redis's `trackingLimitUsedSlots`: random keys invalidated until the table is back
    /// under its bound, up to 100 per pass the table has stayed over it.
    fn limit(&self, t: &mut Tables, max_keys: u64, current: u64) {
        if max_keys == 0 || t.keys.len() as u64 <= max_keys {
            t.over_passes = 0;
            return;
        }
        let mut effort = 100 * (t.over_passes as u64 + 1);
        while effort > 0 && !t.keys.is_empty() {
            effort -= 1;
            // xorshift64: a cheap, good enough pick.
            let mut x = t.seed.max(1) ^ 0x9e37_79b9_7f4a_7c15;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t.seed = x;
            let i = (x % t.keys.len() as u64) as usize;
            let Some(key) = t.keys.get_index(i).map(|(k, _)| k.clone()) else {
                break;
            };
            self.invalidate_tracked(t, &key, current);
            if t.keys.len() as u64 <= max_keys {
                t.over_passes = 0;
                return;
            }
        }
        t.over_passes = t.over_passes.saturating_add(1);
    }
}

/// Redis's `sendTrackingMessage`: `value` (a key array, or a null) to `client`, or to the
/// client it redirects to. `held`: `client` is the one whose command runs, and the message
/// waits for its reply.
fn send(
    registry: &Registry,
    client: &ClientInfo,
    mode: &mut Mode,
    value: &[u8],
    held: bool,
    limit: PushLimit,
) {
    let own_resp = client.resp.load(Ordering::Relaxed);
    let mut redirected = None;
    if mode.redirect != 0 {
        match registry.get(mode.redirect) {
            Some(r) => redirected = Some(r),
            None => {
                mode.broken_redirect = true;
                if own_resp > 2 {
                    let mut msg = BytesMut::new();
                    msg.put_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
                    msg.put_slice(mode.redirect.to_string().as_bytes());
                    msg.put_slice(b"\r\n");
                    deliver(client, msg.freeze(), held, limit);
                }
                return;
            }
        }
    }
    let target = redirected.as_deref().unwrap_or(client);
    let mut msg = BytesMut::with_capacity(value.len() + 48);
    if target.resp.load(Ordering::Relaxed) > 2 {
        msg.put_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else if redirected.is_some() && target.subs.iter().any(|s| s.load(Ordering::Relaxed) > 0) {
        msg.put_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    } else {
        // RESP2 without a subscribed redirection: nothing can carry it.
        return;
    }
    msg.put_slice(value);
    deliver(target, msg.freeze(), held && redirected.is_none(), limit);
}

/// Queues `msg` for `target`'s connection (held for after its reply when `held`).
fn deliver(target: &ClientInfo, msg: Bytes, held: bool, limit: PushLimit) {
    let queue = target.push.lock().ok().and_then(|q| q.clone());
    if let Some(q) = queue {
        if held {
            q.push_held(msg);
        } else {
            q.push(msg, limit);
        }
    }
}

/// The array of `keys`, leaving out those `skip` changed last (NOLOOP); None if empty.
fn encode_keys(keys: &BTreeMap<Bytes, u64>, skip: Option<u64>) -> Option<BytesMut> {
    let n = keys.values().filter(|&&by| Some(by) != skip).count();
    if n == 0 {
        return None;
    }
    let mut b = BytesMut::new();
    b.put_u8(b'*');
    b.put_slice(n.to_string().as_bytes());
    b.put_slice(b"\r\n");
    for (k, &by) in keys {
        if Some(by) != skip {
            bulk(&mut b, k);
        }
    }
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn prefixes_overlap_as_redis_says() {
        let mut mode = Mode::default();
        mode.prefixes.insert(b("BAR"));
        let e = Tracking::check_prefixes(&mode, &[b("BARB")]).unwrap_err();
        assert!(e.starts_with("ERR Prefix 'BARB' overlaps with an existing prefix 'BAR'"));
        let e = Tracking::check_prefixes(&Mode::default(), &[b("FOO"), b("FO")]).unwrap_err();
        assert!(e.contains("'FOO' overlaps with another provided prefix 'FO'"));
        assert!(Tracking::check_prefixes(&mode, &[b("FOO"), b("BAZ")]).is_ok());
    }

    #[test]
    fn the_table_stays_under_its_bound_and_counts_items() {
        let t = Tracking::default();
        t.registry.set(Arc::new(Registry::default())).unwrap();
        t.active.store(1, Ordering::Relaxed);
        let keys: Vec<String> = (0..250).map(|i| format!("k{i}")).collect();
        t.remember(7, keys.iter().map(|k| k.as_bytes()));
        t.remember(8, [b"k1".as_slice()].into_iter());
        t.remember(8, [b"k1".as_slice()].into_iter());
        assert_eq!(t.stats(), (0, 250, 251, 0));
        // One pass may take 100, the next 200: the bound is reached in two.
        t.after_command(1, PushLimit::default());
        assert_eq!(t.stats().1, 150);
        t.after_command(1, PushLimit::default());
        assert_eq!(t.stats().1, 1);
        t.invalidate(b"nothing");
        t.flush();
        assert_eq!(t.stats(), (0, 0, 0, 0));
    }

    #[test]
    fn broadcast_arrays_skip_the_noloop_clients_own_keys() {
        let mut keys = BTreeMap::new();
        keys.insert(b("b"), 1);
        keys.insert(b("a"), 2);
        assert_eq!(
            &encode_keys(&keys, None).unwrap()[..],
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        assert_eq!(
            &encode_keys(&keys, Some(2)).unwrap()[..],
            b"*1\r\n$1\r\nb\r\n"
        );
        keys.remove(&b("b"));
        assert!(encode_keys(&keys, Some(2)).is_none());
    }
}
