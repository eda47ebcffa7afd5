use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Checks every invariant tying a database's table, entries and wheel together.
fn check(s: &Shard, model: &BTreeMap<u16, (i64, Option<u64>)>) {
    let d = &s.dbs[0];
    assert_eq!(d.len(), model.len());
    assert_eq!(d.entries.len(), model.len());
    let with_ttl = model.values().filter(|v| v.1.is_some()).count();
    assert_eq!(d.expires(), with_ttl);
    assert_eq!(d.wheel.as_ref().map_or(0, |w| w.len()), with_ttl);
    for (k, &(v, ttl)) in model {
        let key = k.to_be_bytes();
        let e = s.peek(0, key_hash(&key), &key).expect("key present");
        assert!(matches!(e.value, Value::Int(x) if x == v));
        assert_eq!(e.expire_at(), ttl);
        assert_eq!(e.link.is_linked(), ttl.is_some());
    }
    // Every slot points at an entry stored under its own key's hash.
    for (i, e) in d.entries.iter().enumerate() {
        let found = d.index_of(key_hash(&e.key), &e.key);
        assert_eq!(found, Some(i as u32));
    }
}

/// The model's value of `k` if it is live at `now`.
fn live_in(
    model: &BTreeMap<u16, (i64, Option<u64>)>,
    k: u16,
    now: u64,
) -> Option<(i64, Option<u64>)> {
    model
        .get(&k)
        .copied()
        .filter(|v| v.1.is_none_or(|at| now <= at))
}

#[derive(Debug, Clone)]
enum Op {
    Set(u16, Option<u64>),
    Expire(u16, Option<u64>),
    Del(u16),
    Find(u16),
    Advance(u64, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let ttl = prop_oneof![Just(None), (0u64..2_000).prop_map(Some)];
    prop_oneof![
        6 => (0u16..3_000, ttl.clone()).prop_map(|(k, t)| Op::Set(k, t)),
        2 => (0u16..3_000, ttl).prop_map(|(k, t)| Op::Expire(k, t)),
        2 => (0u16..3_000).prop_map(Op::Del),
        1 => (0u16..3_000).prop_map(Op::Find),
        1 => (0u64..300, 1usize..200).prop_map(|(a, m)| Op::Advance(a, m)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random writes, TTL changes, deletions, lookups and reaper passes against a model:
    /// the dense storage's moves never lose a key, a timer or a table slot, and a key is
    /// gone (lazily or by the reaper) exactly once its TTL has passed.
    #[test]
    fn the_keyspace_matches_a_model(ops in prop::collection::vec(op(), 1..1_500)) {
        let mut s = Shard::new(1, 1_000);
        let mut now = 1_000u64;
        let mut model: BTreeMap<u16, (i64, Option<u64>)> = BTreeMap::new();
        let mut next = 0i64;
        // Keys enough to fill the first chunk of the entry storage, some with a TTL, so
        // that the random ones below move entries across a chunk boundary.
        for k in 10_000u16..11_100 {
            let key = k.to_be_bytes();
            let at = k.is_multiple_of(3).then_some(now + u64::from(k % 700));
            s.insert(0, key_hash(&key), &key, Value::Int(next), at);
            model.insert(k, (next, at));
            next += 1;
        }
        for op in ops {
            match op {
                Op::Set(k, ttl) => {
                    let key = k.to_be_bytes();
                    let at = ttl.map(|t| now + t);
                    s.find(0, key_hash(&key), &key, now);
                    s.insert(0, key_hash(&key), &key, Value::Int(next), at);
                    model.insert(k, (next, at));
                    next += 1;
                }
                Op::Expire(k, ttl) => {
                    let key = k.to_be_bytes();
                    let at = ttl.map(|t| now + t);
                    let live = s.find(0, key_hash(&key), &key, now).is_some();
                    prop_assert_eq!(live, live_in(&model, k, now).is_some());
                    if live {
                        prop_assert!(s.set_expire(0, key_hash(&key), &key, at));
                        if let Some(m) = model.get_mut(&k) {
                            m.1 = at;
                        }
                    }
                }
                Op::Del(k) => {
                    let key = k.to_be_bytes();
                    s.find(0, key_hash(&key), &key, now);
                    let gone = s.remove(0, key_hash(&key), &key);
                    prop_assert_eq!(gone.is_some(), live_in(&model, k, now).is_some());
                    model.remove(&k);
                }
                Op::Find(k) => {
                    let key = k.to_be_bytes();
                    let got = s.find(0, key_hash(&key), &key, now).map(|e| e.expire_at());
                    prop_assert_eq!(got, live_in(&model, k, now).map(|v| v.1));
                }
                Op::Advance(by, max) => {
                    now += by;
                    while s.reap(now, max).1 {}
                    // Every key past its TTL is gone, and only those.
                    model.retain(|_, v| v.1.is_none_or(|at| now <= at));
                    prop_assert!(s.next_deadline().is_none_or(|d| d > now));
                }
            }
            // Lazily expired keys leave the model too.
            model.retain(|k, v| {
                let key = k.to_be_bytes();
                v.1.is_none_or(|at| now <= at) || s.peek(0, key_hash(&key), &key).is_some()
            });
        }
        check(&s, &model);
    }
}

#[test]
fn a_mass_expiry_gives_the_storage_back() {
    let mut s = Shard::new(1, 0);
    for k in 0..20_000u32 {
        let key = k.to_be_bytes();
        let ttl = (k >= 100).then_some(5_000);
        s.insert(0, key_hash(&key), &key, Value::Int(1), ttl);
    }
    let before = s.structure_memory();
    let mut batches = 0;
    while s.reap(5_001, 128).1 {
        batches += 1;
    }
    assert!(batches >= 20_000 / 128 - 1);
    assert_eq!(s.dbs[0].len(), 100);
    assert_eq!(s.dbs[0].expires(), 0);
    assert!(s.dbs[0].entries.capacity() <= 200);
    assert!(s.structure_memory() < before / 20);
    for k in 0..100u32 {
        let key = k.to_be_bytes();
        assert!(s.find(0, key_hash(&key), &key, 5_001).is_some());
    }
}

#[test]
fn swapdb_and_flushdb_take_the_timers_along() {
    let mut s = Shard::new(2, 0);
    let key = b"rate:1";
    s.insert(0, key_hash(key), key, Value::Int(1), Some(100));
    s.swap_dbs(0, 1);
    assert!(s.peek(0, key_hash(key), key).is_none());
    assert_eq!(s.next_deadline(), Some(101));
    assert_eq!(s.reap(101, 10), (1, false));
    assert!(s.peek(1, key_hash(key), key).is_none());
    s.insert(1, key_hash(key), key, Value::Int(1), Some(200));
    s.flush_db(1);
    assert_eq!(s.next_deadline(), None);
    assert_eq!(s.reap(1_000, 10), (0, false));
}
