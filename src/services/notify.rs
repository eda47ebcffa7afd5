//! Keyspace notifications (`notify-keyspace-events`): the events a command emits, collected
//! while it runs and published once its shards are released.
//!
//! A handler calls [`Ctx::notify`] with Redis's class and event name where Redis calls
//! `notifyKeyspaceEvent`, in the same order. With notifications off (or the class not
//! selected) that is one test of a flag cached in the `Ctx` when it was built: no
//! allocation. Otherwise the event joins `Ctx::events`, after the key events the store
//! logged meanwhile (`store::keylog`: keys created, lazily expired, read misses), so
//! `expired` and `new` come where Redis emits them, before the command's own event.
//!
//! Publishing is a PUBLISH through the pub/sub registry on `__keyspace@<db>__:<key>`
//! (message: the event) and `__keyevent@<db>__:<event>` (message: the key), as selected by
//! `K` and `E`. It never happens under a shard lock: `engine::execute` publishes a command's
//! events (an EXEC's or a script's, all of them in order) after dropping its locks and before
//! serving blocked clients; the reapers and eviction hand theirs over after releasing the
//! shard ([`publish_key_events`]).
//!
//! May use: `config` (the class bits), `store::keylog`, `services::pubsub`.

use bytes::Bytes;

pub(crate) use crate::config::keyspace_events as class;
use crate::engine::Ctx;
use crate::server::Shared;
use crate::store::keylog::{self, KeyEvent};

/// One event to publish.
#[derive(Debug)]
struct Event {
    name: &'static str,
    db: usize,
    key: Bytes,
}

/// The events a command (an EXEC, a script) emitted, and the classes selected when it began.
#[derive(Debug, Default)]
pub struct Events {
    /// The selected classes; 0 if nothing is published (no class, or neither `K` nor `E`).
    flags: u32,
    list: Vec<Event>,
}

impl Events {
    /// The collector for a command starting now.
    #[inline]
    pub fn new(shared: &Shared) -> Self {
        Events {
            flags: effective(shared.live.notify_keyspace_events()),
            list: Vec::new(),
        }
    }

    /// True if the list was never grown: dropping it would free nothing (`Ctx::end`).
    #[inline]
    pub(crate) fn owns_nothing(&self) -> bool {
        self.list.capacity() == 0
    }

    /// True if events of `class` are published.
    #[inline]
    pub fn wants(&self, class: u32) -> bool {
        self.flags & class != 0
    }

    /// Appends `other`'s events (EXEC's inner context, served blocked clients).
    pub fn extend(&mut self, other: Events) {
        self.list.extend(other.list);
    }
}

/// The flags that publish anything: 0 unless `K` or `E` is set with some class.
fn effective(flags: u32) -> u32 {
    if flags & (class::KEYSPACE | class::KEYEVENT) == 0 {
        0
    } else {
        flags
    }
}

/// The store's key events to log for `flags` (see `store::keylog`).
pub(crate) fn log_mask(flags: u32) -> u8 {
    let flags = effective(flags);
    let mut mask = 0;
    for (c, kind) in [
        (class::NEW, keylog::NEW),
        (class::EXPIRED, keylog::EXPIRED),
        (class::EVICTED, keylog::EVICTED),
        (class::KEY_MISS, keylog::KEYMISS),
        (class::HASH, keylog::HEXPIRED),
        (class::GENERIC, keylog::DEL),
    ] {
        if flags & c != 0 {
            mask |= kind;
        }
    }
    mask
}

/// Makes the store log what `flags` select; called at start and by CONFIG SET.
pub(crate) fn configure(shared: &Shared, flags: u32) {
    shared.keyspace.set_log_mask(log_mask(flags));
}

fn kind_name(kind: u8) -> &'static str {
    match kind {
        keylog::NEW => "new",
        keylog::EXPIRED => "expired",
        keylog::EVICTED => "evicted",
        keylog::HEXPIRED => "hexpired",
        keylog::DEL => "del",
        _ => "keymiss",
    }
}

impl Ctx<'_> {
    /// Emits event `name` of class `class` for `key` in the client's database (Redis's
    /// `notifyKeyspaceEvent`), after the key events the store logged so far.
    #[inline]
    pub(crate) fn notify(&mut self, class: u32, name: &'static str, key: &[u8]) {
        if self.events.wants(class) {
            let db = self.db();
            self.notify_in(db, name, key);
        }
    }

    /// `notify` for a key of database `db` (MOVE, COPY … DB); the class is checked by the
    /// caller with [`Events::wants`] or is the one `notify` checked.
    pub(crate) fn notify_db(&mut self, class: u32, db: usize, name: &'static str, key: &[u8]) {
        if self.events.wants(class) {
            self.notify_in(db, name, key);
        }
    }

    fn notify_in(&mut self, db: usize, name: &'static str, key: &[u8]) {
        self.take_store_events();
        self.events.list.push(Event {
            name,
            db,
            key: Bytes::copy_from_slice(key),
        });
    }

    /// Emits `del` for `key` if it no longer exists (an aggregate the command emptied).
    pub(crate) fn notify_if_deleted(&mut self, key: &[u8]) {
        if self.events.wants(class::GENERIC) {
            let db = self.db();
            if self.store.lookup_untouched(db, key, self.now_ms).is_none() {
                self.notify_in(db, "del", key);
            }
        }
    }

    /// Moves the key events the held shards logged into the command's events.
    #[inline]
    pub(crate) fn take_store_events(&mut self) {
        // Inline: every command passes here, and notifications are usually off.
        if self.events.flags == 0 {
            return;
        }
        self.take_logged_events();
    }

    #[inline(never)]
    fn take_logged_events(&mut self) {
        let mut logged = Vec::new();
        self.store.take_log(&mut logged);
        self.events.list.extend(logged.into_iter().map(store_event));
    }

    /// The command's events, the store's last ones included, to publish once the locks are
    /// dropped.
    pub(crate) fn take_events(&mut self) -> Events {
        self.take_store_events();
        std::mem::take(&mut self.events)
    }
}

fn store_event((kind, db, key): KeyEvent) -> Event {
    Event {
        name: kind_name(kind),
        db,
        key: Bytes::from(key.into_vec()),
    }
}

/// Publishes a command's events, in order. Call with no shard lock held.
#[inline]
pub(crate) fn publish(shared: &Shared, events: Events) {
    // Inline: every command passes here, and almost always with nothing to publish.
    if events.list.is_empty() {
        return;
    }
    publish_all(shared, events);
}

/// [`publish`] for events still in their collector (a client's command, its locks just
/// dropped): taken out only when there is one, so the common empty case moves and drops
/// nothing.
#[inline]
pub(crate) fn publish_taken(shared: &Shared, events: &mut Events) {
    if events.list.is_empty() {
        return;
    }
    publish_all(shared, std::mem::take(events));
}

#[inline(never)]
fn publish_all(shared: &Shared, events: Events) {
    // The classes in force now decide K/E, as Redis reads them at each notification.
    let flags = effective(shared.live.notify_keyspace_events());
    for e in events.list {
        publish_one(shared, flags, &e);
    }
}

/// Publishes the key events a reaper or an eviction took from a shard it released.
pub(crate) fn publish_key_events(shared: &Shared, events: Vec<KeyEvent>) {
    let flags = effective(shared.live.notify_keyspace_events());
    for e in events {
        publish_one(shared, flags, &store_event(e));
    }
}

fn publish_one(shared: &Shared, flags: u32, e: &Event) {
    let limit = crate::services::pubsub::push_limit(shared);
    if flags & class::KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{}__:", e.db).into_bytes();
        chan.extend_from_slice(&e.key);
        shared.pubsub.publish(&chan, e.name.as_bytes(), limit);
    }
    if flags & class::KEYEVENT != 0 {
        let chan = format!("__keyevent@{}__:{}", e.db, e.name);
        shared.pubsub.publish(chan.as_bytes(), &e.key, limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_logs_only_what_is_published() {
        assert_eq!(log_mask(0), 0);
        // Classes without K or E publish nothing, so nothing is logged.
        assert_eq!(log_mask(class::ALL | class::NEW), 0);
        assert_eq!(
            log_mask(class::ALL | class::KEYSPACE),
            keylog::EXPIRED | keylog::EVICTED | keylog::HEXPIRED | keylog::DEL
        );
        assert_eq!(
            log_mask(class::NEW | class::KEY_MISS | class::KEYEVENT),
            keylog::NEW | keylog::KEYMISS
        );
    }
}
