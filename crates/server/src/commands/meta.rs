//! Command metadata, keyed by name, for `COMMAND`, `COMMAND INFO`, `COMMAND DOCS`,
//! `COMMAND COUNT` and `COMMAND LIST`: arity, flags, first/last key and step, ACL
//! categories, tips, key specs and the served subcommands (INFO); summary, since, group,
//! complexity, history and arguments (DOCS). redis-cli 7 builds its hints from `COMMAND DOCS`;
//! cluster clients find keys through the key specs and first/last/step.
//!
//! The table is `meta.json`, written by `scripts/gen-command-meta.py` from a redis-server
//! 7.0 (the behaviour tamer follows) for exactly the commands tamer serves, and parsed once,
//! at the first `COMMAND` (≈ 70 KB; order-preserving, since clients read maps in Redis's
//! order). Its encoding: an object is a RESP map, an array an array, a string a bulk string, a
//! number an integer; a map's `flags` and `doc_flags` arrays are sets of simple strings and
//! its `history` array a set (Redis 7.0's reply types). The test below fails when a served command has no
//! entry or an entry's arity differs from the command table's: a command added to
//! `COMMANDS` needs its entry (`NAMES` in the script).

use std::sync::OnceLock;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::config::glob_match;
use crate::resp::{write, Protocol};

/// A JSON value with its maps' order kept.
#[derive(Clone, Debug)]
pub enum Node {
    Int(i64),
    Str(String),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The value of `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Node::Int(n) => *n,
            _ => 0,
        }
    }

    pub fn list(&self) -> &[Node] {
        match self {
            Node::List(items) => items,
            _ => &[],
        }
    }

    fn str(&self) -> &str {
        match self {
            Node::Str(s) => s,
            _ => "",
        }
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

/// The table: (name, {info, docs}) in name order.
pub fn table() -> &'static [(String, Node)] {
    static TABLE: OnceLock<Vec<(String, Node)>> = OnceLock::new();
    TABLE.get_or_init(
        || match serde_json::from_str::<Node>(include_str!("meta.json")) {
            Ok(Node::Map(pairs)) => pairs,
            other => panic!("meta.json is not a map of commands: {other:?}"),
        },
    )
}

/// The entry of `name` (any case; `container|sub` finds a subcommand's info): (info, docs).
pub fn find(name: &[u8]) -> Option<(&'static Node, Option<&'static Node>)> {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let (top, sub) = match lower.split_once('|') {
        Some((top, _)) => (top, Some(lower.as_str())),
        None => (lower.as_str(), None),
    };
    let (_, entry) = table().iter().find(|(n, _)| n == top)?;
    let info = entry.get("info")?;
    let docs = entry.get("docs");
    match sub {
        None => Some((info, docs)),
        Some(full) => {
            let info = info
                .get("subcommands")?
                .list()
                .iter()
                .find(|s| s.get("name").map(Node::str) == Some(full))?;
            let docs = docs.and_then(|d| d.get("subcommands")?.get(full));
            Some((info, docs))
        }
    }
}

/// The arity of the served command `name` (lowercase), from its metadata.
pub fn arity(name: &[u8]) -> Option<i32> {
    if !is_served(name) {
        return None;
    }
    let (info, _) = find(name)?;
    i32::try_from(info.get("arity")?.int()).ok()
}

/// A node as RESP: `key` is the map key it is the value of (`flags`, `history` are sets).
fn write_node(out: &mut Vec<u8>, node: &Node, key: &str, protocol: Protocol) {
    match node {
        Node::Int(n) => write::integer(out, *n),
        Node::Str(s) => write::bulk(out, s.as_bytes()),
        Node::List(items) if key == "flags" || key == "doc_flags" => {
            write::set(out, items.len(), protocol);
            for item in items {
                write::simple(out, item.str());
            }
        }
        Node::List(items) => {
            if key == "history" {
                write::set(out, items.len(), protocol);
            } else {
                write::array(out, items.len());
            }
            for item in items {
                write_node(out, item, "", protocol);
            }
        }
        Node::Map(pairs) => {
            write::map(out, pairs.len(), protocol);
            for (k, v) in pairs {
                write::bulk(out, k.as_bytes());
                write_node(out, v, k, protocol);
            }
        }
    }
}

/// One command's `COMMAND INFO` array (Redis 7.0's ten fields).
fn write_info(out: &mut Vec<u8>, info: &Node, protocol: Protocol) {
    let field = |k: &str| info.get(k).cloned().unwrap_or(Node::List(Vec::new()));
    write::array(out, 10);
    write::bulk(out, field("name").str().as_bytes());
    write::integer(out, field("arity").int());
    let simple_set = |out: &mut Vec<u8>, node: &Node| {
        write::set(out, node.list().len(), protocol);
        for f in node.list() {
            write::simple(out, f.str());
        }
    };
    simple_set(out, &field("flags"));
    for k in ["first_key", "last_key", "step"] {
        write::integer(out, field(k).int());
    }
    simple_set(out, &field("acl"));
    let tips = field("tips");
    write::set(out, tips.list().len(), protocol);
    for t in tips.list() {
        write::bulk(out, t.str().as_bytes());
    }
    // Redis 7.0 replies the key specs and the subcommands as sets too.
    let specs = field("key_specs");
    write::set(out, specs.list().len(), protocol);
    for spec in specs.list() {
        write_node(out, spec, "", protocol);
    }
    let subs = field("subcommands");
    write::set(out, subs.list().len(), protocol);
    for s in subs.list() {
        write_info(out, s, protocol);
    }
}

/// The served commands that have an entry, by name.
fn served() -> Vec<(&'static str, &'static Node, Option<&'static Node>)> {
    crate::commands::all_command_names()
        .into_iter()
        .filter_map(|n| find(n.as_bytes()).map(|(i, d)| (n, i, d)))
        .collect()
}

/// `COMMAND [COUNT | LIST [FILTERBY ...] | INFO [name...] | DOCS [name...]]`.
pub fn command(protocol: Protocol, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let sub = args.get(1).map(|s| s.to_ascii_lowercase());
    match (sub.as_deref(), args.len()) {
        (None, _) => {
            let all = served();
            write::array(out, all.len());
            for (_, info, _) in all {
                write_info(out, info, protocol);
            }
        }
        (Some(b"count"), 2) => {
            write::integer(out, crate::commands::all_command_names().len() as i64)
        }
        (Some(b"list"), 2 | 5) => list(args, out),
        (Some(b"info"), _) => info(protocol, &args[2..], out),
        (Some(b"docs"), _) => docs(protocol, &args[2..], out),
        (Some(s @ (b"count" | b"list")), _) => {
            let s = String::from_utf8_lossy(s);
            write::error(
                out,
                &format!("ERR wrong number of arguments for 'command|{s}' command"),
            );
        }
        (Some(_), _) => {
            let s = String::from_utf8_lossy(&args[1]);
            write::error(
                out,
                &format!("ERR unknown subcommand '{s}'. Try COMMAND HELP."),
            );
        }
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`.
fn list(args: &[Vec<u8>], out: &mut Vec<u8>) {
    let names = crate::commands::all_command_names();
    let names: Vec<&str> = match args.get(2..5) {
        None => names,
        Some([by, kind, value]) if by.eq_ignore_ascii_case(b"filterby") => {
            match &kind.to_ascii_lowercase()[..] {
                b"module" => Vec::new(),
                b"pattern" => names
                    .into_iter()
                    .filter(|n| glob_match(value, n.as_bytes(), true))
                    .collect(),
                b"aclcat" => {
                    let cat = format!("@{}", String::from_utf8_lossy(value).to_ascii_lowercase());
                    served()
                        .into_iter()
                        .filter(|(_, info, _)| {
                            info.get("acl")
                                .is_some_and(|a| a.list().iter().any(|c| c.str() == cat))
                        })
                        .map(|(n, _, _)| n)
                        .collect()
                }
                _ => return write::error(out, "ERR syntax error"),
            }
        }
        Some(_) => return write::error(out, "ERR syntax error"),
    };
    write::array(out, names.len());
    for name in names {
        write::bulk(out, name.as_bytes());
    }
}

/// `COMMAND INFO [name...]`: each name's info or a null; none: every command's.
fn info(protocol: Protocol, names: &[Vec<u8>], out: &mut Vec<u8>) {
    if names.is_empty() {
        return command(protocol, &[b"command".to_vec()], out);
    }
    write::array(out, names.len());
    for name in names {
        match find(name).filter(|_| is_served(name)) {
            Some((info, _)) => write_info(out, info, protocol),
            None => write::null(out, protocol),
        }
    }
}

/// Whether `name` (or its container, for `container|sub`) is served.
fn is_served(name: &[u8]) -> bool {
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let top = lower.split('|').next().unwrap_or_default();
    crate::commands::all_command_names().contains(&top)
}

/// `COMMAND DOCS [name...]`: a map of each known name's docs; none: every command's.
fn docs(protocol: Protocol, names: &[Vec<u8>], out: &mut Vec<u8>) {
    let found: Vec<(String, &Node)> = if names.is_empty() {
        served()
            .into_iter()
            .filter_map(|(n, _, d)| Some((n.to_string(), d?)))
            .collect()
    } else {
        names
            .iter()
            .filter(|n| is_served(n))
            .filter_map(|n| {
                let (_, docs) = find(n)?;
                Some((String::from_utf8_lossy(n).to_ascii_lowercase(), docs?))
            })
            .collect()
    };
    write::map(out, found.len(), protocol);
    for (name, d) in found {
        write::bulk(out, name.as_bytes());
        write_node(out, d, "", protocol);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a served command without metadata, an entry for a command tamer does not
    /// serve, or an entry whose arity differs from the command table's (which the other
    /// engineers' new `COMMANDS` rows will trip until their entries are added).
    #[test]
    fn every_served_command_has_metadata_with_its_arity() {
        let served_names = crate::commands::all_command_names();
        for name in &served_names {
            let (info, docs) = find(name.as_bytes())
                .unwrap_or_else(|| panic!("'{name}' has no entry in meta.json"));
            assert!(docs.is_some(), "'{name}' has no docs");
            assert_eq!(info.get("name").map(Node::str), Some(*name));
            if let Some(c) = crate::commands::lookup(name.as_bytes()) {
                let arity = info.get("arity").map(Node::int);
                assert_eq!(arity, Some(i64::from(c.arity)), "arity of '{name}'");
            }
        }
        for (name, _) in table() {
            assert!(
                served_names.contains(&name.as_str()),
                "meta.json has '{name}', which tamer does not serve"
            );
        }
    }

    /// Catches a COMMAND INFO reply with the wrong shape: not ten fields, sets not sets in
    /// RESP3, a key spec lost, or subcommands listed that tamer does not serve.
    #[test]
    fn command_info_has_redis_shape() {
        let mut out = Vec::new();
        command(
            Protocol::Resp3,
            &[
                b"command".to_vec(),
                b"info".to_vec(),
                b"mset".to_vec(),
                b"nosuch".to_vec(),
            ],
            &mut out,
        );
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("*2\r\n*10\r\n$4\r\nmset\r\n:-3\r\n~2\r\n+write\r\n"),
            "{text}"
        );
        assert!(text.contains("$7\r\nkeystep\r\n:2\r\n"), "{text}");
        assert!(text.ends_with("~0\r\n_\r\n"), "{text}");
        let mut out = Vec::new();
        command(
            Protocol::Resp2,
            &[b"command".to_vec(), b"info".to_vec(), b"client".to_vec()],
            &mut out,
        );
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.contains("client|kill") && !text.contains("client|pause"),
            "{text}"
        );
        let mut out = Vec::new();
        command(
            Protocol::Resp2,
            &[b"command".to_vec(), b"docs".to_vec(), b"get".to_vec()],
            &mut out,
        );
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("*2\r\n$3\r\nget\r\n*"), "{text}");
        assert!(text.contains("Get the value of a key"), "{text}");
    }
}
