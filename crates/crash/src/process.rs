//! SIGKILL of a real process: the `tamer` binary runs the [`worker`](super::worker)'s seeded
//! workload on a store file on the disk (io_uring, `O_DIRECT`) and prints `durable <ops>` after
//! each acknowledged operation; this process records those lines, kills the worker with
//! SIGKILL at a seeded instant, reopens the file and checks that the store is the state after
//! some operation at or after the last acknowledged one (at most the one in flight more), with
//! `check` clean.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tamer_store::Db;

use super::worker::{apply, ops, options, second_part};

/// What one kill came to (when its checks passed).
#[derive(Clone, Copy, Debug)]
pub struct KillOutcome {
    /// The last acknowledged op count the worker printed.
    pub durable: usize,
    /// The op count the store came back at.
    pub back_at: usize,
}

impl KillOutcome {
    /// Whether the store came back at exactly the last acknowledged operation.
    pub fn at_last_ack(&self) -> bool {
        self.back_at == self.durable
    }
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Kills `worker crash-worker` (the `tamer` binary) with SIGKILL after a seeded number of
/// acknowledged operations (1..=281, or 5 s) plus a seeded few milliseconds, so the kill lands
/// anywhere in an operation; its store file lives in `dir` (a disk with `O_DIRECT`).
pub fn kill_once(worker: &Path, dir: &Path, seed: u64) -> Result<KillOutcome, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join(format!("tamer-crash-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(second_part(&path));
    let _cleanup = (TempFile(path.clone()), TempFile(second_part(&path)));
    let durable = run_and_kill(worker, &path, seed)?;
    ensure!(
        path.exists(),
        "the worker never created its store {} (acknowledged {durable})",
        path.display()
    );
    let got = reopen(&path, seed)?;
    let mut expected = HashMap::new();
    for (done, op) in ops(seed).enumerate() {
        if done >= durable && got == expected {
            // Every operation that returned is durable; at most the one in flight more.
            ensure!(
                done <= durable + 1,
                "back at op {done}, past the {durable} acknowledged and the one in flight"
            );
            return Ok(KillOutcome {
                durable,
                back_at: done,
            });
        }
        ensure!(
            done < durable + 100_000,
            "the store is no state at or after op {durable} ({} keys)",
            got.len()
        );
        apply(&mut expected, &op);
    }
    unreachable!("the workload is endless")
}

/// Runs the worker on `path` and kills it at the seeded instant; the last operation count it
/// acknowledged.
fn run_and_kill(worker: &Path, path: &Path, seed: u64) -> Result<usize, String> {
    let mut child = Command::new(worker)
        .arg("crash-worker")
        .arg(path)
        .args(["--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the worker {}: {e}", worker.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("durable ") {
                let _ = tx.send(n.parse::<usize>().expect("a count"));
            }
        }
    });
    let wanted = 1 + (seed % 8) as usize * 40;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut durable = 0;
    let mut seen = 0;
    while seen < wanted && Instant::now() < deadline {
        if let Ok(n) = rx.recv_timeout(Duration::from_millis(50)) {
            durable = n;
            seen += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(seed.wrapping_mul(7) % 40));
    child.kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let _ = child.wait();
    reader
        .join()
        .map_err(|_| "the worker's output was not `durable <n>` lines".to_string())?;
    // Lines printed after our last read are durable too.
    while let Ok(n) = rx.try_recv() {
        durable = n;
    }
    Ok(durable)
}

/// Reopens the killed worker's store, checks it (`check` clean) and returns its contents.
fn reopen(path: &Path, seed: u64) -> Result<HashMap<Vec<u8>, Vec<u8>>, String> {
    let db = Db::open(path, options(path, seed).cleaner(false))
        .map_err(|e| format!("reopening after SIGKILL: {e}"))?;
    let report = db.check().map_err(|e| format!("check: {e}"))?;
    ensure!(report.is_clean(), "check after SIGKILL: {report:?}");
    let mut got = HashMap::new();
    for item in db.cursor() {
        let (k, v) = item.map_err(|e| format!("the scan: {e}"))?;
        got.insert(k, v);
    }
    db.close().map_err(|e| format!("closing: {e}"))?;
    Ok(got)
}
