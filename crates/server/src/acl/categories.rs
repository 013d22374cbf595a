//! Redis's ACL categories and the shape of an entry of its command list
//! ([`super::universe`]).

/// One command or subcommand (`container|sub`) of Redis 7.0.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Lowercase; a subcommand's is `container|sub`.
    pub(crate) name: &'static str,
    /// Its ACL categories ([`cat`]'s bits).
    pub(crate) categories: u64,
    /// It is a subcommand (its container comes before it).
    pub(crate) sub: bool,
}

/// Redis's ACL categories, in its order (`ACL CAT`): a category's bit is `1 << index`
/// (the same bits as the command table's `AclCategories`, checked by
/// `commands::permissions`' tests).
pub(crate) const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category bits by name ([`CATEGORIES`]' indexes).
pub(crate) mod cat {
    pub(crate) const KEYSPACE: u64 = 1 << 0;
    pub(crate) const READ: u64 = 1 << 1;
    pub(crate) const WRITE: u64 = 1 << 2;
    pub(crate) const SET: u64 = 1 << 3;
    pub(crate) const SORTEDSET: u64 = 1 << 4;
    pub(crate) const LIST: u64 = 1 << 5;
    pub(crate) const HASH: u64 = 1 << 6;
    pub(crate) const STRING: u64 = 1 << 7;
    pub(crate) const BITMAP: u64 = 1 << 8;
    pub(crate) const HYPERLOGLOG: u64 = 1 << 9;
    pub(crate) const GEO: u64 = 1 << 10;
    pub(crate) const STREAM: u64 = 1 << 11;
    pub(crate) const PUBSUB: u64 = 1 << 12;
    pub(crate) const ADMIN: u64 = 1 << 13;
    pub(crate) const FAST: u64 = 1 << 14;
    pub(crate) const SLOW: u64 = 1 << 15;
    pub(crate) const BLOCKING: u64 = 1 << 16;
    pub(crate) const DANGEROUS: u64 = 1 << 17;
    pub(crate) const CONNECTION: u64 = 1 << 18;
    pub(crate) const TRANSACTION: u64 = 1 << 19;
    pub(crate) const SCRIPTING: u64 = 1 << 20;
}
