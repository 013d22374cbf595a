//! Commands: the table ([`table`]) that knows every command tamer serves, the gate
//! ([`gate`]) every request passes before its handler runs, and one file per family of
//! commands, each handler parsing its arguments and writing its reply around the data
//! operation it runs on the [`keyspace`](crate::keyspace) in one store transaction.
//!
//! A handler writes Redis-level errors (`WRONGTYPE`, syntax, not an integer) into the reply
//! and returns `Ok`; it returns `Err` only for a store error, which the caller handles (a
//! conflict retries the whole transaction, so a handler may run more than once: it writes
//! nothing but its reply and its transaction's changes).
//!
//! The families: [`strings`], [`keys`], [`scan`] (keyspace-wide reads), [`databases`],
//! [`hashes`], [`lists`], [`sets`], [`zsets`], [`blocking_pops`], [`server`] and
//! [`introspection`] (`COMMAND`); the commands that change the session are the session's
//! (`crate::session`). What they share: [`context`], [`args`], [`reply`], [`collections`],
//! [`numbers`]; the ACL checks of a request, [`permissions`]. `docs/commands.md` lists every command and how tamer differs.

pub mod args;
pub mod blocking_pops;
pub mod collections;
pub mod context;
pub mod databases;
pub mod gate;
pub mod hashes;
pub mod introspection;
pub mod keys;
pub mod lists;
pub mod numbers;
pub mod object;
pub mod permissions;
pub mod pubsub;
pub mod reply;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod spec;
pub mod strings;
pub mod table;
pub mod zsets;

pub use context::Context;

#[cfg(test)]
pub(crate) mod tests;
