//! The Redis serialization protocol (RESP): requests in, replies out.
//!
//! Requests are arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, "multibulk", what
//! every client library sends) or inline commands (`GET k\r\n`, what a telnet user types,
//! split as Redis splits them: quotes, `\xHH` escapes). [`RequestParser`] reads them from a
//! connection's received bytes without copying a multibulk argument: a request is its
//! arguments' byte ranges in those bytes. It keeps its place between calls, so a request that
//! arrives over many reads is scanned once, and it holds one entry per argument parsed so far
//! (at most [`Limits::max_args`]).
//!
//! Limits and error texts are Redis 7.0's (`networking.c`): a multibulk count up to
//! [`Limits::max_args`] ("invalid multibulk length"), a bulk up to [`Limits::max_bulk_bytes`]
//! (`proto-max-bulk-len`, "invalid bulk length"), a count or length line or an inline request
//! up to [`Limits::max_inline_bytes`] ("too big mbulk count string", "too big bulk count
//! string", "too big inline request"), a `$` where a bulk must start ("expected '$', got
//! 'X'"). Stricter than Redis: the CRLF after a bulk and the `\n` after a line's `\r` are
//! checked, not skipped. After any error the connection's framing is lost: the caller replies
//! with the error and closes it, as Redis does.
//!
//! Replies: [`write`] encodes every RESP2 and RESP3 type; where RESP2 has no such type
//! (null, map, set, double, boolean, verbatim string, push), it writes what Redis writes to a
//! RESP2 client.

use std::ops::Range;

/// Redis's `PROTO_INLINE_MAX_SIZE`: the longest inline request, and the longest count or
/// length line of a multibulk request.
pub const PROTO_INLINE_MAX_BYTES: usize = 64 << 10;
/// Redis's default `proto-max-bulk-len`: the longest bulk string in a request.
pub const PROTO_MAX_BULK_BYTES: usize = 512 << 20;
/// The most arguments of one request (Redis allows up to `INT_MAX` once authenticated; each
/// argument costs the parser 16-32 bytes, so a bound keeps one client's request small).
pub const MAX_ARGS: usize = 1 << 20;
/// Arguments reserved up front for a multibulk request, whatever its count says (the rest
/// grow as they arrive: a count alone allocates nothing large).
const ARGS_RESERVED_MAX: usize = 1024;

/// What one request may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string (`proto-max-bulk-len`).
    pub max_bulk_bytes: usize,
    /// Most arguments of a multibulk request.
    pub max_args: usize,
    /// Longest inline request, and longest count or length line.
    pub max_inline_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bulk_bytes: PROTO_MAX_BULK_BYTES,
            max_args: MAX_ARGS,
            max_inline_bytes: PROTO_INLINE_MAX_BYTES,
        }
    }
}

/// A request the stream cannot be parsed past; the text is Redis's (without `-ERR `).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn protocol_error(what: impl std::fmt::Display) -> ProtocolError {
    ProtocolError(format!("Protocol error: {what}"))
}

/// One argument of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// These bytes of the buffer the request was parsed from.
    At(Range<usize>),
    /// An inline argument with quotes or escapes resolved.
    Owned(Vec<u8>),
}

impl Arg {
    /// The argument's bytes, given the buffer it was parsed from.
    pub fn bytes<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Arg::At(range) => &buf[range.clone()],
            Arg::Owned(bytes) => bytes,
        }
    }
}

/// What [`RequestParser::parse`] found at the start of the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A request of one or more arguments, the first `consumed` bytes.
    Request {
        /// Its arguments, the name first.
        args: Vec<Arg>,
        /// The bytes it took.
        consumed: usize,
    },
    /// The first `consumed` bytes hold no request (an empty inline line, `*0`, `*-1`): drop
    /// them, as Redis does.
    Nothing {
        /// The bytes to drop.
        consumed: usize,
    },
    /// More bytes are needed: call again once there are at least `min_len` in all.
    Incomplete {
        /// The bytes the request needs at least.
        min_len: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// At the start of a request.
    Start,
    /// `remaining` bulk strings still to come, the next one's `$` line at `pos`.
    Header { remaining: usize },
    /// `remaining` bulk strings still to come (this one included), this one's `len` bytes at
    /// `pos`.
    Body { remaining: usize, len: usize },
}

/// Parses the requests at the start of a connection's received bytes, one at a time.
///
/// The caller passes the bytes received and not yet consumed, starting where the previous
/// request ended; between an `Incomplete` and the next call it may only append to them. Once
/// a request (or `Nothing`) is returned, it drops the `consumed` bytes before the next call.
///
/// ```
/// use tamer_server::resp::{Parsed, RequestParser};
/// let mut parser = RequestParser::default();
/// let bytes = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
/// assert_eq!(parser.parse(&bytes[..10]).unwrap(), Parsed::Incomplete { min_len: 13 });
/// let Parsed::Request { args, consumed } = parser.parse(bytes).unwrap() else { panic!() };
/// assert_eq!(consumed, bytes.len());
/// assert_eq!(args[1].bytes(bytes), b"key");
/// ```
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    state: State,
    /// Where parsing resumes.
    pos: usize,
    args: Vec<Arg>,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl RequestParser {
    /// A parser that refuses what `limits` bound.
    pub fn new(limits: Limits) -> Self {
        assert!(limits.max_args >= 1 && limits.max_inline_bytes >= 16);
        Self {
            limits,
            state: State::Start,
            pos: 0,
            args: Vec::new(),
        }
    }

    /// Parses on from where the previous call stopped (see the type's docs).
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        assert!(self.pos <= buf.len(), "the buffer shrank between calls");
        let parsed = self.step(buf);
        if !matches!(parsed, Ok(Parsed::Incomplete { .. })) {
            self.reset();
        }
        parsed
    }

    fn reset(&mut self) {
        self.state = State::Start;
        self.pos = 0;
        self.args = Vec::new();
    }

    fn step(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        // Bounded: each pass parses one argument or returns, at most `max_args` + 1 passes.
        loop {
            match self.state {
                State::Start => match buf.first() {
                    None => return Ok(Parsed::Incomplete { min_len: 1 }),
                    Some(b'*') => {
                        let Some((count, next)) = self.line_number(buf, 0, "mbulk count")? else {
                            return Ok(self.incomplete_line(buf));
                        };
                        if count <= 0 {
                            return Ok(Parsed::Nothing { consumed: next });
                        }
                        if count > self.limits.max_args as i64 || count > i64::from(i32::MAX) {
                            return Err(protocol_error("invalid multibulk length"));
                        }
                        let remaining = count as usize;
                        self.args = Vec::with_capacity(remaining.min(ARGS_RESERVED_MAX));
                        self.state = State::Header { remaining };
                        self.pos = next;
                    }
                    Some(_) => return self.inline(buf),
                },
                State::Header { remaining } => {
                    debug_assert!(remaining > 0);
                    let Some(&first) = buf.get(self.pos) else {
                        return Ok(Parsed::Incomplete {
                            min_len: self.pos + 1,
                        });
                    };
                    if first != b'$' {
                        return Err(protocol_error(format_args!(
                            "expected '$', got '{}'",
                            char::from(first)
                        )));
                    }
                    let Some((len, next)) = self.line_number(buf, self.pos, "bulk count")? else {
                        return Ok(self.incomplete_line(buf));
                    };
                    if len < 0 || len as u64 > self.limits.max_bulk_bytes as u64 {
                        return Err(protocol_error("invalid bulk length"));
                    }
                    self.state = State::Body {
                        remaining,
                        len: len as usize,
                    };
                    self.pos = next;
                }
                State::Body { remaining, len } => {
                    let end = self.pos + len;
                    if buf.len() < end + 2 {
                        return Ok(Parsed::Incomplete { min_len: end + 2 });
                    }
                    if &buf[end..end + 2] != b"\r\n" {
                        return Err(protocol_error("expected CRLF after a bulk string"));
                    }
                    self.args.push(Arg::At(self.pos..end));
                    debug_assert!(self.args.len() <= self.limits.max_args);
                    self.pos = end + 2;
                    if remaining == 1 {
                        return Ok(Parsed::Request {
                            args: std::mem::take(&mut self.args),
                            consumed: self.pos,
                        });
                    }
                    self.state = State::Header {
                        remaining: remaining - 1,
                    };
                }
            }
        }
    }

    /// The number on the line at `at` (after its type byte), and where the next line starts;
    /// `None` while the line is not whole.
    fn line_number(
        &self,
        buf: &[u8],
        at: usize,
        what: &str,
    ) -> Result<Option<(i64, usize)>, ProtocolError> {
        let limit = (at + self.limits.max_inline_bytes).min(buf.len());
        let Some(cr) = buf[at..limit].iter().position(|&b| b == b'\r') else {
            if buf.len() - at > self.limits.max_inline_bytes {
                return Err(protocol_error(format_args!("too big {what} string")));
            }
            return Ok(None);
        };
        let cr = at + cr;
        match buf.get(cr + 1) {
            None => return Ok(None),
            Some(b'\n') => {}
            Some(_) => return Err(protocol_error("expected '\\n' after '\\r'")),
        }
        let invalid = if what == "mbulk count" {
            "invalid multibulk length"
        } else {
            "invalid bulk length"
        };
        let n = parse_i64(&buf[at + 1..cr]).ok_or_else(|| protocol_error(invalid))?;
        Ok(Some((n, cr + 2)))
    }

    /// `Incomplete` for a line not yet whole: one more byte at least.
    fn incomplete_line(&self, buf: &[u8]) -> Parsed {
        Parsed::Incomplete {
            min_len: buf.len() + 1,
        }
    }

    /// An inline request: the line up to `\n` (a `\r` before it dropped), split as Redis's
    /// `sdssplitargs` splits it.
    fn inline(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let limit = buf.len().min(self.limits.max_inline_bytes + 1);
        let Some(nl) = buf[..limit].iter().position(|&b| b == b'\n') else {
            if buf.len() > self.limits.max_inline_bytes {
                return Err(protocol_error("too big inline request"));
            }
            return Ok(Parsed::Incomplete {
                min_len: buf.len() + 1,
            });
        };
        let line = &buf[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let args = split_inline(line, self.limits.max_args)?;
        if args.is_empty() {
            return Ok(Parsed::Nothing { consumed: nl + 1 });
        }
        Ok(Parsed::Request {
            args,
            consumed: nl + 1,
        })
    }
}

/// A strict decimal `i64` (Redis's `string2ll`): an optional `-`, digits, no leading zero
/// but in `0`, nothing else.
pub fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (negative, body) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if body.is_empty() || body.len() > 19 || (body[0] == b'0' && (body.len() > 1 || negative)) {
        return None;
    }
    let mut n: i64 = 0;
    for &d in body {
        if !d.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(d - b'0');
        n = if negative {
            n.checked_mul(10)?.checked_sub(digit)?
        } else {
            n.checked_mul(10)?.checked_add(digit)?
        };
    }
    Some(n)
}

/// Splits an inline request's line into arguments as Redis's `sdssplitargs` does: runs of
/// non-space bytes; `"..."` with `\n \r \t \b \a \\ \"` and `\xHH` escapes; `'...'` with `\'`;
/// a closing quote must be followed by a space or the end ("unbalanced quotes in request").
fn split_inline(line: &[u8], max_args: usize) -> Result<Vec<Arg>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    // Bounded: every pass consumes at least one byte of the line.
    while i < line.len() {
        if line[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if args.len() == max_args {
            return Err(protocol_error("invalid multibulk length"));
        }
        let (arg, next) = match line[i] {
            quote @ (b'"' | b'\'') => quoted(line, i + 1, quote)?,
            _ => {
                let end = line[i..]
                    .iter()
                    .position(u8::is_ascii_whitespace)
                    .map_or(line.len(), |n| i + n);
                (line[i..end].to_vec(), end)
            }
        };
        args.push(Arg::Owned(arg));
        i = next;
    }
    Ok(args)
}

/// The argument quoted by `quote` whose bytes start at `line[i]`, and where the line goes on:
/// `"..."` takes `\n \r \t \b \a \\ \"` and `\xHH` escapes, `'...'` only `\'`; the closing
/// quote must be followed by a space or the end.
fn quoted(line: &[u8], mut i: usize, quote: u8) -> Result<(Vec<u8>, usize), ProtocolError> {
    let unbalanced = || protocol_error("unbalanced quotes in request");
    let mut arg = Vec::new();
    // Bounded: every pass consumes one to four bytes of the line, or returns.
    loop {
        let Some(&b) = line.get(i) else {
            return Err(unbalanced());
        };
        let next = line.get(i + 1).copied();
        match b {
            b'\\'
                if quote == b'"'
                    && next == Some(b'x')
                    && hex_pair(line.get(i + 2..i + 4)).is_some() =>
            {
                arg.push(hex_pair(line.get(i + 2..i + 4)).expect("checked"));
                i += 4;
            }
            b'\\' if quote == b'"' && next.is_some() => {
                arg.push(match next.expect("checked") {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'a' => 0x07,
                    other => other,
                });
                i += 2;
            }
            b'\\' if quote == b'\'' && next == Some(b'\'') => {
                arg.push(b'\'');
                i += 2;
            }
            _ if b == quote => {
                i += 1;
                if line.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                    return Err(unbalanced());
                }
                return Ok((arg, i));
            }
            _ => {
                arg.push(b);
                i += 1;
            }
        }
    }
}

/// The byte two hex digits name.
fn hex_pair(digits: Option<&[u8]>) -> Option<u8> {
    let digits = digits?;
    let value = |d: u8| char::from(d).to_digit(16);
    Some((value(digits[0])? * 16 + value(digits[1])?) as u8)
}

/// The length of the one reply at the start of `buf` (RESP2 or RESP3, aggregates whole), or
/// `None` while it is incomplete; `Err` for bytes that are no reply. For clients: the load
/// generator and tests that read a server's replies.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
    // Bounded: an explicit stack of the elements still owed by open aggregates, at most one
    // entry per nesting level reached, and every pass consumes a line.
    let mut pos = 0;
    let mut owed: Vec<i64> = Vec::new();
    loop {
        let Some(&kind) = buf.get(pos) else {
            return Ok(None);
        };
        let Some(cr) = buf[pos..].iter().position(|&b| b == b'\r') else {
            return Ok(None);
        };
        let cr = pos + cr;
        if buf.len() < cr + 2 {
            return Ok(None);
        }
        let text = &buf[pos + 1..cr];
        let mut next = cr + 2;
        let mut children = 0;
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'=' | b'!' => {
                let n = parse_i64(text).ok_or_else(|| protocol_error("bad bulk length"))?;
                if n >= 0 {
                    next += n as usize + 2;
                    if buf.len() < next {
                        return Ok(None);
                    }
                }
            }
            b'*' | b'~' | b'>' | b'%' => {
                let n = parse_i64(text).ok_or_else(|| protocol_error("bad aggregate length"))?;
                children = if kind == b'%' { 2 * n.max(0) } else { n.max(0) };
            }
            other => {
                return Err(protocol_error(format_args!(
                    "no reply starts with '{}'",
                    char::from(other)
                )))
            }
        }
        pos = next;
        if children > 0 {
            owed.push(children);
            continue;
        }
        // One value done: it settles its aggregate's count, maybe several levels up.
        loop {
            match owed.last_mut() {
                None => return Ok(Some(pos)),
                Some(n) => {
                    *n -= 1;
                    if *n > 0 {
                        break;
                    }
                    owed.pop();
                }
            }
        }
    }
}

/// Which protocol a connection speaks (`HELLO 3` switches to RESP3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2, every connection's first.
    #[default]
    Resp2,
    /// RESP3 (maps, sets, nulls, doubles typed).
    Resp3,
}

/// Reply encoders: each appends one value (or an aggregate's header) to `out`.
pub mod write {
    use super::Protocol;
    use std::io::Write as _;

    fn line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
        debug_assert!(!text.contains(&b'\r') && !text.contains(&b'\n'));
        out.push(kind);
        out.extend_from_slice(text);
        out.extend_from_slice(b"\r\n");
    }

    fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
        out.push(kind);
        write!(out, "{n}\r\n").expect("writing to a Vec");
    }

    /// `+OK`: a status. Carriage returns and newlines in `text` become spaces.
    pub fn simple(out: &mut Vec<u8>, text: &str) {
        line(out, b'+', &single_line(text));
    }

    /// `-ERR ...`: `text` starts with its code (`ERR`, `WRONGTYPE`, `BUSY`, ...).
    pub fn error(out: &mut Vec<u8>, text: &str) {
        line(out, b'-', &single_line(text));
    }

    /// `:n`.
    pub fn integer(out: &mut Vec<u8>, n: i64) {
        header(out, b':', n);
    }

    /// `$len` and the bytes.
    pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
        header(out, b'$', bytes.len() as i64);
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\r\n");
    }

    /// An absent value: `$-1` in RESP2, `_` in RESP3.
    pub fn null(out: &mut Vec<u8>, protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => out.extend_from_slice(b"$-1\r\n"),
            Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
        }
    }

    /// An absent array (a timed-out blocking pop, an aborted `EXEC`): `*-1` in RESP2, `_` in
    /// RESP3.
    pub fn null_array(out: &mut Vec<u8>, protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => out.extend_from_slice(b"*-1\r\n"),
            Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
        }
    }

    /// The header of an array of `n` values.
    pub fn array(out: &mut Vec<u8>, n: usize) {
        header(out, b'*', n as i64);
    }

    /// The header of a map of `n` pairs (RESP2: an array of `2n` values).
    pub fn map(out: &mut Vec<u8>, n: usize, protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => header(out, b'*', 2 * n as i64),
            Protocol::Resp3 => header(out, b'%', n as i64),
        }
    }

    /// The header of a set of `n` values (RESP2: an array).
    pub fn set(out: &mut Vec<u8>, n: usize, protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => header(out, b'*', n as i64),
            Protocol::Resp3 => header(out, b'~', n as i64),
        }
    }

    /// The header of an out-of-band push of `n` values (RESP2: an array).
    pub fn push(out: &mut Vec<u8>, n: usize, protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => header(out, b'*', n as i64),
            Protocol::Resp3 => header(out, b'>', n as i64),
        }
    }

    /// A double: RESP3 `,1.5`, RESP2 a bulk string of the same text. The text is the
    /// shortest that reads back as `x` (`inf`, `-inf`, `nan` for the others).
    pub fn double(out: &mut Vec<u8>, x: f64, protocol: Protocol) {
        let text = format_double(x);
        match protocol {
            Protocol::Resp2 => bulk(out, text.as_bytes()),
            Protocol::Resp3 => line(out, b',', text.as_bytes()),
        }
    }

    /// `x` as Redis prints a double: integral values without a fraction, `inf`, `-inf`,
    /// `nan`.
    pub fn format_double(x: f64) -> String {
        if x.is_nan() {
            "nan".into()
        } else if x.is_infinite() {
            if x > 0.0 { "inf" } else { "-inf" }.into()
        } else {
            format!("{x}")
        }
    }

    /// A boolean: RESP3 `#t`/`#f`, RESP2 the integer 1 or 0.
    pub fn boolean(out: &mut Vec<u8>, b: bool, protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => integer(out, i64::from(b)),
            Protocol::Resp3 => out.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" }),
        }
    }

    /// A verbatim string of format `txt` (three bytes): RESP3 `=`, RESP2 a bulk string.
    pub fn verbatim(out: &mut Vec<u8>, format: &[u8; 3], bytes: &[u8], protocol: Protocol) {
        match protocol {
            Protocol::Resp2 => bulk(out, bytes),
            Protocol::Resp3 => {
                header(out, b'=', bytes.len() as i64 + 4);
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    fn single_line(text: &str) -> Vec<u8> {
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect()
    }
}

#[cfg(test)]
mod tests;
