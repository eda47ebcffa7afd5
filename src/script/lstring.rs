//! `string.find`, `string.match`, `string.gmatch`, `string.gsub` and `string.rep` for
//! scripts: Lua 5.1's semantics and error texts, without its hazards.
//!
//! Lua 5.1's pattern matcher recurses on the C stack once per pattern item (a long pattern
//! of `a?` overflows it and kills the process) and backtracks exponentially (`a*a*a*…b`
//! against a long run of `a`) inside one C call, where the instruction-count hook that
//! SCRIPT KILL relies on never runs. This matcher is the same algorithm with a recursion
//! limit (`pattern too complex`, as Lua 5.2+ says) and a step counter that checks the kill
//! flag, so a pathological pattern runs until it is killed, like any loop. A plain search
//! uses `memchr::memmem` (linear time). Results that would not fit in the Lua state's memory
//! cap are refused before they are built (`not enough memory`), so `string.rep('x', 2^40)`
//! neither allocates nor loops.
//!
//! Patterns are C strings in Lua 5.1: they end at their first NUL byte (which is why `%z`
//! exists); the subject may hold any bytes.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{Lua, MultiValue, String as LuaString, Value};

use crate::num::fmt_g;

/// Lua 5.1's limit on captures in one pattern.
const MAX_CAPTURES: usize = 32;

/// Deepest recursion of the matcher (Lua 5.2+'s `MAXCCALLS`).
const MAX_DEPTH: usize = 200;

/// Matcher steps between two looks at the kill flag.
const CHECK_EVERY: u32 = 1 << 12;

/// What the string functions need from the engine.
#[derive(Clone)]
pub(super) struct Env {
    /// True once the running script must stop (SCRIPT KILL, shutdown).
    pub stop: Rc<dyn Fn() -> bool>,
    /// The error a stopped script raises.
    pub killed: Rc<dyn Fn() -> mlua::Error>,
    /// Raises `msg` at the calling script line, as `luaL_error` does.
    pub raise: fn(&Lua, &str) -> mlua::Error,
    /// Largest string a function here may build.
    pub max_len: usize,
}

/// A failed match: a pattern error (raised with the script position) or the kill.
enum Fail {
    Error(&'static str),
    Killed,
}

type R<T> = Result<T, Fail>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cap {
    Unfinished,
    Position,
    Len(usize),
}

struct Matcher<'a> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    capture: [(usize, Cap); MAX_CAPTURES],
    depth: usize,
    steps: u32,
    stop: &'a dyn Fn() -> bool,
}

fn is_space(c: u8) -> bool {
    c == b' ' || (9..=13).contains(&c)
}

/// `%a`, `%d`, … (C locale), or the literal character for any other letter.
fn match_class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => is_space(c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_lowercase() { res } else { !res }
}

impl<'a> Matcher<'a> {
    fn new(src: &'a [u8], pat: &'a [u8], stop: &'a dyn Fn() -> bool) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            capture: [(0, Cap::Unfinished); MAX_CAPTURES],
            depth: 0,
            steps: 0,
            stop,
        }
    }

    fn tick(&mut self) -> R<()> {
        self.steps = self.steps.wrapping_add(1);
        if self.steps.is_multiple_of(CHECK_EVERY) && (self.stop)() {
            return Err(Fail::Killed);
        }
        Ok(())
    }

    /// The end of the single-character class starting at `p`.
    fn class_end(&self, p: usize) -> R<usize> {
        let pat = self.pat;
        let mut p = p;
        let c = pat[p];
        p += 1;
        match c {
            b'%' => {
                if p >= pat.len() {
                    return Err(Fail::Error("malformed pattern (ends with '%')"));
                }
                Ok(p + 1)
            }
            b'[' => {
                if pat.get(p) == Some(&b'^') {
                    p += 1;
                }
                // The first character of a set is part of it, even `]`.
                loop {
                    let Some(&c) = pat.get(p) else {
                        return Err(Fail::Error("malformed pattern (missing ']')"));
                    };
                    p += 1;
                    if c == b'%' && p < pat.len() {
                        p += 1;
                    }
                    if pat.get(p) == Some(&b']') {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    /// `[set]` from `p` (at `[`) to `ec` (at `]`).
    fn match_bracket(&self, c: u8, p: usize, ec: usize) -> bool {
        let pat = self.pat;
        let mut p = p;
        let mut sig = true;
        if pat.get(p + 1) == Some(&b'^') {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                return !sig;
            }
            if pat[p] == b'%' {
                p += 1;
                if p < pat.len() && match_class(c, pat[p]) {
                    return sig;
                }
            } else if pat.get(p + 1) == Some(&b'-') && p + 2 < ec {
                p += 2;
                if pat[p - 2] <= c && c <= pat[p] {
                    return sig;
                }
            } else if pat[p] == c {
                return sig;
            }
        }
    }

    fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else {
            return false;
        };
        match self.pat[p] {
            b'.' => true,
            b'%' => match_class(c, self.pat[p + 1]),
            b'[' => self.match_bracket(c, p, ep - 1),
            other => other == c,
        }
    }

    fn do_match(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Fail::Error("pattern too complex"));
        }
        let r = self.match_here(s, p);
        self.depth -= 1;
        r
    }

    fn match_here(&mut self, mut s: usize, mut p: usize) -> R<Option<usize>> {
        let pat = self.pat;
        loop {
            self.tick()?;
            let Some(&pc) = pat.get(p) else {
                return Ok(Some(s));
            };
            match pc {
                b'(' => {
                    return if pat.get(p + 1) == Some(&b')') {
                        self.start_capture(s, p + 2, Cap::Position)
                    } else {
                        self.start_capture(s, p + 1, Cap::Unfinished)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                b'%' if pat.get(p + 1) == Some(&b'b') => match self.match_balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                b'%' if pat.get(p + 1) == Some(&b'f') => {
                    p += 2;
                    if pat.get(p) != Some(&b'[') {
                        return Err(Fail::Error("missing '[' after '%f' in pattern"));
                    }
                    let ep = self.class_end(p)?;
                    let prev = if s == 0 { 0 } else { self.src[s - 1] };
                    let cur = self.src.get(s).copied().unwrap_or(0);
                    if self.match_bracket(prev, p, ep - 1) || !self.match_bracket(cur, p, ep - 1) {
                        return Ok(None);
                    }
                    p = ep;
                    continue;
                }
                b'%' if pat.get(p + 1).is_some_and(u8::is_ascii_digit) => {
                    match self.match_capture(s, pat[p + 1])? {
                        Some(e) => {
                            s = e;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {}
            }
            let ep = self.class_end(p)?;
            let m = self.single_match(s, p, ep);
            match pat.get(ep) {
                Some(b'?') => {
                    if m && let Some(r) = self.do_match(s + 1, ep + 1)? {
                        return Ok(Some(r));
                    }
                    p = ep + 1;
                }
                Some(b'*') => return self.max_expand(s, p, ep),
                Some(b'+') => {
                    return if m {
                        self.max_expand(s + 1, p, ep)
                    } else {
                        Ok(None)
                    };
                }
                Some(b'-') => return self.min_expand(s, p, ep),
                _ => {
                    if !m {
                        return Ok(None);
                    }
                    s += 1;
                    p = ep;
                }
            }
        }
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> R<Option<usize>> {
        let mut i = 0;
        while self.single_match(s + i, p, ep) {
            i += 1;
            self.tick()?;
        }
        loop {
            if let Some(r) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(r));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> R<Option<usize>> {
        loop {
            if let Some(r) = self.do_match(s, ep + 1)? {
                return Ok(Some(r));
            }
            if self.single_match(s, p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: Cap) -> R<Option<usize>> {
        let level = self.level;
        if level >= MAX_CAPTURES {
            return Err(Fail::Error("too many captures"));
        }
        self.capture[level] = (s, what);
        self.level = level + 1;
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.level -= 1;
        }
        Ok(r)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| self.capture[l].1 == Cap::Unfinished)
        else {
            return Err(Fail::Error("invalid pattern capture"));
        };
        self.capture[l].1 = Cap::Len(s - self.capture[l].0);
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.capture[l].1 = Cap::Unfinished;
        }
        Ok(r)
    }

    fn match_balance(&mut self, s: usize, p: usize) -> R<Option<usize>> {
        let (Some(&b), Some(&e)) = (self.pat.get(p), self.pat.get(p + 1)) else {
            return Err(Fail::Error("unbalanced pattern"));
        };
        if self.src.get(s) != Some(&b) {
            return Ok(None);
        }
        let mut depth = 1usize;
        let mut i = s + 1;
        while let Some(&c) = self.src.get(i) {
            self.tick()?;
            if c == e {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == b {
                depth += 1;
            }
            i += 1;
        }
        Ok(None)
    }

    fn check_capture(&self, l: u8) -> R<usize> {
        let l = (l as usize).wrapping_sub(b'1' as usize);
        if l >= self.level || self.capture[l].1 == Cap::Unfinished {
            return Err(Fail::Error("invalid capture index"));
        }
        Ok(l)
    }

    fn match_capture(&mut self, s: usize, l: u8) -> R<Option<usize>> {
        let l = self.check_capture(l)?;
        let (start, Cap::Len(len)) = self.capture[l] else {
            return Ok(None);
        };
        let rest = &self.src[s..];
        Ok((rest.len() >= len && rest[..len] == self.src[start..start + len]).then_some(s + len))
    }

    /// Capture `i` of a match of `s..e` (the whole match when the pattern has none).
    fn capture_value(
        &self,
        lua: &Lua,
        i: usize,
        s: usize,
        e: usize,
    ) -> mlua::Result<Result<Value, &'static str>> {
        if i >= self.level {
            if i == 0 {
                return Ok(Ok(Value::String(lua.create_string(&self.src[s..e])?)));
            }
            return Ok(Err("invalid capture index"));
        }
        let (start, cap) = self.capture[i];
        Ok(match cap {
            Cap::Unfinished => Err("unfinished capture"),
            Cap::Position => Ok(Value::Number((start + 1) as f64)),
            Cap::Len(len) => Ok(Value::String(
                lua.create_string(&self.src[start..start + len])?,
            )),
        })
    }

    /// Every capture (or the whole match `s..e` if there is none and `whole`).
    fn captures(
        &self,
        lua: &Lua,
        s: usize,
        e: usize,
        whole: bool,
    ) -> mlua::Result<Result<Vec<Value>, &'static str>> {
        let n = if self.level == 0 && whole {
            1
        } else {
            self.level
        };
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            match self.capture_value(lua, i, s, e)? {
                Ok(v) => out.push(v),
                Err(m) => return Ok(Err(m)),
            }
        }
        Ok(Ok(out))
    }
}

/// The pattern as Lua 5.1 reads it: up to its first NUL.
fn c_pattern(p: &[u8]) -> &[u8] {
    match memchr::memchr(0, p) {
        Some(i) => &p[..i],
        None => p,
    }
}

const SPECIALS: &[u8] = b"^$*+?.([%-";

/// `luaL_argerror`: the message names the function as the calling code does, and counts
/// `self` out of a method call.
fn arg_error(env: &Env, lua: &Lua, narg: usize, fname: &str, msg: &str) -> mlua::Error {
    let (name, method) = lua
        .inspect_stack(0, |d| {
            let names = d.names();
            (
                names.name.map(|n| n.into_owned()),
                names.name_what == Some("method"),
            )
        })
        .unwrap_or((None, false));
    let _ = fname;
    let name = name.unwrap_or_else(|| "?".to_string());
    let text = if method {
        if narg == 1 {
            format!("calling '{name}' on bad self ({msg})")
        } else {
            format!("bad argument #{} to '{name}' ({msg})", narg - 1)
        }
    } else {
        format!("bad argument #{narg} to '{name}' ({msg})")
    };
    (env.raise)(lua, &text)
}

fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(v) => lua_type(v),
    }
}

/// `luaL_typename`: what Lua calls the value's type.
fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) => "userdata",
        Value::Integer(_) => "number",
        other => other.type_name(),
    }
}

/// `luaL_checklstring`: strings, and numbers in `%.14g`.
fn check_string(
    env: &Env,
    lua: &Lua,
    args: &MultiValue,
    n: usize,
    fname: &str,
) -> mlua::Result<LuaString> {
    match args.get(n - 1) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Integer(i)) => lua.create_string(fmt_g(*i as f64, 14)),
        Some(Value::Number(x)) => lua.create_string(fmt_g(*x, 14)),
        other => Err(arg_error(
            env,
            lua,
            n,
            fname,
            &format!("string expected, got {}", type_name(other)),
        )),
    }
}

/// `luaL_optinteger`.
fn opt_integer(
    env: &Env,
    lua: &Lua,
    args: &MultiValue,
    n: usize,
    fname: &str,
    default: i64,
) -> mlua::Result<i64> {
    match args.get(n - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(v) => check_integer(env, lua, v, n, fname),
    }
}

fn check_integer(env: &Env, lua: &Lua, v: &Value, n: usize, fname: &str) -> mlua::Result<i64> {
    match v {
        Value::Integer(i) => Ok(*i),
        Value::Number(x) => Ok(*x as i64),
        Value::String(s) => match super::convert::parse_lua_number(&s.as_bytes()) {
            Some(x) => Ok(x as i64),
            None => Err(arg_error(env, lua, n, fname, "number expected, got string")),
        },
        other => Err(arg_error(
            env,
            lua,
            n,
            fname,
            &format!("number expected, got {}", lua_type(other)),
        )),
    }
}

fn fail(env: &Env, lua: &Lua, f: Fail) -> mlua::Error {
    match f {
        Fail::Error(m) => (env.raise)(lua, m),
        Fail::Killed => (env.killed)(),
    }
}

/// A loop of cheap-looking calls can run many milliseconds between two instruction-count
/// hooks; each call here looks at the kill flag first, so such a loop stops at once.
fn stop_check(env: &Env) -> mlua::Result<()> {
    if (env.stop)() {
        return Err((env.killed)());
    }
    Ok(())
}

fn posrelat(pos: i64, len: usize) -> i64 {
    let pos = if pos < 0 {
        pos.saturating_add(len as i64 + 1)
    } else {
        pos
    };
    pos.max(0)
}

/// `string.find` (`find`) and `string.match`.
pub(super) fn find(env: &Env, lua: &Lua, args: MultiValue, find: bool) -> mlua::Result<MultiValue> {
    stop_check(env)?;
    let fname = if find { "find" } else { "match" };
    let s = check_string(env, lua, &args, 1, fname)?;
    let p = check_string(env, lua, &args, 2, fname)?;
    let src = s.as_bytes();
    let pat_full = p.as_bytes();
    let init = opt_integer(env, lua, &args, 3, fname, 1)?;
    let init = (posrelat(init, src.len()) - 1).clamp(0, src.len() as i64) as usize;
    let plain = args
        .get(3)
        .is_some_and(|v| !matches!(v, Value::Nil | Value::Boolean(false)));
    let pat = c_pattern(&pat_full);
    if find && (plain || !pat.iter().any(|c| SPECIALS.contains(c))) {
        let found = if pat_full.is_empty() {
            Some(0)
        } else {
            memchr::memmem::find(&src[init..], &pat_full)
        };
        return Ok(match found {
            Some(at) => MultiValue::from_vec(vec![
                Value::Number((init + at + 1) as f64),
                Value::Number((init + at + pat_full.len()) as f64),
            ]),
            None => MultiValue::from_vec(vec![Value::Nil]),
        });
    }
    let (anchor, pat) = match pat.first() {
        Some(b'^') => (true, &pat[1..]),
        _ => (false, pat),
    };
    let stop = &*env.stop;
    let mut m = Matcher::new(&src, pat, stop);
    let mut s1 = init;
    loop {
        m.level = 0;
        m.depth = 0;
        match m.do_match(s1, 0) {
            Err(f) => return Err(fail(env, lua, f)),
            Ok(Some(e)) => {
                let caps = match m.captures(lua, s1, e, !find)? {
                    Ok(c) => c,
                    Err(msg) => return Err((env.raise)(lua, msg)),
                };
                let mut out = Vec::with_capacity(caps.len() + 2);
                if find {
                    out.push(Value::Number((s1 + 1) as f64));
                    out.push(Value::Number(e as f64));
                }
                out.extend(caps);
                return Ok(MultiValue::from_vec(out));
            }
            Ok(None) => {}
        }
        s1 += 1;
        if anchor || s1 > src.len() {
            break;
        }
    }
    Ok(MultiValue::from_vec(vec![Value::Nil]))
}

/// `string.gmatch(s, p)`: the iterator (Lua 5.1 treats a leading `^` as a plain character).
pub(super) fn gmatch(env: &Env, lua: &Lua, args: MultiValue) -> mlua::Result<mlua::Function> {
    let s = check_string(env, lua, &args, 1, "gmatch")?;
    let p = check_string(env, lua, &args, 2, "gmatch")?;
    let pos = Cell::new(0usize);
    let env = env.clone();
    lua.create_function(move |lua, _: MultiValue| {
        stop_check(&env)?;
        let src = s.as_bytes();
        let pat_full = p.as_bytes();
        let pat = c_pattern(&pat_full);
        let stop = &*env.stop;
        let mut m = Matcher::new(&src, pat, stop);
        let mut at = pos.get();
        while at <= src.len() {
            m.level = 0;
            m.depth = 0;
            match m.do_match(at, 0) {
                Err(f) => return Err(fail(&env, lua, f)),
                Ok(Some(e)) => {
                    pos.set(if e == at { e + 1 } else { e });
                    return match m.captures(lua, at, e, true)? {
                        Ok(c) => Ok(MultiValue::from_vec(c)),
                        Err(msg) => Err((env.raise)(lua, msg)),
                    };
                }
                Ok(None) => at += 1,
            }
        }
        pos.set(src.len() + 1);
        Ok(MultiValue::new())
    })
}

fn push_limited(env: &Env, lua: &Lua, out: &mut Vec<u8>, bytes: &[u8]) -> mlua::Result<()> {
    if out.len().saturating_add(bytes.len()) > env.max_len {
        return Err((env.raise)(lua, "not enough memory"));
    }
    out.extend_from_slice(bytes);
    Ok(())
}

/// `string.gsub(s, p, repl [, n])`.
pub(super) fn gsub(env: &Env, lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    stop_check(env)?;
    let s = check_string(env, lua, &args, 1, "gsub")?;
    let p = check_string(env, lua, &args, 2, "gsub")?;
    let src = s.as_bytes();
    let repl = args.get(2).cloned().unwrap_or(Value::Nil);
    let max_n = match args.get(3) {
        None | Some(Value::Nil) => src.len() as i64 + 1,
        Some(v) => check_integer(env, lua, v, 4, "gsub")? as i32 as i64,
    };
    if !matches!(
        repl,
        Value::Integer(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Function(_)
            | Value::Table(_)
    ) {
        return Err(arg_error(
            env,
            lua,
            3,
            "gsub",
            "string/function/table expected",
        ));
    }
    let repl_text: Option<Vec<u8>> = match &repl {
        Value::String(r) => Some(r.as_bytes().to_vec()),
        Value::Integer(i) => Some(fmt_g(*i as f64, 14).into_bytes()),
        Value::Number(x) => Some(fmt_g(*x, 14).into_bytes()),
        _ => None,
    };
    let pat_full = p.as_bytes();
    let pat = c_pattern(&pat_full);
    let (anchor, pat) = match pat.first() {
        Some(b'^') => (true, &pat[1..]),
        _ => (false, pat),
    };
    let stop = &*env.stop;
    let mut m = Matcher::new(&src, pat, stop);
    let mut out: Vec<u8> = Vec::new();
    let mut at = 0usize;
    let mut n = 0i64;
    while n < max_n {
        m.level = 0;
        m.depth = 0;
        let e = m.do_match(at, 0).map_err(|f| fail(env, lua, f))?;
        if let Some(e) = e {
            n += 1;
            add_value(env, lua, &m, &repl, repl_text.as_deref(), at, e, &mut out)?;
        }
        match e {
            Some(e) if e > at => at = e,
            _ if at < src.len() => {
                push_limited(env, lua, &mut out, &src[at..at + 1])?;
                at += 1;
            }
            _ => break,
        }
        if anchor {
            break;
        }
    }
    push_limited(env, lua, &mut out, &src[at..])?;
    Ok(MultiValue::from_vec(vec![
        Value::String(lua.create_string(&out)?),
        Value::Number(n as f64),
    ]))
}

#[allow(clippy::too_many_arguments)]
fn add_value(
    env: &Env,
    lua: &Lua,
    m: &Matcher<'_>,
    repl: &Value,
    repl_text: Option<&[u8]>,
    s: usize,
    e: usize,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    if let Some(text) = repl_text {
        let mut i = 0;
        while i < text.len() {
            let c = text[i];
            if c != b'%' {
                push_limited(env, lua, out, &[c])?;
                i += 1;
                continue;
            }
            i += 1;
            // A `%` at the very end adds the string's terminating NUL, as Lua 5.1 does.
            let d = text.get(i).copied().unwrap_or(0);
            i += 1;
            if !d.is_ascii_digit() {
                push_limited(env, lua, out, &[d])?;
            } else if d == b'0' {
                push_limited(env, lua, out, &m.src[s..e])?;
            } else {
                match m.capture_value(lua, (d - b'1') as usize, s, e)? {
                    Ok(Value::String(v)) => push_limited(env, lua, out, &v.as_bytes())?,
                    Ok(Value::Number(x)) => push_limited(env, lua, out, fmt_g(x, 14).as_bytes())?,
                    Ok(_) => {}
                    Err(msg) => return Err((env.raise)(lua, msg)),
                }
            }
        }
        return Ok(());
    }
    let value = match repl {
        Value::Function(f) => {
            let caps = match m.captures(lua, s, e, true)? {
                Ok(c) => c,
                Err(msg) => return Err((env.raise)(lua, msg)),
            };
            f.call::<Value>(MultiValue::from_vec(caps))?
        }
        Value::Table(t) => {
            let key = match m.capture_value(lua, 0, s, e)? {
                Ok(k) => k,
                Err(msg) => return Err((env.raise)(lua, msg)),
            };
            t.get::<Value>(key)?
        }
        _ => Value::Nil,
    };
    match value {
        Value::Nil | Value::Boolean(false) => push_limited(env, lua, out, &m.src[s..e]),
        Value::String(v) => push_limited(env, lua, out, &v.as_bytes()),
        Value::Integer(i) => push_limited(env, lua, out, fmt_g(i as f64, 14).as_bytes()),
        Value::Number(x) => push_limited(env, lua, out, fmt_g(x, 14).as_bytes()),
        other => Err((env.raise)(
            lua,
            &format!("invalid replacement value (a {})", lua_type(&other)),
        )),
    }
}

/// `string.rep(s, n)`.
pub(super) fn rep(env: &Env, lua: &Lua, args: MultiValue) -> mlua::Result<LuaString> {
    stop_check(env)?;
    let s = check_string(env, lua, &args, 1, "rep")?;
    let n = match args.get(1) {
        Some(v) => check_integer(env, lua, v, 2, "rep")?,
        None => {
            return Err(arg_error(
                env,
                lua,
                2,
                "rep",
                "number expected, got no value",
            ));
        }
    };
    let unit = s.as_bytes();
    if n <= 0 || unit.is_empty() {
        return lua.create_string("");
    }
    let total = (unit.len() as u128) * (n as u128);
    if total > env.max_len as u128 {
        return Err((env.raise)(lua, "not enough memory"));
    }
    lua.create_string(unit.repeat(n as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            stop: Rc::new(|| false),
            killed: Rc::new(|| mlua::Error::RuntimeError("killed".into())),
            raise: |_, m| mlua::Error::RuntimeError(m.to_string()),
            max_len: 1 << 20,
        }
    }

    /// A Lua state whose `xfind`, `xmatch`, `xgmatch`, `xgsub`, `xrep` are ours, next to
    /// the stock functions, to compare them.
    fn lua() -> Lua {
        let lua = Lua::new();
        let g = lua.globals();
        let e = env();
        let e1 = e.clone();
        g.set(
            "xfind",
            lua.create_function(move |l, a| find(&e1, l, a, true))
                .unwrap(),
        )
        .unwrap();
        let e2 = e.clone();
        g.set(
            "xmatch",
            lua.create_function(move |l, a| find(&e2, l, a, false))
                .unwrap(),
        )
        .unwrap();
        let e3 = e.clone();
        g.set(
            "xgmatch",
            lua.create_function(move |l, a| gmatch(&e3, l, a)).unwrap(),
        )
        .unwrap();
        let e4 = e.clone();
        g.set(
            "xgsub",
            lua.create_function(move |l, a| gsub(&e4, l, a)).unwrap(),
        )
        .unwrap();
        let e5 = e;
        g.set(
            "xrep",
            lua.create_function(move |l, a| rep(&e5, l, a)).unwrap(),
        )
        .unwrap();
        lua.load(
            r#"
            function show(...)
              local t = {select('#', ...)}
              for i = 1, select('#', ...) do
                local v = select(i, ...)
                local ty = type(v)
                if ty == 'userdata' then
                  v = tostring(v):match('runtime error: ([^\n]*)') or tostring(v)
                  ty = 'string'
                end
                t[#t + 1] = ty .. ':' .. tostring(v)
              end
              return table.concat(t, '|')
            end
            function both(f, xf, ...)
              local a = show(pcall(f, ...))
              local b = show(pcall(xf, ...))
              return a, b
            end
            function gm(f, s, p)
              local out = {}
              for a, b in f(s, p) do out[#out + 1] = tostring(a) .. ',' .. tostring(b) if #out > 50 then break end end
              return table.concat(out, ';')
            end
            "#,
        )
        .exec()
        .unwrap();
        lua
    }

    fn same(lua: &Lua, func: &str, s: &[u8], p: &[u8], extra: &str) {
        let both: mlua::Function = lua.globals().get("both").unwrap();
        let (stock, ours): (String, String) = both
            .call((
                lua.load(format!("return string.{func}"))
                    .eval::<mlua::Function>()
                    .unwrap(),
                lua.globals()
                    .get::<mlua::Function>(format!("x{func}"))
                    .unwrap(),
                lua.create_string(s).unwrap(),
                lua.create_string(p).unwrap(),
                lua.load(format!("return {extra}"))
                    .eval::<MultiValue>()
                    .unwrap(),
            ))
            .unwrap();
        assert_eq!(
            stock,
            ours,
            "{func}({:?}, {:?}, {extra})",
            String::from_utf8_lossy(s),
            String::from_utf8_lossy(p)
        );
    }

    #[test]
    fn matches_lua_on_examples() {
        let lua = lua();
        let cases: &[(&[u8], &[u8])] = &[
            (b"hello world", b"o w"),
            (b"hello world", b"l+"),
            (b"hello world", b"^h"),
            (b"hello world", b"^w"),
            (b"hello world", b"d$"),
            (b"hello", b"(h)(e)"),
            (b"hello", b"()ll()"),
            (b"key:123:x", b"(%w+):(%d+)"),
            (b"  trim  ", b"^%s*(.-)%s*$"),
            (b"THE (quick) fox", b"%((%a+)%)"),
            (b"f(a(b)c)d", b"%b()"),
            (b"THE (quick) fox", b"%f[%a]%a+"),
            (b"aaab", b"a-b"),
            (b"aaa", b"a-"),
            (b"abcabc", b"(abc)%1"),
            (b"x=1, y=2", b"(%w+)=(%w+)"),
            (b"[a]", b"[]]"),
            (b"a-b", b"[a-]"),
            (b"a^b", b"[%^b]+"),
            (b"abc", b"[^a]+"),
            (b"a\0b", b"%z"),
            (b"a\0b", b"a\0x"),
            (b"a.b", b"."),
            (b"a.b", b"%."),
            (b"", b""),
            (b"abc", b""),
            (b"abc", b"x*"),
            (b"\x0bvt", b"%s"),
            (b"a", b"%"),
            (b"a", b"[a"),
            (b"a", b"%f"),
            (b"a", b"%b"),
            (b"a", b"%1"),
            (b"a", b"(a"),
            (b"a", b"a)"),
            (b"a", b"%0"),
            (b"a+b", b"a+b"),
            (b"$x", b"$x"),
            (b"x$", b"x$"),
        ];
        for (s, p) in cases {
            for func in ["find", "match"] {
                same(&lua, func, s, p, "nil");
            }
            same(&lua, "find", s, p, "1, true");
            same(&lua, "find", s, p, "-2");
            same(&lua, "find", s, p, "100");
            for repl in [
                "'<%0>'",
                "'%1'",
                "'%%'",
                "'x%'",
                "{a='A'}",
                "function(x) return x == 'l' and 'L' end",
                "{}",
                "true",
            ] {
                same(&lua, "gsub", s, p, repl);
                same(&lua, "gsub", s, p, &format!("{repl}, 1"));
            }
        }
        same(&lua, "find", b"abc", b"b", "'x'");
        same(&lua, "gsub", b"abc", b"b", "function() return {} end");
    }

    #[test]
    fn gmatch_matches_lua() {
        let lua = lua();
        for (s, p) in [
            ("one two  three", "%a+"),
            ("k=v, a=b", "(%w+)=(%w+)"),
            ("abc", ""),
            ("abc", "x*"),
            ("^a^a", "^a"),
            ("a1b2", "()%d"),
        ] {
            let stock: String = lua
                .load(format!("return gm(string.gmatch, {s:?}, {p:?})"))
                .eval()
                .unwrap();
            let ours: String = lua
                .load(format!("return gm(xgmatch, {s:?}, {p:?})"))
                .eval()
                .unwrap();
            assert_eq!(stock, ours, "{s:?} {p:?}");
        }
    }

    #[test]
    fn random_patterns_match_lua() {
        use rand::{RngExt, SeedableRng};
        let lua = lua();
        let mut rng = rand::rngs::StdRng::seed_from_u64(14);
        let atoms: &[&str] = &[
            "a", "b", ".", "%a", "%d", "%s", "[ab]", "[^a]", "[a-c]", "%b()", "%f[%a]", "(", ")",
            "()", "%1", "^", "$", "*", "+", "-", "?", "%", "[", "]", "x",
        ];
        let subj = b"ab(a)b1 2cabba";
        for _ in 0..3000 {
            let n = rng.random_range(1..7);
            let p: String = (0..n)
                .map(|_| atoms[rng.random_range(0..atoms.len())])
                .collect();
            let start = rng.random_range(0..subj.len());
            let end = rng.random_range(start..=subj.len());
            let s = &subj[start..end];
            same(&lua, "find", s, p.as_bytes(), "nil");
            same(&lua, "match", s, p.as_bytes(), "nil");
            same(&lua, "gsub", s, p.as_bytes(), "'[%0]'");
        }
    }

    #[test]
    fn pathological_patterns_are_bounded() {
        let lua = lua();
        // Deep recursion: refused, not a stack overflow.
        let r: mlua::Result<Value> = lua
            .load("return xfind(string.rep('a', 100000), string.rep('a?', 50000))")
            .eval();
        assert!(r.unwrap_err().to_string().contains("pattern too complex"));
        // Exponential backtracking: stops when told to.
        let calls = Rc::new(Cell::new(0u32));
        let c = calls.clone();
        let e = Env {
            stop: Rc::new(move || {
                c.set(c.get() + 1);
                c.get() > 50
            }),
            ..env()
        };
        let f = lua
            .create_function(move |l, a| find(&e, l, a, true))
            .unwrap();
        let r: mlua::Result<Value> = f.call(("a".repeat(5000), format!("{}b", "a*".repeat(30))));
        assert!(r.unwrap_err().to_string().contains("killed"));
        // Huge results are refused before they are built.
        let r: mlua::Result<Value> = lua.load("return xrep('x', 2^40)").eval();
        assert!(r.unwrap_err().to_string().contains("not enough memory"));
        let r: mlua::Result<Value> = lua.load("return xrep('', 2^40)").eval();
        assert_eq!(r.unwrap(), Value::String(lua.create_string("").unwrap()));
        let r: mlua::Result<Value> = lua
            .load("return xgsub(string.rep('x', 1000), 'x', string.rep('y', 2000))")
            .eval();
        assert!(r.unwrap_err().to_string().contains("not enough memory"));
        let r: String = lua.load("return xrep('ab', 3)").eval().unwrap();
        assert_eq!(r, "ababab");
    }
}
