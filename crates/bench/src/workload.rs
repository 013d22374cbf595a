//! Workload generators for the tiered-store benchmarks (AstriFlash's workloads): YCSB's
//! scrambled Zipfian key chooser, the YCSB B and C operation mixes, a TATP-like transaction mix,
//! and open-loop Poisson arrivals. Everything is driven by a caller-owned seeded generator, so
//! a run is reproducible from its seed.

use rand::Rng;

/// YCSB's Zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), over `0..items` with skew `theta` (YCSB's default 0.99): item 0 is the most
/// popular. Construction is O(items) (it sums the zeta constant); drawing is O(1).
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
}

impl Zipfian {
    /// A generator over `0..items`; `theta` in (0, 1).
    pub fn new(items: u64, theta: f64) -> Self {
        assert!(items >= 2, "a Zipfian needs at least 2 items");
        assert!(theta > 0.0 && theta < 1.0, "theta must be in (0, 1)");
        let zeta = |n: u64| (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
        let zeta_n = zeta(items);
        let zeta_2 = zeta(2);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n);
        Self {
            items,
            theta,
            alpha,
            zeta_n,
            eta,
        }
    }

    /// Number of items.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// A rank in `0..items`, rank 0 most popular.
    pub fn next_rank(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let rank = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.items - 1)
    }

    /// YCSB's *scrambled* Zipfian: the popular ranks are spread over the key space by a hash,
    /// so hot keys do not cluster in neighbouring pages.
    pub fn next_key(&self, rng: &mut impl Rng) -> u64 {
        fnv1a_u64(self.next_rank(rng)) % self.items
    }
}

/// FNV-1a over the 8 bytes of `value` (YCSB scrambles ranks with FNV).
pub fn fnv1a_u64(value: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// One key-value operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Reads a record.
    Read(u64),
    /// Updates a record.
    Update(u64),
    /// Inserts a record.
    Insert(u64),
    /// Deletes a record.
    Delete(u64),
}

/// YCSB core workloads over a Zipfian key chooser.
#[derive(Clone, Debug)]
pub struct Ycsb {
    keys: Zipfian,
    read_fraction: f64,
}

impl Ycsb {
    /// Workload B: 95 % reads, 5 % updates.
    pub fn b(records: u64) -> Self {
        Self {
            keys: Zipfian::new(records, 0.99),
            read_fraction: 0.95,
        }
    }

    /// Workload C: reads only.
    pub fn c(records: u64) -> Self {
        Self {
            keys: Zipfian::new(records, 0.99),
            read_fraction: 1.0,
        }
    }

    /// The next operation.
    pub fn next(&self, rng: &mut impl Rng) -> Op {
        let key = self.keys.next_key(rng);
        if rng.gen::<f64>() < self.read_fraction {
            Op::Read(key)
        } else {
            Op::Update(key)
        }
    }
}

/// The TATP transaction types and their standard mix (percent): 80 % read-only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TatpTxn {
    /// GET_SUBSCRIBER_DATA.
    GetSubscriberData,
    /// GET_NEW_DESTINATION.
    GetNewDestination,
    /// GET_ACCESS_DATA.
    GetAccessData,
    /// UPDATE_SUBSCRIBER_DATA.
    UpdateSubscriberData,
    /// UPDATE_LOCATION.
    UpdateLocation,
    /// INSERT_CALL_FORWARDING.
    InsertCallForwarding,
    /// DELETE_CALL_FORWARDING.
    DeleteCallForwarding,
}

/// The standard TATP mix: (transaction, percent).
pub const TATP_MIX: [(TatpTxn, u32); 7] = [
    (TatpTxn::GetSubscriberData, 35),
    (TatpTxn::GetNewDestination, 10),
    (TatpTxn::GetAccessData, 35),
    (TatpTxn::UpdateSubscriberData, 2),
    (TatpTxn::UpdateLocation, 14),
    (TatpTxn::InsertCallForwarding, 2),
    (TatpTxn::DeleteCallForwarding, 2),
];

/// A TATP-like workload on a key-value store: each subscriber has a subscriber record, 1-4
/// access-info records, 1-4 special-facility records and 0-3 call-forwarding records, each its
/// own key (`table << 56 | subscriber << 8 | index`). Subscribers are chosen with TATP's
/// non-uniform NURand(A, 1, n).
#[derive(Clone, Debug)]
pub struct Tatp {
    subscribers: u64,
    nurand_a: u64,
}

/// Tables of the TATP schema, the top byte of a key.
pub mod tatp_table {
    /// The subscriber table.
    pub const SUBSCRIBER: u64 = 1;
    /// The access-info table.
    pub const ACCESS_INFO: u64 = 2;
    /// The special-facility table.
    pub const SPECIAL_FACILITY: u64 = 3;
    /// The call-forwarding table.
    pub const CALL_FORWARDING: u64 = 4;
}

impl Tatp {
    /// A TATP mix over `subscribers` subscribers.
    pub fn new(subscribers: u64) -> Self {
        assert!((1..(1 << 48)).contains(&subscribers), "1..2^48 subscribers");
        // TATP: A = 65535 for up to 1M subscribers, 1048575 up to 10M, 2097151 beyond.
        let nurand_a = match subscribers {
            0..=1_000_000 => 65_535,
            1_000_001..=10_000_000 => 1_048_575,
            _ => 2_097_151,
        };
        Self {
            subscribers,
            nurand_a,
        }
    }

    /// The key of `table` row `index` of `subscriber`.
    pub fn key(table: u64, subscriber: u64, index: u64) -> u64 {
        (table << 56) | (subscriber << 8) | index
    }

    /// NURand(A, 1, n) - 1: a subscriber id in `0..subscribers`.
    pub fn subscriber(&self, rng: &mut impl Rng) -> u64 {
        let x = rng.gen_range(0..=self.nurand_a);
        let y = rng.gen_range(1..=self.subscribers);
        (x | y) % self.subscribers
    }

    /// Draws a transaction type from the standard mix.
    pub fn next_txn(&self, rng: &mut impl Rng) -> TatpTxn {
        let mut roll = rng.gen_range(0..100u32);
        for (txn, percent) in TATP_MIX {
            if roll < percent {
                return txn;
            }
            roll -= percent;
        }
        unreachable!("the mix sums to 100")
    }

    /// The key operations of one transaction, appended to `ops` (cleared first).
    pub fn next(&self, rng: &mut impl Rng, ops: &mut Vec<Op>) -> TatpTxn {
        use tatp_table::*;
        ops.clear();
        let txn = self.next_txn(rng);
        let s = self.subscriber(rng);
        let sub = Self::key(SUBSCRIBER, s, 0);
        match txn {
            TatpTxn::GetSubscriberData => ops.push(Op::Read(sub)),
            TatpTxn::GetNewDestination => {
                let sf = rng.gen_range(0..4);
                ops.push(Op::Read(Self::key(SPECIAL_FACILITY, s, sf)));
                ops.push(Op::Read(Self::key(CALL_FORWARDING, s, sf)));
            }
            TatpTxn::GetAccessData => {
                ops.push(Op::Read(Self::key(ACCESS_INFO, s, rng.gen_range(0..4))));
            }
            TatpTxn::UpdateSubscriberData => {
                ops.push(Op::Update(sub));
                ops.push(Op::Update(Self::key(
                    SPECIAL_FACILITY,
                    s,
                    rng.gen_range(0..4),
                )));
            }
            TatpTxn::UpdateLocation => ops.push(Op::Update(sub)),
            TatpTxn::InsertCallForwarding => {
                ops.push(Op::Read(sub));
                ops.push(Op::Insert(Self::key(
                    CALL_FORWARDING,
                    s,
                    rng.gen_range(0..4),
                )));
            }
            TatpTxn::DeleteCallForwarding => {
                ops.push(Op::Read(sub));
                ops.push(Op::Delete(Self::key(
                    CALL_FORWARDING,
                    s,
                    rng.gen_range(0..4),
                )));
            }
        }
        txn
    }

    /// Every key of the initial population of `subscriber` (TATP's row counts, seeded per
    /// subscriber so that a loader and a checker agree).
    pub fn population(&self, subscriber: u64, out: &mut Vec<u64>) {
        use tatp_table::*;
        out.clear();
        out.push(Self::key(SUBSCRIBER, subscriber, 0));
        let h = fnv1a_u64(subscriber);
        let access = 1 + (h & 3);
        let facilities = 1 + ((h >> 2) & 3);
        let forwards = (h >> 4) & 3;
        out.extend((0..access).map(|i| Self::key(ACCESS_INFO, subscriber, i)));
        out.extend((0..facilities).map(|i| Self::key(SPECIAL_FACILITY, subscriber, i)));
        out.extend((0..forwards).map(|i| Self::key(CALL_FORWARDING, subscriber, i)));
    }
}

/// Open-loop Poisson arrivals: exponential inter-arrival gaps at `rate_per_s`.
#[derive(Clone, Copy, Debug)]
pub struct Poisson {
    mean_gap_ns: f64,
}

impl Poisson {
    /// Poisson arrivals at `rate_per_s` per second.
    pub fn new(rate_per_s: f64) -> Self {
        assert!(rate_per_s > 0.0, "arrival rate must be positive");
        Self {
            mean_gap_ns: 1e9 / rate_per_s,
        }
    }

    /// The gap to the next arrival, in ns.
    pub fn next_gap_ns(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
        (-u.ln() * self.mean_gap_ns) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    const SEED: u64 = 0x5eed_0003;

    #[test]
    fn zipfian_rank_zero_has_its_theoretical_share() {
        let zipf = Zipfian::new(10_000, 0.99);
        let mut rng = SmallRng::seed_from_u64(SEED);
        let draws = 200_000;
        let zeros = (0..draws).filter(|_| zipf.next_rank(&mut rng) == 0).count();
        // P(rank 0) = 1 / zeta(n): about 0.1 for n = 10k, theta = 0.99.
        let expected = draws as f64 / zipf.zeta_n;
        let ratio = zeros as f64 / expected;
        assert!(
            (0.9..1.1).contains(&ratio),
            "seed {SEED:#x}: {zeros} vs {expected:.0}"
        );
    }

    #[test]
    fn zipfian_is_skewed_and_in_range_and_deterministic() {
        let zipf = Zipfian::new(1_000, 0.99);
        let mut rng = SmallRng::seed_from_u64(SEED);
        let mut counts = vec![0u32; 1_000];
        for _ in 0..100_000 {
            let key = zipf.next_key(&mut rng);
            counts[key as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top_1_percent: u32 = sorted[..10].iter().sum();
        assert!(
            top_1_percent > 20_000,
            "seed {SEED:#x}: top 1 % got {top_1_percent}"
        );
        let again: Vec<u64> = {
            let mut rng = SmallRng::seed_from_u64(SEED);
            (0..10).map(|_| zipf.next_key(&mut rng)).collect()
        };
        let mut rng = SmallRng::seed_from_u64(SEED);
        assert_eq!(
            again,
            (0..10).map(|_| zipf.next_key(&mut rng)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn ycsb_mixes() {
        let mut rng = SmallRng::seed_from_u64(SEED);
        let b = Ycsb::b(1_000);
        let updates = (0..100_000)
            .filter(|_| matches!(b.next(&mut rng), Op::Update(_)))
            .count();
        assert!(
            (4_000..6_000).contains(&updates),
            "seed {SEED:#x}: {updates}"
        );
        let c = Ycsb::c(1_000);
        assert!((0..10_000).all(|_| matches!(c.next(&mut rng), Op::Read(_))));
    }

    #[test]
    fn tatp_mix_and_keys() {
        let tatp = Tatp::new(10_000);
        let mut rng = SmallRng::seed_from_u64(SEED);
        let mut ops = Vec::new();
        let mut read_only = 0;
        for _ in 0..100_000 {
            let txn = tatp.next(&mut rng, &mut ops);
            assert!(!ops.is_empty());
            if matches!(
                txn,
                TatpTxn::GetSubscriberData | TatpTxn::GetNewDestination | TatpTxn::GetAccessData
            ) {
                read_only += 1;
                assert!(ops.iter().all(|op| matches!(op, Op::Read(_))));
            }
            for op in &ops {
                let (Op::Read(k) | Op::Update(k) | Op::Insert(k) | Op::Delete(k)) = *op;
                assert!((1..=4).contains(&(k >> 56)));
                assert!(((k >> 8) & ((1 << 48) - 1)) < 10_000);
            }
        }
        assert!(
            (78_000..82_000).contains(&read_only),
            "seed {SEED:#x}: {read_only}"
        );
        let mut keys = Vec::new();
        tatp.population(7, &mut keys);
        assert!((3..=12).contains(&keys.len()));
        assert_eq!(keys[0], Tatp::key(tatp_table::SUBSCRIBER, 7, 0));
    }

    #[test]
    fn poisson_mean_gap() {
        let poisson = Poisson::new(100_000.0);
        let mut rng = SmallRng::seed_from_u64(SEED);
        let n = 100_000;
        let total: u64 = (0..n).map(|_| poisson.next_gap_ns(&mut rng)).sum();
        let mean = total as f64 / n as f64;
        assert!(
            (9_700.0..10_300.0).contains(&mean),
            "seed {SEED:#x}: mean gap {mean}"
        );
    }
}
