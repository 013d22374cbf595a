//! Reply texts and shapes the command families share, and how a handler replies with the
//! outcome of its data operation (`OpResult`, `finish`).

use tamer_store::DbError;

use crate::keyspace::KeyspaceError;
use crate::resp::{write, Protocol};

/// Redis's error for a command refused while the device is full (`OOM`, as over
/// `maxmemory`: clients treat the prefix alike).
pub const OUT_OF_SPACE: &str = "OOM command not allowed when the store's device is full";

/// A command on a key of another type.
pub(super) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
/// An argument (or a value) that is no `long long` (Redis's `getLongLongFromObjectOrReply`).
pub(super) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// An argument (or a value) that is no float.
pub(super) const NOT_FLOAT: &str = "ERR value is not a valid float";
/// Arguments that make no command.
pub(super) const SYNTAX: &str = "ERR syntax error";
/// An integer increment past `i64`.
pub(super) const OVERFLOW: &str = "ERR increment or decrement would overflow";
/// A float increment to NaN or an infinity.
pub(super) const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";
/// A `SCAN`-family cursor that is no number.
pub(super) const INVALID_CURSOR: &str = "ERR invalid cursor";
/// A command on an absent key that needs one (`LSET`, `RENAME`).
pub(super) const NO_SUCH_KEY: &str = "ERR no such key";
/// Redis's `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` error (a count of i64::MIN).
pub(super) const OUT_OF_LONG_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

/// Why a data operation has no result: the store failed, or the command replies an error.
#[derive(Debug)]
pub(super) enum OpError {
    /// A store error, handed back to the caller (a conflict retries the whole transaction).
    Store(DbError),
    /// The key holds another type: the reply is [`WRONGTYPE`].
    WrongType,
    /// A Redis-level error of this text.
    Error(&'static str),
    /// A Redis-level error whose text names the request (a command, a size).
    Text(String),
}

impl From<DbError> for OpError {
    fn from(err: DbError) -> Self {
        OpError::Store(err)
    }
}

impl OpError {
    /// A keyspace error as the command's reply (`ERR` and its text), or the store error.
    pub(super) fn keyspace(err: KeyspaceError) -> Self {
        match err {
            KeyspaceError::Store(err) => OpError::Store(err),
            other => OpError::Text(format!("ERR {other}")),
        }
    }
}

/// A data operation's result: a typed value, or why there is none.
pub(super) type OpResult<T> = Result<T, OpError>;

/// Writes a data operation's outcome as the reply: its value by `write`, or its Redis-level
/// error; a store error is handed back.
pub(super) fn finish<T>(
    out: &mut Vec<u8>,
    result: OpResult<T>,
    write: impl FnOnce(&mut Vec<u8>, T),
) -> Result<(), DbError> {
    match result {
        Ok(value) => {
            write(out, value);
            Ok(())
        }
        Err(err) => fail(out, err),
    }
}

/// Writes `err` as the reply, or hands a store error back.
pub(super) fn fail(out: &mut Vec<u8>, err: OpError) -> Result<(), DbError> {
    match err {
        OpError::Store(err) => return Err(err),
        OpError::WrongType => write::error(out, WRONGTYPE),
        OpError::Error(text) => write::error(out, text),
        OpError::Text(text) => write::error(out, &text),
    }
    Ok(())
}

/// Writes the error `text` as the reply of a refused request (the handler's `Ok`).
pub(super) fn refuse(out: &mut Vec<u8>, text: &str) -> Result<(), DbError> {
    write::error(out, text);
    Ok(())
}

/// A bulk string, or a null when there is none.
pub(super) fn bulk_or_null(out: &mut Vec<u8>, value: Option<&[u8]>, protocol: Protocol) {
    match value {
        Some(v) => write::bulk(out, v),
        None => write::null(out, protocol),
    }
}

/// The header of a `SCAN`-family reply: the next cursor, then an array of `n` values.
pub(super) fn scan_header(out: &mut Vec<u8>, cursor: u64, n: usize) {
    write::array(out, 2);
    write::bulk(out, cursor.to_string().as_bytes());
    write::array(out, n);
}

/// Writes picked entries as `*RANDFIELD`/`*RANDMEMBER` replies them: names only, or names with
/// values (RESP2: one flat array; RESP3: an array of pairs).
pub(super) fn write_pairs(
    out: &mut Vec<u8>,
    pairs: &[(Vec<u8>, Vec<u8>)],
    with_values: bool,
    protocol: Protocol,
    name: fn(&[u8]) -> &[u8],
) {
    let resp3 = protocol == Protocol::Resp3;
    match (with_values, resp3) {
        (false, _) => write::array(out, pairs.len()),
        (true, false) => write::array(out, 2 * pairs.len()),
        (true, true) => write::array(out, pairs.len()),
    }
    for (k, v) in pairs {
        if with_values && resp3 {
            write::array(out, 2);
        }
        write::bulk(out, name(k));
        if with_values {
            write::bulk(out, v);
        }
    }
}

/// A keyspace error as the command's reply, or the store error to hand back.
pub(super) fn keyspace_error(out: &mut Vec<u8>, err: KeyspaceError) -> Result<(), DbError> {
    fail(out, OpError::keyspace(err))
}
