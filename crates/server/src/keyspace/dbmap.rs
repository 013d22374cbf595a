//! The database map at run time: which namespace each of the 16 databases uses now, and the
//! gate that makes a change of it (`SWAPDB`, `FLUSHDB`, `FLUSHALL`) atomic with respect to
//! every command.
//!
//! A command (or a whole `MULTI`/`EXEC`) enters the gate *shared* before its store
//! transaction begins and leaves it after the transaction commits, so it sees one map
//! throughout. A command that changes the map enters *exclusive*: it waits (no new command
//! enters meanwhile) until every shared holder has left, runs its transaction, which writes
//! the `databases` record, and publishes the new map before it leaves. Nobody waits for the
//! gate while holding a store lock (it is entered before the transaction begins), so the gate
//! and the store's wait-die locks cannot deadlock. Waits park the user-level thread on the
//! gate's word (`tamer_runtime::thread::wait_while_eq`), never the OS thread of a core; off
//! the runtime (tests, tools) they sleep the OS thread briefly.
//!
//! Why a gate and not a read of the `databases` record in every transaction: that record's
//! lock would serialize every command in the server (store locks are exclusive).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::keyspace::DATABASES;

/// The gate word's bit saying a writer holds or waits for the gate; the rest counts readers.
const WRITER: u64 = 1 << 63;
/// How long one park on the gate's word lasts before the condition is checked again.
const WAIT_SLICE_NS: u64 = 1_000_000;

/// The map and its gate (see the module docs).
#[derive(Debug)]
pub struct DbMap {
    gate: AtomicU64,
    namespaces: [AtomicU32; DATABASES],
    /// Bumped by every published change (for observers and tests).
    changes: AtomicU64,
}

/// The map entered shared: the namespaces it read; released on drop.
#[derive(Debug)]
pub struct Shared<'a> {
    map: &'a DbMap,
    pub namespaces: [u32; DATABASES],
}

/// The map entered exclusive; released on drop.
#[derive(Debug)]
pub struct Exclusive<'a> {
    map: &'a DbMap,
    pub namespaces: [u32; DATABASES],
}

/// Parks until `word` no longer holds `seen` (or a slice passes).
fn wait_change(word: &AtomicU64, seen: u64) {
    if tamer_runtime::thread::in_user_thread() {
        let deadline = tamer_device::now_ns() + WAIT_SLICE_NS;
        tamer_runtime::thread::wait_while_eq(word, seen, deadline);
    } else {
        std::thread::sleep(Duration::from_micros(20));
    }
}

impl DbMap {
    pub fn new(namespaces: [u32; DATABASES]) -> Self {
        Self {
            gate: AtomicU64::new(0),
            namespaces: namespaces.map(AtomicU32::new),
            changes: AtomicU64::new(0),
        }
    }

    fn read(&self) -> [u32; DATABASES] {
        std::array::from_fn(|i| self.namespaces[i].load(Ordering::Acquire))
    }

    /// Enters shared: waits while a writer holds or waits for the gate.
    pub fn shared(&self) -> Shared<'_> {
        loop {
            let s = self.gate.load(Ordering::Acquire);
            if s & WRITER != 0 {
                wait_change(&self.gate, s);
                continue;
            }
            assert!(s + 1 < WRITER, "gate readers overflow");
            if self
                .gate
                .compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Shared {
                    map: self,
                    namespaces: self.read(),
                };
            }
        }
    }

    /// Enters exclusive: takes the writer bit (new readers wait from then on), then waits for
    /// the readers inside to leave.
    pub fn exclusive(&self) -> Exclusive<'_> {
        loop {
            let s = self.gate.load(Ordering::Acquire);
            if s & WRITER != 0 {
                wait_change(&self.gate, s);
                continue;
            }
            if self
                .gate
                .compare_exchange(s, s | WRITER, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                break;
            }
        }
        loop {
            let s = self.gate.load(Ordering::Acquire);
            if s == WRITER {
                return Exclusive {
                    map: self,
                    namespaces: self.read(),
                };
            }
            wait_change(&self.gate, s);
        }
    }

    /// Database `db`'s namespace now, without entering the gate: for a hint only (prefetch),
    /// since a change may be published right after.
    pub fn peek(&self, db: usize) -> u32 {
        self.namespaces[db].load(Ordering::Acquire)
    }

    /// Changes published so far.
    #[cfg(test)]
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
}

impl Exclusive<'_> {
    /// Publishes `namespaces` (committed to the `databases` record by the holder).
    pub fn publish(&mut self, namespaces: [u32; DATABASES]) {
        for (slot, ns) in self.map.namespaces.iter().zip(namespaces) {
            slot.store(ns, Ordering::Release);
        }
        self.namespaces = namespaces;
        self.map.changes.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        let before = self.map.gate.fetch_sub(1, Ordering::AcqRel);
        assert!(
            before & !WRITER > 0,
            "shared gate released more than entered"
        );
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let before = self.map.gate.fetch_and(!WRITER, Ordering::AcqRel);
        assert_eq!(before, WRITER, "exclusive gate with readers inside");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Catches a writer let in while a reader is inside, or a reader let in while a writer
    /// holds the gate (each side checks the other's flag while inside).
    #[test]
    fn writers_exclude_readers() {
        let map = Arc::new(DbMap::new([1; DATABASES]));
        let (reading, writing) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (map, reading, writing) = (map.clone(), reading.clone(), writing.clone());
                std::thread::spawn(move || {
                    for i in 0..300 {
                        if (i + t) % 10 == 0 {
                            let mut g = map.exclusive();
                            writing.store(true, Ordering::SeqCst);
                            assert_eq!(reading.load(Ordering::SeqCst), 0);
                            g.publish([i as u32 + 2; DATABASES]);
                            writing.store(false, Ordering::SeqCst);
                        } else {
                            let g = map.shared();
                            reading.fetch_add(1, Ordering::SeqCst);
                            assert!(!writing.load(Ordering::SeqCst));
                            assert!(g.namespaces.iter().all(|&n| n == g.namespaces[0]));
                            reading.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(map.gate.load(Ordering::SeqCst), 0);
        assert_eq!(map.changes(), 120);
    }
}
