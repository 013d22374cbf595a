//! What a keyspace operation runs with: the namespace of the client's database, the
//! command's time, and who is told of its reads and writes (the lookup counters, the
//! watchers). A command's `Context` (`crate::commands::Context`) derefs to it.

use std::sync::atomic::{AtomicU64, Ordering};

use tamer_store::{DbError, Tx};

use super::events::{Class, KeyEvents};
use super::store_key;
use super::watches::Watches;
use crate::config::Config;

/// See the module docs.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The namespace of the client's database.
    pub namespace: u32,
    /// The client's database.
    pub db: usize,
    /// The command's time (Unix ms; one reading per command, as Redis caches it).
    pub now_ms: u64,
    /// The server's watched keys, told of every write (`None`: nobody can watch).
    pub watches: Option<&'a Watches>,
    /// Where read lookups are counted (`INFO stats` `keyspace_hits`/`misses`; `None`: not).
    pub lookups: Option<&'a Lookups>,
    /// Who is told of keyspace events (`None`: nobody; `notify-keyspace-events`).
    pub events: Option<&'a dyn KeyEvents>,
    /// The settings a collection's packing follows (`None`: Redis's defaults).
    pub config: Option<&'a Config>,
}

/// Read lookups by outcome, as Redis counts them in `lookupKeyRead`: the commands that read a
/// key (`GET`, `MGET`, `EXISTS`, `TYPE`, `TTL`, ...) count one per key; writes do not. A key
/// of another type is a hit; an expired one a miss. A transaction the store retries after a
/// conflict counts its lookups again.
#[derive(Debug, Default)]
pub struct Lookups {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl Lookups {
    /// One read lookup of a key that was there (`found`) or not.
    pub fn count(&self, found: bool) {
        let counter = if found { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl Scope<'static> {
    /// A scope on namespace `namespace` (database 0) at `now_ms` that tells nobody of its
    /// reads, writes or events and packs collections at Redis's default thresholds (a
    /// `WATCH` fingerprint's read, tests).
    pub fn detached(namespace: u32, now_ms: u64) -> Self {
        Scope {
            namespace,
            db: 0,
            now_ms,
            watches: None,
            lookups: None,
            events: None,
            config: None,
        }
    }
}

impl<'a> Scope<'a> {
    /// This scope on database `db`, whose namespace is `namespace` (a command that reaches
    /// another database: `MOVE`, `COPY ... DB`).
    pub fn at(&self, db: usize, namespace: u32) -> Scope<'a> {
        Scope {
            db,
            namespace,
            ..*self
        }
    }

    /// One read lookup (Redis's `lookupKeyRead`) that found its key or not; a miss is a
    /// `keymiss` event.
    pub fn count_lookup(&self, found: bool, key: &[u8]) {
        if let Some(lookups) = self.lookups {
            lookups.count(found);
        }
        if !found {
            self.notify(Class::KeyMiss, "keymiss", key);
        }
    }

    /// Keyspace event `name` of `class` on `key` of this database.
    pub fn notify(&self, class: Class, name: &'static str, key: &[u8]) {
        self.notify_in(self.db, class, name, key);
    }

    /// Keyspace event `name` of `class` on `key` of database `db`.
    pub fn notify_in(&self, db: usize, class: Class, name: &'static str, key: &[u8]) {
        if let Some(events) = self.events {
            if events.classes().publishes(class) {
                events.key_event(class, name, db, key);
            }
        }
    }

    /// A write to `key` of this database: watchers' `EXEC` will abort.
    pub fn touch(&self, key: &[u8]) {
        self.touch_in(self.db, key);
    }

    /// A write to `key` of database `db` (watches are by database, as Redis's; client-side
    /// caching is told too).
    pub fn touch_in(&self, db: usize, key: &[u8]) {
        if let Some(w) = self.watches {
            w.touch(&store_key(db as u32, key));
        }
        if let Some(events) = self.events {
            events.key_written(db, key);
        }
    }

    /// `key` expired as it was read: client-side caching invalidates it (watchers are not
    /// told: `WATCH` compares fingerprints).
    pub fn expired_on_read(&self, key: &[u8]) {
        if let Some(events) = self.events {
            events.key_written(self.db, key);
        }
    }

    /// The watched keys of database `db` (namespace `ns`) that a swap with namespace `other`
    /// (or a flush: `None`) changes, bumped as Redis's `touchAllWatchedKeysInDb` does: those
    /// stored in `ns` or in `other`. Each is read (locked) in `tx`.
    pub fn touch_swapped(
        &self,
        tx: &mut Tx<'_>,
        db: usize,
        ns: u32,
        other: Option<u32>,
    ) -> Result<(), DbError> {
        if let (Some(events), None) = (self.events, other) {
            events.flushed();
        }
        let Some(w) = self.watches else {
            return Ok(());
        };
        for watched in w.watched_in(db as u32) {
            let key = &watched[4..];
            let mut stored = tx.contains(&store_key(ns, key))?;
            if let Some(other) = other {
                stored |= tx.contains(&store_key(other, key))?;
            }
            if stored {
                w.touch(&watched);
            }
        }
        Ok(())
    }
}
