//! Lua scripting checked reply for reply against a real redis-server 7.0: scripted scenarios
//! (the cases Redis's own tests and documentation name: conversions, errors and where they
//! rose, the sandbox, `redis.*`, `SCRIPT`, shebangs, `_RO`, RESP3) and seeded random scripts
//! (random commands through `redis.call`/`redis.pcall` on a small keyspace, random values
//! returned). Each run prints its seed; `TAMER_SCRIPT_SEED` replays one.

mod common;

use std::net::TcpStream;

use common::{call, have, temp_dir, Redis, Served};

/// The scripted scenarios: one command per entry, run in order on one connection.
const SCENARIOS: &[&[&str]] = &[
    &["FLUSHALL"],
    &["EVAL", "return 'hello'", "0"],
    &["EVAL", "return 100.5", "0"],
    &["EVAL", "return -1.5", "0"],
    &["EVAL", "return true", "0"],
    &["EVAL", "return false", "0"],
    &["EVAL", "return nil", "0"],
    &["EVAL", "return {ok='fine'}", "0"],
    &["EVAL", "return {err='this is an error'}", "0"],
    &["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"],
    &["EVAL", "return {1,2,3.3333,somekey='somevalue','foo',nil,'bar'}", "0"],
    &["EVAL", "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", "2", "a", "b", "c", "d"],
    &["EVAL", "return {1,{ok='x'},{err='y'},false}", "0"],
    &["EVAL", "return {}", "0"],
    &["EVAL", "return {[2]='b'}", "0"],
    &["EVAL", "return {err=42}", "0"],
    &["EVAL", "return _G", "0"],
    &["SET", "mykey", "myval"],
    &["EVAL", "return redis.call('get',KEYS[1])", "1", "mykey"],
    &["EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
    &["EVALSHA", "FD758D1589D044DD850A6F05D52F2EEFD27F033F", "1", "mykey"],
    &["EVALSHA_RO", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey"],
    &["EVALSHA", "NotValidShaSUM", "0"],
    &["EVALSHA", "NotValidShaSUM", "notanumber"],
    &["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"],
    &["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "x"],
    &["SET", "x", "0"],
    &["EVAL", "local foo = redis.pcall('incr',KEYS[1]) return {type(foo),foo}", "1", "x"],
    &["EVAL", "local foo = redis.pcall('get',KEYS[1]) return {type(foo),foo}", "1", "mykey"],
    &["RPUSH", "mylist", "a", "b", "c"],
    &["EVAL", "local foo = redis.pcall('lrange',KEYS[1],0,-1) return {type(foo),foo[1],foo[2],foo[3],#foo}", "1", "mylist"],
    &["EVAL", "local foo = redis.pcall('set',KEYS[1],'myval') return {type(foo),foo['ok']}", "1", "mykey"],
    &["EVAL", "local foo = redis.pcall('incr',KEYS[1]) return {type(foo),foo['err']}", "1", "mykey"],
    &["DEL", "mykey"],
    &["EVAL", "local foo = redis.pcall('get',KEYS[1]) return {type(foo),foo == false}", "1", "mykey"],
    &["EVAL", "return redis.call()", "0"],
    &["EVAL", "return redis.pcall()", "0"],
    &["EVAL", "redis.call('nosuchcommand')", "0"],
    &["EVAL", "redis.call('get','a','b','c')", "0"],
    &["EVAL", "redis.call('incr')", "0"],
    &["SET", "foo", "bar"],
    &["EVAL", "redis.call('lpush',KEYS[1],'val')", "1", "foo"],
    &["EVAL", "return redis.pcall('lpush',KEYS[1],'val')", "1", "foo"],
    &["EVAL", "return redis.pcall('blpop','x',0)", "1", "x"],
    &["EVAL", "return redis.pcall('multi')", "0"],
    &["EVAL", "return redis.pcall('eval','return 1','0')", "0"],
    &["EVAL", "return redis.call('ping', {})", "0"],
    &["EVAL", "return redis.call('ping','asdf')", "0"],
    &["EVAL", "return redis.call('ping', true)", "0"],
    &["EVAL", "return 'hello'", "-12"],
    &["EVAL", "return 1", "2", "a"],
    &["EVAL", "return 1", "abc"],
    &["EVAL", "return 1", "1"],
    &["EVAL", "return a", "0"],
    &["EVAL", "a=10", "0"],
    &["EVAL", "function f() end", "0"],
    &["EVAL", "redis.call = function() return 1 end", "0"],
    &["EVAL", "_G = {}", "0"],
    &["EVAL", "setmetatable(_G, {})", "0"],
    &["EVAL", "rawset(_G, 'x', 1)", "0"],
    &["EVAL", "string.upper = nil", "0"],
    &["EVAL", "table.insert(redis, 1)", "0"],
    &["EVAL", "getmetatable('').__index = {}", "0"],
    &["EVAL", "print('x')", "0"],
    &["EVAL", "loadfile('f')", "0"],
    &["EVAL", "dofile('f')", "0"],
    &["EVAL", "return os", "0"],
    &["EVAL", "return rawget(_G, 'undefined')", "0"],
    &["EVAL", "local t = {} t.x = 1 return t.x", "0"],
    &["EVAL", "return ('x'):upper()", "0"],
    &["EVAL", "return redis.sha1hex('')", "0"],
    &["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"],
    &["EVAL", "return redis.sha1hex()", "0"],
    &["EVAL", "return redis.sha1hex(12)", "0"],
    &["EVAL", "return 1+1", "0"],
    &["SCRIPT", "EXISTS", "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9", "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bda", "short"],
    &["SCRIPT", "LOAD", "return 'loaded'"],
    &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
    &["SCRIPT", "LOAD", "return 'loaded'"],
    &["SCRIPT", "LOAD", "return ="],
    &["SCRIPT", "FLUSH"],
    &["EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"],
    &["SCRIPT", "FLUSH", "ASYNC"],
    &["SCRIPT", "FLUSH", "sync"],
    &["SCRIPT", "FLUSH", "x"],
    &["SCRIPT", "FLUSH", "sync", "async"],
    &["SCRIPT", "KILL"],
    &["SCRIPT", "NOSUCH"],
    &["SCRIPT"],
    &["SCRIPT", "EXISTS"],
    &["EVAL", "return = 1", "0"],
    &["EVAL", "x = ", "0"],
    &["SET", "foo", "bar"],
    &["EVAL_RO", "return redis.call('get', KEYS[1]);", "1", "foo"],
    &["EVAL_RO", "redis.call('del', KEYS[1]);", "1", "foo"],
    &["EVAL_RO", "local t = redis.pcall('set','x','y') return t['err']", "1", "x"],
    &["EVAL", "#!lua\nreturn 1", "0"],
    &["EVAL", "#!not-lua\nreturn 1", "0"],
    &["EVAL", "#!lua badger=data\nreturn 1", "0"],
    &["EVAL", "#!lua flags=allow-oom,what?\nreturn 1", "0"],
    &["EVAL", "#!lua", "0"],
    &["EVAL", "#!lua flags=no-writes\nredis.call('set','x',1) return 1", "1", "x"],
    &["EVAL", "#!lua flags=no-writes,allow-oom\nreturn redis.call('get','foo')", "1", "foo"],
    &["EVAL_RO", "#!lua\nreturn 1", "0"],
    &["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"],
    &["EVAL_RO", "#!lua flags=\nreturn 1", "0"],
    &["EVAL", "return redis.error_reply('MY_ERR_CODE custom msg')", "0"],
    &["EVAL", "return redis.error_reply('My Error')", "0"],
    &["EVAL", "return redis.error_reply('OOPS')", "0"],
    &["EVAL", "return redis.error_reply('-ERR x')", "0"],
    &["EVAL", "return redis.error_reply(42)", "0"],
    &["EVAL", "return redis.status_reply('MY_OK_CODE custom msg')", "0"],
    &["EVAL", "return redis.status_reply()", "0"],
    &["EVAL", "local status, res = pcall(function() return 1 end); return 'status: ' .. tostring(status) .. ' result: ' .. res", "0"],
    &["EVAL", "local status, res = pcall(function() return foo end); return 'status: ' .. tostring(status) .. ' result: ' .. res", "0"],
    &["EVAL", "return redis.call('select',99)", "0"],
    &["EVAL", "local t = redis.pcall('select',99) return t['err']", "0"],
    &["EVAL", "redis.call('select', 1) redis.call('set', 'in1', 'v') return redis.call('get', 'in1')", "0"],
    &["GET", "in1"],
    &["SELECT", "1"],
    &["GET", "in1"],
    &["SELECT", "0"],
    &["EVAL", "local value = 9007199254740991 redis.call('set','foo',value) return redis.call('get','foo')", "1", "foo"],
    &["EVAL", "redis.call('set','k',0.1) return redis.call('get','k')", "1", "k"],
    &["EVAL", "redis.call('set','k',1/3) return redis.call('get','k')", "1", "k"],
    &["EVAL", "redis.call('set','k',1e17) return redis.call('get','k')", "1", "k"],
    &["EVAL", "local x={} for i=1,100 do table.insert(x,i) end redis.call('del','mylist') redis.call('rpush','mylist',unpack(x)) return redis.call('lrange','mylist',0,-1)", "1", "mylist"],
    &["EVAL", "return redis.replicate_commands()", "0"],
    &["EVAL", "redis.set_repl(12345)", "0"],
    &["EVAL", "return redis.set_repl(redis.REPL_ALL)", "0"],
    &["EVAL", "redis.log(redis.LOG_WARNING)", "0"],
    &["EVAL", "redis.log('a','b')", "0"],
    &["EVAL", "redis.log(9,'b')", "0"],
    &["EVAL", "return redis.log(redis.LOG_DEBUG, 'quiet')", "0"],
    &["EVAL", "redis.setresp(4)", "0"],
    &["EVAL", "redis.setresp()", "0"],
    &["EVAL", "return redis.breakpoint()", "0"],
    &["EVAL", "return redis.LOG_WARNING + redis.REPL_ALL", "0"],
    &["EVAL", "math.randomseed(ARGV[1]); return tostring(math.random())", "0", "10"],
    &["EVAL", "math.randomseed(ARGV[1]); return tostring(math.random())", "0", "10"],
    &["EVAL", "math.randomseed(ARGV[1]); return {math.random(10), math.random(5, 9)}", "0", "20"],
    &["EVAL", "return loadstring(string.dump(function() return 1 end))()", "0"],
    &["EVAL", "return loadstring('return 7')()", "0"],
    &["EVAL", "local a = {}; setmetatable(a,{__index=function() foo() end}) return a", "0"],
    &["EVAL", "return 'hello' --trailing comment", "0"],
    &["EVAL", "error('x')", "0"],
    &["EVAL", "error('x', 0)", "0"],
    &["EVAL", "error('WRONGTYPE foo')", "0"],
    &["EVAL", "error({err='x'})", "0"],
    &["EVAL", "error({err='MYCODE boom'})", "0"],
    &["EVAL", "error(42)", "0"],
    &["EVAL", "return nil + 1", "0"],
    &["EVAL", "local x = 1\nerror('boom')", "0"],
    &["EVAL", "local ok, e = pcall(redis.call, 'x'); error(e)", "0"],
    &["EVAL", "local ok, e = pcall(redis.call, 'x'); return {tostring(ok), e}", "0"],
    &["EVAL", "local ok, e = pcall(error, {err='t'}); return e", "0"],
    &["EVAL", "return select('#', pcall(function() return 1, 2 end))", "0"],
    &["SET", "foo", "5"],
    &["EVAL", "local current = redis.call('get',KEYS[1]) if not current then return nil end if current > ARGV[1] then return redis.call('decr',KEYS[1]) else return redis.call('get',KEYS[1]) end", "1", "foo", "2"],
    &["MULTI"],
    &["EVAL", "return redis.call('incr', KEYS[1])", "1", "counter"],
    &["EVAL", "return redis.call('incr', KEYS[1])", "1", "counter"],
    &["EXEC"],
    &["EVAL", "return redis.call('hset', 'h', 'f', 'v')", "1", "h"],
    &["EVAL", "return redis.call('hgetall', 'h')", "1", "h"],
    &["EVAL", "return redis.call('zadd', 'z', 1, 'a', 2.5, 'b')", "1", "z"],
    &["EVAL", "return redis.call('zrange', 'z', 0, -1, 'withscores')", "1", "z"],
    &["EVAL", "return redis.call('zscore', 'z', 'b')", "1", "z"],
    &["EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'b')", "1", "z"],
    &["EVAL", "redis.setresp(3); return redis.call('hgetall', 'h')", "1", "h"],
    &["EVAL", "redis.setresp(3); return redis.call('get','nokey') == nil", "1", "nokey"],
    &["EVAL", "return redis.call('get','nokey') == false", "1", "nokey"],
    &["EVAL", "return {double=3.141}", "0"],
    &["EVAL", "return {double=3.14}", "0"],
    &["EVAL", "return {big_number='1234567999999999999999999999999999999'}", "0"],
    &["EVAL", "return {verbatim_string={format='txt', string='hi'}}", "0"],
    &["EVAL", "redis.setresp(3) return false", "0"],
    &["EVAL", "redis.setresp(3) return true", "0"],
    &["EVAL", "return {map={a=1}}", "0"],
    &["EVAL", "return {set={a=true}}", "0"],
    &["EVAL", "return bit.band(0xff, 0x0f)", "0"],
    &["EVAL", "return bit.bor(1,2,4,8,16,32,64,128)==255", "0"],
    &["EVAL", "return bit.bxor(5, 3, 1)", "0"],
    &["EVAL", "return bit.bnot(0)", "0"],
    &["EVAL", "return bit.lshift(1, 31)", "0"],
    &["EVAL", "return bit.rshift(-1, 28)", "0"],
    &["EVAL", "return bit.arshift(-256, 4)", "0"],
    &["EVAL", "return bit.rol(0x12345678, 12)", "0"],
    &["EVAL", "return bit.ror(0x12345678, 12)", "0"],
    &["EVAL", "return bit.bswap(0x12345678)", "0"],
    &["EVAL", "return bit.tobit(0xffffffff)", "0"],
    &["EVAL", "return bit.tobit(2^32 + 5)", "0"],
    &["EVAL", "return {bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-1.5)}", "0"],
    &["EVAL", "return bit.tohex(255)", "0"],
    &["EVAL", "return bit.tohex(-1, -4)", "0"],
    &["EVAL", "return bit.tohex(0x1234, 2)", "0"],
    &["EVAL", "return bit.tohex(0x1234, 12)", "0"],
    &["EVAL", "return bit.band('3', 1)", "0"],
    &["EVAL", "return bit.band()", "0"],
    &["EVAL", "return bit.band('x')", "0"],
    &["EVAL", "return bit.lshift(1)", "0"],
    &["EVAL", "return bit.bor(1, nil)", "0"],
    &["EVAL", "bit.lshift = nil", "0"],
    &["EVAL", "return bit.lshift(1, 33)", "0"],
    &["EVAL", "return bit.tohex(1, 0)", "0"],
    &["EVAL", "return math.random(0)", "0"],
    &["EVAL", "return math.random(5, 1)", "0"],
    &["EVAL", "return math.random('x')", "0"],
    &["EVAL", "math.randomseed()", "0"],
    &["HELLO", "3"],
    &["EVAL", "return false", "0"],
    &["EVAL", "return nil", "0"],
    &["EVAL", "redis.setresp(3) return false", "0"],
    &["EVAL", "redis.setresp(3); return redis.call('hgetall', 'h')", "1", "h"],
    &["EVAL", "redis.setresp(2); return redis.call('hgetall', 'h')", "1", "h"],
    &["EVAL", "redis.setresp(3); return redis.call('zscore', 'z', 'b')", "1", "z"],
    &["EVAL", "redis.setresp(3); return redis.pcall('get', 'nokey')", "1", "nokey"],
    &["EVAL", "return {double=3.141}", "0"],
    &["EVAL", "return {big_number='123'}", "0"],
    &["EVAL", "return {verbatim_string={format='txt', string='hi'}}", "0"],
    &["EVAL", "return {map={a=1}}", "0"],
    &["EVAL", "return {set={a=true}}", "0"],
    &["HELLO", "2"],
    // cjson (Lua CJSON 2.1.0): encoding, decoding, settings, errors and where they rose.
    &["EVAL", "return cjson.encode({1,2,3})", "0"],
    &["EVAL", "return cjson.encode({a=1})", "0"],
    &["EVAL", "return cjson.encode({x='y', a=1, b=2, c=3, d=4})", "0"],
    &["EVAL", "return cjson.encode({})", "0"],
    &["EVAL", "return cjson.encode({{}})", "0"],
    &["EVAL", "return cjson.encode(nil)", "0"],
    &["EVAL", "return cjson.encode()", "0"],
    &["EVAL", "return cjson.encode(1, 2)", "0"],
    &["EVAL", "return cjson.encode({[1]=1,[2]=2,[4]=4})", "0"],
    &["EVAL", "return cjson.encode({[10]=1})", "0"],
    &["EVAL", "return cjson.encode({[11]=1})", "0"],
    &["EVAL", "return cjson.encode({[12]=1,1,2,3,4,5})", "0"],
    &["EVAL", "return cjson.encode({[1]=1, a=2})", "0"],
    &["EVAL", "return cjson.encode({'a','b',x=cjson.null})", "0"],
    &["EVAL", "return cjson.encode({[0]=1, [-1]=2, [1.5]=3, [1e20]=4})", "0"],
    &["EVAL", "return cjson.encode({[true]=1})", "0"],
    &["EVAL", "return cjson.encode(function() end)", "0"],
    &["EVAL", "return cjson.encode(0/0)", "0"],
    &["EVAL", "return cjson.encode({0.1, 1/3, 100, 1e14, 999999999999999, 2^53, 1e-5, -1234.5, 3.14159265358979, -1.5e300, 5e-324})", "0"],
    &["EVAL", "return cjson.encode('a\\0b\\1\\11\\127/\\\\\"\\200')", "0"],
    &["EVAL", "return cjson.encode(redis.call('ping'))", "0"],
    &["EVAL", "local t = {} t[1] = t return cjson.encode(t)", "0"],
    &["EVAL", "local ok, e = pcall(cjson.encode, function() end) return e", "0"],
    &["EVAL", "local ok, e = pcall(function() return cjson.encode(function() end) end) return e", "0"],
    &["EVAL", "local c = cjson.new() c.encode_number_precision(3) return {c.encode(math.pi), cjson.encode(math.pi)}", "0"],
    &["EVAL", "local c = cjson.new() c.encode_sparse_array(true) return c.encode({[20]=1})", "0"],
    &["EVAL", "local c = cjson.new() c.encode_sparse_array(false, 0) return c.encode({[13]=1})", "0"],
    &["EVAL", "local c = cjson.new() c.encode_invalid_numbers(true) return c.encode({0/0, 1/0, -1/0})", "0"],
    &["EVAL", "local c = cjson.new() c.encode_invalid_numbers('null') return c.encode({1/0, [1/0]=1})", "0"],
    &["EVAL", "local c = cjson.new() c.encode_max_depth(2) return c.encode({{{1}}})", "0"],
    &["EVAL", "return {cjson.encode_sparse_array()}", "0"],
    &["EVAL", "return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), cjson.encode_keep_buffer(), cjson.decode_invalid_numbers()}", "0"],
    &["EVAL", "return cjson.encode_max_depth(0)", "0"],
    &["EVAL", "return cjson.encode_max_depth(1, 2)", "0"],
    &["EVAL", "return cjson.encode_number_precision(15)", "0"],
    &["EVAL", "return cjson.new().encode_sparse_array(false, 2, -1)", "0"],
    &["EVAL", "return cjson.new().encode_sparse_array('yes')", "0"],
    &["EVAL", "return cjson.new().encode_keep_buffer({})", "0"],
    &["EVAL", "return cjson.new().encode_invalid_numbers('bad')", "0"],
    &["EVAL", "return cjson.new().decode_invalid_numbers('null')", "0"],
    &["EVAL", "return cjson.new().encode_max_depth('7')", "0"],
    &["EVAL", "return {cjson._NAME, cjson._VERSION, type(cjson.null), tostring(cjson.version)}", "0"],
    &["EVAL", "cjson.encode = nil", "0"],
    &["EVAL", "return cjson.decode('[1,2,\"x\"]')", "0"],
    &["EVAL", "return cjson.decode('null')", "0"],
    &["EVAL", "return type(cjson.decode('null'))", "0"],
    &["EVAL", "return cjson.decode('[1,null,3]')", "0"],
    &["EVAL", "return cjson.decode('{\"ok\":\"fine\"}')", "0"],
    &["EVAL", "return cjson.decode('{\"err\":\"bad thing\"}')", "0"],
    &["EVAL", "return cjson.decode('[1.9,-1.9,\"x\",true,false,[1,[2]]]')", "0"],
    &["EVAL", "return cjson.decode(123)", "0"],
    &["EVAL", "return cjson.decode({})", "0"],
    &["EVAL", "return cjson.decode()", "0"],
    &["EVAL", "return cjson.encode(cjson.decode(ARGV[1]))", "0", "{\"a\":[1,2,{\"b\":null}]}"],
    &["EVAL", "return cjson.encode(cjson.decode(ARGV[1]))", "0", "[1.5,2e10,\"\\u00e9/\",\"\\uD83D\\uDE00\",-0]"],
    &["EVAL", "return cjson.encode(cjson.decode(ARGV[1]))", "0", "[+1, 007, 0x1F, 1e400, -1e400, 1.]"],
    &["EVAL", "return #cjson.decode('[null,null]')", "0"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "12\u{0}garbage"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1\u{0}garbage"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", ""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "  "],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "["],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[1,2"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[1,]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[,1]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[1 2]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[1:2]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[1}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{\"a\":1"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{\"a\" 1}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{\"a\":}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{1:2}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{\"a\":1,}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{,}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{\"a\":1 \"b\"}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "{\"a\":1]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "}"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", ":"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", ","],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1 {"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1 ["],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1 }"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1 \"x\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1 true"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1 null"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[1]x"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "nulll"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "truex"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "falsey"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "nul"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "True"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "i"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "n"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1e"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1e+"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "1.5.5"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "0x"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "infinit"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", ".5"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "2 3"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "-"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "--1"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"abc"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\x\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "[\"ab\\q\"]"],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\uD83D\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\uD83D\\u0041\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\uDE00\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\u12\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\u12G4\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\u0041\\u00e9\\u20AC\""],
    &["EVAL", "return cjson.decode(ARGV[1])", "0", "\"\\uDBFF\\uDFFF\""],
    &["EVAL", "return cjson.new().decode_invalid_numbers(false) and 1 or cjson.decode(ARGV[1])", "0", "1"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "+1"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "inf"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "nan"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "007"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "0x1F"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "-0x10"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "-inf"],
    &["EVAL", "local c = cjson.new() c.decode_invalid_numbers(false) return c.encode(c.decode(ARGV[1]))", "0", "1e400"],
    &["EVAL", "local c = cjson.new() c.decode_max_depth(2) return c.decode(ARGV[1])", "0", "  [[[1]]]"],
    &["EVAL", "return cjson.decode(string.rep('[', 1001))", "0"],
    &["EVAL", "return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))", "0"],
    // struct (struct 1.7, Redis's): pack's encodings and alignment, unpack, size, errors.
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b',255))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b',256))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('B',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('B',300))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b',1.9))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b',-1.9))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b','12'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('h',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>h',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('H',-2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>i2',70000))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('l',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('L',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('T',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i3',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i4',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i8',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i16',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>i16',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i32',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('i0 b',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('I7',2^53))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>I8',2^63))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>i8',-2^63))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>I8',-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>I4',2^32+5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>i4',2^31))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('f',1.5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>f',1.5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>f',0.1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>f',1e40))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('d',1.5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>d',1.5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c','abc'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c3','abc'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c2','abc'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c0','abc'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c0',''))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c0 b','xy',2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('c',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('s','abc'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('s','a\\0b'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('s',12))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('x'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('xx'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('x',5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!4 b i',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!b i',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!2 b i',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!8 b d',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!8 b h',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!4 b l',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!16 b i8',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!4 b f',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!4 b c3 i',1,'abc',2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!4 b s i',1,'ab',2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('!4 b x i',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('b!4',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('! b',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack(' b b ',1,2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('<>b',1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>H<H',258,258))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(struct.pack('>!4 b i3',1,2))", "0"],
    &["EVAL", "return struct.pack('c4','abc')", "0"],
    &["EVAL", "return struct.pack('c','')", "0"],
    &["EVAL", "return struct.pack('d','x')", "0"],
    &["EVAL", "return struct.pack('b')", "0"],
    &["EVAL", "return struct.pack('b',{})", "0"],
    &["EVAL", "return struct.pack('s',{})", "0"],
    &["EVAL", "return struct.pack('z',1)", "0"],
    &["EVAL", "return struct.pack('b2',1)", "0"],
    &["EVAL", "return struct.pack('x3')", "0"],
    &["EVAL", "return struct.pack('i40',1)", "0"],
    &["EVAL", "return struct.pack('!3 b',1)", "0"],
    &["EVAL", "return struct.pack('!0 b',1)", "0"],
    &["EVAL", "return struct.pack('i99999999999',1)", "0"],
    &["EVAL", "return struct.pack('=b',1)", "0"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>h', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('<h', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('h', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('i', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>I', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('i3', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('bb', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('x b', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('c3', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('c', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b c0', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('!4 b i', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('!4 b i', unhex(ARGV[1]), 2)}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]), 16)}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]), 17)}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]), 0)}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]), 1.9)}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]), '3')}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b', unhex(ARGV[1]), 'x')}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('i17', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('c17', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('s', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('c0', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('z', unhex(ARGV[1]))}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b b b', unhex(ARGV[1]))}", "0", "ff807f"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('B B B', unhex(ARGV[1]))}", "0", "ff807f"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>h H', unhex(ARGV[1]))}", "0", "fffefffe"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>i3', unhex(ARGV[1]))}", "0", "fffffe"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>i8', unhex(ARGV[1]))}", "0", "ffffffffffffffff"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>I4', unhex(ARGV[1]))}", "0", "ffffffff"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>i0', unhex(ARGV[1]))}", "0", ""],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>f', unhex(ARGV[1]))}", "0", "3fc00000"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('>d', unhex(ARGV[1]))}", "0", "fff0000000000000"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b c0', unhex(ARGV[1]))}", "0", "0361626364"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('B c0 b', unhex(ARGV[1]))}", "0", "02616207"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('f c0', unhex(ARGV[1]))}", "0", "0000004061626364"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b b c0', unhex(ARGV[1]))}", "0", "02016162"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('s c0', unhex(ARGV[1]))}", "0", "610062"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('b c0', unhex(ARGV[1]))}", "0", "05616263"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('s s', unhex(ARGV[1]))}", "0", "6162006300"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('s', unhex(ARGV[1]))}", "0", "00"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack('', unhex(ARGV[1]), 100)}", "0", "0102030405060708090a0b0c0d0e0f10"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end return {struct.unpack(''<i2'', unhex(ARGV[1]))}", "0", "0102"],
    &["EVAL", "return struct.size('b')", "0"],
    &["EVAL", "return struct.size('B')", "0"],
    &["EVAL", "return struct.size('h')", "0"],
    &["EVAL", "return struct.size('l')", "0"],
    &["EVAL", "return struct.size('L')", "0"],
    &["EVAL", "return struct.size('T')", "0"],
    &["EVAL", "return struct.size('d')", "0"],
    &["EVAL", "return struct.size('i')", "0"],
    &["EVAL", "return struct.size('I')", "0"],
    &["EVAL", "return struct.size('f')", "0"],
    &["EVAL", "return struct.size('i3')", "0"],
    &["EVAL", "return struct.size('x')", "0"],
    &["EVAL", "return struct.size('c')", "0"],
    &["EVAL", "return struct.size('c5')", "0"],
    &["EVAL", "return struct.size('')", "0"],
    &["EVAL", "return struct.size(' ')", "0"],
    &["EVAL", "return struct.size('>b h')", "0"],
    &["EVAL", "return struct.size('b d')", "0"],
    &["EVAL", "return struct.size('!b i')", "0"],
    &["EVAL", "return struct.size('!b d')", "0"],
    &["EVAL", "return struct.size('!b T')", "0"],
    &["EVAL", "return struct.size('!b L')", "0"],
    &["EVAL", "return struct.size('!4 b d')", "0"],
    &["EVAL", "return struct.size('!2 b d')", "0"],
    &["EVAL", "return struct.size('!2 b L')", "0"],
    &["EVAL", "return struct.size('!8 b i3')", "0"],
    &["EVAL", "return struct.size('b!4 i')", "0"],
    &["EVAL", "return struct.size('!4 b i !1 b i')", "0"],
    &["EVAL", "return struct.size('z')", "0"],
    &["EVAL", "return struct.size('b2')", "0"],
    &["EVAL", "return struct.size('x3')", "0"],
    &["EVAL", "return struct.size('s')", "0"],
    &["EVAL", "return struct.size('c0')", "0"],
    &["EVAL", "return struct.size('i40')", "0"],
    &["EVAL", "return struct.size('!3')", "0"],
    &["EVAL", "return struct.size('=b')", "0"],
    &["EVAL", "return struct.size()", "0"],
    &["EVAL", "return struct.unpack('b')", "0"],
    &["EVAL", "return struct.pack()", "0"],
    &["EVAL", "struct.x = 1", "0"],
    &["EVAL", "return struct.unpack('>I2', struct.pack('>I2', 513))", "0"],
    // cmsgpack (lua-cmsgpack 0.4.0): every encoding choice, unpack's forms, errors.
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(0))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(127))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(128))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(255))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(256))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(65535))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(65536))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(2^32-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(2^32))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(2^53))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(2^63-1024))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-32))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-33))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-128))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-129))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-32768))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-32769))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-2^31))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-2^31-1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-2^63))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(2^63))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(2^64))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-2^64))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(0.5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(1.5))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(0.1))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(1/0))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-1/0))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(3.4e38))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(1e-45))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(1e19))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(-0))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(''))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(string.rep('x', 31)))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(string.rep('x', 32)))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(string.rep('x', 256)))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(string.rep('x', 65536)))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(true))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(false))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(nil))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({1,2,3}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({a=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({true,false}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({1,2,nil,4}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[1]=1,[3]=3}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[2]=2}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[0]=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[-1]=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[1.5]=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({1,2,a=3}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[{}]=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[true]=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({f=function() end}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({1,function() end,3}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack({[2^31]=1}))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(cjson.null))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(1, 2, 3))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack('a', 'b'))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack(1, nil, 2))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack((function() local t = {} for i = 1, 16 do t[i] = i end return t end)()))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack((function() local t = {} t[1] = t return t end)()))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack((function() local t = {} t.a = t return t end)()))", "0"],
    &["EVAL", "local function hex(s) return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end)) end return hex(cmsgpack.pack((function() local t = {} for i = 1, 20 do t = {t} end return t end)()))", "0"],
    &["EVAL", "return cmsgpack.pack()", "0"],
    &["EVAL", "return cmsgpack.unpack(cmsgpack.pack({1,2,3}))", "0"],
    &["EVAL", "return {cmsgpack.unpack(cmsgpack.pack({a=1,b={1,2}}, 'x', 3.5))}", "0"],
    &["EVAL", "return {cmsgpack.unpack(cmsgpack.pack(1, 2, 'a'))}", "0"],
    &["EVAL", "return cjson.encode(cmsgpack.unpack(cmsgpack.pack({1.5, -7, 'x', true})))", "0"],
    &["EVAL", "return select('#', cmsgpack.unpack(''))", "0"],
    &["EVAL", "return select('#', cmsgpack.unpack('\\192\\192'))", "0"],
    &["EVAL", "return cmsgpack.unpack({})", "0"],
    &["EVAL", "return cmsgpack.unpack()", "0"],
    &["EVAL", "return {cmsgpack.unpack(12)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3')}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', 1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', 1.9)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', '1')}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', 2)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', 3)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', 4)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', -1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\1\\2\\3', 'x')}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one()}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', 0)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', 0, 1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', 2)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', 10)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', 2, 1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', -1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3', 1, 5)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\2\\3')}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit()}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('', 1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\193', 1)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_limit('\\1\\193', 2)}", "0"],
    &["EVAL", "return {cmsgpack.unpack_one('\\192\\1', 0)}", "0"],
    &["EVAL", "return {cmsgpack._NAME, cmsgpack._VERSION, cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}", "0"],
    &["EVAL", "cmsgpack.x = 1", "0"],
    &["EVAL", "local ok, e = pcall(cmsgpack.unpack, '\\146') return e", "0"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "cc"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "cd01"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "ce010203"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "cf00"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d0"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d100"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d2000000"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d300"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "ca0000"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "cb00"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "a36162"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d9"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d90561"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "da00"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "db0000000561"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "92"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "9201"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "81"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "ddffffffff01"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "c1"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "c4"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "c7"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d4"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "0201c1"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "9301c003"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "81c001"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "82a16101a16202"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "cfffffffffffffffff"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "cf7fffffffffffffff"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d38000000000000000"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "d30020000000000001"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "ca3dcccccd"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "dc000101"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "de0001a1610a"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "a0"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "7f"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "e0"],
    &["EVAL", "local function unhex(h) return (string.gsub(h, '..', function(x) return string.char(tonumber(x, 16)) end)) end local t = {cmsgpack.unpack(unhex(ARGV[1]))} return cjson.encode(t)", "0", "ff"],
];

fn run_all(conn: &mut TcpStream, commands: &[Vec<String>]) -> Vec<String> {
    commands.iter().map(|c| call(conn, c)).collect()
}

fn compare(commands: &[Vec<String>], want: &[String], got: &[String], what: &str) {
    let mut misses = Vec::new();
    for ((command, w), g) in commands.iter().zip(want).zip(got) {
        // HELLO names the server and the connection's id: tamer's differ by design.
        if command[0] == "HELLO" {
            assert_eq!(w.as_bytes()[0], g.as_bytes()[0], "{command:?}");
            continue;
        }
        if w != g {
            misses.push(format!("{command:?}\n  redis: {w:?}\n  tamer: {g:?}"));
        }
    }
    assert!(
        misses.is_empty(),
        "{what}: {} of {} replies differ:\n{}",
        misses.len(),
        commands.len(),
        misses.join("\n")
    );
}

/// Catches any reply of a scripting case that differs from redis-server's: a conversion, an
/// error's text or where it rose, a sandbox hole, a `SCRIPT` subcommand, a shebang flag.
#[test]
fn scripts_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let commands: Vec<Vec<String>> = SCENARIOS
        .iter()
        .map(|c| c.iter().map(|a| a.to_string()).collect())
        .collect();
    let redis = Redis::start().expect("starting redis-server");
    let want = run_all(&mut redis.connect(), &commands);
    let dir = temp_dir("scripting");
    let served = Served::start(&dir.0);
    let got = run_all(&mut served.connect(), &commands);
    compare(&commands, &want, &got, "scenarios");
}

/// SplitMix64, for the random scripts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A random command called from a script, as Lua argument text.
fn random_call(rng: &mut Rng) -> String {
    let key = rng.pick(&["'k1'", "'k2'", "'l1'", "'h1'", "'z1'", "'s1'", "KEYS[1]"]);
    let value = rng.pick(&["'v'", "'10'", "7", "2.5", "''", "'-3'", "ARGV[1]"]);
    let call = match rng.below(16) {
        0 => format!("'set', {key}, {value}"),
        1 => format!("'get', {key}"),
        2 => format!("'incr', {key}"),
        3 => format!("'incrbyfloat', {key}, {value}"),
        4 => format!("'rpush', {key}, {value}, {value}"),
        5 => format!("'lrange', {key}, 0, -1"),
        6 => format!("'hset', {key}, 'f', {value}"),
        7 => format!("'hget', {key}, 'f'"),
        8 => format!(
            "'zadd', {key}, {}, 'm'",
            rng.pick(&["1", "2.5", "'x'", "-1"])
        ),
        9 => format!("'zrange', {key}, 0, -1, 'withscores'"),
        10 => format!("'sadd', {key}, {value}"),
        11 => format!("'scard', {key}"),
        12 => format!("'del', {key}"),
        13 => format!("'type', {key}"),
        14 => format!("'exists', {key}, 'k2'"),
        _ => format!(
            "'{}'",
            rng.pick(&["nosuch", "ping", "dbsize", "multi", "blpop"])
        ),
    };
    let how = rng.pick(&["redis.pcall", "redis.pcall", "redis.call"]);
    format!("{how}({call})")
}

/// A random value a script returns, as Lua text.
fn random_value(rng: &mut Rng, depth: usize) -> String {
    match rng.below(if depth > 2 { 8 } else { 11 }) {
        0 => format!("{}", rng.below(1000) as i64 - 500),
        1 => format!(
            "{}{}.{}",
            rng.pick(&["", "-"]),
            rng.below(100),
            rng.below(100)
        ),
        2 => format!("'s{}'", rng.below(100)),
        3 => rng.pick(&["true", "false", "nil"]).to_string(),
        4 => format!("{{ok='o{}'}}", rng.below(10)),
        5 => format!("{{err='E{} x'}}", rng.below(10)),
        6 => "r".to_string(),
        7 => format!("#r + {}", rng.below(3)),
        _ => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| random_value(rng, depth + 1)).collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// A random script and its `EVAL` (or `EVAL_RO`) command.
fn random_script(rng: &mut Rng) -> Vec<String> {
    let calls: Vec<String> = (0..1 + rng.below(4))
        .map(|_| format!("r[#r + 1] = {}", random_call(rng)))
        .collect();
    let body = format!(
        "local r = {{}}\n{}\nreturn {}",
        calls.join("\n"),
        random_value(rng, 0)
    );
    let command = if rng.below(8) == 0 { "EVAL_RO" } else { "EVAL" };
    let arg = rng.pick(&["5", "x", "1.5"]);
    vec![command.into(), body, "1".into(), "k1".into(), arg.into()]
}

/// Catches a difference in what random scripts do and return: conversions of every reply
/// type a command gives, errors raised or returned from any line, writes refused in `_RO`,
/// and the state the scripts leave (each script sees what the previous ones wrote).
#[test]
fn random_scripts_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let seed = std::env::var("TAMER_SCRIPT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24_001);
    eprintln!("random scripts: seed {seed} (TAMER_SCRIPT_SEED replays it)");
    let mut rng = Rng(seed);
    let mut commands = vec![vec!["FLUSHALL".to_string()]];
    commands.extend((0..600).map(|_| random_script(&mut rng)));
    let redis = Redis::start().expect("starting redis-server");
    let want = run_all(&mut redis.connect(), &commands);
    let dir = temp_dir("scripting-random");
    let served = Served::start(&dir.0);
    let got = run_all(&mut served.connect(), &commands);
    compare(
        &commands,
        &want,
        &got,
        &format!("random scripts, seed {seed}"),
    );
}

/// A script looping past `busy-reply-threshold`: other clients get `-BUSY`, `SCRIPT KILL`
/// stops it and its client gets Redis's error; then the server serves again. Run against
/// both servers, replies compared. Catches a busy script that blocks the server for good
/// (no hook), `-BUSY` for `SCRIPT KILL`, a kill a `pcall` swallows, or another error text.
fn busy_script_replies(port: u16) -> Vec<String> {
    let mut control = common::connect_to(port, std::time::Duration::from_secs(60));
    let mut runner = common::connect_to(port, std::time::Duration::from_secs(60));
    let mut replies = vec![call(
        &mut control,
        &["CONFIG", "SET", "busy-reply-threshold", "100"],
    )];
    let body = "local n = 0 while true do pcall(function() n = n + 1 end) end";
    common::send_command(&mut runner, &["EVAL", body, "0"]);
    // Bounded: a stalled machine may take long to reach the threshold, not forever.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let busy = loop {
        let reply = call(&mut control, &["GET", "k"]);
        if reply.starts_with("-BUSY") || std::time::Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    replies.push(busy);
    replies.push(call(&mut control, &["SCRIPT", "KILL"]));
    replies.extend(common::read_replies(&mut runner, 1));
    replies.push(call(&mut control, &["SCRIPT", "KILL"]));
    replies.push(call(&mut control, &["SET", "k", "v"]));
    replies
}

#[test]
fn a_busy_script_is_killed_as_redis_kills_it() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = busy_script_replies(redis.1);
    let dir = temp_dir("scripting-busy");
    let served = Served::start_with(&dir.0, &["--cores", "1"]);
    let got = busy_script_replies(served.port);
    assert_eq!(got, want);
}

/// redis-py's own scripting paths, unchanged (tests/py/scripting_client.py):
/// `register_script` through `NOSCRIPT` and `SCRIPT LOAD`, scripts in a pipeline, script
/// errors as `ResponseError`, and `Lock` (its release and extend are Lua scripts) contended
/// by four threads with no lost update. Catches a reply redis-py cannot parse, a NOSCRIPT
/// text it does not recognise, or a lock that two threads hold at once.
#[test]
fn redis_py_scripts_and_locks_work_unchanged() {
    const PYTHON: &str = "/usr/bin/python3";
    if !have(PYTHON, &["-c", "import redis"]) {
        return;
    }
    let dir = temp_dir("scripting-redis-py");
    let served = Served::start(&dir.0);
    common::run_client_script(PYTHON, "scripting_client.py", served.port);
}

/// A script returning a table that holds itself: Redis stops at its Lua stack limit (the
/// reply's depth differs, so this is checked on tamer alone). Catches a conversion that
/// recurses on the user-level thread's small stack (the server died), or one that expands
/// a table holding itself twice without end.
#[test]
fn tables_holding_themselves_get_a_bounded_reply() {
    let dir = temp_dir("scripting-self");
    let served = Served::start(&dir.0);
    let mut conn = served.connect();
    let deep = call(&mut conn, &["EVAL", "local t={} t[1]=t return t", "0"]);
    assert!(deep.starts_with("*1\r\n*1\r\n"), "{deep:.40}");
    assert!(
        deep.contains("-ERR reached lua stack limit\r\n"),
        "{deep:.40}"
    );
    let body =
        "local s = string.rep('x', 1000000) local t = {} t[1] = t t[2] = t t[3] = s return t";
    let wide = call(&mut conn, &["EVAL", body, "0"]);
    assert_eq!(wide, "-ERR the script's reply is too large\r\n");
    assert_eq!(call(&mut conn, &["PING"]), "+PONG\r\n");
}
