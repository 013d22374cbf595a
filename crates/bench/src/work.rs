//! Calibrated CPU work: the "W ns of work per access" of the killer-microsecond study's microbenchmark.

use std::hint::black_box;
use std::time::Instant;

/// A busy loop calibrated to nanoseconds on this machine.
#[derive(Clone, Copy, Debug)]
pub struct Work {
    iterations_per_us: f64,
}

impl Work {
    /// Measures the loop (best of several runs, so a noisy neighbour only makes it slower).
    pub fn calibrate() -> Self {
        const ITERATIONS: u64 = 2_000_000;
        let mut best_ns = u128::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            black_box(spin(ITERATIONS, 1));
            best_ns = best_ns.min(start.elapsed().as_nanos());
        }
        Self {
            iterations_per_us: ITERATIONS as f64 * 1_000.0 / best_ns.max(1) as f64,
        }
    }

    /// Loop iterations for `ns` nanoseconds.
    pub fn iterations_for(&self, ns: u64) -> u64 {
        (self.iterations_per_us * ns as f64 / 1_000.0).round() as u64
    }

    /// Burns `iterations` (from [`Work::iterations_for`]); returns a value to keep.
    #[inline]
    pub fn run(&self, iterations: u64, seed: u64) -> u64 {
        spin(iterations, seed)
    }
}

#[inline(never)]
fn spin(iterations: u64, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..iterations {
        // xorshift64: a dependent chain the CPU cannot skip.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = black_box(x);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_is_positive_and_proportional() {
        let work = Work::calibrate();
        assert!(work.iterations_for(1_000) > 0);
        let a = work.iterations_for(1_000);
        let b = work.iterations_for(2_000);
        assert!(b >= 2 * a - 1 && b <= 2 * a + 1);
    }
}
