//! A sorted set on its collection: each member twice, `[0][hash][member] -> score` for its
//! score and `[1][score order][member] -> score` for ranks and ranges (see `super`), and the
//! score and lex ranges as keys of the score order.

use std::ops::Bound;

use tamer_store::{DbError, Direction, Tx};

use crate::commands::numbers::parse_double;
use crate::keyspace::collection::{hashed_key, Coll};
use crate::keyspace::{self, Kind};

type Result = std::result::Result<(), DbError>;
type DbResult<T> = std::result::Result<T, DbError>;

/// The prefix of the member order's keys (member → score).
pub(super) const MEMBERS: u8 = 0;
/// The prefix of the score order's keys ((score, member) → score).
const BY_SCORE: u8 = 1;

/// The score's bits made to sort as the numbers do (-0 as 0).
fn order(x: f64) -> u64 {
    let x = if x == 0.0 { 0.0 } else { x };
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The score a map value holds (its bits, little-endian).
pub(super) fn score_of(value: &[u8]) -> DbResult<f64> {
    let bits: [u8; 8] = value.try_into().map_err(|_| {
        crate::keyspace::store_error(keyspace::KeyspaceError::Corrupt("a score".into()))
    })?;
    Ok(f64::from_le_bytes(bits))
}

/// The (score, member) key of the score order.
fn score_key(score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + member.len());
    k.push(BY_SCORE);
    k.extend_from_slice(&order(score).to_be_bytes());
    k.extend_from_slice(member);
    k
}

/// A bound of the score order's keys: every key of a score below `x` (`past` false) or at
/// most `x` (`past` true) sorts below it.
fn score_bound(x: f64, past: bool) -> Vec<u8> {
    let mut k = vec![BY_SCORE];
    let o = order(x);
    k.extend_from_slice(&if past { o.saturating_add(1) } else { o }.to_be_bytes());
    k
}

/// A sorted set as a command sees it.
pub(super) struct ZSet {
    /// Its map: both orders.
    pub(super) coll: Coll,
}

impl ZSet {
    /// An empty sorted set, not stored yet.
    pub(super) fn new() -> Self {
        ZSet {
            coll: Coll::new(Kind::ZSet),
        }
    }

    /// The member order's key of `member`.
    fn member_key(tx: &Tx<'_>, member: &[u8]) -> Vec<u8> {
        hashed_key(tx, &[MEMBERS], member)
    }

    /// How many members it has (half its map's entries).
    pub(super) fn card(&self, tx: &mut Tx<'_>) -> DbResult<u64> {
        Ok(self.coll.len(tx)? / 2)
    }

    /// `member`'s score, if it is a member.
    pub(super) fn score(&self, tx: &mut Tx<'_>, member: &[u8]) -> DbResult<Option<f64>> {
        self.coll
            .get(tx, &Self::member_key(tx, member))?
            .map(|v| score_of(&v))
            .transpose()
    }

    /// Sets `member`'s score (its old place in the score order removed first). A -0 is stored
    /// as 0, as Redis's packed encoding keeps it (the command's reply still prints `-0`).
    pub(super) fn set(
        &mut self,
        tx: &mut Tx<'_>,
        member: &[u8],
        score: f64,
        old: Option<f64>,
    ) -> Result {
        if let Some(old) = old {
            self.coll.del(tx, &score_key(old, member))?;
        }
        let score = if score == 0.0 { 0.0 } else { score };
        let bits = score.to_le_bytes();
        self.coll.put(tx, &Self::member_key(tx, member), &bits)?;
        self.coll.put(tx, &score_key(score, member), &bits)?;
        Ok(())
    }

    /// Removes `member`; true when it was there.
    pub(super) fn remove(&mut self, tx: &mut Tx<'_>, member: &[u8]) -> DbResult<bool> {
        let Some(score) = self.score(tx, member)? else {
            return Ok(false);
        };
        self.remove_scored(tx, member, score)?;
        Ok(true)
    }

    /// Removes `member`, whose score is `score` (both its keys).
    pub(super) fn remove_scored(&mut self, tx: &mut Tx<'_>, member: &[u8], score: f64) -> Result {
        self.coll.del(tx, &Self::member_key(tx, member))?;
        self.coll.del(tx, &score_key(score, member))?;
        Ok(())
    }

    /// `member`'s rank (0: the lowest score), if it is a member.
    pub(super) fn rank(&self, tx: &mut Tx<'_>, member: &[u8]) -> DbResult<Option<u64>> {
        let Some(score) = self.score(tx, member)? else {
            return Ok(None);
        };
        Ok(Some(
            self.coll.rank(tx, &score_key(score, member))? - self.card(tx)?,
        ))
    }

    /// Members whose score-order keys are below `key`.
    fn below(&self, tx: &mut Tx<'_>, key: &[u8]) -> DbResult<u64> {
        Ok(self.coll.rank(tx, key)?.saturating_sub(self.card(tx)?))
    }

    /// The members of ranks `from..=to` (ascending), or, `rev`, of ranks counted from the
    /// highest score, highest first: (member, score).
    pub(super) fn by_rank(
        &self,
        tx: &mut Tx<'_>,
        from: u64,
        to: u64,
        rev: bool,
    ) -> DbResult<Vec<(Vec<u8>, f64)>> {
        let n = self.card(tx)?;
        if from > to || from >= n {
            return Ok(Vec::new());
        }
        let to = to.min(n - 1);
        let count = (to - from + 1) as usize;
        let (start, direction) = if rev {
            (n - 1 - from, Direction::Reverse)
        } else {
            (from, Direction::Forward)
        };
        let Some((first, _)) = self.coll.at(tx, n + start)? else {
            return Ok(Vec::new());
        };
        self.scan_from(tx, Bound::Included(&first), direction, count, &|_| true)
    }

    /// Up to `limit` members of the score order from `from` in `direction` while `within`.
    fn scan_from(
        &self,
        tx: &mut Tx<'_>,
        from: Bound<&[u8]>,
        direction: Direction,
        limit: usize,
        within: &dyn Fn(&[u8]) -> bool,
    ) -> DbResult<Vec<(Vec<u8>, f64)>> {
        let in_order = |k: &[u8]| k.first() == Some(&BY_SCORE) && within(k);
        let found = self.coll.scan(tx, from, direction, limit, &in_order)?;
        found
            .into_iter()
            .map(|(k, v)| Ok((k[9..].to_vec(), score_of(&v)?)))
            .collect()
    }
}

/// A score range's end: a value, exclusive or not.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScoreEnd {
    /// The score.
    pub(super) value: f64,
    /// `(`: the score itself excluded.
    pub(super) exclusive: bool,
}

/// Parses a `ZRANGEBYSCORE` end (`(` for exclusive, `-inf`/`+inf`).
pub(super) fn score_end(arg: &[u8]) -> Option<ScoreEnd> {
    let (exclusive, rest) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    // Redis's `strtod` reads nothing as 0: `""` and `"("` are ranges' ends.
    let value = if rest.is_empty() {
        0.0
    } else {
        parse_double(rest)?
    };
    Some(ScoreEnd { value, exclusive })
}

/// A lex range's end: `-`, `+`, or a member inclusive (`[`) or exclusive (`(`).
#[derive(Clone, Debug)]
pub(super) enum LexEnd {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    /// `[member` (inclusive) or `(member` (exclusive).
    Member { member: Vec<u8>, exclusive: bool },
}

/// Parses a `ZRANGEBYLEX` end.
pub(super) fn lex_end(arg: &[u8]) -> Option<LexEnd> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(LexEnd::Min),
        b'+' if arg.len() == 1 => Some(LexEnd::Max),
        b'[' => Some(LexEnd::Member {
            member: arg[1..].to_vec(),
            exclusive: false,
        }),
        b'(' => Some(LexEnd::Member {
            member: arg[1..].to_vec(),
            exclusive: true,
        }),
        _ => None,
    }
}

/// A range of a sorted set as the score order's keys: `lo` (included) to `hi` (excluded).
pub(super) struct KeyRange {
    lo: Vec<u8>,
    hi: Vec<u8>,
}

/// A score range as keys of the score order.
pub(super) fn score_range(min: ScoreEnd, max: ScoreEnd) -> KeyRange {
    KeyRange {
        lo: score_bound(min.value, min.exclusive),
        hi: score_bound(max.value, !max.exclusive),
    }
}

/// A lex range as keys of the score order, for members that share one score (`score`: the
/// first member's; Redis leaves a lex range over mixed scores unspecified).
pub(super) fn lex_range(min: &LexEnd, max: &LexEnd, score: f64) -> KeyRange {
    let key = |end: &LexEnd, upper: bool| -> Vec<u8> {
        match end {
            LexEnd::Min => score_bound(score, false),
            LexEnd::Max => score_bound(score, true),
            LexEnd::Member { member, exclusive } => {
                let mut k = score_key(score, member);
                // Past the member: the smallest key above it.
                if *exclusive != upper {
                    k.push(0);
                }
                k
            }
        }
    };
    KeyRange {
        lo: key(min, false),
        hi: key(max, true),
    }
}

impl ZSet {
    /// The members in `range`, ascending (or descending, `rev`), after skipping `offset`, at
    /// most `count` (`None`: all).
    pub(super) fn in_range(
        &self,
        tx: &mut Tx<'_>,
        range: &KeyRange,
        rev: bool,
        offset: u64,
        count: Option<u64>,
    ) -> DbResult<Vec<(Vec<u8>, f64)>> {
        if range.lo >= range.hi {
            return Ok(Vec::new());
        }
        let (lo, hi) = (self.below(tx, &range.lo)?, self.below(tx, &range.hi)?);
        if lo >= hi {
            return Ok(Vec::new());
        }
        let n = hi - lo;
        if offset >= n {
            return Ok(Vec::new());
        }
        let take = count.map_or(n - offset, |c| c.min(n - offset));
        let card = self.card(tx)?;
        let start = if rev { hi - 1 - offset } else { lo + offset };
        let Some((first, _)) = self.coll.at(tx, card + start)? else {
            return Ok(Vec::new());
        };
        let direction = if rev {
            Direction::Reverse
        } else {
            Direction::Forward
        };
        self.scan_from(
            tx,
            Bound::Included(&first),
            direction,
            take as usize,
            &|_| true,
        )
    }

    /// Members in `range`.
    pub(super) fn count_in(&self, tx: &mut Tx<'_>, range: &KeyRange) -> DbResult<u64> {
        if range.lo >= range.hi {
            return Ok(0);
        }
        let (lo, hi) = (self.below(tx, &range.lo)?, self.below(tx, &range.hi)?);
        Ok(hi.saturating_sub(lo))
    }

    /// The lowest score (the score a lex range assumes every member has).
    pub(super) fn first_score(&self, tx: &mut Tx<'_>) -> DbResult<f64> {
        Ok(self
            .by_rank(tx, 0, 0, false)?
            .first()
            .map_or(0.0, |(_, s)| *s))
    }
}
