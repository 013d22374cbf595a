//! Generates the command table from Redis 7.0's metadata of the commands tamer serves
//! (`src/commands/meta.json`: each command's `COMMAND INFO` and `COMMAND DOCS`, captured from
//! a redis-server 7.0 by `scripts/gen-command-meta.py`) and tamer's side of it
//! (`src/commands/table.toml`: what runs each command, and tamer's own flags).
//!
//! The output (`$OUT_DIR/command_table.rs`, included by `src/commands/table.rs`) holds, for
//! every command and subcommand: its name, arity, Redis's flags, ACL categories and key specs
//! as Rust values; its handler; its `COMMAND INFO` entry and `COMMAND DOCS` value rendered as
//! RESP2 and RESP3 bytes (so that `COMMAND` replies copy them), sorted by name; and a perfect
//! hash of the names (a lookup is one hash and one compare). It also defines the flag constants, from the name lists
//! below, so that the generator is the one place that knows them. A command in one input and
//! not the other, an unknown flag or category, or a malformed handler fails the build.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Redis 7.0's command flags, in the order `COMMAND INFO` lists them.
const COMMAND_FLAGS: &[&str] = &[
    "write",
    "readonly",
    "denyoom",
    "module",
    "admin",
    "pubsub",
    "noscript",
    "blocking",
    "loading",
    "stale",
    "skip_monitor",
    "skip_slowlog",
    "asking",
    "fast",
    "no_auth",
    "may_replicate",
    "sentinel",
    "only_sentinel",
    "no_mandatory_keys",
    "protected",
    "module_no_cluster",
    "no_async_loading",
    "no_multi",
    "movablekeys",
    "allow_busy",
];

/// Redis 7.0's ACL categories.
const ACL_CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Redis 7.0's key spec flags, in the order `COMMAND GETKEYSANDFLAGS` lists them.
const KEY_FLAGS: &[&str] = &[
    "RO",
    "RW",
    "OW",
    "RM",
    "access",
    "update",
    "insert",
    "delete",
    "not_key",
    "incomplete",
    "variable_flags",
];

/// tamer's own flags (documented in `table.toml`).
const TAMER_FLAGS: &[&str] = &[
    "runs_in_multi",
    "transaction_boundary",
    "changes_map",
    "secret_args",
    "subscribed_context",
    "may_replicate",
];

/// A JSON value with its maps' order kept (clients read `COMMAND DOCS` maps in Redis's order).
#[derive(Clone, Debug)]
enum Node {
    Int(i64),
    Str(String),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn int(&self) -> i64 {
        match self {
            Node::Int(n) => *n,
            other => panic!("meta.json: {other:?} is not an integer"),
        }
    }

    fn str(&self) -> &str {
        match self {
            Node::Str(s) => s,
            other => panic!("meta.json: {other:?} is not a string"),
        }
    }

    fn list(&self) -> &[Node] {
        match self {
            Node::List(items) => items,
            other => panic!("meta.json: {other:?} is not a list"),
        }
    }

    fn field(&self, key: &str) -> &Node {
        self.get(key)
            .unwrap_or_else(|| panic!("meta.json: no '{key}' in {self:?}"))
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an integer, a string, an array or an object")
    }
    fn visit_i64<E>(self, n: i64) -> Result<Node, E> {
        Ok(Node::Int(n))
    }
    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Node, E> {
        i64::try_from(n).map(Node::Int).map_err(E::custom)
    }
    fn visit_str<E>(self, s: &str) -> Result<Node, E> {
        Ok(Node::Str(s.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut pairs = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Node>()? {
            pairs.push((k, v));
        }
        Ok(Node::Map(pairs))
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

/// RESP encoding of the metadata, for both protocols (`resp3`: sets and maps typed).
struct Resp {
    out: Vec<u8>,
    resp3: bool,
}

impl Resp {
    fn header(&mut self, kind: u8, n: usize) {
        self.out.push(kind);
        self.out.extend_from_slice(format!("{n}\r\n").as_bytes());
    }
    fn array(&mut self, n: usize) {
        self.header(b'*', n);
    }
    fn set(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'~', n);
        } else {
            self.array(n);
        }
    }
    fn map(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'%', n);
        } else {
            self.array(2 * n);
        }
    }
    fn bulk(&mut self, s: &str) {
        self.header(b'$', s.len());
        self.out.extend_from_slice(s.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }
    fn simple(&mut self, s: &str) {
        self.out.push(b'+');
        self.out.extend_from_slice(s.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }
    fn integer(&mut self, n: i64) {
        self.out.extend_from_slice(format!(":{n}\r\n").as_bytes());
    }

    /// A metadata node as Redis 7.0 replies it: `key` is the map key it is the value of
    /// (`flags` and `doc_flags` are sets of simple strings, `history` a set).
    fn node(&mut self, node: &Node, key: &str) {
        match node {
            Node::Int(n) => self.integer(*n),
            Node::Str(s) => self.bulk(s),
            Node::List(items) if key == "flags" || key == "doc_flags" => {
                self.set(items.len());
                for item in items {
                    self.simple(item.str());
                }
            }
            Node::List(items) => {
                if key == "history" {
                    self.set(items.len());
                } else {
                    self.array(items.len());
                }
                for item in items {
                    self.node(item, "");
                }
            }
            Node::Map(pairs) => {
                self.map(pairs.len());
                for (k, v) in pairs {
                    self.bulk(k);
                    self.node(v, k);
                }
            }
        }
    }

    /// One command's `COMMAND INFO` entry: Redis 7.0's ten fields.
    fn info(&mut self, info: &Node) {
        self.array(10);
        self.bulk(info.field("name").str());
        self.integer(info.field("arity").int());
        self.simple_set(info.field("flags"));
        for k in ["first_key", "last_key", "step"] {
            self.integer(info.field(k).int());
        }
        self.simple_set(info.field("acl"));
        let tips = info.field("tips").list();
        self.set(tips.len());
        for t in tips {
            self.bulk(t.str());
        }
        let specs = info.field("key_specs").list();
        self.set(specs.len());
        for spec in specs {
            self.node(spec, "");
        }
        // Redis 7.0 replies a container's subcommands as an array, none as an empty set.
        let subs = info.field("subcommands").list();
        if subs.is_empty() {
            self.set(0);
        } else {
            self.array(subs.len());
        }
        for s in subs {
            self.info(s);
        }
    }

    fn simple_set(&mut self, node: &Node) {
        let items = node.list();
        self.set(items.len());
        for f in items {
            self.simple(f.str());
        }
    }
}

/// `bytes` rendered once per protocol: `[RESP2, RESP3]`.
fn both(render: impl Fn(&mut Resp)) -> [Vec<u8>; 2] {
    [false, true].map(|resp3| {
        let mut r = Resp {
            out: Vec::new(),
            resp3,
        };
        render(&mut r);
        r.out
    })
}

/// A byte string literal.
fn bytes_literal(bytes: &[u8]) -> String {
    let mut s = String::from("b\"");
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    s
}

/// The bit set of `names` in `all` (named `kind` in errors), as `Type(bits)`.
fn bits(ty: &str, kind: &str, all: &[&str], names: &[&str], context: &str) -> String {
    let mut value: u64 = 0;
    for name in names {
        let i = all
            .iter()
            .position(|n| n == name)
            .unwrap_or_else(|| panic!("{context}: unknown {kind} '{name}'"));
        value |= 1 << i;
    }
    format!("{ty}({value:#x})")
}

/// Constants for each name of `all`, as `impl Type { pub const NAME: Type = Type(1 << i); }`.
fn constants(out: &mut String, ty: &str, all: &[&str], what: &str) {
    let _ = writeln!(
        out,
        "#[allow(dead_code, reason = \"every name Redis defines, used or not\")]\nimpl {ty} {{"
    );
    for (i, name) in all.iter().enumerate() {
        let ident = name.to_ascii_uppercase();
        let _ = writeln!(out, "    /// {what} `{name}`.");
        let _ = writeln!(out, "    pub const {ident}: {ty} = {ty}(1 << {i});");
    }
    let names: Vec<String> = all.iter().map(|n| format!("{n:?}")).collect();
    let _ = writeln!(out, "    /// Every {what}'s name, by bit.");
    let _ = writeln!(
        out,
        "    pub const NAMES: [&'static str; {}] = [{}];",
        all.len(),
        names.join(", ")
    );
    let _ = writeln!(out, "}}\n");
}

/// tamer's side of one entry (`table.toml`).
struct Tamer {
    run: String,
    flags: Vec<String>,
    /// The function that finds the keys' flags from the arguments, for a command whose key
    /// spec has `variable_flags` (Redis's `getkeys_proc`).
    key_flags: Option<String>,
    /// Its index among Redis 7.0's commands (`src/acl/universe.rs`): its ACL bit.
    acl_id: usize,
}

/// The names of `src/acl/universe.rs`'s entries, each with its index.
fn acl_ids(universe_rs: &str) -> BTreeMap<String, usize> {
    universe_rs
        .split("Entry { name: \"")
        .skip(1)
        .enumerate()
        .map(|(i, rest)| (rest.split('"').next().expect("a name").to_string(), i))
        .collect()
}

fn tamer_entries(toml_text: &str) -> BTreeMap<String, Tamer> {
    let table: toml::Table = toml_text.parse().expect("table.toml parses");
    let mut out = BTreeMap::new();
    for (name, value) in table {
        let entry = value
            .as_table()
            .unwrap_or_else(|| panic!("table.toml: '{name}' is not a table"));
        let handler = |key: &str| entry.get(key).and_then(|v| v.as_str());
        let path_ok = |p: &str| {
            p.split("::").count() == 2
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == ':')
        };
        // A container may run a handler of its own when sent alone (`COMMAND`).
        let run = if let Some(path) = handler("run") {
            assert!(path_ok(path), "table.toml: '{name}': bad handler '{path}'");
            format!("Run::Tx(super::{path})")
        } else if let Some(path) = handler("table") {
            assert!(path_ok(path), "table.toml: '{name}': bad handler '{path}'");
            format!("Run::WithTable(super::{path})")
        } else if let Some(op) = handler("session") {
            assert!(
                op.chars().all(|c| c.is_ascii_alphanumeric()),
                "table.toml: '{name}': bad session op '{op}'"
            );
            format!("Run::Session(SessionOp::{op})")
        } else if entry.get("container").and_then(toml::Value::as_bool) == Some(true) {
            "Run::Container".to_string()
        } else {
            panic!("table.toml: '{name}' has no run, table, session or container");
        };
        let flags = entry
            .get("flags")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .map(|f| f.as_str().expect("a flag is a string").to_string())
                    .collect()
            })
            .unwrap_or_default();
        let key_flags = handler("key_flags").map(|path| {
            assert!(
                path_ok(path),
                "table.toml: '{name}': bad key_flags '{path}'"
            );
            format!("super::{path}")
        });
        out.insert(
            name,
            Tamer {
                run,
                flags,
                key_flags,
                acl_id: usize::MAX,
            },
        );
    }
    out
}

/// One key spec as a Rust value.
fn key_spec(spec: &Node, context: &str) -> String {
    let flags: Vec<&str> = spec.field("flags").list().iter().map(Node::str).collect();
    let begin = spec.field("begin_search");
    let begin = match begin.field("type").str() {
        "index" => format!(
            "BeginSearch::Index({})",
            begin.field("spec").field("index").int()
        ),
        "keyword" => {
            let s = begin.field("spec");
            format!(
                "BeginSearch::Keyword {{ keyword: {:?}, start_from: {} }}",
                s.field("keyword").str(),
                s.field("startfrom").int()
            )
        }
        _ => "BeginSearch::Unknown".to_string(),
    };
    let find = spec.field("find_keys");
    let find = match find.field("type").str() {
        "range" => {
            let s = find.field("spec");
            format!(
                "FindKeys::Range {{ last_key: {}, key_step: {}, limit: {} }}",
                s.field("lastkey").int(),
                s.field("keystep").int(),
                s.field("limit").int()
            )
        }
        "keynum" => {
            let s = find.field("spec");
            format!(
                "FindKeys::Keynum {{ keynum_index: {}, first_key: {}, key_step: {} }}",
                s.field("keynumidx").int(),
                s.field("firstkey").int(),
                s.field("keystep").int()
            )
        }
        _ => "FindKeys::Unknown".to_string(),
    };
    format!(
        "KeySpec {{ flags: {}, begin: {begin}, find: {find} }}",
        bits("KeyFlags", "key spec flag", KEY_FLAGS, &flags, context),
    )
}

/// One entry as a Rust value; `subcommands` names the static of its subcommands.
fn entry(info: &Node, docs: &Node, tamer: &Tamer, subcommands: &str) -> String {
    let name = info.field("name").str();
    let flags: Vec<&str> = info.field("flags").list().iter().map(Node::str).collect();
    let acl: Vec<&str> = info
        .field("acl")
        .list()
        .iter()
        .map(|a| a.str().trim_start_matches('@'))
        .collect();
    let tamer_flags: Vec<&str> = tamer.flags.iter().map(String::as_str).collect();
    let specs: Vec<String> = info
        .field("key_specs")
        .list()
        .iter()
        .map(|s| key_spec(s, name))
        .collect();
    let timeout_at = timeout_position(docs, flags.contains(&"blocking"), name);
    let variable = info.field("key_specs").list().iter().any(|s| {
        s.field("flags")
            .list()
            .iter()
            .any(|f| f.str() == "variable_flags")
    });
    assert_eq!(
        variable,
        tamer.key_flags.is_some(),
        "table.toml: '{name}' needs key_flags exactly when a key spec has variable_flags"
    );
    let rendered_info = both(|r| r.info(info));
    let rendered_docs = both(|r| r.node(docs, ""));
    format!(
        "Command {{\n        name: {name:?},\n        arity: {},\n        flags: {},\n        \
         acl: {},\n        key_specs: &[{}],\n        subcommands: {subcommands},\n        \
         run: {},\n        tamer: {},\n        block_timeout_at: {timeout_at},\n        \
         key_flags: {},\n        acl_id: {},\n        \
         info: [{}, {}],\n        docs: [{}, {}],\n    }}",
        info.field("arity").int(),
        bits("Flags", "command flag", COMMAND_FLAGS, &flags, name),
        bits("AclCategories", "ACL category", ACL_CATEGORIES, &acl, name),
        specs.join(", "),
        tamer.run,
        bits("TamerFlags", "tamer flag", TAMER_FLAGS, &tamer_flags, name),
        tamer
            .key_flags
            .as_ref()
            .map_or("None".to_string(), |f| format!("Some({f})")),
        tamer.acl_id,
        bytes_literal(&rendered_info[0]),
        bytes_literal(&rendered_info[1]),
        bytes_literal(&rendered_docs[0]),
        bytes_literal(&rendered_docs[1]),
    )
}

/// Where a blocking command's timeout is: its argument named `timeout` in the docs, as an
/// index (when only single arguments come before it) or -1 (when it is the last); 0 for a
/// command that does not block.
fn timeout_position(docs: &Node, blocking: bool, name: &str) -> i64 {
    if !blocking {
        return 0;
    }
    let args = docs.field("arguments").list();
    let i = args
        .iter()
        .position(|a| a.field("name").str() == "timeout")
        .unwrap_or_else(|| panic!("meta.json: blocking '{name}' has no timeout argument"));
    if i + 1 == args.len() {
        return -1;
    }
    assert!(
        args[..i].iter().all(|a| a.get("flags").is_none()),
        "meta.json: '{name}''s timeout follows an optional or repeated argument"
    );
    i as i64 + 1
}

/// What the generation keeps between entries: tamer's entries not yet used, the session
/// operations met, and the statics of subcommands written so far.
struct Generation {
    tamer: BTreeMap<String, Tamer>,
    acl_ids: BTreeMap<String, usize>,
    session_ops: std::collections::BTreeSet<String>,
    statics: String,
}

impl Generation {
    /// tamer's side of `name`, taken once.
    fn take(&mut self, name: &str) -> Tamer {
        let mut t = self
            .tamer
            .remove(name)
            .unwrap_or_else(|| panic!("table.toml has no '{name}'"));
        t.acl_id = *self
            .acl_ids
            .get(name)
            .unwrap_or_else(|| panic!("src/acl/universe.rs has no '{name}'"));
        record_op(&t, &mut self.session_ops);
        t
    }

    /// One command's entry, its subcommands' static written first.
    fn command(&mut self, name: &str, node: &Node) -> String {
        let info = node.field("info");
        let docs = node.field("docs");
        let mut subs: Vec<&Node> = info.field("subcommands").list().iter().collect();
        subs.sort_by(|a, b| a.field("name").str().cmp(b.field("name").str()));
        let subs_static = if subs.is_empty() {
            "&[]".to_string()
        } else {
            let ident = format!("SUBCOMMANDS_{}", name.to_ascii_uppercase());
            let mut rows = Vec::new();
            for sub in &subs {
                let full = sub.field("name").str();
                let sub_docs = docs
                    .get("subcommands")
                    .and_then(|d| d.get(full))
                    .unwrap_or_else(|| panic!("meta.json: no docs of '{full}'"));
                let t = self.take(full);
                rows.push(entry(sub, sub_docs, &t, "&[]"));
            }
            let _ = writeln!(
                self.statics,
                "static {ident}: [Command; {}] = [\n    {},\n];\n",
                rows.len(),
                rows.join(",\n    ")
            );
            format!("&{ident}")
        };
        let t = self.take(name);
        entry(info, docs, &t, &subs_static)
    }
}

/// FNV-1a of `name` with its ASCII letters lowercased, from `seed`: the table's lookup hash
/// (the same function is in `src/commands/table.rs`).
fn name_hash(seed: u64, name: &[u8]) -> u64 {
    name.iter().fold(seed, |h, b| {
        (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A seed and a power-of-two slot count under which every name hashes to its own slot, and
/// the slots (each a command's index, or `u8::MAX`): a lookup is one hash and one compare.
fn perfect_hash(names: &[&String]) -> (u64, Vec<u8>) {
    assert!(names.len() < usize::from(u8::MAX), "a slot is a u8");
    let mut slots_len = names.len().next_power_of_two() * 2;
    // Bounded: a table 64 × the names always has a collision-free seed among the first few.
    for _ in 0..6 {
        for seed in 0..10_000u64 {
            let seed = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut slots = vec![u8::MAX; slots_len];
            let fits = names.iter().enumerate().all(|(i, n)| {
                let at = (name_hash(seed, n.as_bytes()) as usize) & (slots_len - 1);
                let free = slots[at] == u8::MAX;
                slots[at] = i as u8;
                free
            });
            if fits {
                return (seed, slots);
            }
        }
        slots_len *= 2;
    }
    panic!("no perfect hash for {} names", names.len());
}

/// The generated sources (see the module docs): the flag constants and `SessionOp` (for
/// `commands/spec.rs`), and the table (for `commands/table.rs`).
pub fn generate(meta_json: &str, table_toml: &str, universe_rs: &str) -> (String, String) {
    let mut meta = match serde_json::from_str::<Node>(meta_json).expect("meta.json parses") {
        Node::Map(pairs) => pairs,
        other => panic!("meta.json is not a map of commands: {other:?}"),
    };
    meta.sort_by(|a, b| a.0.cmp(&b.0));
    let mut generation = Generation {
        tamer: tamer_entries(table_toml),
        acl_ids: acl_ids(universe_rs),
        session_ops: std::collections::BTreeSet::new(),
        statics: String::new(),
    };
    let tops: Vec<String> = meta
        .iter()
        .map(|(name, node)| generation.command(name, node))
        .collect();
    assert!(
        generation.tamer.is_empty(),
        "table.toml names commands meta.json lacks: {:?}",
        generation.tamer.keys().collect::<Vec<_>>()
    );
    let header = "// @generated by build.rs from meta.json and table.toml.\n\n";
    let mut out = String::from(header) + &generation.statics;
    let _ = writeln!(
        out,
        "/// Every command tamer serves, sorted by name.\npub static COMMANDS: [Command; {}] = [\n    {},\n];\n",
        tops.len(),
        tops.join(",\n    ")
    );
    let (seed, slots) = perfect_hash(&meta.iter().map(|(n, _)| n).collect::<Vec<_>>());
    let slots: Vec<String> = slots.iter().map(u8::to_string).collect();
    let _ = writeln!(
        out,
        "/// The seed of [`NAME_SLOTS`]' hash.\nconst NAME_SEED: u64 = {seed:#x};\n\
         /// Each name's slot holds its index in [`COMMANDS`] (`u8::MAX`: none).\n\
         static NAME_SLOTS: [u8; {}] = [{}];\n",
        slots.len(),
        slots.join(", ")
    );
    let mut spec = String::from(header);
    constants(&mut spec, "Flags", COMMAND_FLAGS, "Redis's command flag");
    constants(
        &mut spec,
        "AclCategories",
        ACL_CATEGORIES,
        "the ACL category",
    );
    constants(&mut spec, "KeyFlags", KEY_FLAGS, "the key spec flag");
    constants(&mut spec, "TamerFlags", TAMER_FLAGS, "tamer's flag");
    let _ = writeln!(
        spec,
        "/// What a command that runs on the session does (the session matches it).\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq)]\npub enum SessionOp {{"
    );
    for op in &generation.session_ops {
        let _ = writeln!(spec, "    /// The session's `{op}`.\n    {op},");
    }
    let _ = writeln!(spec, "}}");
    (spec, out)
}

fn record_op(t: &Tamer, ops: &mut std::collections::BTreeSet<String>) {
    if let Some(op) = t
        .run
        .strip_prefix("Run::Session(SessionOp::")
        .and_then(|r| r.strip_suffix(')'))
    {
        ops.insert(op.to_string());
    }
}
