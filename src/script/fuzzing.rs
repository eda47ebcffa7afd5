//! Support for fuzzing the script engine (the `fuzz/` target `scripts` and the bounded
//! property test in `tests/it/hostile_lua.rs`): random Lua from a small grammar steered by
//! the fuzzer's bytes, the known escape shapes as seeds, and the check each script must pass.
//!
//! The check: running any script never panics or aborts, it ends by itself or when killed
//! (a watchdog sends the kill after a short while; a script still running seconds later is a
//! finding), and afterwards a canary script on the same VM sees the environment unchanged:
//! library functions behave as before, and nothing the fuzzed script did is visible.

use std::borrow::Cow;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;

use super::{Host, Scripts};
use crate::protocol::Reply;

/// Scripts that tried to escape the sandbox or wedge the server in the past (or in the
/// literature), each of which must fail cleanly.
pub const SEEDS: &[&str] = &[
    "return loadstring(string.dump(function() return 1 end))",
    "local s = string.dump(function() return 1 end) local n = 0 return load(function() n = n + 1 if n == 1 then return s end end)",
    "local _, real = pairs(string) real.rep = function() return 'pwned' end",
    "local _, real = ipairs(_G) real.string = {}",
    "table.insert(_G, 'leak') table.insert(redis, 1, 'leak')",
    "rawset(string, 'rep', print)",
    "setmetatable(string, {__index = function() return 'pwned' end})",
    "getmetatable('').__index = {rep = function() return 'pwned' end}",
    "getmetatable('').rep = 1",
    "local mt = getmetatable(redis) mt.__index = {}",
    "coroutine.wrap(function() string.rep = nil end)()",
    "loadstring('string.rep = nil')()",
    "while true do pcall(function() while true do end end) end",
    "while true do xpcall(function() while true do end end, function(e) return e end) end",
    "xpcall(function() while true do end end, function() while true do end end)",
    "xpcall(function() error('x') end, function() while true do end end)",
    "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    "return string.find(string.rep('a', 3000), string.rep('a*', 25) .. 'b')",
    "return string.find(string.rep('a', 100), string.rep('a?', 20000))",
    "return string.rep('x', 2^40)",
    "return cjson.decode(string.rep('[', 100000))",
    "return cmsgpack.unpack(string.rep('\\145', 100000) .. '\\1')",
    "local t = {} t[1] = t t[2] = t return t",
    "local t = 1 for i = 1, 100000 do t = {t} end return t",
    "return unpack({}, 1, 1e8)",
    "return string.format('%099999d', 1)",
];

/// The bytes the fuzzer gives, read as a stream of choices.
struct Choices<'a> {
    data: &'a [u8],
    at: usize,
}

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.byte() as usize % items.len()]
    }
    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
}

const LIBS: &[&str] = &[
    "redis",
    "string",
    "table",
    "math",
    "cjson",
    "cmsgpack",
    "bit",
    "struct",
    "_G",
    "coroutine",
    "KEYS",
    "ARGV",
];
const FIELDS: &[&str] = &[
    "call",
    "rep",
    "find",
    "gsub",
    "insert",
    "floor",
    "encode",
    "decode",
    "pack",
    "unpack",
    "band",
    "__index",
    "__newindex",
    "__metatable",
    "x",
    "1",
];
const NUMBERS: &[&str] = &[
    "0", "1", "-1", "3", "10", "255", "1000", "2^31", "2^53", "-2^63", "1/0", "0/0", "1e308",
    "0.5", "#KEYS",
];
const STRINGS: &[&str] = &[
    "''",
    "'a'",
    "'aaaa'",
    "'%a+'",
    "'(a*)*b'",
    "'[a-'",
    "'%b()'",
    "'%f[%w]'",
    "'()'",
    "'%1'",
    "'\\0'",
    "'\\27Lua'",
    "'[1,[2,{\"a\":null}]]'",
    "'{\"a\":'",
    "'\\145\\145\\1'",
    "'i4'",
    "'>!4 i8 c0'",
    "'%s %d'",
    "'%099d'",
    "string.rep('a', 40)",
    "string.rep('[', 300)",
];

fn expr(c: &mut Choices<'_>, depth: u8) -> String {
    if depth > 3 {
        return c.pick(NUMBERS).to_string();
    }
    match c.byte() % 12 {
        0 | 1 => c.pick(NUMBERS).to_string(),
        2 | 3 => c.pick(STRINGS).to_string(),
        4 => c.pick(LIBS).to_string(),
        5 => format!("{{{}, {}}}", expr(c, depth + 1), expr(c, depth + 1)),
        6 => format!("function(...) {} end", stmt(c, depth + 1)),
        7 => format!("{}.{}", c.pick(LIBS), c.pick(FIELDS)),
        8 => format!("({} .. {})", expr(c, depth + 1), expr(c, depth + 1)),
        9 => call(c, depth + 1),
        10 => "getmetatable('')".to_string(),
        _ => "nil".to_string(),
    }
}

fn call(c: &mut Choices<'_>, depth: u8) -> String {
    let a = expr(c, depth + 1);
    let b = expr(c, depth + 1);
    match c.byte() % 16 {
        0 => format!("string.find({a}, {b})"),
        1 => format!("string.gsub({a}, {b}, {})", expr(c, depth + 1)),
        2 => format!("string.match({a}, {b})"),
        3 => format!("string.rep({a}, {b})"),
        4 => format!("string.format({a}, {b})"),
        5 => format!("cjson.decode({a})"),
        6 => format!("cjson.encode({a})"),
        7 => format!("cmsgpack.unpack({a})"),
        8 => format!("cmsgpack.pack({a}, {b})"),
        9 => format!("struct.pack({a}, {b})"),
        10 => format!("struct.unpack({a}, {b})"),
        11 => format!("redis.call('echo', {a})"),
        12 => format!("unpack({a}, 1, {b})"),
        13 => format!("loadstring({a})"),
        14 => format!("pcall({a}, {b})"),
        _ => format!("select('#', {a}, {b})"),
    }
}

fn stmt(c: &mut Choices<'_>, depth: u8) -> String {
    if depth > 4 {
        return String::new();
    }
    match c.byte() % 16 {
        0 => format!("{}.{} = {}", c.pick(LIBS), c.pick(FIELDS), expr(c, depth)),
        1 => format!(
            "rawset({}, {}, {})",
            c.pick(LIBS),
            expr(c, depth),
            expr(c, depth)
        ),
        2 => format!("setmetatable({}, {})", c.pick(LIBS), expr(c, depth)),
        3 => format!("table.insert({}, {})", c.pick(LIBS), expr(c, depth)),
        4 => format!(
            "local _, r = pairs({}) r.{} = {}",
            c.pick(LIBS),
            c.pick(FIELDS),
            expr(c, depth)
        ),
        5 => format!(
            "getmetatable({}).{} = {}",
            expr(c, depth),
            c.pick(FIELDS),
            expr(c, depth)
        ),
        6 => format!("local v = {}", call(c, depth)),
        7 => format!("pcall(function() {} end)", stmt(c, depth + 1)),
        8 => format!(
            "xpcall(function() {} end, function(e) {} return e end)",
            stmt(c, depth + 1),
            stmt(c, depth + 1)
        ),
        9 => format!("coroutine.wrap(function() {} end)()", stmt(c, depth + 1)),
        10 => format!("for i = 1, {} do {} end", c.byte() % 50, stmt(c, depth + 1)),
        11 => format!("leak{} = {}", c.byte() % 4, expr(c, depth)),
        12 => format!("return {}", expr(c, depth)),
        13 => format!("local f = loadstring({}) if f then f() end", expr(c, depth)),
        14 if c.byte().is_multiple_of(8) => format!("while true do {} end", stmt(c, depth + 1)),
        _ => format!("local x = {}", expr(c, depth)),
    }
}

/// A script from the fuzzer's bytes: a seed shape or up to eight grammar statements.
pub fn script_from_bytes(data: &[u8]) -> String {
    let mut c = Choices { data, at: 0 };
    let first = c.byte();
    if first >= 0xf0 {
        let mut s = SEEDS[c.byte() as usize % SEEDS.len()].to_string();
        s.push('\n');
        s.push_str(&stmt(&mut c, 0));
        return s;
    }
    let mut out = Vec::new();
    for _ in 0..8 {
        if c.done() {
            break;
        }
        out.push(stmt(&mut c, 0));
    }
    out.join("\n")
}

/// A host that answers `echo` with its argument and anything else with an error.
#[derive(Debug, Default)]
pub struct EchoHost;

impl Host for EchoHost {
    fn call(&mut self, args: &[&[u8]], _resp: u8) -> Reply {
        match args.get(1) {
            Some(a) if args[0].eq_ignore_ascii_case(b"echo") => {
                Reply::Bulk(Bytes::copy_from_slice(a))
            }
            _ => Reply::Error(Cow::Borrowed(
                "ERR Unknown Redis command called from script",
            )),
        }
    }
    fn command_allowed(&mut self, args: &[&[u8]]) -> Option<bool> {
        args.first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"echo"))
            .then_some(true)
    }
}

/// What the canary sees in an untouched environment.
pub const CANARY: &str = "return {string.rep('ab', 2), ('x'):rep(3), type(redis.call), \
    cjson.encode({1, 'a'}), math.floor(2.5), bit.band(6, 3), struct.pack('>I2', 258), \
    cmsgpack.pack(1), table.concat({1, 2}, ','), string.find('abc', 'b'), \
    tostring(rawget(_G, 1)), tostring(rawget(redis, 1)), tostring(getmetatable('').__index), \
    tostring(rawget(string, 'x')), type(pairs), type(coroutine.create), \
    tostring(pcall(function() return leak0 end)), redis.call('echo', 'ok')}";

/// The canary's reply in a fresh engine.
pub fn canary_expected() -> Reply {
    let scripts = Scripts::new("7.0.15");
    run_bounded(
        &scripts,
        CANARY.as_bytes(),
        &mut EchoHost,
        Duration::from_secs(5),
    )
}

/// Runs `body` (compiled on the calling thread's VM), killing it after `kill_after`; panics
/// if it is still running 10 s after the kill.
pub fn run_bounded(
    scripts: &Scripts,
    body: &[u8],
    host: &mut dyn Host,
    kill_after: Duration,
) -> Reply {
    let script = match scripts.load(body) {
        Ok(s) => s,
        Err(e) => return Reply::Error(Cow::Owned(e)),
    };
    let busy = scripts.busy.clone();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let guard = busy.begin();
        let watch = busy.clone();
        scope.spawn(move || {
            if done_rx.recv_timeout(kill_after).is_err() {
                watch.request_kill();
                if let Err(mpsc::RecvTimeoutError::Timeout) =
                    done_rx.recv_timeout(Duration::from_secs(10))
                {
                    eprintln!(
                        "script still running 10 s after SCRIPT KILL:\n{}",
                        String::from_utf8_lossy(body)
                    );
                    std::process::abort();
                }
            }
        });
        let reply = scripts.run(&script, &[], &[], host);
        drop(guard);
        let _ = done_tx.send(());
        reply
    })
}

/// The fuzz check: runs `body`, then the canary, which must see what it sees in a fresh
/// engine (`expected`, from [`canary_expected`]). Panics on a difference.
pub fn check_script(scripts: &Scripts, body: &[u8], expected: &Reply) {
    if scripts.len() > 1000 {
        scripts.flush();
    }
    let reply = run_bounded(scripts, body, &mut EchoHost, Duration::from_millis(50));
    let mut out = bytes::BytesMut::new();
    reply.encode(2, &mut out);
    reply.encode(3, &mut out);
    let canary = run_bounded(
        scripts,
        CANARY.as_bytes(),
        &mut EchoHost,
        Duration::from_secs(5),
    );
    assert_eq!(
        &canary,
        expected,
        "the environment changed after:\n{}",
        String::from_utf8_lossy(body)
    );
}
