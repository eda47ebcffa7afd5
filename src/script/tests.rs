//! Unit tests of the engine with a fake host: sandbox, conversions, errors.

use super::*;
use std::collections::HashMap;
use std::time::Duration;

/// A host that answers a few commands from a map, like a tiny Redis.
#[derive(Default)]
struct FakeHost {
    data: HashMap<Vec<u8>, Bytes>,
    calls: Vec<Vec<Bytes>>,
}

impl Host for FakeHost {
    fn call(&mut self, args: &[&[u8]], resp: u8) -> Reply {
        self.calls.push(crate::protocol::request::owned_args(args));
        let name = args[0].to_ascii_lowercase();
        match (&name[..], args.len()) {
            (b"get", 2) => self
                .data
                .get(args[1])
                .cloned()
                .map_or(Reply::Null, Reply::Bulk),
            (b"set", 3) => {
                self.data
                    .insert(args[1].to_vec(), Bytes::copy_from_slice(args[2]));
                Reply::ok()
            }
            (b"incr", 2) => {
                let v = self
                    .data
                    .get(args[1])
                    .map(|b| String::from_utf8_lossy(b).parse::<i64>().unwrap_or(0))
                    .unwrap_or(0)
                    + 1;
                self.data
                    .insert(args[1].to_vec(), Bytes::from(v.to_string()));
                Reply::Int(v)
            }
            (b"hgetall", 2) => Reply::Map(vec![(Reply::bulk(b"f"), Reply::bulk(b"v"))]),
            (b"zscore", 3) => Reply::Double(1.5),
            (b"resp", _) => Reply::Int(resp as i64),
            (b"get" | b"set" | b"incr", _) => Reply::Error(Cow::Borrowed(
                "ERR Wrong number of args calling Redis command from script",
            )),
            _ => Reply::Error(Cow::Borrowed(
                "ERR Unknown Redis command called from script",
            )),
        }
    }
    fn command_allowed(&mut self, args: &[&[u8]]) -> Option<bool> {
        args[0].eq_ignore_ascii_case(b"get").then_some(true)
    }
}

fn eval_with(
    scripts: &Scripts,
    host: &mut dyn Host,
    body: &str,
    keys: &[&str],
    argv: &[&str],
) -> Reply {
    let script = match scripts.load(body.as_bytes()) {
        Ok(s) => s,
        Err(e) => return Reply::Error(Cow::Owned(e)),
    };
    let keys: Vec<Bytes> = keys.iter().map(|k| Bytes::from(k.to_string())).collect();
    let argv: Vec<Bytes> = argv.iter().map(|k| Bytes::from(k.to_string())).collect();
    let _busy = scripts.busy.begin();
    scripts.run(
        &script,
        &crate::protocol::request::borrowed_args(&keys),
        &crate::protocol::request::borrowed_args(&argv),
        host,
    )
}

fn eval(body: &str) -> Reply {
    let scripts = Scripts::new("7.0.15");
    eval_with(&scripts, &mut FakeHost::default(), body, &[], &[])
}

fn err(body: &str) -> String {
    match eval(body) {
        Reply::Error(e) => e.into_owned(),
        other => panic!("expected an error from {body:?}, got {other:?}"),
    }
}

fn sha(body: &str) -> String {
    sha1_hex(body.as_bytes())
}

#[test]
fn plain_values() {
    assert_eq!(eval("return 1"), Reply::Int(1));
    assert_eq!(eval("return 3.99"), Reply::Int(3));
    assert_eq!(eval("return 'x'"), Reply::bulk(b"x"));
    assert_eq!(
        eval("return {1, 'a', true, false, 2}"),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::bulk(b"a"),
            Reply::Int(1),
            Reply::Null,
            Reply::Int(2),
        ])
    );
    assert_eq!(eval("return unpack({7, 8})"), Reply::Int(7));
    assert_eq!(eval("return _VERSION"), Reply::bulk(b"Lua 5.1"));
    assert_eq!(eval("return redis.REDIS_VERSION_NUM"), Reply::Int(458767));
    assert_eq!(
        eval("return redis.sha1hex('')"),
        Reply::bulk(b"da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
}

#[test]
fn keys_and_argv() {
    let scripts = Scripts::new("7.0.15");
    let r = eval_with(
        &scripts,
        &mut FakeHost::default(),
        "return {KEYS[1], ARGV[1], ARGV[2], #KEYS, #ARGV}",
        &["k"],
        &["a", "b"],
    );
    assert_eq!(
        r,
        Reply::Array(vec![
            Reply::bulk(b"k"),
            Reply::bulk(b"a"),
            Reply::bulk(b"b"),
            Reply::Int(1),
            Reply::Int(2),
        ])
    );
}

#[test]
fn calls_reach_the_host() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    let r = eval_with(
        &scripts,
        &mut host,
        "redis.call('set', KEYS[1], 1.0) return {redis.call('incr', KEYS[1]), redis.call('get', 'nokey')}",
        &["k"],
        &[],
    );
    assert_eq!(r, Reply::Array(vec![Reply::Int(2), Reply::Null]));
    assert_eq!(host.calls[0][2], "1");
}

#[test]
fn call_errors_carry_the_script_position() {
    let body = "return redis.call('nosuch')";
    assert_eq!(
        err(body),
        format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:1.",
            sha(body)
        )
    );
    assert_eq!(
        eval("return redis.pcall('nosuch')"),
        Reply::Error("ERR Unknown Redis command called from script".into())
    );
    let body = "\n\nreturn redis.call()";
    assert_eq!(
        err(body),
        format!(
            "ERR Please specify at least one argument for this redis lib call script: {}, on @user_script:3.",
            sha(body)
        )
    );
    let body = "return redis.call('get', {})";
    assert!(
        err(body)
            .starts_with("ERR Lua redis lib command arguments must be strings or integers script:")
    );
}

#[test]
fn raised_errors() {
    let body = "error('boom')";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: boom script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "error({err='MY boom'})";
    assert_eq!(
        err(body),
        format!("MY boom script: {}, on @user_script:1.", sha(body))
    );
    let body = "error(nil)";
    assert_eq!(
        err(body),
        format!("ERR nil script: {}, on @user_script:1.", sha(body))
    );
    assert_eq!(eval("return {err='boom'}"), Reply::Error("boom".into()));
    assert_eq!(
        eval("return redis.error_reply('x')"),
        Reply::Error("ERR x".into())
    );
    assert_eq!(
        eval("return redis.error_reply('MY x')"),
        Reply::Error("MY x".into())
    );
    assert_eq!(
        eval("return redis.status_reply('st')"),
        Reply::Status("st".into())
    );
    assert_eq!(
        eval("local ok, e = pcall(redis.call, 'nosuch'); return e"),
        Reply::bulk(b"ERR Unknown Redis command called from script")
    );
    assert_eq!(
        err("syntax error here"),
        "ERR Error compiling script (new function): user_script:1: '=' expected near 'error'"
    );
}

#[test]
fn sandbox() {
    for name in [
        "os", "io", "loadfile", "dofile", "print", "require", "setfenv", "getfenv", "debug",
    ] {
        let body = format!("return tostring({name})");
        assert_eq!(
            err(&body),
            format!(
                "ERR user_script:1: Script attempted to access nonexistent global variable '{name}' script: {}, on @user_script:1.",
                sha(&body)
            )
        );
    }
    let body = "x = 1";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.",
            sha(body)
        )
    );
    for body in [
        "redis.call = nil",
        "string.x = 1",
        "_G.x = 1",
        "function f() end",
        "cjson.x = 1",
    ] {
        assert!(
            err(body).starts_with("ERR user_script:1: Attempt to modify a readonly table script:"),
            "{body}"
        );
    }
    for body in [
        "rawset(_G, 'x', 1)",
        "rawset(redis, 'x', 1)",
        "setmetatable(_G, nil)",
    ] {
        assert!(
            err(body).starts_with("ERR Attempt to modify a readonly table script:"),
            "{body}"
        );
    }
    assert_eq!(
        eval("local n = 0 for k in pairs(redis) do n = n + 1 end return n"),
        Reply::Int(23)
    );
    assert_eq!(eval("local t = {} t.x = 1 return t.x"), Reply::Int(1));
    assert_eq!(eval("return loadstring('return 1')()"), Reply::Int(1));
    assert!(
        err("return loadstring('x = 1')()")
            .starts_with("ERR [string \"x = 1\"]:1: Attempt to modify a readonly table")
    );
}

#[test]
fn state_does_not_leak_between_scripts() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    let r = eval_with(
        &scripts,
        &mut host,
        "return pcall(function() redis.call = nil end)",
        &[],
        &[],
    );
    assert_eq!(r, Reply::Null);
    let r = eval_with(&scripts, &mut host, "return type(redis.call)", &[], &[]);
    assert_eq!(r, Reply::bulk(b"function"));
}

#[test]
fn resp3_conversions() {
    assert_eq!(
        eval("redis.setresp(3) return {true, false}"),
        Reply::Array(vec![Reply::Bool(true), Reply::Bool(false)])
    );
    assert_eq!(
        eval("redis.setresp(3) return redis.call('resp')"),
        Reply::Int(3)
    );
    assert_eq!(eval("return redis.call('resp')"), Reply::Int(2));
    assert_eq!(
        eval("redis.setresp(3) local t = redis.call('hgetall', 'h') return t.map.f"),
        Reply::bulk(b"v")
    );
    assert_eq!(
        eval("redis.setresp(3) return redis.call('zscore', 'z', 'm').double * 2"),
        Reply::Int(3)
    );
    assert_eq!(
        eval("return redis.call('zscore', 'z', 'm')"),
        Reply::bulk(b"1.5")
    );
    assert_eq!(eval("return {double=1.5}"), Reply::Double(1.5));
    assert!(err("redis.setresp(4)").starts_with("ERR RESP version must be 2 or 3. script:"));
}

#[test]
fn libraries() {
    assert_eq!(
        eval("return cjson.encode({1, 2, {a=1}})"),
        Reply::bulk(b"[1,2,{\"a\":1}]")
    );
    assert_eq!(eval("return cjson.decode('[1,2,3]')[3]"), Reply::Int(3));
    assert_eq!(
        eval("return cjson.decode('{\"a\":null}').a == cjson.null"),
        Reply::Int(1)
    );
    let body = "return cjson.decode('bad')";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: Expected value but found invalid token at character 1 script: {}, on @user_script:1.",
            sha(body)
        )
    );
    assert_eq!(
        eval("local ok, e = pcall(cjson.encode, function() end); return e"),
        Reply::bulk(b"Cannot serialise function: type not supported")
    );
    assert_eq!(eval("return bit.band(7, 3)"), Reply::Int(3));
    assert_eq!(eval("return bit.tohex(255)"), Reply::bulk(b"000000ff"));
    assert_eq!(eval("return bit.tobit(2^32 + 5)"), Reply::Int(5));
    assert_eq!(
        eval("return struct.pack('>I2', 258)"),
        Reply::bulk(b"\x01\x02")
    );
    assert_eq!(
        eval("return {struct.unpack('<i4', struct.pack('<i4', -2))}"),
        Reply::Array(vec![Reply::Int(-2), Reply::Int(5)])
    );
    assert_eq!(
        eval("return cmsgpack.pack({1, 2, 3})"),
        Reply::bulk(b"\x93\x01\x02\x03")
    );
    assert_eq!(
        eval("return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {1, 2}))}"),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::bulk(b"a"),
            Reply::Array(vec![Reply::Int(1), Reply::Int(2)])
        ])
    );
    let body = "return cmsgpack.unpack('\\193')";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: Bad data format in input. script: {}, on @user_script:1.",
            sha(body)
        )
    );
}

#[test]
fn shebang() {
    assert_eq!(eval("#!lua\nreturn 1"), Reply::Int(1));
    assert_eq!(
        err("#!lua flags=bad\nreturn 1"),
        "ERR Unexpected flag in script shebang: bad"
    );
    assert_eq!(
        err("#!lua name=x\nreturn 1"),
        "ERR Unknown lua shebang option: name=x"
    );
    assert_eq!(
        err("#!luax\nreturn 1"),
        "ERR Unexpected engine in script shebang: #!luax"
    );
    let scripts = Scripts::new("7.0.15");
    let s = scripts
        .load(b"#!lua flags=no-writes,allow-oom\nreturn 1")
        .unwrap();
    assert!(s.flags.no_writes);
    let body = "#!lua\nreturn redis.call()";
    assert!(err(body).ends_with("on @user_script:2."));
}

#[test]
fn cache_and_flush() {
    let scripts = Scripts::new("7.0.15");
    let s = scripts.load(b"return 1").unwrap();
    assert_eq!(s.sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    assert!(scripts.exists(b"E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"));
    assert!(!scripts.exists(b"abc"));
    scripts.flush();
    assert!(!scripts.exists(s.sha.as_bytes()));
    assert!(scripts.load(b"bad (").is_err());
    assert!(scripts.is_empty());
}

#[test]
fn kill_stops_a_loop() {
    let scripts = Arc::new(Scripts::new("7.0.15"));
    let s = scripts
        .load(b"local i = 0 while true do i = i + 1 end")
        .unwrap();
    let busy = scripts.busy.clone();
    let killer = std::thread::spawn(move || {
        while !busy.is_running() {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(busy.request_kill(), KillOutcome::Killed);
    });
    let reply = {
        let _busy = scripts.busy.begin();
        scripts.run(&s, &[], &[], &mut FakeHost::default())
    };
    killer.join().unwrap();
    assert_eq!(
        reply,
        Reply::Error(
            format!(
                "ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:1.",
                s.sha
            )
            .into()
        )
    );
    assert_eq!(scripts.busy.request_kill(), KillOutcome::NotBusy);
}

#[test]
fn deep_nesting_does_not_overflow_a_worker_stack() {
    // Scripts run on threads of `WORKER_STACK`; run there-sized, at cjson's depth limit.
    let t = std::thread::Builder::new()
        .stack_size(crate::script::WORKER_STACK)
        .spawn(|| {
            let deep_json = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
            let r = eval(&format!(
                "local t = cjson.decode('{deep_json}') return #cjson.encode(t)"
            ));
            assert_eq!(r, Reply::Int(2000));
            let over = format!("{}{}", "[".repeat(1001), "]".repeat(1001));
            let r = eval(&format!("return cjson.decode('{over}')"));
            assert!(
                matches!(&r, Reply::Error(e) if e.contains("Found too many nested data structures (1001) at character 1001")),
                "{r:?}"
            );
            let too_deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
            let r = eval(&format!("return cjson.decode('{too_deep}')"));
            assert!(r.is_error(), "{r:?}");
            let r = eval("local t = {} t[1] = t return t");
            assert!(matches!(r, Reply::Array(_)), "{r:?}");
            let r = eval("local t = {} for i = 1, 100000 do t = {t} end return cjson.encode(t)");
            assert!(r.is_error(), "{r:?}");
        })
        .unwrap();
    t.join().unwrap();
}

/// Runs `body` and kills it once it has run 30 ms; the reply must be the kill error.
fn killed_reply(body: &str) -> Reply {
    let scripts = Arc::new(Scripts::new("7.0.15"));
    let s = scripts.load(body.as_bytes()).unwrap();
    let busy = scripts.busy.clone();
    let killer = std::thread::spawn(move || {
        while !busy.is_running() {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(30));
        busy.request_kill()
    });
    let reply = {
        let _busy = scripts.busy.begin();
        scripts.run(&s, &[], &[], &mut FakeHost::default())
    };
    assert_eq!(killer.join().unwrap(), KillOutcome::Killed, "{body}");
    reply
}

#[test]
fn kill_reaches_coroutines_handlers_and_string_functions() {
    for body in [
        "local co = coroutine.create(function() while true do end end) coroutine.resume(co)",
        "coroutine.wrap(function() while true do end end)()",
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
        "xpcall(function() while true do end end, function(e) while true do end end)",
        "xpcall(function() error('x') end, function(e) while true do end end)",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        "load(function() while true do end end)",
        "return string.find(string.rep('a', 5000), string.rep('a*', 30) .. 'b')",
        "return string.gsub(string.rep('a', 5000), string.rep('a-', 30) .. 'b', '')",
    ] {
        let reply = killed_reply(body);
        let Reply::Error(e) = &reply else {
            panic!("{body}: {reply:?}")
        };
        assert!(
            e.starts_with("ERR Script killed by user with SCRIPT KILL... script: "),
            "{body}: {e}"
        );
    }
}

#[test]
fn bytecode_is_a_syntax_error() {
    assert_eq!(
        eval("return select(2, loadstring(string.dump(function() return 1 end), 'n'))"),
        Reply::bulk(b"[string \"n\"]:1: unexpected symbol near 'char(27)'")
    );
    assert_eq!(
        eval(
            "local s = string.dump(function() return 1 end) local n = 0 return select(2, load(function() n = n + 1 if n == 1 then return s end end))"
        ),
        Reply::bulk(b"(load):1: unexpected symbol near 'char(27)'")
    );
    assert_eq!(
        err("\x1bLuaQ\0"),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'"
    );
    assert_eq!(
        eval("return load(function() return nil end) ~= nil"),
        Reply::Int(1)
    );
    let body = "local f = load(nil)";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: bad argument #1 to 'load' (function expected, got nil) script: {}, on @user_script:1.",
            sha(body)
        )
    );
    let body = "local f = loadstring()";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: bad argument #1 to 'loadstring' (string expected, got no value) script: {}, on @user_script:1.",
            sha(body)
        )
    );
}

#[test]
fn sandbox_routes_stay_closed() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    for body in [
        "local _, r = pairs(string) r.rep = nil",
        "local _, r = ipairs(_G) r.string = nil",
        "table.insert(_G, 1)",
        "table.insert(redis, 1, 1)",
        "table.remove(string)",
        "getmetatable('').__index = {}",
        "rawset(getmetatable(''), 'x', 1)",
        "coroutine.wrap(function() string.rep = nil end)()",
    ] {
        let r = eval_with(&scripts, &mut host, body, &[], &[]);
        let Reply::Error(e) = &r else {
            panic!("{body}: {r:?}")
        };
        assert!(
            e.contains("Attempt to modify a readonly table"),
            "{body}: {e}"
        );
    }
    let r = eval_with(
        &scripts,
        &mut host,
        "return {string.rep('a', 2), ('b'):rep(2), tostring(rawget(_G, 1)), tostring(redis[1]), #KEYS}",
        &[],
        &[],
    );
    assert_eq!(
        r,
        Reply::Array(vec![
            Reply::bulk(b"aa"),
            Reply::bulk(b"bb"),
            Reply::bulk(b"nil"),
            Reply::bulk(b"nil"),
            Reply::Int(0),
        ])
    );
    // Iterating a proxy still walks the library.
    assert_eq!(
        eval("local n = 0 for _ in pairs(string) do n = n + 1 end return n > 10"),
        Reply::Int(1)
    );
    assert_eq!(
        eval("local _, s = pairs(string) return rawequal(s, string)"),
        Reply::Int(1)
    );
    let body = "local f = pairs(nil)";
    assert_eq!(
        err(body),
        format!(
            "ERR user_script:1: bad argument #1 to 'pairs' (table expected, got nil) script: {}, on @user_script:1.",
            sha(body)
        )
    );
}

#[test]
fn collector_settings_do_not_outlive_a_script() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    eval_with(
        &scripts,
        &mut host,
        "collectgarbage('stop') collectgarbage('setpause', 100000)",
        &[],
        &[],
    );
    // A script that makes a lot of garbage still runs: the collector is back on.
    let r = eval_with(
        &scripts,
        &mut host,
        "for i = 1, 3000 do local s = string.rep('x', 1000000) .. i end return 1",
        &[],
        &[],
    );
    assert_eq!(r, Reply::Int(1));
    assert_eq!(
        eval_with(
            &scripts,
            &mut host,
            "local ok = pcall(string.gfind, 'a', 'a') return tostring(string.gfind == string.gmatch or not ok)",
            &[],
            &[]
        ),
        Reply::bulk(b"true")
    );
}

#[test]
fn keys_and_argv_are_each_runs_own() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    let check = "return {#KEYS, #ARGV, KEYS[1], tostring(KEYS[2]), tostring(KEYS.f), \
                 tostring(getmetatable(KEYS)), tostring(ARGV[1]), tostring(ARGV[500])}";
    let clean = || {
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Int(0),
            Reply::bulk(b"c"),
            Reply::bulk(b"nil"),
            Reply::bulk(b"nil"),
            Reply::bulk(b"nil"),
            Reply::bulk(b"nil"),
            Reply::bulk(b"nil"),
        ])
    };
    // Entries, fields and a metatable written by one run, which then fails.
    let dirty = "KEYS[2] = 'x' KEYS.f = 1 setmetatable(KEYS, {__index = function() return 'z' end}) \
                 ARGV[1] = 'y' error('boom')";
    assert!(matches!(
        eval_with(&scripts, &mut host, dirty, &["a", "b"], &["x"]),
        Reply::Error(_)
    ));
    assert_eq!(eval_with(&scripts, &mut host, check, &["c"], &[]), clean());
    // A table filled past what is kept is replaced; the next run still sees only its own.
    let big = "for i = 1, 1000 do ARGV[i] = i KEYS['k' .. i] = i end return #ARGV";
    assert_eq!(
        eval_with(&scripts, &mut host, big, &["a"], &["x"]),
        Reply::Int(1000)
    );
    assert_eq!(eval_with(&scripts, &mut host, check, &["c"], &[]), clean());
    // A function (FCALL) sees no KEYS or ARGV, whatever EVAL ran before.
    let lib = b"#!lua name=lk\nredis.register_function('lk', function() return KEYS end)";
    assert_eq!(
        scripts.function_load(lib, false).ok().as_deref(),
        Some("lk")
    );
    let (lib, index) = scripts.function_get(b"lk").expect("registered");
    let _busy = scripts.busy.begin();
    match scripts.run_function(&lib, index, &[], &[], &mut host) {
        Reply::Error(e) => assert!(
            e.contains("Script attempted to access nonexistent global variable 'KEYS'"),
            "{e}"
        ),
        other => panic!("a function saw KEYS: {other:?}"),
    }
    drop(_busy);
    // And after it, KEYS and ARGV are not globals at all until the next EVAL.
    let left = scripts
        .with_vm(|vm| {
            let g = vm.lua.globals();
            (g.raw_get::<Value>("KEYS"), g.raw_get::<Value>("ARGV"))
        })
        .expect("vm");
    assert!(matches!(left, (Ok(Value::Nil), Ok(Value::Nil))));
}

#[test]
fn fields_a_run_left_in_kept_lists_are_never_seen_by_the_next() {
    // The next run may be another client's. (A version that kept the tables and checked them
    // with a walk from key n missed fields placed before an integer key in the hash part.)
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    let names = ["a", "b", "c", "d", "e", "f", "g"];
    for fields in 1..12 {
        for before in 0..4 {
            for after in 0..7 {
                let dirty = format!(
                    "for i = 1, {fields} do KEYS['f' .. i] = i ARGV['f' .. i] = i end return 1"
                );
                eval_with(
                    &scripts,
                    &mut host,
                    &dirty,
                    &names[..before],
                    &names[..before],
                );
                let check = format!(
                    "for i = 1, {fields} do if KEYS['f' .. i] ~= nil or ARGV['f' .. i] ~= nil \
                     then return 'seen' end end return #KEYS + #ARGV"
                );
                assert_eq!(
                    eval_with(
                        &scripts,
                        &mut host,
                        &check,
                        &names[..after],
                        &names[..after]
                    ),
                    Reply::Int(2 * after as i64),
                    "{fields} fields, {before} then {after} values"
                );
            }
        }
    }
}

#[test]
fn each_run_sees_only_its_own_lists() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    let show =
        "return {#KEYS, #ARGV, KEYS[1], ARGV[1], ARGV[2], tostring(ARGV[3]), tostring(ARGV[0])}";
    let want = |k: &[u8], a1: &[u8], a2: &[u8]| {
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Int(2),
            Reply::bulk(k),
            Reply::bulk(a1),
            Reply::bulk(a2),
            Reply::bulk(b"nil"),
            Reply::bulk(b"nil"),
        ])
    };
    assert_eq!(
        eval_with(&scripts, &mut host, show, &["k1"], &["w", "x"]),
        want(b"k1", b"w", b"x")
    );
    // Same lengths, other bytes; then the same again: each run sees exactly its own.
    assert_eq!(
        eval_with(&scripts, &mut host, show, &["k2"], &["w", "y"]),
        want(b"k2", b"w", b"y")
    );
    // A run that overwrites the entries the next run would reuse, and adds a key past them
    // and one before them (0), sees none of it afterwards.
    let scribble = "ARGV[1] = 'v' ARGV[2] = 7 ARGV[3] = 'z' ARGV[0] = 'q' return 1";
    assert_eq!(
        eval_with(&scripts, &mut host, scribble, &["k2"], &["w", "y"]),
        Reply::Int(1)
    );
    assert_eq!(
        eval_with(&scripts, &mut host, show, &["k2"], &["w", "y"]),
        want(b"k2", b"w", b"y")
    );
    // Fewer arguments than the run before: the rest are gone.
    assert_eq!(
        eval_with(
            &scripts,
            &mut host,
            "return {#ARGV, tostring(ARGV[2])}",
            &[],
            &["w"]
        ),
        Reply::Array(vec![Reply::Int(1), Reply::bulk(b"nil")])
    );
}

#[test]
fn redis_call_outside_a_run_errors_as_redis_does() {
    let scripts = Scripts::new("7.0.15");
    // The script environment's redis.call, called while no script runs: it raises Redis's
    // error (as an `{err=…}` table, which the script's pcall turns into its message).
    for body in ["return redis.call('ping')", "return redis.pcall('ping')"] {
        let wrapped = format!("local ok, e = pcall(function() {body} end) return {{ok, e}}");
        let raised = scripts
            .with_vm(|vm| {
                vm.lua
                    .load(body)
                    .set_environment(vm.env.clone())
                    .call::<Value>(())
            })
            .expect("vm");
        assert!(raised.is_err(), "{body}");
        let out = scripts
            .with_vm(|vm| {
                let t: Table = vm
                    .lua
                    .load(&wrapped)
                    .set_environment(vm.env.clone())
                    .call(())?;
                Ok::<_, mlua::Error>((t.raw_get::<bool>(1)?, t.raw_get::<String>(2)?))
            })
            .expect("vm")
            .expect("pcall result");
        assert_eq!(
            out,
            (
                false,
                "ERR redis.call/pcall can only be called inside a script invocation".to_string()
            ),
            "{body}"
        );
    }
    // A run in between does not leave its host behind.
    let mut host = FakeHost::default();
    assert_eq!(
        eval_with(
            &scripts,
            &mut host,
            "return redis.call('incr', 'n')",
            &[],
            &[]
        ),
        Reply::Int(1)
    );
    let out = scripts
        .with_vm(|vm| {
            vm.lua
                .load("return redis.call('incr', 'n')")
                .set_environment(vm.env.clone())
                .call::<Value>(())
        })
        .expect("vm");
    assert!(out.is_err());
    assert_eq!(host.calls.len(), 1);
}

#[test]
fn a_script_may_return_its_keys_and_argv() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    assert_eq!(
        eval_with(
            &scripts,
            &mut host,
            "return {KEYS, ARGV}",
            &["a", "b"],
            &["1"]
        ),
        Reply::Array(vec![
            Reply::Array(vec![Reply::bulk(b"a"), Reply::bulk(b"b")]),
            Reply::Array(vec![Reply::bulk(b"1")]),
        ])
    );
    assert_eq!(
        eval_with(&scripts, &mut host, "return ARGV", &[], &["z"]),
        Reply::Array(vec![Reply::bulk(b"z")])
    );
}

/// A host that answers `r i` with the i-th of its replies.
struct Fixed(Vec<Reply>);

impl Host for Fixed {
    fn call(&mut self, args: &[&[u8]], _resp: u8) -> Reply {
        let i: usize = std::str::from_utf8(args[1]).unwrap().parse().unwrap();
        self.0[i].clone()
    }
    fn command_allowed(&mut self, _: &[&[u8]]) -> Option<bool> {
        None
    }
}

#[test]
fn raw_redis_call_pushes_what_reply_to_lua_builds() {
    let replies = vec![
        Reply::ok(),
        Reply::Error("ERR x".into()),
        Reply::Int(-7),
        Reply::bulk(b"bulk"),
        Reply::bulk(b""),
        Reply::short_or_bulk(b"short"),
        Reply::Verbatim(Bytes::from_static(b"txt:hello")),
        Reply::Null,
        Reply::NullArray,
        Reply::Array(vec![]),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Null,
            Reply::Array(vec![Reply::bulk(b"n"), Reply::Double(2.5)]),
        ]),
        Reply::Map(vec![
            (Reply::bulk(b"a"), Reply::Int(1)),
            (Reply::Null, Reply::Int(2)),
            (Reply::bulk(b"c"), Reply::Null),
        ]),
        Reply::Set(vec![Reply::bulk(b"x"), Reply::Null, Reply::Int(3)]),
        Reply::Double(1.5),
        Reply::Double(f64::INFINITY),
        Reply::DoubleText(Bytes::from_static(b"3.25")),
        Reply::Bool(true),
        Reply::Bool(false),
        Reply::BigNumber(Bytes::from_static(b"12345678901234567890")),
        Reply::Push(vec![Reply::bulk(b"p")]),
        Reply::Multi(vec![Reply::Int(4), Reply::Int(5)]),
    ];
    let scripts = Scripts::new("7.0.15");
    let body = "local function eq(a, b) \
                  if type(a) ~= type(b) then return false end \
                  if type(a) ~= 'table' then return a == b end \
                  for k, v in pairs(a) do if not eq(v, b[k]) then return false end end \
                  for k in pairs(b) do if a[k] == nil then return false end end \
                  return true \
                end \
                redis.setresp(tonumber(ARGV[1])) \
                return eq({redis.pcall('r', ARGV[2])}, EXPECTED) and 1 or 0";
    let mut host = Fixed(replies.clone());
    for resp in [2u8, 3] {
        for (i, reply) in replies.iter().enumerate() {
            scripts
                .with_vm(|vm| {
                    // In a table: a nil value would be no global at all.
                    let expected = vm.lua.create_table().unwrap();
                    let value = convert::reply_to_lua(&vm.lua, reply, resp).unwrap();
                    expected.raw_set(1, value).unwrap();
                    vm.lua.globals().raw_set("EXPECTED", expected).unwrap();
                })
                .expect("vm");
            let (resp_arg, i_arg) = (resp.to_string(), i.to_string());
            assert_eq!(
                eval_with(&scripts, &mut host, body, &[], &[&resp_arg, &i_arg]),
                Reply::Int(1),
                "RESP{resp} {reply:?}"
            );
        }
    }
}

#[test]
fn redis_call_arguments_are_strings_and_numbers_as_before() {
    // What `convert::arg_bytes` makes of each, which the raw reader must match.
    let mut host = FakeHost::default();
    let scripts = Scripts::new("7.0.15");
    let body = "redis.pcall('set', 'k', 1, 2.5, -0.0, 1e17, 123456789012345678, 3, 'x', 0.1) \
                return 1";
    eval_with(&scripts, &mut host, body, &[], &[]);
    let lua = mlua::Lua::new();
    let expected: Vec<Bytes> = [
        Value::String(lua.create_string("set").unwrap()),
        Value::String(lua.create_string("k").unwrap()),
        Value::Integer(1),
        Value::Number(2.5),
        Value::Number(-0.0),
        Value::Integer(100_000_000_000_000_000),
        Value::Integer(123_456_789_012_345_678),
        Value::Integer(3),
        Value::String(lua.create_string("x").unwrap()),
        Value::Number(0.1),
    ]
    .iter()
    .map(|v| convert::arg_bytes(v).unwrap())
    .collect();
    assert_eq!(host.calls.last(), Some(&expected));
    // Anything else is refused with Redis's error.
    assert_eq!(
        eval_with(
            &scripts,
            &mut host,
            "return redis.pcall('get', {})",
            &[],
            &[]
        ),
        Reply::Error("ERR Lua redis lib command arguments must be strings or integers".into())
    );
}

#[test]
fn evalsha_lookup_through_the_vm_forgets_flushed_scripts() {
    let scripts = Scripts::new("7.0.15");
    let mut host = FakeHost::default();
    let body = "return 7";
    assert_eq!(
        eval_with(&scripts, &mut host, body, &[], &[]),
        Reply::Int(7)
    );
    let sha = sha1_hex(body.as_bytes());
    // The first lookup fills the VM's map, the second is served by it.
    for _ in 0..2 {
        assert_eq!(
            scripts.get(sha.as_bytes()).map(|s| s.sha.clone()),
            Some(sha.clone())
        );
    }
    let upper = sha.to_ascii_uppercase();
    assert!(scripts.get(upper.as_bytes()).is_some());
    assert!(scripts.get(&sha.as_bytes()[..39]).is_none());
    scripts.flush();
    assert!(scripts.get(sha.as_bytes()).is_none());
    // Loaded again: found again.
    scripts.load(body.as_bytes()).expect("load");
    assert!(scripts.get(sha.as_bytes()).is_some());
}

/// EVALSHA's path: the lookup by SHA1, then the run.
fn evalsha(scripts: &Scripts, sha: &str) -> Option<Reply> {
    let script = scripts.get(sha.as_bytes())?;
    let _busy = scripts.busy.begin();
    Some(scripts.run(&script, &[], &[], &mut FakeHost::default()))
}

#[test]
fn the_last_script_run_is_found_again_and_forgotten_at_flush() {
    let scripts = Scripts::new("7.0.15");
    let a = scripts.load(b"return 'a'").expect("load").sha.clone();
    let b = scripts.load(b"return 'b'").expect("load").sha.clone();
    let bulk = |s: &str| Some(Reply::Bulk(Bytes::copy_from_slice(s.as_bytes())));
    // Each run again of the last script, and each switch to the other, runs its own body.
    for sha in [&a, &a, &b, &b, &a, &b] {
        let want = if *sha == a { bulk("a") } else { bulk("b") };
        assert_eq!(evalsha(&scripts, sha), want);
    }
    // The last script run is forgotten with the cache, and a body loaded after the flush
    // is compiled again.
    scripts.flush();
    assert_eq!(evalsha(&scripts, &b), None);
    assert_eq!(evalsha(&scripts, &a), None);
    scripts.load(b"return 'b'").expect("load");
    assert_eq!(evalsha(&scripts, &b), bulk("b"));
    assert_eq!(evalsha(&scripts, &a), None);
}
