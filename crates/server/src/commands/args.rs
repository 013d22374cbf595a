//! Argument parsing the command families share.

use super::reply::{INVALID_CURSOR, NOT_INTEGER, OUT_OF_LONG_RANGE, SYNTAX};
use crate::keyspace::collection::MAX_ELEMENT_KEY;
use crate::resp::{parse_i64, write};

/// A `numkeys` below 1 (Redis's text for any bad value of it).
const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";

/// The count of `HRANDFIELD`, `SRANDMEMBER`, `ZRANDMEMBER` (Redis's
/// `getRangeLongFromObjectOrReply`), its error written when it has none; `pairs` (with
/// values or scores) bounds it to ±`i64::MAX / 2` as Redis does.
pub fn random_count(arg: &[u8], pairs: bool, out: &mut Vec<u8>) -> Option<i64> {
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
pub fn too_long(element: &[u8], out: &mut Vec<u8>) -> bool {
    if element.len() <= MAX_ELEMENT_KEY {
        return false;
    }
    write::error(
        out,
        &format!("ERR tamer: fields and members are at most {MAX_ELEMENT_KEY} bytes"),
    );
    true
}

/// `HSCAN`/`SSCAN`/`ZSCAN key cursor [MATCH pattern] [COUNT count]`: (cursor, count, pattern;
/// `None` for `*`), or `None` with the error written.
pub fn scan_args<'a>(
    args: &[&'a [u8]],
    out: &mut Vec<u8>,
) -> Option<(u64, usize, Option<&'a [u8]>)> {
    let Some(cursor) = parse_cursor(args[2]) else {
        write::error(out, INVALID_CURSOR);
        return None;
    };
    let (mut count, mut pattern) = (10usize, None);
    let mut i = 3;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"count" if more >= 1 => match parse_i64(args[i + 1]) {
                None => {
                    write::error(out, NOT_INTEGER);
                    return None;
                }
                Some(n) if n < 1 => {
                    write::error(out, SYNTAX);
                    return None;
                }
                Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
            },
            b"match" if more >= 1 => pattern = (args[i + 1] != b"*").then_some(args[i + 1]),
            _ => {
                write::error(out, SYNTAX);
                return None;
            }
        }
        i += 2;
    }
    Some((cursor, count, pattern))
}

/// A cursor as Redis's `parseScanCursorOrReply` reads it (`strtoul`, base 10): an optional
/// sign (`-n` wraps), digits, nothing else; the empty string is 0.
pub(crate) fn parse_cursor(arg: &[u8]) -> Option<u64> {
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

/// Parses `numkeys key [key ...]` from `args[1..]` as Redis's `*INTERCARD` do: the
/// keys, and the index of the first argument after them; `None` with the error written.
pub(crate) fn numkeys<'a>(args: &[&'a [u8]], out: &mut Vec<u8>) -> Option<(Vec<&'a [u8]>, usize)> {
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
    Some((args[2..2 + n].to_vec(), 2 + n))
}

/// Parses `numkeys key [key ...]` at `args[first..]` as Redis's `*MPOP` do (a missing
/// `LEFT`/`RIGHT`/`MIN`/`MAX` after the keys is a syntax error): the keys and the index after.
pub(crate) fn mpop_keys<'a>(
    args: &[&'a [u8]],
    first: usize,
    out: &mut Vec<u8>,
) -> Option<(Vec<&'a [u8]>, usize)> {
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
    Some((args[first + 1..first + 1 + n].to_vec(), first + 1 + n))
}
