-- tamer's Lua sandbox, run once in each new Lua state before any script (chunk "=tamer").
-- It receives `raw`, the table of primitives the server implements in Rust, and returns
-- the globals proxy scripts see, the hidden storage behind it, and the runner that calls
-- a script under the error handler.
--
-- Redis 7.0 makes the globals and every library table read-only with a flag in its own
-- Lua. Vanilla Lua 5.1 has none, so each protected table is an empty proxy whose
-- metatable reads through to the real table and refuses writes; the raw functions that
-- would go around a metatable (rawset, setmetatable, table.insert ...) refuse proxies.

local raw = ...

-- The library functions below are wrapped in a C function, as Redis's are C functions: a
-- script's `return redis.call(...)` is then no tail call that would take the script's frame
-- (and the line an error names) off the stack.
local c = raw.cwrap

local real = {
  error = error, type = type, tostring = tostring, tonumber = tonumber, select = select,
  rawget = rawget, rawset = rawset, setmetatable = setmetatable, getmetatable = getmetatable,
  pcall = pcall, xpcall = xpcall, unpack = unpack, next = next, ipairs = ipairs,
  loadstring = loadstring, load = load, floor = math.floor, format = string.format,
  insert = table.insert, remove = table.remove, sort = table.sort, concat = table.concat,
  math_max = math.max,
  getinfo = debug.getinfo,
}
local error, type, tostring, select = real.error, real.type, real.tostring, real.select

local READONLY = 'Attempt to modify a readonly table'

-- proxy -> the real table it stands for (weak keys: a proxy lives as long as it is used)
local protected = real.setmetatable({}, { __mode = 'k' })

local function refuse_write()
  error(READONLY, 2)
end

-- What getmetatable shows of a proxy whose metatable reads with `index`: a read-only view.
local function shown_meta(index)
  local inner = { __index = index, __newindex = refuse_write }
  local shown = {}
  real.setmetatable(shown, { __index = inner, __newindex = refuse_write, __metatable = false })
  protected[shown] = inner
  return shown
end

-- A read-only proxy of `t` (whose table fields were locked first where they need it).
local function lock(t)
  local proxy = {}
  real.setmetatable(proxy, { __index = t, __newindex = refuse_write, __metatable = shown_meta(proxy) })
  protected[proxy] = t
  return proxy
end

local function unproxied(t)
  return protected[t] or t
end

local function check_writable(t)
  if protected[t] then
    error(READONLY, 0)
  end
end

-- What reads a table raw reads through a proxy; what writes raw refuses one.
local overrides = {
  rawset = function(t, k, v)
    check_writable(t)
    return real.rawset(t, k, v)
  end,
  rawget = function(t, k)
    return real.rawget(unproxied(t), k)
  end,
  setmetatable = function(t, m)
    check_writable(t)
    return real.setmetatable(t, m)
  end,
  next = function(t, k)
    return real.next(unproxied(t), k)
  end,
  pairs = function(t)
    return real.next, unproxied(t), nil
  end,
  ipairs = function(t)
    return real.ipairs(unproxied(t))
  end,
  unpack = function(t, i, j)
    local r = unproxied(t)
    return real.unpack(r, i or 1, j or #r)
  end,
  -- Bytecode is never loaded (it could crash the interpreter).
  loadstring = function(s, name)
    if type(s) == 'string' and s:byte(1) == 27 then
      return nil, 'binary chunks are not allowed'
    end
    return real.loadstring(s, name)
  end,
  load = function(f, name)
    if type(f) ~= 'function' then
      return real.load(f, name)
    end
    local first = true
    return real.load(function()
      local piece = f()
      if first and type(piece) == 'string' and piece ~= '' then
        first = false
        if piece:byte(1) == 27 then
          error('binary chunks are not allowed', 0)
        end
      end
      return piece
    end, name)
  end,
}
for name, fn in real.next, overrides do
  _G[name] = fn
end
table.insert = function(t, ...)
  check_writable(t)
  return real.insert(t, ...)
end
table.remove = function(t, ...)
  check_writable(t)
  return real.remove(t, ...)
end
table.sort = function(t, ...)
  check_writable(t)
  return real.sort(t, ...)
end
table.concat = function(t, ...)
  return real.concat(unproxied(t), ...)
end

-- math.random and math.randomseed on Redis's generator (one per server, not per script).
-- Their argument errors name the script's line, as a C function's do (level 3: the
-- function, its C closure, then the script).
-- A numeric argument as a C function checks it (`luaL_checknumber`): the error names the
-- script's line (level 4: this, the function, its C closure, then the script).
local function arg_number(fname, i, v, given)
  local x = real.tonumber(v)
  if x == nil then
    local got = i > given and 'no value' or type(v)
    error("bad argument #" .. i .. " to '" .. fname .. "' (number expected, got " .. got .. ")", 4)
  end
  return x
end

math.random = c(function(...)
  local n = select('#', ...)
  local r = (raw.lrand48() % 0x7fffffff) / 0x7fffffff
  if n == 0 then
    return r
  end
  local a, b = ...
  if n == 1 then
    local u = real.floor(arg_number('random', 1, a, n))
    if u < 1 then error("bad argument #1 to 'random' (interval is empty)", 3) end
    return real.floor(r * u) + 1
  elseif n == 2 then
    local l = real.floor(arg_number('random', 1, a, n))
    local u = real.floor(arg_number('random', 2, b, n))
    if l > u then error("bad argument #2 to 'random' (interval is empty)", 3) end
    return real.floor(r * (u - l + 1)) + l
  end
  error('wrong number of arguments', 3)
end)
math.randomseed = c(function(...)
  local n = arg_number('randomseed', 1, (...), select('#', ...))
  raw.srand48(n)
end)

-- The bit library (LuaBitOp 1.0's functions, as Redis bundles it): 32-bit operations on
-- numbers, computed by `raw.bit`.
local bit = {}
local function bit_args(name, count, ...)
  local n = select('#', ...)
  local args = { ... }
  for i = 1, count < 0 and real.math_max(n, -count) or count do
    local v = args[i]
    local x = real.tonumber(v)
    if x == nil then
      local got = i > n and 'no value' or type(v)
      -- Level 4: bit_args, the function, its C closure, then the script's line.
      error("bad argument #" .. i .. " to '" .. name .. "' (number expected, got " .. got .. ")", 4)
    end
    args[i] = x
  end
  return args, count < 0 and real.math_max(n, -count) or count
end
for name, count in real.next, { tobit = 1, bnot = 1, bswap = 1, band = -1, bor = -1, bxor = -1,
  lshift = 2, rshift = 2, arshift = 2, rol = 2, ror = 2 } do
  bit[name] = c(function(...)
    local args, n = bit_args(name, count, ...)
    return raw.bit(name, real.unpack(args, 1, n))
  end)
end
bit.tohex = c(function(...)
  local x, digits = ...
  local args = bit_args('tohex', 1, x)
  local n = 8
  if select('#', ...) >= 2 and digits ~= nil then
    n = real.tonumber(digits)
    if n == nil then
      error("bad argument #2 to 'tohex' (number expected, got " .. type(digits) .. ")", 3)
    end
  end
  return raw.tohex(args[1], n)
end)
_G.bit = bit

-- The cjson library (Lua CJSON 2.1.0 as Redis bundles it): the settings live here, one set
-- per module table (`cjson.new()` makes another); `raw.cjson_encode`/`raw.cjson_decode`
-- do the work and return the error text, raised here at the script's line (level 3: the
-- function, its C closure, the script).
local function cjson_int(fname, i, v, min, max)
  local x = real.tonumber(v)
  if x == nil then
    error("bad argument #" .. i .. " to '" .. fname .. "' (number expected, got " .. type(v) .. ")", 4)
  end
  x = x >= 0 and real.floor(x) or -real.floor(-x)
  if x < min or x > max then
    -- Lua CJSON names argument 1 whichever was out of range.
    error("bad argument #1 to '" .. fname .. "' (expected integer between " .. min .. " and " .. max .. ")", 4)
  end
  return x
end
local function cjson_enum(fname, i, v, with_null)
  local t = type(v)
  if t == 'boolean' then return v and 1 or 0 end
  if t ~= 'string' and t ~= 'number' then
    error("bad argument #" .. i .. " to '" .. fname .. "' (string expected, got " .. t .. ")", 4)
  end
  local s = tostring(v)
  if s == 'off' then return 0 elseif s == 'on' then return 1 elseif with_null and s == 'null' then return 2 end
  error("bad argument #" .. i .. " to '" .. fname .. "' (invalid option '" .. s .. "')", 4)
end
local function cjson_enum_value(n)
  if n == 2 then return 'null' end
  return n == 1
end
local function cjson_arity(fname, most, ...)
  if select('#', ...) > most then
    error("bad argument #" .. (most + 1) .. " to '" .. fname .. "' (found too many arguments)", 4)
  end
end

local function new_cjson()
  local cfg = { convert = 0, ratio = 2, safe = 10, encode_depth = 1000, decode_depth = 1000,
    precision = 14, keep = 1, encode_invalid = 0, decode_invalid = 1 }
  local m = {}
  m.encode = c(function(...)
    if select('#', ...) ~= 1 then
      error("bad argument #1 to 'encode' (expected 1 argument)", 3)
    end
    local ok, r = raw.cjson_encode((...), cfg.precision, cfg.encode_depth, cfg.convert == 1,
      cfg.ratio, cfg.safe, cfg.encode_invalid)
    if not ok then error(r, 3) end
    return r
  end)
  m.decode = c(function(...)
    if select('#', ...) ~= 1 then
      error("bad argument #1 to 'decode' (expected 1 argument)", 3)
    end
    local text = ...
    local t = type(text)
    if t == 'number' then
      text = tostring(text)
    elseif t ~= 'string' then
      error("bad argument #1 to 'decode' (string expected, got " .. t .. ")", 3)
    end
    local ok, r = raw.cjson_decode(text, cfg.decode_depth, cfg.decode_invalid == 1)
    if not ok then error(r, 3) end
    return r
  end)
  local function int_setting(fname, key, min, max)
    m[fname] = c(function(...)
      cjson_arity(fname, 1, ...)
      local v = ...
      if v ~= nil then cfg[key] = cjson_int(fname, 1, v, min, max) end
      return cfg[key]
    end)
  end
  local function enum_setting(fname, key, with_null)
    m[fname] = c(function(...)
      cjson_arity(fname, 1, ...)
      local v = ...
      if v ~= nil then cfg[key] = cjson_enum(fname, 1, v, with_null) end
      return cjson_enum_value(cfg[key])
    end)
  end
  int_setting('encode_max_depth', 'encode_depth', 1, 2147483647)
  int_setting('decode_max_depth', 'decode_depth', 1, 2147483647)
  int_setting('encode_number_precision', 'precision', 1, 14)
  enum_setting('encode_keep_buffer', 'keep', false)
  enum_setting('encode_invalid_numbers', 'encode_invalid', true)
  enum_setting('decode_invalid_numbers', 'decode_invalid', false)
  m.encode_sparse_array = c(function(...)
    cjson_arity('encode_sparse_array', 3, ...)
    local convert, ratio, safe = ...
    -- Applied in order: an error in a later one keeps the earlier ones.
    if convert ~= nil then cfg.convert = cjson_enum('encode_sparse_array', 1, convert, false) end
    if ratio ~= nil then cfg.ratio = cjson_int('encode_sparse_array', 2, ratio, 0, 2147483647) end
    if safe ~= nil then cfg.safe = cjson_int('encode_sparse_array', 3, safe, 0, 2147483647) end
    return cfg.convert == 1, cfg.ratio, cfg.safe
  end)
  m.new = c(function() return new_cjson() end)
  m.null = raw.null
  m._NAME = 'cjson'
  m._VERSION = '2.1.0'
  return m
end
_G.cjson = new_cjson()

-- The cmsgpack library (lua-cmsgpack 0.4.0 as Redis bundles it): `raw.msgpack_pack` and
-- `raw.msgpack_unpack` do the work; argument checks and errors here, at the script's line.
local cmsgpack = {
  _NAME = 'cmsgpack', _VERSION = 'lua-cmsgpack 0.4.0',
  _COPYRIGHT = 'Copyright (C) 2012, Salvatore Sanfilippo',
  _DESCRIPTION = 'MessagePack C implementation for Lua',
}
-- luaL_checklstring (a number becomes its %.14g text) and luaL_checkinteger / optinteger,
-- raised at the script's line (level 4: this, the function, its C closure, the script).
local function mp_string(fname, i, v, given)
  local t = type(v)
  if t == 'number' then return tostring(v) end
  if t ~= 'string' then
    error("bad argument #" .. i .. " to '" .. fname .. "' (string expected, got " .. (i > given and 'no value' or t) .. ")", 4)
  end
  return v
end
local function mp_integer(fname, i, v, given, default)
  if v == nil and default ~= nil then return default end
  local x = real.tonumber(v)
  if x == nil then
    error("bad argument #" .. i .. " to '" .. fname .. "' (number expected, got " .. (i > given and 'no value' or type(v)) .. ")", 4)
  end
  return x >= 0 and real.floor(x) or -real.floor(-x)
end
local function mp_unpack(s, limit, offset)
  local ok, next_offset, values = raw.msgpack_unpack(s, limit, offset)
  if not ok then
    error(next_offset, values and 4 or 0)
  end
  if next_offset == nil then
    return real.unpack(values, 1, values.n)
  end
  return next_offset, real.unpack(values, 1, values.n)
end
cmsgpack.pack = c(function(...)
  if select('#', ...) == 0 then
    error("bad argument #0 to 'pack' (MessagePack pack needs input.)", 3)
  end
  return raw.msgpack_pack(...)
end)
cmsgpack.unpack = c(function(...)
  local s = mp_string('unpack', 1, (...), select('#', ...))
  return mp_unpack(s, 0, 0)
end)
cmsgpack.unpack_one = c(function(...)
  local n = select('#', ...)
  local s, offset = ...
  s = mp_string('unpack_one', 1, s, n)
  offset = mp_integer('unpack_one', 2, offset, n, 0)
  return mp_unpack(s, 1, offset)
end)
cmsgpack.unpack_limit = c(function(...)
  local n = select('#', ...)
  local s, limit, offset = ...
  limit = mp_integer('unpack_limit', 2, limit, n)
  s = mp_string('unpack_limit', 1, s, n)
  offset = mp_integer('unpack_limit', 3, offset, n, 0)
  return mp_unpack(s, limit, offset)
end)
_G.cmsgpack = cmsgpack

-- The struct library (struct 1.7 as Redis bundles it): `raw.struct_*` do the work and
-- return the error's text; the arguments are checked here (level 4: this, the function,
-- its C closure, the script).
local struct = {}
local function st_string(fname, i, v, given)
  local t = type(v)
  if t == 'number' then return tostring(v) end
  if t ~= 'string' then
    error("bad argument #" .. i .. " to '" .. fname .. "' (string expected, got " .. (i > given and 'no value' or t) .. ")", 4)
  end
  return v
end
struct.pack = c(function(...)
  local n = select('#', ...)
  local fmt = st_string('pack', 1, (...), n)
  local ok, r = raw.struct_pack(fmt, n - 1, select(2, ...))
  if not ok then error(r, 3) end
  return r
end)
struct.unpack = c(function(...)
  local n = select('#', ...)
  local fmt, data, init = ...
  fmt = st_string('unpack', 1, fmt, n)
  data = st_string('unpack', 2, data, n)
  if init == nil then
    init = 1
  else
    local x = real.tonumber(init)
    if x == nil then
      error("bad argument #3 to 'unpack' (number expected, got " .. type(init) .. ")", 3)
    end
    init = x >= 0 and real.floor(x) or -real.floor(-x)
  end
  local ok, r = raw.struct_unpack(fmt, data, init)
  if not ok then error(r, 3) end
  return real.unpack(r, 1, r.n)
end)
struct.size = c(function(...)
  local fmt = st_string('size', 1, (...), select('#', ...))
  local ok, r = raw.struct_size(fmt)
  if not ok then error(r, 3) end
  return r
end)
_G.struct = struct

-- The redis library.
local redis = {}

local function fail(text)
  error({ err = text })
end

-- A command's arguments as the server takes them: strings, numbers as "%.17g".
local function command_args(...)
  local n = select('#', ...)
  if n == 0 then
    return nil, 'ERR Please specify at least one argument for this redis lib call'
  end
  local args = { ... }
  for i = 1, n do
    local a = args[i]
    local t = type(a)
    if t == 'number' then
      args[i] = real.format('%.17g', a)
    elseif t ~= 'string' then
      return nil, 'ERR Lua redis lib command arguments must be strings or integers'
    end
  end
  return args, n
end

redis.call = c(function(...)
  local args, n = command_args(...)
  if not args then fail(n) end
  local ok, reply = raw.call(real.unpack(args, 1, n))
  if not ok then error(reply) end
  return reply
end)

redis.pcall = c(function(...)
  local args, n = command_args(...)
  if not args then return { err = n } end
  local _, reply = raw.call(real.unpack(args, 1, n))
  return reply
end)

-- An error text as Redis makes it: its first word is its code, or the code is ERR.
local function error_text(s)
  s = s:gsub('[\r\n]+$', '')
  if s:sub(1, 1) == '-' then s = s:sub(2) end
  if not s:find(' ', 1, true) then s = 'ERR ' .. s end
  return s
end

redis.error_reply = c(function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { err = error_text(s) }
end)

redis.status_reply = c(function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = s }
end)

redis.sha1hex = c(function(...)
  local s = ...
  if select('#', ...) ~= 1 then fail('ERR wrong number of arguments') end
  if type(s) == 'number' then s = tostring(s) end
  if type(s) ~= 'string' then s = '' end
  return raw.sha1hex(s)
end)

redis.log = c(function(...)
  local n = select('#', ...)
  if n < 2 then fail('ERR redis.log() requires two arguments or more.') end
  local level = real.tonumber((...))
  if level == nil then fail('ERR First argument must be a number (log level).') end
  if level < 0 or level > 3 then fail('ERR Invalid debug level.') end
  local parts = {}
  for i = 2, n do
    local v = select(i, ...)
    local t = type(v)
    if t == 'string' or t == 'number' then
      parts[#parts + 1] = tostring(v)
    end
  end
  raw.log(level, real.concat(parts, ' '))
end)

redis.setresp = c(function(...)
  if select('#', ...) ~= 1 then fail('ERR redis.setresp() requires one argument.') end
  local v = real.tonumber((...))
  if v ~= 2 and v ~= 3 then fail('ERR RESP version must be 2 or 3.') end
  raw.setresp(v)
end)

redis.set_repl = c(function(...)
  if select('#', ...) ~= 1 then fail('ERR redis.set_repl() requires two arguments.') end
  local v = real.tonumber((...)) or 0
  if v ~= real.floor(v) or v < 0 or v > 3 then
    fail('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
end)

redis.acl_check_cmd = c(function(...)
  local args, n = command_args(...)
  if not args then fail(n) end
  if not raw.command_exists(args[1]) then
    fail('ERR Invalid command passed to redis.acl_check_cmd()')
  end
  local _, allowed = raw.call('\0acl_check_cmd', real.unpack(args, 1, n))
  return allowed
end)

redis.replicate_commands = c(function() return true end)
redis.breakpoint = c(function() return false end)
redis.debug = c(function() end)

redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = raw.version
redis.REDIS_VERSION_NUM = raw.version_num

-- pcall as Redis replaces it: an error table's `err` text is returned instead of the table.
local function pack(...)
  return { n = select('#', ...), ... }
end
_G.pcall = function(f, ...)
  local r = pack(real.pcall(f, ...))
  if not r[1] and type(r[2]) == 'table' and not protected[r[2]] and type(r[2].err) == 'string' then
    return false, r[2].err
  end
  return real.unpack(r, 1, r.n)
end

-- What scripts do not get.
for _, name in real.next, { 'print', 'dofile', 'loadfile', 'require', 'module', 'package',
  'os', 'io', 'debug' } do
  _G[name] = nil
end

-- The storage behind the globals proxy: every global, library tables locked.
local storage = {}
for name, value in real.next, _G do
  if type(value) == 'table' and name ~= '_G' then
    storage[name] = lock(value)
  else
    storage[name] = value
  end
end
storage.redis = lock(redis)

-- Strings' metatable reads the locked string library and is locked itself.
local string_meta = real.getmetatable('')
string_meta.__index = storage.string
string_meta.__metatable = shown_meta(storage.string)

local globals = {}
local function global_of(_, name)
  local value = storage[name]
  if value == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end
  return value
end
real.setmetatable(globals, { __index = global_of, __newindex = refuse_write, __metatable = shown_meta(global_of) })
protected[globals] = storage
storage._G = globals

-- The environment of the base library's functions is the old globals table: shown as the
-- proxy. A thread's environment (level 0) is not changed.
local real_getfenv, real_setfenv, old_globals = getfenv, setfenv, _G
storage.getfenv = function(f)
  if type(f) == 'number' and f > 0 then f = f + 1 end
  local env = real_getfenv(f or 2)
  if env == old_globals then return globals end
  return env
end
storage.setfenv = function(f, env)
  if f == 0 then error(READONLY, 0) end
  if type(f) == 'number' and f > 0 then f = f + 1 end
  return real_setfenv(f, env)
end

-- The message handler: the error as Redis reports it, with where in the script it rose.
local function on_error(err)
  local source, line
  for level = 2, 200 do
    local info = real.getinfo(level, 'Sl')
    if not info then break end
    if info.source == '@user_script' or info.source == '@user_function' then
      source, line = info.source, info.currentline
      break
    end
  end
  if type(err) ~= 'table' or protected[err] then
    err = { err = 'ERR ' .. tostring(err) }
  end
  if source then
    real.rawset(err, 'source', source)
    real.rawset(err, 'line', line)
  end
  return err
end

local function run(script)
  return real.xpcall(script, on_error)
end

-- Function libraries (FUNCTION LOAD, Redis 7.0): a library's chunk runs once in an
-- environment whose `redis` offers only what Redis offers at load time; what it registers
-- is returned to the server. Its functions, called later by FCALL, see the globals as
-- scripts do (the environment reads them, `redis` included, once the load is over).
local registered = nil -- filled by register_function while a library loads
local FLAGS = { ['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true }

-- Raised from an __index function: level 3 names the code that read the global.
local function nonexistent(name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end

local function register(name, callback, flags, description)
  if not name:find('^[%w_]+$') then
    error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long', 0)
  end
  local lower = name:lower()
  for _, f in real.ipairs(registered) do
    if f.name:lower() == lower then
      error('Function already exists in the library', 0)
    end
  end
  local wanted = {}
  if flags ~= nil then
    for _, flag in real.ipairs(unproxied(flags)) do
      if type(flag) ~= 'string' or not FLAGS[flag:lower()] then
        error('unknown flag given', 0)
      end
      wanted[#wanted + 1] = flag:lower()
    end
  end
  registered[#registered + 1] = { name = name, callback = callback, flags = wanted,
    description = description }
end

-- redis.register_function{function_name = ..., callback = ..., flags = ..., description = ...}
local function register_named(args)
  local name, callback, flags, description
  for key, value in real.next, unproxied(args) do
    if type(key) ~= 'string' and type(key) ~= 'number' then
      error('named argument key given to redis.register_function is not a string', 0)
    end
    local k = tostring(key):lower()
    if k == 'function_name' then
      if type(value) ~= 'string' and type(value) ~= 'number' then
        error('function_name argument given to redis.register_function must be a string', 0)
      end
      name = tostring(value)
    elseif k == 'description' then
      -- A number is a string to Lua's C API (lua_isstring), as Redis reads it.
      if type(value) ~= 'string' and type(value) ~= 'number' then
        error('description argument given to redis.register_function must be a string', 0)
      end
      description = tostring(value)
    elseif k == 'callback' then
      if type(value) ~= 'function' then
        error('callback argument given to redis.register_function must be a function', 0)
      end
      callback = value
    elseif k == 'flags' then
      if type(value) ~= 'table' then
        error('flags argument to redis.register_function must be a table representing function flags', 0)
      end
      flags = value
    else
      error('unknown argument given to redis.register_function', 0)
    end
  end
  if name == nil then error('redis.register_function must get a function name argument', 0) end
  if callback == nil then error('redis.register_function must get a callback argument', 0) end
  return register(name, callback, flags, description)
end

local load_api = {
  register_function = function(...)
    local n = select('#', ...)
    local first, second = ...
    if n == 1 then
      if type(first) ~= 'table' then
        error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).', 0)
      end
      return register_named(first)
    end
    if n ~= 2 then
      error('wrong number of arguments to redis.register_function', 0)
    end
    if type(first) ~= 'string' and type(first) ~= 'number' then
      error('first argument to redis.register_function must be a string', 0)
    end
    if type(second) ~= 'function' then
      error('second argument to redis.register_function must be a function', 0)
    end
    return register(tostring(first), second, nil, nil)
  end,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
-- At load, `redis` is the only global and a missing field reads as a missing global.
local load_redis = {}
local function load_field(_, name)
  local value = load_api[name]
  if value == nil then nonexistent(name) end
  return value
end
real.setmetatable(load_redis, { __index = load_field, __newindex = refuse_write,
  __metatable = shown_meta(load_field) })
protected[load_redis] = load_api

local library_env = {}
local function library_global(_, name)
  if registered then
    if name == 'redis' then return load_redis end
    nonexistent(name)
  end
  local value = storage[name]
  -- Functions get the scripts' globals but not KEYS and ARGV (their arguments instead).
  if value == nil or name == 'KEYS' or name == 'ARGV' then nonexistent(name) end
  return value
end
real.setmetatable(library_env, { __index = library_global, __newindex = refuse_write,
  __metatable = shown_meta(library_global) })
protected[library_env] = storage

-- Runs a library's compiled chunk: true and what it registered, or false and the error.
local function load_library(chunk)
  real_setfenv(chunk, library_env)
  registered = {}
  local ok, err = real.xpcall(chunk, on_error)
  local got = registered
  registered = nil
  if not ok then
    return false, err
  end
  return true, got
end

-- A function called with its keys and arguments, as FCALL calls it.
local function bind(callback, keys, args)
  return function()
    return callback(keys, args)
  end
end

return globals, storage, run, load_library, bind
