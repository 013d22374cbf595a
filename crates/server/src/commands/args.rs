//! Argument parsing the command families share.

use super::reply::{INVALID_CURSOR, NOT_INTEGER, OUT_OF_LONG_RANGE, SYNTAX};
use crate::keyspace::collection::MAX_ELEMENT_KEY;
use crate::resp::{parse_i64, write};

/// A `numkeys` below 1 (Redis's text for any bad value of it).
const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";

/// The count of `HRANDFIELD`, `SRANDMEMBER`, `ZRANDMEMBER` (Redis's
/// `getRangeLongFromObjectOrReply`), its error written when it has none; `pairs` (with
/// values or scores) bounds it to ±`i64::MAX / 2` as Redis does.
pub(super) fn random_count(arg: &[u8], pairs: bool, out: &mut Vec<u8>) -> Option<i64> {
    let count = match parse_i64(arg) {
        None => {
            write::error(out, NOT_INTEGER);
            return None;
        }
        Some(i64::MIN) => {
            write::error(out, OUT_OF_LONG_RANGE);
            return None;
        }
        Some(c) => c,
    };
    if pairs && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        write::error(out, "ERR value is out of range");
        return None;
    }
    Some(count)
}

/// Writes the error for a field or member too long for a tree key; true when `element` is.
pub(super) fn too_long(element: &[u8], out: &mut Vec<u8>) -> bool {
    if element.len() <= MAX_ELEMENT_KEY {
        return false;
    }
    write::error(
        out,
        &format!("ERR tamer: fields and members are at most {MAX_ELEMENT_KEY} bytes"),
    );
    true
}

/// The cursor and options of `HSCAN`/`SSCAN`/`ZSCAN`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScanArgs<'a> {
    /// Where the scan resumes (0: the start).
    pub(super) cursor: u64,
    /// About how many elements a step returns (`COUNT`).
    pub(super) count: usize,
    /// The elements kept (`MATCH`; `None` for `*`).
    pub(super) pattern: Option<&'a [u8]>,
}

/// The cursor of `HSCAN`/`SSCAN`/`ZSCAN key cursor ...`, or `None` with the error written.
pub(super) fn scan_cursor(args: &[&[u8]], out: &mut Vec<u8>) -> Option<u64> {
    let cursor = parse_cursor(args[2]);
    if cursor.is_none() {
        write::error(out, INVALID_CURSOR);
    }
    cursor
}

/// The options after `HSCAN`/`SSCAN`/`ZSCAN key cursor`, or the error's text (Redis reads
/// them once the key is found and of the right type).
pub(super) fn scan_options<'a>(
    args: &[&'a [u8]],
    cursor: u64,
) -> Result<ScanArgs<'a>, &'static str> {
    let (mut count, mut pattern) = (10usize, None);
    let mut i = 3;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"count" if more >= 1 => match parse_i64(args[i + 1]) {
                None => return Err(NOT_INTEGER),
                Some(n) if n < 1 => return Err(SYNTAX),
                Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
            },
            b"match" if more >= 1 => pattern = (args[i + 1] != b"*").then_some(args[i + 1]),
            _ => return Err(SYNTAX),
        }
        i += 2;
    }
    Ok(ScanArgs {
        cursor,
        count,
        pattern,
    })
}

/// A cursor as Redis's `parseScanCursorOrReply` reads it (`strtoul`, base 10): an optional
/// sign (`-n` wraps), digits, nothing else; the empty string is 0.
pub(super) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() {
        return Some(0);
    }
    let (negative, digits) = match arg[0] {
        b'-' => (true, &arg[1..]),
        b'+' => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if negative { n.wrapping_neg() } else { n })
}

/// `numkeys key [key ...] [LIMIT limit]` of `SINTERCARD`/`ZINTERCARD`: the keys and the
/// limit (`usize::MAX`: none); `None` with the error written.
pub(super) fn intercard_args<'b, 'a>(
    args: &'b [&'a [u8]],
    out: &mut Vec<u8>,
) -> Option<(&'b [&'a [u8]], usize)> {
    let (keys, i) = numkeys(args, out)?;
    Some((keys, intercard_limit(args, i, out)?))
}

/// Parses `numkeys key [key ...]` from `args[1..]` as Redis's `*INTERCARD` do: the keys, and
/// the index of the first argument after them; `None` with the error written.
fn numkeys<'b, 'a>(args: &'b [&'a [u8]], out: &mut Vec<u8>) -> Option<(&'b [&'a [u8]], usize)> {
    // Redis's `getRangeLongFromObjectOrReply` with its own text for any bad value.
    let n = match parse_i64(args[1]) {
        Some(n) if n > 0 => n as u64,
        _ => {
            write::error(out, NUMKEYS_NOT_POSITIVE);
            return None;
        }
    };
    if n > (args.len() - 2) as u64 {
        write::error(
            out,
            "ERR Number of keys can't be greater than number of args",
        );
        return None;
    }
    let n = n as usize;
    Some((&args[2..2 + n], 2 + n))
}

/// The `[LIMIT limit]` of `SINTERCARD`/`ZINTERCARD` from `args[i..]` (0 or none: no limit,
/// `usize::MAX`); `None` with the error written.
pub(super) fn intercard_limit(args: &[&[u8]], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    let mut limit = usize::MAX;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"limit") && i + 1 < args.len() {
            match parse_i64(args[i + 1]) {
                Some(0) => limit = usize::MAX,
                Some(n) if n > 0 => limit = n as usize,
                _ => {
                    write::error(out, "ERR LIMIT can't be negative");
                    return None;
                }
            }
            i += 2;
        } else {
            write::error(out, SYNTAX);
            return None;
        }
    }
    Some(limit)
}

/// `numkeys key [key ...] SIDE [COUNT count]` of the `*MPOP` commands from `args[first]`:
/// the keys, the side `side` reads (`LEFT`/`RIGHT`, `MIN`/`MAX`) and the count (1 when
/// none); `None` with the error written.
pub(super) fn mpop_args<'b, 'a, T>(
    args: &'b [&'a [u8]],
    first: usize,
    side: impl Fn(&[u8]) -> Option<T>,
    out: &mut Vec<u8>,
) -> Option<(&'b [&'a [u8]], T, u64)> {
    let (keys, i) = mpop_keys(args, first, out)?;
    let Some(side) = args.get(i).and_then(|a| side(a)) else {
        write::error(out, SYNTAX);
        return None;
    };
    Some((keys, side, mpop_count(args, i + 1, out)?))
}

/// Parses `numkeys key [key ...]` at `args[first..]` as Redis's `*MPOP` do (a missing
/// `LEFT`/`RIGHT`/`MIN`/`MAX` after the keys is a syntax error): the keys and the index after.
fn mpop_keys<'b, 'a>(
    args: &'b [&'a [u8]],
    first: usize,
    out: &mut Vec<u8>,
) -> Option<(&'b [&'a [u8]], usize)> {
    let n = match parse_i64(args[first]) {
        Some(n) if n > 0 => n as u64,
        _ => {
            write::error(out, NUMKEYS_NOT_POSITIVE);
            return None;
        }
    };
    if n >= (args.len() - first - 1) as u64 {
        write::error(out, SYNTAX);
        return None;
    }
    let n = n as usize;
    Some((&args[first + 1..first + 1 + n], first + 1 + n))
}

/// The `[COUNT count]` of the `*MPOP` commands from `args[j..]` (1 when none); `None` with
/// the error written.
fn mpop_count(args: &[&[u8]], mut j: usize, out: &mut Vec<u8>) -> Option<u64> {
    let mut count = None;
    // Bounded: every pass consumes two arguments or fails.
    while j < args.len() {
        if args[j].eq_ignore_ascii_case(b"count") && j + 1 < args.len() && count.is_none() {
            match parse_i64(args[j + 1]) {
                Some(c) if c > 0 => count = Some(c as u64),
                _ => {
                    write::error(out, "ERR count should be greater than 0");
                    return None;
                }
            }
            j += 2;
        } else {
            write::error(out, SYNTAX);
            return None;
        }
    }
    Some(count.unwrap_or(1))
}

/// The `[count]` of `LPOP`/`RPOP`/`SPOP`/`ZPOPMIN`/`ZPOPMAX key [count]` (`None` when there
/// is none, a single pop); `None` with the error written.
pub(super) fn pop_count(args: &[&[u8]], out: &mut Vec<u8>) -> Option<Option<u64>> {
    if args.len() > 3 {
        write::error(out, SYNTAX);
        return None;
    }
    match args.get(2).map(|a| parse_i64(a)) {
        None => Some(None),
        Some(Some(c)) if c >= 0 => Some(Some(c as u64)),
        Some(_) => {
            write::error(out, "ERR value is out of range, must be positive");
            None
        }
    }
}
