//! The compact (`listpack`) encoding of small hashes: every field-value pair in one exactly
//! sized byte buffer, in insertion order.
//!
//! Layout: for each pair, a varint length and the field's bytes, then a varint length and
//! the value's bytes. Lookups decode the buffer front to back, as Redis's listpack code does;
//! the hash stays in this encoding only while it is small (`hash-max-listpack-entries`
//! pairs of at most `hash-max-listpack-value` bytes), so that is O(small). One allocation
//! holds the whole hash, where a vector of `Bytes` pairs costs two allocations and 64 bytes
//! of handles per pair.
//!
//! The buffer is only written by this module, so a decoding failure cannot happen; the
//! decoders still return `None` rather than panic on a short buffer.

/// Pairs in insertion order, packed in one buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pairs {
    buf: Vec<u8>,
    len: u32,
}

fn put_varint(out: &mut Vec<u8>, u: usize) {
    super::varint::put(out, u as u64);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> Option<usize> {
    usize::try_from(super::varint::get(buf, pos)?).ok()
}

fn get_bytes<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let n = get_varint(buf, pos)?;
    let b = buf.get(*pos..pos.checked_add(n)?)?;
    *pos += n;
    Some(b)
}

/// One decoded pair and the byte range it occupies.
struct Slot<'a> {
    field: &'a [u8],
    value: &'a [u8],
    start: usize,
    value_start: usize,
    end: usize,
}

/// Iterator over the pairs of a [`Pairs`], in order.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    buf: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a> Iter<'a> {
    fn next_slot(&mut self) -> Option<Slot<'a>> {
        let start = self.pos;
        let mut p = start;
        let field = get_bytes(self.buf, &mut p)?;
        let value_start = p;
        let value = get_bytes(self.buf, &mut p)?;
        self.pos = p;
        self.left = self.left.saturating_sub(1);
        Some(Slot {
            field,
            value,
            start,
            value_start,
            end: p,
        })
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_slot().map(|s| (s.field, s.value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl Pairs {
    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there is no pair.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pairs in insertion order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            pos: 0,
            left: self.len(),
        }
    }

    fn slot(&self, field: &[u8]) -> Option<Slot<'_>> {
        let mut it = self.iter();
        while let Some(s) = it.next_slot() {
            if s.field == field {
                return Some(s);
            }
        }
        None
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.slot(field).map(|s| s.value)
    }

    /// The pair at position `i`.
    pub fn get_index(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.iter().nth(i)
    }

    /// Sets `field` to `value`, in place if the field exists (it keeps its position), else
    /// appended. True if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let mut enc = Vec::with_capacity(value.len() + 10);
        match self.slot(field).map(|s| (s.value_start, s.end)) {
            Some((a, b)) => {
                put_varint(&mut enc, value.len());
                enc.extend_from_slice(value);
                self.replace(a, b, &enc);
                false
            }
            None => {
                put_varint(&mut enc, field.len());
                enc.extend_from_slice(field);
                put_varint(&mut enc, value.len());
                enc.extend_from_slice(value);
                let end = self.buf.len();
                self.replace(end, end, &enc);
                self.len = self.len.saturating_add(1);
                true
            }
        }
    }

    /// Removes `field`, keeping the order of the others; true if it was present.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.slot(field).map(|s| (s.start, s.end)) {
            Some((a, b)) => {
                self.replace(a, b, &[]);
                self.len = self.len.saturating_sub(1);
                true
            }
            None => false,
        }
    }

    /// The position of `field`.
    pub fn position(&self, field: &[u8]) -> Option<usize> {
        self.iter().position(|(f, _)| f == field)
    }

    /// Inserts a pair at position `i` (at the end if `i` is past it); the field must be
    /// absent. Used by the hash-field-TTL form, whose order is by expiry time.
    pub fn insert_at(&mut self, i: usize, field: &[u8], value: &[u8]) {
        let mut it = self.iter();
        let mut at = self.buf.len();
        for _ in 0..i {
            if it.next_slot().is_none() {
                break;
            }
        }
        if let Some(s) = it.clone().next_slot() {
            at = s.start;
        }
        let mut enc = Vec::with_capacity(field.len() + value.len() + 10);
        put_varint(&mut enc, field.len());
        enc.extend_from_slice(field);
        put_varint(&mut enc, value.len());
        enc.extend_from_slice(value);
        self.replace(at, at, &enc);
        self.len = self.len.saturating_add(1);
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Replaces bytes `a..b` with `with`, leaving the buffer exactly sized.
    fn replace(&mut self, a: usize, b: usize, with: &[u8]) {
        let (Some(head), Some(tail)) = (self.buf.get(..a), self.buf.get(b..)) else {
            return;
        };
        let mut nb = Vec::with_capacity(head.len() + with.len() + tail.len());
        nb.extend_from_slice(head);
        nb.extend_from_slice(with);
        nb.extend_from_slice(tail);
        self.buf = nb;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_remove_keep_order() {
        let mut p = Pairs::default();
        assert!(p.set(b"capacity", b"15"));
        assert!(p.set(b"leaking_rate", b"0.5"));
        assert!(p.set(b"", b""));
        assert!(p.set(&[b'x'; 200], &[b'y'; 300]));
        assert!(!p.set(b"capacity", b"150000"));
        assert_eq!(p.len(), 4);
        assert_eq!(p.get(b"capacity"), Some(&b"150000"[..]));
        assert_eq!(p.get(b""), Some(&b""[..]));
        assert_eq!(p.get(b"nope"), None);
        let fields: Vec<&[u8]> = p.iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [&b"capacity"[..], b"leaking_rate", b"", &[b'x'; 200]]
        );
        assert_eq!(p.get_index(3).map(|(_, v)| v.len()), Some(300));
        assert!(p.remove(b"leaking_rate"));
        assert!(!p.remove(b"leaking_rate"));
        assert_eq!(p.get_index(1), Some((&b""[..], &b""[..])));
        assert_eq!(p.len(), 3);
        assert_eq!(p.heap_bytes(), p.buf.len());
        assert!(p.remove(b"capacity") && p.remove(b"") && p.remove(&[b'x'; 200]));
        assert!(p.is_empty() && p.buf.is_empty());
    }

    #[test]
    fn funnel_hash_is_one_small_buffer() {
        let mut p = Pairs::default();
        p.set(b"capacity", b"15");
        p.set(b"leaking_rate", b"0.5");
        p.set(b"left_quota", b"14");
        p.set(b"leaking_ts", b"1700000000000");
        assert_eq!(p.heap_bytes(), 8 + 2 + 12 + 3 + 10 + 2 + 10 + 13 + 8);
    }
}
