//! Prefetch on dispatch (NeBuLa): before a job runs its requests one by one, the index and
//! record pages of every key they name (the command table's key specs find them) are read
//! into the cache with their misses overlapped ([`tamer_store::DbHandle::prefetch`]), so a
//! pipelined batch of requests on cold keys pays about one device latency instead of one per
//! request. A batch naming fewer than two keys is not prefetched (its one access would miss
//! all the same).

use std::sync::atomic::{AtomicU64, Ordering};

use tamer_store::DbHandle;

use crate::commands::spec::{AclCategories, Command};
use crate::keyspace::store_key;

/// Keys one batch prefetches at most.
pub const BATCH_KEYS_MAX: usize = 256;

/// Whether a batch is prefetched: only when the cache missed since the last batch was
/// asked about. A batch whose pages are all in DRAM gains nothing from a prefetch and pays
/// a second lookup of every key; once anything misses (a prefetch skipped, then its batch
/// missed, or any other access), the next batches are prefetched again. Shared by every
/// core: the snapshot is the cache's miss count when the last batch was asked about.
#[derive(Debug, Default)]
pub struct Gate {
    misses_seen: AtomicU64,
}

impl Gate {
    /// Whether to prefetch now, the cache having missed `misses_total` times since open.
    pub fn admit(&self, misses_total: u64) -> bool {
        let seen = self.misses_seen.swap(misses_total, Ordering::Relaxed);
        worth(seen, misses_total)
    }
}

/// The policy, a pure function of the snapshot: prefetch when the cache's miss count moved
/// since the last batch was asked about (`seen`, then `now`).
pub fn worth(seen: u64, now: u64) -> bool {
    now != seen
}

/// Prefetches the keys `batch`'s requests name, in namespace `namespace` (the client's
/// database when the batch starts: a `SELECT` within it makes later keys' prefetch miss its
/// mark, which costs nothing but the wasted reads), when `gate` admits it.
pub fn batch(handle: &DbHandle, gate: &Gate, namespace: u32, batch: &[Vec<Vec<u8>>]) {
    if let [only] = batch {
        // One request of one key at most: nothing to overlap (and nothing to allocate).
        let command = crate::commands::table::lookup_request(only);
        if command.is_none_or(|c| !prefetched(c) || c.names_one_key_at_most()) {
            return;
        }
    }
    if !gate.admit(handle.cache().misses_total()) {
        return;
    }
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

/// Whether prefetch reads `command`'s keys: the string and keyspace commands, whose key's
/// record is what they read. A collection's record is only its descriptor: the tree pages its
/// command reads next are not known before it runs.
fn prefetched(command: &Command) -> bool {
    let string_or_keyspace = AclCategories(AclCategories::STRING.0 | AclCategories::KEYSPACE.0);
    command.acl.0 & string_or_keyspace.0 != 0
}

/// The keys request `args` names, as its command's key specs find them (none for a request
/// the table does not know, whose arity is wrong, or whose keys prefetch leaves alone).
pub fn keys_of(args: &[Vec<u8>]) -> impl Iterator<Item = &[u8]> {
    let keys = crate::commands::table::lookup_request(args)
        .filter(|c| prefetched(c) && c.arity_fits(args.len()))
        .and_then(|c| c.keys(args, true).ok())
        .unwrap_or_default();
    keys.into_iter().map(|(i, _)| args[i].as_slice())
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
    /// short request read past its end, a collection's command prefetched.
    #[test]
    fn keys_are_found_where_redis_puts_them() {
        assert_eq!(keys(&["SET", "k", "v", "EX", "10"]), ["k"]);
        assert_eq!(keys(&["mget", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(keys(&["rename", "a", "b"]), ["a", "b"]);
        assert_eq!(keys(&["copy", "a", "b", "DB", "2"]), ["a", "b"]);
        assert!(keys(&["ping", "x"]).is_empty());
        assert!(keys(&["get"]).is_empty());
        // A wrong arity names nothing: the gate refuses the request.
        assert!(keys(&["rename", "a"]).is_empty());
        // A collection's command is left to run (its tree pages are not known yet).
        assert!(keys(&["hset", "h", "f", "v"]).is_empty());
        assert!(keys(&["zunionstore", "d", "2", "a", "b"]).is_empty());
        assert_eq!(keys(&["del", "a", "b"]), ["a", "b"]);
        assert!(keys(&[]).is_empty());
    }

    /// Mutations caught: prefetching while nothing misses (the policy always true), never
    /// prefetching again after a quiet spell (the snapshot not updated, or compared the
    /// wrong way), a miss between two batches ignored.
    #[test]
    fn a_batch_is_prefetched_only_after_a_miss() {
        assert!(!worth(7, 7), "nothing missed since the last batch");
        assert!(worth(7, 8), "a miss since the last batch");
        let gate = Gate::default();
        assert!(!gate.admit(0), "a cache that never missed");
        assert!(gate.admit(3), "three misses since");
        assert!(!gate.admit(3), "none since the last batch");
        assert!(!gate.admit(3));
        assert!(gate.admit(4), "one more miss");
        assert!(!gate.admit(4));
    }
}
