//! How the server's keyspace lives in the store: Redis's 16 databases, typed values with
//! expiry times, all in `tamer_store` keys and values, changed inside store transactions (so
//! a command, or a whole `MULTI`/`EXEC`, is atomic and, in `commit` mode, durable on return).
//!
//! ```text
//! store key    [namespace u32 BE][user key]          namespace 0 is the server's own
//! store value  [kind u8][0 u8][0 u16][expire-at ms u64 LE; 0: none][payload]
//! databases    [0 u32 BE]"databases" -> 16 × [namespace u32 LE][next namespace u32 LE]
//!                                         [reclaim target u32 LE][again u32 LE][cursor u64 LE]
//! key counts   [0 u32 BE]"count"[namespace u32 BE][shard u8] -> [keys i64 LE]
//! ```
//!
//! A database is a namespace named by the `databases` record, so `SWAPDB` swaps two entries
//! (one small transaction, whatever the databases hold) and `FLUSHDB` points its database at a
//! fresh namespace at once. A namespace never comes back once dropped from the map, so every
//! namespace below `next` that the map does not name is dead: [`reclaim_step`] deletes dead
//! keys in the background, a few directory slots per transaction, its progress (the pass's
//! `target` namespace bound and its `cursor` slot) saved in the same transaction, so a crash
//! resumes the pass (see `Engine::scan_slots` for why a slot cursor sees every key).
//!
//! `DBSIZE` is exact and O(1): each namespace's key count is split over [`COUNT_SHARDS`]
//! records (a key's shard by a hash of its name, so concurrent creations rarely lock the same
//! record), changed in the same transaction as the key only when a key is created or removed
//! (an overwrite writes no count); a shard at zero is deleted. Counts include expired keys not
//! yet removed, as Redis's `dbsize` does. Expired keys read as absent (lazy expiry),
//! and every write of an expiry time also records it in the time-ordered [`expiry_index`], in
//! the same transaction, from which the expirer (`crate::keyspace::expiry`) removes keys as they come
//! due (through [`remove_store_key`], so the counts follow).
//! A collection (hash, list, set, sorted set: `crate::keyspace::collection`) is packed into its value
//! while small; past that its value names an ordered tree of the store holding its elements
//! (payload `[1][tree u64 LE]`). Such a tree belongs to its key's value: replacing or removing
//! the value drops the tree (reclaimed in the background), moving it (`RENAME`, `MOVE`) keeps
//! it, and `COPY` copies it.

use tamer_store::{DbError, TreeId, Tx};

use events::Class;
use scope::Scope;

pub(crate) mod blocked;
pub(crate) mod collection;
pub(crate) mod dbmap;
pub(crate) mod events;
pub(crate) mod expiry;
pub mod expiry_index;
pub(crate) mod pause;
pub(crate) mod reclaim;
pub(crate) mod scope;
pub(crate) mod watches;

/// Databases, as Redis's default `databases 16`.
pub const DATABASES: usize = 16;
/// Bytes of a value's header.
pub const HEADER_BYTES: usize = 12;
/// The namespace of the server's own records.
const META: u32 = 0;
const DATABASES_KEY: &[u8] = b"databases";
/// Records each namespace's key count is split over.
pub const COUNT_SHARDS: usize = 32;
/// Directory slots one [`reclaim_step`] visits (at most this many buckets of
/// `tamer_store::BUCKET_CAP` keys deleted in one transaction).
pub const RECLAIM_SLOTS_PER_STEP: u64 = 4;

/// A value's type (`TYPE` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A string (its payload is the value).
    String = 1,
    /// A hash.
    Hash = 2,
    /// A list.
    List = 3,
    /// A set.
    Set = 4,
    /// A sorted set.
    ZSet = 5,
}

impl Kind {
    fn of(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::String),
            2 => Some(Kind::Hash),
            3 => Some(Kind::List),
            4 => Some(Kind::Set),
            5 => Some(Kind::ZSet),
            _ => None,
        }
    }

    /// What `TYPE` replies.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }
}

/// A collection value's payload starts with its encoding: packed in the value ...
pub const PACKED: u8 = 0;
/// ... or in a tree of the store, which the payload names.
pub const IN_TREE: u8 = 1;
/// Bytes of a value's start that say whether it names a tree: header, encoding, tree.
pub const TREE_HEAD_BYTES: usize = HEADER_BYTES + 9;

/// The tree a stored value (or its first [`TREE_HEAD_BYTES`]) names, if it is a collection in
/// a tree.
pub fn tree_of(value: &[u8]) -> Option<TreeId> {
    let kind = Kind::of(*value.first()?)?;
    if kind == Kind::String || value.get(HEADER_BYTES) != Some(&IN_TREE) {
        return None;
    }
    let root = value.get(HEADER_BYTES + 1..TREE_HEAD_BYTES)?;
    Some(TreeId(u64::from_le_bytes(root.try_into().ok()?)))
}

/// Drops the tree the value `old` (its head) names unless `new` names the same one.
fn drop_replaced(tx: &mut Tx<'_>, old: Option<&[u8]>, new: Option<&Entry>) -> Result<(), DbError> {
    let Some(tree) = old.and_then(tree_of) else {
        return Ok(());
    };
    let kept =
        new.is_some_and(|e| e.kind != Kind::String && tree_of(&e.encode_head()) == Some(tree));
    if !kept {
        tx.drop_tree(tree)?;
    }
    Ok(())
}

/// A value with its kind and expiry time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its type.
    pub kind: Kind,
    /// Unix time in ms at which the key expires; `None`: never.
    pub expire_at_ms: Option<u64>,
    /// A string's bytes, or a collection's encoding.
    pub payload: Vec<u8>,
}

impl Entry {
    /// A string value.
    pub fn string(payload: Vec<u8>, expire_at_ms: Option<u64>) -> Self {
        Self {
            kind: Kind::String,
            expire_at_ms,
            payload,
        }
    }

    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.payload.len());
        out.extend_from_slice(&[self.kind as u8, 0, 0, 0]);
        let at = self.expire_at_ms.unwrap_or(0);
        debug_assert!(self.expire_at_ms != Some(0), "expiry at 0 ms is 'never'");
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// The first [`TREE_HEAD_BYTES`] of the stored form (what [`tree_of`] reads).
    fn encode_head(&self) -> Vec<u8> {
        let mut head = self.encode();
        head.truncate(TREE_HEAD_BYTES);
        head
    }

    /// The entry `bytes` hold; an error names what is wrong (a store value the server did not
    /// write, or a kind from a newer version).
    pub fn decode(bytes: &[u8]) -> Result<Self, KeyspaceError> {
        if bytes.len() < HEADER_BYTES || bytes[1..4] != [0, 0, 0] {
            return Err(KeyspaceError::Corrupt(
                "a value without a valid header".into(),
            ));
        }
        let kind = Kind::of(bytes[0])
            .ok_or_else(|| KeyspaceError::Corrupt(format!("value kind {}", bytes[0])))?;
        let at = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
        Ok(Self {
            kind,
            expire_at_ms: (at != 0).then_some(at),
            payload: bytes[HEADER_BYTES..].to_vec(),
        })
    }

    /// Expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// Why a keyspace operation failed.
#[derive(Debug)]
pub enum KeyspaceError {
    /// The store failed (a conflict retries the transaction).
    Store(DbError),
    /// A database number outside `0..DATABASES` (Redis: "ERR DB index is out of range").
    NoSuchDatabase(usize),
    /// The store holds something the keyspace did not write.
    Corrupt(String),
}

impl From<DbError> for KeyspaceError {
    fn from(err: DbError) -> Self {
        KeyspaceError::Store(err)
    }
}

impl std::fmt::Display for KeyspaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyspaceError::Store(err) => write!(f, "{err}"),
            KeyspaceError::NoSuchDatabase(_) => f.write_str("DB index is out of range"),
            KeyspaceError::Corrupt(what) => write!(f, "keyspace corrupt: {what}"),
        }
    }
}

impl std::error::Error for KeyspaceError {}

/// The namespace each database uses now, and the next namespace to hand out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Databases {
    /// Each database's namespace (the 4-byte prefix of its keys in the store).
    pub namespaces: [u32; DATABASES],
    next: u32,
    /// The reclaim pass under way: dead namespaces below `target` are deleted (0: none).
    reclaim_target: u32,
    /// A namespace died during the pass: another pass follows.
    reclaim_again: bool,
    /// The next directory slot the pass visits.
    reclaim_cursor: u64,
    /// Read from a record older than key counts (68 bytes): [`upgrade`] must count the keys.
    uncounted: bool,
}

/// Bytes of the `databases` record: before reclaim existed, and now.
const DATABASES_V1_BYTES: usize = 4 * (DATABASES + 1);
const DATABASES_BYTES: usize = DATABASES_V1_BYTES + 16;

impl Databases {
    /// A new keyspace's: database `i` in namespace `i + 1`.
    fn initial() -> Self {
        let mut namespaces = [0; DATABASES];
        for (i, ns) in namespaces.iter_mut().enumerate() {
            *ns = i as u32 + 1;
        }
        Self {
            namespaces,
            next: DATABASES as u32 + 1,
            reclaim_target: 0,
            reclaim_again: false,
            reclaim_cursor: 0,
            uncounted: false,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DATABASES_BYTES);
        for ns in self.namespaces {
            out.extend_from_slice(&ns.to_le_bytes());
        }
        out.extend_from_slice(&self.next.to_le_bytes());
        out.extend_from_slice(&self.reclaim_target.to_le_bytes());
        out.extend_from_slice(&u32::from(self.reclaim_again).to_le_bytes());
        out.extend_from_slice(&self.reclaim_cursor.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, KeyspaceError> {
        if bytes.len() != DATABASES_BYTES && bytes.len() != DATABASES_V1_BYTES {
            return Err(KeyspaceError::Corrupt("the databases record".into()));
        }
        let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4"));
        let mut namespaces = [0; DATABASES];
        for (i, ns) in namespaces.iter_mut().enumerate() {
            *ns = word(i);
        }
        let next = word(DATABASES);
        let (reclaim_target, reclaim_again, reclaim_cursor) = if bytes.len() == DATABASES_BYTES {
            let at = DATABASES_V1_BYTES + 8;
            let cursor = u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
            (word(DATABASES + 1), word(DATABASES + 2) != 0, cursor)
        } else {
            (0, false, 0)
        };
        let valid = namespaces.iter().all(|&ns| ns != META && ns < next) && reclaim_target <= next;
        let mut sorted = namespaces;
        sorted.sort_unstable();
        if !valid || sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(KeyspaceError::Corrupt("the databases record".into()));
        }
        Ok(Self {
            namespaces,
            next,
            reclaim_target,
            reclaim_again,
            reclaim_cursor,
            uncounted: bytes.len() == DATABASES_V1_BYTES,
        })
    }

    /// The keyspace's record in `tx`, made if the store has none (with the expiry cursor).
    pub fn load(tx: &mut Tx<'_>) -> Result<Self, KeyspaceError> {
        let key = store_key(META, DATABASES_KEY);
        match tx.get(&key)? {
            Some(bytes) => Self::decode(&bytes),
            None => {
                let dbs = Self::initial();
                tx.put(&key, &dbs.encode())?;
                // A new keyspace's expirer starts now: no entry can be older.
                expiry_index::Cursor::at_slot(expiry_index::slot_of(wall_ms())).save(tx)?;
                Ok(dbs)
            }
        }
    }

    fn save(&self, tx: &mut Tx<'_>) -> Result<(), KeyspaceError> {
        tx.put(&store_key(META, DATABASES_KEY), &self.encode())?;
        Ok(())
    }

    /// The namespace of database `db`.
    pub fn namespace(&self, db: usize) -> Result<u32, KeyspaceError> {
        self.namespaces
            .get(db)
            .copied()
            .ok_or(KeyspaceError::NoSuchDatabase(db))
    }

    /// `SWAPDB a b`: each database takes the other's keys (one record written).
    pub fn swap(tx: &mut Tx<'_>, a: usize, b: usize) -> Result<(), KeyspaceError> {
        let mut dbs = Self::load(tx)?;
        let (na, nb) = (dbs.namespace(a)?, dbs.namespace(b)?);
        dbs.namespaces[a] = nb;
        dbs.namespaces[b] = na;
        dbs.save(tx)
    }

    /// `FLUSHDB`: database `db` starts empty in a fresh namespace; returns the old one (its
    /// keys are unreachable from now on, its count records deleted, its keys reclaimed in the
    /// background by [`reclaim_step`]).
    pub fn flush(tx: &mut Tx<'_>, db: usize) -> Result<u32, KeyspaceError> {
        let mut dbs = Self::load(tx)?;
        let old = dbs.flush_one(tx, db)?;
        dbs.save(tx)?;
        Ok(old)
    }

    /// `FLUSHALL`: every database starts empty in a fresh namespace.
    pub fn flush_all(tx: &mut Tx<'_>) -> Result<(), KeyspaceError> {
        let mut dbs = Self::load(tx)?;
        for db in 0..DATABASES {
            dbs.flush_one(tx, db)?;
        }
        dbs.save(tx)
    }

    fn flush_one(&mut self, tx: &mut Tx<'_>, db: usize) -> Result<u32, KeyspaceError> {
        let old = self.namespace(db)?;
        let fresh = self.next;
        self.next = fresh
            .checked_add(1)
            .ok_or_else(|| KeyspaceError::Corrupt("namespaces exhausted".into()))?;
        self.namespaces[db] = fresh;
        for shard in 0..COUNT_SHARDS {
            tx.delete(&count_key(old, shard))?;
        }
        if self.reclaim_target == 0 {
            self.reclaim_target = self.next;
            self.reclaim_cursor = 0;
        } else {
            self.reclaim_again = true;
        }
        Ok(old)
    }

    /// A namespace no database names any more (its keys are garbage).
    fn dead(&self, ns: u32) -> bool {
        ns != META && ns < self.reclaim_target && !self.namespaces.contains(&ns)
    }
}

/// Brings a keyspace written before key counts and reclaim existed up to date, once, before
/// the server serves it: counts every live database's keys (one scan of the store), writes
/// the count records and the new `databases` record, and starts a reclaim pass for the
/// namespaces flushed before reclaim existed. Nothing to do (no scan) for any other store.
/// Run it with no other client of the keyspace.
pub fn upgrade(db: &tamer_store::Db) -> Result<bool, KeyspaceError> {
    let dbs = db.transaction(|tx| Databases::load(tx).map_err(crate::keyspace::store_error))?;
    if !dbs.uncounted {
        return Ok(false);
    }
    let mut counts = std::collections::HashMap::<(u32, usize), i64>::new();
    let mut cursor = Some(0);
    // Bounded by the directory: every call advances the cursor by its slots.
    while let Some(start) = cursor {
        let (keys, next) = db.transaction(move |tx| tx.scan_slots(start, 64))?;
        for key in keys {
            let Some(ns) = key.get(..4) else { continue };
            let ns = u32::from_be_bytes(ns.try_into().expect("4 bytes"));
            if dbs.namespaces.contains(&ns) {
                *counts.entry((ns, shard_of(&key[4..]))).or_default() += 1;
            }
        }
        cursor = next;
    }
    db.transaction(move |tx| {
        let mut dbs = Databases::load(tx).map_err(crate::keyspace::store_error)?;
        for (&(ns, shard), n) in &counts {
            tx.put(&count_key(ns, shard), &n.to_le_bytes())?;
        }
        dbs.reclaim_target = dbs.next;
        dbs.reclaim_cursor = 0;
        dbs.save(tx).map_err(crate::keyspace::store_error)
    })?;
    Ok(true)
}

/// What a [`reclaim_step`] left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// No pass under way: nothing to reclaim.
    Idle,
    /// A pass is under way: call again.
    Working,
}

/// One bounded step of the background reclaim of flushed databases' keys: the keys of
/// [`RECLAIM_SLOTS_PER_STEP`] directory slots read, those of dead namespaces deleted, the
/// pass's cursor saved, all in `tx` (a crash resumes at the last committed cursor). A pass
/// ends at the directory's end; a namespace that died during it starts another.
pub fn reclaim_step(tx: &mut Tx<'_>) -> Result<Reclaim, KeyspaceError> {
    let mut dbs = Databases::load(tx)?;
    if dbs.reclaim_target == 0 {
        return Ok(Reclaim::Idle);
    }
    let (keys, next) = tx.scan_slots(dbs.reclaim_cursor, RECLAIM_SLOTS_PER_STEP)?;
    for key in keys {
        let Some(ns) = key.get(..4) else { continue };
        if dbs.dead(u32::from_be_bytes(ns.try_into().expect("4 bytes"))) {
            remove_dead(tx, &key)?;
        }
    }
    match next {
        Some(slot) => dbs.reclaim_cursor = slot,
        None if dbs.reclaim_again => {
            dbs.reclaim_again = false;
            dbs.reclaim_target = dbs.next;
            dbs.reclaim_cursor = 0;
        }
        None => {
            dbs.reclaim_target = 0;
            dbs.reclaim_cursor = 0;
        }
    }
    dbs.save(tx)?;
    Ok(Reclaim::Working)
}

/// The record holding shard `shard` of namespace `ns`'s key count.
fn count_key(ns: u32, shard: usize) -> Vec<u8> {
    let mut name = b"count".to_vec();
    name.extend_from_slice(&ns.to_be_bytes());
    name.push(shard as u8);
    store_key(META, &name)
}

/// The count shard of user key `key` (FNV-1a).
fn shard_of(key: &[u8]) -> usize {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h as usize % COUNT_SHARDS
}

fn read_count(tx: &mut Tx<'_>, record: &[u8]) -> Result<i64, KeyspaceError> {
    match tx.get(record)? {
        None => Ok(0),
        Some(bytes) => {
            Ok(i64::from_le_bytes(bytes.try_into().map_err(|_| {
                KeyspaceError::Corrupt("a key count record".into())
            })?))
        }
    }
}

/// Adds `delta` to namespace `ns`'s count, in `key`'s shard.
fn add_count(tx: &mut Tx<'_>, ns: u32, key: &[u8], delta: i64) -> Result<(), KeyspaceError> {
    let record = count_key(ns, shard_of(key));
    let n = read_count(tx, &record)? + delta;
    // A key's creation and removal use the same shard: below zero, the records are wrong.
    if n < 0 {
        return Err(KeyspaceError::Corrupt(format!("key count {n} in a shard")));
    }
    if n == 0 {
        tx.delete(&record)?;
    } else {
        tx.put(&record, &n.to_le_bytes())?;
    }
    Ok(())
}

/// `DBSIZE`: the keys namespace `ns` holds (expired ones not yet removed included), from its
/// [`COUNT_SHARDS`] count records.
pub fn key_count(tx: &mut Tx<'_>, ns: u32) -> Result<u64, KeyspaceError> {
    let mut total = 0i64;
    for shard in 0..COUNT_SHARDS {
        total += read_count(tx, &count_key(ns, shard))?;
    }
    u64::try_from(total).map_err(|_| KeyspaceError::Corrupt(format!("key count {total}")))
}

/// The store key of `key` in namespace `ns`.
pub fn store_key(ns: u32, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + key.len());
    out.extend_from_slice(&ns.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// `key`'s entry in `at`'s database at its time: an expired one reads as absent (and is
/// deleted when `tx` commits; an `expired` event).
pub fn get(at: &Scope, tx: &mut Tx<'_>, key: &[u8]) -> Result<Option<Entry>, KeyspaceError> {
    let bytes = tx.get(&store_key(at.namespace, key))?;
    live_entry(at, tx, key, bytes)
}

/// As [`get`], through the store's cache of small values first (`Tx::get_cached`): a
/// collection in a tree is named by a 21-byte value, so once read it costs no page access
/// (the store drops the cached value at any change of the key).
pub fn get_cached(at: &Scope, tx: &mut Tx<'_>, key: &[u8]) -> Result<Option<Entry>, KeyspaceError> {
    let bytes = tx.get_cached(&store_key(at.namespace, key))?;
    live_entry(at, tx, key, bytes)
}

/// The entry `bytes` (read for `key`) decoded, or `None` when absent or expired at `at`'s
/// time (an expired one is deleted when `tx` commits).
fn live_entry(
    at: &Scope,
    tx: &mut Tx<'_>,
    key: &[u8],
    bytes: Option<Vec<u8>>,
) -> Result<Option<Entry>, KeyspaceError> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    let entry = Entry::decode(&bytes)?;
    if entry.expired(at.now_ms) {
        remove(tx, at.namespace, key)?;
        at.notify(Class::Expired, "expired", key);
        at.expired_on_read(key);
        return Ok(None);
    }
    Ok(Some(entry))
}

/// Writes `entry` as `key`'s in namespace `ns` (counted when the key is new); an expiry time
/// is recorded in the expiry index too (one entry: see [`expiry_index`] for its cost).
/// A new key is a `new` event.
pub fn put(at: &Scope, tx: &mut Tx<'_>, key: &[u8], entry: &Entry) -> Result<(), KeyspaceError> {
    let ns = at.namespace;
    let skey = store_key(ns, key);
    let old = tx.get_head(&skey, TREE_HEAD_BYTES)?;
    let existed = old.is_some();
    // An expired value not yet deleted is replaced by a new key (Redis's lookupKeyWrite
    // expires it first): `expired`, then `new`.
    let expired = old
        .as_deref()
        .and_then(|head| Entry::decode(head).ok())
        .is_some_and(|e| e.expired(at.now_ms));
    drop_replaced(tx, old.as_deref(), Some(entry))?;
    tx.put(&skey, &entry.encode())?;
    if expired {
        at.notify(Class::Expired, "expired", key);
    }
    if !existed {
        add_count(tx, ns, key, 1)?;
    }
    if !existed || expired {
        at.notify(Class::New, "new", key);
    }
    if let Some(expire_at_ms) = entry.expire_at_ms {
        expiry_index::append(tx, &skey, expire_at_ms, wall_ms())?;
    }
    Ok(())
}

/// As [`put`], for an entry whose expiry time is the one `key` holds now, read in this same
/// transaction (`INCR`, `APPEND`, `SET ... KEEPTTL`): that time is indexed already, so no entry
/// is added.
pub fn put_kept_ttl(
    at: &Scope,
    tx: &mut Tx<'_>,
    key: &[u8],
    entry: &Entry,
) -> Result<(), KeyspaceError> {
    let ns = at.namespace;
    let skey = store_key(ns, key);
    let old = tx.get_head(&skey, TREE_HEAD_BYTES)?;
    let existed = old.is_some();
    drop_replaced(tx, old.as_deref(), Some(entry))?;
    tx.put(&skey, &entry.encode())?;
    if !existed {
        add_count(tx, ns, key, 1)?;
        at.notify(Class::New, "new", key);
    }
    Ok(())
}

/// The wall clock in Unix ms (the clock expiry times are in).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Deletes `key` in namespace `ns`, expired or not (a collection's tree dropped); true when
/// it was stored.
pub fn remove(tx: &mut Tx<'_>, ns: u32, key: &[u8]) -> Result<bool, KeyspaceError> {
    let skey = store_key(ns, key);
    let old = tx.get_head(&skey, TREE_HEAD_BYTES)?;
    drop_replaced(tx, old.as_deref(), None)?;
    remove_moved(tx, ns, key)
}

/// [`remove`] of a value that moved to another key (`RENAME`, `MOVE`): its tree, if any, is
/// the other key's now and stays.
pub fn remove_moved(tx: &mut Tx<'_>, ns: u32, key: &[u8]) -> Result<bool, KeyspaceError> {
    let was = tx.delete(&store_key(ns, key))?;
    if was {
        add_count(tx, ns, key, -1)?;
    }
    Ok(was)
}

/// Deletes a key of a flushed database by its store key (no count: those went with the
/// flush), dropping its collection's tree.
pub fn remove_dead(tx: &mut Tx<'_>, skey: &[u8]) -> Result<bool, KeyspaceError> {
    let old = tx.get_head(skey, TREE_HEAD_BYTES)?;
    drop_replaced(tx, old.as_deref(), None)?;
    Ok(tx.delete(skey)?)
}

/// [`remove`] by store key (namespace and key together, as the expiry index names them).
pub fn remove_store_key(tx: &mut Tx<'_>, skey: &[u8]) -> Result<bool, KeyspaceError> {
    let Some((ns, key)) = skey.split_first_chunk::<4>() else {
        return Err(KeyspaceError::Corrupt(format!(
            "store key of {} bytes",
            skey.len()
        )));
    };
    remove(tx, u32::from_be_bytes(*ns), key)
}

/// Deletes `key` in `at`'s database; true when it was there and not expired at `at`'s time.
pub fn delete(at: &Scope, tx: &mut Tx<'_>, key: &[u8]) -> Result<bool, KeyspaceError> {
    let live = get(at, tx, key)?.is_some();
    remove(tx, at.namespace, key)?;
    Ok(live)
}

/// A keyspace error as a store error, where no reply can carry it (a corrupt keyspace fails
/// the transaction).
pub(crate) fn store_error(err: KeyspaceError) -> DbError {
    match err {
        KeyspaceError::Store(err) => err,
        other => DbError::Runtime(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
