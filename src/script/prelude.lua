-- sluice's Lua prelude: builds the script environment once per VM, the way Redis 7.0's
-- scripting engine presents it. Runs with the real globals table as its environment and
-- returns the read-only proxy that scripts see as their globals.
--
-- Arguments: D, a table of the Rust functions below, and the Redis version string and number.
local D, version, version_num = ...

local G = _G
local error, type, select, tostring, tonumber = error, type, select, tostring, tonumber
local raw_set, raw_get, raw_next, raw_ipairs = rawset, rawget, next, ipairs
local set_mt, get_mt = setmetatable, getmetatable
local raw_pcall, raw_xpcall, raw_loadstring, set_fenv = pcall, xpcall, loadstring, setfenv
local co_resume, concat, tinsert, tremove = coroutine.resume, table.concat, table.insert, table.remove
local format, byte = string.format, string.byte

-- What Redis does not offer scripts.
for _, name in ipairs({ 'print', 'dofile', 'loadfile', 'require', 'module', 'setfenv',
  'getfenv', 'newproxy', 'os', 'io', 'debug', 'package' }) do
  G[name] = nil
end

local function readonly()
  error('Attempt to modify a readonly table', 2)
end

-- Every read-only table, and for each proxy the table it shows.
local sealed = set_mt({}, { __mode = 'k' })
local backing = set_mt({}, { __mode = 'k' })

local hidden = {}
sealed[hidden] = true
set_mt(hidden, { __newindex = readonly, __metatable = hidden })

local function protect(real)
  local proxy = {}
  sealed[proxy] = true
  backing[proxy] = real
  set_mt(proxy, { __index = real, __newindex = readonly, __metatable = hidden })
  return proxy
end

-- redis.*
local redis = {}

-- The functions that can raise are Rust (C) functions: Lua functions would lose the
-- caller's frame on `return redis.call(...)` (a tail call), and with it the error position.
redis.call = D.call
redis.pcall = D.pcall
redis.acl_check_cmd = D.acl_check_cmd
redis.sha1hex = D.sha1hex
redis.log = D.log
redis.setresp = D.setresp
redis.set_repl = D.set_repl

local function bad_args()
  return { err = 'ERR wrong number or type of arguments' }
end

function redis.error_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then return bad_args() end
  if s:sub(1, 1) == '-' then s = s:sub(2) end
  if not s:find(' ', 1, true) then s = 'ERR ' .. s end
  return { err = s }
end

function redis.status_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then return bad_args() end
  return { ok = s }
end

function redis.replicate_commands()
  return true
end

function redis.breakpoint()
  return false
end

function redis.debug()
end

redis.REPL_NONE = 0
redis.REPL_AOF = 1
redis.REPL_SLAVE = 2
redis.REPL_REPLICA = 2
redis.REPL_ALL = 3
redis.LOG_DEBUG = 0
redis.LOG_VERBOSE = 1
redis.LOG_NOTICE = 2
redis.LOG_WARNING = 3
redis.REDIS_VERSION = version
redis.REDIS_VERSION_NUM = version_num

-- cjson
local cjson = { _NAME = 'cjson', _VERSION = '2.1.0', null = D.null }

cjson.encode = D.cjson_encode
cjson.decode = D.cjson_decode

-- The nesting limits can be set (lua-cjson's default, 1000, is also the most sluice
-- enforces, see cjson.rs); the other settings keep their defaults and the getters report them.
cjson.encode_max_depth = D.cjson_encode_max_depth
cjson.decode_max_depth = D.cjson_decode_max_depth
cjson.encode_invalid_numbers = D.cjson_encode_invalid_numbers
function cjson.encode_sparse_array() return false, 2, 10 end
function cjson.encode_number_precision() return 14 end
function cjson.encode_keep_buffer() return true end
function cjson.decode_invalid_numbers() return true end
function cjson.new() return G.cjson end

-- bit
local bit = {}
for name, f in raw_next, D.bit do
  bit[name] = f
end

-- struct, cmsgpack
local struct = {}
for name, f in raw_next, D.struct do
  struct[name] = f
end

local cmsgpack = {
  _NAME = 'cmsgpack',
  _VERSION = 'lua-cmsgpack 0.4.0',
  _COPYRIGHT = 'Copyright (C) 2012, Salvatore Sanfilippo',
  _DESCRIPTION = 'MessagePack C implementation for Lua',
}
for name, f in raw_next, D.cmsgpack do
  cmsgpack[name] = f
end

-- Library functions that take a table argument check it as Lua's own do, with the same texts
-- and the position of the script line that called them (`error` level 3: the caller of the
-- wrapper). A wrapper called as a tail call (`return pairs(nil)`) has lost that line, so its
-- error has no position there, unlike Redis's C functions.
local function check_table(fname, n, nargs, v)
  if type(v) ~= 'table' then
    local got = nargs < n and 'no value' or type(v)
    error(format("bad argument #%d to '%s' (table expected, got %s)", n, fname, got), 3)
  end
end

-- Stops the script if SCRIPT KILL (or shutdown) asked for it: every construct that catches
-- errors (pcall, xpcall, coroutine.resume, load's reader) re-raises the kill error instead of
-- swallowing it, so a script cannot survive its kill by catching it.
local killed, errmsg = D.killed, D.errmsg

-- Redis's pcall turns an error table into its message.
local function pcall_result(ok, ...)
  if ok then return true, ... end
  if killed() then error((...), 0) end
  local e = ...
  if type(e) == 'userdata' then
    local m = errmsg(e)
    if m then return false, m end
  end
  if type(e) == 'table' then
    local m = e.err
    if type(m) == 'string' or type(m) == 'number' then return false, m end
  end
  return false, ...
end

G.pcall = function(f, ...)
  return pcall_result(raw_pcall(f, ...))
end

local function unless_killed(ok, ...)
  if not ok and killed() then error((...), 0) end
  return ok, ...
end

-- The handler runs where the error was raised; for the kill error that is inside the count
-- hook, where Lua runs no hooks, so a handler that looped there could never be stopped: a
-- killed script's handlers are not called at all.
G.xpcall = function(...)
  local f, h = ...
  if select('#', ...) < 2 then error("bad argument #2 to 'xpcall' (value expected)", 2) end
  if type(h) ~= 'function' then return unless_killed(raw_xpcall(f, h)) end
  return unless_killed(raw_xpcall(f, function(e)
    if killed() then return e end
    return h(e)
  end))
end

-- collectgarbage is Lua's, which also tells sluice when a script changed the collector's
-- settings, so that only such a script pays for their reset after it (see `Vm::finish`).
G.collectgarbage = D.collectgarbage

-- How sluice runs a function library's body while it loads (see functions.rs): the real
-- xpcall, with its own handler (the wrapper above would skip that handler for the kill error,
-- which must get its position like any other). Scripts and functions are called from Rust
-- with the handler as `lua_pcall`'s message handler (see invoke.rs), KEYS and ARGV set as
-- globals around an EVAL script's call.
D.runner = function(f, h) return raw_xpcall(f, h) end

coroutine.resume = function(co, ...)
  if type(co) ~= 'thread' then error("bad argument #1 to 'resume' (coroutine expected)", 2) end
  return unless_killed(co_resume(co, ...))
end

-- Chunks loaded by a script see the script's globals, and bytecode is never loaded. Redis's
-- Lua always runs its text parser, so a precompiled chunk is a syntax error at its first byte
-- (`unexpected symbol near 'char(27)'`); a leading space gives the same parse, and the same
-- message, without ever handing the bytes to the undumper.
local P

local function compile(s, chunkname)
  if byte(s, 1) == 27 then s = ' ' .. s end
  local f, e = raw_loadstring(s, chunkname)
  if f then set_fenv(f, P) end
  return f, e
end

G.loadstring = function(...)
  local s, name = ...
  local n = select('#', ...)
  local ts = type(s)
  if ts ~= 'string' and ts ~= 'number' then
    error(format("bad argument #1 to 'loadstring' (string expected, got %s)",
      n < 1 and 'no value' or ts), 2)
  end
  local tn = type(name)
  if name ~= nil and tn ~= 'string' and tn ~= 'number' then
    error(format("bad argument #2 to 'loadstring' (string expected, got %s)", tn), 2)
  end
  s = tostring(s)
  return compile(s, name and tostring(name) or s)
end

-- load(reader [, chunkname]): the pieces are gathered first (each call of the reader is
-- script code, which the hook can stop), then compiled as one string.
G.load = function(...)
  local fn, name = ...
  local n = select('#', ...)
  if type(fn) ~= 'function' then
    error(format("bad argument #1 to 'load' (function expected, got %s)",
      n < 1 and 'no value' or type(fn)), 2)
  end
  local tn = type(name)
  if name ~= nil and tn ~= 'string' and tn ~= 'number' then
    error(format("bad argument #2 to 'load' (string expected, got %s)", tn), 2)
  end
  local pieces = {}
  while true do
    local ok, piece = raw_pcall(fn)
    if not ok then
      if killed() then error(piece, 0) end
      return nil, piece
    end
    if piece == nil then break end
    local tp = type(piece)
    if tp ~= 'string' and tp ~= 'number' then
      return nil, 'reader function must return a string'
    end
    piece = tostring(piece)
    if piece == '' then break end
    pieces[#pieces + 1] = piece
  end
  return compile(concat(pieces), name and tostring(name) or '=(load)')
end

G.rawset = function(...)
  local t, k, v = ...
  check_table('rawset', 1, select('#', ...), t)
  if sealed[t] then error('Attempt to modify a readonly table', 0) end
  return raw_set(t, k, v)
end

G.setmetatable = function(...)
  local t, mt = ...
  check_table('setmetatable', 1, select('#', ...), t)
  if sealed[t] then error('Attempt to modify a readonly table', 0) end
  return set_mt(t, mt)
end

G.rawget = function(...)
  local t, k = ...
  check_table('rawget', 1, select('#', ...), t)
  return raw_get(backing[t] or t, k)
end

-- Iterating a proxy walks the table it shows, but never hands that table out: pairs and
-- ipairs return the proxy itself as their state, with an iterator that holds the real one.
G.next = function(...)
  local t, k = ...
  check_table('next', 1, select('#', ...), t)
  return raw_next(backing[t] or t, k)
end

G.pairs = function(...)
  local t = ...
  check_table('pairs', 1, select('#', ...), t)
  local real = backing[t]
  if real then
    return function(_, k) return raw_next(real, k) end, t, nil
  end
  return raw_next, t, nil
end

G.ipairs = function(...)
  local t = ...
  check_table('ipairs', 1, select('#', ...), t)
  local real = backing[t]
  if real then
    return function(_, i)
      i = i + 1
      local v = raw_get(real, i)
      if v ~= nil then return i, v end
    end, t, 0
  end
  return raw_ipairs(t)
end

-- table.insert and table.remove write with rawseti, which no metatable stops.
table.insert = function(...)
  local t = ...
  check_table('insert', 1, select('#', ...), t)
  if sealed[t] then error('Attempt to modify a readonly table', 0) end
  return tinsert(...)
end

table.remove = function(...)
  local t = ...
  check_table('remove', 1, select('#', ...), t)
  if sealed[t] then error('Attempt to modify a readonly table', 0) end
  return tremove(...)
end

-- Pattern matching and string.rep are sluice's own (Rust): Lua 5.1's matcher recurses on the
-- C stack once per pattern item and backtracks exponentially with no hook to stop it.
if string.gfind == string.gmatch then string.gfind = D.str_gmatch end
string.find = D.str_find
string.match = D.str_match
string.gmatch = D.str_gmatch
string.gsub = D.str_gsub
string.rep = D.str_rep
G.__redis__err__handler = D.error_handler

G.redis = protect(redis)
G.cjson = protect(cjson)
G.bit = protect(bit)
G.struct = protect(struct)
G.cmsgpack = protect(cmsgpack)
G.string = protect(string)
G.math = protect(math)
G.table = protect(table)
G.coroutine = protect(coroutine)

-- Strings' methods still work; their metatable is out of reach.
local string_mt = get_mt('')
string_mt.__metatable = hidden

P = protect(G)
G._G = P
sealed[G] = true
set_mt(G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = readonly,
  __metatable = hidden,
})

return P
