use super::*;

fn roundtrip(v: &Value) -> Value {
    let d = dump(v);
    restore(&d, &ZsetLimits::DEFAULT).expect("restores")
}

#[test]
fn strings_round_trip_with_their_encodings() {
    for v in [
        Value::Int(0),
        Value::Int(-129),
        Value::Int(70_000),
        Value::Int(i64::MIN),
        Value::Str(Bytes::from_static(b"hello\x00\xff").into()),
        Value::Str(Bytes::from(vec![b'a'; 100_000]).into()),
    ] {
        let back = roundtrip(&v);
        assert_eq!(back.as_bytes().unwrap(), v.as_bytes().unwrap());
    }
    // Small integers use the integer encodings.
    assert_eq!(&dump(&Value::Int(5))[..3], &[0, 0xC0, 5]);
}

#[test]
fn footer_is_checked() {
    let mut d = dump(&Value::Int(5));
    assert_eq!(verify(&d), Ok(()));
    let n = d.len();
    d[n - 1] ^= 1;
    assert_eq!(verify(&d), Err(RdbError::VersionOrChecksum));
    assert_eq!(verify(b"short"), Err(RdbError::VersionOrChecksum));
    // Every truncation or single-byte corruption of a payload is refused, never a panic.
    let mut h = HashValue::default();
    h.set(b"f", b"v", &crate::store::value::HashLimits::DEFAULT);
    let d = dump(&Value::Hash(Box::new(h)));
    for cut in 0..d.len() {
        assert!(restore(&d[..cut], &ZsetLimits::DEFAULT).is_err());
    }
}

#[test]
fn lzf_decodes_literals_and_back_references() {
    // "aaaaaaaaaa": literal 'a', then a back reference of 9 bytes at distance 1.
    let data = [0x00, b'a', 0xE0, 0x00, 0x00];
    assert_eq!(lzf_decompress(&data, 10).unwrap(), b"aaaaaaaaaa");
    assert!(lzf_decompress(&data, 11).is_err());
    assert!(lzf_decompress(&[0xE0, 0x00, 0x05], 10).is_err());
    assert!(lzf_decompress(&data, u64::MAX).is_err());
}
