//! Scripts are untrusted code (issue 14, "Lua is untrusted code"): no bytecode reaches the VM,
//! protected tables stay protected through every route and nothing one script does is seen
//! by another client's script, deep or huge input gets an error instead of a crash, and every
//! stuck script can be killed (SCRIPT KILL, SHUTDOWN NOSAVE, SIGTERM). Each test ends by
//! checking that the server still serves another client. The replies Redis also gives are
//! compared with a real redis-server in `tests/diff/scripting.txt`.

use std::time::{Duration, Instant};

use sluice::TestServer;

use crate::proc::SluiceProcess;
use crate::support::{Conn, Read1};

const BUSY: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

fn eval(con: &mut Conn, body: &str) -> Vec<u8> {
    con.cmd(&[b"EVAL", body.as_bytes(), b"0"])
}

fn text(reply: &[u8]) -> String {
    String::from_utf8_lossy(reply).into_owned()
}

/// A bulk-string reply.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// Another, new connection gets answers.
fn assert_alive(addr: std::net::SocketAddr) {
    let mut c = Conn::connect(addr);
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    assert_eq!(
        c.cmd(&[b"EVAL", b"return redis.call('ping')", b"0"]),
        b"+PONG\r\n"
    );
}

#[test]
fn bytecode_never_reaches_the_vm() {
    let server = TestServer::start().unwrap();
    let mut c = Conn::connect(server.addr());
    let dump = "string.dump(function() return 'ran' end)";
    let cases = [
        (
            format!("return select(2, loadstring({dump}))"),
            bulk("[string \"\x1bLuaQ\"]:1: unexpected symbol near 'char(27)'"),
        ),
        (
            format!("return select(2, loadstring({dump}, 'nm'))"),
            bulk("[string \"nm\"]:1: unexpected symbol near 'char(27)'"),
        ),
        (
            format!(
                "local s = {dump} local i = 0 return select(2, load(function() i = i + 1 if i == 1 then return s end end))"
            ),
            bulk("(load):1: unexpected symbol near 'char(27)'"),
        ),
        (
            format!(
                "local s = {dump} local i = 0 return select(2, load(function() i = i + 1 if i == 1 then return s:sub(1, 1) elseif i == 2 then return s:sub(2) end end, 'x'))"
            ),
            bulk("[string \"x\"]:1: unexpected symbol near 'char(27)'"),
        ),
        // Whatever the route, the dumped function never runs.
        (
            format!("local f = loadstring({dump}) return tostring(f)"),
            bulk("nil"),
        ),
        (
            format!("local f = loadstring(' ' .. {dump}) return tostring(f)"),
            bulk("nil"),
        ),
    ];
    for (body, want) in &cases {
        assert_eq!(text(&eval(&mut c, body)), *want, "{body}");
    }
    // A precompiled chunk as the script itself.
    let mut chunk = b"\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00".to_vec();
    chunk.extend_from_slice(&[0u8; 40]);
    assert_eq!(
        c.cmd(&[b"EVAL", &chunk, b"0"]),
        b"-ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'\r\n"
    );
    assert!(text(&c.cmd(&[b"SCRIPT", b"LOAD", &chunk])).starts_with("-ERR Error compiling script"));
    assert_alive(server.addr());
}

/// Every route that could change a protected table, tried from one script: none may succeed.
/// Each attempt runs under pcall; the script returns the attempts that did not fail.
const ESCAPES: &str = r#"
local evil = function() return 'pwned' end
local attempts = {
  function() string.rep = evil end,
  function() _G.string = {} end,
  function() _G._G = {} end,
  function() redis.call = evil end,
  function() cjson.encode = evil end,
  function() math.floor = evil end,
  function() local _, real = pairs(string) real.rep = evil end,
  function() local _, real = pairs(_G) real.string = {} end,
  function() local _, real = pairs(_G) real.leak = 1 end,
  function() local _, real = ipairs(table) real.concat = evil end,
  function() local _, real = ipairs(_G) real.math = {} end,
  function() rawset(string, 'rep', evil) end,
  function() rawset(_G, 'redis', {}) end,
  function() rawset(getmetatable(redis), 'x', 1) end,
  function() rawget(_G, 'string').rep = evil end,
  function() table.insert(_G, 'leak') end,
  function() table.insert(redis, 1, 'leak') end,
  function() table.insert(getmetatable(redis), 'leak') end,
  function() table.remove(string) end,
  function() setmetatable(string, {__index = evil}) end,
  function() setmetatable(_G, nil) end,
  function() getmetatable(string).__index = evil end,
  function() getmetatable(_G).__index = evil end,
  function() getmetatable('').__index = {rep = evil} end,
  function() getmetatable('').rep = evil end,
  function() rawset(getmetatable(''), '__index', {}) end,
  function() setmetatable(getmetatable(''), {}) end,
  function() coroutine.wrap(function() string.rep = evil end)() end,
  function() local co = coroutine.create(function() cjson.decode = evil end) local ok, e = coroutine.resume(co) if not ok then error(e) end end,
  function() loadstring('string.rep = ...')(evil) end,
  function() loadstring('leak = 1')() end,
  function() local n = 0 load(function() n = n + 1 if n == 1 then return 'math.floor = nil' end end)() end,
  function() leak = 1 end,
  function() setfenv(1, {}) end,
  function() getfenv(0).leak = 1 end,
  function() debug.setmetatable('', {}) end,
  function() newproxy(true) end,
}
local survived = {}
for i, f in ipairs(attempts) do
  if pcall(f) then survived[#survived + 1] = i end
end
return survived
"#;

/// What a second client's script must see afterwards.
const CANARY: &str = r#"
return {string.rep('ab', 2), ('x'):rep(3), type(redis.call), cjson.encode({1, 'a'}),
  math.floor(2.5), table.concat({1, 2}, ','), bit.band(6, 3), struct.pack('>I2', 258),
  cmsgpack.pack(1), cjson.decode('[7]')[1], tostring(rawget(_G, 1)), tostring(rawget(redis, 1)),
  tostring(getmetatable('').__index), tostring(pcall(function() return leak end)),
  tostring(next(getmetatable(redis)))}
"#;

const CANARY_REPLY: &[u8] = b"*15\r\n$4\r\nabab\r\n$3\r\nxxx\r\n$8\r\nfunction\r\n$7\r\n[1,\"a\"]\r\n:2\r\n$3\r\n1,2\r\n:2\r\n$2\r\n\x01\x02\r\n$1\r\n\x01\r\n:7\r\n$3\r\nnil\r\n$3\r\nnil\r\n$3\r\nnil\r\n$5\r\nfalse\r\n$3\r\nnil\r\n";

#[test]
fn protected_tables_stay_protected_for_every_client() {
    let server = TestServer::start().unwrap();
    let mut attacker = Conn::connect(server.addr());
    let mut victim = Conn::connect(server.addr());
    assert_eq!(text(&eval(&mut victim, CANARY)), text(CANARY_REPLY));
    // Several times: the runtime may run each EVAL on any worker thread (each has its VM).
    for _ in 0..8 {
        assert_eq!(eval(&mut attacker, ESCAPES), b"*0\r\n");
    }
    for _ in 0..8 {
        assert_eq!(text(&eval(&mut victim, CANARY)), text(CANARY_REPLY));
    }
    // The messages are Redis's.
    assert!(
        text(&eval(&mut attacker, "local _, r = pairs(string) r.rep = 1"))
            .starts_with("-ERR user_script:1: Attempt to modify a readonly table script: ")
    );
    assert!(
        text(&eval(&mut attacker, "table.insert(redis, 1)"))
            .starts_with("-ERR Attempt to modify a readonly table script: ")
    );
    assert_alive(server.addr());
}

#[test]
fn deep_and_huge_input_gets_an_error() {
    let server = TestServer::start().unwrap();
    let mut c = Conn::connect(server.addr());
    let checks: Vec<(&str, String)> = vec![
        // cjson: Redis's limits (1000), reported by the getters.
        (
            "return {cjson.encode_max_depth(), cjson.decode_max_depth()}",
            "*2\r\n:1000\r\n:1000\r\n".to_string(),
        ),
        (
            "return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))",
            ":2000\r\n".to_string(),
        ),
        (
            "return select(2, pcall(cjson.decode, string.rep('[', 1001) .. string.rep(']', 1001)))",
            bulk("Found too many nested data structures (1001) at character 1001"),
        ),
        (
            "return select(2, pcall(cjson.decode, string.rep('[', 200000)))",
            bulk("Found too many nested data structures (1001) at character 1001"),
        ),
        (
            "local t = 1 for i = 1, 1000 do t = {t} end return #cjson.encode(t)",
            ":2001\r\n".to_string(),
        ),
        (
            "local t = 1 for i = 1, 100000 do t = {t} end return select(2, pcall(cjson.encode, t))",
            bulk("Cannot serialise, excessive nesting (1001)"),
        ),
        // cmsgpack: deep input stops with Redis's error (sluice at 256 levels, Redis 3999).
        (
            "return select(2, pcall(cmsgpack.unpack, string.rep('\\145', 100000) .. '\\1'))",
            bulk("stack overflow (in function mp_decode_to_lua_array)"),
        ),
        (
            "return select(2, pcall(cmsgpack.unpack, string.rep('\\129\\1', 100000) .. '\\1'))",
            bulk("stack overflow (in function mp_decode_to_lua_hash)"),
        ),
        (
            "return select('#', cmsgpack.unpack(string.rep('\\1', 7900)))",
            ":7900\r\n".to_string(),
        ),
        (
            "return select(2, pcall(cmsgpack.unpack, string.rep('\\1', 7901)))",
            bulk(
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            ),
        ),
        (
            "return select(2, pcall(cmsgpack.unpack, string.rep('\\1', 100000)))",
            bulk(
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            ),
        ),
        (
            "local t = 1 for i = 1, 100000 do t = {t} end return #cmsgpack.pack(t)",
            ":17\r\n".to_string(),
        ),
        // Stock Lua limits.
        (
            "return select(2, pcall(unpack, {}, 1, 1e8))",
            bulk("too many results to unpack"),
        ),
        (
            "return select(2, pcall(string.format, '%099999d', 1))",
            bulk("invalid format (width or precision too long)"),
        ),
        // Sizes: refused before anything is built.
        (
            "return select(2, pcall(string.rep, 'x', 2^40))",
            bulk("not enough memory"),
        ),
        (
            "return select(2, pcall(string.rep, 'abc', 2^31))",
            bulk("not enough memory"),
        ),
        ("return #string.rep('', 2^40)", ":0\r\n".to_string()),
        // Nested C calls: an error handler that fails inside string.format (which keeps an
        // 8 KiB buffer on the C stack) re-enters itself until Lua gives up.
        (
            "return {xpcall(function() error('x') end, function(e) local v = string.format(cmsgpack) return e end)}",
            "*2\r\n$-1\r\n$23\r\nerror in error handling\r\n".to_string(),
        ),
        (
            "local function f(s) return (string.gsub(s, '.', f)) end return select(2, pcall(f, 'aaaa'))",
            bulk("C stack overflow"),
        ),
        // Patterns: recursion is bounded.
        (
            "return select(2, pcall(string.find, string.rep('a', 300), string.rep('a?', 300)))",
            bulk("pattern too complex"),
        ),
    ];
    for (body, want) in &checks {
        assert_eq!(text(&eval(&mut c, body)), *want, "{body}");
    }
    // A returned table nested deeper than the limit: the innermost value is the error.
    let reply = eval(
        &mut c,
        "local t = 1 for i = 1, 100000 do t = {t} end return t",
    );
    assert!(reply.starts_with(b"*1\r\n*1\r\n"));
    assert!(reply.ends_with(b"*1\r\n-ERR reached lua stack limit\r\n"));
    assert_eq!(reply.len(), 200 * 4 + 30);
    // The Lua state's memory is capped: a script that keeps growing is stopped (it takes a
    // few seconds in a debug build), and the next script runs normally.
    c.send(&[b"EVAL", b"local s = 'x' while true do s = s .. s end", b"0"]);
    match c.read_one(Duration::from_secs(120)) {
        Read1::Reply(r) => {
            let r = text(&r);
            assert!(
                r.starts_with("-ERR Error running script ")
                    && r.ends_with(", not enough memory\r\n"),
                "{r}"
            );
        }
        other => panic!("no reply from the growing script: {other:?}"),
    }
    assert_eq!(eval(&mut c, "return #string.rep('x', 1000)"), b":1000\r\n");
    assert_alive(server.addr());
}

fn busy_server() -> TestServer {
    let server = TestServer::start().unwrap();
    let mut c = Conn::connect(server.addr());
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"20"]),
        b"+OK\r\n"
    );
    server
}

/// Waits (bounded) until a new connection's PING is answered -BUSY; returns how long the
/// last PING took to be answered.
fn wait_until_busy(addr: std::net::SocketAddr) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut probe = Conn::connect(addr);
        let asked = Instant::now();
        let reply = probe.cmd(&[b"PING"]);
        let took = asked.elapsed();
        if reply == BUSY {
            return took;
        }
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Scripts stuck in every construct that could hide from the kill.
const STUCK: &[&str] = &[
    "while true do end",
    "local co = coroutine.create(function() while true do end end) coroutine.resume(co)",
    "coroutine.wrap(function() while true do end end)()",
    "coroutine.wrap(function() coroutine.wrap(function() while true do end end)() end)()",
    "while true do pcall(function() while true do end end) end",
    "while true do xpcall(function() while true do end end, function(e) return e end) end",
    "xpcall(function() while true do end end, function(e) while true do end end)",
    "xpcall(function() error('x') end, function(e) while true do end end)",
    "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
    "while true do local ok = pcall(coroutine.wrap(function() while true do end end)) end",
    "local t = setmetatable({}, {__index = function() while true do end end}) return t.x",
    "table.sort({3, 2, 1, 5, 4}, function(a, b) while true do end end)",
    "string.gsub('aaa', 'a', function() while true do end end)",
    "load(function() while true do end end)",
    "while true do local s = string.rep('x', 100000) end",
    "return string.find(string.rep('a', 5000), string.rep('a*', 30) .. 'b')",
    "return string.match(string.rep('a', 5000), string.rep('a-', 30) .. 'b')",
    "return string.gsub(string.rep('a', 5000), string.rep('a*', 30) .. 'b', 'x')",
    "for w in string.gmatch(string.rep('a', 5000), string.rep('a*', 30) .. 'b') do end",
];

#[test]
fn every_stuck_script_can_be_killed() {
    let server = busy_server();
    let mut admin = Conn::connect(server.addr());
    for body in STUCK {
        eprintln!("stuck script: {body}");
        let mut runner = Conn::connect(server.addr());
        runner.send(&[b"EVAL", body.as_bytes(), b"0"]);
        // Other clients, including new connections, get -BUSY promptly.
        let took = wait_until_busy(server.addr());
        assert!(took < Duration::from_secs(2), "{body}: BUSY took {took:?}");
        eprintln!("busy seen; killing");
        assert_eq!(admin.cmd(&[b"SCRIPT", b"KILL"]), b"+OK\r\n", "{body}");
        eprintln!("killed");
        match runner.read_one(Duration::from_secs(10)) {
            Read1::Reply(r) => assert!(
                text(&r).starts_with("-ERR Script killed by user with SCRIPT KILL... script: "),
                "{body}: {}",
                text(&r)
            ),
            other => panic!("{body}: the killed script did not end: {other:?}"),
        }
        assert_alive(server.addr());
    }
}

#[test]
fn shutdown_nosave_stops_a_script_that_swallows_its_kill() {
    let server = busy_server();
    let mut runner = Conn::connect(server.addr());
    runner.send(&[
        b"EVAL",
        b"redis.call('set', 'w', 1) while true do pcall(function() xpcall(function() while true do end end, function() while true do end end) end) end",
        b"0",
    ]);
    wait_until_busy(server.addr());
    let mut other = Conn::connect(server.addr());
    // The script wrote: SCRIPT KILL refuses, SHUTDOWN NOSAVE stops it anyway.
    assert!(text(&other.cmd(&[b"SCRIPT", b"KILL"])).starts_with("-UNKILLABLE"));
    other.send(&[b"SHUTDOWN", b"NOSAVE"]);
    match other.read_one(Duration::from_secs(10)) {
        Read1::Eof(_) => {}
        r => panic!("server still up: {r:?}"),
    }
}

#[test]
fn sigterm_stops_a_stuck_script() {
    let mut server = SluiceProcess::start(&[]);
    let addr = server.addr();
    let mut admin = Conn::connect(addr);
    assert_eq!(
        admin.cmd(&[b"CONFIG", b"SET", b"busy-reply-threshold", b"20"]),
        b"+OK\r\n"
    );
    let mut runner = Conn::connect(addr);
    runner.send(&[
        b"EVAL",
        b"redis.call('set', 'w', 1) while true do coroutine.resume(coroutine.create(function() xpcall(function() while true do end end, function() while true do end end) end)) end",
        b"0",
    ]);
    wait_until_busy(addr);
    let signalled = Instant::now();
    server.signal(libc::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("sluice did not exit after SIGTERM while a script was stuck");
    assert!(status.success(), "exit status {status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(10));
}

/// The script fuzz target's check, as a bounded property test: random scripts from the
/// grammar (and the seed shapes) never panic, never survive their kill, and never change
/// what the next script sees. `SLUICE_LUA_FUZZ_CASES` (default 300), `SLUICE_LUA_FUZZ_SECS`
/// (default 60) and `SLUICE_LUA_FUZZ_SEED` make longer runs.
#[test]
fn random_scripts_leave_the_sandbox_intact() {
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let cases = env("SLUICE_LUA_FUZZ_CASES", 300);
    let limit = Duration::from_secs(env("SLUICE_LUA_FUZZ_SECS", 60));
    let state = 0x9e37_79b9_7f4a_7c15u64 ^ env("SLUICE_LUA_FUZZ_SEED", 0);
    // Scripts run on threads with the workers' stack size.
    let run = std::thread::Builder::new()
        .stack_size(sluice::script::WORKER_STACK)
        .spawn(move || fuzz_loop(cases, limit, state))
        .unwrap();
    run.join().unwrap();
}

fn fuzz_loop(cases: u64, limit: Duration, mut state: u64) {
    use sluice::script::{Scripts, fuzzing};
    let expected = fuzzing::canary_expected();
    let scripts = Scripts::new("7.0.15");
    for seed in fuzzing::SEEDS {
        fuzzing::check_script(&scripts, seed.as_bytes(), &expected);
    }
    let started = Instant::now();
    let mut ran = 0u64;
    while ran < cases && started.elapsed() < limit {
        let mut bytes = Vec::with_capacity(64);
        for _ in 0..64 {
            // xorshift: deterministic, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bytes.push((state >> 24) as u8);
        }
        let body = fuzzing::script_from_bytes(&bytes);
        if let Ok(path) = std::env::var("SLUICE_LUA_FUZZ_LOG") {
            // The script about to run, for a crash that takes the process down.
            let _ = std::fs::write(path, &body);
        }
        fuzzing::check_script(&scripts, body.as_bytes(), &expected);
        ran += 1;
    }
    eprintln!(
        "random scripts: {ran} scripts (+{} seeds) in {:?}, no finding",
        fuzzing::SEEDS.len(),
        started.elapsed()
    );
}
