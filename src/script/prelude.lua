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
local raw_pcall, raw_loadstring, raw_load, set_fenv = pcall, loadstring, load, setfenv

-- What Redis does not offer scripts.
for _, name in raw_ipairs({ 'print', 'dofile', 'loadfile', 'require', 'module', 'setfenv',
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

-- The settings keep their defaults in sluice; the getters report them.
function cjson.encode_sparse_array() return false, 2, 10 end
function cjson.encode_max_depth() return 1000 end
function cjson.decode_max_depth() return 1000 end
function cjson.encode_number_precision() return 14 end
function cjson.encode_keep_buffer() return true end
function cjson.encode_invalid_numbers() return false end
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

-- Redis's pcall turns an error table into its message.
local killed, errmsg = D.killed, D.errmsg
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

-- Chunks loaded by a script see the script's globals, and bytecode is refused.
local P

G.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then
    return nil, 'loading binary chunks is not allowed'
  end
  local f, e = raw_loadstring(s, name)
  if f then set_fenv(f, P) end
  return f, e
end

G.load = function(fn, name)
  local f, e = raw_load(fn, name)
  if f then set_fenv(f, P) end
  return f, e
end

G.rawset = function(t, k, v)
  if sealed[t] then error('Attempt to modify a readonly table', 0) end
  return raw_set(t, k, v)
end

G.setmetatable = function(t, mt)
  if sealed[t] then error('Attempt to modify a readonly table', 0) end
  return set_mt(t, mt)
end

G.rawget = function(t, k)
  return raw_get(backing[t] or t, k)
end

G.next = function(t, k)
  return raw_next(backing[t] or t, k)
end

G.pairs = function(t)
  return raw_next, backing[t] or t, nil
end

G.ipairs = function(t)
  return raw_ipairs(backing[t] or t)
end

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
