//! tamer's Redis-protocol server (issue 10): the RESP codec ([`resp`]), the keyspace's layout
//! in the store ([`keyspace`]), the commands ([`commands`], [`session`], [`admin`]), the
//! network core ([`net`]), and what the server reports about itself: settings ([`config`]),
//! counters and logs ([`monitor`], [`info`], [`metrics`]), connections ([`clients`]).

pub mod admin;
pub mod admission;
pub mod clients;
pub mod commands;
pub mod config;
pub mod info;
pub mod keyspace;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod prefetch;
pub mod resp;
pub mod session;
pub mod stats;
pub mod watches;
