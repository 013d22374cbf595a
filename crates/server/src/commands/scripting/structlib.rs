//! The `struct` library (Roberto Ierusalimschy's struct 1.7 as Redis 7.0 bundles and patches
//! it): `pack`, `unpack` and `size` over a format of options (`b B h H l L T i[n] I[n] f d
//! c[n] s x`, `<` `>` `!n` and spaces), little-endian and unaligned by default, with x86-64
//! Linux's sizes. Primitives the sandbox's `struct` table calls; errors come back as their
//! full text (`bad argument #n to 'fn' (...)` or the library's own), raised at the script's
//! line by `prelude.lua`.

use mlua::{Lua, Value};

/// The native alignment `!` alone sets, and the widest integer option.
const NATIVE_ALIGN: usize = 8;
const INT_BYTES_MAX: usize = 32;

/// The format's state: byte order and the most alignment.
struct Header {
    little: bool,
    align: usize,
}

/// The format being read, and the function it is for (its errors name it).
struct Format<'a> {
    text: &'a [u8],
    at: usize,
    fname: &'static str,
}

fn arg_error(fname: &str, n: usize, text: &str) -> String {
    format!("bad argument #{n} to '{fname}' ({text})")
}

impl Format<'_> {
    /// A decimal count after an option (`default` without one).
    fn number(&mut self, default: usize) -> Result<usize, String> {
        if !self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut n: u64 = 0;
        while let Some(d) = self.text.get(self.at).filter(|b| b.is_ascii_digit()) {
            n = n * 10 + u64::from(d - b'0');
            if n > i32::MAX as u64 {
                return Err("integral size overflow".into());
            }
            self.at += 1;
        }
        Ok(n as usize)
    }

    /// The size of option `opt` (reading its count).
    fn size(&mut self, opt: u8) -> Result<usize, String> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > INT_BYTES_MAX {
                    return Err(format!(
                        "integral size {n} is larger than limit of {INT_BYTES_MAX}"
                    ));
                }
                n
            }
            _ => 0,
        })
    }

    /// A control option (byte order, alignment, space), else an invalid one.
    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), String> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.number(NATIVE_ALIGN)?;
                if a == 0 || !a.is_power_of_two() {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
            }
            _ => {
                let text = format!("invalid format option '{}'", opt as char);
                return Err(arg_error(self.fname, 1, &text));
            }
        }
        Ok(())
    }

    fn next(&mut self) -> Option<u8> {
        let opt = self.text.get(self.at).copied();
        self.at += 1;
        opt
    }
}

/// Padding before an option of `size` at `pos` (none for `c` and zero sizes).
fn padding(pos: u64, h: &Header, opt: u8, size: usize) -> u64 {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let a = size.min(h.align) as u64;
    (a.wrapping_sub(pos & a.wrapping_sub(1))) & a.wrapping_sub(1)
}

fn is_integer_option(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

/// Lua's name of an argument's type (a missing one reads as nil: struct set the stack's top).
fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "nil",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// Lua's conversion of a string to a number (`lua_tonumber`): decimal as `strtod` reads it,
/// or hex, with spaces around.
fn str_number(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?.trim();
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|n| n as f64);
    }
    let c = std::ffi::CString::new(text).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is NUL-terminated and lives across the call; `end` points into it.
    let x = unsafe { libc::strtod(c.as_ptr(), &mut end) };
    let used = (end as usize).saturating_sub(c.as_ptr() as usize);
    (used > 0 && used == text.len()).then_some(x)
}

fn as_number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(x) => Some(*x),
        Value::String(s) => str_number(&s.as_bytes()),
        _ => None,
    }
}

fn as_bytes(v: Option<&Value>) -> Option<Vec<u8>> {
    match v? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(n) => Some(n.to_string().into_bytes()),
        Value::Number(x) => Some(super::cjson::format_g(*x, 14).into_bytes()),
        _ => None,
    }
}

/// `struct.pack(fmt, ...)`; `args` are the values after the format (argument 2 on).
pub fn pack(fmt: &[u8], args: &[Value]) -> Result<Vec<u8>, String> {
    let mut f = Format {
        text: fmt,
        at: 0,
        fname: "pack",
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut out = Vec::new();
    let mut arg = 0usize;
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = padding(out.len() as u64, &h, opt, size);
        out.resize(out.len() + pad as usize, 0);
        let number = |arg: usize| {
            as_number(args.get(arg)).ok_or_else(|| {
                let got = format!("number expected, got {}", type_name(args.get(arg)));
                arg_error("pack", arg + 2, &got)
            })
        };
        match opt {
            _ if is_integer_option(opt) => {
                let x = number(arg)?;
                arg += 1;
                put_integer(x, h.little, size, &mut out);
            }
            b'x' => out.push(0),
            b'f' => {
                let x = number(arg)? as f32;
                arg += 1;
                put_bytes(&x.to_le_bytes(), h.little, &mut out);
            }
            b'd' => {
                let x = number(arg)?;
                arg += 1;
                put_bytes(&x.to_le_bytes(), h.little, &mut out);
            }
            b'c' | b's' => {
                let s = as_bytes(args.get(arg)).ok_or_else(|| {
                    let got = format!("string expected, got {}", type_name(args.get(arg)));
                    arg_error("pack", arg + 2, &got)
                })?;
                arg += 1;
                if opt == b'c' && size == 0 {
                    size = s.len();
                }
                if opt == b'c' {
                    if s.len() < size {
                        // Redis's struct names the argument after the string.
                        return Err(arg_error("pack", arg + 2, "string too short"));
                    }
                    out.extend_from_slice(&s[..size]);
                } else {
                    out.extend_from_slice(&s);
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h)?,
        }
    }
    Ok(out)
}

/// `x` as struct writes an integer of `size` bytes: its 64 bits (a negative one through a C
/// `long`), least significant byte first, zeros past the eighth.
fn put_integer(x: f64, little: bool, size: usize, out: &mut Vec<u8>) {
    let mut value = if x < 0.0 { x as i64 as u64 } else { x as u64 };
    let mut bytes = Vec::with_capacity(size);
    for _ in 0..size {
        bytes.push((value & 0xff) as u8);
        value = value.checked_shr(8).unwrap_or(0);
    }
    put_bytes(&bytes, little, out);
}

/// Little-endian `bytes` in the format's order.
fn put_bytes(bytes: &[u8], little: bool, out: &mut Vec<u8>) {
    if little {
        out.extend_from_slice(bytes);
    } else {
        out.extend(bytes.iter().rev());
    }
}

/// `struct.unpack(fmt, data, init)`: the values and the next position (1-based).
pub fn unpack(lua: &Lua, fmt: &[u8], data: &[u8], init: i64) -> Result<Vec<Value>, String> {
    if init == 0 {
        return Err(arg_error("unpack", 3, "offset must be 1 or greater"));
    }
    let mut f = Format {
        text: fmt,
        at: 0,
        fname: "unpack",
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    // As a C size_t: a negative start wraps (and then fails the length checks).
    let mut pos = (init as u64).wrapping_sub(1);
    let len = data.len() as u64;
    let too_short = || arg_error("unpack", 2, "data string too short");
    let mut values: Vec<Value> = Vec::new();
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos = pos.wrapping_add(padding(pos, &h, opt, size));
        let fits = |pos: u64, size: usize| pos.checked_add(size as u64).is_some_and(|e| e <= len);
        if !fits(pos, size) {
            return Err(too_short());
        }
        let at = pos as usize;
        match opt {
            _ if is_integer_option(opt) => {
                let signed = opt.is_ascii_lowercase();
                values.push(Value::Number(get_integer(
                    &data[at..at + size],
                    h.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let b = ordered::<4>(&data[at..at + 4], h.little);
                values.push(Value::Number(f64::from(f32::from_le_bytes(b))));
            }
            b'd' => {
                let b = ordered::<8>(&data[at..at + 8], h.little);
                values.push(Value::Number(f64::from_le_bytes(b)));
            }
            b'c' => size = unpack_chars(lua, data, pos, size, &mut values)?,
            b's' => size = unpack_string(lua, &data[at..], &mut values)?,
            _ => f.control(opt, &mut h)?,
        }
        pos = pos.wrapping_add(size as u64);
    }
    values.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(values)
}

/// `c[n]` at `pos`: `n` bytes (for `c0`, as many as the previous value says, which it takes
/// from the values); the bytes it took.
fn unpack_chars(
    lua: &Lua,
    data: &[u8],
    pos: u64,
    mut size: usize,
    values: &mut Vec<Value>,
) -> Result<usize, String> {
    if size == 0 {
        let n = values.last().and_then(|v| as_number(Some(v)));
        let Some(n) = n else {
            return Err("format 'c0' needs a previous size".into());
        };
        values.pop();
        size = n as usize;
        if pos
            .checked_add(size as u64)
            .is_none_or(|e| e > data.len() as u64)
        {
            return Err(arg_error("unpack", 2, "data string too short"));
        }
    }
    let at = pos as usize;
    let s = lua
        .create_string(&data[at..at + size])
        .map_err(|e| e.to_string())?;
    values.push(Value::String(s));
    Ok(size)
}

/// `s`: the bytes of `rest` up to its first NUL; the bytes it took, the NUL included.
fn unpack_string(lua: &Lua, rest: &[u8], values: &mut Vec<Value>) -> Result<usize, String> {
    let Some(nul) = rest.iter().position(|&b| b == 0) else {
        return Err("unfinished string in data".into());
    };
    let s = lua.create_string(&rest[..nul]).map_err(|e| e.to_string())?;
    values.push(Value::String(s));
    Ok(nul + 1)
}

/// `N` bytes as little-endian, from the format's order.
fn ordered<const N: usize>(bytes: &[u8], little: bool) -> [u8; N] {
    let mut b: [u8; N] = bytes.try_into().expect("N bytes");
    if !little {
        b.reverse();
    }
    b
}

/// An integer of `bytes` (the last eight read survive), sign-extended as struct does (its
/// mask's shift wraps at 64, as x86 does).
fn get_integer(bytes: &[u8], little: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let n = bytes.len();
    for i in 0..n {
        let b = if little { bytes[n - 1 - i] } else { bytes[i] };
        l = (l << 8) | u64::from(b);
    }
    if !signed {
        return l as f64;
    }
    let shift = ((n as i64 * 8 - 1) & 63) as u32;
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

/// `struct.size(fmt)`.
pub fn size(fmt: &[u8]) -> Result<i64, String> {
    let mut f = Format {
        text: fmt,
        at: 0,
        fname: "size",
    };
    let mut h = Header {
        little: true,
        align: 1,
    };
    let mut pos: u64 = 0;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos += padding(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error("size", 1, "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error("size", 1, "option 'c0' has no fixed size"));
        }
        // Only punctuation is a control option here: an unknown letter or digit counts 0.
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos += size as u64;
    }
    Ok(pos as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(x: f64) -> Value {
        Value::Number(x)
    }

    /// Mutation caught: padding computed from the wrong position, or big-endian ignored.
    #[test]
    fn pack_aligns_and_orders_as_struct_does() {
        assert_eq!(
            pack(b"!4 b i", &[n(1.0), n(2.0)]).unwrap(),
            [1, 0, 0, 0, 2, 0, 0, 0]
        );
        assert_eq!(pack(b">H<H", &[n(258.0), n(258.0)]).unwrap(), [1, 2, 2, 1]);
        assert_eq!(
            pack(b"c4", &[]).unwrap_err(),
            "bad argument #2 to 'pack' (string expected, got nil)"
        );
        assert_eq!(size(b"!4 b i !1 b i").unwrap(), 13);
        assert_eq!(size(b"z").unwrap(), 0);
    }

    /// Mutation caught: no sign extension, or the next position off by one.
    #[test]
    fn unpack_returns_values_then_the_next_position() {
        let lua = Lua::new();
        let v = unpack(&lua, b"b b b", &[0xff, 0x80, 0x7f], 1).unwrap();
        let nums: Vec<f64> = v
            .iter()
            .map(|v| match v {
                Value::Number(x) => *x,
                _ => f64::NAN,
            })
            .collect();
        assert_eq!(nums, [-1.0, -128.0, 127.0, 4.0]);
    }
}
