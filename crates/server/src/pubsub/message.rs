//! The frames pub/sub sends: messages, the (un)subscribe confirmations and a subscribed
//! client's `PING` reply, each a push in RESP3 and an array in RESP2.

use crate::resp::{write, Protocol};

/// A message as a receiver of `protocol` gets it: `message channel payload`, `smessage
/// channel payload`, or `pmessage pattern channel payload` when `pattern` is given.
pub(super) fn message(
    out: &mut Vec<u8>,
    protocol: Protocol,
    kind: &str,
    pattern: Option<&[u8]>,
    channel: &[u8],
    payload: &[u8],
) {
    write::push(out, if pattern.is_some() { 4 } else { 3 }, protocol);
    write::bulk(out, kind.as_bytes());
    if let Some(p) = pattern {
        write::bulk(out, p);
    }
    write::bulk(out, channel);
    write::bulk(out, payload);
}

/// A (un)subscribe confirmation: `kind channel count` (`channel` null for an unsubscribe
/// from nothing).
pub fn confirmation(
    out: &mut Vec<u8>,
    protocol: Protocol,
    kind: &str,
    channel: Option<&[u8]>,
    count: usize,
) {
    write::push(out, 3, protocol);
    write::bulk(out, kind.as_bytes());
    match channel {
        Some(c) => write::bulk(out, c),
        None => write::null(out, protocol),
    }
    write::integer(out, count as i64);
}

/// `PING [message]` from a RESP2 client in the subscribed context: `pong` and the message
/// (empty without one), as an array.
pub fn ping_reply(out: &mut Vec<u8>, message: Option<&[u8]>) {
    write::array(out, 2);
    write::bulk(out, b"pong");
    write::bulk(out, message.unwrap_or(b""));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutation caught: a pmessage without its pattern, or RESP3 sent as an array.
    #[test]
    fn messages_are_arrays_in_resp2_and_pushes_in_resp3() {
        let mut out = Vec::new();
        message(&mut out, Protocol::Resp2, "message", None, b"ch", b"hi");
        assert_eq!(out, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
        out.clear();
        message(
            &mut out,
            Protocol::Resp3,
            "pmessage",
            Some(b"c*"),
            b"ch",
            b"hi",
        );
        assert_eq!(
            out,
            b">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        );
        out.clear();
        confirmation(&mut out, Protocol::Resp2, "unsubscribe", None, 0);
        assert_eq!(out, b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
        out.clear();
        ping_reply(&mut out, None);
        assert_eq!(out, b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }
}

/// Who ran a command `MONITOR` shows: a client (its address) or a script (`lua`).
#[derive(Clone, Copy, Debug)]
pub enum MonitorSource<'a> {
    Client(&'a str),
    Lua,
}

/// A `MONITOR` line, as Redis's `replicationFeedMonitors` writes it: a status reply of the
/// time (s.µs), the database and the source, then each argument quoted and escaped as
/// `sdscatrepr` does (`AUTH`'s arguments and `HELLO`'s `AUTH` pair are `(redacted)`).
pub fn monitor_line(now_us: u64, db: usize, source: MonitorSource<'_>, args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("+{}.{:06} [{db} ", now_us / 1_000_000, now_us % 1_000_000).into_bytes();
    match source {
        MonitorSource::Client(addr) => out.extend_from_slice(addr.as_bytes()),
        MonitorSource::Lua => out.extend_from_slice(b"lua"),
    }
    out.push(b']');
    let redacted = redacted_args(args);
    for (i, arg) in args.iter().enumerate() {
        out.push(b' ');
        if redacted.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote(&mut out, arg);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The positions of arguments that may carry a secret: every argument of `AUTH`, the two
/// after `HELLO`'s `AUTH`.
fn redacted_args(args: &[&[u8]]) -> Vec<usize> {
    let name = args
        .first()
        .map(|a| a.to_ascii_lowercase())
        .unwrap_or_default();
    match &name[..] {
        b"auth" => (1..args.len()).collect(),
        b"hello" => {
            let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"auth"));
            at.map(|i| (i + 1..(i + 3).min(args.len())).collect())
                .unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// `bytes` in double quotes, escaped as Redis's `sdscatrepr`.
fn quote(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}
