//! The commit ledger: the concurrency core of group commit (`commit.rs`), apart from pages
//! and devices, so that it can be checked under many thread interleavings (`shuttle`, with
//! `cargo test -p tamer-store --features shuttle --lib ledger`).
//!
//! Three rules make a group commit's durable watermark true:
//!
//! 1. A change takes its timestamp `ts` *under its queue's lock*, and before it lets the lock
//!    go it is either staged in that queue or marked an overflow (`overflow_min`).
//! 2. The leader reads the counter (`below`) *before* it takes each queue's lock in turn: every
//!    `ts < below` was assigned under some queue's lock before that read, so the leader finds
//!    it staged there, or marked, once it holds that lock. It reads `overflow_min` after the
//!    last lock.
//! 3. Once what it took is durable (the caller's writes and flush), every `ts` below both
//!    `below` and `overflow_min` is durable: the watermark moves up to the lower of the two,
//!    minus one. Overflowed changes are durable only through a checkpoint, which runs with no
//!    change in progress (the caller's exclusive latch) and no leader (the leader lock), and
//!    covers every `ts` assigned so far.
//!
//! The primitives are std's, or shuttle's under the `shuttle` feature (then only this
//! module's tests may run: the rest of the store needs the real runtime).

#[cfg(feature = "shuttle")]
use shuttle::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex, MutexGuard,
};
#[cfg(not(feature = "shuttle"))]
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex, MutexGuard,
};

/// The ledger of one store: per-queue state `Q` (pages, images: the caller's), the counter,
/// the durable watermark and the lowest overflowed `ts`.
pub(crate) struct Ledger<Q> {
    queues: Box<[Mutex<Q>]>,
    /// The next commit timestamp.
    pub next_ts: AtomicU64,
    /// Every `ts` up to this one is durable (in a queue or a checkpoint).
    pub durable_ts: AtomicU64,
    /// The lowest `ts` assigned but not staged (an overflow), `u64::MAX` when none.
    overflow_min: AtomicU64,
}

/// What a leader took from the queues: the watermark it may publish once that is durable.
#[must_use = "publish the batch once what was taken is durable"]
pub(crate) struct Batch {
    below: u64,
    overflow_min: u64,
}

impl<Q> Ledger<Q> {
    /// A ledger over `queues` (at least one), timestamps continuing after `last_ts`.
    pub fn new(queues: Vec<Q>, last_ts: u64) -> Self {
        assert!(!queues.is_empty(), "a ledger needs a queue");
        Self {
            queues: queues.into_iter().map(Mutex::new).collect(),
            next_ts: AtomicU64::new(last_ts + 1),
            durable_ts: AtomicU64::new(last_ts),
            overflow_min: AtomicU64::new(u64::MAX),
        }
    }

    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Queue `q`'s state, locked (a poisoned lock is taken over: its state is only pages).
    pub fn lock(&self, q: usize) -> MutexGuard<'_, Q> {
        self.queues[q].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rule 1: takes a `ts` under queue `q`'s lock and lets `stage` record the change there;
    /// `stage` returning `None` marks an overflow. Returns the `ts` and what `stage` gave.
    pub fn stage<R>(
        &self,
        q: usize,
        stage: impl FnOnce(&mut Q, u64) -> Option<R>,
    ) -> (u64, Option<R>) {
        let mut queue = self.lock(q);
        let ts = self.next_ts.fetch_add(1, Ordering::SeqCst);
        let staged = stage(&mut queue, ts);
        if staged.is_none() {
            self.overflow_min.fetch_min(ts, Ordering::SeqCst);
        }
        drop(queue);
        (ts, staged)
    }

    /// Rule 2, the leader's collection (one leader at a time: the caller's lock): `take` sees
    /// each queue under its lock.
    pub fn collect(&self, mut take: impl FnMut(usize, &mut Q)) -> Batch {
        let below = self.next_ts.load(Ordering::SeqCst);
        for q in 0..self.queues.len() {
            take(q, &mut self.lock(q));
        }
        Batch {
            below,
            overflow_min: self.overflow_min.load(Ordering::SeqCst),
        }
    }

    /// Rule 3: what `batch` took is durable; returns the watermark now.
    pub fn publish(&self, batch: Batch) -> u64 {
        assert!(batch.below >= 1, "timestamps start at 1");
        let durable = (batch.below - 1).min(batch.overflow_min.saturating_sub(1));
        self.durable_ts
            .fetch_max(durable, Ordering::AcqRel)
            .max(durable)
    }

    /// Whether `ts` is durable.
    pub fn is_durable(&self, ts: u64) -> bool {
        self.durable_ts.load(Ordering::Acquire) >= ts
    }

    /// Whether a change at or below `ts` overflowed and waits for a checkpoint.
    pub fn overflowed_by(&self, ts: u64) -> bool {
        self.overflow_min.load(Ordering::Acquire) <= ts
    }

    /// The last `ts` assigned. With no change in progress (the checkpoint's exclusive latch),
    /// every change up to it is applied.
    pub fn last_ts(&self) -> u64 {
        self.next_ts.load(Ordering::SeqCst) - 1
    }

    /// A checkpoint made every `ts` up to `ts` durable (called with no change in progress and
    /// no leader): each queue starts over (`restart`), overflows are forgotten.
    pub fn checkpointed(&self, ts: u64, mut restart: impl FnMut(usize, &mut Q)) {
        assert!(
            ts <= self.last_ts(),
            "a checkpoint covers only assigned timestamps"
        );
        for q in 0..self.queues.len() {
            restart(q, &mut self.lock(q));
        }
        self.overflow_min.store(u64::MAX, Ordering::SeqCst);
        self.durable_ts.fetch_max(ts, Ordering::AcqRel);
    }
}

/// The ledger under shuttle's randomized schedules: stagers on several queues, some
/// overflowing, a leader persisting batches into a model of the device, a checkpointer; every
/// acknowledged `ts` must be in what recovery would redo (the device's records above the last
/// checkpoint form a gap-free run up to it) or in the checkpoint.
#[cfg(all(test, feature = "shuttle"))]
mod shuttle_tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use shuttle::sync::{Mutex, RwLock};
    use shuttle::thread;

    use super::Ledger;

    /// A queue's staged records (their `ts`).
    #[derive(Default)]
    struct Staged(Vec<u64>);

    /// What the model device holds: records made durable by group commits, and the last
    /// checkpoint's `ts`.
    #[derive(Default)]
    struct Device {
        records: BTreeSet<u64>,
        checkpoint_ts: u64,
    }

    struct World {
        ledger: Ledger<Staged>,
        /// The checkpoint latch: shared while a change stages, exclusive for a checkpoint.
        latch: RwLock<()>,
        /// One leader (group commit or checkpoint) at a time.
        leader: Mutex<()>,
        device: Mutex<Device>,
    }

    impl World {
        fn new(queues: usize) -> Self {
            World {
                ledger: Ledger::new((0..queues).map(|_| Staged::default()).collect(), 0),
                latch: RwLock::new(()),
                leader: Mutex::new(()),
                device: Mutex::new(Device::default()),
            }
        }

        /// Recovery's rule: the run of records right after the checkpoint, without a gap.
        fn recoverable(&self, ts: u64) -> bool {
            let device = self.device.lock().unwrap();
            ts <= device.checkpoint_ts
                || (device.checkpoint_ts + 1..=ts).all(|t| device.records.contains(&t))
        }

        fn group_commit(&self) {
            let mut taken = Vec::new();
            let batch = self.ledger.collect(|_, q| taken.append(&mut q.0));
            // The writes and flush: the taken records reach the device.
            self.device.lock().unwrap().records.extend(taken);
            self.ledger.publish(batch);
        }

        fn checkpoint(&self) {
            let _x = self.latch.write().unwrap();
            let _leader = self.leader.lock().unwrap();
            let ts = self.ledger.last_ts();
            {
                let mut device = self.device.lock().unwrap();
                device.checkpoint_ts = ts;
                device.records.clear();
            }
            self.ledger.checkpointed(ts, |_, q| q.0.clear());
        }

        /// Stages one change on queue `q` (an overflow when `overflow`), then waits as
        /// `Durability::Commit` does and checks that it would survive a crash now.
        fn commit(&self, q: usize, overflow: bool) {
            let (ts, _) = {
                let _s = self.latch.read().unwrap();
                self.ledger
                    .stage(q, |queue, ts| (!overflow).then(|| queue.0.push(ts)))
            };
            // Bounded: each turn leads a group commit, runs a checkpoint or yields to one.
            for _ in 0..1_000 {
                if self.ledger.is_durable(ts) {
                    assert!(
                        self.recoverable(ts),
                        "ts {ts} acknowledged, not recoverable"
                    );
                    return;
                }
                if self.ledger.overflowed_by(ts) {
                    self.checkpoint();
                } else if let Ok(_leader) = self.leader.try_lock() {
                    self.group_commit();
                } else {
                    thread::yield_now();
                }
            }
            panic!("ts {ts} never became durable");
        }
    }

    fn run(queues: usize, threads: usize, commits: usize, overflow_every: usize) {
        let world = Arc::new(World::new(queues));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let world = world.clone();
                thread::spawn(move || {
                    for i in 0..commits {
                        let overflow = overflow_every > 0 && (t + i) % overflow_every == 0;
                        world.commit(t % queues, overflow);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let last = world.ledger.last_ts();
        assert!(world.ledger.is_durable(last));
        assert!(world.recoverable(last));
    }

    // Mutations caught (each tried: every one fails within the iterations below): the leader
    // reading the counter after the queue locks, a `ts` taken outside the queue lock
    // (both: the first two tests), `publish` ignoring `overflow_min` (the third).
    #[test]
    fn acknowledged_commits_are_recoverable_pct() {
        shuttle::check_pct(|| run(2, 3, 3, 0), 3_000, 3);
    }

    #[test]
    fn acknowledged_commits_are_recoverable_random() {
        shuttle::check_random(|| run(2, 3, 3, 0), 3_000);
    }

    #[test]
    fn overflows_and_checkpoints_keep_the_watermark_true() {
        shuttle::check_pct(|| run(2, 3, 3, 4), 3_000, 3);
        shuttle::check_random(|| run(3, 3, 2, 3), 3_000);
    }
}
