//! What `tamer load` is asked to do: the protocol, the key distribution, the operation mix,
//! parsed from the command line's text (`resp`, `zipf:0.99`, `get=90,set=10,multi=0`).

use std::str::FromStr;

use rand::Rng;
use serde::Serialize;

use crate::workload::Zipfian;

/// The wire protocol a server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Redis's RESP2 (requests as arrays of bulk strings).
    Resp,
    /// memcached's text protocol (`get`, `set`).
    Memcache,
}

impl FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "resp" | "redis" => Ok(Self::Resp),
            "memcache" | "memcached" => Ok(Self::Memcache),
            other => Err(format!("protocol {other}: resp or memcache")),
        }
    }
}

/// How keys are chosen among `0..keys`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// YCSB's scrambled Zipfian with skew θ in (0, 1).
    Zipf(f64),
}

impl FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "uniform" {
            return Ok(Self::Uniform);
        }
        let theta = s
            .strip_prefix("zipf:")
            .and_then(|t| t.parse::<f64>().ok())
            .ok_or_else(|| format!("distribution {s}: uniform or zipf:THETA"))?;
        if theta > 0.0 && theta < 1.0 {
            Ok(Self::Zipf(theta))
        } else {
            Err(format!("distribution {s}: θ must be in (0, 1)"))
        }
    }
}

/// One operation a generator issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// `GET k`.
    Get,
    /// `SET k v`.
    Set,
    /// `MULTI`, `SET k1`, `SET k2`, `EXEC`: one transaction (RESP only).
    Multi,
}

/// Weights of GET, SET and the MULTI transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Mix {
    /// GET's weight.
    pub get: u32,
    /// SET's weight.
    pub set: u32,
    /// The MULTI transaction's weight.
    pub multi: u32,
}

impl Mix {
    fn total(&self) -> u32 {
        self.get + self.set + self.multi
    }

    /// An operation drawn with the mix's weights.
    pub fn pick(&self, rng: &mut impl Rng) -> OpKind {
        let r = rng.gen_range(0..self.total());
        if r < self.get {
            OpKind::Get
        } else if r < self.get + self.set {
            OpKind::Set
        } else {
            OpKind::Multi
        }
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut mix = Mix {
            get: 0,
            set: 0,
            multi: 0,
        };
        for part in s.split(',') {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("mix {s}: NAME=WEIGHT,... (get, set, multi)"))?;
            let weight: u32 = weight
                .parse()
                .ok()
                .filter(|w| *w <= 1_000_000)
                .ok_or_else(|| format!("mix {s}: weight {weight} is not 0..=1000000"))?;
            match name {
                "get" => mix.get = weight,
                "set" => mix.set = weight,
                "multi" => mix.multi = weight,
                other => return Err(format!("mix {s}: unknown operation {other}")),
            }
        }
        if mix.total() == 0 {
            return Err(format!("mix {s}: every weight is 0"));
        }
        Ok(mix)
    }
}

/// Draws keys in `0..keys` with a distribution (the Zipfian's constants computed once).
#[derive(Clone, Debug)]
pub enum KeyChooser {
    /// Uniform over `0..n`.
    Uniform(u64),
    /// Scrambled Zipfian.
    Zipf(Zipfian),
}

impl KeyChooser {
    /// A chooser over `0..keys` (uniform when there are fewer than two keys).
    pub fn new(distribution: Distribution, keys: u64) -> Self {
        match distribution {
            Distribution::Zipf(theta) if keys >= 2 => Self::Zipf(Zipfian::new(keys, theta)),
            _ => Self::Uniform(keys.max(1)),
        }
    }

    /// The next key.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        match self {
            Self::Uniform(keys) => rng.gen_range(0..*keys),
            Self::Zipf(z) => z.next_key(rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// Catches: a weight read into the wrong operation, a zero total accepted, junk accepted.
    #[test]
    fn mix_parses_and_refuses() {
        let m: Mix = "get=90,set=10,multi=0".parse().unwrap();
        assert_eq!((m.get, m.set, m.multi), (90, 10, 0));
        let m: Mix = "multi=1".parse().unwrap();
        assert_eq!((m.get, m.set, m.multi), (0, 0, 1));
        assert!("get=0".parse::<Mix>().is_err());
        assert!("get=x".parse::<Mix>().is_err());
        assert!("del=1".parse::<Mix>().is_err());
    }

    /// Catches: pick ignoring a weight (90/10 must come out near 90/10 over 100k draws).
    #[test]
    fn mix_picks_by_weight() {
        let m: Mix = "get=90,set=10".parse().unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let gets = (0..100_000)
            .filter(|_| m.pick(&mut rng) == OpKind::Get)
            .count();
        assert!((89_000..91_000).contains(&gets), "{gets}");
    }

    /// Catches: θ outside (0, 1) accepted, `uniform` or `zipf:` misread.
    #[test]
    fn distribution_and_protocol_parse() {
        assert_eq!("uniform".parse(), Ok(Distribution::Uniform));
        assert_eq!("zipf:0.99".parse(), Ok(Distribution::Zipf(0.99)));
        assert!("zipf:1.5".parse::<Distribution>().is_err());
        assert!("zipf".parse::<Distribution>().is_err());
        assert_eq!("memcache".parse(), Ok(Protocol::Memcache));
        assert!("http".parse::<Protocol>().is_err());
    }

    /// Catches: a chooser drawing outside `0..keys`.
    #[test]
    fn keys_stay_in_range() {
        let mut rng = SmallRng::seed_from_u64(9);
        for d in [Distribution::Uniform, Distribution::Zipf(0.99)] {
            let c = KeyChooser::new(d, 100);
            assert!((0..10_000).all(|_| c.next(&mut rng) < 100));
        }
    }
}
