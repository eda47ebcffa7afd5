//! What both backends share: the store, a minimal RESP parser and the commands `loadgen
//! --workload getset` sends (GET, SET), plus PING (for readiness checks) and SHUTDOWN.
//! Kept small on purpose: the prototype measures the I/O path, and the less user-space
//! work a request does, the more of its CPU is the kernel's.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Longest request accepted; a connection that buffers more unparsed input is closed.
pub const MAX_INPUT: usize = 1 << 20;
/// Most arguments in one request.
const MAX_ARGS: usize = 8;

/// A multiplicative hash (as rustc's FxHasher) with a finaliser: the store's hashing is not
/// what is measured.
#[derive(Default)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn finish(&self) -> u64 {
        // MurmurHash3's finaliser: the multiply leaves the low bits (the table's index)
        // depending only on the input's low bytes, which for `key:1234` keys barely differ.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

pub type Store = HashMap<Vec<u8>, Vec<u8>, BuildHasherDefault<FxHasher>>;

/// A protocol error: the connection is closed after its reply.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError;

/// One connection's buffers, as both backends keep them.
#[derive(Default)]
pub struct Buffers {
    /// Received, not yet run.
    pub input: Vec<u8>,
    /// Replies not yet handed to the kernel.
    pub output: Vec<u8>,
}

impl Buffers {
    pub fn new() -> Buffers {
        Buffers {
            input: Vec::with_capacity(16 * 1024),
            output: Vec::with_capacity(16 * 1024),
        }
    }

    /// Runs every complete request in `input`, appends the replies to `output`, and drops
    /// what ran from `input`.
    pub fn run(&mut self, store: &mut Store) -> Result<(), ProtocolError> {
        let ran = run_all(store, &self.input, &mut self.output);
        let consumed = match ran {
            Ok(n) => n,
            Err(e) => {
                self.output.extend_from_slice(b"-ERR Protocol error\r\n");
                return Err(e);
            }
        };
        if consumed == self.input.len() {
            self.input.clear();
        } else {
            self.input.drain(..consumed);
            if self.input.len() > MAX_INPUT {
                return Err(ProtocolError);
            }
        }
        Ok(())
    }
}

/// Runs the complete requests at the front of `input`; returns how many bytes they took.
pub fn run_all(store: &mut Store, input: &[u8], out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    let mut pos = 0;
    let mut args: [&[u8]; MAX_ARGS] = [&[]; MAX_ARGS];
    while pos < input.len() {
        let Some((n, used)) = parse(&input[pos..], &mut args)? else {
            break;
        };
        execute(store, &args[..n], out);
        pos += used;
    }
    Ok(pos)
}

/// Parses one request (`*N\r\n` then N bulk strings) at the front of `buf`: the number of
/// arguments and the bytes it took, or None if it is not complete yet.
fn parse<'a>(
    buf: &'a [u8],
    args: &mut [&'a [u8]; MAX_ARGS],
) -> Result<Option<(usize, usize)>, ProtocolError> {
    if buf.first() != Some(&b'*') {
        return Err(ProtocolError);
    }
    let Some((n, mut pos)) = number(buf, 1)? else {
        return Ok(None);
    };
    if n == 0 || n > MAX_ARGS {
        return Err(ProtocolError);
    }
    for arg in args.iter_mut().take(n) {
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(_) => return Err(ProtocolError),
        }
        let Some((len, start)) = number(buf, pos + 1)? else {
            return Ok(None);
        };
        if len > MAX_INPUT {
            return Err(ProtocolError);
        }
        let end = start + len;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError);
        }
        *arg = &buf[start..end];
        pos = end + 2;
    }
    Ok(Some((n, pos)))
}

/// A decimal number at `pos` ended by `\r\n`: its value and the position after the line.
fn number(buf: &[u8], mut pos: usize) -> Result<Option<(usize, usize)>, ProtocolError> {
    let mut n: usize = 0;
    let mut digits = 0;
    loop {
        let Some(&c) = buf.get(pos) else {
            return Ok(None);
        };
        match c {
            b'0'..=b'9' if digits < 10 => {
                n = n * 10 + usize::from(c - b'0');
                digits += 1;
                pos += 1;
            }
            b'\r' if digits > 0 => {
                return match buf.get(pos + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((n, pos + 2))),
                    Some(_) => Err(ProtocolError),
                };
            }
            _ => return Err(ProtocolError),
        }
    }
}

fn execute(store: &mut Store, args: &[&[u8]], out: &mut Vec<u8>) {
    let name = args[0];
    if name.eq_ignore_ascii_case(b"GET") && args.len() == 2 {
        match store.get(args[1]) {
            Some(v) => {
                out.push(b'$');
                push_decimal(out, v.len());
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(v);
                out.extend_from_slice(b"\r\n");
            }
            None => out.extend_from_slice(b"$-1\r\n"),
        }
    } else if name.eq_ignore_ascii_case(b"SET") && args.len() == 3 {
        match store.get_mut(args[1]) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(args[2]);
            }
            None => {
                store.insert(args[1].to_vec(), args[2].to_vec());
            }
        }
        out.extend_from_slice(b"+OK\r\n");
    } else if name.eq_ignore_ascii_case(b"PING") {
        out.extend_from_slice(b"+PONG\r\n");
    } else if name.eq_ignore_ascii_case(b"SHUTDOWN") {
        std::process::exit(0);
    } else {
        out.extend_from_slice(b"-ERR unknown command\r\n");
    }
}

/// Appends `n` in decimal (no allocation).
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[u8]) -> (Result<usize, ProtocolError>, Vec<u8>) {
        let mut store = Store::default();
        let mut out = Vec::new();
        (run_all(&mut store, input, &mut out), out)
    }

    #[test]
    fn set_then_get() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nxyz\r\n*2\r\n$3\r\nget\r\n$1\r\nk\r\n*2\r\n$3\r\nGET\r\n$1\r\nz\r\n";
        let (r, out) = run(input);
        assert_eq!(r, Ok(input.len()));
        assert_eq!(out, b"+OK\r\n$3\r\nxyz\r\n$-1\r\n");
    }

    #[test]
    fn stops_at_an_incomplete_request() {
        let whole = b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        for cut in 14..whole.len() {
            let (r, out) = run(&whole[..cut]);
            assert_eq!(r, Ok(14), "cut at {cut}");
            assert_eq!(out, b"+PONG\r\n");
        }
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(run(b"GET k\r\n").0, Err(ProtocolError));
        assert_eq!(run(b"*2\r\n$3\r\nGETx\r\n").0, Err(ProtocolError));
        assert_eq!(run(b"*99\r\n").0, Err(ProtocolError));
        assert_eq!(run(b"*1\r\n$99999999999\r\n").0, Err(ProtocolError));
    }

    #[test]
    fn decimals() {
        for n in [0usize, 7, 10, 12345, usize::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    #[test]
    fn leftover_stays_in_input() {
        let mut store = Store::default();
        let mut b = Buffers::new();
        b.input
            .extend_from_slice(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI");
        b.run(&mut store).unwrap();
        assert_eq!(b.input, b"*1\r\n$4\r\nPI");
        assert_eq!(b.output, b"+PONG\r\n");
    }
}
