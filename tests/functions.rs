//! Functions (`FUNCTION *`, `FCALL`, `FCALL_RO`) checked reply for reply against a real
//! redis-server 7.0 (scripted scenarios in RESP2 and RESP3: loading, every load error,
//! calls, flags, listing, dump and restore), and kept across a restart and a kill -9 of
//! `tamer serve`.

mod common;

use common::conn::Conn;
use common::table::{parse, Resp};
use common::{have, temp_dir, Redis, Served};

const LIB: &str = "#!lua name=mylib
local function set(keys, args)
  return redis.call('SET', keys[1], args[1])
end
redis.register_function('myset', set)
redis.register_function{function_name='myget', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads a key'}
redis.register_function('fails', function() return redis.call('nosuch') end)
redis.register_function('raises', function() error('boom') end)
redis.register_function('errtable', function() return redis.error_reply('MY custom') end)
redis.register_function('args', function(keys, args) return {#keys, #args, keys[1], args[1]} end)
";

const LIB2: &str = "#!lua name=other
redis.register_function('other_fn', function() return 2 end)
";

const LIB_V2: &str = "#!lua name=mylib
redis.register_function('myset', function() return 'v2' end)
";

/// A step: the command's words (`{LIB}` and friends are the libraries above).
type Step = &'static [&'static str];

const SCENARIOS: &[Step] = &[
    &["FUNCTION", "FLUSH"],
    &["FUNCTION", "LIST"],
    &["FUNCTION", "STATS"],
    &["FCALL", "myset", "1", "k", "v"],
    &["FUNCTION", "LOAD", "{LIB}"],
    &["FUNCTION", "LOAD", "{LIB}"],
    &["FUNCTION", "LOAD", "{LIB2}"],
    &["FUNCTION", "STATS"],
    &["FCALL", "myset", "1", "k", "v"],
    &["FCALL", "myget", "1", "k"],
    &["FCALL_RO", "myget", "1", "k"],
    &["FCALL_RO", "myset", "1", "k", "v"],
    &["FCALL", "args", "2", "a", "b", "c"],
    &["FCALL", "args", "0"],
    &["FCALL", "args", "3", "a"],
    &["FCALL", "args", "-1"],
    &["FCALL", "args", "x"],
    &["FCALL", "fails", "0"],
    &["FCALL", "raises", "0"],
    &["FCALL", "errtable", "0"],
    &["FCALL", "other_fn", "0"],
    &["FCALL", "nosuch", "0"],
    &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "oth*"],
    &["FUNCTION", "LIST", "LIBRARYNAME", "my*"],
    &["FUNCTION", "LIST", "LIBRARYNAME"],
    &["FUNCTION", "LIST", "BADARG"],
    &["FUNCTION", "LOAD", "REPLACE", "{LIB_V2}"],
    &["FCALL", "myset", "0"],
    &["FCALL", "myget", "1", "k"],
    &["FUNCTION", "DELETE", "nosuch"],
    &["FUNCTION", "DELETE", "other"],
    &["FCALL", "other_fn", "0"],
    &["FUNCTION", "LOAD", "BADOPT", "{LIB2}"],
    &["FUNCTION", "LOAD", "return 1"],
    &["FUNCTION", "LOAD", "#!lua\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=x foo=bar\nreturn 1"],
    &["FUNCTION", "LOAD", "#!js name=x\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=bad-name\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=empty\nlocal a = 1"],
    &["FUNCTION", "LOAD", "#!lua name=syntax\nthis is not lua"],
    &["FUNCTION", "LOAD", "#!lua name=runtime\nerror('at load')"],
    &["FUNCTION", "LOAD", "#!lua name=clash\nredis.register_function('myset', function() end)"],
    &["FUNCTION", "LOAD", "#!lua name=dup\nredis.register_function('f', function() end)\nredis.register_function('f', function() end)"],
    &["FUNCTION", "LOAD", "#!lua name=badfn\nredis.register_function('a-b', function() end)"],
    &["FUNCTION", "LOAD", "#!lua name=badflag\nredis.register_function{function_name='f', callback=function() end, flags={'nope'}}"],
    &["FUNCTION", "LOAD", "#!lua name=badkey\nredis.register_function{function_name='f', callback=function() end, what=1}"],
    &["FUNCTION", "LOAD", "#!lua name=nocb\nredis.register_function{function_name='f'}"],
    &["FUNCTION", "LOAD", "#!lua name=noname\nredis.register_function{callback=function() end}"],
    &["FUNCTION", "LOAD", "#!lua name=onearg\nredis.register_function('f')"],
    &["FUNCTION", "LOAD", "#!lua name=callatload\nredis.call('set', 'x', 'y')"],
    &["FUNCTION", "LOAD", "#!lua name=global\nx = 1"],
    &["FUNCTION", "FLUSH", "BAD"],
    &["FUNCTION", "FLUSH", "SYNC"],
    &["FUNCTION", "STATS"],
    &["FUNCTION", "LOAD", "{LIB}"],
    &["FCALL", "MYSET", "1", "k", "v"],
    &["FUNCTION", "LOAD", "REPLACE", "REPLACE", "{LIB}"],
    &["FUNCTION", "LOAD", "REPLACE"],
    &["FUNCTION", "LOAD", "#! lua name=x\nreturn 1"],
    &["FUNCTION", "LOAD", "#!lua name=x name=y\nreturn 1"],
    &["FUNCTION", "LOAD", "#!LUA NAME=upper\nredis.register_function{FUNCTION_NAME='Up_Fn', CALLBACK=function() return 'up' end, FLAGS={'NO-WRITES', 'allow-stale'}}"],
    &["FCALL_RO", "up_fn", "0"],
    &["FUNCTION", "LOAD", "#!lua name=caseclash\nredis.register_function('MYGET', function() end)"],
    &["FUNCTION", "LOAD", "#!lua name=numname\nredis.register_function(123, function() return 1 end)"],
    &["FCALL", "123", "0"],
    &["FUNCTION", "LOAD", "#!lua name=badfirst\nredis.register_function({}, function() end)"],
    &["FUNCTION", "LOAD", "#!lua name=badsecond\nredis.register_function('f', 1)"],
    &["FUNCTION", "LOAD", "#!lua name=badcb\nredis.register_function{function_name='f', callback=1}"],
    &["FUNCTION", "LOAD", "#!lua name=baddesc\nredis.register_function{function_name='f', callback=function() end, description=1}"],
    &["FUNCTION", "LOAD", "#!lua name=badflags\nredis.register_function{function_name='f', callback=function() end, flags='no-writes'}"],
    &["FUNCTION", "LOAD", "#!lua name=badname\nredis.register_function{function_name=1, callback=function() end}"],
    &["FUNCTION", "LOAD", "#!lua name=stringlib\nlocal s = string.len('x')"],
    &["FUNCTION", "LOAD", "#!lua name=logs\nredis.log(redis.LOG_NOTICE, 'loading')\nredis.register_function('v', function() return redis.REDIS_VERSION end)"],
    &["FUNCTION", "LOAD", "#!lua name=rt\nredis.register_function('keys', function() return KEYS end)\nredis.register_function('glob', function() x = 1 end)\nredis.register_function('ro_w', {})"],
    &["FUNCTION", "LOAD", "#!lua name=rt\nredis.register_function('keys', function() return KEYS end)\nredis.register_function('glob', function() x = 1 end)\nredis.register_function{function_name='ro_w', callback=function(k) return redis.call('set', k[1], 'x') end, flags={'no-writes'}}\nredis.register_function('lib', function() return {string.upper('a'), cjson.encode({1})} end)"],
    &["FCALL", "keys", "0"],
    &["FCALL", "glob", "0"],
    &["FCALL", "ro_w", "1", "k"],
    &["FCALL_RO", "ro_w", "1", "k"],
    &["FCALL", "lib", "0"],
    &["FUNCTION", "LIST", "LIBRARYNAME", "RT"],
    &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
    &["FUNCTION", "DELETE", "RT"],
    &["FUNCTION", "RESTORE", "garbage"],
    &["FUNCTION", "RESTORE", "x", "BADPOLICY"],
    &["FUNCTION", "KILL"],
    &["FUNCTION", "HELP"],
    &["FUNCTION", "HELP", "extra"],
    &["FUNCTION", "LIST"],
];

fn expand(word: &str) -> String {
    word.replace("{LIB}", LIB)
        .replace("{LIB2}", LIB2)
        .replace("{LIB_V2}", LIB_V2)
}

/// A reply with every list sorted (Redis lists libraries and functions in its hash tables'
/// order).
fn sorted(reply: &str) -> String {
    fn sort(r: Resp) -> Resp {
        match r {
            Resp::List(t, items) => {
                let mut items: Vec<Resp> = items.into_iter().map(sort).collect();
                items.sort();
                Resp::List(t, items)
            }
            Resp::Map(pairs) => Resp::Map(pairs.into_iter().map(|(k, v)| (k, sort(v))).collect()),
            other => other,
        }
    }
    format!("{:?}", sort(parse(reply)))
}

/// Runs the scenarios on `port` in `protocol`: each reply, lists sorted.
fn run(port: u16, protocol: &str) -> Vec<String> {
    let mut conn = Conn::new(port);
    conn.send(&["HELLO", protocol]);
    conn.next();
    SCENARIOS
        .iter()
        .map(|step| {
            let words: Vec<String> = step.iter().map(|w| expand(w)).collect();
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            conn.send(&refs);
            sorted(&conn.next())
        })
        .collect()
}

/// Mutations caught (each fails a step): a load error's text or order changed, a library
/// loaded twice without REPLACE, a function name shared across libraries, FCALL_RO running
/// a writing function, numkeys misread, a function's error without its name and line,
/// LIST's fields or its filter wrong, STATS' counts off, DELETE or FLUSH leaving functions,
/// RESTORE accepting garbage or a bad policy.
#[test]
fn functions_reply_as_redis_does() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let dir = temp_dir("functions-scenarios");
    let served = Served::start(&dir.0);
    for protocol in ["2", "3"] {
        let want = run(redis.1, protocol);
        let got = run(served.port, protocol);
        for (i, (step, (w, g))) in SCENARIOS.iter().zip(want.iter().zip(&got)).enumerate() {
            assert_eq!(
                w, g,
                "RESP{protocol} step {i} {step:?}: redis-server's reply left, tamer's right"
            );
        }
    }
}

/// A dump from redis-server restores into tamer and the reverse, with each policy.
/// Mutations caught: the payload's opcode, string encoding, version or CRC-64 other than
/// Redis's; APPEND replacing a library; FLUSH keeping one.
#[test]
fn function_dumps_move_between_redis_and_tamer() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let dir = temp_dir("functions-dump");
    let served = Served::start(&dir.0);
    let mut theirs = Conn::new(redis.1);
    let mut ours = Conn::new(served.port);
    for conn in [&mut theirs, &mut ours] {
        conn.send(&["FUNCTION", "FLUSH"]);
        conn.next();
    }
    theirs.send(&["FUNCTION", "LOAD", LIB]);
    assert_eq!(theirs.next(), "$5\r\nmylib\r\n");
    theirs.send(&["FUNCTION", "DUMP"]);
    let payload = bulk_bytes(&theirs.next_bytes());
    ours.send_bytes(&[b"FUNCTION", b"RESTORE", &payload]);
    assert_eq!(ours.next(), "+OK\r\n");
    ours.send_bytes(&[b"FUNCTION", b"RESTORE", &payload]);
    assert_eq!(ours.next(), "-ERR Library mylib already exists\r\n");
    ours.send_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]);
    assert_eq!(ours.next(), "+OK\r\n");
    ours.send(&["FCALL", "args", "1", "a", "b"]);
    assert_eq!(ours.next(), "*4\r\n:1\r\n:1\r\n$1\r\na\r\n$1\r\nb\r\n");
    ours.send(&["FUNCTION", "LOAD", LIB2]);
    ours.next();
    ours.send(&["FUNCTION", "DUMP"]);
    let ours_payload = bulk_bytes(&ours.next_bytes());
    theirs.send_bytes(&[b"FUNCTION", b"RESTORE", &ours_payload, b"FLUSH"]);
    assert_eq!(theirs.next(), "+OK\r\n");
    theirs.send(&["FCALL", "other_fn", "0"]);
    assert_eq!(theirs.next(), ":2\r\n");
    ours.send_bytes(&[b"FUNCTION", b"RESTORE", &ours_payload, b"FLUSH"]);
    assert_eq!(ours.next(), "+OK\r\n");
    ours.send(&["FUNCTION", "STATS"]);
    assert!(ours.next().contains("libraries_count\r\n:2"));
}

/// The bytes of a bulk string reply (`$<n>\r\n<bytes>\r\n`).
fn bulk_bytes(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply.first(), Some(&b'$'), "not a bulk string");
    let header = reply.iter().position(|&b| b == b'\n').expect("a header") + 1;
    reply[header..reply.len() - 2].to_vec()
}

/// Libraries are in the store: after a clean restart and after a kill -9 right after the
/// reply to FUNCTION LOAD, FCALL finds them. Mutations caught: libraries kept only in
/// memory, the record not read at start, a load acknowledged before its commit.
#[test]
fn libraries_survive_restart_and_kill_9() {
    let dir = temp_dir("functions-restart");
    let served = Served::start(&dir.0);
    let mut conn = Conn::new(served.port);
    conn.send(&["FUNCTION", "LOAD", LIB]);
    assert_eq!(conn.next(), "$5\r\nmylib\r\n");
    drop(conn);
    let (status, _) = served.terminate();
    assert_eq!(status, Some(0));
    let served = Served::start(&dir.0);
    let mut conn = Conn::new(served.port);
    conn.send(&["FCALL", "myset", "1", "k", "v"]);
    assert_eq!(conn.next(), "+OK\r\n");
    conn.send(&["FUNCTION", "LOAD", LIB2]);
    assert_eq!(conn.next(), "$5\r\nother\r\n");
    drop(served); // SIGKILL
    let served = Served::start(&dir.0);
    let mut conn = Conn::new(served.port);
    conn.send(&["FCALL", "other_fn", "0"]);
    assert_eq!(conn.next(), ":2\r\n");
    conn.send(&["FUNCTION", "DELETE", "mylib"]);
    assert_eq!(conn.next(), "+OK\r\n");
    drop(served);
    let served = Served::start(&dir.0);
    let mut conn = Conn::new(served.port);
    conn.send(&["FCALL", "myset", "1", "k", "v"]);
    assert_eq!(conn.next(), "-ERR Function not found\r\n");
    // Two names differing in case in one library: Redis 7.0.15 takes them (and dies at the
    // library's FUNCTION DELETE); tamer refuses them (docs/commands.md).
    let code = "#!lua name=caseinlib\nredis.register_function('g', function() end)\nredis.register_function('G', function() end)";
    conn.send(&["FUNCTION", "LOAD", code]);
    assert_eq!(
        conn.next(),
        "-ERR Error registering functions: ERR Function already exists in the library\r\n"
    );
}

/// A function looping past `busy-reply-threshold`, against both servers: other clients get
/// the `-BUSY` that names `FUNCTION KILL`, `SCRIPT KILL` is refused with it, `FUNCTION STATS`
/// shows the running function (its duration left out), `FUNCTION KILL` stops it and its
/// client gets Redis's error. Mutations caught: the EVAL text for a busy function, SCRIPT
/// KILL stopping a function, STATS without the running function, a kill a `pcall` swallows.
fn busy_function_replies(port: u16) -> Vec<String> {
    let mut control = Conn::new(port);
    let mut runner = Conn::new(port);
    let spin = "#!lua name=spin\nredis.register_function('spin', function()\n  local n = 0\n  while true do pcall(function() n = n + 1 end) end\nend)";
    let mut replies = Vec::new();
    for step in [
        &["FUNCTION", "FLUSH"][..],
        &["CONFIG", "SET", "busy-reply-threshold", "100"],
        &["FUNCTION", "LOAD", spin],
        &["FUNCTION", "KILL"],
    ] {
        control.send(step);
        replies.push(control.next());
    }
    runner.send(&["FCALL", "spin", "0"]);
    // Bounded: a stalled machine may take long to reach the threshold, not forever.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let busy = loop {
        control.send(&["GET", "k"]);
        let reply = control.next();
        if reply.starts_with("-BUSY") || std::time::Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    replies.push(busy);
    control.send(&["SCRIPT", "KILL"]);
    replies.push(control.next());
    control.send(&["FUNCTION", "STATS"]);
    let stats = control.next();
    // The duration varies: everything before it is compared.
    replies.push(stats[..stats.find("duration_ms").unwrap_or(stats.len())].to_string());
    control.send(&["FUNCTION", "KILL"]);
    replies.push(control.next());
    replies.push(runner.next());
    control.send(&["FUNCTION", "KILL"]);
    replies.push(control.next());
    control.send(&["FUNCTION", "STATS"]);
    replies.push(control.next());
    replies
}

#[test]
fn a_busy_function_is_killed_as_redis_kills_it() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let redis = Redis::start().expect("starting redis-server");
    let want = busy_function_replies(redis.1);
    let dir = temp_dir("functions-busy");
    let served = Served::start_with(&dir.0, &["--cores", "1"]);
    let got = busy_function_replies(served.port);
    assert_eq!(got, want);
}
