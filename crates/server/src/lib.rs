//! tamer's Redis-protocol server. `docs/server.md` walks one request end to end; the layers,
//! bottom up (each uses only those below it):
//!
//! - [`resp`], [`glob`], [`config`]: the protocol's codec, Redis's patterns, the settings.
//! - [`keyspace`]: keys and their entries in the store (encodings, databases, collections),
//!   the writes' watchers (`WATCH`, blocked clients), active expiry and reclaim.
//! - `pubsub`: the channels and patterns clients subscribe to, and the mail a publish leaves
//!   each subscriber until the network sends it.
//! - `acl`: ACL users, their rules and descriptions, the permission check of a request (as
//!   the command layer describes it to it), `ACL LOG`, the ACL file.
//! - [`stats`]: what the server reports about itself (counters, client list, `INFO`,
//!   Prometheus metrics).
//! - `commands`: the command table, the gate every request passes, and one file per
//!   family of commands.
//! - `session`: a connection's state (database, `MULTI`, watches, blocking) and the
//!   commands that change it.
//! - [`net`]: the network core on the runtime's cores (io_uring, connections, admission,
//!   dispatch of jobs).
//!
//! The binary uses [`net::Server`], [`config`], [`stats::ServerStats`] and [`metrics`]; the
//! end-to-end tests also read the codec ([`resp`]), the patterns ([`glob`]) and the store
//! layout of keys and expiry ([`keyspace`]). The rest is the crate's own.

/// The Redis version whose behaviour tamer follows, as `HELLO` and `INFO` report it.
pub const REDIS_VERSION: &str = "7.0.15";

pub(crate) mod acl;
pub(crate) mod commands;
pub mod config;
pub mod glob;
pub mod keyspace;
pub mod net;
pub(crate) mod pubsub;
pub mod resp;
pub(crate) mod session;
pub mod stats;

/// The Prometheus endpoint (`--metrics-addr`), for the binary.
pub use stats::metrics;
