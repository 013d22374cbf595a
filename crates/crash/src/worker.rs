//! The process harness's worker (`tamer crash-worker`): a seeded, endless sequence of puts
//! (small and extent-sized values), deletes and flushes on a store file, each operation that
//! returns printed as `durable <ops>` (the operations done, that one included), until the
//! process is killed. [`super::process`] kills it with SIGKILL at a seeded instant, reopens the
//! file and checks that the store is the state after some operation at or after the last
//! `durable` line, with `check` clean. `ops` and `apply` let it rebuild those states.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tamer_store::{Db, DbOptions, DeviceKind, StripePart};

/// Keys the workload touches.
pub const KEYS: u32 = 2_000;
/// Largest value (the store's `max_value_bytes` for this workload).
pub const MAX_VALUE: usize = 16 << 10;

/// One operation of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Puts a key: [`value`] of `len` bytes for `version`.
    Put {
        /// The key's number.
        key: u32,
        /// The value's length.
        len: usize,
        /// The value's version.
        version: u64,
    },
    /// Deletes a key.
    Delete {
        /// The key's number.
        key: u32,
    },
    /// `Db::flush`: a checkpoint.
    Flush,
}

/// The workload of `seed`, endless: 5 % extent-sized puts, 70 % small puts, 20 % deletes, a
/// flush in 50.
pub fn ops(seed: u64) -> impl Iterator<Item = Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    std::iter::from_fn(move || {
        let key = rng.gen_range(0..KEYS);
        Some(match rng.gen_range(0..100) {
            0 | 1 => Op::Flush,
            2..=21 => Op::Delete { key },
            22..=26 => Op::Put {
                key,
                len: rng.gen_range(5_000..MAX_VALUE),
                version: rng.gen(),
            },
            _ => Op::Put {
                key,
                len: rng.gen_range(0..600),
                version: rng.gen(),
            },
        })
    })
}

/// The bytes a put of `key` at `version` writes.
pub fn value(key: u32, version: u64, len: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(version ^ (u64::from(key) << 32));
    let mut bytes = vec![0u8; len];
    rng.fill(&mut bytes[..]);
    bytes
}

/// The store's contents after `op`, from its contents before.
pub fn apply(model: &mut HashMap<Vec<u8>, Vec<u8>>, op: &Op) {
    match *op {
        Op::Put { key, len, version } => {
            model.insert(key.to_be_bytes().to_vec(), value(key, version, len));
        }
        Op::Delete { key } => {
            model.remove(&key.to_be_bytes()[..]);
        }
        Op::Flush => {}
    }
}

/// The second file of a striped store at `path` (odd seeds).
pub fn second_part(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".part1");
    PathBuf::from(name)
}

/// The options the worker and the checker open the store at `path` with: odd seeds stripe it
/// over `path` and [`second_part`] in units of 4 pages.
pub fn options(path: &Path, seed: u64) -> DbOptions {
    let device = if seed % 2 == 1 {
        DeviceKind::Striped {
            parts: [path.to_path_buf(), second_part(path)]
                .into_iter()
                .map(|path| StripePart {
                    path,
                    device: DeviceKind::Uring,
                })
                .collect(),
            unit_blocks: 4,
        }
    } else {
        DeviceKind::Uring
    };
    DbOptions::new(4 << 20)
        .device(device)
        .cores(1)
        .max_directory_depth(10)
        .pinned_directory_depth(2)
        .max_value_bytes(MAX_VALUE)
        .initial_file_bytes(4 << 20)
}

/// Runs the workload of `seed` on the store at `path` until killed (or an error).
pub fn run_worker(path: &Path, seed: u64) -> Result<(), String> {
    let db = Db::open(path, options(path, seed))
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    let mut out = std::io::stdout().lock();
    for (done, op) in ops(seed).enumerate() {
        match op {
            Op::Put { key, len, version } => db.put(&key.to_be_bytes(), &value(key, version, len)),
            Op::Delete { key } => db.delete(&key.to_be_bytes()).map(|_| ()),
            Op::Flush => db.flush(),
        }
        .and_then(|()| {
            // `Durability::Commit` (the default): every operation that returned is durable, this
            // one included. Said before going on.
            writeln!(out, "durable {}", done + 1)
                .and_then(|()| out.flush())
                .map_err(|e| tamer_store::DbError::Runtime(e.to_string()))
        })
        .map_err(|e| format!("operation {done} ({op:?}): {e}"))?;
    }
    Ok(())
}
