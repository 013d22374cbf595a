//! Keyspace events (Redis's keyspace notifications): what a command or the expirer did to a
//! key, by class and name (`set`, `lpush`, `expired` ...), told to whoever the scope names
//! (`crate::pubsub::Effects` publishes them once the transaction commits). Which classes
//! are told is `notify-keyspace-events` (`crate::config::keyspace_events`), read once per
//! transaction.

pub use crate::config::keyspace_events::{Class, Classes};

/// Whoever is told of a transaction's keyspace events.
pub trait KeyEvents: std::fmt::Debug {
    /// The classes it publishes (read once per transaction).
    fn classes(&self) -> Classes;
    /// Event `name` of `class` on `key` of database `db`, in the order they happen.
    fn key_event(&self, class: Class, name: &'static str, db: usize, key: &[u8]);
    /// `key` of database `db` was written, deleted or expired (client-side caching
    /// invalidates it).
    fn key_written(&self, _db: usize, _key: &[u8]) {}
    /// A database was flushed (client-side caching invalidates every key).
    fn flushed(&self) {}
}

/// The event class of a value's type.
pub fn class_of(kind: super::Kind) -> Class {
    match kind {
        super::Kind::String => Class::String,
        super::Kind::Hash => Class::Hash,
        super::Kind::List => Class::List,
        super::Kind::Set => Class::Set,
        super::Kind::ZSet => Class::Zset,
    }
}
