//! tamer's Redis-protocol server (issue 10): the RESP codec ([`resp`]), the keyspace's layout
//! in the store ([`keyspace`], with its expiry index and `DBSIZE` counts), the commands
//! ([`commands`], [`session`], [`admin`]; the collection types in [`collections`]), the database map ([`dbmap`]) and the background
//! work on the store (active expiry [`expiry`], reclaim of flushed databases [`reclaim`]), the
//! network core and request path ([`net`], [`admission`], [`prefetch`]), and what the server
//! reports about itself: settings ([`config`]), counters and logs ([`monitor`], [`info`],
//! [`metrics`]), connections ([`clients`]). `docs/server.md` walks one request end to end.

pub mod admin;
pub mod admission;
pub mod blocking;
pub mod clients;
pub mod collections;
pub mod commands;
pub mod config;
pub mod dbmap;
pub mod expiry;
pub mod glob;
pub mod info;
pub mod keyspace;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod prefetch;
pub mod reclaim;
pub mod resp;
pub mod session;
pub mod stats;
pub mod watches;
