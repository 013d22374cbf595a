//! Every way a store operation can fail.

use std::fmt;

use tamer_cache::CacheError;
use tamer_device::DeviceError;

/// Errors of [`crate::Db`] and [`crate::DbHandle`]. Messages name the limit or the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbError {
    /// A bad [`crate::DbOptions`] value, or a file that is not a tamer store.
    Config(String),
    /// Keys are 1..=`max` bytes.
    KeyTooLarge {
        /// The key's length, bytes.
        len: usize,
        /// The limit, bytes.
        max: usize,
    },
    /// The empty key is not allowed.
    EmptyKey,
    /// Values are 0..=`max` bytes (`DbOptions::max_value_bytes`).
    ValueTooLarge {
        /// The value's length, bytes.
        len: usize,
        /// The limit, bytes.
        max: usize,
    },
    /// The device (or the file-size limit) has no room for `pages` more pages. Nothing already
    /// stored was changed.
    NoSpace {
        /// Pages asked for.
        pages: u64,
        /// What refused them.
        detail: String,
    },
    /// The hash index reached its largest directory (`2^max_depth` buckets) and a bucket is full.
    IndexFull {
        /// The directory's depth limit (`DbOptions::max_directory_depth`).
        max_depth: u32,
    },
    /// A page or a record failed its checksum or is malformed: the stored data is damaged.
    Corrupt {
        /// The damaged page.
        page: u64,
        /// What is wrong with it.
        detail: String,
    },
    /// The page cache failed (device error, timeout, ...).
    Cache(CacheError),
    /// A handle call outside a tamer user-level thread (use [`crate::Db`]'s blocking calls, or
    /// call it from a job spawned on the Db's runtime).
    NotInUserThread,
    /// The database was closed.
    Closed,
    /// A write to a store opened read-only (`DbOptions::read_only`).
    ReadOnly,
    /// The runtime could not run the operation (its queues stayed full, or it stopped).
    Runtime(String),
    /// A transaction met a lock held by another `attempts` times in a row (inside a
    /// transaction's closure, `attempts` is 0: return it, and the attempt is retried).
    Conflict {
        /// Attempts made.
        attempts: u32,
    },
    /// A transaction or batch over a stated bound (bytes buffered, keys locked).
    TooLarge(String),
}

impl From<CacheError> for DbError {
    fn from(err: CacheError) -> Self {
        match err {
            CacheError::Corrupt { page } => DbError::Corrupt {
                page,
                detail: "page checksum mismatch".into(),
            },
            CacheError::NotInUserThread => DbError::NotInUserThread,
            CacheError::Device(err) if err.is_no_space() => DbError::NoSpace {
                pages: 1,
                detail: err.to_string(),
            },
            other => DbError::Cache(other),
        }
    }
}

impl From<DeviceError> for DbError {
    fn from(err: DeviceError) -> Self {
        DbError::from(CacheError::Device(err))
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::Config(msg) => write!(f, "bad store configuration: {msg}"),
            DbError::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes: keys are at most {max} bytes")
            }
            DbError::EmptyKey => write!(f, "empty key: keys are 1 byte or more"),
            DbError::ValueTooLarge { len, max } => write!(
                f,
                "value of {len} bytes: values are at most {max} bytes (DbOptions::max_value_bytes)"
            ),
            DbError::NoSpace { pages, detail } => write!(
                f,
                "no space for {pages} more pages ({detail}): free space on the disk, raise the \
                 size limit, or delete data; nothing stored was changed"
            ),
            DbError::ReadOnly => write!(
                f,
                "the store was opened read-only (DbOptions::read_only): open it writable to change it"
            ),
            DbError::IndexFull { max_depth } => write!(
                f,
                "the hash index is full (2^{max_depth} buckets): create the store with a larger \
                 DbOptions::max_directory_depth"
            ),
            DbError::Corrupt { page, detail } => {
                write!(f, "corrupt data at page {page}: {detail}")
            }
            DbError::Cache(err) => write!(f, "page cache: {err}"),
            DbError::NotInUserThread => write!(
                f,
                "DbHandle called outside a tamer user-level thread: use Db's blocking calls or \
                 spawn a job on db.runtime()"
            ),
            DbError::Closed => write!(f, "the database is closed"),
            DbError::Runtime(msg) => write!(f, "runtime: {msg}"),
            DbError::Conflict { attempts: 0 } => write!(
                f,
                "transaction conflict: another transaction holds a key this one touches (return \
                 this error from the closure and the transaction is retried)"
            ),
            DbError::Conflict { attempts } => write!(
                f,
                "transaction conflict: it met keys held by other transactions {attempts} times \
                 in a row; retry later, or touch fewer hot keys per transaction"
            ),
            DbError::TooLarge(msg) => write!(f, "too large: {msg}"),
        }
    }
}

impl std::error::Error for DbError {}
