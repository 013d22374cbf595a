//! The transactions of the workloads, through the embedded API (`DbHandle::transaction`,
//! `Tx::get/put/delete`, `DbHandle::put/get`), and the keys preloaded for them. Keys are 8
//! bytes, big-endian, the top byte a table:
//!
//! - `update`, `swap`: `0..keys` (table 0);
//! - `tatp`: the tier bench's TATP layout ([`Tatp`], tables 1-4) and mix: 80 % reads
//!   (GET_SUBSCRIBER_DATA, GET_NEW_DESTINATION, GET_ACCESS_DATA) run as plain gets, the rest
//!   (UPDATE_LOCATION, UPDATE_SUBSCRIBER_DATA: read-modify-write of the rows; INSERT/DELETE
//!   CALL_FORWARDING) one transaction each;
//! - `neworder`: district counters (table 5), items (6), stocks (7); a transaction reads and
//!   increments a district's counter, reads 5-15 items and their stocks, updates the stocks,
//!   inserts the order (8) and its lines (9);
//! - `queue`: per queue a head and a tail counter (table 10) and items (11); a push reads the
//!   tail, writes the item there and the tail + 1; a pop reads the head and the item there
//!   (absent: the queue is empty, nothing written), deletes it and writes the head + 1.
//!
//! Every transaction's writes go through [`apply`], which adds what its configuration's log
//! does: the `wal`'s redo records (appended inside the transaction after its last lock, so
//! log order is lock order; a delete is logged as an empty value), or the `undo`
//! configuration's undo images (the old value of every key written, read first, appended and
//! flushed before anything is changed).

use rand::rngs::SmallRng;
use rand::Rng;
use tamer_store::{DbError, DbHandle, Tx};

use super::plan::{Plan, Workload, QUEUE_PRELOAD, VALUE_BYTES};
use super::wal::GroupLog;
use crate::workload::{Op, Tatp};

const DISTRICT: u64 = 5;
const ITEM: u64 = 6;
const STOCK: u64 = 7;
const ORDER: u64 = 8;
const ORDER_LINE: u64 = 9;
const QUEUE_END: u64 = 10;
const QUEUE_ITEM: u64 = 11;
/// Bytes of an order and of an order line (TPC-C's rows are about this size).
const ORDER_BYTES: usize = 24;
const ORDER_LINE_BYTES: usize = 54;

/// The writes of one transaction: a value, or a delete.
type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The 8-byte key of `table` row `row`.
pub(super) fn table_key(table: u64, row: u64) -> [u8; 8] {
    ((table << 56) | row).to_be_bytes()
}

/// A counter value: 8 bytes, little-endian (absent: 0).
fn counter(value: Option<Vec<u8>>) -> u64 {
    value
        .and_then(|v| Some(u64::from_le_bytes(v.get(..8)?.try_into().ok()?)))
        .unwrap_or(0)
}

fn counter_value(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

/// Why a transaction failed: it gave up on conflicts (counted), or anything else (the
/// window fails).
pub(super) enum Failure {
    Conflict,
    Other(String),
}

impl From<DbError> for Failure {
    fn from(err: DbError) -> Self {
        match err {
            DbError::Conflict { .. } => Failure::Conflict,
            other => Failure::Other(other.to_string()),
        }
    }
}

impl From<String> for Failure {
    fn from(err: String) -> Self {
        Failure::Other(err)
    }
}

/// What a configuration's transactions do besides the store.
#[derive(Clone, Copy)]
pub(super) enum Hook<'a> {
    Plain,
    /// The `wal`: redo records appended, waited for after the commit.
    Redo(&'a GroupLog),
    /// The `undo` configuration: undo images logged and flushed before the writes.
    Undo(&'a GroupLog),
}

/// Applies `writes` in `tx` under `hook` (see the module docs); the redo records' sequence
/// number for the `wal`.
fn apply(tx: &mut Tx<'_>, writes: &Writes, hook: Hook<'_>) -> Result<Option<u64>, DbError> {
    if let Hook::Undo(log) = hook {
        let mut images = Vec::with_capacity(writes.len());
        for (key, _) in writes {
            images.push((key.as_slice(), tx.get(key)?.unwrap_or_default()));
        }
        let records: Vec<(&[u8], &[u8])> = images.iter().map(|(k, v)| (*k, &v[..])).collect();
        log.wait(log.append(&records)).map_err(DbError::Runtime)?;
    }
    for (key, value) in writes {
        match value {
            Some(value) => tx.put(key, value)?,
            None => {
                tx.delete(key)?;
            }
        }
    }
    Ok(match hook {
        Hook::Redo(log) if !writes.is_empty() => {
            let records: Vec<(&[u8], &[u8])> = writes
                .iter()
                .map(|(k, v)| (&k[..], v.as_deref().unwrap_or(&[])))
                .collect();
            Some(log.append(&records))
        }
        _ => None,
    })
}

/// Runs `body` (its reads; it returns the writes) as one transaction under `hook`.
fn transact(
    handle: &DbHandle,
    hook: Hook<'_>,
    mut body: impl FnMut(&mut Tx<'_>) -> Result<Writes, DbError>,
) -> Result<(), Failure> {
    let seq = handle.transaction(|tx| {
        let writes = body(tx)?;
        apply(tx, &writes, hook)
    })?;
    if let (Hook::Redo(log), Some(seq)) = (hook, seq) {
        log.wait(seq)?;
    }
    Ok(())
}

/// The workloads' sizes and the bytes they write.
pub(super) struct Mix {
    keys: u64,
    tatp: Tatp,
    stock_items: u64,
    districts: u64,
    queues: u64,
    value: Vec<u8>,
}

impl Mix {
    pub(super) fn new(plan: &Plan, value: &[u8]) -> Self {
        Self {
            keys: plan.keys,
            tatp: Tatp::new(plan.tatp_subscribers.max(1)),
            stock_items: plan.stock_items.max(1),
            districts: plan.districts.max(1),
            queues: plan.queues.max(1),
            value: value.to_vec(),
        }
    }

    /// One transaction of `workload`, its keys drawn from `rng` (outside the transaction: a
    /// retry repeats the same one). True when it committed (TATP's reads do not).
    pub(super) fn run(
        &self,
        workload: Workload,
        handle: &DbHandle,
        hook: Hook<'_>,
        rng: &mut SmallRng,
    ) -> Result<bool, Failure> {
        match workload {
            Workload::Update => self.update(handle, hook, rng).map(|()| true),
            Workload::Swap => self.swap(handle, hook, rng).map(|()| true),
            Workload::Tatp => self.tatp(handle, hook, rng),
            Workload::NewOrder => self.new_order(handle, hook, rng).map(|()| true),
            Workload::Queue => self.queue(handle, hook, rng).map(|()| true),
        }
    }

    /// One put (the `undo` configuration: a transaction, to read the old value first).
    fn update(&self, handle: &DbHandle, hook: Hook<'_>, rng: &mut SmallRng) -> Result<(), Failure> {
        let key = table_key(0, rng.gen_range(0..self.keys));
        match hook {
            Hook::Plain => Ok(handle.put(&key, &self.value)?),
            Hook::Redo(log) => {
                handle.put(&key, &self.value)?;
                Ok(log.wait(log.append(&[(&key, &self.value)]))?)
            }
            Hook::Undo(_) => transact(handle, hook, |_| {
                Ok(vec![(key.to_vec(), Some(self.value.clone()))])
            }),
        }
    }

    /// Two keys read and written swapped.
    fn swap(&self, handle: &DbHandle, hook: Hook<'_>, rng: &mut SmallRng) -> Result<(), Failure> {
        let a = rng.gen_range(0..self.keys);
        let b = (a + rng.gen_range(1..self.keys.max(2))) % self.keys;
        let (ka, kb) = (table_key(0, a), table_key(0, b));
        transact(handle, hook, |tx| {
            let va = tx.get(&ka)?.unwrap_or_else(|| vec![0; VALUE_BYTES]);
            let vb = tx.get(&kb)?.unwrap_or_else(|| vec![0; VALUE_BYTES]);
            Ok(vec![(ka.to_vec(), Some(vb)), (kb.to_vec(), Some(va))])
        })
    }

    /// One TATP transaction: reads as plain gets (false), writes as one transaction (true).
    fn tatp(&self, handle: &DbHandle, hook: Hook<'_>, rng: &mut SmallRng) -> Result<bool, Failure> {
        let mut ops = Vec::with_capacity(2);
        self.tatp.next(rng, &mut ops);
        if ops.iter().all(|op| matches!(op, Op::Read(_))) {
            for op in &ops {
                if let Op::Read(k) = op {
                    handle.get(&k.to_be_bytes())?;
                }
            }
            return Ok(false);
        }
        transact(handle, hook, |tx| {
            let mut writes = Writes::with_capacity(ops.len());
            for op in &ops {
                match *op {
                    Op::Read(k) => {
                        tx.get(&k.to_be_bytes())?;
                    }
                    Op::Update(k) => {
                        let key = k.to_be_bytes();
                        let mut row = tx.get(&key)?.unwrap_or_else(|| self.value.clone());
                        row[0] ^= 1;
                        writes.push((key.to_vec(), Some(row)));
                    }
                    Op::Insert(k) => {
                        writes.push((k.to_be_bytes().to_vec(), Some(self.value.clone())))
                    }
                    Op::Delete(k) => writes.push((k.to_be_bytes().to_vec(), None)),
                }
            }
            Ok(writes)
        })
        .map(|()| true)
    }

    /// One NewOrder: a district's counter read and incremented, 5-15 distinct items read and
    /// their stocks updated, the order and its lines inserted.
    fn new_order(
        &self,
        handle: &DbHandle,
        hook: Hook<'_>,
        rng: &mut SmallRng,
    ) -> Result<(), Failure> {
        let district = rng.gen_range(0..self.districts);
        let lines = rng.gen_range(5..=15);
        let mut items: Vec<(u64, u8)> = (0..lines)
            .map(|_| (rng.gen_range(0..self.stock_items), rng.gen_range(1..=10)))
            .collect();
        items.sort_unstable();
        items.dedup_by_key(|(item, _)| *item);
        transact(handle, hook, |tx| {
            let district_key = table_key(DISTRICT, district);
            let order = counter(tx.get(&district_key)?);
            let mut writes = vec![(district_key.to_vec(), Some(counter_value(order + 1)))];
            for &(item, quantity) in &items {
                tx.get(&table_key(ITEM, item))?;
                let stock_key = table_key(STOCK, item);
                let mut stock = tx.get(&stock_key)?.unwrap_or_else(|| self.value.clone());
                stock[0] = stock[0].wrapping_sub(quantity);
                writes.push((stock_key.to_vec(), Some(stock)));
            }
            let order_row = (district << 32) | (order & 0xFFFF_FFFF);
            let order_value = self.value[..ORDER_BYTES].to_vec();
            writes.push((table_key(ORDER, order_row).to_vec(), Some(order_value)));
            for line in 0..items.len() as u64 {
                let line_key = table_key(ORDER_LINE, (order_row << 4) | line);
                let line_value = self.value[..ORDER_LINE_BYTES].to_vec();
                writes.push((line_key.to_vec(), Some(line_value)));
            }
            Ok(writes)
        })
    }

    /// A push or a pop (even odds) on a random queue.
    fn queue(&self, handle: &DbHandle, hook: Hook<'_>, rng: &mut SmallRng) -> Result<(), Failure> {
        let queue = rng.gen_range(0..self.queues);
        let push = rng.gen_bool(0.5);
        let (head_key, tail_key) = (queue_end_key(queue, false), queue_end_key(queue, true));
        transact(handle, hook, |tx| {
            if push {
                let tail = counter(tx.get(&tail_key)?);
                return Ok(vec![
                    (
                        queue_item_key(queue, tail).to_vec(),
                        Some(self.value.clone()),
                    ),
                    (tail_key.to_vec(), Some(counter_value(tail + 1))),
                ]);
            }
            let head = counter(tx.get(&head_key)?);
            let item_key = queue_item_key(queue, head);
            if tx.get(&item_key)?.is_none() {
                return Ok(Vec::new()); // empty
            }
            Ok(vec![
                (item_key.to_vec(), None),
                (head_key.to_vec(), Some(counter_value(head + 1))),
            ])
        })
    }
}

fn queue_end_key(queue: u64, tail: bool) -> [u8; 8] {
    table_key(QUEUE_END, (queue << 1) | u64::from(tail))
}

fn queue_item_key(queue: u64, seq: u64) -> [u8; 8] {
    table_key(QUEUE_ITEM, (queue << 32) | (seq & 0xFFFF_FFFF))
}

/// Units the loader splits the preload into: one per `update` key, TATP subscriber, item,
/// district and queue.
pub(super) fn preload_units(plan: &Plan) -> u64 {
    plan.keys + plan.tatp_subscribers + plan.stock_items + plan.districts + plan.queues
}

/// The (key, value) pairs of preload unit `unit` into `out` (cleared first).
pub(super) fn preload_unit(plan: &Plan, tatp: &Tatp, unit: u64, value: &[u8], out: &mut Writes) {
    out.clear();
    let mut u = unit;
    if u < plan.keys {
        return out.push((table_key(0, u).to_vec(), Some(value.to_vec())));
    }
    u -= plan.keys;
    if u < plan.tatp_subscribers {
        let mut keys = Vec::new();
        tatp.population(u, &mut keys);
        out.extend(
            keys.iter()
                .map(|k| (k.to_be_bytes().to_vec(), Some(value.to_vec()))),
        );
        return;
    }
    u -= plan.tatp_subscribers;
    if u < plan.stock_items {
        out.push((table_key(ITEM, u).to_vec(), Some(value.to_vec())));
        return out.push((table_key(STOCK, u).to_vec(), Some(value.to_vec())));
    }
    u -= plan.stock_items;
    if u < plan.districts {
        return out.push((table_key(DISTRICT, u).to_vec(), Some(counter_value(0))));
    }
    u -= plan.districts;
    out.push((queue_end_key(u, false).to_vec(), Some(counter_value(0))));
    out.push((
        queue_end_key(u, true).to_vec(),
        Some(counter_value(QUEUE_PRELOAD)),
    ));
    for seq in 0..QUEUE_PRELOAD {
        out.push((queue_item_key(u, seq).to_vec(), Some(value.to_vec())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: preload units overlapping (a key loaded twice) or a table's keys colliding
    /// with another's.
    #[test]
    fn preloaded_keys_are_distinct() {
        let plan = Plan {
            keys: 50,
            tatp_subscribers: 20,
            stock_items: 30,
            districts: 5,
            queues: 4,
            ..Plan::new(true)
        };
        let tatp = Tatp::new(plan.tatp_subscribers);
        let (mut all, mut out) = (Vec::new(), Writes::new());
        for unit in 0..preload_units(&plan) {
            preload_unit(&plan, &tatp, unit, &[7; VALUE_BYTES], &mut out);
            all.extend(out.iter().map(|(k, _)| k.clone()));
        }
        let loaded = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), loaded);
        assert!(loaded as u64 >= 50 + 20 + 60 + 5 + 4 * (2 + QUEUE_PRELOAD));
    }

    #[test]
    fn counters_round_trip() {
        assert_eq!(counter(Some(counter_value(42))), 42);
        assert_eq!(counter(None), 0);
        assert_eq!(counter(Some(vec![1, 2])), 0);
    }
}
