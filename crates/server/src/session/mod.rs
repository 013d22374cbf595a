//! A connection's session: what its commands change besides the keyspace (the selected
//! database, the protocol, `MULTI`'s queue, `WATCH`ed keys, a blocked command, `QUIT`), and
//! the commands that act on it. The network core moves a connection's session into each job
//! that runs its requests and takes it back with the replies, so one connection's requests
//! always see the session in order.
//!
//! Every request goes through the gate (`crate::commands::gate`) in [`Session::run`], then
//! runs as the table says: a store transaction of its own ([`transaction`]), an operation of
//! the session ([`ops`]: `HELLO`, `AUTH`, `CLIENT` ...), a blocking pop that may wait
//! ([`blocking`]), or `MULTI`'s queue.
//!
//! `MULTI` ... `EXEC` runs the queued commands in **one** store transaction: atomic, isolated
//! from every other client, and in `commit` mode durable when `EXEC` returns. As in Redis 7.0,
//! a command refused while queueing (unknown, wrong arity) makes `EXEC` fail with
//! `EXECABORT`, and a command that fails inside `EXEC` does not undo the others. `WATCH`
//! registers each key with the server's watches (every write to it bumps its version) and
//! remembers a fingerprint of its stored bytes; `EXEC` reads the keys inside its transaction
//! (holding their locks) and aborts (a null reply) if a version moved (any write, as Redis's
//! `touchWatchedKey`) or the fingerprint changed (the key expired meanwhile). A writer bumps
//! the version before it commits, so a write racing `EXEC` may abort it where Redis, which
//! runs one command at a time, would have ordered the write after: never the other way.

mod acl;
mod blocking;
mod clients;
mod ops;
mod state;
mod subscriptions;
mod tracking;
mod transaction;

pub(crate) use state::{Services, Session};
