//! Before a pipelined batch runs: have the keyspace prefetch the entry of each request's
//! first argument after the name (the key of the commands rate limiters send), or a script
//! call's first key (after the script and the key count), and remember its hash
//! (`store::prefetch`), which the command's shard lookups then find instead of hashing again.
//!
//! The keys are gathered as the batch's single parse lists its requests (`protocol::batch`):
//! their names and keys come from the ranges the parser found, not from a second walk over
//! the bytes. A request of the name alone (MULTI, EXEC) is stepped over: a
//! transaction's commands are what a sliding-window limiter pipelines. A first argument
//! that is not a key (GET's is, PING's message is not) costs a hash and a probe, no more; a key equal to the
//! request before's (a transaction's or SET NX + INCR's commands on one key) is probed once,
//! its hash remembered again for the new address. The batch's first request is not
//! prefetched (its key is touched right away).
//!
//! Before a turn runs its ready connections, the keys of their first requests are
//! prefetched together ([`FirstKeys`]): each is found by a light scan over RESP arrays of
//! bulk strings, which stops at the first thing it does not expect (an inline command, an
//! incomplete request, a request of many arguments).

use std::ops::Range;

use crate::store::Keyspace;
use crate::store::prefetch::MAX_KEYS;

/// Requests of more arguments than this are not [`first_key`]'s to look into.
const MAX_ARGS: usize = 8;

/// A batch's keys to prefetch, gathered as the batch is parsed (`protocol::batch::Batch::fill`
/// calls [`Keys::add`] with each request's name and first argument), then prefetched
/// together ([`Keys::prefetch`]): up to `MAX_KEYS` distinct ones in a row. The caller holds
/// a `store::prefetch::BatchHashes` for as long as the requests run.
pub(super) struct Keys<'b> {
    hashes: [u64; MAX_KEYS],
    n: usize,
    /// Some command of the batch is a sorted set's (`Z…`).
    sorted_sets: bool,
    /// The key of the request before.
    last: Option<&'b [u8]>,
    /// `MAX_KEYS` keys were taken: the rest are not looked at.
    full: bool,
    /// The distinct keys hashed, in order.
    #[cfg(test)]
    seen: Vec<Vec<u8>>,
}

impl<'b> Keys<'b> {
    pub(super) fn new() -> Keys<'b> {
        Keys {
            hashes: [0; MAX_KEYS],
            n: 0,
            sorted_sets: false,
            last: None,
            full: false,
            #[cfg(test)]
            seen: Vec::new(),
        }
    }

    /// A request (its bytes and its arguments' ranges in them, the name first): hashes its
    /// key (remembered for the batch) or, equal to the one before, remembers its hash again
    /// for this address. The key is the first argument, or a script call's first key (see
    /// [`script_key`]).
    #[inline]
    pub(super) fn add(&mut self, keyspace: &Keyspace, frame: &'b [u8], args: &[Range<usize>]) {
        if self.full {
            return;
        }
        let arg = |i: usize| args.get(i).and_then(|r| frame.get(r.clone()));
        let Some(name) = arg(0) else {
            return;
        };
        let key = if is_script_call(name) {
            script_key(arg(2), arg(3))
        } else {
            arg(1)
        };
        let Some(key) = key else {
            return;
        };
        self.sorted_sets |= matches!(name.first(), Some(b'z' | b'Z'));
        if self.last == Some(key) {
            if let Some(&hash) = self.n.checked_sub(1).and_then(|l| self.hashes.get(l)) {
                keyspace.remember_hash(key, hash);
            }
        } else if let Some(slot) = self.hashes.get_mut(self.n) {
            *slot = keyspace.hash_to_prefetch(key);
            self.n += 1;
            #[cfg(test)]
            self.seen.push(key.to_vec());
        } else {
            self.full = true;
            return;
        }
        self.last = Some(key);
    }

    /// Asks the cache for the keys' entries in database `db`.
    #[inline]
    pub(super) fn prefetch(&self, keyspace: &Keyspace, db: usize) {
        if self.n == 0 {
            return;
        }
        // Only sorted sets' data lies past the entry: a batch with none of their commands
        // (a pipeline of GETs, SETs, CL.THROTTLEs) stops at the entries.
        keyspace.prefetch_hashes(db, &self.hashes[..self.n], self.sorted_sets);
    }
}

/// The keys of the first requests of a turn's ready connections, prefetched together
/// before the first of them runs ([`FirstKeys::add`] each connection in run order, then
/// [`FirstKeys::prefetch`]). At pipeline 1, where a batch is one request and `batch` has
/// nothing to do, this is the only prefetch: each probe's table misses (its control group,
/// then its slot) are demand loads, and probes in a row overlap them, where one probe per
/// connection (the next one's, while one runs) waited out each key's alone. Nothing is
/// remembered: each key's own batch hashes it again, after other batches.
pub(super) struct FirstKeys {
    hashes: [u64; MAX_KEYS],
    n: usize,
    db: usize,
}

impl FirstKeys {
    pub(super) fn new() -> FirstKeys {
        FirstKeys {
            hashes: [0; MAX_KEYS],
            n: 0,
            db: 0,
        }
    }

    /// The key of the first request in `buf` (see [`first_key`]), for database `db`; the
    /// keys gathered so far are prefetched first when it is another database's or
    /// `MAX_KEYS` are gathered.
    #[inline]
    pub(super) fn add(&mut self, keyspace: &Keyspace, db: usize, buf: &[u8]) {
        let Some(key) = first_key(buf).and_then(|(start, len)| buf.get(start..start + len)) else {
            return;
        };
        if self.n == MAX_KEYS || (self.n > 0 && db != self.db) {
            self.prefetch(keyspace);
        }
        self.db = db;
        if let Some(slot) = self.hashes.get_mut(self.n) {
            *slot = keyspace.hash(key);
            self.n += 1;
        }
    }

    /// Asks the cache for the gathered keys' entries, and forgets them.
    #[inline]
    pub(super) fn prefetch(&mut self, keyspace: &Keyspace) {
        if self.n > 0 {
            keyspace.prefetch_hashes(self.db, &self.hashes[..self.n], false);
            self.n = 0;
        }
    }

    /// The hashes gathered and not prefetched yet.
    #[cfg(test)]
    fn pending(&self) -> &[u64] {
        &self.hashes[..self.n]
    }
}

/// The commands whose first key follows the script and the key count.
const SCRIPT_CALLS: [&[u8]; 6] = [
    b"evalsha",
    b"eval",
    b"fcall",
    b"evalsha_ro",
    b"eval_ro",
    b"fcall_ro",
];

/// Where the key of the first request in `buf` is, `(start, length)`, if it is a complete
/// request of the shape `batch` scans: its first argument, or for a script call (EVAL,
/// EVALSHA, FCALL and their `_RO` forms) its first key, after the script and the key count;
/// after a MULTI, the first queued command's.
fn first_key(buf: &[u8]) -> Option<(usize, usize)> {
    // A transaction's MULTI: the key of the first command it queues.
    let pos = match request(buf, 0) {
        Some(Request {
            key: None, next, ..
        }) => next,
        _ => 0,
    };
    let (args, mut at) = header(buf, pos, b'*')?;
    if !(2..=MAX_ARGS).contains(&args) {
        return None;
    }
    // The first four elements at most: the name, and the key or a script call's key.
    let mut elements = [(0, 0); 4];
    for element in elements.iter_mut().take(args) {
        let (len, start) = header(buf, at, b'$')?;
        let end = start + len;
        if buf.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        *element = (start, len);
        at = end + 2;
    }
    let name = |(start, len): (usize, usize)| &buf[start..start + len];
    if !is_script_call(name(elements[0])) {
        return Some(elements[1]);
    }
    // No key (a key count of 0, or none given): nothing to prefetch.
    (args >= 4 && name(elements[2]) != b"0").then_some(elements[3])
}

/// True if `name` is a script call's (EVAL, EVALSHA, FCALL and their `_RO` forms): its
/// first key follows the script and the key count.
#[inline]
fn is_script_call(name: &[u8]) -> bool {
    matches!(name.first(), Some(b'e' | b'E' | b'f' | b'F'))
        && SCRIPT_CALLS.iter().any(|c| name.eq_ignore_ascii_case(c))
}

/// A script call's first key, given its key count and the argument after it: none for a
/// count of 0 (the argument after it is the script's first ARGV) or no argument there.
#[inline]
fn script_key<'b>(numkeys: Option<&[u8]>, after: Option<&'b [u8]>) -> Option<&'b [u8]> {
    if numkeys == Some(b"0") {
        return None;
    }
    after
}

/// What [`first_key`]'s scan reads of one request.
struct Request {
    /// The `(start, length)` of its second element (none for a request of one).
    key: Option<(usize, usize)>,
    /// Where the next request starts.
    next: usize,
}

/// The request of 1 to `MAX_ARGS` bulk strings at `pos`, if complete.
#[inline]
fn request(buf: &[u8], pos: usize) -> Option<Request> {
    let (args, at) = header(buf, pos, b'*')?;
    if !(1..=MAX_ARGS).contains(&args) {
        return None;
    }
    // The name, the key, then the rest stepped over (no test per element for the key).
    let (_, mut at) = element(buf, at)?;
    let mut key = None;
    if args >= 2 {
        let (found, next) = element(buf, at)?;
        key = Some(found);
        at = next;
    }
    for _ in 2..args {
        at = element(buf, at)?.1;
    }
    Some(Request { key, next: at })
}

/// The complete bulk string at `pos`: its `(start, length)` and where the next element
/// starts.
#[inline]
fn element(buf: &[u8], pos: usize) -> Option<((usize, usize), usize)> {
    let (len, start) = header(buf, pos, b'$')?;
    let end = start + len;
    if *buf.get(end..)?.first_chunk::<2>()? != *b"\r\n" {
        return None;
    }
    Some(((start, len), end + 2))
}

/// `<prefix><digits>\r\n` at `pos`: the number and where the next byte is. At most 9 digits,
/// so no overflow and no length beyond the buffer's reach is taken for real.
#[inline]
fn header(buf: &[u8], pos: usize, prefix: u8) -> Option<(usize, usize)> {
    // One or two digits (argument counts, short keys and values): the line's first four
    // bytes as one word, tested with masks at fixed offsets.
    let word = u32::from_le_bytes(*buf.get(pos..)?.first_chunk::<4>()?);
    let da = ((word >> 8) as u8).wrapping_sub(b'0');
    if word & 0xFFFF_00FF == u32::from_le_bytes([prefix, 0, b'\r', b'\n']) && da <= 9 {
        return Some((usize::from(da), pos + 4));
    }
    let db = ((word >> 16) as u8).wrapping_sub(b'0');
    if word & 0xFF00_00FF == u32::from_le_bytes([prefix, 0, 0, b'\r'])
        && da <= 9
        && db <= 9
        && buf.get(pos + 4) == Some(&b'\n')
    {
        return Some((usize::from(da) * 10 + usize::from(db), pos + 5));
    }
    header_loop(buf, pos, prefix)
}

/// [`header`] for lines of any width, one byte at a time.
fn header_loop(buf: &[u8], pos: usize, prefix: u8) -> Option<(usize, usize)> {
    if *buf.get(pos)? != prefix {
        return None;
    }
    let mut n = 0usize;
    let mut at = pos + 1;
    loop {
        let b = *buf.get(at)?;
        if b == b'\r' {
            break;
        }
        let d = b.wrapping_sub(b'0');
        if d > 9 || at - pos > 9 {
            return None;
        }
        n = n * 10 + usize::from(d);
        at += 1;
    }
    if at == pos + 1 || *buf.get(at + 1)? != b'\n' {
        return None;
    }
    Some((n, at + 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::protocol::RequestParser;
    use crate::protocol::batch::Batch;
    use crate::protocol::request::Limits;

    /// A request without a key, ahead of those a test looks at (the event loop's batch's
    /// first request is parsed alone, and the requests listed behind it).
    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

    /// `buf`'s complete requests listed as the event loop lists a batch's, their keys
    /// gathered.
    fn gathered<'b>(ks: &Keyspace, buf: &'b [u8]) -> Keys<'b> {
        let mut parser = RequestParser::new(Limits::default());
        let mut batch = Batch::new();
        let mut keys = Keys::new();
        batch.fill(&mut parser, buf, 0, |frame, args| keys.add(ks, frame, args));
        keys
    }

    /// The keys `batch` would probe, ignoring its one-request rule: each complete request's
    /// first argument, requests of the name alone stepped over, a key equal to the one
    /// before probed once.
    fn keys(buf: &[u8]) -> Vec<Vec<u8>> {
        let buf = [PING, buf].concat();
        gathered(&Keyspace::new(1, 1, 0), &buf).seen
    }

    /// `commands` as a client writes them (RESP arrays of bulk strings).
    fn resp(commands: &[&[&[u8]]]) -> Vec<u8> {
        commands
            .iter()
            .flat_map(|args| crate::protocol::request::client_bytes(args))
            .collect()
    }

    /// Whether `batch` would walk on to the values: some command of the batch is a sorted
    /// set's.
    fn sorted_sets(buf: &[u8]) -> bool {
        let buf = [PING, buf].concat();
        gathered(&Keyspace::new(1, 1, 0), &buf).sorted_sets
    }

    #[test]
    fn only_batches_with_sorted_set_commands_walk_on_to_the_values() {
        let sliding = resp(&[
            &[&b"MULTI"[..]],
            &[b"zadd", b"k", b"1", b"1"],
            &[b"ZCARD", b"k"],
            &[b"EXEC"],
        ]);
        assert!(sorted_sets(&sliding));
        let getset = resp(&[
            &[&b"GET"[..], b"a"],
            &[b"SET", b"b", b"zz"],
            &[b"EXPIRE", b"z", b"1"],
        ]);
        assert!(!sorted_sets(&getset));
    }

    #[test]
    fn short_headers_read_in_one_word_as_the_loop_reads_them() {
        // Every buffer of up to six bytes over the bytes a header is made of and a few
        // others, at the front and after one byte.
        let alphabet = b"*$09\r\nx";
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new()];
        let mut last = bufs.clone();
        for _ in 0..6 {
            last = last
                .iter()
                .flat_map(|b| {
                    alphabet.iter().map(move |&c| {
                        let mut b = b.clone();
                        b.push(c);
                        b
                    })
                })
                .collect();
            bufs.extend(last.iter().cloned());
        }
        for buf in &bufs {
            for pos in [0, 1] {
                for prefix in [b'*', b'$'] {
                    let word = buf.get(pos..).and_then(|b| b.first_chunk::<4>()).is_some();
                    let expected = if word {
                        header_loop(buf, pos, prefix)
                    } else {
                        None
                    };
                    assert_eq!(header(buf, pos, prefix), expected, "{buf:?} at {pos}");
                }
            }
        }
    }

    #[test]
    fn headers_of_any_width() {
        for n in [0usize, 7, 10, 99, 100, 123_456_789] {
            let text = format!("*{n}\r\nrest");
            assert_eq!(header(text.as_bytes(), 0, b'*'), Some((n, text.len() - 4)));
            assert_eq!(header(text.as_bytes(), 0, b'$'), None);
        }
        for bad in [
            &b"*"[..],
            b"*1",
            b"*1\r",
            b"*\r\n",
            b"*1\n\n",
            b"*12\r",
            b"*1x\r\n",
            b"*1234567890\r\n",
        ] {
            assert_eq!(header(bad, 0, b'*'), None, "{bad:?}");
        }
    }

    #[test]
    fn a_batchs_keys_are_hashed_once() {
        use crate::store::prefetch::{BatchHashes, recall};
        let ks = Keyspace::new(1, 1, 0);
        let two = [PING, &b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n".repeat(2)].concat();
        let at = PING.len() + 17;
        {
            let _hashes = BatchHashes::begin();
            gathered(&ks, &two).prefetch(&ks, 0);
            // Both keys' hashes kept, the ones the keyspace computes.
            for key in [&two[at..at + 2], &two[at + 21..at + 23]] {
                assert_eq!(key, b"k1");
                assert_eq!(recall(key), Some(crate::store::key_hash(b"k1")));
                assert_eq!(ks.hash(key), crate::store::key_hash(b"k1"));
            }
        }
        assert_eq!(recall(&two[at..at + 2]), None);
    }

    #[test]
    fn finds_each_complete_requests_first_argument() {
        let two = b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n$1\r\nv\r\n";
        assert_eq!(keys(two), vec![&b"k1"[..], b"k2"]);
        // An incomplete request ends the batch; so does an inline one, listed last.
        assert_eq!(keys(&two[..two.len() - 1]), vec![&b"k1"[..]]);
        let inline = b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n";
        assert_eq!(keys(inline), vec![&b"k1"[..]]);
        // MULTI has no argument; EXEC neither: they are stepped over.
        assert_eq!(
            keys(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n*1\r\n$4\r\nEXEC\r\n*2\r\n$3\r\nGET\r\n$1\r\ny\r\n"),
            vec![&b"x"[..], b"y"]
        );
        let many = b"*9\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n$1\r\ni\r\n";
        // However many arguments a request has, its first is its key.
        assert_eq!(keys(many), vec![&b"b"[..]]);
        // Binary and empty keys, and a length that lies (incomplete), or is over the
        // limit or negative (a protocol error: nothing listed before it).
        assert_eq!(keys(b"*2\r\n$1\r\nX\r\n$0\r\n\r\n"), vec![&b""[..]]);
        assert!(keys(b"*2\r\n$1\r\nX\r\n$99\r\nab\r\n").is_empty());
        assert!(keys(b"*2\r\n$1\r\nX\r\n$999999999999\r\nab\r\n").is_empty());
        assert!(keys(b"*2\r\n$-1\r\n").is_empty());
    }

    #[test]
    fn a_batch_of_script_calls_gathers_their_first_keys() {
        let calls = resp(&[
            &[&b"EVALSHA"[..], b"abc", b"1", b"k1", b"5"],
            &[b"evalsha_ro", b"abc", b"2", b"k2", b"k3"],
            &[b"EVAL", b"return 1", b"0", b"a1"],
            &[b"FCALL", b"f", b"1"],
            &[b"fcall", b"f", b"1", b"k4"],
            &[b"EVALSHAX", b"abc", b"1", b"k5"],
        ]);
        assert_eq!(
            keys(&calls),
            vec![&b"k1"[..], b"k2", b"k4", b"abc"],
            "no key for a count of 0 or none given; a name that is no script call's keeps its first argument"
        );
    }

    #[test]
    fn the_first_key_of_a_script_call_is_after_the_script_and_the_key_count() {
        let key = |req: &[u8]| first_key(req).map(|(s, l)| req[s..s + l].to_vec());
        assert_eq!(
            key(b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"),
            Some(b"k1".to_vec())
        );
        assert_eq!(
            key(b"*5\r\n$7\r\nevalsha\r\n$3\r\nabc\r\n$1\r\n1\r\n$2\r\nk1\r\n$1\r\n5\r\n"),
            Some(b"k1".to_vec())
        );
        assert_eq!(
            key(b"*4\r\n$5\r\nFCALL\r\n$1\r\nf\r\n$1\r\n2\r\n$2\r\nk1\r\n"),
            Some(b"k1".to_vec())
        );
        // No key: none prefetched (not the script, nor its body).
        assert_eq!(
            key(b"*4\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n$1\r\na\r\n"),
            None
        );
        assert_eq!(
            key(b"*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n1\r\n"),
            None
        );
        // Incomplete, or not the shape scanned.
        assert_eq!(key(b"*2\r\n$3\r\nGET\r\n$2\r\nk1\r"), None);
        assert_eq!(key(b"*1\r\n$5\r\nMULTI\r\n"), None);
        assert_eq!(key(b"GET k1\r\n"), None);
    }

    #[test]
    fn stops_at_max_keys() {
        let buf: Vec<u8> = (0..MAX_KEYS + 5)
            .flat_map(|i| format!("*2\r\n$3\r\nGET\r\n$2\r\n{:02}\r\n", i).into_bytes())
            .collect();
        assert_eq!(keys(&buf).len(), MAX_KEYS);
        // The same key again and again is one key.
        let same = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(MAX_KEYS + 5);
        assert_eq!(keys(&same), vec![&b"k"[..]]);
    }

    /// `MULTI; ZADD k ..; ZCARD k; EXEC` on key `k`, as the sliding-window workload sends it.
    fn transaction(k: &str) -> Vec<u8> {
        let arg = |a: &str| format!("${}\r\n{a}\r\n", a.len());
        let mut out = String::from("*1\r\n$5\r\nMULTI\r\n");
        out += &format!("*4\r\n{}{}{}{}", arg("ZADD"), arg(k), arg("5"), arg("5"));
        out += &format!("*2\r\n{}{}", arg("ZCARD"), arg(k));
        out += "*1\r\n$4\r\nEXEC\r\n";
        out.into_bytes()
    }

    #[test]
    fn a_pipeline_of_transactions_has_each_key_probed_once() {
        let buf: Vec<u8> = (0..20)
            .flat_map(|i| transaction(&format!("key{i}")))
            .collect();
        let expected: Vec<String> = (0..20).map(|i| format!("key{i}")).collect();
        let found: Vec<String> = keys(&buf)
            .iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        assert_eq!(found, expected);
        // After MULTI, the first key is the queued command's.
        let one = transaction("k1");
        let (start, len) = first_key(&one).expect("a key");
        assert_eq!(&one[start..start + len], b"k1");
    }

    #[test]
    fn a_key_repeated_in_a_row_is_remembered_at_every_address() {
        use crate::store::prefetch::{BatchHashes, recall};
        let ks = Keyspace::new(1, 1, 0);
        let buf: Vec<u8> = [PING.to_vec(), transaction("a"), transaction("b")].concat();
        let _hashes = BatchHashes::begin();
        gathered(&ks, &buf).prefetch(&ks, 0);
        let mut seen = 0;
        for i in 0..buf.len() - 5 {
            let key = &buf[i + 2..i + 3];
            if buf[i..i + 2] == *b"\r\n" && buf[i + 3..i + 5] == *b"\r\n" && b"ab".contains(&key[0])
            {
                assert_eq!(recall(key), Some(crate::store::key_hash(key)));
                seen += 1;
            }
        }
        assert_eq!(seen, 4, "two occurrences of each key");
    }

    #[test]
    fn a_turns_first_keys_are_gathered_and_prefetched_a_database_and_max_keys_at_a_time() {
        let ks = Keyspace::new(4, 2, 0);
        let get = |key: &[u8]| resp(&[&[b"GET", key]]);
        let mut keys = FirstKeys::new();
        keys.add(&ks, 0, &get(b"a"));
        // An inline request and an incomplete one have no key to gather.
        keys.add(&ks, 0, b"GET b\r\n");
        keys.add(&ks, 0, &get(b"c")[..10]);
        keys.add(&ks, 0, &resp(&[&[b"EVALSHA", b"sha", b"1", b"d"]]));
        assert_eq!(
            keys.pending(),
            [ks.hash(b"a"), ks.hash(b"d")],
            "the first keys, a script call's after its key count"
        );
        // Another database's key: the ones gathered are prefetched first.
        keys.add(&ks, 1, &get(b"e"));
        assert_eq!(keys.pending(), [ks.hash(b"e")]);
        for i in 0..MAX_KEYS {
            keys.add(&ks, 1, &get(format!("k{i}").as_bytes()));
        }
        assert_eq!(keys.pending().len(), 1, "MAX_KEYS gathered were prefetched");
        assert_eq!(
            keys.pending(),
            [ks.hash(format!("k{}", MAX_KEYS - 1).as_bytes())]
        );
        keys.prefetch(&ks);
        assert!(keys.pending().is_empty());
        // Nothing is remembered for a batch.
        assert_eq!(crate::store::prefetch::recall(b"a"), None);
    }

    #[test]
    fn any_bytes_are_looked_at_without_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2_000 {
            let mut buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec();
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(7) {
                    *b = (x >> 8) as u8;
                }
            }
            let _ = keys(&buf);
            let _ = first_key(&buf);
        }
    }
}
