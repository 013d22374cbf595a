//! The `cjson` library's encoder and decoder (Lua CJSON 2.1.0 as Redis 7.0 bundles it), as
//! primitives the sandbox's `cjson` table calls with its settings (`prelude.lua` keeps them,
//! checks the arguments and raises the errors these return with the script's position).
//!
//! Encoding walks Lua tables in `next` order, as Lua CJSON does (so objects list their keys in
//! Lua 5.1's own table order); a table is an array when every key is an integer ≥ 1 and it is
//! not excessively sparse, else an object. Numbers are printed `%.<precision>g`; strings escape
//! `"`, `\`, `/`, control bytes and 0x7F. Decoding is Lua CJSON's grammar with its lenient
//! numbers (`strtod`'s longest prefix), its error texts and positions, and `null` as the
//! `cjson.null` light userdata. Bounds: nesting (the settings, 1,000 by default) and the
//! encoded text ([`ENCODED_BYTES_MAX`]).

use mlua::{LightUserData, Lua, LuaString, Table, Value};

/// Most bytes one `cjson.encode` builds (a Lua state holds at most 256 MiB anyway).
pub const ENCODED_BYTES_MAX: usize = 256 << 20;

/// The encoder's settings (`cjson.encode_*`).
#[derive(Clone, Copy, Debug)]
pub struct EncodeOptions {
    pub precision: usize,
    pub max_depth: usize,
    pub sparse_convert: bool,
    pub sparse_ratio: i64,
    pub sparse_safe: i64,
    /// 0: refuse NaN and infinities; 1: write `nan`/`inf`; 2: write `null`.
    pub invalid_numbers: u8,
}

/// `cjson.null`: the NULL light userdata.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// `cjson.encode(value)`: the text, or the error's message.
pub fn encode(value: &Value, options: EncodeOptions) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut e = Encoder {
        options,
        out: &mut out,
        stack: Vec::new(),
    };
    e.value(value, 0)?;
    e.drain()?;
    Ok(out)
}

/// A table being written: an array's next index, or an object's pairs and the next one.
enum Frame {
    Array {
        t: Table,
        next: i64,
        len: i64,
        depth: usize,
    },
    Object {
        pairs: Vec<(Value, Value)>,
        next: usize,
        depth: usize,
    },
}

/// The encoder: iterative (a script runs on a user-level thread's small stack), its open
/// tables on `stack`, at most `max_depth` of them.
struct Encoder<'a> {
    options: EncodeOptions,
    out: &'a mut Vec<u8>,
    stack: Vec<Frame>,
}

impl Encoder<'_> {
    /// Writes a scalar, or opens a table (its frame pushed).
    fn value(&mut self, value: &Value, depth: usize) -> Result<(), String> {
        if self.out.len() > ENCODED_BYTES_MAX {
            return Err("not enough memory".into());
        }
        match value {
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self
                .out
                .extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(n) => self.number(*n as f64)?,
            Value::Number(x) => self.number(*x)?,
            Value::String(s) => escape(&s.as_bytes(), self.out),
            Value::Table(t) => self.open(t, depth + 1)?,
            other => {
                return Err(format!(
                    "Cannot serialise {}: type not supported",
                    type_name(other)
                ))
            }
        }
        Ok(())
    }

    fn number(&mut self, x: f64) -> Result<(), String> {
        if !x.is_finite() {
            match self.options.invalid_numbers {
                0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
                2 => {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
                _ => {}
            }
        }
        self.out
            .extend_from_slice(format_g(x, self.options.precision).as_bytes());
        Ok(())
    }

    fn open(&mut self, t: &Table, depth: usize) -> Result<(), String> {
        if depth > self.options.max_depth {
            return Err(format!("Cannot serialise, excessive nesting ({depth})"));
        }
        let frame = match self.array_length(t)? {
            Some(len) if len > 0 => {
                self.out.push(b'[');
                Frame::Array {
                    t: t.clone(),
                    next: 1,
                    len,
                    depth,
                }
            }
            _ => {
                self.out.push(b'{');
                let pairs = t
                    .clone()
                    .pairs::<Value, Value>()
                    .collect::<mlua::Result<Vec<_>>>()
                    .map_err(|e| e.to_string())?;
                Frame::Object {
                    pairs,
                    next: 0,
                    depth,
                }
            }
        };
        self.stack.push(frame);
        Ok(())
    }

    /// Writes the open tables' elements until none is open. Bounded: each pass writes one
    /// element or closes one table, and the tables are finite (a table holding itself
    /// reaches `max_depth`).
    fn drain(&mut self) -> Result<(), String> {
        while let Some(top) = self.stack.last_mut() {
            match top {
                Frame::Array {
                    t,
                    next,
                    len,
                    depth,
                } => {
                    if *next > *len {
                        self.out.push(b']');
                        self.stack.pop();
                        continue;
                    }
                    if *next > 1 {
                        self.out.push(b',');
                    }
                    let v: Value = t.raw_get(*next).map_err(|e| e.to_string())?;
                    *next += 1;
                    let depth = *depth;
                    self.value(&v, depth)?;
                }
                Frame::Object { pairs, next, depth } => {
                    if *next == pairs.len() {
                        self.out.push(b'}');
                        self.stack.pop();
                        continue;
                    }
                    if *next > 0 {
                        self.out.push(b',');
                    }
                    let (key, value) = pairs[*next].clone();
                    *next += 1;
                    let depth = *depth;
                    self.key(&key)?;
                    self.out.push(b':');
                    self.value(&value, depth)?;
                }
            }
        }
        Ok(())
    }

    fn key(&mut self, key: &Value) -> Result<(), String> {
        let x = match key {
            Value::String(s) => {
                escape(&s.as_bytes(), self.out);
                return Ok(());
            }
            Value::Integer(n) => *n as f64,
            Value::Number(x) => *x,
            other => {
                return Err(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    type_name(other)
                ))
            }
        };
        self.out.push(b'"');
        self.number(x)?;
        self.out.push(b'"');
        Ok(())
    }

    /// The array length of `t`, or `None` when it is an object (a key that is no integer ≥ 1,
    /// or an excessively sparse array converted).
    fn array_length(&self, t: &Table) -> Result<Option<i64>, String> {
        let (mut items, mut max) = (0i64, 0i64);
        for pair in t.clone().pairs::<Value, Value>() {
            let (key, _) = pair.map_err(|e| e.to_string())?;
            let k = match key {
                Value::Integer(n) => n as f64,
                Value::Number(x) => x,
                _ => return Ok(None),
            };
            if k < 1.0 || k.floor() != k || k > i64::MAX as f64 {
                return Ok(None);
            }
            max = max.max(k as i64);
            items += 1;
        }
        let o = self.options;
        if o.sparse_ratio > 0 && max > items.saturating_mul(o.sparse_ratio) && max > o.sparse_safe {
            if !o.sparse_convert {
                return Err("Cannot serialise table: excessively sparse array".into());
            }
            return Ok(None);
        }
        Ok(Some(max))
    }
}

/// Lua's name of a value's type.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// `"text"` with Lua CJSON's escapes.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0a => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            0x0d => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// `x` as C's `%.<precision>g` prints it (`nan`/`inf`/`-inf` for the invalid ones).
pub fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    let mut buf = [0u8; 64];
    let format = std::ffi::CString::new(format!("%.{}g", precision.clamp(1, 17)))
        .expect("no NUL in a format");
    // SAFETY: the format takes one double; `snprintf` writes at most `buf.len()` bytes, NUL
    // included (a %.17g is at most 24).
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), format.as_ptr(), x) };
    let n = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The decoder's settings.
#[derive(Clone, Copy, Debug)]
pub struct DecodeOptions {
    pub max_depth: usize,
    /// Accept `+1`, hex, `inf`, `nan`, leading zeros (Lua CJSON's default).
    pub invalid_numbers: bool,
}

/// `cjson.decode(text)`: the value, or the error's message.
pub fn decode(lua: &Lua, text: &[u8], options: DecodeOptions) -> Result<Value, String> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err("JSON parser does not support UTF-16 or UTF-32".into());
    }
    // The text ends at its first NUL, as Lua CJSON reads it.
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let mut d = Decoder {
        lua,
        text: &text[..end],
        at: 0,
        depth: 0,
        options,
    };
    let token = d.token();
    let value = d.value(token)?;
    let token = d.token();
    if !matches!(token.kind, Kind::End) {
        return Err(expected("the end", &token));
    }
    Ok(value)
}

enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

struct Token {
    kind: Kind,
    /// Where it starts (an error: where it was found), 0-based.
    at: usize,
}

fn token_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::ObjBegin => "T_OBJ_BEGIN",
        Kind::ObjEnd => "T_OBJ_END",
        Kind::ArrBegin => "T_ARR_BEGIN",
        Kind::ArrEnd => "T_ARR_END",
        Kind::Str(_) => "T_STRING",
        Kind::Number(_) => "T_NUMBER",
        Kind::Boolean(_) => "T_BOOLEAN",
        Kind::Null => "T_NULL",
        Kind::Colon => "T_COLON",
        Kind::Comma => "T_COMMA",
        Kind::End => "T_END",
        Kind::Error(text) => text,
    }
}

fn expected(what: &str, token: &Token) -> String {
    format!(
        "Expected {what} but found {} at character {}",
        token_name(&token.kind),
        token.at + 1
    )
}

struct Decoder<'l, 't> {
    lua: &'l Lua,
    text: &'t [u8],
    at: usize,
    depth: usize,
    options: DecodeOptions,
}

impl Decoder<'_, '_> {
    fn peek(&self, i: usize) -> u8 {
        self.text.get(i).copied().unwrap_or(0)
    }

    fn token(&mut self) -> Token {
        while matches!(self.peek(self.at), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
        let at = self.at;
        let single = |kind| Token { kind, at };
        let kind = match self.peek(at) {
            // The text holds no NUL (it ends at the first): 0 is its end.
            0 => return single(Kind::End),
            b'{' => Kind::ObjBegin,
            b'}' => Kind::ObjEnd,
            b'[' => Kind::ArrBegin,
            b']' => Kind::ArrEnd,
            b':' => Kind::Colon,
            b',' => Kind::Comma,
            b'"' => return self.string(),
            _ => return self.word(),
        };
        self.at += 1;
        single(kind)
    }

    /// A literal or a number, else an invalid token.
    fn word(&mut self) -> Token {
        let at = self.at;
        let rest = &self.text[at..];
        for (word, kind) in [
            (&b"true"[..], Kind::Boolean(true)),
            (b"false", Kind::Boolean(false)),
            (b"null", Kind::Null),
        ] {
            if rest.starts_with(word) {
                self.at += word.len();
                return Token { kind, at };
            }
        }
        if self.starts_number(rest) {
            return self.number();
        }
        Token {
            kind: Kind::Error("invalid token"),
            at,
        }
    }

    fn starts_number(&self, rest: &[u8]) -> bool {
        let lower3 = |s: &[u8]| s.get(..3).map(|p| p.to_ascii_lowercase());
        match rest.first() {
            Some(b'-' | b'0'..=b'9') => true,
            Some(b'+') => self.options.invalid_numbers,
            Some(b'i' | b'I' | b'n' | b'N') => {
                self.options.invalid_numbers
                    && matches!(lower3(rest).as_deref(), Some(b"inf" | b"nan"))
            }
            _ => false,
        }
    }

    fn number(&mut self) -> Token {
        let at = self.at;
        let invalid = Token {
            kind: Kind::Error("invalid number"),
            at,
        };
        if !self.options.invalid_numbers {
            let body = &self.text[at + usize::from(self.peek(at) == b'-')..];
            let leading_zero = body.first() == Some(&b'0')
                && matches!(body.get(1), Some(b'x' | b'X' | b'0'..=b'9'));
            let word = body.first().is_some_and(|&b| b > b'9')
                && matches!(
                    body.get(..3).map(|p| p.to_ascii_lowercase()).as_deref(),
                    Some(b"inf" | b"nan")
                );
            if leading_zero || word {
                return invalid;
            }
        }
        // strtod's longest prefix, on a NUL-terminated copy.
        let mut copy = self.text[at..].to_vec();
        copy.push(0);
        let mut end: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: `copy` is NUL-terminated and lives across the call; `end` points into it.
        let x = unsafe { libc::strtod(copy.as_ptr().cast(), &mut end) };
        let used = (end as usize).saturating_sub(copy.as_ptr() as usize);
        if used == 0 {
            return invalid;
        }
        self.at += used;
        Token {
            kind: Kind::Number(x),
            at,
        }
    }

    fn string(&mut self) -> Token {
        let start = self.at;
        let mut out = Vec::new();
        let mut i = start + 1;
        // Bounded by the text: each pass moves `i` forward or returns.
        loop {
            let b = self.peek(i);
            if i >= self.text.len() {
                self.at = i;
                return Token {
                    kind: Kind::Error("unexpected end of string"),
                    at: i,
                };
            }
            match b {
                b'"' => break,
                b'\\' => match self.escape(i, &mut out) {
                    Ok(next) => {
                        i = next;
                        continue;
                    }
                    Err(text) => {
                        self.at = i;
                        return Token {
                            kind: Kind::Error(text),
                            at: i,
                        };
                    }
                },
                _ => out.push(b),
            }
            i += 1;
        }
        self.at = i + 1;
        Token {
            kind: Kind::Str(out),
            at: start,
        }
    }

    /// The escape at `i` (a backslash) appended to `out`; where the string goes on.
    fn escape(&self, i: usize, out: &mut Vec<u8>) -> Result<usize, &'static str> {
        let simple = match self.peek(i + 1) {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => return self.unicode(i, out),
            _ => return Err("invalid escape code"),
        };
        out.push(simple);
        Ok(i + 2)
    }

    fn hex4(&self, i: usize) -> Option<u32> {
        let digits = self.text.get(i..i + 4)?;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(text, 16).ok()
    }

    /// `\uXXXX` (and a surrogate pair's second half) at `i` as UTF-8.
    fn unicode(&self, i: usize, out: &mut Vec<u8>) -> Result<usize, &'static str> {
        const BAD: &str = "invalid unicode escape code";
        let first = self.hex4(i + 2).ok_or(BAD)?;
        let (code, next) = match first {
            0xdc00..=0xdfff => return Err(BAD),
            0xd800..=0xdbff => {
                if self.peek(i + 6) != b'\\' || self.peek(i + 7) != b'u' {
                    return Err(BAD);
                }
                let low = self.hex4(i + 8).ok_or(BAD)?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return Err(BAD);
                }
                (0x10000 + ((first - 0xd800) << 10) + (low - 0xdc00), i + 12)
            }
            _ => (first, i + 6),
        };
        let c = char::from_u32(code).ok_or(BAD)?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        Ok(next)
    }

    fn table(&self) -> Result<Table, String> {
        self.lua.create_table().map_err(|e| e.to_string())
    }

    fn enter(&mut self, bracket_at: usize) -> Result<(), String> {
        self.depth += 1;
        if self.depth > self.options.max_depth {
            return Err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                bracket_at + 1
            ));
        }
        Ok(())
    }

    /// An object's key (`token`) and the colon after it.
    fn key(&mut self, token: Token) -> Result<LuaString, String> {
        let Kind::Str(key) = token.kind else {
            return Err(expected("object key string", &token));
        };
        let colon = self.token();
        if !matches!(colon.kind, Kind::Colon) {
            return Err(expected("colon", &colon));
        }
        self.lua.create_string(&key).map_err(|e| e.to_string())
    }

    /// The value starting with `token`: iterative (a script runs on a user-level thread's
    /// small stack), its open containers on a stack of at most `max_depth`. Bounded by the
    /// text: each pass takes at least one token.
    fn value(&mut self, mut token: Token) -> Result<Value, String> {
        let mut open: Vec<Open> = Vec::new();
        loop {
            let value = match token.kind {
                Kind::Str(bytes) => {
                    Value::String(self.lua.create_string(&bytes).map_err(|e| e.to_string())?)
                }
                Kind::Number(x) => Value::Number(x),
                Kind::Boolean(b) => Value::Boolean(b),
                Kind::Null => null(),
                Kind::ObjBegin => {
                    self.enter(token.at)?;
                    let t = self.table()?;
                    let first = self.token();
                    if matches!(first.kind, Kind::ObjEnd) {
                        self.depth -= 1;
                        Value::Table(t)
                    } else {
                        let key = self.key(first)?;
                        open.push(Open::Object(t, key));
                        token = self.token();
                        continue;
                    }
                }
                Kind::ArrBegin => {
                    self.enter(token.at)?;
                    let t = self.table()?;
                    let first = self.token();
                    if matches!(first.kind, Kind::ArrEnd) {
                        self.depth -= 1;
                        Value::Table(t)
                    } else {
                        open.push(Open::Array(t, 1));
                        token = first;
                        continue;
                    }
                }
                _ => return Err(expected("value", &token)),
            };
            match self.attach(&mut open, value)? {
                Attached::Done(value) => return Ok(value),
                Attached::Next(next) => token = next,
            }
        }
    }

    /// Puts a whole value into its container, closing those that end after it: the value
    /// when none is left open, else the token of the next value. Bounded by the open
    /// containers.
    fn attach(&mut self, open: &mut Vec<Open>, mut value: Value) -> Result<Attached, String> {
        loop {
            let Some(top) = open.last_mut() else {
                return Ok(Attached::Done(value));
            };
            let next = match top {
                Open::Array(t, i) => {
                    t.raw_set(*i, value).map_err(|e| e.to_string())?;
                    *i += 1;
                    let next = self.token();
                    match next.kind {
                        Kind::ArrEnd => None,
                        Kind::Comma => Some(self.token()),
                        _ => return Err(expected("comma or array end", &next)),
                    }
                }
                Open::Object(t, key) => {
                    t.raw_set(key.clone(), value).map_err(|e| e.to_string())?;
                    let next = self.token();
                    match next.kind {
                        Kind::ObjEnd => None,
                        Kind::Comma => {
                            let k = self.token();
                            *key = self.key(k)?;
                            Some(self.token())
                        }
                        _ => return Err(expected("comma or object end", &next)),
                    }
                }
            };
            if let Some(token) = next {
                return Ok(Attached::Next(token));
            }
            self.depth -= 1;
            value = match open.pop() {
                Some(Open::Array(t, _) | Open::Object(t, _)) => Value::Table(t),
                None => unreachable!("a container was open"),
            };
        }
    }
}

/// What [`Decoder::attach`] left: the whole text's value, or the next value's token.
enum Attached {
    Done(Value),
    Next(Token),
}

/// A container the decoder is inside: an array and its next index, or an object and the key
/// of the value it waits for.
enum Open {
    Array(Table, i64),
    Object(Table, LuaString),
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENCODE: EncodeOptions = EncodeOptions {
        precision: 14,
        max_depth: 1000,
        sparse_convert: false,
        sparse_ratio: 2,
        sparse_safe: 10,
        invalid_numbers: 0,
    };
    const DECODE: DecodeOptions = DecodeOptions {
        max_depth: 1000,
        invalid_numbers: true,
    };

    fn round_trip(lua: &Lua, text: &str) -> Result<String, String> {
        let v = decode(lua, text.as_bytes(), DECODE)?;
        encode(&v, ENCODE).map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Mutation caught: `/` left unescaped, an empty table as `[]`, a null lost, numbers in
    /// another precision.
    #[test]
    fn values_encode_as_lua_cjson_writes_them() {
        let lua = Lua::new();
        assert_eq!(
            round_trip(&lua, r#"[1.5,2e10,"\u00e9/",null,{},true]"#).unwrap(),
            "[1.5,20000000000,\"\u{e9}\\/\",null,{},true]"
        );
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(1e-5, 14), "1e-05");
        assert_eq!(format_g(-0.0, 14), "-0");
    }

    /// Mutation caught: an error text or its position off by one.
    #[test]
    fn syntax_errors_name_what_and_where() {
        let lua = Lua::new();
        for (text, want) in [
            ("", "Expected value but found T_END at character 1"),
            (
                "[1,2",
                "Expected comma or array end but found T_END at character 5",
            ),
            ("[1,]", "Expected value but found T_ARR_END at character 4"),
            (
                "{\"a\" 1}",
                "Expected colon but found T_NUMBER at character 6",
            ),
            (
                "{1:2}",
                "Expected object key string but found T_NUMBER at character 2",
            ),
            (
                "1e",
                "Expected the end but found invalid token at character 2",
            ),
            (
                "\"abc",
                "Expected value but found unexpected end of string at character 5",
            ),
            (
                "\"\\x\"",
                "Expected value but found invalid escape code at character 2",
            ),
            (
                "\"\\uD83D\"",
                "Expected value but found invalid unicode escape code at character 2",
            ),
            ("2 3", "Expected the end but found T_NUMBER at character 3"),
        ] {
            assert_eq!(
                decode(&lua, text.as_bytes(), DECODE).unwrap_err(),
                want,
                "{text}"
            );
        }
        let deep = "[".repeat(1001);
        assert_eq!(
            decode(&lua, deep.as_bytes(), DECODE).unwrap_err(),
            "Found too many nested data structures (1001) at character 1001"
        );
    }

    /// Mutation caught: a sparse array written with a million nulls, or a self-holding
    /// table encoded without end.
    #[test]
    fn sparse_and_deep_tables_are_refused() {
        let lua = Lua::new();
        let t: Table = lua.load("return {[11]=1}").eval().unwrap();
        assert_eq!(
            encode(&Value::Table(t), ENCODE).unwrap_err(),
            "Cannot serialise table: excessively sparse array"
        );
        let t: Table = lua.load("local t = {} t[1] = t return t").eval().unwrap();
        assert_eq!(
            encode(&Value::Table(t), ENCODE).unwrap_err(),
            "Cannot serialise, excessive nesting (1001)"
        );
    }
}
