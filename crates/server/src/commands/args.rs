//! Argument parsing the command families share.

use super::reply::OUT_OF_LONG_RANGE;
use crate::keyspace::collection::MAX_ELEMENT_KEY;
use crate::resp::write;

/// The count of `HRANDFIELD`, `SRANDMEMBER`, `ZRANDMEMBER` (Redis's
/// `getRangeLongFromObjectOrReply`), its error written when it has none; `pairs` (with
/// values or scores) bounds it to ±`i64::MAX / 2` as Redis does.
pub fn random_count(arg: &[u8], pairs: bool, out: &mut Vec<u8>) -> Option<i64> {
    let count = match crate::resp::parse_i64(arg) {
        None => {
            write::error(out, "ERR value is not an integer or out of range");
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
    let Some(cursor) = crate::commands::scan::parse_cursor(args[2]) else {
        write::error(out, "ERR invalid cursor");
        return None;
    };
    let (mut count, mut pattern) = (10usize, None);
    let mut i = 3;
    // Bounded: every pass consumes two arguments or fails.
    while i < args.len() {
        let more = args.len() - i - 1;
        match &args[i].to_ascii_lowercase()[..] {
            b"count" if more >= 1 => match crate::resp::parse_i64(args[i + 1]) {
                None => {
                    write::error(out, "ERR value is not an integer or out of range");
                    return None;
                }
                Some(n) if n < 1 => {
                    write::error(out, "ERR syntax error");
                    return None;
                }
                Some(n) => count = usize::try_from(n).unwrap_or(usize::MAX),
            },
            b"match" if more >= 1 => pattern = (args[i + 1] != b"*").then_some(args[i + 1]),
            _ => {
                write::error(out, "ERR syntax error");
                return None;
            }
        }
        i += 2;
    }
    Some((cursor, count, pattern))
}
