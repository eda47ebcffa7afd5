//! The randomized differential test: random command sequences over the supported commands
//! (valid and invalid arguments, every type, TTLs, transactions) sent to a real
//! `redis-server` and to sluice side by side, replies compared byte for byte (after the
//! normalizations listed in `Norm`).
//!
//! The work is split into episodes: FLUSHALL, then `EPISODE_LEN` commands. When an episode
//! diverges it is shrunk (commands are dropped while the divergence persists) and printed as
//! a transcript in the `tests/diff/*.txt` format, ready to become a regression line.
//!
//! `cargo test` runs a fixed seed for a bounded number of episodes. For release checks, run
//! longer with other seeds:
//!
//! ```text
//! SLUICE_RDIFF_SEED=7 SLUICE_RDIFF_EPISODES=20000 cargo test --release --test it random_diff -- --nocapture
//! ```
//!
//! `SLUICE_RDIFF_SEED` picks the sequence (default 1), `SLUICE_RDIFF_EPISODES` how many
//! episodes run (default 300, about 15,000 commands).
//!
//! What is deliberately left out: commands whose replies depend on time at a finer grain than
//! a second, on randomness that changes data (SPOP), on process identity (CLIENT, INFO, TIME,
//! CONFIG, DEBUG, MEMORY USAGE, OBJECT IDLETIME/FREQ/REFCOUNT), sluice's own commands (CL.THROTTLE,
//! test mode), and short TTLs (a key must not expire between the two servers' commands).

use std::time::Duration;

use crate::support::{Conn, Read1, RedisServer, encode_command, escape, frame_len, sluice};

/// Commands per episode.
const EPISODE_LEN: usize = 50;
/// How long either server may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// xorshift64*: small, deterministic, good enough to pick commands.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// How a reply is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Norm {
    /// Byte for byte.
    Exact,
    /// Top-level array elements sorted (unordered collections).
    Sorted,
    /// Top-level array taken as (field, value) pairs, pairs sorted.
    SortedPairs,
    /// Only the type byte (random picks, SCAN cursors).
    TypeOnly,
    /// An integer that may differ by the time between the two servers' commands (PTTL…).
    Near(i64),
}

/// How to compare the reply of `args`.
fn norm_of(args: &[Vec<u8>]) -> Norm {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    match name.as_str() {
        "KEYS" | "SMEMBERS" | "HKEYS" | "HVALS" | "SINTER" | "SUNION" | "SDIFF" => Norm::Sorted,
        "HGETALL" => Norm::SortedPairs,
        "SRANDMEMBER" | "HRANDFIELD" | "ZRANDMEMBER" | "RANDOMKEY" | "SCAN" | "HSCAN" | "SSCAN"
        | "ZSCAN" => Norm::TypeOnly,
        "PTTL" | "PEXPIRETIME" => Norm::Near(1000),
        "EXPIRETIME" => Norm::Near(1),
        _ => Norm::Exact,
    }
}

// ---- the generator -------------------------------------------------------------------------

const SHARED_KEYS: &[&str] = &["a", "b", "c", "{t}1", "\x00bin", ""];
const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "42",
    "3.5",
    "-0",
    "1e3",
    "abc",
    "",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    " 1",
    "1 ",
    "0x10",
    "inf",
    "-inf",
    "nan",
    "\x00\x7f",
    "x y",
    "007",
    "10.50",
    "hello world",
    "a",
];
const INTS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "5",
    "10",
    "100",
    "-100",
    "abc",
    "1.5",
    "",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
];
const FLOATS: &[&str] = &[
    "0", "1", "-1", "1.5", "-2.25", "0.1", "1e3", "5e-3", "inf", "-inf", "+inf", "nan", "abc",
    "1e308", "-0", "3",
];
const SCORES: &[&str] = &[
    "0", "1", "-1", "1.5", "2", "3", "-inf", "+inf", "inf", "(1", "(-1", "(2", "nan", "abc",
    "1e308", "-0", "10", "(inf",
];
const LEX: &[&str] = &[
    "-", "+", "[a", "(a", "[b", "(c", "a", "[", "(", "", "[m", "(z",
];
const MEMBERS: &[&str] = &[
    "a", "b", "c", "m1", "m2", "x", "1", "2", "10", "-5", "", "z",
];
/// A TTL long enough never to pass during a run (seconds).
const LONG_SECS: &[&str] = &["1000", "86400", "100000"];
/// TTLs that delete at once or are invalid.
const ODD_SECS: &[&str] = &["0", "-1", "-100", "abc", "1.5", "9223372036854775807", ""];

struct Gen {
    rng: Rng,
}

impl Gen {
    fn key(&mut self, pool: &[&str]) -> String {
        if self.rng.chance(25) {
            self.rng.pick(SHARED_KEYS).to_string()
        } else {
            self.rng.pick(pool).to_string()
        }
    }
    fn value(&mut self) -> String {
        if self.rng.chance(5) {
            "v".repeat(1 + self.rng.below(100))
        } else {
            self.rng.pick(VALUES).to_string()
        }
    }
    fn int(&mut self) -> String {
        self.rng.pick(INTS).to_string()
    }
    fn secs(&mut self) -> String {
        if self.rng.chance(80) {
            self.rng.pick(LONG_SECS).to_string()
        } else {
            self.rng.pick(ODD_SECS).to_string()
        }
    }
    fn millis(&mut self) -> String {
        if self.rng.chance(80) {
            format!("{}000", self.rng.pick(LONG_SECS))
        } else {
            self.rng.pick(ODD_SECS).to_string()
        }
    }
    /// An absolute Unix time in seconds: far future, past, or invalid.
    fn at_secs(&mut self) -> String {
        self.rng
            .pick(&[
                "4102444800",
                "4102444801",
                "1",
                "0",
                "-1",
                "abc",
                "1000000000",
            ])
            .to_string()
    }
    /// An absolute Unix time in seconds in the far future, or invalid.
    fn future_secs(&mut self) -> String {
        self.rng
            .pick(&["4102444800", "4102444801", "0", "-1", "abc"])
            .to_string()
    }
    fn member(&mut self) -> String {
        self.rng.pick(MEMBERS).to_string()
    }
    fn n_of(&mut self, max: usize, mut f: impl FnMut(&mut Gen) -> Vec<String>) -> Vec<String> {
        let n = 1 + self.rng.below(max);
        (0..n).flat_map(|_| f(self)).collect()
    }

    /// One command (name first).
    fn command(&mut self) -> Vec<String> {
        const STR: &[&str] = &["s0", "s1", "s2", "n0", "n1"];
        const HASH: &[&str] = &["h0", "h1"];
        const LIST: &[&str] = &["l0", "l1"];
        const SET: &[&str] = &["t0", "t1"];
        const ZSET: &[&str] = &["z0", "z1"];
        let all: Vec<&str> = [STR, HASH, LIST, SET, ZSET].concat();
        let family = self.rng.below(100);
        let mut c: Vec<String> = if family < 28 {
            self.string_command(STR)
        } else if family < 42 {
            self.key_command(&all)
        } else if family < 54 {
            self.hash_command(HASH)
        } else if family < 66 {
            self.list_command(LIST)
        } else if family < 76 {
            self.set_command(SET)
        } else if family < 94 {
            self.zset_command(ZSET)
        } else {
            self.misc_command(&all)
        };
        // Sometimes break the arguments: too few, too many, or one replaced.
        let roll = self.rng.below(100);
        if roll < 3 && c.len() > 1 {
            c.pop();
        } else if roll < 6 {
            c.push(self.value());
        } else if roll < 9 && c.len() > 2 {
            let i = 2 + self.rng.below(c.len() - 2);
            c[i] = self.value();
        }
        if self.rng.chance(5) {
            c[0] = c[0].to_ascii_lowercase();
        }
        c
    }

    fn string_command(&mut self, keys: &[&str]) -> Vec<String> {
        let k = self.key(keys);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self.rng.below(31) {
            0 => s(&["GET", &k]),
            1 => {
                let mut c = s(&["SET", &k]);
                c.push(self.value());
                for _ in 0..self.rng.below(3) {
                    match self.rng.below(9) {
                        0 => c.extend(["EX".into(), self.secs()]),
                        1 => c.extend(["PX".into(), self.millis()]),
                        2 => c.push("NX".into()),
                        3 => c.push("XX".into()),
                        4 => c.push("KEEPTTL".into()),
                        5 => c.push("GET".into()),
                        // Future (or invalid) only: SET with a past deadline stores a key
                        // that is already expired, and when either server's active expiry
                        // removes it is a matter of timing.
                        6 => c.extend(["EXAT".into(), self.future_secs()]),
                        7 => c.extend(["PXAT".into(), format!("{}000", self.future_secs())]),
                        _ => c.push("BOGUS".into()),
                    }
                }
                c
            }
            2 => vec!["SETNX".into(), k, self.value()],
            3 => vec!["SETEX".into(), k, self.secs(), self.value()],
            4 => vec!["PSETEX".into(), k, self.millis(), self.value()],
            5 => vec!["GETSET".into(), k, self.value()],
            6 => s(&["GETDEL", &k]),
            7 => {
                let mut c = s(&["GETEX", &k]);
                match self.rng.below(5) {
                    0 => c.extend(["EX".into(), self.secs()]),
                    1 => c.extend(["PX".into(), self.millis()]),
                    2 => c.push("PERSIST".into()),
                    3 => c.extend(["EXAT".into(), self.at_secs()]),
                    _ => {}
                }
                c
            }
            8 => {
                let mut c = vec!["MGET".to_string()];
                c.extend(self.n_of(4, |g| vec![g.key(keys)]));
                c
            }
            9 | 10 => {
                let name = if self.rng.chance(70) {
                    "MSET"
                } else {
                    "MSETNX"
                };
                let mut c = vec![name.to_string()];
                c.extend(self.n_of(3, |g| vec![g.key(keys), g.value()]));
                c
            }
            11 => s(&["INCR", &k]),
            12 => s(&["DECR", &k]),
            13 => vec!["INCRBY".into(), k, self.int()],
            14 => vec!["DECRBY".into(), k, self.int()],
            15 => vec!["INCRBYFLOAT".into(), k, self.rng.pick(FLOATS).to_string()],
            16 => vec!["APPEND".into(), k, self.value()],
            17 => s(&["STRLEN", &k]),
            18 => vec!["SETRANGE".into(), k, self.int(), self.value()],
            19 => {
                let name = self.rng.pick(&["GETRANGE", "SUBSTR"]);
                vec![name.into(), k, self.int(), self.int()]
            }
            20 => vec![
                "SETBIT".into(),
                k,
                self.int(),
                self.rng.pick(&["0", "1", "2"]).into(),
            ],
            21 => vec!["GETBIT".into(), k, self.int()],
            22 => {
                let mut c = s(&["BITCOUNT", &k]);
                if self.rng.chance(60) {
                    c.extend([self.int(), self.int()]);
                    if self.rng.chance(50) {
                        c.push(self.rng.pick(&["BIT", "BYTE", "bit", "NIBBLE"]).into());
                    }
                }
                c
            }
            23 => {
                let mut c = vec!["BITPOS".into(), k, self.rng.pick(&["0", "1", "2"]).into()];
                for _ in 0..self.rng.below(3) {
                    c.push(self.int());
                }
                if c.len() == 5 && self.rng.chance(50) {
                    c.push(self.rng.pick(&["BIT", "BYTE"]).into());
                }
                c
            }
            24 => {
                let op = self.rng.pick(&["AND", "OR", "XOR", "NOT", "not", "NAND"]);
                let mut c = vec!["BITOP".to_string(), op.into(), k];
                c.extend(self.n_of(3, |g| vec![g.key(keys)]));
                c
            }
            25 => {
                let name = self.rng.pick(&["BITFIELD", "BITFIELD", "BITFIELD_RO"]);
                let mut c = vec![name.to_string(), k];
                for _ in 0..self.rng.below(4) {
                    let ty = self
                        .rng
                        .pick(&["u8", "i8", "u4", "i16", "u63", "i64", "u64", "x8"]);
                    let off = self.rng.pick(&["0", "3", "#1", "100", "-1", "x"]);
                    match self.rng.below(4) {
                        0 => c.extend(["GET".into(), ty.into(), off.into()]),
                        1 => c.extend(["SET".into(), ty.into(), off.into(), self.int()]),
                        2 => c.extend(["INCRBY".into(), ty.into(), off.into(), self.int()]),
                        _ => c.extend([
                            "OVERFLOW".into(),
                            self.rng.pick(&["WRAP", "SAT", "FAIL", "BAD"]).into(),
                        ]),
                    }
                }
                c
            }
            26 => {
                let mut c = vec!["LCS".into(), k, self.key(keys)];
                match self.rng.below(5) {
                    0 => c.push("LEN".into()),
                    1 => c.extend(["IDX".into(), "WITHMATCHLEN".into()]),
                    2 => c.extend(["IDX".into(), "MINMATCHLEN".into(), self.int()]),
                    _ => {}
                }
                c
            }
            27 => {
                let mut c = vec!["PFADD".to_string(), k];
                c.extend(self.n_of(4, |g| vec![g.value()]));
                c
            }
            28 => {
                let mut c = vec!["PFCOUNT".to_string(), k];
                c.extend(self.n_of(2, |g| vec![g.key(keys)]));
                c
            }
            29 => {
                let mut c = vec!["PFMERGE".to_string(), k];
                c.extend(self.n_of(2, |g| vec![g.key(keys)]));
                c
            }
            _ => vec!["SET".into(), k, self.rng.pick(INTS).to_string()],
        }
    }

    fn key_command(&mut self, keys: &[&str]) -> Vec<String> {
        if self.rng.chance(20) {
            return self.keys_more_command(keys);
        }
        let k = self.key(keys);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let flag = |g: &mut Gen, c: &mut Vec<String>| {
            if g.rng.chance(30) {
                c.push(
                    g.rng
                        .pick(&["NX", "XX", "GT", "LT", "nx", "BAD"])
                        .to_string(),
                );
            }
        };
        match self.rng.below(20) {
            0 | 1 => {
                let name = self.rng.pick(&["DEL", "UNLINK", "EXISTS"]);
                let mut c = vec![name.to_string()];
                c.extend(self.n_of(3, |g| vec![g.key(keys)]));
                c
            }
            2 => {
                let mut c = vec!["EXPIRE".into(), k, self.secs()];
                flag(self, &mut c);
                c
            }
            3 => {
                let mut c = vec!["PEXPIRE".into(), k, self.millis()];
                flag(self, &mut c);
                c
            }
            4 => {
                let mut c = vec!["EXPIREAT".into(), k, self.at_secs()];
                flag(self, &mut c);
                c
            }
            5 => {
                let mut c = vec!["PEXPIREAT".into(), k, format!("{}000", self.at_secs())];
                flag(self, &mut c);
                c
            }
            6 => s(&["TTL", &k]),
            7 => s(&["PTTL", &k]),
            8 => s(&["EXPIRETIME", &k]),
            9 => s(&["PEXPIRETIME", &k]),
            10 => s(&["PERSIST", &k]),
            11 => s(&["TYPE", &k]),
            12 => vec!["RENAME".into(), k, self.key(keys)],
            13 => vec!["RENAMENX".into(), k, self.key(keys)],
            14 => s(&["DBSIZE"]),
            15 => vec![
                "KEYS".into(),
                self.rng
                    .pick(&["*", "s*", "?0", "[hl]*", "*1", "z?", "\\*"])
                    .into(),
            ],
            16 => s(&["OBJECT", "ENCODING", &k]),
            17 => vec![
                "SELECT".into(),
                self.rng.pick(&["0", "1", "0", "16", "abc", "-1"]).into(),
            ],
            18 => vec!["SCAN".into(), "0".into(), "COUNT".into(), "100".into()],
            _ => s(&["RANDOMKEY"]),
        }
    }

    fn hash_command(&mut self, keys: &[&str]) -> Vec<String> {
        let k = self.key(keys);
        let field = |g: &mut Gen| {
            g.rng
                .pick(&["f1", "f2", "f3", "n", "", "long-field-name"])
                .to_string()
        };
        match self.rng.below(16) {
            0 | 1 => {
                let name = self.rng.pick(&["HSET", "HSET", "HMSET"]);
                let mut c = vec![name.to_string(), k];
                c.extend(self.n_of(3, |g| vec![field(g), g.value()]));
                c
            }
            2 => vec!["HSETNX".into(), k, field(self), self.value()],
            3 => vec!["HGET".into(), k, field(self)],
            4 => {
                let mut c = vec!["HMGET".to_string(), k];
                c.extend(self.n_of(3, |g| vec![field(g)]));
                c
            }
            5 => vec!["HGETALL".into(), k],
            6 => vec!["HKEYS".into(), k],
            7 => vec!["HVALS".into(), k],
            8 => {
                let mut c = vec!["HDEL".to_string(), k];
                c.extend(self.n_of(2, |g| vec![field(g)]));
                c
            }
            9 => vec!["HEXISTS".into(), k, field(self)],
            10 => vec!["HLEN".into(), k],
            11 => vec!["HSTRLEN".into(), k, field(self)],
            12 => vec!["HINCRBY".into(), k, field(self), self.int()],
            13 => vec![
                "HINCRBYFLOAT".into(),
                k,
                field(self),
                self.rng.pick(FLOATS).to_string(),
            ],
            14 => vec!["HRANDFIELD".into(), k],
            _ => vec!["HSCAN".into(), k, "0".into()],
        }
    }

    fn list_command(&mut self, keys: &[&str]) -> Vec<String> {
        let k = self.key(keys);
        let idx = |g: &mut Gen| {
            g.rng
                .pick(&["0", "1", "-1", "2", "-2", "10", "-10", "abc"])
                .to_string()
        };
        match self.rng.below(18) {
            0..=3 => {
                let name = self.rng.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
                let mut c = vec![name.to_string(), k];
                c.extend(self.n_of(3, |g| vec![g.member()]));
                c
            }
            4 | 5 => {
                let mut c = vec![self.rng.pick(&["LPOP", "RPOP"]).to_string(), k];
                if self.rng.chance(40) {
                    c.push(self.rng.pick(&["0", "1", "2", "5", "-1", "abc"]).into());
                }
                c
            }
            6 => vec!["LLEN".into(), k],
            7 => vec!["LINDEX".into(), k, idx(self)],
            8 => vec!["LRANGE".into(), k, idx(self), idx(self)],
            9 => vec!["LTRIM".into(), k, idx(self), idx(self)],
            10 => vec!["LSET".into(), k, idx(self), self.member()],
            11 => vec!["LREM".into(), k, idx(self), self.member()],
            12 => vec![
                "LINSERT".into(),
                k,
                self.rng
                    .pick(&["BEFORE", "AFTER", "after", "MIDDLE"])
                    .into(),
                self.member(),
                self.member(),
            ],
            13 => {
                let mut c = vec!["LPOS".into(), k, self.member()];
                for _ in 0..self.rng.below(3) {
                    c.push(self.rng.pick(&["RANK", "COUNT", "MAXLEN"]).into());
                    c.push(self.rng.pick(&["0", "1", "-1", "2", "-2", "abc"]).into());
                }
                c
            }
            14 => vec!["RPOPLPUSH".into(), k, self.key(keys)],
            15 => {
                let keys: Vec<String> = self.n_of(3, |g| vec![g.key(keys)]);
                let mut c = vec!["LMPOP".to_string(), keys.len().to_string()];
                c.extend(keys);
                c.push(self.rng.pick(&["LEFT", "RIGHT", "right", "UP"]).into());
                if self.rng.chance(50) {
                    c.extend([
                        "COUNT".into(),
                        self.rng.pick(&["0", "1", "2", "5", "-1", "abc"]).into(),
                    ]);
                }
                c
            }
            _ => vec![
                "LMOVE".into(),
                k,
                self.key(keys),
                self.rng.pick(&["LEFT", "RIGHT", "left", "UP"]).into(),
                self.rng.pick(&["LEFT", "RIGHT"]).into(),
            ],
        }
    }

    fn set_command(&mut self, keys: &[&str]) -> Vec<String> {
        let k = self.key(keys);
        match self.rng.below(12) {
            0..=2 => {
                let mut c = vec!["SADD".to_string(), k];
                c.extend(self.n_of(4, |g| vec![g.member()]));
                c
            }
            3 => {
                let mut c = vec!["SREM".to_string(), k];
                c.extend(self.n_of(2, |g| vec![g.member()]));
                c
            }
            4 => vec!["SMEMBERS".into(), k],
            5 => vec!["SISMEMBER".into(), k, self.member()],
            6 => {
                let mut c = vec!["SMISMEMBER".to_string(), k];
                c.extend(self.n_of(3, |g| vec![g.member()]));
                c
            }
            7 => vec!["SCARD".into(), k],
            8 => {
                let name = self.rng.pick(&[
                    "SINTER",
                    "SUNION",
                    "SDIFF",
                    "SINTERSTORE",
                    "SUNIONSTORE",
                    "SDIFFSTORE",
                ]);
                let mut c = vec![name.to_string(), k];
                c.extend(self.n_of(3, |g| vec![g.key(keys)]));
                c
            }
            9 => {
                let keys: Vec<String> = self.n_of(3, |g| vec![g.key(keys)]);
                let mut c = vec!["SINTERCARD".to_string(), keys.len().to_string()];
                c.extend(keys);
                if self.rng.chance(40) {
                    c.extend(["LIMIT".into(), self.int()]);
                }
                c
            }
            10 => vec!["SMOVE".into(), k, self.key(keys), self.member()],
            _ => vec!["SRANDMEMBER".into(), k],
        }
    }

    fn zset_command(&mut self, keys: &[&str]) -> Vec<String> {
        if self.rng.chance(25) {
            return self.zset_algebra_command(keys);
        }
        let k = self.key(keys);
        let score = |g: &mut Gen| g.rng.pick(SCORES).to_string();
        let lex = |g: &mut Gen| g.rng.pick(LEX).to_string();
        let rank = |g: &mut Gen| {
            g.rng
                .pick(&["0", "1", "-1", "2", "-2", "5", "-5", "abc"])
                .to_string()
        };
        let limit = |g: &mut Gen, c: &mut Vec<String>| {
            if g.rng.chance(30) {
                c.push("LIMIT".into());
                c.push(g.rng.pick(&["0", "1", "-1", "2"]).into());
                c.push(g.rng.pick(&["1", "2", "-1", "0", "10"]).into());
            }
        };
        match self.rng.below(24) {
            0..=3 => {
                let mut c = vec!["ZADD".to_string(), k];
                for _ in 0..self.rng.below(2) {
                    c.push(
                        self.rng
                            .pick(&["NX", "XX", "GT", "LT", "CH", "INCR"])
                            .into(),
                    );
                }
                c.extend(self.n_of(3, |g| {
                    vec![
                        g.rng
                            .pick(&["1", "2", "3", "1.5", "-1", "0", "inf", "-inf", "10"])
                            .into(),
                        g.member(),
                    ]
                }));
                c
            }
            4 => vec![
                "ZINCRBY".into(),
                k,
                self.rng.pick(FLOATS).into(),
                self.member(),
            ],
            5 => {
                let mut c = vec!["ZREM".to_string(), k];
                c.extend(self.n_of(2, |g| vec![g.member()]));
                c
            }
            6 => vec!["ZCARD".into(), k],
            7 => vec!["ZCOUNT".into(), k, score(self), score(self)],
            8 => vec!["ZLEXCOUNT".into(), k, lex(self), lex(self)],
            9 => vec!["ZSCORE".into(), k, self.member()],
            10 => {
                let mut c = vec!["ZMSCORE".to_string(), k];
                c.extend(self.n_of(3, |g| vec![g.member()]));
                c
            }
            11 => vec![
                self.rng.pick(&["ZRANK", "ZREVRANK"]).into(),
                k,
                self.member(),
            ],
            12 | 13 => {
                let mut c = vec!["ZRANGE".to_string(), k];
                match self.rng.below(3) {
                    0 => c.extend([rank(self), rank(self)]),
                    1 => {
                        c.extend([score(self), score(self), "BYSCORE".into()]);
                        limit(self, &mut c);
                    }
                    _ => {
                        c.extend([lex(self), lex(self), "BYLEX".into()]);
                        limit(self, &mut c);
                    }
                }
                if self.rng.chance(30) {
                    c.push("REV".into());
                }
                if self.rng.chance(40) {
                    c.push("WITHSCORES".into());
                }
                c
            }
            14 => {
                let mut c = vec![
                    self.rng
                        .pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"])
                        .to_string(),
                    k,
                    score(self),
                    score(self),
                ];
                if self.rng.chance(40) {
                    c.push("WITHSCORES".into());
                }
                limit(self, &mut c);
                c
            }
            15 => {
                let mut c = vec![
                    self.rng
                        .pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"])
                        .to_string(),
                    k,
                    lex(self),
                    lex(self),
                ];
                limit(self, &mut c);
                c
            }
            16 => {
                let mut c = vec!["ZREVRANGE".into(), k, rank(self), rank(self)];
                if self.rng.chance(40) {
                    c.push("WITHSCORES".into());
                }
                c
            }
            17 => vec![
                "ZRANGESTORE".into(),
                self.key(keys),
                k,
                rank(self),
                rank(self),
            ],
            18 => vec!["ZREMRANGEBYSCORE".into(), k, score(self), score(self)],
            19 => vec!["ZREMRANGEBYRANK".into(), k, rank(self), rank(self)],
            20 => vec!["ZREMRANGEBYLEX".into(), k, lex(self), lex(self)],
            21 | 22 => {
                let mut c = vec![self.rng.pick(&["ZPOPMIN", "ZPOPMAX"]).to_string(), k];
                if self.rng.chance(40) {
                    c.push(self.rng.pick(&["0", "1", "2", "-1", "abc"]).into());
                }
                c
            }
            _ => vec!["ZRANDMEMBER".into(), k],
        }
    }

    /// ZUNION/ZINTER/ZDIFF (+STORE), ZINTERCARD, ZMPOP over sorted sets, plain sets (t0, t1)
    /// and keys of other types.
    fn zset_algebra_command(&mut self, keys: &[&str]) -> Vec<String> {
        let pool: Vec<&str> = [keys, &["t0", "t1", "s0"][..]].concat();
        let n = 1 + self.rng.below(3);
        let mut srcs: Vec<String> = (0..n).map(|_| self.key(&pool)).collect();
        let numkeys = if self.rng.chance(5) {
            self.rng.pick(&["0", "-1", "abc", "9"]).to_string()
        } else {
            n.to_string()
        };
        let op = self.rng.below(5);
        let mut c: Vec<String> = match op {
            0 => vec![
                self.rng.pick(&["ZUNION", "ZINTER", "ZDIFF"]).into(),
                numkeys,
            ],
            1 => vec![
                self.rng
                    .pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"])
                    .into(),
                self.key(keys),
                numkeys,
            ],
            2 => vec!["ZINTERCARD".into(), numkeys],
            _ => vec!["ZMPOP".into(), numkeys],
        };
        c.append(&mut srcs);
        match op {
            0 | 1 => {
                if self.rng.chance(40) {
                    c.push("WEIGHTS".into());
                    for _ in 0..n {
                        c.push(self.rng.pick(FLOATS).into());
                    }
                }
                if self.rng.chance(40) {
                    c.push("AGGREGATE".into());
                    c.push(self.rng.pick(&["SUM", "MIN", "MAX", "max", "avg"]).into());
                }
                if op == 0 && self.rng.chance(50) {
                    c.push("WITHSCORES".into());
                }
            }
            2 => {
                if self.rng.chance(50) {
                    c.push("LIMIT".into());
                    c.push(self.rng.pick(&["0", "1", "2", "-1", "abc"]).into());
                }
            }
            _ => {
                c.push(self.rng.pick(&["MIN", "MAX", "min", "LEFT"]).into());
                if self.rng.chance(50) {
                    c.push("COUNT".into());
                    c.push(self.rng.pick(&["1", "2", "10", "0", "-1", "abc"]).into());
                }
            }
        }
        c
    }

    /// TOUCH, COPY, MOVE and SORT/SORT_RO over keys of every type.
    fn keys_more_command(&mut self, keys: &[&str]) -> Vec<String> {
        let k = self.key(keys);
        match self.rng.below(6) {
            0 => vec!["TOUCH".into(), k, self.key(keys)],
            1 => {
                let mut c = vec!["COPY".into(), k, self.key(keys)];
                if self.rng.chance(30) {
                    c.push("DB".into());
                    c.push(self.rng.pick(&["0", "1", "16", "abc"]).into());
                }
                if self.rng.chance(40) {
                    c.push("REPLACE".into());
                }
                c
            }
            2 => vec![
                "MOVE".into(),
                k,
                self.rng.pick(&["0", "1", "16", "abc"]).into(),
            ],
            _ => {
                let mut c = vec![self.rng.pick(&["SORT", "SORT", "SORT_RO"]).into(), k];
                if self.rng.chance(30) {
                    c.push("LIMIT".into());
                    c.push(self.rng.pick(&["0", "1", "-1", "2"]).into());
                    c.push(self.rng.pick(&["1", "2", "-1", "0", "10"]).into());
                }
                if self.rng.chance(30) {
                    c.push(self.rng.pick(&["ASC", "DESC"]).into());
                }
                if self.rng.chance(40) {
                    c.push("ALPHA".into());
                }
                if self.rng.chance(20) {
                    c.push("STORE".into());
                    c.push(self.key(keys));
                }
                c
            }
        }
    }

    fn misc_command(&mut self, keys: &[&str]) -> Vec<String> {
        if self.rng.chance(30) {
            return self.script_command(keys);
        }
        match self.rng.below(16) {
            10 => vec![
                "SWAPDB".into(),
                self.rng.pick(&["0", "1", "abc"]).into(),
                self.rng.pick(&["1", "0", "16"]).into(),
            ],
            // (Not OBJECT REFCOUNT: inside MULTI, Redis counts the references its queued commands
            // hold to a value they stored, an artifact of its object sharing.)
            11 => vec!["TYPE".into(), self.key(keys)],
            12 => vec![
                "SCRIPT".into(),
                "LOAD".into(),
                "return redis.call('GET', KEYS[1])".into(),
            ],
            13 => vec![
                "EVALSHA".into(),
                // sha1 of the script above, and one that is not loaded.
                self.rng
                    .pick(&[
                        "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
                        "d3c21d0c2b9ca22f82737626a27bcaf5d288f99f",
                    ])
                    .into(),
                "1".into(),
                self.key(keys),
            ],
            14 => vec![
                "SCRIPT".into(),
                "EXISTS".into(),
                "d3c21d0c2b9ca22f82737626a27bcaf5d288f99f".into(),
            ],
            15 => vec!["FLUSHALL".into()],
            0 => vec!["PING".into()],
            1 => vec!["PING".into(), self.value()],
            2 => vec!["ECHO".into(), self.value()],
            3 => vec!["MULTI".into()],
            4 => vec!["EXEC".into()],
            5 => vec!["DISCARD".into()],
            6 => vec!["WATCH".into(), self.key(keys)],
            7 => vec!["UNWATCH".into()],
            8 => vec!["FLUSHDB".into()],
            _ => vec!["NOSUCHCOMMAND".into(), self.value()],
        }
    }

    /// EVAL of small scripts: replies converted both ways, errors, keys and arguments.
    fn script_command(&mut self, keys: &[&str]) -> Vec<String> {
        const SCRIPTS: &[(&str, usize)] = &[
            ("return redis.call('INCR', KEYS[1])", 1),
            ("return redis.call('GET', KEYS[1])", 1),
            ("return redis.pcall('LPUSH', KEYS[1], ARGV[1])", 1),
            ("return redis.call('SET', KEYS[1], ARGV[1])", 1),
            ("return {1, 2, {3, 'x'}, nil, 5}", 0),
            ("return tonumber(ARGV[1])", 0),
            ("return ARGV[1] .. 'x'", 0),
            ("return {err = 'custom error'}", 0),
            ("return {ok = 'fine'}", 0),
            ("return 3.99", 0),
            ("return true", 0),
            ("return false", 0),
            (
                "return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')",
                1,
            ),
            ("return redis.call('HGETALL', KEYS[1])", 1),
            ("return redis.call('TTL', KEYS[1])", 1),
            ("return #KEYS + #ARGV", 2),
            ("return redis.call('NOSUCH')", 0),
            ("return redis.pcall('INCR', KEYS[1])", 1),
            (
                "local v = redis.call('GET', KEYS[1]) if v then return v else return 'none' end",
                1,
            ),
            ("this is not lua", 0),
        ];
        let (body, nkeys) = SCRIPTS[self.rng.below(SCRIPTS.len())];
        let mut c = vec!["EVAL".to_string(), body.to_string(), nkeys.to_string()];
        for _ in 0..nkeys {
            c.push(self.key(keys));
        }
        for _ in 0..self.rng.below(3) {
            c.push(self.value());
        }
        c
    }

    /// A command, or a whole transaction (MULTI, a few commands, EXEC or DISCARD).
    fn step(&mut self) -> Vec<Vec<String>> {
        if self.rng.chance(6) {
            let mut block = Vec::new();
            if self.rng.chance(30) {
                block.push(vec!["WATCH".to_string(), self.key(&["s0", "h0", "z0"])]);
            }
            block.push(vec!["MULTI".to_string()]);
            for _ in 0..1 + self.rng.below(5) {
                block.push(self.command());
            }
            block.push(vec![
                if self.rng.chance(85) {
                    "EXEC"
                } else {
                    "DISCARD"
                }
                .to_string(),
            ]);
            block
        } else {
            vec![self.command()]
        }
    }
}

// ---- running and comparing ---------------------------------------------------------------

/// The two servers and a connection to each.
struct Pair {
    redis: RedisServer,
    sluice: sluice::TestServer,
    r: Conn,
    s: Conn,
    /// Episodes in RESP3 (after HELLO 3) exercise the other reply encodings.
    resp3: bool,
}

impl Pair {
    fn start() -> Pair {
        let redis = RedisServer::start();
        let sluice = sluice();
        let r = Conn::connect(redis.addr());
        let s = Conn::connect(sluice.addr());
        Pair {
            redis,
            sluice,
            r,
            s,
            resp3: false,
        }
    }

    /// Fresh connections and empty databases.
    fn reset(&mut self) {
        self.r = Conn::connect(self.redis.addr());
        self.s = Conn::connect(self.sluice.addr());
        for c in [&mut self.r, &mut self.s] {
            if self.resp3 {
                // The reply holds each server's own id and version: not compared.
                c.send(&[b"HELLO", b"3"]);
                let _ = c.read_one(REPLY_TIMEOUT);
            }
            for cmd in [&b"FLUSHALL"[..], b"SCRIPT"] {
                let args: &[&[u8]] = if cmd == b"SCRIPT" {
                    &[b"SCRIPT", b"FLUSH"]
                } else {
                    &[cmd]
                };
                c.send(args);
                let _ = c.read_one(REPLY_TIMEOUT);
            }
        }
    }

    /// Sends one command to both; the replies, or why one is missing.
    fn exchange(&mut self, args: &[Vec<u8>]) -> (Vec<u8>, Vec<u8>) {
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        let bytes = encode_command(&refs);
        let mut out = Vec::new();
        for c in [&mut self.r, &mut self.s] {
            if c.try_send_raw(&bytes).is_err() {
                out.push(b"<write failed>".to_vec());
                continue;
            }
            out.push(match c.read_one(REPLY_TIMEOUT) {
                Read1::Reply(r) => r,
                other => format!("<{other:?}>").into_bytes(),
            });
        }
        let s = out.pop().unwrap_or_default();
        let r = out.pop().unwrap_or_default();
        (r, s)
    }
}

/// The elements of a top-level aggregate reply, or None if it is not one.
fn elements(reply: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    if !matches!(reply.first(), Some(b'*' | b'~' | b'%')) {
        return None;
    }
    let header_end = reply.windows(2).position(|w| w == b"\r\n")? + 2;
    let mut rest = &reply[header_end..];
    let mut items = Vec::new();
    while !rest.is_empty() {
        let n = frame_len(rest).ok()??;
        items.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    Some((reply[..header_end].to_vec(), items))
}

fn int_of(reply: &[u8]) -> Option<i64> {
    std::str::from_utf8(reply.strip_prefix(b":")?)
        .ok()?
        .trim_end()
        .parse()
        .ok()
}

/// True if the two replies agree under `norm`.
fn same(norm: Norm, r: &[u8], s: &[u8]) -> bool {
    match norm {
        Norm::Exact => r == s,
        Norm::TypeOnly => r.first() == s.first(),
        Norm::Near(tolerance) => match (int_of(r), int_of(s)) {
            (Some(a), Some(b)) if a >= 0 && b >= 0 => (a - b).abs() <= tolerance,
            _ => r == s,
        },
        Norm::Sorted | Norm::SortedPairs => match (elements(r), elements(s)) {
            (Some((hr, mut er)), Some((hs, mut es))) => {
                if norm == Norm::SortedPairs {
                    let pairs = |e: &[Vec<u8>]| -> Vec<Vec<u8>> {
                        e.chunks(2).map(|p| p.concat()).collect()
                    };
                    er = pairs(&er);
                    es = pairs(&es);
                }
                er.sort();
                es.sort();
                hr == hs && er == es
            }
            _ => r == s,
        },
    }
}

/// Compares the replies of a command; for EXEC, element by element with each queued
/// command's own normalization.
fn agree(args: &[Vec<u8>], queued: &[Vec<Vec<u8>>], r: &[u8], s: &[u8]) -> bool {
    if args[0].eq_ignore_ascii_case(b"EXEC")
        && let (Some((hr, er)), Some((hs, es))) = (elements(r), elements(s))
    {
        return hr == hs
            && er.len() == es.len()
            && er
                .iter()
                .zip(&es)
                .zip(queued)
                .all(|((a, b), q)| same(norm_of(q), a, b));
    }
    same(norm_of(args), r, s)
}

/// Runs `cmds` from a fresh state; the index of the first divergence and both replies.
fn first_divergence(pair: &mut Pair, cmds: &[Vec<Vec<u8>>]) -> Option<(usize, Vec<u8>, Vec<u8>)> {
    pair.reset();
    let mut queued: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut in_multi = false;
    for (i, args) in cmds.iter().enumerate() {
        let (r, s) = pair.exchange(args);
        if !agree(args, &queued, &r, &s) {
            return Some((i, r, s));
        }
        let name = args[0].to_ascii_uppercase();
        match name.as_slice() {
            b"MULTI" if r == b"+OK\r\n" => {
                in_multi = true;
                queued.clear();
            }
            b"EXEC" | b"DISCARD" => in_multi = false,
            _ if in_multi && r == b"+QUEUED\r\n" => queued.push(args.clone()),
            _ => {}
        }
    }
    None
}

/// Drops commands while the divergence persists (one pass per size, largest chunks first).
fn shrink(pair: &mut Pair, mut cmds: Vec<Vec<Vec<u8>>>) -> Vec<Vec<Vec<u8>>> {
    if let Some((i, _, _)) = first_divergence(pair, &cmds) {
        cmds.truncate(i + 1);
    }
    let mut chunk = cmds.len() / 2;
    while chunk >= 1 {
        let mut start = 0;
        while start + chunk < cmds.len() {
            let mut candidate = cmds.clone();
            candidate.drain(start..start + chunk);
            if let Some((i, _, _)) = first_divergence(pair, &candidate) {
                candidate.truncate(i + 1);
                cmds = candidate;
            } else {
                start += chunk;
            }
        }
        chunk /= 2;
    }
    cmds
}

/// One argument in redis-cli's inline syntax (the transcript format).
fn quote(arg: &[u8]) -> String {
    let plain = !arg.is_empty()
        && arg
            .iter()
            .all(|&b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'));
    if plain {
        return String::from_utf8_lossy(arg).into_owned();
    }
    let mut s = String::from("\"");
    for &b in arg {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

fn transcript(cmds: &[Vec<Vec<u8>>]) -> String {
    cmds.iter()
        .map(|c| c.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A known divergence: what it is, and how to recognise its minimal transcript.
type Known = (&'static str, fn(&[Vec<Vec<u8>>]) -> bool);

/// Divergences found, reported and not fixed yet: printed, not failed on, so that long runs
/// keep finding new ones. Remove an entry once its fix lands.
const KNOWN: &[Known] = &[];

/// A positive TTL in milliseconds short enough to pass within an episode would race the
/// two servers' clocks (the key expires between two commands on one server and not on the
/// other), so it is made long; zero, negative and malformed TTLs stay as generated.
fn lengthen_short_ttl(cmd: &mut [Vec<u8>]) {
    let name = cmd
        .first()
        .map(|n| n.to_ascii_uppercase())
        .unwrap_or_default();
    let at = match name.as_slice() {
        b"PSETEX" | b"PEXPIRE" => Some(2),
        b"SET" | b"GETEX" => cmd
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"PX"))
            .map(|i| i + 1),
        _ => None,
    };
    if let Some(ttl) = at.and_then(|i| cmd.get_mut(i))
        && let Some(ms) = std::str::from_utf8(ttl)
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
        && (1..1000).contains(&ms)
    {
        *ttl = b"100000000".to_vec();
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_command_sequences_match_redis() {
    let seed = env_u64("SLUICE_RDIFF_SEED", 1);
    let episodes = env_u64("SLUICE_RDIFF_EPISODES", 300);
    let mut pair = Pair::start();
    let mut generator = Gen {
        rng: Rng::new(seed),
    };
    let mut found: Vec<(String, String, Vec<u8>, Vec<u8>)> = Vec::new();
    let mut commands = 0usize;
    for episode in 0..episodes {
        let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
        while cmds.len() < EPISODE_LEN {
            for c in generator.step() {
                let mut c: Vec<Vec<u8>> = c.into_iter().map(String::into_bytes).collect();
                lengthen_short_ttl(&mut c);
                cmds.push(c);
            }
        }
        commands += cmds.len();
        pair.resp3 = episode % 4 == 3;
        let Some(_) = first_divergence(&mut pair, &cmds) else {
            continue;
        };
        let minimal = shrink(&mut pair, cmds);
        let (_, r, s) = first_divergence(&mut pair, &minimal).unwrap_or_default();
        let last =
            String::from_utf8_lossy(&minimal.last().map(|c| c[0].clone()).unwrap_or_default())
                .to_ascii_uppercase();
        if let Some((what, _)) = KNOWN.iter().find(|(_, matches)| matches(&minimal)) {
            eprintln!("random_diff: episode {episode}: known divergence ({what})");
            continue;
        }
        // One report per command name: the same bug tends to show up again and again.
        if !found.iter().any(|f| f.0 == last) {
            let proto = if pair.resp3 { "HELLO 3\n" } else { "" };
            eprintln!(
                "random_diff: seed {seed} episode {episode}: divergence on {last}\n{proto}{}\n  redis:  {}\n  sluice: {}",
                transcript(&minimal),
                escape(&r),
                escape(&s)
            );
            found.push((last, transcript(&minimal), r, s));
        }
        if found.len() >= 10 {
            break;
        }
    }
    eprintln!(
        "random_diff: seed {seed}, {episodes} episodes, {commands} commands, {} divergences",
        found.len()
    );
    assert!(
        found.is_empty(),
        "sluice and redis-server diverged (minimal transcripts above, in tests/diff format):\n{}",
        found
            .iter()
            .map(|f| format!(
                "# {}\n{}\n#   redis:  {}\n#   sluice: {}",
                f.0,
                f.1,
                escape(&f.2),
                escape(&f.3)
            ))
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

// ---- geo -----------------------------------------------------------------------------------

/// Random geo sets and searches: points in clusters (equal positions, so ties), near the
/// poles' Mercator limits and the antimeridian, searches of every shape, unit, order, COUNT
/// and ANY, the STORE forms, odd scores written with ZADD, and broken arguments.
struct GeoGen {
    rng: Rng,
}

/// Cluster centres (longitude, latitude): Sicily, the equator's origin, the antimeridian, the
/// Mercator limits, and a point on a high geohash cell boundary.
const GEO_CENTRES: &[(f64, f64)] = &[
    (15.0, 37.5),
    (0.0, 0.0),
    (179.99, 10.0),
    (-179.99, -10.0),
    (30.0, 85.0),
    (-30.0, -85.0),
    (90.0, 45.0),
    (-0.0001, 66.5),
];
const GEO_MEMBERS: &[&str] = &[
    "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "q0", "q1", "q2", "q3", "q4", "q5",
    "", "x y",
];
const GEO_UNITS: &[&str] = &["m", "km", "ft", "mi", "KM", "Mi", "parsec"];

impl GeoGen {
    fn coord(&mut self) -> (String, String) {
        if self.rng.chance(4) {
            let odd = ["181", "-180.5", "86", "abc", "inf", "", "1e400"];
            return (
                self.rng.pick(&odd).to_string(),
                self.rng.pick(&["0", "85.06", "-90", "x"]).to_string(),
            );
        }
        let (lon, lat) = GEO_CENTRES[self.rng.below(GEO_CENTRES.len())];
        // A third of the points sit exactly on the centre; the others within about 5 degrees.
        let spread = if self.rng.chance(33) {
            0.0
        } else {
            [0.001, 0.05, 1.0, 5.0][self.rng.below(4)]
        };
        let off = |g: &mut GeoGen| (g.rng.below(2001) as f64 - 1000.0) / 1000.0 * spread;
        let lon = (lon + off(self)).clamp(-180.0, 180.0);
        let lat = (lat + off(self)).clamp(-85.05112878, 85.05112878);
        (format!("{lon:.6}"), format!("{lat:.6}"))
    }

    fn member(&mut self) -> String {
        self.rng.pick(GEO_MEMBERS).to_string()
    }

    fn distance(&mut self) -> String {
        self.rng
            .pick(&[
                "0", "1", "10", "100", "500", "1000", "5000", "20000", "200000", "1.5", "-1",
                "abc", "inf", "1e9",
            ])
            .to_string()
    }

    fn unit(&mut self) -> String {
        if self.rng.chance(90) {
            self.rng.pick(&GEO_UNITS[..4]).to_string()
        } else {
            self.rng.pick(GEO_UNITS).to_string()
        }
    }

    /// The shared options of the searches, in random order.
    fn options(&mut self, with: bool) -> Vec<String> {
        let mut opts: Vec<Vec<String>> = Vec::new();
        if self.rng.chance(50) {
            opts.push(vec![self.rng.pick(&["ASC", "DESC", "asc"]).into()]);
        }
        if self.rng.chance(50) {
            let mut c = vec![
                "COUNT".to_string(),
                self.rng
                    .pick(&["1", "2", "3", "5", "8", "20", "0", "-1", "x"])
                    .into(),
            ];
            if self.rng.chance(30) {
                c.push("ANY".into());
            }
            opts.push(c);
        }
        if with {
            for w in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
                if self.rng.chance(35) {
                    opts.push(vec![w.into()]);
                }
            }
        }
        // Shuffle the option groups.
        for i in (1..opts.len()).rev() {
            let j = self.rng.below(i + 1);
            opts.swap(i, j);
        }
        opts.concat()
    }

    fn shape(&mut self) -> Vec<String> {
        let mut c = Vec::new();
        if self.rng.chance(40) {
            c.push("FROMMEMBER".into());
            c.push(self.member());
        } else {
            let (lon, lat) = self.coord();
            c.extend(["FROMLONLAT".to_string(), lon, lat]);
        }
        if self.rng.chance(50) {
            c.extend(["BYRADIUS".to_string(), self.distance(), self.unit()]);
        } else {
            c.extend([
                "BYBOX".to_string(),
                self.distance(),
                self.distance(),
                self.unit(),
            ]);
        }
        if self.rng.chance(3) {
            c.reverse();
        }
        c
    }

    fn command(&mut self) -> Vec<String> {
        let g = self.rng.pick(&["g0", "g0", "g0", "g1", "s"]).to_string();
        let dst = self.rng.pick(&["d0", "d1", "g1", "s"]).to_string();
        let mut c: Vec<String> = match self.rng.below(100) {
            0..30 => {
                let mut c = vec!["GEOADD".to_string(), g];
                for opt in ["NX", "XX", "CH"] {
                    if self.rng.chance(8) {
                        c.push(opt.into());
                    }
                }
                for _ in 0..1 + self.rng.below(6) {
                    let (lon, lat) = self.coord();
                    c.extend([lon, lat, self.member()]);
                }
                c
            }
            30..35 => vec![
                "ZADD".into(),
                g,
                self.rng
                    .pick(&[
                        "-1",
                        "0",
                        "1.5",
                        "4503599627370496",
                        "1e300",
                        "-inf",
                        "3471579339700058",
                    ])
                    .into(),
                self.member(),
            ],
            35..40 => {
                let mut c = vec![self.rng.pick(&["GEOPOS", "GEOHASH"]).to_string(), g];
                for _ in 0..self.rng.below(4) {
                    c.push(self.member());
                }
                c
            }
            40..47 => {
                let mut c = vec!["GEODIST".to_string(), g, self.member(), self.member()];
                if self.rng.chance(60) {
                    c.push(self.unit());
                }
                c
            }
            47..65 => {
                let mut c = vec!["GEOSEARCH".to_string(), g];
                c.extend(self.shape());
                c.extend(self.options(true));
                c
            }
            65..73 => {
                let mut c = vec!["GEOSEARCHSTORE".to_string(), dst, g];
                c.extend(self.shape());
                let with = self.rng.chance(5);
                c.extend(self.options(with));
                if self.rng.chance(40) {
                    c.push("STOREDIST".into());
                }
                c
            }
            73..87 => {
                let ro = self.rng.chance(30);
                let mut c = vec![if ro { "GEORADIUS_RO" } else { "GEORADIUS" }.to_string(), g];
                let (lon, lat) = self.coord();
                c.extend([lon, lat, self.distance(), self.unit()]);
                c.extend(self.options(true));
                if self.rng.chance(25) {
                    c.push(self.rng.pick(&["STORE", "STOREDIST"]).into());
                    c.push(dst);
                }
                c
            }
            87..97 => {
                let ro = self.rng.chance(30);
                let name = if ro {
                    "GEORADIUSBYMEMBER_RO"
                } else {
                    "GEORADIUSBYMEMBER"
                };
                let mut c = vec![name.to_string(), g, self.member()];
                c.extend([self.distance(), self.unit()]);
                c.extend(self.options(true));
                if self.rng.chance(25) {
                    c.push(self.rng.pick(&["STORE", "STOREDIST"]).into());
                    c.push(dst);
                }
                c
            }
            97 => vec!["SET".into(), "s".into(), "x".into()],
            98 => vec!["DEL".into(), g],
            _ => vec![
                "ZRANGE".into(),
                dst,
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
        };
        if self.rng.chance(3) && c.len() > 2 {
            c.pop();
        }
        c
    }
}

#[test]
fn random_geo_sequences_match_redis() {
    let seed = env_u64("SLUICE_RDIFF_SEED", 1);
    let episodes = env_u64("SLUICE_RDIFF_GEO_EPISODES", 120);
    let mut pair = Pair::start();
    let mut generator = GeoGen {
        rng: Rng::new(seed),
    };
    let mut commands = 0usize;
    for episode in 0..episodes {
        let cmds: Vec<Vec<Vec<u8>>> = (0..EPISODE_LEN)
            .map(|_| {
                generator
                    .command()
                    .into_iter()
                    .map(String::into_bytes)
                    .collect()
            })
            .collect();
        commands += cmds.len();
        pair.resp3 = episode % 3 == 2;
        if first_divergence(&mut pair, &cmds).is_none() {
            continue;
        }
        let minimal = shrink(&mut pair, cmds);
        let (_, r, s) = first_divergence(&mut pair, &minimal).unwrap_or_default();
        panic!(
            "geo: seed {seed} episode {episode} diverged{}:\n{}\n  redis:  {}\n  sluice: {}",
            if pair.resp3 { " (HELLO 3)" } else { "" },
            transcript(&minimal),
            escape(&r),
            escape(&s)
        );
    }
    eprintln!("random_geo: seed {seed}, {episodes} episodes, {commands} commands");
}

/// Random stream commands over a few keys: every ID form but `*` (its ID is the clock's),
/// trims with `=`, `~` and LIMIT under small and odd node sizes, deletes, XSETID, groups,
/// reads with and without a group, acknowledgements, claims (the reply forms that hold no
/// idle time), XINFO STREAM and GROUPS, wrong types and broken arguments.
struct StreamGen {
    rng: Rng,
}

impl StreamGen {
    fn key(&mut self) -> String {
        self.rng
            .pick(&["s1", "s1", "s2", "str", "nokey"])
            .to_string()
    }

    fn id(&mut self) -> String {
        let ms = self.rng.below(12);
        match self.rng.below(10) {
            0 => ms.to_string(),
            1 => format!("{ms}-*"),
            2 => self
                .rng
                .pick(&[
                    "-",
                    "+",
                    "0-0",
                    "x",
                    "(3",
                    "18446744073709551615-18446744073709551615",
                    "1-a",
                    "",
                ])
                .to_string(),
            _ => format!("{ms}-{}", self.rng.below(4)),
        }
    }

    fn fields(&mut self) -> Vec<String> {
        let n = 1 + self.rng.below(3);
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.rng.pick(&["f", "g", "f", "123", ""]).to_string());
            out.push(
                self.rng
                    .pick(&["v", "1", "-7", "a longer value here", "9223372036854775807"])
                    .to_string(),
            );
        }
        if self.rng.chance(3) {
            out.pop();
        }
        out
    }

    fn trim(&mut self) -> Vec<String> {
        let mut out = vec![self.rng.pick(&["MAXLEN", "MINID", "maxlen"]).to_string()];
        match self.rng.below(4) {
            0 => out.push("~".into()),
            1 => out.push("=".into()),
            _ => {}
        }
        if out[0].eq_ignore_ascii_case("minid") {
            out.push(self.id());
        } else {
            out.push(
                self.rng
                    .pick(&["0", "1", "2", "3", "5", "-1", "x"])
                    .to_string(),
            );
        }
        if self.rng.chance(30) {
            out.push("LIMIT".into());
            out.push(self.rng.pick(&["0", "1", "2", "5", "-1"]).to_string());
        }
        out
    }

    fn group(&mut self) -> String {
        self.rng.pick(&["g1", "g1", "g2", "nog"]).to_string()
    }

    fn consumer(&mut self) -> String {
        self.rng.pick(&["c1", "c2", "c3"]).to_string()
    }

    fn command(&mut self) -> Vec<String> {
        let key = self.key();
        let s = |x: &str| x.to_string();
        match self.rng.below(23) {
            0..=4 => {
                let mut c = vec![s("XADD"), key];
                if self.rng.chance(10) {
                    c.push(s("NOMKSTREAM"));
                }
                if self.rng.chance(35) {
                    c.extend(self.trim());
                }
                c.push(self.id());
                c.extend(self.fields());
                c
            }
            5 => {
                let mut c = vec![s("XDEL"), key];
                for _ in 0..1 + self.rng.below(3) {
                    c.push(self.id());
                }
                c
            }
            6 => {
                let mut c = vec![s("XTRIM"), key];
                c.extend(self.trim());
                c
            }
            7 | 8 => {
                let rev = self.rng.chance(40);
                let mut c = vec![
                    s(if rev { "XREVRANGE" } else { "XRANGE" }),
                    key,
                    self.id(),
                    self.id(),
                ];
                if self.rng.chance(50) {
                    c.push(s("COUNT"));
                    c.push(self.rng.pick(&["0", "1", "2", "-1", "x"]).to_string());
                }
                c
            }
            9 => vec![s("XLEN"), key],
            10 => {
                let mut c = vec![s("XSETID"), key, self.id()];
                if self.rng.chance(30) {
                    c.push(s("ENTRIESADDED"));
                    c.push(self.rng.pick(&["0", "5", "100", "-1"]).to_string());
                }
                if self.rng.chance(30) {
                    c.push(s("MAXDELETEDID"));
                    c.push(self.id());
                }
                c
            }
            11 => {
                let g = self.group();
                match self.rng.below(6) {
                    0 | 1 => {
                        let mut c = vec![
                            s("XGROUP"),
                            s("CREATE"),
                            key,
                            g,
                            self.rng.pick(&["$", "0", "3", "5-1"]).to_string(),
                        ];
                        if self.rng.chance(30) {
                            c.push(s("MKSTREAM"));
                        }
                        if self.rng.chance(20) {
                            c.push(s("ENTRIESREAD"));
                            c.push(self.rng.pick(&["0", "2", "-1", "-2"]).to_string());
                        }
                        c
                    }
                    2 => vec![
                        s("XGROUP"),
                        s("SETID"),
                        key,
                        g,
                        self.rng.pick(&["$", "0", "4"]).to_string(),
                    ],
                    3 => vec![s("XGROUP"), s("DESTROY"), key, g],
                    4 => vec![s("XGROUP"), s("CREATECONSUMER"), key, g, self.consumer()],
                    _ => vec![s("XGROUP"), s("DELCONSUMER"), key, g, self.consumer()],
                }
            }
            12..=14 => {
                let mut c = vec![s("XREADGROUP"), s("GROUP"), self.group(), self.consumer()];
                if self.rng.chance(40) {
                    c.push(s("COUNT"));
                    c.push(self.rng.pick(&["1", "2", "0"]).to_string());
                }
                if self.rng.chance(20) {
                    c.push(s("NOACK"));
                }
                c.push(s("STREAMS"));
                c.push(key);
                c.push(self.rng.pick(&[">", ">", "0", "3", "$"]).to_string());
                c
            }
            15 => {
                let mut c = vec![s("XREAD")];
                if self.rng.chance(40) {
                    c.push(s("COUNT"));
                    c.push(self.rng.pick(&["1", "2"]).to_string());
                }
                c.push(s("STREAMS"));
                let other = self.key();
                c.extend([
                    key,
                    other,
                    self.id(),
                    self.rng.pick(&["0", "$", "4"]).to_string(),
                ]);
                c
            }
            16 => {
                let mut c = vec![s("XACK"), key, self.group()];
                for _ in 0..1 + self.rng.below(3) {
                    c.push(self.id());
                }
                c
            }
            17 => vec![s("XPENDING"), key, self.group()],
            18 => {
                let mut c = vec![s("XCLAIM"), key, self.group(), self.consumer(), s("0")];
                for _ in 0..1 + self.rng.below(2) {
                    c.push(self.id());
                }
                c.push(s("JUSTID"));
                if self.rng.chance(30) {
                    c.push(s("FORCE"));
                }
                if self.rng.chance(20) {
                    c.push(s("LASTID"));
                    c.push(self.id());
                }
                c
            }
            19 => {
                let mut c = vec![
                    s("XAUTOCLAIM"),
                    key,
                    self.group(),
                    self.consumer(),
                    s("0"),
                    self.id(),
                ];
                if self.rng.chance(50) {
                    c.push(s("COUNT"));
                    c.push(self.rng.pick(&["1", "2", "0"]).to_string());
                }
                if self.rng.chance(50) {
                    c.push(s("JUSTID"));
                }
                c
            }
            20 => vec![s("XINFO"), s("STREAM"), key],
            21 => vec![s("XINFO"), s("GROUPS"), key],
            _ => match self.rng.below(3) {
                0 => vec![
                    s("CONFIG"),
                    s("SET"),
                    s("stream-node-max-entries"),
                    self.rng.pick(&["0", "1", "2", "3", "100"]).to_string(),
                ],
                1 => vec![
                    s("CONFIG"),
                    s("SET"),
                    s("stream-node-max-bytes"),
                    self.rng.pick(&["0", "40", "80", "4096"]).to_string(),
                ],
                _ => vec![s("SET"), s("str"), s("x")],
            },
        }
    }
}

#[test]
fn random_stream_sequences_match_redis() {
    let seed = env_u64("SLUICE_RDIFF_SEED", 1);
    let episodes = env_u64("SLUICE_RDIFF_STREAM_EPISODES", 150);
    let mut pair = Pair::start();
    let mut generator = StreamGen {
        rng: Rng::new(seed),
    };
    let mut commands = 0usize;
    for episode in 0..episodes {
        let cmds: Vec<Vec<Vec<u8>>> = (0..EPISODE_LEN)
            .map(|_| {
                generator
                    .command()
                    .into_iter()
                    .map(String::into_bytes)
                    .collect()
            })
            .collect();
        commands += cmds.len();
        pair.resp3 = episode % 3 == 2;
        if first_divergence(&mut pair, &cmds).is_none() {
            continue;
        }
        let minimal = shrink(&mut pair, cmds);
        let (_, r, s) = first_divergence(&mut pair, &minimal).unwrap_or_default();
        panic!(
            "stream: seed {seed} episode {episode} diverged{}:\n{}\n  redis:  {}\n  sluice: {}",
            if pair.resp3 { " (HELLO 3)" } else { "" },
            transcript(&minimal),
            escape(&r),
            escape(&s)
        );
    }
    eprintln!("random_stream: seed {seed}, {episodes} episodes, {commands} commands");
}
