//! The command table as the end-to-end tests see it: every command and subcommand tamer
//! serves, with Redis 7.0's metadata (`crates/server/src/commands/meta.json`, the file the
//! server's table is generated from), seeded random invocations of each built from its
//! documented arguments, and a RESP reader into a tree (to compare replies whose sets and maps
//! come in a server's own order).

use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::Value;

/// One command or subcommand.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Lowercase; a subcommand's is `container|sub`.
    pub name: String,
    pub arity: i64,
    pub flags: Vec<String>,
    /// Its documented arguments (Redis's `COMMAND DOCS` `arguments`).
    pub arguments: Vec<Value>,
    /// Whether it names keys (key specs).
    pub has_keys: bool,
    /// Its subcommands' names (a container's).
    pub subcommands: Vec<String>,
}

impl Entry {
    /// Its name as the words a client sends (`config|get` → `config get`).
    pub fn words(&self) -> Vec<String> {
        self.name.split('|').map(String::from).collect()
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

fn meta() -> serde_json::Map<String, Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/server/src/commands/meta.json");
    let text = std::fs::read_to_string(path).expect("meta.json");
    match serde_json::from_str(&text).expect("meta.json parses") {
        Value::Object(map) => map,
        _ => panic!("meta.json is a map"),
    }
}

fn entry(info: &Value, docs: &Value) -> Entry {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    Entry {
        name: info["name"].as_str().unwrap().to_string(),
        arity: info["arity"].as_i64().unwrap(),
        flags: strings(&info["flags"]),
        arguments: docs["arguments"].as_array().cloned().unwrap_or_default(),
        has_keys: info["key_specs"].as_array().is_some_and(|s| !s.is_empty()),
        subcommands: info["subcommands"]
            .as_array()
            .map(|subs| {
                subs.iter()
                    .map(|s| s["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// Every command and subcommand tamer serves, sorted by name.
pub fn entries() -> Vec<Entry> {
    let mut out = Vec::new();
    for (_, node) in meta() {
        let (info, docs) = (&node["info"], &node["docs"]);
        out.push(entry(info, docs));
        for sub in info["subcommands"].as_array().into_iter().flatten() {
            let name = sub["name"].as_str().unwrap();
            out.push(entry(sub, &docs["subcommands"][name]));
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Keys the invocations use: few, so that commands meet each other's data.
pub const KEYS: &[&str] = &["k1", "k2", "k3", "{t}k4"];

fn pick<'a>(rng: &mut SmallRng, from: &[&'a str]) -> &'a str {
    from[rng.gen_range(0..from.len())]
}

/// Values for an argument of `kind` (Redis's argument types); `blocking`: timeouts stay
/// short, so that a blocking command never waits long.
fn value(rng: &mut SmallRng, kind: &str, name: &str, blocking: bool) -> String {
    if blocking && name == "timeout" {
        return pick(rng, &["0.01", "0.02", "x", "-1"]).to_string();
    }
    let v = match kind {
        "key" => pick(rng, KEYS),
        "integer" => pick(rng, &["0", "1", "2", "3", "-1", "10", "x"]),
        "double" => pick(rng, &["0", "1.5", "-2", "inf", "-inf", "3", "nan"]),
        "unix-time" => pick(rng, &["1", "4102444800", "-5"]),
        "pattern" => pick(rng, &["*", "k*", "?2", "[a-k]*"]),
        _ => pick(rng, &["a", "b", "hello", "0", "1", "-1", "", "x y", "k1"]),
    };
    v.to_string()
}

/// Appends one documented argument's words (its token, its value or values).
fn argument(
    rng: &mut SmallRng,
    arg: &Value,
    next: Option<&Value>,
    blocking: bool,
    out: &mut Vec<String>,
) {
    let flags: Vec<&str> = arg["flags"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if flags.contains(&"optional") && rng.gen_bool(0.5) {
        return;
    }
    let times = if flags.contains(&"multiple") {
        rng.gen_range(1..=3)
    } else {
        1
    };
    let kind = arg["type"].as_str().unwrap_or("string");
    let name = arg["name"].as_str().unwrap_or("");
    let token = arg["token"].as_str();
    for i in 0..times {
        if let Some(t) = token.filter(|_| i == 0 || flags.contains(&"multiple_token")) {
            if kind != "pure-token" {
                out.push(t.to_string());
            }
        }
        match kind {
            "pure-token" => out.push(token.unwrap_or("").to_string()),
            "oneof" => {
                let choices = arg["arguments"].as_array().unwrap();
                let c = &choices[rng.gen_range(0..choices.len())];
                argument(rng, c, None, blocking, out);
            }
            "block" => {
                let parts = arg["arguments"].as_array().unwrap();
                for (j, p) in parts.iter().enumerate() {
                    argument(rng, p, parts.get(j + 1), blocking, out);
                }
            }
            // A count of the keys that follow: usually right, sometimes not.
            "integer" if name == "numkeys" && rng.gen_bool(0.85) => {
                let n = next.map_or(1, |_| rng.gen_range(1..=3));
                out.push(n.to_string());
                for _ in 0..n {
                    out.push(pick(rng, KEYS).to_string());
                }
                return;
            }
            _ => out.push(value(rng, kind, name, blocking)),
        }
    }
}

/// A random invocation of `entry` following its documented arguments (its name first). The
/// key count of a `numkeys` argument is usually right; values are sometimes invalid.
pub fn invocation(entry: &Entry, rng: &mut SmallRng) -> Vec<String> {
    let mut out = entry.words();
    let blocking = entry.has_flag("blocking");
    let args = &entry.arguments;
    let mut i = 0;
    // Bounded by the documented arguments.
    while i < args.len() {
        let before = out.len();
        argument(rng, &args[i], args.get(i + 1), blocking, &mut out);
        // A `numkeys` took the keys after it: skip the key argument.
        let took_keys = args[i]["name"] == "numkeys"
            && args.get(i + 1).is_some_and(|n| n["type"] == "key")
            && out.len() > before + 1;
        i += if took_keys { 2 } else { 1 };
    }
    out
}

/// A TTL below a few seconds would race the run: `EX`-style times become long ones. So does
/// `SET`'s `EXAT`/`PXAT` in the past: Redis keeps such a key until its active expiry finds
/// it, which may fall inside a step or not (its `expired` event with it), so it becomes the
/// far time too.
pub fn without_short_ttls(mut args: Vec<String>) -> Vec<String> {
    // Times from now in seconds become fixed Unix times far ahead, so that comparisons
    // (`GT`, `LT`) and replies do not depend on when each server ran the step.
    const AHEAD_S: i64 = 4_102_444_800;
    let name = args[0].to_ascii_lowercase();
    let relative = |arg: &str| {
        arg.parse::<i64>()
            .ok()
            .filter(|n| (1..1_000_000).contains(n))
    };
    if name == "expire" {
        if let Some(n) = args.get(2).and_then(|a| relative(a)) {
            args[0] = "expireat".into();
            args[2] = (AHEAD_S + n).to_string();
        }
    }
    if name == "setex" && args.get(2).and_then(|a| relative(a)).is_some() {
        args[2] = "1000000".into();
    }
    let past = |arg: &str, unit: i64| arg.parse::<i64>().is_ok_and(|t| t < AHEAD_S * unit);
    for i in 1..args.len() {
        if name == "set" {
            match args[i - 1].to_ascii_lowercase().as_str() {
                "exat" if past(&args[i], 1) => args[i] = AHEAD_S.to_string(),
                "pxat" if past(&args[i], 1000) => args[i] = (AHEAD_S * 1000).to_string(),
                _ => {}
            }
        }
        let n = relative(&args[i]);
        match (args[i - 1].to_ascii_lowercase().as_str(), n) {
            ("ex", Some(n)) => {
                args[i - 1] = "EXAT".into();
                args[i] = (AHEAD_S + n).to_string();
            }
            ("px", Some(n)) => {
                args[i - 1] = "PXAT".into();
                args[i] = ((AHEAD_S + n) * 1000).to_string();
            }
            _ => {}
        }
    }
    args
}

/// Commands whose replies list elements in the order of Redis's hash tables, which tamer's
/// order differs from (`docs/commands.md`): compared as sorted lists.
pub fn unordered(name: &str) -> bool {
    let names = [
        "hkeys", "hvals", "hgetall", "smembers", "sinter", "sunion", "sdiff", "hscan", "sscan",
        "keys", "scan",
    ];
    names.contains(&name.to_ascii_lowercase().as_str())
}

/// A reply's top-level elements sorted (any nested list too), as text.
pub fn sorted(reply: &str) -> String {
    fn sort(r: Resp) -> Resp {
        match r {
            Resp::List(t, items) => {
                let mut items: Vec<Resp> = items.into_iter().map(sort).collect();
                items.sort();
                Resp::List(t, items)
            }
            Resp::Map(pairs) => {
                let mut pairs: Vec<(Resp, Resp)> =
                    pairs.into_iter().map(|(k, v)| (sort(k), sort(v))).collect();
                pairs.sort();
                Resp::Map(pairs)
            }
            other => other,
        }
    }
    format!("{:?}", sort(parse(reply)))
}

/// A RESP reply as a tree.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    /// An array (`*`), a set (`~`) or a push (`>`), with its type byte.
    List(u8, Vec<Resp>),
    Map(Vec<(Resp, Resp)>),
    /// A double, a big number, a boolean or a verbatim string, as its line.
    Other(u8, Vec<u8>),
}

/// Parses one whole reply (as `read_replies` returns it).
pub fn parse(reply: &str) -> Resp {
    let bytes = reply.as_bytes();
    let (value, used) = parse_at(bytes, 0);
    assert_eq!(used, bytes.len(), "one reply: {reply:?}");
    value
}

fn line(b: &[u8], at: usize) -> (&[u8], usize) {
    let end = at
        + b[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a CRLF");
    (&b[at..end], end + 2)
}

fn parse_at(b: &[u8], at: usize) -> (Resp, usize) {
    let (head, next) = line(b, at + 1);
    let text = String::from_utf8_lossy(head).into_owned();
    let n = || text.parse::<i64>().expect("a length");
    match b[at] {
        b'+' => (Resp::Simple(text), next),
        b'-' => (Resp::Error(text), next),
        b':' => (Resp::Int(n()), next),
        b'_' => (Resp::Null, next),
        b'$' | b'=' if n() < 0 => (Resp::Null, next),
        b'$' => {
            let len = n() as usize;
            (Resp::Bulk(b[next..next + len].to_vec()), next + len + 2)
        }
        b'=' => {
            let len = n() as usize;
            (
                Resp::Other(b'=', b[next..next + len].to_vec()),
                next + len + 2,
            )
        }
        b'*' | b'~' | b'>' if n() < 0 => (Resp::Null, next),
        kind @ (b'*' | b'~' | b'>') => {
            let mut items = Vec::new();
            let mut at = next;
            for _ in 0..n() {
                let (v, after) = parse_at(b, at);
                items.push(v);
                at = after;
            }
            (Resp::List(kind, items), at)
        }
        b'%' => {
            let mut pairs = Vec::new();
            let mut at = next;
            for _ in 0..n() {
                let (k, after) = parse_at(b, at);
                let (v, after) = parse_at(b, after);
                pairs.push((k, v));
                at = after;
            }
            (Resp::Map(pairs), at)
        }
        kind => (Resp::Other(kind, head.to_vec()), next),
    }
}
