//! A command's latency distribution (`latency-tracking`): what `LATENCY HISTOGRAM` and `INFO
//! latencystats` report, as Redis 7.0 reports them from its HDR histograms.
//!
//! Buckets: below 1,024 ns one bucket; above, each power of two of nanoseconds from 2^10 to
//! 2^34 (about 17 s) split into [`SUB_BUCKETS`] equal parts (12.5 % wide), then one bucket for
//! the rest: [`BUCKETS`] atomics per command (1.5 KiB), one `fetch_add` per call, no lock.
//! Redis's histograms keep 2 significant digits; percentiles here are a bucket's upper bound,
//! within 12.5 % of the value.
//!
//! `LATENCY HISTOGRAM`'s levels are Redis's: 1,024 ns × 2^k, each shown as the highest value
//! HDR counts at that level (1,024 ns + its 8 ns unit − 1, and so on) in whole µs (1, 2, 4, 8,
//! 16, 33, 66, ...), with the calls at or below it, only where that count grew.

use std::sync::atomic::{AtomicU64, Ordering};

/// Parts of each power of two of nanoseconds.
pub const SUB_BUCKETS: usize = 8;
/// Powers of two split into parts: 2^10 ns .. 2^34 ns.
pub const OCTAVES: usize = 24;
/// The first power of two split (1,024 ns).
const FIRST_OCTAVE_SHIFT: u32 = 10;
/// Buckets in all: below 1,024 ns, the split octaves, the rest.
pub const BUCKETS: usize = 1 + OCTAVES * SUB_BUCKETS + 1;

/// One command's distribution.
#[derive(Debug)]
pub struct LatencyHistogram {
    buckets: [AtomicU64; BUCKETS],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl LatencyHistogram {
    /// Counts one call of `ns` nanoseconds.
    pub fn record(&self, ns: u64) {
        self.buckets[bucket_of_ns(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// Every bucket's count now.
    pub fn counts(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// Back to no calls (`CONFIG RESETSTAT`).
    pub fn reset(&self) {
        for b in &self.buckets {
            b.store(0, Ordering::Relaxed);
        }
    }
}

/// The bucket of a call of `ns` nanoseconds.
pub fn bucket_of_ns(ns: u64) -> usize {
    if ns < 1 << FIRST_OCTAVE_SHIFT {
        return 0;
    }
    let octave = (u64::BITS - 1 - ns.leading_zeros() - FIRST_OCTAVE_SHIFT) as usize;
    if octave >= OCTAVES {
        return BUCKETS - 1;
    }
    let shift = octave as u32 + FIRST_OCTAVE_SHIFT - SUB_BUCKETS.trailing_zeros();
    let sub = ((ns >> shift) as usize) & (SUB_BUCKETS - 1);
    1 + octave * SUB_BUCKETS + sub
}

/// The largest value bucket `i` holds (ns; `u64::MAX` for the last).
pub fn bucket_high_ns(i: usize) -> u64 {
    if i == 0 {
        return (1 << FIRST_OCTAVE_SHIFT) - 1;
    }
    if i >= BUCKETS - 1 {
        return u64::MAX;
    }
    let (octave, sub) = ((i - 1) / SUB_BUCKETS, (i - 1) % SUB_BUCKETS);
    let base = 1u64 << (octave as u32 + FIRST_OCTAVE_SHIFT);
    base + (sub as u64 + 1) * (base / SUB_BUCKETS as u64) - 1
}

/// `LATENCY HISTOGRAM`'s pairs for `counts`: (level in µs, calls at or below it), only the
/// levels where that count grew; the last level holds every call.
pub fn cdf_levels(counts: &[u64]) -> Vec<(u64, u64)> {
    debug_assert_eq!(counts.len(), BUCKETS);
    let total: u64 = counts.iter().sum();
    let mut out = Vec::new();
    let (mut below, mut previous, mut next) = (0u64, 0u64, 0usize);
    // Bounded: one level per octave, and the rest.
    for k in 0..=OCTAVES as u32 {
        let level_ns = 1u64 << (FIRST_OCTAVE_SHIFT + k);
        // Buckets wholly below the level (every bucket, at the last level).
        while next < BUCKETS && (k == OCTAVES as u32 || bucket_high_ns(next) < level_ns) {
            below += counts[next];
            next += 1;
        }
        if below > previous {
            let unit_ns = 1u64 << (3 + k);
            out.push(((level_ns + unit_ns - 1) / 1_000, below));
            previous = below;
        }
        if below == total {
            break;
        }
    }
    out
}

/// The value (µs) under which `percentile` % of the calls in `counts` fall: the upper bound
/// of the bucket holding that call; 0 with no calls.
pub fn percentile_us(counts: &[u64], percentile: f64) -> f64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, &n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            let high = bucket_high_ns(i).min(1 << (FIRST_OCTAVE_SHIFT + OCTAVES as u32 + 1));
            return (high + 1) as f64 / 1_000.0;
        }
    }
    0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutations caught: a sub-bucket off by one at a power of two, the octave taken from the
    /// wrong bit, the overflow bucket missed, an upper bound that does not meet the next
    /// bucket's first value.
    #[test]
    fn buckets_tile_the_nanoseconds() {
        assert_eq!(bucket_of_ns(0), 0);
        assert_eq!(bucket_of_ns(1_023), 0);
        assert_eq!(bucket_of_ns(1_024), 1);
        assert_eq!(bucket_of_ns(1_024 + 127), 1);
        assert_eq!(bucket_of_ns(1_024 + 128), 2);
        assert_eq!(bucket_of_ns(2_047), 8);
        assert_eq!(bucket_of_ns(2_048), 9);
        assert_eq!(bucket_of_ns(u64::MAX), BUCKETS - 1);
        for i in 0..BUCKETS - 1 {
            let high = bucket_high_ns(i);
            assert_eq!(bucket_of_ns(high), i, "bucket {i}'s last value");
            assert_eq!(
                bucket_of_ns(high + 1),
                i + 1,
                "bucket {}'s first value",
                i + 1
            );
        }
    }

    /// Redis's levels for calls of 10 µs (`16`), 4 µs (`4`), 66 µs (`66`), as redis-server 7.0
    /// replied to the same calls; counts cumulative, levels only where they grow. Mutations
    /// caught: counts not cumulative, a level shown whose count did not grow, the HDR unit
    /// left out of the level (15 instead of 16), the last calls dropped.
    #[test]
    fn levels_are_redis_s() {
        let h = LatencyHistogram::default();
        h.record(10_047);
        assert_eq!(cdf_levels(&h.counts()), [(16, 1)]);
        let h = LatencyHistogram::default();
        for ns in [4_000, 3_500, 60_000, 900] {
            h.record(ns);
        }
        assert_eq!(cdf_levels(&h.counts()), [(1, 1), (4, 3), (66, 4)]);
        let h = LatencyHistogram::default();
        h.record(u64::MAX);
        assert_eq!(cdf_levels(&h.counts()).last().unwrap().1, 1);
        assert!(cdf_levels(&LatencyHistogram::default().counts()).is_empty());
    }

    /// Mutations caught: the rank rounded down (p50 of two calls taken from none), the
    /// bucket's lower bound reported, percentiles of an empty histogram not 0.
    #[test]
    fn percentiles_are_bucket_upper_bounds() {
        let h = LatencyHistogram::default();
        for ns in [1_100, 1_100, 5_000, 900_000] {
            h.record(ns);
        }
        let counts = h.counts();
        assert_eq!(percentile_us(&counts, 50.0), 1.152);
        assert_eq!(percentile_us(&counts, 75.0), 5.12);
        assert_eq!(percentile_us(&counts, 99.0), 917.504);
        assert_eq!(percentile_us(&counts, 0.0), 1.152);
        assert_eq!(
            percentile_us(&LatencyHistogram::default().counts(), 99.0),
            0.0
        );
    }
}
