//! Transactions, write batches and durability modes.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{emulated, run_parallel, value_for, SeedGuardLite};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_crash as crash;
use tamer_device::{CrashPoint, EmulatorConfig, FaultPlan, FaultState};
use tamer_store::{
    Db, DbError, DbHandle, DeviceKind, Durability, WriteBatch, MAX_DELTAS, MAX_TX_ATTEMPTS,
    SMALL_KEY_MAX, SMALL_VALUE_MAX,
};

type Job<R> = Box<dyn FnOnce(DbHandle) -> R + Send>;

/// The bank helpers the crash harness uses too.
use crash::power::{account, balance, transfer, ACCOUNTS, START};

fn open_accounts(db: &Db) {
    crash::power::open_accounts(db).unwrap();
}

fn total(h: &DbHandle) -> u64 {
    h.transaction(|tx| (0..ACCOUNTS).map(|i| balance(tx, i)).sum())
        .unwrap()
}

/// Six writers transfer between random accounts while two readers sum every balance inside
/// a transaction: every sum, and the final one, is the starting total. Mutations caught: a
/// transaction that does not lock what it reads (lost updates change the total), reads that
/// see half a transaction (a reader's sum differs).
#[test]
fn concurrent_transfers_conserve_the_total() {
    const SEED: u64 = 0x7a11;
    let _guard = SeedGuardLite::new("transfers", SEED);
    let db = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    open_accounts(&db);
    let mut jobs: Vec<Job<u64>> = Vec::new();
    for w in 0..6u64 {
        jobs.push(Box::new(move |h: DbHandle| {
            let mut rng = SmallRng::seed_from_u64(SEED ^ w);
            for _ in 0..300 {
                let a = rng.gen_range(0..ACCOUNTS);
                let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                transfer(&h, a, b, rng.gen_range(0..100)).unwrap();
            }
            0
        }));
    }
    for _ in 0..2 {
        jobs.push(Box::new(|h: DbHandle| {
            for _ in 0..50 {
                assert_eq!(total(&h), START * u64::from(ACCOUNTS), "a reader's sum");
            }
            1
        }));
    }
    assert_eq!(run_parallel(&db, jobs).iter().sum::<u64>(), 2);
    assert_eq!(db.run(total).unwrap(), START * u64::from(ACCOUNTS));
    assert!(db.check().unwrap().is_clean());
    db.close().unwrap();
}

/// A transaction that keeps meeting a key an older one holds fails with `Conflict` at the lock
/// timeout, and changed nothing. Mutations caught: an unbounded wait or retry loop (the test
/// hangs), a conflict that still commits its other writes, a timeout not honoured.
#[test]
fn a_transaction_that_keeps_conflicting_fails_clearly() {
    const TIMEOUT: Duration = Duration::from_millis(100);
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).lock_timeout(TIMEOUT)).unwrap();
    db.put(b"hot", b"0").unwrap();
    let release = Arc::new(AtomicBool::new(false));
    let holding = Arc::new(AtomicBool::new(false));
    let (r1, h1) = (release.clone(), holding.clone());
    let (r2, h2) = (release.clone(), holding.clone());
    let jobs: Vec<Job<Result<(), DbError>>> = vec![
        Box::new(move |h: DbHandle| {
            h.transaction(|tx| {
                tx.put(b"hot", b"1")?;
                h1.store(true, Ordering::Release);
                while !r1.load(Ordering::Acquire) {
                    tamer_runtime::thread::yield_now();
                }
                Ok(())
            })
        }),
        Box::new(move |h: DbHandle| {
            while !h2.load(Ordering::Acquire) {
                tamer_runtime::thread::yield_now();
            }
            let start = Instant::now();
            let result = h.transaction(|tx| {
                tx.put(b"cold", b"x")?;
                tx.put(b"hot", b"2")
            });
            let waited = start.elapsed();
            r2.store(true, Ordering::Release);
            assert!(waited >= TIMEOUT, "gave up after {waited:?}");
            result
        }),
    ];
    let results = run_parallel(&db, jobs);
    assert_eq!(results[0], Ok(()));
    assert!(
        matches!(results[1], Err(DbError::Conflict { attempts }) if attempts <= MAX_TX_ATTEMPTS),
        "{:?}",
        results[1]
    );
    assert_eq!(db.get(b"hot").unwrap(), Some(b"1".to_vec()));
    assert_eq!(
        db.get(b"cold").unwrap(),
        None,
        "the failed transaction wrote"
    );
    db.close().unwrap();
}

/// A closure that returns an error aborts: none of its writes is applied. Mutation caught:
/// writes applied as they are made rather than at commit.
#[test]
fn an_aborted_transaction_changes_nothing() {
    let db = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    db.put(b"a", b"old").unwrap();
    let result: Result<(), DbError> = db.transaction(|tx| {
        tx.put(b"a", b"new")?;
        tx.put(b"b", b"new")?;
        assert_eq!(tx.get(b"a")?, Some(b"new".to_vec()), "reads its own writes");
        Err(DbError::Config("changed my mind".into()))
    });
    assert!(matches!(result, Err(DbError::Config(_))));
    assert_eq!(db.get(b"a").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.len(), 1);
    db.close().unwrap();
}

fn faulty(crash: CrashPoint) -> (Arc<FaultState>, DeviceKind) {
    let model = EmulatorConfig::with_latency_ns(1_000)
        .capacity_bytes(64 << 20)
        .build()
        .unwrap();
    let state = FaultState::new(
        model,
        FaultPlan {
            crash,
            ..FaultPlan::default()
        },
    )
    .unwrap();
    (state.clone(), DeviceKind::Faulty(state))
}

fn reopen_after_power_loss(state: &FaultState, seed: u64) -> Db {
    state.power_loss();
    let image = state
        .crash_model(
            EmulatorConfig::with_latency_ns(1_000),
            &state.seeded_fates(seed),
        )
        .unwrap();
    let db = Db::open(
        "unused",
        emulated(1 << 20, 64 << 20).device(DeviceKind::Model(image)),
    )
    .unwrap();
    assert!(db.check().unwrap().is_clean());
    db
}

/// A batch with more changes than a commit record holds commits through a checkpoint (the
/// overflow path): counted, durable on return, whole after a power loss. Mutation caught: an
/// overflowing batch acknowledged before the checkpoint that makes it durable.
#[test]
fn an_overflowing_batch_commits_through_a_checkpoint() {
    let (state, device) = faulty(CrashPoint::Never);
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).device(device)).unwrap();
    let n = MAX_DELTAS as u32 * 3;
    let mut batch = WriteBatch::new();
    for i in 0..n {
        let key = format!("big-{i}").into_bytes();
        batch.put(&key, &value_for(&key, 1, 60));
    }
    let checkpoints = db.checkpoint_stats().checkpoints;
    db.write(batch).unwrap();
    assert_eq!(db.commit_stats().overflows, 1);
    assert!(db.checkpoint_stats().checkpoints > checkpoints);
    let db2 = reopen_after_power_loss(&state, 7);
    drop(db);
    assert_eq!(db2.len(), u64::from(n));
    for i in (0..n).step_by(37) {
        let key = format!("big-{i}").into_bytes();
        assert_eq!(db2.get(&key).unwrap(), Some(value_for(&key, 1, 60)));
    }
    db2.close().unwrap();
}

/// `Durability::None` acknowledges before anything is durable: after a power loss the store is
/// a prefix of the writes (here, since nothing was checkpointed after the first, possibly
/// none of them), never a partial batch; `Db::sync` then makes everything durable.
/// Mutation caught: `sync` that returns before a flush in `None` mode.
#[test]
fn none_mode_keeps_a_prefix_and_sync_makes_it_durable() {
    let (state, device) = faulty(CrashPoint::Never);
    let options = emulated(1 << 20, 64 << 20)
        .device(device)
        .durability(Durability::None)
        .cleaner(false);
    let db = Db::open("unused", options).unwrap();
    for i in 0..100u32 {
        db.put(&i.to_be_bytes(), &value_for(&i.to_be_bytes(), 0, 50))
            .unwrap();
    }
    db.sync().unwrap();
    for i in 100..200u32 {
        db.put(&i.to_be_bytes(), &value_for(&i.to_be_bytes(), 0, 50))
            .unwrap();
    }
    let db2 = reopen_after_power_loss(&state, 3);
    drop(db);
    let n = db2.len() as u32;
    assert!(
        (100..=200).contains(&n),
        "{n} keys: the synced 100 at least"
    );
    for i in 0..n {
        assert!(db2.contains(&i.to_be_bytes()).unwrap(), "a prefix: key {i}");
    }
    db2.close().unwrap();
}

/// Single-threaded transfers on the fault-injecting device, power cut at a seeded write:
/// after reopening, the balances are exactly those after the transfers that returned (or
/// after the one in flight too), and the total is conserved. Mutations caught: a transaction
/// acknowledged before its group commit's flush, a commit record staged before its records
/// are written, recovery that redoes past a missing timestamp.
#[test]
fn transfers_survive_power_loss_at_any_write() {
    const TRANSFERS_MAX: usize = 400;
    for seed in 0..60u64 {
        let _guard = SeedGuardLite::new("transfers crash", seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let (state, device) = faulty(CrashPoint::AfterWrites(rng.gen_range(20..200)));
        let mut done: Vec<(u32, u32, u64)> = Vec::new();
        let mut opened = false;
        let mut in_flight = false;
        if let Ok(db) = Db::open("unused", emulated(1 << 20, 64 << 20).device(device)) {
            let setup = (0..ACCOUNTS)
                .map(|i| (account(i), START.to_le_bytes().to_vec()))
                .collect::<Vec<_>>();
            let pairs: Vec<(&[u8], &[u8])> = setup
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            opened = db.put_many(&pairs).is_ok();
            for _ in 0..TRANSFERS_MAX {
                if !opened {
                    break;
                }
                let a = rng.gen_range(0..ACCOUNTS);
                let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                let amount = rng.gen_range(0..100);
                done.push((a, b, amount));
                if db.run(move |h| transfer(h, a, b, amount)).unwrap().is_err() {
                    in_flight = true; // may or may not be durable
                    break;
                }
            }
            // The power goes before the store can close.
            state.power_loss();
            drop(db);
        }
        let db = reopen_after_power_loss(&state, seed);
        if !opened {
            assert!(
                db.is_empty() || db.len() == u64::from(ACCOUNTS),
                "seed {seed}"
            );
            continue;
        }
        let got: Vec<u64> = db
            .run(|h| h.transaction(|tx| (0..ACCOUNTS).map(|i| balance(tx, i)).collect()))
            .unwrap()
            .unwrap();
        assert_eq!(
            got.iter().sum::<u64>(),
            START * u64::from(ACCOUNTS),
            "seed {seed}"
        );
        let states = |n: usize| {
            let mut b = vec![START; ACCOUNTS as usize];
            for &(x, y, amount) in &done[..n] {
                let amount = amount.min(b[x as usize]);
                b[x as usize] -= amount;
                b[y as usize] += amount;
            }
            b
        };
        let acked = done.len() - usize::from(in_flight);
        assert!(
            got == states(acked) || got == states(done.len()),
            "seed {seed}: the balances are not those after the {acked} acknowledged transfers"
        );
        db.close().unwrap();
    }
}

/// Seeded crash points of the concurrent harness in CI.
const CONCURRENT_CRASH_POINTS: u64 = 120;

/// The crash harness, concurrent (`tamer_crash::power::concurrent_once`): on two
/// cores, three jobs transfer between accounts while a fourth inserts, overwrites (values up
/// to three pages) and deletes keys, until the power is cut at a seeded write, each unflushed
/// write kept, dropped or torn (one seed in four loses power again during recovery). After
/// reopening: `check` clean, the accounts' total conserved (no transaction half applied), and
/// the churn keys exactly as after the churn job's acknowledged ops (or one more, in flight).
/// Mutations caught: a group commit that acknowledges before its flush (the churn keys lose an
/// acknowledged op), a transaction staged as several records (a crash between them breaks the
/// total), a failed group commit that does not wake the writes waiting for it (the jobs hang
/// for the 60 s wait bound). `CRASH_SEED` replays one seed, `CRASH_POINTS` sets the count.
#[test]
fn concurrent_transfers_and_churn_survive_power_loss() {
    let plan = crash::Plan {
        concurrent: crash::env_seeds(
            "CRASH_POINTS",
            CONCURRENT_CRASH_POINTS,
            crash::CONCURRENT_SEED_BASE,
        ),
        ..crash::Plan::default()
    };
    let report = crash::run(&plan, |_| {});
    eprintln!("{report}");
    assert_eq!(report.crash_points, plan.concurrent.len() as u64);
    assert_eq!(report.violations, 0, "{report}");
}

/// Twelve writes that arrive together on one core (of 16 threads, one the store's cleaner
/// may hold) are made durable by one group commit: the leader lets the others stage before it
/// collects. The gather is bounded in time (50 µs), so a stall of this shared machine can
/// split a group: the twelve are sent together up to three times, and one group must take
/// all twelve at least once. Mutation caught: a leader that collects at once (its own write
/// alone, then a second group for the other eleven: never one group).
#[test]
fn writes_that_arrive_together_share_one_group_commit() {
    let db = Db::open("unused", emulated(1 << 20, 64 << 20).cores(1)).unwrap();
    // Written once first, so that the twelve find their pages in the cache.
    for i in 0..12u32 {
        let key = format!("together-{i}").into_bytes();
        db.put(&key, &value_for(&key, 0, 40)).unwrap();
    }
    let mut groups_seen = Vec::new();
    for round in 1..=3u64 {
        let groups = twelve_together(&db, round);
        groups_seen.push(groups);
        if groups == 1 {
            break;
        }
    }
    assert_eq!(
        groups_seen.last(),
        Some(&1),
        "group commits per round: {groups_seen:?}"
    );
    db.close().unwrap();
}

/// Twelve jobs released together each put one key (value of `round`); the group commits
/// they took.
fn twelve_together(db: &Db, round: u64) -> u64 {
    let before = db.commit_stats().group_commits;
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // Every job parks on `go` first, so that all twelve become runnable in one pass.
    let go = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for i in 0..12u32 {
        let (h, done, go) = (db.handle(), done.clone(), go.clone());
        db.runtime()
            .spawn(move || {
                let forever = u64::MAX;
                while go.load(Ordering::Acquire) == 0 {
                    tamer_runtime::thread::wait_while_eq(&go, 0, forever);
                }
                let key = format!("together-{i}").into_bytes();
                h.put(&key, &value_for(&key, round, 40)).unwrap();
                done.fetch_add(1, Ordering::Release);
            })
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let staged = db.commit_stats().staged;
    go.store(1, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(10);
    while done.load(Ordering::Acquire) < 12 {
        assert!(Instant::now() < deadline, "the writes never finished");
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = db.commit_stats();
    assert_eq!(stats.staged - staged, 12, "{stats:?}");
    stats.group_commits - before
}

/// `Tx::get_cached` answers from its DRAM cache only with the committed value: every put,
/// delete (by a transaction, a plain put, a batch) is seen by the next read, a transaction
/// sees its own writes, values past `SMALL_VALUE_MAX` and keys past `SMALL_KEY_MAX` are read
/// whole. Catches a change that does not drop the cached value (a stale read), a cached
/// uncommitted write (an aborted transaction's value read later), a wrong size cut.
#[test]
fn small_values_are_never_stale() {
    let db = Db::open("unused", emulated(1 << 20, 64 << 20)).unwrap();
    let cached = |db: &Db, key: &'static [u8]| {
        db.run(move |h| h.transaction(|tx| tx.get_cached(key)))
            .unwrap()
            .unwrap()
    };
    let long_key: &'static [u8] = &[b'k'; SMALL_KEY_MAX + 1];
    for key in [&b"d"[..], long_key] {
        assert_eq!(cached(&db, key), None);
        db.put(key, b"one").unwrap();
        assert_eq!(cached(&db, key).as_deref(), Some(&b"one"[..]));
        assert_eq!(cached(&db, key).as_deref(), Some(&b"one"[..])); // from the cache
        db.put(key, b"two").unwrap();
        assert_eq!(cached(&db, key).as_deref(), Some(&b"two"[..]));
        let mut batch = WriteBatch::new();
        batch.put(key, b"three");
        db.write(batch).unwrap();
        assert_eq!(cached(&db, key).as_deref(), Some(&b"three"[..]));
        db.run(move |h| h.transaction(|tx| tx.put(key, &[7; SMALL_VALUE_MAX])))
            .unwrap()
            .unwrap();
        assert_eq!(cached(&db, key), Some(vec![7; SMALL_VALUE_MAX]));
        db.put(key, &[8; SMALL_VALUE_MAX + 1]).unwrap();
        assert_eq!(cached(&db, key), Some(vec![8; SMALL_VALUE_MAX + 1]));
        db.put(key, b"four").unwrap();
        assert_eq!(cached(&db, key).as_deref(), Some(&b"four"[..]));
        // Its own write, then an abort: the next reader sees the committed value.
        let aborted: Result<(), DbError> = db
            .run(move |h| {
                h.transaction(|tx| {
                    tx.put(key, b"uncommitted")?;
                    assert_eq!(tx.get_cached(key)?.as_deref(), Some(&b"uncommitted"[..]));
                    Err(DbError::Runtime("abort".into()))
                })
            })
            .unwrap();
        assert!(aborted.is_err());
        assert_eq!(cached(&db, key).as_deref(), Some(&b"four"[..]));
        db.delete(key).unwrap();
        assert_eq!(cached(&db, key), None);
    }
    db.close().unwrap();
}
