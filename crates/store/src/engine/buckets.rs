//! A key's entry in its bucket: reading the bucket covering a hash under its shared latch,
//! finding the key's entry, switching it to a new record (`link`: the one write that makes an
//! out-of-place write visible; a full bucket splits) and removing it (`unlink`).
//!
//! Invariants: an entry is switched or removed under the bucket's exclusive latch, and the
//! record it named is released only after (by the caller); a reader holds the bucket's shared
//! latch while it reads the records its entries name, so none is released meanwhile; a
//! lookup that lands on a bucket no longer covering its hash (a concurrent split) retries, at
//! most `MAX_RETRIES` times; a conditional link never inserts and never splits.

use std::sync::atomic::Ordering;

use tamer_runtime::thread;

use super::{corrupt, Engine};
use crate::layout::*;
use crate::DbError;

/// Retries of a lookup that keeps landing on a bucket not covering its hash (only a concurrent
/// split can cause one; many in a row mean a damaged index).
const MAX_RETRIES: u32 = 100_000;

enum Link {
    Retry,
    Full,
    Inserted,
    Replaced(Entry),
    /// A conditional link found the key elsewhere (or gone): nothing changed.
    Unchanged,
}

/// What [`Engine::link`] did.
pub(super) enum Linked {
    Inserted,
    Replaced(Entry),
    /// Only for a conditional link: the entry did not match.
    Unchanged,
}

/// A conditional link's expectation: the key's entry points at this record in a data page,
/// whose bytes (the whole record, header included) are these.
pub(super) struct Expect<'a> {
    pub(super) page: u64,
    pub(super) offset: usize,
    pub(super) record: &'a [u8],
}

impl Engine {
    /// Runs `f` on the bytes and entry count of the bucket covering `hash`, under its shared
    /// latch (the records its entries point to cannot be released meanwhile); retries while a
    /// concurrent split moves the hash to another bucket.
    pub(super) fn read_bucket_of<T>(
        &self,
        hash: u64,
        f: impl Fn(&[u8], usize) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        for _ in 0..MAX_RETRIES {
            let (bucket, pattern) = self.bucket_for(hash)?;
            let b = self.bucket(bucket, pattern)?;
            let found = b.read(|bytes| -> Result<Option<T>, DbError> {
                if !bucket_covers(bytes, hash) {
                    return Ok(None);
                }
                f(bytes, bucket_count(bytes).min(BUCKET_CAP)).map(Some)
            })?;
            if let Some(found) = found {
                return Ok(found);
            }
            thread::yield_now();
        }
        Err(corrupt(0, "the directory never led to the key's bucket"))
    }

    /// The slot and entry of `key` among the first `count` entries of bucket page `bytes`.
    fn find_entry(
        &self,
        bytes: &[u8],
        count: usize,
        hash: u64,
        key: &[u8],
    ) -> Result<Option<(usize, Entry)>, DbError> {
        let mut from = 0;
        while let Some(i) = next_hash_match(bytes, count, hash, from) {
            let old = Entry::read(bytes, i);
            if self.read_record(&old, key, false)?.is_some() {
                return Ok(Some((i, old)));
            }
            from = i + 1;
        }
        Ok(None)
    }

    /// Points the key's bucket entry at `e` (one entry write: the switch) and says what it
    /// replaced. With `expect`, only when the key's entry is that record, unchanged (never
    /// inserts, never splits): compaction's move of a record a writer may be replacing.
    pub(super) fn link(
        &self,
        hash: u64,
        key: &[u8],
        e: Entry,
        expect: Option<&Expect<'_>>,
    ) -> Result<Linked, DbError> {
        self.small.invalidate(hash, key);
        for _ in 0..MAX_RETRIES {
            let (bucket, pattern) = self.bucket_for(hash)?;
            let b = self.bucket(bucket, pattern)?;
            self.dirty_bucket(bucket, pattern);
            let outcome = b.write(|bytes| -> Result<Link, DbError> {
                if !bucket_covers(bytes, hash) {
                    return Ok(Link::Retry);
                }
                let count = bucket_count(bytes).min(BUCKET_CAP);
                let found = self.find_entry(bytes, count, hash, key)?;
                if let Some(expect) = expect {
                    // Under the bucket's exclusive latch the record cannot be released, so
                    // equal bytes at the expected place mean the move copies what is live
                    // (even if the page was freed and reused since the caller read it).
                    let Some((i, old)) = found else {
                        return Ok(Link::Unchanged);
                    };
                    let same = old.page == expect.page
                        && old.offset() == expect.offset
                        && !old.is_extent()
                        && {
                            let (bytes, len) = self.record_bytes(&old, expect.record.len())?;
                            len == expect.record.len() && bytes == expect.record
                        };
                    if !same {
                        return Ok(Link::Unchanged);
                    }
                    e.write(bytes, i);
                    return Ok(Link::Replaced(old));
                }
                if let Some((i, old)) = found {
                    e.write(bytes, i);
                    return Ok(Link::Replaced(old));
                }
                if count < BUCKET_CAP {
                    e.write(bytes, count);
                    set_bucket_count(bytes, count + 1);
                    return Ok(Link::Inserted);
                }
                Ok(Link::Full)
            })?;
            drop(b);
            match outcome {
                Link::Retry => thread::yield_now(),
                Link::Full => self.split(bucket, pattern, hash)?,
                Link::Inserted => return Ok(Linked::Inserted),
                Link::Replaced(old) => return Ok(Linked::Replaced(old)),
                Link::Unchanged => return Ok(Linked::Unchanged),
            }
        }
        Err(corrupt(0, "the directory never led to the key's bucket"))
    }

    /// The index entry of `key`, if any.
    pub(super) fn entry_of(&self, hash: u64, key: &[u8]) -> Result<Option<Entry>, DbError> {
        self.read_bucket_of(hash, |bytes, count| {
            Ok(self.find_entry(bytes, count, hash, key)?.map(|(_, e)| e))
        })
    }

    /// Removes `key`'s entry (under its key lock and the checkpoint latch), releases its record
    /// and returns the entry; `None` when the key is absent.
    pub(super) fn unlink(&self, hash: u64, key: &[u8]) -> Result<Option<Entry>, DbError> {
        self.small.invalidate(hash, key);
        for _ in 0..MAX_RETRIES {
            let (bucket, pattern) = self.bucket_for(hash)?;
            let b = self.bucket(bucket, pattern)?;
            self.dirty_bucket(bucket, pattern);
            let outcome = b.write(|bytes| -> Result<Link, DbError> {
                if !bucket_covers(bytes, hash) {
                    return Ok(Link::Retry);
                }
                let count = bucket_count(bytes).min(BUCKET_CAP);
                if let Some((i, old)) = self.find_entry(bytes, count, hash, key)? {
                    let last = Entry::read(bytes, count - 1);
                    last.write(bytes, i);
                    Entry::clear(bytes, count - 1);
                    set_bucket_count(bytes, count - 1);
                    return Ok(Link::Replaced(old));
                }
                Ok(Link::Inserted) // "not found"
            })?;
            drop(b);
            match outcome {
                Link::Retry => thread::yield_now(),
                Link::Replaced(old) => {
                    self.key_count.fetch_sub(1, Ordering::Relaxed);
                    self.release(&old);
                    return Ok(Some(old));
                }
                _ => return Ok(None),
            }
        }
        Err(corrupt(0, "the directory never led to the key's bucket"))
    }
}

#[cfg(test)]
mod tests {
    // A test reads as one scenario, from setup to check; splitting it would scatter the story.
    #![allow(clippy::too_many_lines)]

    use super::*;
    use crate::{Db, DbOptions, DeviceKind};

    fn small_store() -> Db {
        let options = DbOptions::new(1 << 20)
            .device(DeviceKind::Emulated {
                latency_ns: 1_000,
                capacity_bytes: 16 << 20,
            })
            .cores(1)
            .threads_per_core(4)
            .max_directory_depth(8)
            .cleaner(false);
        Db::open("unused", options).expect("open")
    }

    /// Compaction's conditional switch: it happens only when the key's entry still points at
    /// the expected place with the expected bytes. A stale expectation (the key was rewritten
    /// since), or the right place holding other bytes (the page was reused), changes nothing.
    #[test]
    fn a_conditional_link_switches_only_the_expected_record() {
        let db = small_store();
        db.put(b"key", b"first").unwrap();
        db.run(|h| -> Result<(), DbError> {
            let e = h.engine();
            let hash = e.hash(b"key");
            let first = e.entry_of(hash, b"key")?.expect("stored");
            let (first_bytes, _) = e.record_bytes(&first, usize::MAX)?;
            e.put(b"key", b"second")?;
            let second = e.entry_of(hash, b"key")?.expect("stored");
            let (second_bytes, _) = e.record_bytes(&second, usize::MAX)?;
            let attempt = |expect: Expect<'_>, value: &[u8]| -> Result<bool, DbError> {
                let (mut copy, _) = e.write_record(b"key", value)?;
                copy.hash = tag(hash);
                Ok(match e.link(hash, b"key", copy, Some(&expect))? {
                    Linked::Replaced(old) => {
                        e.release(&old);
                        true
                    }
                    Linked::Inserted | Linked::Unchanged => {
                        e.release(&copy);
                        false
                    }
                })
            };
            // Stale: the first version's place and bytes.
            let stale = Expect {
                page: first.page,
                offset: first.offset(),
                record: &first_bytes,
            };
            assert!(!attempt(stale, b"first")?, "a stale move was linked");
            // The right place, other bytes (same length, so only the comparison can tell).
            let mut other = second_bytes.clone();
            let last = other.len() - 1;
            other[last] ^= 0xff;
            let reused = Expect {
                page: second.page,
                offset: second.offset(),
                record: &other,
            };
            assert!(
                !attempt(reused, b"second")?,
                "a move of other bytes was linked"
            );
            // A key that is gone.
            let gone = Expect {
                page: second.page,
                offset: second.offset(),
                record: &second_bytes,
            };
            let (mut copy, _) = e.write_record(b"nokey", b"x")?;
            let nokey_hash = e.hash(b"nokey");
            copy.hash = tag(nokey_hash);
            assert!(matches!(
                e.link(nokey_hash, b"nokey", copy, Some(&gone))?,
                Linked::Unchanged
            ));
            e.release(&copy);
            // The expected record: the switch happens.
            let current = Expect {
                page: second.page,
                offset: second.offset(),
                record: &second_bytes,
            };
            assert!(
                attempt(current, b"second")?,
                "the expected move was not linked"
            );
            let moved = e.entry_of(hash, b"key")?.expect("stored");
            assert_ne!((moved.page, moved.slot), (second.page, second.slot));
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(db.get(b"key").unwrap().as_deref(), Some(&b"second"[..]));
        assert_eq!(db.len(), 1);
        db.close().unwrap();
    }
}
