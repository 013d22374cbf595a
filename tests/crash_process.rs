//! The process crash test: the real `tamer` binary runs a seeded workload on a store
//! file on the real disk (io_uring, O_DIRECT) and is killed with SIGKILL at a seeded instant;
//! the store reopened in this process must be the state after some operation at or after the
//! last one the worker acknowledged (at most the one in flight more), with `check` clean. The
//! harness is library code (`tamer_crash::process`, also run by `tamer crash`).
//! `CRASH_KILLS` sets the count (CI: 20), `CRASH_SEED` replays one seed.

use tamer_crash as crash;

/// Catches everything the fault-device crash tests catch, on the real path: io_uring on a
/// file, a real process, the kernel's own ordering of writes. Mutations caught: the worker
/// printing `durable` before its write returns (an acknowledged op lost), a `Commit` write
/// acknowledged before its flush, a checkpoint whose superblock is written before its pages.
#[test]
fn sigkill_at_random_instants_reopens_at_a_checkpoint() {
    let plan = crash::Plan {
        process: crash::env_seeds("CRASH_KILLS", crash::CI_KILLS, crash::PROCESS_SEED_BASE),
        worker: Some(env!("CARGO_BIN_EXE_tamer").into()),
        data_dir: std::env::temp_dir(),
        ..crash::Plan::default()
    };
    let report = crash::run(&plan, |_| {});
    eprintln!("{report}");
    assert_eq!(report.kills, plan.process.len() as u64);
    assert_eq!(report.violations, 0, "{report}");
}
