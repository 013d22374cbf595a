//! How the server's keyspace lives in the store: Redis's 16 databases, typed values with
//! expiry times, all in `tamer_store` keys and values, changed inside store transactions (so
//! a command, or a whole `MULTI`/`EXEC`, is atomic and, in `commit` mode, durable on return).
//!
//! ```text
//! store key    [namespace u32 BE][user key]          namespace 0 is the server's own
//! store value  [kind u8][0 u8][0 u16][expire-at ms u64 LE; 0: none][payload]
//! databases    [0 u32 BE]"databases" -> 16 × [namespace u32 LE][next namespace u32 LE]
//! ```
//!
//! A database is a namespace named by the `databases` record, so `SWAPDB` swaps two entries
//! (one small transaction, whatever the databases hold) and `FLUSHDB` points its database at a
//! fresh namespace at once (the old namespace's keys are then unreachable; reclaiming their
//! space in the background is not built yet). Expired keys read as absent (lazy expiry), and
//! every write of an expiry time also records it in the time-ordered [`expiry_index`], in the
//! same transaction, from which the expirer (`crate::expiry`) removes keys as they come due.
//! Collection kinds (issue 11) will keep their elements under their own namespaces; a
//! collection's value here is then its small root.

use tamer_store::{DbError, Tx};

pub mod expiry_index;

/// Databases, as Redis's default `databases 16`.
pub const DATABASES: usize = 16;
/// Bytes of a value's header.
pub const HEADER_BYTES: usize = 12;
/// The namespace of the server's own records.
const META: u32 = 0;
const DATABASES_KEY: &[u8] = b"databases";

/// A value's type (`TYPE` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    String = 1,
}

impl Kind {
    fn of(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::String),
            _ => None,
        }
    }

    /// What `TYPE` replies.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
        }
    }
}

/// A value with its kind and expiry time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Unix time in ms at which the key expires; `None`: never.
    pub expire_at_ms: Option<u64>,
    pub payload: Vec<u8>,
}

impl Entry {
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
    pub namespaces: [u32; DATABASES],
    next: u32,
}

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
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 * (DATABASES + 1));
        for ns in self.namespaces {
            out.extend_from_slice(&ns.to_le_bytes());
        }
        out.extend_from_slice(&self.next.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self, KeyspaceError> {
        if bytes.len() != 4 * (DATABASES + 1) {
            return Err(KeyspaceError::Corrupt("the databases record".into()));
        }
        let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().expect("4"));
        let mut namespaces = [0; DATABASES];
        for (i, ns) in namespaces.iter_mut().enumerate() {
            *ns = word(i);
        }
        let next = word(DATABASES);
        let valid = namespaces.iter().all(|&ns| ns != META && ns < next);
        let mut sorted = namespaces;
        sorted.sort_unstable();
        if !valid || sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(KeyspaceError::Corrupt("the databases record".into()));
        }
        Ok(Self { namespaces, next })
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
    /// keys are unreachable from now on).
    pub fn flush(tx: &mut Tx<'_>, db: usize) -> Result<u32, KeyspaceError> {
        let mut dbs = Self::load(tx)?;
        let old = dbs.namespace(db)?;
        let fresh = dbs.next;
        dbs.next = fresh
            .checked_add(1)
            .ok_or_else(|| KeyspaceError::Corrupt("namespaces exhausted".into()))?;
        dbs.namespaces[db] = fresh;
        dbs.save(tx)?;
        Ok(old)
    }
}

/// The store key of `key` in namespace `ns`.
pub fn store_key(ns: u32, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + key.len());
    out.extend_from_slice(&ns.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// `key`'s entry in namespace `ns` at `now_ms`: an expired one reads as absent (and is
/// deleted when `tx` commits).
pub fn get(
    tx: &mut Tx<'_>,
    ns: u32,
    key: &[u8],
    now_ms: u64,
) -> Result<Option<Entry>, KeyspaceError> {
    let skey = store_key(ns, key);
    let Some(bytes) = tx.get(&skey)? else {
        return Ok(None);
    };
    let entry = Entry::decode(&bytes)?;
    if entry.expired(now_ms) {
        tx.delete(&skey)?;
        return Ok(None);
    }
    Ok(Some(entry))
}

/// Writes `entry` as `key`'s in namespace `ns`; an expiry time is recorded in the expiry
/// index too (one entry: see [`expiry_index`] for its cost).
pub fn put(tx: &mut Tx<'_>, ns: u32, key: &[u8], entry: &Entry) -> Result<(), KeyspaceError> {
    let skey = store_key(ns, key);
    tx.put(&skey, &entry.encode())?;
    if let Some(at) = entry.expire_at_ms {
        expiry_index::append(tx, &skey, at, wall_ms())?;
    }
    Ok(())
}

/// As [`put`], for an entry whose expiry time is the one `key` holds now, read in this same
/// transaction (`INCR`, `APPEND`, `SET ... KEEPTTL`): that time is indexed already, so no entry
/// is added.
pub fn put_kept_ttl(
    tx: &mut Tx<'_>,
    ns: u32,
    key: &[u8],
    entry: &Entry,
) -> Result<(), KeyspaceError> {
    tx.put(&store_key(ns, key), &entry.encode())?;
    Ok(())
}

/// The wall clock in Unix ms (the clock expiry times are in).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Deletes `key` in namespace `ns`; true when it was there and not expired at `now_ms`.
pub fn delete(tx: &mut Tx<'_>, ns: u32, key: &[u8], now_ms: u64) -> Result<bool, KeyspaceError> {
    let live = get(tx, ns, key, now_ms)?.is_some();
    tx.delete(&store_key(ns, key))?;
    Ok(live)
}

#[cfg(test)]
mod tests;
