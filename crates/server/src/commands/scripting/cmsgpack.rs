//! The `cmsgpack` library's packer and unpacker (lua-cmsgpack 0.4.0 as Redis 7.0 bundles
//! it), as primitives the sandbox's `cmsgpack` table calls (`prelude.lua` checks the
//! arguments and raises the errors these return at the script's line).
//!
//! Packing: integers in their smallest form, other numbers as a float when it holds them
//! exactly, else a double; strings in the str family; a table whose keys are exactly 1..n an
//! array, else a map in `next` order; past 16 nested tables, and for what msgpack cannot
//! hold (functions, userdata), nil. Unpacking reads every format but bin and ext, iteratively
//! (a script runs on a user-level thread's small stack). Bounds: [`RESULTS_MAX`] values per
//! call, as Redis's Lua stack allows.

use mlua::{Lua, Table, Value};

/// Tables nested deeper than this pack as nil.
const LEVELS_MAX: usize = 16;
/// Most values one unpack returns (Redis's Lua stack refuses more).
pub const RESULTS_MAX: usize = 7_999;

/// `cmsgpack.pack(v1, ...)`: each value's bytes, concatenated.
pub fn pack(values: &[Value]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for v in values {
        pack_value(v, 0, &mut out)?;
    }
    Ok(out)
}

fn pack_value(v: &Value, level: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => pack_number(*n as f64, out),
        Value::Number(x) => pack_number(*x, out),
        Value::String(s) => pack_string(&s.as_bytes(), out),
        Value::Table(t) if level < LEVELS_MAX => pack_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack_number(x: f64, out: &mut Vec<u8>) {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x.floor() == x && (-TWO_63..TWO_63).contains(&x) {
        return pack_integer(x as i64, out);
    }
    let single = x as f32;
    if f64::from(single) == x {
        out.push(0xca);
        out.extend_from_slice(&single.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&x.to_be_bytes());
    }
}

fn pack_integer(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        match n {
            0..=0x7f => out.push(n as u8),
            0x80..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        return;
    }
    match n {
        -32..=-1 => out.push(n as i8 as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, n as i8 as u8]),
        -32_768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        }
        -2_147_483_648..=-32_769 => {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn pack_string(s: &[u8], out: &mut Vec<u8>) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// A header of `n` items: fix form (`fix | n` up to 15), else 16 or 32 bits.
fn pack_header(n: usize, fix: u8, wide: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(wide);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn pack_table(t: &Table, level: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let pairs = t
        .clone()
        .pairs::<Value, Value>()
        .collect::<mlua::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let mut max = 0f64;
    let array = pairs.iter().all(|(k, _)| {
        let k = match k {
            Value::Integer(n) => *n as f64,
            Value::Number(x) => *x,
            _ => return false,
        };
        max = max.max(k);
        k.floor() == k && k > 0.0 && k <= f64::from(i32::MAX)
    }) && max == pairs.len() as f64;
    if array {
        pack_header(pairs.len(), 0x90, 0xdc, out);
        for i in 1..=pairs.len() {
            let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
            pack_value(&v, level + 1, out)?;
        }
    } else {
        pack_header(pairs.len(), 0x80, 0xde, out);
        for (k, v) in &pairs {
            pack_value(k, level + 1, out)?;
            pack_value(v, level + 1, out)?;
        }
    }
    Ok(())
}

/// An unpack's failure: its message, and whether it names the script's line (the library's
/// own errors do; Lua's "table index is nil" does not).
#[derive(Debug, PartialEq, Eq)]
pub struct UnpackError {
    pub message: String,
    pub positioned: bool,
}

fn library_error(message: &str) -> UnpackError {
    UnpackError {
        message: message.to_string(),
        positioned: true,
    }
}

const MISSING: &str = "Missing bytes in input.";

/// What one unpack call returns: the next offset (`None` when it unpacked everything, as
/// `unpack` and `unpack_limit(s, 0)` do; -1 at the end of the input) and the values.
pub struct Unpacked {
    pub next_offset: Option<i64>,
    pub values: Vec<Value>,
}

/// `unpack_limit(s, limit, offset)` (and `unpack`: limit 0, offset 0; `unpack_one`: limit 1).
pub fn unpack(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> Result<Unpacked, UnpackError> {
    let len = s.len() as i64;
    if offset < 0 || limit < 0 {
        return Err(library_error(&format!(
            "Invalid request to unpack with offset of {offset} and limit of {len}."
        )));
    }
    if offset > len {
        return Err(library_error(&format!(
            "Start offset {offset} greater than input length {len}."
        )));
    }
    let everything = limit == 0 && offset == 0;
    let mut r = Reader {
        lua,
        s,
        at: offset as usize,
    };
    let mut values = Vec::new();
    // Bounded by the input: each value takes at least one byte.
    while r.at < s.len() && (everything || (values.len() as i64) < limit) {
        if values.len() >= RESULTS_MAX {
            return Err(library_error(
                "stack overflow (too many return values at once; use unpack_one or \
                 unpack_limit instead.)",
            ));
        }
        values.push(r.value()?);
    }
    let next_offset = if everything {
        None
    } else if r.at >= s.len() {
        Some(-1)
    } else {
        Some(r.at as i64)
    };
    Ok(Unpacked {
        next_offset,
        values,
    })
}

/// A container being filled: an array's next index and size, or a map's pairs left and the
/// key read for the value to come.
enum Open {
    Array(Table, u64, u64),
    Map(Table, u64, Option<Value>),
}

/// What one header read: a whole value, or a container of `n` items.
enum Header {
    Value(Value),
    Array(u64),
    Map(u64),
}

struct Reader<'l, 's> {
    lua: &'l Lua,
    s: &'s [u8],
    at: usize,
}

impl Reader<'_, '_> {
    fn take(&mut self, n: usize) -> Result<&[u8], UnpackError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.s.len());
        let end = end.ok_or_else(|| library_error(MISSING))?;
        let bytes = &self.s[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn uint(&mut self, n: usize) -> Result<u64, UnpackError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn string(&mut self, n: usize) -> Result<Value, UnpackError> {
        let bytes = self.take(n)?.to_vec();
        let s = self.lua.create_string(&bytes).map_err(lua_error)?;
        Ok(Value::String(s))
    }

    fn header(&mut self) -> Result<Header, UnpackError> {
        let b = self.take(1)?[0];
        let number = |x: f64| Ok(Header::Value(Value::Number(x)));
        match b {
            0x00..=0x7f => number(f64::from(b)),
            0x80..=0x8f => Ok(Header::Map(u64::from(b & 0x0f))),
            0x90..=0x9f => Ok(Header::Array(u64::from(b & 0x0f))),
            0xa0..=0xbf => self.string(usize::from(b & 0x1f)).map(Header::Value),
            0xc0 => Ok(Header::Value(Value::Nil)),
            0xc2 => Ok(Header::Value(Value::Boolean(false))),
            0xc3 => Ok(Header::Value(Value::Boolean(true))),
            0xca => number(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => number(f64::from_bits(self.uint(8)?)),
            0xcc => number(self.uint(1)? as f64),
            0xcd => number(self.uint(2)? as f64),
            0xce => number(self.uint(4)? as f64),
            0xcf | 0xd3 => number(self.uint(8)? as i64 as f64),
            0xd0 => number(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => number(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => number(f64::from(self.uint(4)? as u32 as i32)),
            0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(n).map(Header::Value)
            }
            0xda => {
                let n = self.uint(2)? as usize;
                self.string(n).map(Header::Value)
            }
            0xdb => {
                let n = self.uint(4)? as usize;
                self.string(n).map(Header::Value)
            }
            0xdc => Ok(Header::Array(self.uint(2)?)),
            0xdd => Ok(Header::Array(self.uint(4)?)),
            0xde => Ok(Header::Map(self.uint(2)?)),
            0xdf => Ok(Header::Map(self.uint(4)?)),
            0xe0..=0xff => number(f64::from(b as i8)),
            _ => Err(library_error("Bad data format in input.")),
        }
    }

    /// One whole value. Bounded by the input: each pass reads a header.
    fn value(&mut self) -> Result<Value, UnpackError> {
        let mut open: Vec<Open> = Vec::new();
        loop {
            let value = match self.header()? {
                Header::Value(v) => v,
                Header::Array(0) | Header::Map(0) => Value::Table(self.table()?),
                Header::Array(n) => {
                    open.push(Open::Array(self.table()?, 1, n));
                    continue;
                }
                Header::Map(n) => {
                    open.push(Open::Map(self.table()?, n, None));
                    continue;
                }
            };
            if let Some(done) = attach(&mut open, value)? {
                return Ok(done);
            }
        }
    }

    fn table(&self) -> Result<Table, UnpackError> {
        self.lua.create_table().map_err(lua_error)
    }
}

fn lua_error(e: mlua::Error) -> UnpackError {
    UnpackError {
        message: e.to_string(),
        positioned: false,
    }
}

/// Puts `value` into its container, closing those it fills: the whole value once none is
/// left open. Bounded by the open containers.
fn attach(open: &mut Vec<Open>, mut value: Value) -> Result<Option<Value>, UnpackError> {
    loop {
        let full = match open.last_mut() {
            None => return Ok(Some(value)),
            Some(Open::Array(t, next, n)) => {
                t.raw_set(*next, value).map_err(lua_error)?;
                *next += 1;
                *next > *n
            }
            Some(Open::Map(_, _, key @ None)) => {
                *key = Some(value);
                false
            }
            Some(Open::Map(t, left, key)) => {
                let k = key.take().expect("matched above");
                match k {
                    Value::Nil => return Err(core_error("table index is nil")),
                    Value::Number(x) if x.is_nan() => return Err(core_error("table index is NaN")),
                    _ => {}
                }
                t.raw_set(k, value).map_err(lua_error)?;
                *left -= 1;
                *left == 0
            }
        };
        if !full {
            return Ok(None);
        }
        value = match open.pop() {
            Some(Open::Array(t, ..) | Open::Map(t, ..)) => Value::Table(t),
            None => unreachable!("a container was open"),
        };
    }
}

fn core_error(message: &str) -> UnpackError {
    UnpackError {
        message: message.to_string(),
        positioned: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(values: &[Value]) -> String {
        pack(values)
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Mutation caught: a wider form than needed, or a float that should be a double.
    #[test]
    fn numbers_take_their_smallest_form() {
        let n = |x: f64| hex(&[Value::Number(x)]);
        assert_eq!(n(127.0), "7f");
        assert_eq!(n(128.0), "cc80");
        assert_eq!(n(-33.0), "d0df");
        assert_eq!(n(-2f64.powi(31) - 1.0), "d3ffffffff7fffffff");
        assert_eq!(n(2f64.powi(63)), "ca5f000000");
        assert_eq!(n(0.1), "cb3fb999999999999a");
        assert_eq!(n(-0.0), "00");
    }

    /// Mutation caught: a truncated input read past its end, or a bin type accepted.
    #[test]
    fn bad_input_is_refused_with_its_message() {
        let lua = Lua::new();
        for (bytes, want) in [
            (&b"\x92\x01"[..], MISSING),
            (b"\xcd\x01", MISSING),
            (b"\xc4\x01a", "Bad data format in input."),
        ] {
            let e = unpack(&lua, bytes, 0, 0).err().unwrap();
            assert_eq!(e.message, want);
        }
        let e = unpack(&lua, b"\x81\xc0\x01", 0, 0).err().unwrap();
        assert_eq!(e.message, "table index is nil");
        assert!(!e.positioned);
    }
}
