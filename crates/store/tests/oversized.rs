//! An oversized value is refused before it is copied (alone in its test binary: RSS is per
//! process).

mod common;

use common::*;
use tamer_store::{Db, DbError, DEFAULT_MAX_VALUE_BYTES};

/// A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// Resets the peak resident size (`VmHWM`) to the current one.
fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").expect("writing /proc/self/clear_refs");
}

/// A 1 GiB value (mapped, never touched: it costs no RAM unless read) is refused with
/// `ValueTooLarge` without the process's peak resident memory growing by its size. Mutation caught:
/// `Db::put` copying key and value into its job before checking (the copy touches 1 GiB).
#[test]
fn an_oversized_value_is_refused_before_it_is_copied() {
    const LEN: usize = 1 << 30;
    // SAFETY: a fresh private anonymous mapping, unmapped below; no other reference to it.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(ptr, libc::MAP_FAILED, "mmap of 1 GiB");
    // SAFETY: the mapping is LEN readable bytes (zero pages until touched) and lives until
    // the munmap below.
    let value = unsafe { std::slice::from_raw_parts(ptr as *const u8, LEN) };
    let db = Db::open("unused", emulated(1 << 20, 16 << 20)).unwrap();
    reset_peak();
    let before = status_bytes("VmRSS:");
    match db.put(b"big", value) {
        Err(DbError::ValueTooLarge { len, max }) => {
            assert_eq!((len, max), (LEN, DEFAULT_MAX_VALUE_BYTES));
        }
        other => panic!("expected ValueTooLarge, got {other:?}"),
    }
    let grown = status_bytes("VmHWM:").saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "peak RSS grew by {grown} bytes refusing the value"
    );
    assert!(!db.contains(b"big").unwrap());
    db.close().unwrap();
    // SAFETY: the mapping made above; `value` is not used after this.
    unsafe { libc::munmap(ptr, LEN) };
}
