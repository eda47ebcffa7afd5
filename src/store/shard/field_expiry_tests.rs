use super::*;
use crate::store::value::{HashLimits, HashValue};

fn volatile_hash(fields: &[(&str, Option<u64>)]) -> Value {
    let mut h = HashValue::default();
    for (f, _) in fields {
        h.set(f.as_bytes(), b"v", &HashLimits::DEFAULT);
    }
    h.make_volatile();
    for (f, at) in fields {
        if let Some(at) = at {
            h.set_field_ttl(f.as_bytes(), *at);
        }
    }
    Value::Hash(Box::new(h))
}

fn fields(s: &Shard, key: &str) -> Vec<Vec<u8>> {
    match s
        .peek(0, key_hash(key.as_bytes()), key.as_bytes())
        .map(|e| &e.value)
    {
        Some(Value::Hash(h)) => h.iter().map(|(f, _)| f.to_vec()).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn the_reaper_expires_fields_and_the_key_with_its_last_one() {
    let mut s = Shard::new(1, 0);
    let (a, b) = ("a", "b");
    s.insert(
        0,
        key_hash(a.as_bytes()),
        a.as_bytes(),
        volatile_hash(&[("x", Some(10)), ("y", Some(20)), ("z", None)]),
        None,
    );
    s.insert(
        0,
        key_hash(b.as_bytes()),
        b.as_bytes(),
        volatile_hash(&[("only", Some(15))]),
        None,
    );
    assert_eq!(s.next_deadline(), Some(11), "due once now > 10");
    assert_eq!(s.reap(10, 100), (0, false));
    assert_eq!(s.reap(16, 100), (2, false));
    assert_eq!(fields(&s, a), vec![b"y".to_vec(), b"z".to_vec()]);
    assert!(
        s.peek(0, key_hash(b.as_bytes()), b.as_bytes()).is_none(),
        "emptied hash deleted"
    );
    assert_eq!(s.next_deadline(), Some(21));
    // A budget of one field per call, more due after it.
    s.insert(
        0,
        key_hash(b.as_bytes()),
        b.as_bytes(),
        volatile_hash(&[("p", Some(30)), ("q", Some(30))]),
        None,
    );
    assert_eq!(s.reap(31, 1), (1, true));
    assert_eq!(s.reap(31, 10), (2, false));
    assert_eq!(fields(&s, a), vec![b"z".to_vec()]);
    assert_eq!(s.next_deadline(), None);
}

#[test]
fn a_deleted_or_replaced_hash_leaves_nothing_due() {
    let mut s = Shard::new(1, 0);
    let k = "h";
    s.insert(
        0,
        key_hash(k.as_bytes()),
        k.as_bytes(),
        volatile_hash(&[("x", Some(10))]),
        None,
    );
    s.remove(0, key_hash(k.as_bytes()), k.as_bytes());
    assert_eq!(s.next_deadline(), None);
    s.insert(
        0,
        key_hash(k.as_bytes()),
        k.as_bytes(),
        volatile_hash(&[("x", Some(10))]),
        None,
    );
    s.insert(0, key_hash(k.as_bytes()), k.as_bytes(), Value::Int(1), None);
    assert_eq!(s.next_deadline(), None);
    assert_eq!(s.reap(100, 10), (0, false));
    assert!(matches!(
        s.peek(0, key_hash(k.as_bytes()), k.as_bytes())
            .map(|e| &e.value),
        Some(Value::Int(1))
    ));
}
