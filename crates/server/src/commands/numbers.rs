//! Numbers as Redis 7.0 reads, adds and prints them, with its C library calls (`strtod`,
//! `strtold`, `snprintf`): `INCRBYFLOAT` and `HINCRBYFLOAT`'s `long double` sum, sorted set
//! scores, weights and timeouts read as doubles, and doubles printed as `%.17g`.

/// Bytes `INCRBYFLOAT`'s result may take (Redis's `MAX_LONG_DOUBLE_CHARS`).
const MAX_FLOAT_CHARS: usize = 5 * 1024;

extern "C" {
    /// `csrc/long_double.c`: Redis 7.0's `long double` parse, sum and print.
    fn tamer_incrbyfloat(
        current: *const u8,
        current_len: usize,
        incr: *const u8,
        incr_len: usize,
        out: *mut u8,
        out_len: *mut usize,
    ) -> i32;
}

/// Why [`add_floats`] failed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FloatError {
    /// The current value or the increment is no float.
    NotFloat,
    /// The sum is NaN or infinite.
    NanOrInfinity,
}

/// `current` (`None`: absent, 0) plus `incr` as Redis 7.0 computes it: both parsed as `long
/// double` by `strtold` (Redis's `string2ld` checks), added, printed with `%.17Lf` and its
/// trailing zeros trimmed, in C (`csrc/long_double.c`), since Rust has no `long double`.
pub(super) fn add_floats(current: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, FloatError> {
    let mut out = vec![0u8; MAX_FLOAT_CHARS];
    let mut len = 0usize;
    let (cur_ptr, cur_len) = current.map_or((std::ptr::null(), 0), |c| (c.as_ptr(), c.len()));
    // SAFETY: the pointers and lengths describe live slices; `out` has the
    // MAX_LONG_DOUBLE_CHARS bytes the C writes at most, and `len` is a valid out-pointer.
    let status = unsafe {
        tamer_incrbyfloat(
            cur_ptr,
            cur_len,
            incr.as_ptr(),
            incr.len(),
            out.as_mut_ptr(),
            &mut len,
        )
    };
    match status {
        0 => {
            assert!(len < MAX_FLOAT_CHARS, "the C writes within its buffer");
            out.truncate(len);
            Ok(out)
        }
        1 => Err(FloatError::NotFloat),
        _ => Err(FloatError::NanOrInfinity),
    }
}

/// A double as Redis reads a score, a weight or a timeout (`strtod`, whole string, no
/// leading space, no overflow or underflow, not NaN).
pub(super) fn parse_double(arg: &[u8]) -> Option<f64> {
    if arg.is_empty() || arg[0].is_ascii_whitespace() || arg.contains(&0) {
        return None;
    }
    let text = std::ffi::CString::new(arg).ok()?;
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `text` is NUL-terminated and lives across the call; `end` is a valid out-pointer;
    // errno is this thread's.
    let (value, errno, consumed) = unsafe {
        *libc::__errno_location() = 0;
        let v = libc::strtod(text.as_ptr(), &mut end);
        (
            v,
            *libc::__errno_location(),
            end.offset_from(text.as_ptr()) as usize,
        )
    };
    let range = errno == libc::ERANGE && (value.is_infinite() || value == 0.0);
    (consumed == arg.len() && !range && !value.is_nan()).then_some(value)
}

/// `x` as Redis 7.0 prints a double (`%.17g`; `inf`, `-inf`).
pub(super) fn double_text(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let mut buf = [0u8; 64];
    // SAFETY: the buffer holds 64 bytes and snprintf writes at most that many, NUL included;
    // the format takes one double.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), x) };
    String::from_utf8_lossy(&buf[..(n.max(0) as usize).min(63)]).into_owned()
}
