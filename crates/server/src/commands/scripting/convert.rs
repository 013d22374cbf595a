//! Replies to Lua values (what `redis.call` returns) and Lua values to replies (what a script
//! returns), as Redis 7.0 converts them in RESP2 and RESP3.

use mlua::{Lua, Table, Value};

use crate::resp::{write, Protocol};

/// Deepest reply nesting converted (a command's replies nest a few levels at most).
const DEPTH_MAX: usize = 64;

/// A reply the server wrote, read back: `(value, bytes used)`.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// The line from here to its CRLF (the header's payload, type byte skipped).
    fn line(&mut self) -> mlua::Result<&[u8]> {
        let start = self.at + 1;
        let end = self
            .buf
            .get(start..)
            .and_then(|rest| rest.windows(2).position(|w| w == b"\r\n"))
            .ok_or_else(|| malformed("a line without its end"))?;
        self.at = start + end + 2;
        Ok(&self.buf[start..start + end])
    }

    fn number(&mut self) -> mlua::Result<i64> {
        let line = self.line()?;
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| malformed("a length that is no number"))
    }

    fn bytes(&mut self, len: usize) -> mlua::Result<&[u8]> {
        let bytes = self
            .buf
            .get(self.at..self.at + len)
            .ok_or_else(|| malformed("a body shorter than its length"))?;
        self.at += len + 2;
        Ok(bytes)
    }
}

/// A reply the server wrote that cannot be read back (a bug in a command): the script fails
/// with this error instead of the server panicking.
fn malformed(what: &str) -> mlua::Error {
    mlua::Error::runtime(format!("a command's reply is malformed: {what}"))
}

/// An error reply's text as a Lua error table's `err`: the reply without its `-`.
fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(Value::Table(t))
}

/// The Lua value of the reply at the start of `buf` (written by a command of the server)
/// and whether it is an error.
pub fn reply_to_lua(lua: &Lua, buf: &[u8]) -> mlua::Result<(Value, bool)> {
    let mut reader = Reader { buf, at: 0 };
    let is_error = buf.first() == Some(&b'-');
    let value = read(lua, &mut reader, 0)?;
    Ok((value, is_error))
}

fn single(lua: &Lua, field: &str, value: Value) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.raw_set(field, value)?;
    Ok(Value::Table(t))
}

fn read(lua: &Lua, r: &mut Reader<'_>, depth: usize) -> mlua::Result<Value> {
    if depth > DEPTH_MAX {
        return Err(mlua::Error::runtime("reply nested too deep"));
    }
    let kind = *r
        .buf
        .get(r.at)
        .ok_or_else(|| malformed("a missing reply"))?;
    Ok(match kind {
        b':' => Value::Number(r.number()? as f64),
        b'$' | b'=' => {
            let len = r.number()?;
            if len < 0 {
                return Ok(Value::Boolean(false));
            }
            let bytes = r.bytes(len as usize)?;
            if kind == b'=' {
                return verbatim(lua, bytes);
            }
            Value::String(lua.create_string(bytes)?)
        }
        b'+' => {
            let text = lua.create_string(r.line()?)?;
            single(lua, "ok", Value::String(text))?
        }
        b'-' => {
            let text = r.line()?.to_vec();
            error_table(lua, &text)?
        }
        b'*' | b'~' | b'%' | b'>' => aggregate(lua, r, kind, depth)?,
        b'_' => {
            r.line()?;
            Value::Nil
        }
        b'#' => Value::Boolean(r.line()? == b"t"),
        b',' => {
            let line = r.line()?;
            let x = match line {
                b"inf" => f64::INFINITY,
                b"-inf" => f64::NEG_INFINITY,
                _ => std::str::from_utf8(line)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(f64::NAN),
            };
            single(lua, "double", Value::Number(x))?
        }
        b'(' => {
            let digits = lua.create_string(r.line()?)?;
            single(lua, "big_number", Value::String(digits))?
        }
        _ => return Err(malformed("an unknown reply type")),
    })
}

fn verbatim(lua: &Lua, bytes: &[u8]) -> mlua::Result<Value> {
    let (format, text) = bytes.split_at(bytes.len().min(4));
    let inner = lua.create_table()?;
    inner.raw_set("format", lua.create_string(&format[..format.len().min(3)])?)?;
    inner.raw_set("string", lua.create_string(text)?)?;
    single(lua, "verbatim_string", Value::Table(inner))
}

fn aggregate(lua: &Lua, r: &mut Reader<'_>, kind: u8, depth: usize) -> mlua::Result<Value> {
    let n = r.number()?;
    if n < 0 {
        return Ok(Value::Boolean(false));
    }
    let n = n as usize;
    let t = lua.create_table_with_capacity(if kind == b'%' { 0 } else { n }, 0)?;
    match kind {
        b'%' => {
            for _ in 0..n {
                let k = read(lua, r, depth + 1)?;
                let v = read(lua, r, depth + 1)?;
                t.raw_set(k, v)?;
            }
            single(lua, "map", Value::Table(t))
        }
        b'~' => {
            for _ in 0..n {
                let k = read(lua, r, depth + 1)?;
                t.raw_set(k, true)?;
            }
            single(lua, "set", Value::Table(t))
        }
        _ => {
            for i in 1..=n {
                let v = read(lua, r, depth + 1)?;
                t.raw_set(i, v)?;
            }
            Ok(Value::Table(t))
        }
    }
}

/// How a script's value becomes the client's reply.
#[derive(Clone, Copy, Debug)]
pub struct ReplyOptions {
    /// The client's protocol.
    pub protocol: Protocol,
    /// The script's (`redis.setresp`): booleans follow it.
    pub script_resp3: bool,
}

/// Most bytes of a script's reply (past it the client gets an error instead).
pub const REPLY_BYTES_MAX: usize = 512 << 20;
/// Most values a script's reply holds (a table that holds itself twice would otherwise
/// expand without end).
const REPLY_VALUES_MAX: usize = 1 << 24;

/// Writes `value` (a script's result) as the client's reply. Iterative (the user-level
/// thread's stack is small), depth-bounded as Redis's Lua stack bounds it, and size-bounded.
pub fn lua_to_reply(value: &Value, options: ReplyOptions, out: &mut Vec<u8>) {
    let mut reply = Vec::new();
    // Values still to write, last first, with their depth.
    let mut pending = vec![(value.clone(), 0usize)];
    let mut written = 0usize;
    while let Some((value, depth)) = pending.pop() {
        written += 1;
        if written > REPLY_VALUES_MAX || reply.len() > REPLY_BYTES_MAX {
            write::error(out, "ERR the script's reply is too large");
            return;
        }
        let children = to_reply(&value, options, &mut reply, depth);
        pending.extend(children.into_iter().rev().map(|v| (v, depth + 1)));
    }
    out.extend_from_slice(&reply);
}

/// Writes `value`'s own part of the reply; its elements (a table's) come back, in order.
fn to_reply(value: &Value, options: ReplyOptions, out: &mut Vec<u8>, depth: usize) -> Vec<Value> {
    match value {
        Value::String(s) => write::bulk(out, &s.as_bytes()),
        Value::Integer(n) => write::integer(out, *n),
        Value::Number(x) => write::integer(out, truncate(*x)),
        Value::Boolean(b) if options.script_resp3 => write::boolean(out, *b, options.protocol),
        Value::Boolean(true) => write::integer(out, 1),
        Value::Table(_) if depth >= DEPTH_MAX => write::error(out, "ERR reached lua stack limit"),
        Value::Table(t) => return table_to_reply(t, options, out),
        _ => write::null(out, options.protocol),
    }
    Vec::new()
}

/// `(long long)x` as C truncates (saturating outside the range; NaN is 0).
fn truncate(x: f64) -> i64 {
    x as i64
}

/// CR and LF as spaces (a status or error line must stay one line).
fn one_line(bytes: &[u8]) -> Vec<u8> {
    bytes
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

fn string_field(t: &Table, name: &str) -> Option<Vec<u8>> {
    match t.raw_get::<Value>(name).ok()? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn table_to_reply(t: &Table, options: ReplyOptions, out: &mut Vec<u8>) -> Vec<Value> {
    if let Some(err) = string_field(t, "err") {
        out.push(b'-');
        out.extend_from_slice(&one_line(&err));
        out.extend_from_slice(b"\r\n");
        return Vec::new();
    }
    if let Some(ok) = string_field(t, "ok") {
        out.push(b'+');
        out.extend_from_slice(&one_line(&ok));
        out.extend_from_slice(b"\r\n");
        return Vec::new();
    }
    if let Ok(Value::Number(x)) = t.raw_get::<Value>("double") {
        double(out, x, options.protocol);
        return Vec::new();
    }
    if let Ok(Value::Integer(n)) = t.raw_get::<Value>("double") {
        double(out, n as f64, options.protocol);
        return Vec::new();
    }
    if let Some(digits) = string_field(t, "big_number") {
        big_number(&one_line(&digits), options.protocol, out);
        return Vec::new();
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string"))
        {
            if let Ok(format) = <[u8; 3]>::try_from(format.as_slice()) {
                write::verbatim(out, &format, &text, options.protocol);
                return Vec::new();
            }
        }
    }
    if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = map.pairs::<Value, Value>().flatten().collect();
        write::map(out, pairs.len(), options.protocol);
        return pairs.into_iter().flat_map(|(k, v)| [k, v]).collect();
    }
    if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        let members: Vec<Value> = set
            .pairs::<Value, Value>()
            .flatten()
            .map(|(k, _)| k)
            .collect();
        write::set(out, members.len(), options.protocol);
        return members;
    }
    array_to_reply(t, out)
}

/// A double as Redis 7.0 replies one from a script: `"%.17g"`, a bulk string in RESP2.
fn double(out: &mut Vec<u8>, x: f64, protocol: Protocol) {
    let text = format_17g(x);
    if protocol == Protocol::Resp3 {
        out.push(b',');
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
    } else {
        write::bulk(out, text.as_bytes());
    }
}

/// `x` as C's `printf("%.17g")` writes it.
pub fn format_17g(x: f64) -> String {
    let mut buf = [0u8; 64];
    // SAFETY: the format takes one double; `snprintf` writes at most `buf.len()` bytes,
    // NUL included, and returns how many it wanted (a %.17g is at most 24).
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), x) };
    let n = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn big_number(digits: &[u8], protocol: Protocol, out: &mut Vec<u8>) {
    if protocol == Protocol::Resp3 {
        out.push(b'(');
        out.extend_from_slice(digits);
        out.extend_from_slice(b"\r\n");
    } else {
        write::bulk(out, digits);
    }
}

/// `t[1], t[2], ...` up to the first nil: the array's header, its elements back.
fn array_to_reply(t: &Table, out: &mut Vec<u8>) -> Vec<Value> {
    let mut items = Vec::new();
    // A border of the table is past its first nil, if it has one.
    for i in 1..=t.raw_len() {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    write::array(out, items.len());
    items
}
