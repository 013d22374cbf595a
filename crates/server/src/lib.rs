//! tamer's Redis-protocol server (issue 10). Built so far: the RESP codec ([`resp`]): a
//! request parser for RESP multibulk and inline commands with Redis 7.0's limits and error
//! texts, resumable across partial reads and bounded in what it holds, and reply encoders for
//! RESP2 and RESP3; and the keyspace's layout in the store ([`keyspace`]): typed values with
//! expiry times, the 16 databases as namespaces. The server, its commands and its request path
//! are not built yet.

pub mod admission;
pub mod commands;
pub mod keyspace;
pub mod net;
pub mod prefetch;
pub mod resp;
pub mod session;
pub mod stats;
pub mod watches;
