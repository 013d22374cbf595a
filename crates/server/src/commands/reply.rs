//! Reply texts and shapes the command families share.

use tamer_store::DbError;

use crate::keyspace::KeyspaceError;
use crate::resp::write;

/// A command on a key of another type.
pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
/// An argument (or a value) that is no `long long` (Redis's `getLongLongFromObjectOrReply`).
pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// An argument (or a value) that is no float.
pub(crate) const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Arguments that make no command.
pub(crate) const SYNTAX: &str = "ERR syntax error";
/// An integer increment past `i64`.
pub(crate) const OVERFLOW: &str = "ERR increment or decrement would overflow";
/// A float increment to NaN or an infinity.
pub(crate) const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";
/// A `SCAN`-family cursor that is no number.
pub(crate) const INVALID_CURSOR: &str = "ERR invalid cursor";
/// A command on an absent key that needs one (`LSET`, `RENAME`).
pub(crate) const NO_SUCH_KEY: &str = "ERR no such key";
/// Redis's `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` error (a count of i64::MIN).
pub(crate) const OUT_OF_LONG_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

/// The reply of a scan of an absent key: cursor 0, nothing.
pub fn empty_scan(out: &mut Vec<u8>) {
    write::array(out, 2);
    write::bulk(out, b"0");
    write::array(out, 0);
}

/// Writes picked entries as `*RANDFIELD`/`*RANDMEMBER` replies them: names only, or names with
/// values (RESP2: one flat array; RESP3: an array of pairs).
pub fn write_pairs(
    out: &mut Vec<u8>,
    pairs: &[(Vec<u8>, Vec<u8>)],
    with_values: bool,
    protocol: crate::resp::Protocol,
    name: impl Fn(&[u8]) -> Vec<u8>,
) {
    let resp3 = protocol == crate::resp::Protocol::Resp3;
    match (with_values, resp3) {
        (false, _) => write::array(out, pairs.len()),
        (true, false) => write::array(out, 2 * pairs.len()),
        (true, true) => write::array(out, pairs.len()),
    }
    for (k, v) in pairs {
        if with_values && resp3 {
            write::array(out, 2);
        }
        write::bulk(out, &name(k));
        if with_values {
            write::bulk(out, v);
        }
    }
}

/// A keyspace error as the command's reply, or the store error to hand back.
pub(crate) fn keyspace_error(out: &mut Vec<u8>, err: KeyspaceError) -> Result<(), DbError> {
    match err {
        KeyspaceError::Store(err) => Err(err),
        other => {
            write::error(out, &format!("ERR {other}"));
            Ok(())
        }
    }
}
