//! Redis's serialized payloads (`DUMP`, `FUNCTION DUMP`): RDB-encoded values followed by the
//! RDB version (2 bytes, little-endian) and a CRC-64 (Jones, reflected; 8 bytes,
//! little-endian) of everything before it.
//!
//! ```text
//! FUNCTION DUMP   per library: [0xF5 (RDB_OPCODE_FUNCTION2)][RDB string: its code]
//!                 then [RDB version u16 LE][CRC-64 u64 LE]
//! RDB string      [length][bytes], or [0xC0|0xC1|0xC2][integer LE] (8, 16, 32 bits),
//!                 or [0xC3][compressed length][length][LZF bytes]
//! RDB length      00xxxxxx | 01xxxxxx xxxxxxxx (BE) | 0x80 [u32 BE] | 0x81 [u64 BE]
//! ```

/// The RDB version tamer writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The opcode before each library in a functions payload.
const OPCODE_FUNCTION2: u8 = 245;
/// The opcode of Redis 7.0's release candidates' library format (refused, as Redis does).
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
/// Most bytes a compressed RDB string may expand to (a library's code: a request's bound).
const STRING_BYTES_MAX: usize = 512 << 20;

const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";

/// CRC-64 as Redis computes it (`crc64.c`: Jones polynomial, reflected, no final xor).
pub fn crc64(mut crc: u64, bytes: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 reflected
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Appends an RDB length.
fn put_length(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends `bytes` as an RDB string, uncompressed (any reader takes it).
fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_length(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends the version and the checksum that end a payload.
fn seal(mut out: Vec<u8>) -> Vec<u8> {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// `FUNCTION DUMP`'s payload of the libraries' `codes`.
pub fn functions_payload(codes: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_string(&mut out, code);
    }
    seal(out)
}

/// The body of a payload whose version and checksum hold (Redis's `verifyDumpPayload`).
fn verified(payload: &[u8]) -> Result<&[u8], &'static str> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(BAD_PAYLOAD);
    };
    let version = u16::from_le_bytes([payload[body_len], payload[body_len + 1]]);
    if version > RDB_VERSION {
        return Err(BAD_PAYLOAD);
    }
    let crc = u64::from_le_bytes(payload[body_len + 2..].try_into().expect("8 bytes"));
    if crc64(0, &payload[..body_len + 2]) != crc {
        return Err(BAD_PAYLOAD);
    }
    Ok(&payload[..body_len])
}

/// A reader of RDB-encoded bytes.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A length, or the special encoding's number (`Err`).
    fn length(&mut self) -> Option<Result<u64, u8>> {
        let first = self.byte()?;
        Some(match first >> 6 {
            0 => Ok(u64::from(first & 0x3f)),
            1 => Ok(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 if first == 0x80 => Ok(u64::from(u32::from_be_bytes(
                self.take(4)?.try_into().ok()?,
            ))),
            2 if first == 0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().ok()?)),
            2 => return None,
            _ => Err(first & 0x3f),
        })
    }

    fn plain_length(&mut self) -> Option<usize> {
        usize::try_from(self.length()?.ok()?).ok()
    }

    /// An RDB string (integer encodings as their decimal text, LZF expanded).
    fn string(&mut self) -> Option<Vec<u8>> {
        match self.length()? {
            Ok(n) => Some(self.take(usize::try_from(n).ok()?)?.to_vec()),
            Err(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => Some(
                i16::from_le_bytes(self.take(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(2) => Some(
                i32::from_le_bytes(self.take(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            Err(3) => {
                let compressed = self.plain_length()?;
                let len = self.plain_length()?;
                if len > STRING_BYTES_MAX {
                    return None;
                }
                lzf_decompress(self.take(compressed)?, len)
            }
            Err(_) => None,
        }
    }
}

/// LZF (liblzf's format, as Redis compresses RDB strings): exactly `len` bytes, or `None`.
pub fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    let mut i = 0;
    // Bounded: every pass consumes at least one input byte.
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = input.get(i..i + ctrl + 1)?;
            out.extend_from_slice(run);
            i += ctrl + 1;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*input.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            let from = out.len().checked_sub(back)?;
            for k in 0..n + 2 {
                let b = out[from + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// The libraries' codes of a `FUNCTION DUMP` payload: `Err` is the reply.
pub fn functions_from_payload(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let mut r = Reader {
        bytes: verified(payload)?,
    };
    let mut codes = Vec::new();
    // Bounded by the payload: every pass consumes its opcode and string.
    while let Some(opcode) = r.byte() {
        match opcode {
            OPCODE_FUNCTION2 => {}
            OPCODE_FUNCTION_PRE_GA => return Err("ERR Pre-GA function format not supported"),
            _ => return Err("ERR given type is not a function"),
        }
        codes.push(r.string().ok_or("ERR Failed loading library payload")?);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutation caught: another CRC-64 variant (the check value of "123456789" is Redis's).
    #[test]
    fn crc64_is_redis_s() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    /// Mutations caught: a length encoding misread, the payload's trailer checked wrongly,
    /// LZF back references off by one.
    #[test]
    fn payloads_round_trip_and_damage_is_refused() {
        let long = vec![b'x'; 20_000];
        let codes: Vec<&[u8]> = vec![b"#!lua name=a\n", &long];
        let payload = functions_payload(&codes);
        assert_eq!(
            functions_from_payload(&payload).unwrap(),
            vec![codes[0].to_vec(), long.clone()]
        );
        let mut bad = payload.clone();
        bad[3] ^= 1;
        assert_eq!(functions_from_payload(&bad), Err(BAD_PAYLOAD));
        // "aaaaaaaaaa": a literal then a back reference of 7 + 2 from 1 byte back.
        assert_eq!(
            lzf_decompress(&[0, b'a', 0xe0, 0, 0], 10),
            Some(b"aaaaaaaaaa".to_vec())
        );
        assert_eq!(lzf_decompress(&[0, b'a', 0xe0, 0, 1], 10), None);
    }
}
