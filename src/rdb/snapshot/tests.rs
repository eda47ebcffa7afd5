use super::*;
use crate::store::value::{HashValue, SetValue};
use crate::store::zset::SortedSet;

fn opts() -> SaveOptions {
    SaveOptions {
        redis_version: "7.0.15".into(),
        ctime_s: 1_700_000_000,
        used_mem: 1000,
        checksum: true,
        now_ms: 1_000,
        aof_base: false,
    }
}

fn lopts() -> LoadOptions {
    LoadOptions {
        now_ms: 1_000,
        limits: ZsetLimits::DEFAULT,
    }
}

fn sample() -> Keyspace {
    let ks = Keyspace::new(4, 4, 0);
    let mut l = ks.lock_all();
    l.set(0, b"int", Value::Int(-7), None);
    l.set(
        0,
        b"str",
        Value::Str(Bytes::from_static(b"hello").into()),
        Some(5_000),
    );
    l.set(0, b"gone", Value::Int(1), Some(500));
    l.set(
        1,
        b"list",
        Value::List(Box::new(
            [&b"a"[..], b"b", b"c"].map(Bytes::from_static).into(),
        )),
        None,
    );
    let mut h = HashValue::default();
    h.set(b"f", b"v", &crate::store::value::HashLimits::DEFAULT);
    l.set(2, b"hash", Value::Hash(Box::new(h)), None);
    let mut s = SetValue::new_for(b"1");
    s.insert(b"1");
    s.insert(b"2");
    l.set(3, b"set", Value::Set(Box::new(s)), None);
    let mut z = SortedSet::new();
    let _ = z.insert(b"m", 1.5, &ZsetLimits::DEFAULT);
    l.set(3, b"zset", Value::ZSet(Box::new(z)), None);
    drop(l);
    ks
}

fn save(ks: &Keyspace, functions: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    write_to(ks, functions.iter().copied(), &opts(), &mut out, &|_| false).unwrap();
    out
}

type Row = (usize, Vec<u8>, Vec<u8>, Option<u64>);

fn dump_all(ks: &Keyspace) -> Vec<Row> {
    let mut l = ks.lock_all();
    let mut all = Vec::new();
    for s in l.shards_mut() {
        for db in 0..s.databases() {
            for e in s.db(db).iter() {
                all.push((
                    db,
                    e.key.to_vec(),
                    crate::rdb::dump(&e.value),
                    e.expire_at(),
                ));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn a_file_round_trips_every_type_ttl_and_database() {
    let ks = sample();
    let file = save(
        &ks,
        &[b"#!lua name=lib\nredis.register_function('f', function() return 1 end)"],
    );
    assert_eq!(&file[..9], b"REDIS0010");
    let back = Keyspace::new(8, 4, 0);
    let loaded = load_bytes(&file, &back, &lopts()).unwrap();
    assert_eq!(loaded.keys_loaded, 6);
    assert_eq!(loaded.functions.len(), 1);
    let mut want = dump_all(&ks);
    want.retain(|e| e.1 != b"gone");
    assert_eq!(dump_all(&back), want);
}

#[test]
fn expired_keys_are_skipped_on_load() {
    let ks = sample();
    let file = save(&ks, &[]);
    let back = Keyspace::new(4, 4, 0);
    let loaded = load_bytes(
        &file,
        &back,
        &LoadOptions {
            now_ms: 6_000,
            limits: ZsetLimits::DEFAULT,
        },
    )
    .unwrap();
    assert_eq!((loaded.keys_loaded, loaded.keys_expired), (5, 1));
}

#[test]
fn checksum_is_checked_unless_zero() {
    let ks = sample();
    let mut file = save(&ks, &[]);
    let n = file.len();
    file[n - 1] ^= 1;
    assert!(matches!(
        load_bytes(&file, &Keyspace::new(4, 4, 0), &lopts()),
        Err(LoadError::Checksum { .. })
    ));
    file[n - 8..].fill(0);
    assert!(load_bytes(&file, &Keyspace::new(4, 4, 0), &lopts()).is_ok());
}

#[test]
fn refusals_are_clear() {
    let ks = Keyspace::new(4, 1, 0);
    assert!(matches!(
        load_bytes(b"RADIS0010", &ks, &lopts()),
        Err(LoadError::Signature)
    ));
    assert!(matches!(
        load_bytes(b"REDIS0013\xff", &ks, &lopts()),
        Err(LoadError::Version(13))
    ));
    // SELECTDB 3 with one database.
    assert!(matches!(
        load_bytes(b"REDIS0010\xfe\x03\xff", &ks, &lopts()),
        Err(LoadError::TooManyDatabases(1))
    ));
    // A module value.
    assert!(matches!(
        load_bytes(b"REDIS0010\x07\x01k", &ks, &lopts()),
        Err(LoadError::Unsupported { .. })
    ));
    // The same key twice.
    let dup = b"REDIS0009\x00\x01k\x01v\x00\x01k\x01w\xff\0\0\0\0\0\0\0\0";
    assert!(matches!(
        load_bytes(dup, &ks, &lopts()),
        Err(LoadError::DuplicateKey { .. })
    ));
}

#[test]
fn truncated_or_bit_flipped_files_never_panic() {
    let ks = sample();
    let file = save(&ks, &[]);
    for cut in 0..file.len() {
        assert!(load_bytes(&file[..cut], &Keyspace::new(4, 4, 0), &lopts()).is_err());
    }
    // Every single-bit flip either fails cleanly or (with the checksum) is caught.
    for i in 0..file.len() {
        for bit in [0x01u8, 0x10, 0x80] {
            let mut f = file.clone();
            f[i] ^= bit;
            let _ = load_bytes(&f, &Keyspace::new(4, 4, 0), &lopts());
            let n = f.len();
            f[n - 8..].fill(0);
            let _ = load_bytes(&f, &Keyspace::new(4, 4, 0), &lopts());
        }
    }
}

#[test]
fn rdb9_ziplist_encodings_load() {
    // A ziplist of "a", 1: header (16 bytes in all, 2 entries), two entries, end.
    let zl: &[u8] = b"\x10\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x01a\x03\xf2\xff";
    let mut file = b"REDIS0009".to_vec();
    for (t, key) in [(10u8, &b"list"[..]), (13, b"hash"), (12, b"zset")] {
        file.push(t);
        file.push(key.len() as u8);
        file.extend_from_slice(key);
        file.push(zl.len() as u8);
        file.extend_from_slice(zl);
    }
    // A quicklist (version 1) of two ziplist nodes.
    file.extend_from_slice(b"\x0e\x02ql\x02");
    for _ in 0..2 {
        file.push(zl.len() as u8);
        file.extend_from_slice(zl);
    }
    file.push(0xFF);
    let crc = crc64(0, &file);
    file.extend_from_slice(&crc.to_le_bytes());
    let ks = Keyspace::new(4, 1, 0);
    let loaded = load_bytes(&file, &ks, &lopts()).unwrap();
    assert_eq!(loaded.keys_loaded, 4);
    let mut l = ks.lock_all();
    match l.read_value(0, b"ql", 0) {
        Some(Value::List(items)) => assert_eq!(items.len(), 4),
        other => panic!("{other:?}"),
    }
    match l.read_value(0, b"zset", 0) {
        Some(Value::ZSet(z)) => assert_eq!(z.len(), 1),
        other => panic!("{other:?}"),
    }
    assert!(matches!(l.read_value(0, b"hash", 0), Some(Value::Hash(_))));
}
