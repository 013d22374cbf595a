//! Prefetch on dispatch (seed 004): before a job runs its requests one by one, the index and
//! record pages of every key they name are read into the cache with their misses overlapped
//! ([`tamer_store::DbHandle::prefetch`]), so a pipelined batch of requests on cold keys pays
//! about one device latency instead of one per request. A batch naming fewer than two keys is
//! not prefetched (its one access would miss all the same).

use tamer_store::DbHandle;

use crate::keyspace::store_key;

/// Keys one batch prefetches at most.
pub const BATCH_KEYS_MAX: usize = 256;

/// Prefetches the keys `batch`'s requests name, in namespace `namespace` (the client's
/// database when the batch starts: a `SELECT` within it makes later keys' prefetch miss its
/// mark, which costs nothing but the wasted reads).
pub fn batch(handle: &DbHandle, namespace: u32, batch: &[Vec<Vec<u8>>]) {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for args in batch {
        for key in keys_of(args) {
            if keys.len() == BATCH_KEYS_MAX {
                break;
            }
            keys.push(store_key(namespace, key));
        }
    }
    if keys.len() < 2 {
        return;
    }
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    // Best effort: the requests that follow report any error themselves.
    let _ = handle.prefetch(&refs);
}

/// The keys request `args` names (Redis's first key, last key and step for the commands
/// that take keys; none for the others).
pub fn keys_of(args: &[Vec<u8>]) -> impl Iterator<Item = &[u8]> {
    let (first, last, step) = match args.first() {
        Some(name) => key_spec(name),
        None => (0, 0, 1),
    };
    let end = if last < 0 {
        (args.len() as i64 + 1 + last).max(0) as usize
    } else {
        (last as usize + 1).min(args.len())
    };
    let first = if first == 0 { end } else { first };
    args.get(first..end.max(first))
        .unwrap_or(&[])
        .iter()
        .step_by(step)
        .map(Vec::as_slice)
}

/// (first key, last key (negative: from the end), step) of command `name`; first 0: none.
fn key_spec(name: &[u8]) -> (usize, i64, usize) {
    const ONE: &[&str] = &[
        "get",
        "set",
        "setnx",
        "setex",
        "psetex",
        "getset",
        "getdel",
        "getex",
        "incr",
        "decr",
        "incrby",
        "decrby",
        "incrbyfloat",
        "append",
        "strlen",
        "getrange",
        "setrange",
        "type",
        "ttl",
        "pttl",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "expiretime",
        "pexpiretime",
        "persist",
        "move",
    ];
    const ALL: &[&str] = &["mget", "del", "unlink", "exists", "touch"];
    const PAIRS: &[&str] = &["mset", "msetnx"];
    const TWO: &[&str] = &["rename", "renamenx", "lcs", "copy"];
    let is = |list: &[&str]| list.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(name));
    if is(ONE) {
        (1, 1, 1)
    } else if is(ALL) {
        (1, -1, 1)
    } else if is(PAIRS) {
        (1, -1, 2)
    } else if is(TWO) {
        (1, 2, 1)
    } else {
        (0, 0, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn keys(words: &[&str]) -> Vec<String> {
        let a = args(words);
        keys_of(&a)
            .map(|k| String::from_utf8(k.to_vec()).unwrap())
            .collect()
    }

    /// Mutations caught: the value of SET taken for a key, MSET's values taken for keys,
    /// MGET's keys after the first dropped, a key found in a command that names none, a
    /// short request read past its end.
    #[test]
    fn keys_are_found_where_redis_puts_them() {
        assert_eq!(keys(&["SET", "k", "v", "EX", "10"]), ["k"]);
        assert_eq!(keys(&["mget", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(keys(&["rename", "a", "b"]), ["a", "b"]);
        assert_eq!(keys(&["copy", "a", "b", "DB", "2"]), ["a", "b"]);
        assert!(keys(&["ping", "x"]).is_empty());
        assert!(keys(&["get"]).is_empty());
        assert!(keys(&["rename", "a"]) == ["a"]);
        assert!(keys(&[]).is_empty());
    }
}
