//! What a command runs with besides its arguments: the keyspace's [`Scope`] (its database,
//! its time, who is told of its reads and writes), which it derefs to, and what only commands
//! need (the database map, the protocol, the value bound).

use std::cell::Cell;
use std::ops::Deref;
use std::sync::Arc;

use super::scripting::Scripts;

use crate::keyspace::scope::Scope;
use crate::keyspace::DATABASES;
use crate::pubsub::{Effects, Hub};
use crate::resp::Protocol;
use crate::stats::ServerStats;

/// See the module docs.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The client's database, the command's time, its watchers and counters.
    pub scope: Scope<'a>,
    /// The database map as this transaction sees it. A map command (one the table flags as
    /// changing the map) changes it here and in the `databases` record; the caller publishes
    /// it once the transaction commits.
    pub map: &'a Cell<[u32; DATABASES]>,
    /// The caller holds the map's gate exclusively (`crate::keyspace::dbmap`): required by
    /// the map commands.
    pub map_exclusive: bool,
    /// The client's protocol (RESP2 or RESP3), for the replies' types.
    pub protocol: Protocol,
    /// The largest value the store takes: a command refuses to build a longer one.
    pub max_value_bytes: usize,
    /// The server's settings and counters (`INFO`, `CONFIG`, `SLOWLOG` ...).
    pub stats: &'a ServerStats,
    /// The server's scripts (`EVAL`, `SCRIPT`).
    pub scripts: &'a Arc<Scripts>,
    /// The server's pub/sub hub (`PUBSUB`, the receivers `PUBLISH` counts).
    pub pubsub: &'a Hub,
    /// What this transaction publishes once it commits (`PUBLISH`).
    pub effects: &'a Effects,
    /// The client is in RESP2's subscribed context (`PING` then replies as an array).
    pub pubsub_context: bool,
    /// The client's ACL user when it is restricted (`None`: it may run anything), for the
    /// checks of the commands scripts call.
    pub caller: Option<Caller<'a>>,
}

/// A restricted client: its user and its `CLIENT ID` (for `ACL LOG`).
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    pub user: &'a crate::acl::User,
    pub client_id: u64,
}

impl<'a> Deref for Context<'a> {
    type Target = Scope<'a>;

    fn deref(&self) -> &Scope<'a> {
        &self.scope
    }
}

/// The scripts of contexts outside any server (tests).
#[cfg(test)]
static BARE_SCRIPTS: std::sync::LazyLock<Arc<Scripts>> = std::sync::LazyLock::new(Arc::default);
#[cfg(test)]
static BARE_HUB: std::sync::LazyLock<Hub> = std::sync::LazyLock::new(Hub::default);

#[cfg(test)]
impl<'a> Context<'a> {
    /// A context in database 0 (namespace `namespace`) with no watchers or lookup counters,
    /// in RESP2, with the store's default value bound: for tests and work outside any client.
    pub fn bare(
        namespace: u32,
        now_ms: u64,
        map: &'a Cell<[u32; DATABASES]>,
        stats: &'a ServerStats,
    ) -> Self {
        Context {
            scope: Scope::detached(namespace, now_ms),
            map,
            map_exclusive: false,
            protocol: Protocol::Resp2,
            max_value_bytes: tamer_store::DEFAULT_MAX_VALUE_BYTES,
            stats,
            scripts: &BARE_SCRIPTS,
            pubsub: &BARE_HUB,
            // One per test context, never freed: tests only.
            effects: Box::leak(Box::default()),
            pubsub_context: false,
            caller: None,
        }
    }
}
