//! Requests on the wire and the replies that come back: RESP2 and memcached's text protocol.
//! Encoding appends to a caller's buffer; parsing finds one whole reply at the front of the
//! bytes received and classifies it, without copying it. Bounds: a reply nests at most
//! [`MAX_DEPTH`] arrays; a memcached line is at most [`MAX_LINE_BYTES`].

use std::io::Write;

use super::spec::{OpKind, Protocol};

/// Deepest array nesting accepted in a reply (EXEC's reply is depth 2).
pub const MAX_DEPTH: usize = 8;
/// Longest memcached reply line (`VALUE key flags bytes`) before its CRLF.
pub const MAX_LINE_BYTES: usize = 1024;
/// Bytes of every key: `key:` and 12 digits.
pub const KEY_BYTES: usize = 16;

/// What one reply was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reply {
    /// A value, `+OK`, `STORED`, an integer.
    Ok,
    /// A miss: `$-1`, `*-1`, memcached's bare `END`.
    Nil,
    /// An error reply other than `-BUSY`.
    Error,
    /// `-BUSY ...`: the server's admission refused the request.
    Busy,
}

/// A reply that cannot be parsed: the connection is closed.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtoError(pub String);

/// The text of key `n`.
pub fn key_text(n: u64) -> [u8; KEY_BYTES] {
    let mut key = *b"key:000000000000";
    let mut v = n % 1_000_000_000_000;
    for slot in key[4..].iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
    key
}

/// The value stored under key `n`: its key text, then `v` bytes, `value_bytes` in all (so a
/// reader can check a value belongs to its key).
pub fn value_for(n: u64, value_bytes: usize) -> Vec<u8> {
    let mut value = vec![b'v'; value_bytes];
    let key = key_text(n);
    let len = KEY_BYTES.min(value_bytes);
    value[..len].copy_from_slice(&key[..len]);
    value
}

/// Appends the command of `parts` (a RESP array of bulk strings) to `out`.
pub fn resp_bulk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let _ = write!(out, "*{}\r\n", parts.len());
    for p in parts {
        let _ = write!(out, "${}\r\n", p.len());
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `op` on `keys` (a GET or SET uses the first, MULTI both) with `value` (the
/// template: its first bytes are replaced by the key's text) to `out`; returns the number of
/// replies it gets.
pub fn encode(
    proto: Protocol,
    op: OpKind,
    keys: [u64; 2],
    value: &mut [u8],
    out: &mut Vec<u8>,
) -> u32 {
    let stamp = |value: &mut [u8], n: u64| {
        let len = KEY_BYTES.min(value.len());
        value[..len].copy_from_slice(&key_text(n)[..len]);
    };
    let key = key_text(keys[0]);
    match (proto, op) {
        (Protocol::Resp, OpKind::Get) => resp_bulk(out, &[b"GET", &key]),
        (Protocol::Resp, OpKind::Set) => {
            stamp(value, keys[0]);
            resp_bulk(out, &[b"SET", &key, value]);
        }
        (Protocol::Resp, OpKind::Multi) => {
            resp_bulk(out, &[b"MULTI"]);
            stamp(value, keys[0]);
            resp_bulk(out, &[b"SET", &key, value]);
            stamp(value, keys[1]);
            resp_bulk(out, &[b"SET", &key_text(keys[1]), value]);
            resp_bulk(out, &[b"EXEC"]);
            return 4;
        }
        (Protocol::Memcache, OpKind::Get) => {
            out.extend_from_slice(b"get ");
            out.extend_from_slice(&key);
            out.extend_from_slice(b"\r\n");
        }
        (Protocol::Memcache, OpKind::Set | OpKind::Multi) => {
            stamp(value, keys[0]);
            out.extend_from_slice(b"set ");
            out.extend_from_slice(&key);
            let _ = write!(out, " 0 0 {}\r\n", value.len());
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    1
}

fn line(buf: &[u8], max: usize) -> Result<Option<usize>, ProtoError> {
    match buf.windows(2).take(max + 1).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some(end)),
        None if buf.len() > max + 1 => Err(ProtoError("reply line too long".into())),
        None => Ok(None),
    }
}

fn number(text: &[u8]) -> Result<i64, ProtoError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| ProtoError(format!("not a number: {:?}", String::from_utf8_lossy(text))))
}

/// One whole RESP2 or RESP3 reply at the front of `buf`: its length and kind, `None` if
/// incomplete. An aggregate (array, map, set, push) is as bad as its worst element; RESP3's
/// null is a miss and its blob error an error. A push (`>`) parses as any aggregate: a reader
/// that pairs replies with requests tells it apart with [`is_push`]. Attributes (`|`) are
/// refused.
pub fn parse_resp(buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
    parse_resp_at(buf, 0)
}

/// Whether the reply at the front of `frame` is an out-of-band RESP3 push (an invalidation,
/// a pub/sub message), which answers no request.
pub fn is_push(frame: &[u8]) -> bool {
    frame.first() == Some(&b'>')
}

fn parse_resp_at(buf: &[u8], depth: usize) -> Result<Option<(usize, Reply)>, ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError("reply nested too deep".into()));
    }
    let Some(end) = line(buf, MAX_LINE_BYTES.max(64 * 1024))? else {
        return Ok(None);
    };
    let (head, body) = (buf[0], &buf[1..end]);
    let after = end + 2;
    match head {
        b'+' | b':' | b'#' | b',' | b'(' => Ok(Some((after, Reply::Ok))),
        b'_' => Ok(Some((after, Reply::Nil))),
        b'-' if body.starts_with(b"BUSY") => Ok(Some((after, Reply::Busy))),
        b'-' => Ok(Some((after, Reply::Error))),
        b'$' | b'=' | b'!' => {
            let len = number(body)?;
            if len < 0 {
                return Ok(Some((after, Reply::Nil)));
            }
            let total = after + len as usize + 2;
            let kind = if head == b'!' {
                Reply::Error
            } else {
                Reply::Ok
            };
            Ok((buf.len() >= total).then_some((total, kind)))
        }
        b'*' | b'~' | b'>' | b'%' => {
            let count = number(body)?;
            if count < 0 {
                return Ok(Some((after, Reply::Nil)));
            }
            // A map's entries are a key and a value each.
            let elements = if head == b'%' { 2 * count } else { count };
            aggregate(buf, after, elements, depth)
        }
        other => Err(ProtoError(format!("unexpected reply type byte {other:#x}"))),
    }
}

/// The `elements` replies of an aggregate whose header ends at `at`: its whole length and
/// its worst element's kind.
fn aggregate(
    buf: &[u8],
    mut at: usize,
    elements: i64,
    depth: usize,
) -> Result<Option<(usize, Reply)>, ProtoError> {
    let mut worst = Reply::Ok;
    for _ in 0..elements {
        match parse_resp_at(&buf[at..], depth + 1)? {
            Some((len, kind)) => {
                at += len;
                worst = worst.max(kind);
            }
            None => return Ok(None),
        }
    }
    Ok(Some((at, worst)))
}

/// One whole memcached text reply at the front of `buf`: its length and kind.
pub fn parse_memcache(buf: &[u8]) -> Result<Option<(usize, Reply)>, ProtoError> {
    let Some(end) = line(buf, MAX_LINE_BYTES)? else {
        return Ok(None);
    };
    let text = &buf[..end];
    let after = end + 2;
    if let Some(rest) = text.strip_prefix(b"VALUE ") {
        let bytes = rest
            .split(|b| *b == b' ')
            .nth(2)
            .ok_or_else(|| ProtoError("VALUE line without a length".into()))?;
        let total = after + number(bytes)?.max(0) as usize + 2 + b"END\r\n".len();
        if buf.len() < total {
            return Ok(None);
        }
        if &buf[total - 5..total] != b"END\r\n" {
            return Err(ProtoError(
                "VALUE not followed by END (multi-key get?)".into(),
            ));
        }
        return Ok(Some((total, Reply::Ok)));
    }
    let kind = match text {
        b"END" => Reply::Nil,
        b"STORED" | b"DELETED" | b"TOUCHED" => Reply::Ok,
        t if t.starts_with(b"SERVER_ERROR") && t.windows(4).any(|w| w == b"busy") => Reply::Busy,
        _ => Reply::Error,
    };
    Ok(Some((after, kind)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches: a key of the wrong width, digits reversed, a value not stamped with its key.
    #[test]
    fn keys_and_values() {
        assert_eq!(&key_text(42), b"key:000000000042");
        let v = value_for(42, 20);
        assert_eq!(&v, b"key:000000000042vvvv");
        assert_eq!(&value_for(7, 4), b"key:");
    }

    /// Catches: a wrong RESP encoding (checked byte for byte) or reply count for MULTI.
    #[test]
    fn resp_encoding() {
        let mut out = Vec::new();
        let mut value = vec![b'v'; 18];
        assert_eq!(
            encode(Protocol::Resp, OpKind::Get, [1, 0], &mut value, &mut out),
            1
        );
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000001\r\n");
        out.clear();
        assert_eq!(
            encode(Protocol::Resp, OpKind::Multi, [1, 2], &mut value, &mut out),
            4
        );
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with("*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n"));
        assert!(text.contains("key:000000000002vv\r\n*1\r\n$4\r\nEXEC\r\n"));
        out.clear();
        encode(
            Protocol::Memcache,
            OpKind::Set,
            [3, 0],
            &mut value,
            &mut out,
        );
        assert_eq!(
            out,
            b"set key:000000000003 0 0 18\r\nkey:000000000003vv\r\n"
        );
    }

    /// Catches: an incomplete reply taken as whole, a BUSY counted as a plain error, an
    /// error inside EXEC's array hidden, a nil taken as a value.
    #[test]
    fn resp_replies() {
        assert_eq!(parse_resp(b"+OK\r\n"), Ok(Some((5, Reply::Ok))));
        assert_eq!(parse_resp(b"+OK\r"), Ok(None));
        assert_eq!(parse_resp(b"$3\r\nab"), Ok(None));
        assert_eq!(parse_resp(b"$3\r\nabc\r\n+"), Ok(Some((9, Reply::Ok))));
        assert_eq!(parse_resp(b"$-1\r\n"), Ok(Some((5, Reply::Nil))));
        assert_eq!(
            parse_resp(b"-BUSY queue full\r\n").unwrap().unwrap().1,
            Reply::Busy
        );
        assert_eq!(parse_resp(b"-ERR x\r\n").unwrap().unwrap().1, Reply::Error);
        let exec = b"*2\r\n+OK\r\n-ERR no\r\n";
        assert_eq!(parse_resp(exec), Ok(Some((exec.len(), Reply::Error))));
        assert_eq!(parse_resp(b"*2\r\n+OK\r\n"), Ok(None));
        assert!(parse_resp(b"?x\r\n").is_err());
        let deep = "*1\r\n".repeat(MAX_DEPTH + 2) + "+OK\r\n";
        assert!(parse_resp(deep.as_bytes()).is_err());
    }

    /// Catches: RESP3's types refused or mis-sized (a map counted as n elements rather than
    /// 2n, a blob error taken as a value, null as a value), a push not told apart.
    #[test]
    fn resp3_replies() {
        let hello = b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n+";
        assert_eq!(parse_resp(hello), Ok(Some((hello.len() - 1, Reply::Ok))));
        assert_eq!(parse_resp(&hello[..hello.len() - 6]), Ok(None));
        assert_eq!(parse_resp(b"_\r\n"), Ok(Some((3, Reply::Nil))));
        assert_eq!(parse_resp(b"#t\r\n"), Ok(Some((4, Reply::Ok))));
        assert_eq!(parse_resp(b",1.5\r\n"), Ok(Some((6, Reply::Ok))));
        assert_eq!(parse_resp(b"!3\r\nERR\r\n"), Ok(Some((9, Reply::Error))));
        assert_eq!(parse_resp(b"=7\r\ntxt:abc\r\n"), Ok(Some((13, Reply::Ok))));
        let push = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n";
        assert_eq!(parse_resp(push), Ok(Some((push.len(), Reply::Ok))));
        assert!(is_push(push) && !is_push(b"*1\r\n"));
        assert_eq!(
            parse_resp(b"~2\r\n:1\r\n-ERR x\r\n").unwrap().unwrap().1,
            Reply::Error
        );
        assert!(parse_resp(b"|1\r\n+a\r\n+b\r\n+OK\r\n").is_err());
    }

    /// Catches: a VALUE reply taken before its data and END arrived, a miss counted as a hit,
    /// an error line counted as success, an endless line accepted.
    #[test]
    fn memcache_replies() {
        let hit = b"VALUE key:1 0 3\r\nabc\r\nEND\r\n";
        assert_eq!(parse_memcache(hit), Ok(Some((hit.len(), Reply::Ok))));
        assert_eq!(parse_memcache(&hit[..hit.len() - 1]), Ok(None));
        assert_eq!(parse_memcache(b"END\r\n"), Ok(Some((5, Reply::Nil))));
        assert_eq!(parse_memcache(b"STORED\r\n"), Ok(Some((8, Reply::Ok))));
        assert_eq!(
            parse_memcache(b"SERVER_ERROR out of memory\r\n")
                .unwrap()
                .unwrap()
                .1,
            Reply::Error
        );
        assert!(parse_memcache(&[b'x'; MAX_LINE_BYTES + 10]).is_err());
    }
}
