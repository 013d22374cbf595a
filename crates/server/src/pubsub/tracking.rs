//! Client-side caching (`CLIENT TRACKING`): which client read which key, and the
//! invalidations a write of it owes them, as Redis's tracking table keeps them.
//!
//! Rules, each tested below:
//! - Default mode: a tracking client's reads remember their keys (by name, whatever the
//!   database, as Redis's table); a write of a remembered key owes each client that
//!   remembered it one invalidation (`NOLOOP`: not the client that wrote it) and forgets the
//!   key for all of them, so a client hears of a key once per read.
//! - `BCAST`: nothing is remembered; a write of a key under one of a client's prefixes owes
//!   it an invalidation, one message per prefix holding the keys a transaction wrote under it
//!   (`NOLOOP`: less the client's own).
//! - A flush owes every tracking client one invalidation with no key, and empties the table.
//! - The table holds at most `tracking-table-max-keys` keys (0: no bound); remembering one
//!   more evicts others first, each owing its clients an invalidation, as Redis's
//!   `trackingLimitUsedSlots`.
//!
//! Reads and writes run on several cores at once, so a read's keys are remembered once its
//! transaction committed, in order with the writes of that transaction; a write another
//! client committed in between is caught by the table's epoch: every batch of written keys
//! gets the next epoch and a place in a ring of recent writes, and a read that began at an
//! epoch older than a recent write of one of its keys is owed that key's invalidation (all
//! its keys', when the ring no longer reaches back that far). An invalidation owed while a
//! command of its client runs is sent after that command's reply (`super::hub`): so a reply
//! that raced a write is always followed by an invalidation, and a cached value is never
//! stale (an invalidation may be spurious under such a race, never missing).
//!
//! Bounds: the keys as above; a client's prefixes at most [`PREFIXES_MAX`]; the clients of a
//! key at most the connections; the ring [`RECENT_MAX`] writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, Weak};

use indexmap::IndexMap;

use crate::resp::Protocol;

/// Prefixes one client registers in `BCAST` mode.
pub const PREFIXES_MAX: usize = 4_096;
/// Keys a transaction's invalidations name before they become one flush-like invalidation
/// of everything (the effects' bound, `super::effects`).
pub const WRITTEN_KEYS_MAX: usize = 1 << 20;
/// Written keys the ring of recent writes remembers (as hashes).
pub const RECENT_MAX: usize = 4_096;

/// How a client tracks (`CLIENT TRACKING ON` and its options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// `REDIRECT`'s client ID (0: none).
    pub redirect: u64,
    /// `BCAST`'s prefixes, in the order given (empty in `BCAST`: every key).
    pub prefixes: Vec<Vec<u8>>,
}

/// A connection as the hub names it: its slot and generation (as the network names
/// connections).
pub type Client = (usize, u32);

/// A `REDIRECT` client as the client registry knows it (`crate::stats::clients`).
pub trait Redirect: Send + Sync + std::fmt::Debug {
    /// Its connection and protocol; `None` once it is closed or killed.
    fn reach(&self) -> Option<(Client, Protocol)>;
}

/// Where a tracking client's invalidations go.
#[derive(Clone, Debug)]
pub struct Target {
    /// The tracking client as the hub names it, and its protocol.
    pub client: Client,
    pub protocol: Protocol,
    /// `REDIRECT`'s client: its ID and its registry entry (gone once it disconnected).
    pub redirect: Option<(u64, Weak<dyn Redirect>)>,
}

#[derive(Debug)]
struct Tracker {
    target: Target,
    mode: Mode,
    /// Its redirect client was gone when an invalidation was due (Redis's
    /// `CLIENT_TRACKING_BROKEN_REDIR`).
    broken: bool,
}

/// What an invalidation names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keys {
    /// These keys, in order.
    Some(Vec<Vec<u8>>),
    /// Every key (a flush): a null.
    All,
}

/// One invalidation owed to a tracking client.
#[derive(Clone, Debug)]
pub struct Notice {
    pub id: u64,
    pub target: Target,
    pub keys: Keys,
}

#[derive(Debug, Default)]
struct Inner {
    /// Key → the IDs of the clients that read it since it was last invalidated (clients
    /// gone or no longer tracking are dropped when the key is invalidated, as Redis's).
    keys: IndexMap<Vec<u8>, BTreeSet<u64>>,
    /// The IDs in `keys`, all keys together (`tracking_total_items`).
    items: usize,
    trackers: HashMap<u64, Tracker>,
    /// `BCAST` prefix → its clients.
    prefixes: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    /// xorshift state of the eviction's choice.
    rng: u64,
    /// Recent writes: (epoch, hash of the key), oldest first.
    recent: std::collections::VecDeque<(u64, u64)>,
    /// Every write forgotten by the ring is at most this epoch.
    forgotten_epoch: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct Tracking {
    inner: Mutex<Inner>,
    /// Clients tracking now, read without the lock (writes owe nothing when 0).
    active: AtomicUsize,
    /// The epoch of the last batch of written keys.
    epoch: AtomicU64,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            inner: Mutex::new(Inner {
                rng: 0x9e37_79b9_7f4a_7c15,
                ..Inner::default()
            }),
            active: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
        }
    }
}

/// `INFO`'s figures of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub clients: usize,
    pub keys: usize,
    pub items: usize,
    pub prefixes: usize,
}

/// When a transaction that read keys began: the epoch it took, and the epochs of its own
/// batches of writes (not races).
#[derive(Clone, Copy, Debug)]
pub struct Since<'a> {
    pub epoch: u64,
    pub own: &'a [u64],
}

/// What `CLIENT TRACKINGINFO` shows of a tracking client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub mode: Mode,
    pub broken: bool,
}

impl Tracking {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Some client tracks (read without the lock).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// Client `id` tracks in `mode` from now on (its prefixes added to those it had, in
    /// `BCAST`; the caller checked the mode against the one it had).
    pub fn enable(&self, id: u64, target: Target, mode: Mode) {
        let mut inner = self.lock();
        for p in &mode.prefixes {
            inner.prefixes.entry(p.clone()).or_default().insert(id);
        }
        match inner.trackers.get_mut(&id) {
            Some(t) => {
                let mut prefixes = std::mem::take(&mut t.mode.prefixes);
                for p in &mode.prefixes {
                    if !prefixes.contains(p) {
                        prefixes.push(p.clone());
                    }
                }
                t.mode = Mode { prefixes, ..mode };
                t.target = target;
                t.broken = false;
            }
            None => {
                inner.trackers.insert(
                    id,
                    Tracker {
                        target,
                        mode,
                        broken: false,
                    },
                );
                self.active.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Client `id` stops tracking (`OFF`, `RESET`, its connection closed). Its IDs left in
    /// the keys' sets are dropped when those keys are invalidated.
    pub fn disable(&self, id: u64) {
        if !self.active() {
            return;
        }
        let mut inner = self.lock();
        let Some(t) = inner.trackers.remove(&id) else {
            return;
        };
        self.active.fetch_sub(1, Ordering::Relaxed);
        for p in &t.mode.prefixes {
            if let Some(set) = inner.prefixes.get_mut(p) {
                set.remove(&id);
                if set.is_empty() {
                    inner.prefixes.remove(p);
                }
            }
        }
    }

    /// Client `id`'s mode now (`None`: not tracking).
    pub fn info(&self, id: u64) -> Option<Info> {
        let inner = self.lock();
        inner.trackers.get(&id).map(|t| Info {
            mode: t.mode.clone(),
            broken: t.broken,
        })
    }

    /// Client `id` now speaks `protocol` (`HELLO`).
    pub fn set_protocol(&self, id: u64, protocol: Protocol) {
        if let Some(t) = self.lock().trackers.get_mut(&id) {
            t.target.protocol = protocol;
        }
    }

    /// Client `id`'s redirect client was gone when an invalidation was due.
    pub fn mark_broken(&self, id: u64) {
        if let Some(t) = self.lock().trackers.get_mut(&id) {
            t.broken = true;
        }
    }

    /// The epoch now: a transaction takes it before it reads (see the module docs).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Remembers that client `id` read `keys` in a transaction `since` says: the
    /// invalidations owed to it for those keys others wrote since, and to others for the
    /// keys evicted to keep `max_keys` (0: no bound).
    pub fn remember(
        &self,
        id: u64,
        keys: &[Vec<u8>],
        since: Since<'_>,
        max_keys: u64,
    ) -> Vec<Notice> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let mut notices = Vec::new();
        let Some(t) = inner.trackers.get(&id) else {
            return notices;
        };
        let raced: Vec<&Vec<u8>> = if since.epoch < inner.forgotten_epoch {
            keys.iter().collect()
        } else {
            let recent: Vec<u64> = (inner.recent.iter().rev())
                .take_while(|(epoch, _)| *epoch > since.epoch)
                .filter(|(epoch, _)| !since.own.contains(epoch))
                .map(|(_, hash)| *hash)
                .collect();
            let raced = keys.iter().filter(|k| recent.contains(&key_hash(k)));
            raced.collect()
        };
        for key in raced {
            notices.push(Notice {
                id,
                target: t.target.clone(),
                keys: Keys::Some(vec![key.clone()]),
            });
        }
        for key in keys {
            let set = match inner.keys.get_mut(&key[..]) {
                Some(set) => set,
                None => inner.keys.entry(key.clone()).or_default(),
            };
            if set.insert(id) {
                inner.items += 1;
            }
        }
        evict(inner, &mut notices, max_keys);
        notices
    }

    /// The invalidations owed for `keys` (distinct), written by client `writer` (`None`: the
    /// server, expiring them); the keys are forgotten, and the batch takes the next epoch
    /// (returned; `None` when nobody tracks).
    pub fn written(&self, keys: &[Vec<u8>], writer: Option<u64>) -> (Option<u64>, Vec<Notice>) {
        if !self.active() || keys.is_empty() {
            return (None, Vec::new());
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        let epoch = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        for key in keys {
            if inner.recent.len() == RECENT_MAX {
                let (old, _) = inner.recent.pop_front().expect("full");
                inner.forgotten_epoch = old;
            }
            inner.recent.push_back((epoch, key_hash(key)));
        }
        let mut notices = Vec::new();
        for key in keys {
            if let Some(ids) = inner.keys.swap_remove(&key[..]) {
                inner.items -= ids.len();
                owe_key(inner, &mut notices, key, ids, writer);
            }
        }
        broadcast(inner, &mut notices, keys, writer);
        (Some(epoch), notices)
    }

    /// The invalidations a flush owes: one with no key to every tracking client; the table
    /// is emptied.
    pub fn flushed(&self) -> Vec<Notice> {
        if !self.active() {
            return Vec::new();
        }
        let mut inner = self.lock();
        inner.keys.clear();
        inner.items = 0;
        let mut ids: Vec<u64> = inner.trackers.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter()
            .map(|id| Notice {
                id,
                target: inner.trackers[&id].target.clone(),
                keys: Keys::All,
            })
            .collect()
    }

    /// `INFO`'s figures.
    pub fn figures(&self) -> Figures {
        let inner = self.lock();
        Figures {
            clients: inner.trackers.len(),
            keys: inner.keys.len(),
            items: inner.items,
            prefixes: inner.prefixes.len(),
        }
    }
}

/// Evicts keys past `max_keys` (0: no bound), each owing its clients an invalidation (the
/// victims chosen at random, as Redis's).
fn evict(inner: &mut Inner, notices: &mut Vec<Notice>, max_keys: u64) {
    // Bounded: each pass removes one key.
    while max_keys > 0 && inner.keys.len() as u64 > max_keys {
        inner.rng ^= inner.rng << 13;
        inner.rng ^= inner.rng >> 7;
        inner.rng ^= inner.rng << 17;
        let at = (inner.rng % inner.keys.len() as u64) as usize;
        let (key, ids) = inner.keys.swap_remove_index(at).expect("in range");
        inner.items -= ids.len();
        owe_key(inner, notices, &key, ids, None);
    }
}

/// A key's hash in the ring of recent writes.
fn key_hash(key: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// Appends the invalidation of `key` owed to each of `ids` still tracking in the default
/// mode (not `writer` when it asked for `NOLOOP`).
fn owe_key(
    inner: &Inner,
    notices: &mut Vec<Notice>,
    key: &[u8],
    ids: BTreeSet<u64>,
    writer: Option<u64>,
) {
    for id in ids {
        let Some(t) = inner.trackers.get(&id) else {
            continue;
        };
        if t.mode.bcast || (t.mode.noloop && writer == Some(id)) {
            continue;
        }
        notices.push(Notice {
            id,
            target: t.target.clone(),
            keys: Keys::Some(vec![key.to_vec()]),
        });
    }
}

/// Appends the `BCAST` invalidations of `keys` written by `writer`: per prefix that some of
/// them start with, one per client of the prefix, holding those keys (less the writer's own
/// for a `NOLOOP` client).
fn broadcast(inner: &Inner, notices: &mut Vec<Notice>, keys: &[Vec<u8>], writer: Option<u64>) {
    for (prefix, ids) in &inner.prefixes {
        // Sorted and distinct, as Redis's radix tree lists them.
        let under: BTreeSet<&Vec<u8>> = keys.iter().filter(|k| k.starts_with(prefix)).collect();
        let under: Vec<Vec<u8>> = under.into_iter().cloned().collect();
        if under.is_empty() {
            continue;
        }
        for id in ids {
            let t = &inner.trackers[id];
            if t.mode.noloop && writer == Some(*id) {
                continue;
            }
            notices.push(Notice {
                id: *id,
                target: t.target.clone(),
                keys: Keys::Some(under.clone()),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(id: u64) -> Target {
        Target {
            client: (id as usize, id as u32),
            protocol: Protocol::Resp3,
            redirect: None,
        }
    }

    fn keys(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    fn owed(notices: &[Notice]) -> Vec<(u64, Keys)> {
        notices.iter().map(|n| (n.id, n.keys.clone())).collect()
    }

    const NOW: Since<'static> = Since {
        epoch: u64::MAX,
        own: &[],
    };

    fn tracking(modes: &[(u64, Mode)]) -> Tracking {
        let t = Tracking::default();
        for (id, mode) in modes {
            t.enable(*id, target(*id), mode.clone());
        }
        t
    }

    /// Mutation caught: a key reported twice for one read, to a client that did not read
    /// it, or kept after its invalidation.
    #[test]
    fn a_write_owes_each_reader_once_and_forgets_the_key() {
        let t = tracking(&[(1, Mode::default()), (2, Mode::default())]);
        t.remember(1, &keys(&["k", "j"]), NOW, 0);
        t.remember(2, &keys(&["k"]), NOW, 0);
        let (_, n) = t.written(&keys(&["k"]), Some(9));
        let one = Keys::Some(keys(&["k"]));
        assert_eq!(owed(&n), vec![(1, one.clone()), (2, one)]);
        assert!(t.written(&keys(&["k"]), Some(9)).1.is_empty());
        assert_eq!(t.figures().keys, 1);
        assert_eq!(t.figures().items, 1);
    }

    /// Mutation caught: `NOLOOP` reporting the writer's own write, or keeping the key for
    /// the others.
    #[test]
    fn noloop_spares_the_writer_and_still_forgets() {
        let noloop = Mode {
            noloop: true,
            ..Mode::default()
        };
        let t = tracking(&[(1, noloop), (2, Mode::default())]);
        t.remember(1, &keys(&["k"]), NOW, 0);
        t.remember(2, &keys(&["k"]), NOW, 0);
        assert_eq!(owed(&t.written(&keys(&["k"]), Some(1)).1).len(), 1);
        assert!(t.written(&keys(&["k"]), Some(2)).1.is_empty());
    }

    /// Mutation caught: a prefix matching keys it does not start, keys unsorted or
    /// repeated, a `BCAST` client's reads remembered.
    #[test]
    fn bcast_owes_one_sorted_message_per_prefix() {
        let bcast = Mode {
            bcast: true,
            prefixes: keys(&["a", "b"]),
            ..Mode::default()
        };
        let t = tracking(&[(1, bcast)]);
        let (_, n) = t.written(&keys(&["b2", "a2", "c", "a1"]), None);
        let want = vec![
            (1, Keys::Some(keys(&["a1", "a2"]))),
            (1, Keys::Some(keys(&["b2"]))),
        ];
        assert_eq!(owed(&n), want);
        assert_eq!(t.figures().prefixes, 2);
        t.disable(1);
        assert_eq!(t.figures().prefixes, 0);
        assert!(t.written(&keys(&["a1"]), None).1.is_empty());
    }

    /// Mutation caught: a flush that skips a mode or leaves keys in the table.
    #[test]
    fn a_flush_owes_every_tracker_a_null() {
        let bcast = Mode {
            bcast: true,
            prefixes: keys(&[""]),
            ..Mode::default()
        };
        let t = tracking(&[(1, Mode::default()), (2, bcast)]);
        t.remember(1, &keys(&["k"]), NOW, 0);
        assert_eq!(owed(&t.flushed()), vec![(1, Keys::All), (2, Keys::All)]);
        assert_eq!(t.figures().keys, 0);
    }

    /// Mutation caught: a write that raced a read (after it began, before it was
    /// remembered) not reported, the reader's own writes reported as races, or the ring's
    /// forgotten past treated as no race.
    #[test]
    fn a_write_since_the_read_began_is_owed_at_once() {
        let t = tracking(&[(1, Mode::default()), (2, Mode::default())]);
        let began = t.epoch();
        let (own, _) = t.written(&keys(&["mine"]), Some(1));
        t.written(&keys(&["k"]), Some(2));
        let since = Since {
            epoch: began,
            own: &[own.unwrap()],
        };
        let n = t.remember(1, &keys(&["k", "mine", "j"]), since, 0);
        assert_eq!(owed(&n), vec![(1, Keys::Some(keys(&["k"])))]);
        for i in 0..RECENT_MAX {
            t.written(&[format!("x{i}").into_bytes()], Some(2));
        }
        let since = Since {
            epoch: began,
            own: &[],
        };
        assert_eq!(t.remember(1, &keys(&["j", "z"]), since, 0).len(), 2);
    }

    /// Mutation caught: the bound not kept, or an evicted key's readers not told.
    #[test]
    fn eviction_keeps_the_bound_and_invalidates() {
        let t = tracking(&[(1, Mode::default())]);
        let mut told = 0;
        for i in 0..50 {
            told += t.remember(1, &[format!("k{i}").into_bytes()], NOW, 8).len();
        }
        assert_eq!(t.figures().keys, 8);
        assert_eq!(told, 42);
    }

    /// Mutation caught: re-enabling dropping the prefixes a client had, or keeping its old
    /// flags.
    #[test]
    fn enabling_again_adds_prefixes_and_replaces_flags() {
        let t = Tracking::default();
        let mode = |p: &str, noloop| Mode {
            bcast: true,
            noloop,
            prefixes: keys(&[p]),
            ..Mode::default()
        };
        t.enable(1, target(1), mode("a", true));
        t.enable(1, target(1), mode("b", false));
        let info = t.info(1).unwrap();
        assert_eq!(info.mode.prefixes, keys(&["a", "b"]));
        assert!(!info.mode.noloop);
        assert_eq!(t.figures().clients, 1);
    }
}
