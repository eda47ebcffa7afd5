use super::*;

fn hash(key: &str) -> u64 {
    key_hash(key.as_bytes())
}

fn shard_with(n: usize, ttl_every: usize) -> Shard {
    let mut s = Shard::new(1, 1_000_000);
    for i in 0..n {
        let key = format!("k{i}");
        let hash = hash(&key);
        // Key i is accessed at time 1_000_000 + i * 100 (older keys have lower i).
        s.now_ms = 1_000_000 + i as u64 * 100;
        let ttl = (ttl_every > 0 && i % ttl_every == 0).then_some(5_000_000 + i as u64);
        s.insert(0, hash, key.as_bytes(), Value::Int(i as i64), ttl);
    }
    s
}

#[test]
fn entries_stay_small() {
    // A key costs a 4-byte table slot (and its control byte) plus its 72-byte entry in
    // the dense storage, which holds a key of up to 22 bytes and the TTL's wheel link.
    assert_eq!(size_of::<Entry>(), 72);
}

#[test]
fn lru_evicts_older_keys_first() {
    let mut s = shard_with(1000, 0);
    let now = 1_000_000 + 1000 * 100;
    let mut evicted_idle = Vec::new();
    for seed in 0..200u64 {
        let before: Vec<u64> = s.dbs[0].iter().map(|e| e.idle_ms(now)).collect();
        let max_idle = before.iter().copied().max().unwrap();
        assert_eq!(
            s.evict_one(
                EvictionPolicy::AllKeysLru,
                5,
                now,
                seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ),
            Some(Evicted::Key)
        );
        let after: Vec<u64> = s.dbs[0].iter().map(|e| e.idle_ms(now)).collect();
        let gone: u64 = before.iter().sum::<u64>() - after.iter().sum::<u64>();
        evicted_idle.push(gone as f64 / max_idle as f64);
    }
    assert_eq!(s.dbs[0].len(), 800);
    // With 5 samples the evicted key is, on average, among the oldest sixth.
    let mean = evicted_idle.iter().sum::<f64>() / evicted_idle.len() as f64;
    assert!(mean > 0.6, "mean relative idle of evicted keys {mean}");
}

#[test]
fn volatile_policies_only_touch_keys_with_a_ttl() {
    for policy in [
        EvictionPolicy::VolatileLru,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
    ] {
        let mut s = shard_with(100, 10);
        for seed in 0..10 {
            assert_eq!(s.evict_one(policy, 5, 1_000_000, seed), Some(Evicted::Key));
        }
        assert_eq!(s.dbs[0].len(), 90);
        assert_eq!(s.dbs[0].expires(), 0);
        assert_eq!(s.evict_one(policy, 5, 1_000_000, 0), None, "{policy:?}");
    }
    let mut s = shard_with(100, 0);
    assert_eq!(
        s.evict_one(EvictionPolicy::NoEviction, 5, 1_000_000, 0),
        None
    );
}

#[test]
fn volatile_ttl_prefers_the_nearest_deadline() {
    let mut s = shard_with(200, 1);
    // Deadlines are 5_000_000 + i: with 5 samples the chosen one is low in the order.
    let mut total = 0u64;
    for seed in 0..50u64 {
        let before: Vec<u64> = s.dbs[0].iter().filter_map(|e| e.expire_at()).collect();
        s.evict_one(EvictionPolicy::VolatileTtl, 5, 1_000_000, seed * 7919);
        let after: Vec<u64> = s.dbs[0].iter().filter_map(|e| e.expire_at()).collect();
        let gone = before.iter().sum::<u64>() - after.iter().sum::<u64>();
        let rank = before.iter().filter(|&&d| d < gone).count() as u64;
        total += rank * 100 / before.len() as u64;
    }
    assert!(
        total / 50 < 35,
        "mean percentile of evicted deadlines {}",
        total / 50
    );
}

#[test]
fn expired_keys_go_first_and_sparse_tables_are_still_sampled() {
    let mut s = shard_with(5000, 0);
    for i in 0..4995 {
        let key = format!("k{i}");
        assert!(s.remove(0, hash(&key), key.as_bytes()).is_some());
    }
    assert!(s.dbs[0].table.num_buckets() > 5 * 64 * 5);
    for seed in 0..5 {
        assert_eq!(
            s.evict_one(EvictionPolicy::AllKeysRandom, 5, 1_000_000, seed),
            Some(Evicted::Key)
        );
    }
    assert_eq!(
        s.evict_one(EvictionPolicy::AllKeysRandom, 5, 1_000_000, 9),
        None
    );
    let mut s = shard_with(10, 1);
    // Every deadline is in the past at this time: expired keys are taken first.
    assert_eq!(
        s.evict_one(EvictionPolicy::AllKeysLru, 5, 9_000_000, 3),
        Some(Evicted::Expired)
    );
    assert_eq!(s.stats.expired_keys, 1);
}
