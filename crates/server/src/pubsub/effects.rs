//! What a store transaction publishes, held until it commits: a transaction may run again
//! after a conflict (`EXEC`, a script), and one that fails publishes nothing, so a message
//! goes out once, after the writes it follows are durable and visible. Its keyspace events
//! (`notify-keyspace-events`) are messages like `PUBLISH`'s, in the order they happen.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use indexmap::IndexSet;

use super::tracking::{Since, WRITTEN_KEYS_MAX};
use super::Hub;
use crate::config::Config;
use crate::keyspace::events::{Class, Classes, KeyEvents};

/// Bytes of messages one transaction holds (past it, `PUBLISH` is refused and keyspace
/// events are dropped, counted in the hub's `dropped_events`).
pub const EFFECTS_BYTES_MAX: usize = 64 << 20;

/// One message to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Message {
    channel: Vec<u8>,
    payload: Vec<u8>,
    shard: bool,
}

/// A change of server state a transaction makes once it commits (`FUNCTION LOAD`'s
/// libraries): run by [`Effects::apply`], before the messages.
pub type AfterCommit = Box<dyn FnOnce()>;

/// What client-side caching learns from a transaction, in the order it happened.
#[derive(Debug)]
enum Tracked {
    /// A read-only command of a tracking client read these keys.
    Read(Vec<Vec<u8>>),
    /// A key was written (or expired).
    Written(Vec<u8>),
    /// A database was flushed.
    Flushed,
}

/// The client a transaction runs for, as client-side caching sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Caller {
    /// Its `CLIENT ID` (0: the server itself).
    pub id: u64,
    /// Its read-only commands' keys are remembered (it tracks, not in `BCAST`, and
    /// `OPTIN`/`OPTOUT` and `CLIENT CACHING` let this command's reads be cached).
    pub remembers: bool,
    /// The tracking table's epoch when the attempt began (`super::tracking`).
    pub epoch: u64,
    /// `tracking-table-max-keys` (0: no bound).
    pub table_max_keys: u64,
}

/// The messages of one transaction attempt, in order, and what it changes once committed.
#[derive(Default)]
pub struct Effects {
    messages: RefCell<Vec<Message>>,
    /// Changes of server state, in order.
    actions: RefCell<Vec<AfterCommit>>,
    /// `MONITOR` lines of the commands a script or `EXEC` ran, in order.
    monitor_lines: RefCell<Vec<Vec<u8>>>,
    bytes: Cell<usize>,
    /// The keyspace events published (`notify-keyspace-events` when the attempt began).
    classes: Classes,
    /// Keyspace events left out past [`EFFECTS_BYTES_MAX`].
    dropped: Cell<u64>,
    caller: Caller,
    /// Client-side caching's reads and writes, in order.
    tracked: RefCell<Vec<Tracked>>,
    /// Keys in `tracked`; past [`WRITTEN_KEYS_MAX`] a write counts as a flush.
    tracked_keys: Cell<usize>,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("messages", &self.messages.borrow().len())
            .field("actions", &self.actions.borrow().len())
            .finish()
    }
}

impl KeyEvents for Effects {
    fn classes(&self) -> Classes {
        self.classes
    }

    fn key_written(&self, _db: usize, key: &[u8]) {
        self.track(Tracked::Written(key.to_vec()), 1);
    }

    fn flushed(&self) {
        self.track(Tracked::Flushed, 0);
    }

    fn key_event(&self, _class: Class, name: &'static str, db: usize, key: &[u8]) {
        let mut held = true;
        for (channel, payload) in key_event_messages(self.classes, name, db, key) {
            held &= self.publish(&channel, payload, false);
        }
        if !held {
            self.dropped.set(self.dropped.get() + 1);
        }
    }
}

/// The messages of event `name` on `key` of database `db` under `classes`: on the keyspace
/// channel (`K`), then the keyevent channel (`E`), as Redis's `notifyKeyspaceEvent`.
fn key_event_messages<'k>(
    classes: Classes,
    name: &'static str,
    db: usize,
    key: &'k [u8],
) -> impl Iterator<Item = (Vec<u8>, &'k [u8])> {
    let keyspace = classes.has(Class::Keyspace).then(|| {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        (channel, name.as_bytes())
    });
    let keyevent = classes
        .has(Class::Keyevent)
        .then(|| (format!("__keyevent@{db}__:{name}").into_bytes(), key));
    keyspace.into_iter().chain(keyevent)
}

/// Keyspace events published at once, outside any transaction (the expirer's `expired`,
/// after the transaction that deleted the keys committed).
#[derive(Debug)]
pub struct DirectEvents {
    pub hub: Arc<Hub>,
    pub config: Arc<Config>,
}

impl KeyEvents for DirectEvents {
    fn classes(&self) -> Classes {
        self.config.keyspace_events()
    }

    fn key_event(&self, _class: Class, name: &'static str, db: usize, key: &[u8]) {
        for (channel, payload) in key_event_messages(self.classes(), name, db, key) {
            self.hub.publish(&channel, payload, false);
        }
    }

    fn key_written(&self, _db: usize, key: &[u8]) {
        let (_, notices) = self.hub.tracking.written(&[key.to_vec()], None);
        self.hub.deliver_notices(notices);
    }
}

impl Effects {
    /// Effects of a transaction run for `caller` that publish the keyspace events of
    /// `classes`.
    pub fn for_caller(classes: Classes, caller: Caller) -> Self {
        Effects {
            classes,
            caller,
            ..Effects::default()
        }
    }

    /// Whether the caller's reads are remembered for client-side caching (it tracks, and
    /// `OPTIN`/`OPTOUT` and `CLIENT CACHING` say this command's reads count).
    pub fn remembers(&self) -> bool {
        self.caller.remembers
    }

    /// `keys` were read: remembered for client-side caching when the caller's reads are.
    pub fn read_keys(&self, keys: &[&[u8]]) {
        if self.caller.remembers && !keys.is_empty() {
            let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
            let n = keys.len();
            self.track(Tracked::Read(keys), n);
        }
    }

    fn track(&self, event: Tracked, keys: usize) {
        let total = self.tracked_keys.get() + keys;
        let mut tracked = self.tracked.borrow_mut();
        if total > WRITTEN_KEYS_MAX {
            // Past the bound the transaction's writes invalidate everything.
            if !matches!(tracked.last(), Some(Tracked::Flushed)) {
                tracked.push(Tracked::Flushed);
            }
            return;
        }
        self.tracked_keys.set(total);
        if matches!(event, Tracked::Flushed) && matches!(tracked.last(), Some(Tracked::Flushed)) {
            return;
        }
        tracked.push(event);
    }

    /// Tells client-side caching what the committed transaction read and wrote, in order:
    /// consecutive writes are one batch.
    fn apply_tracking(&self, hub: &Hub) {
        let tracked = std::mem::take(&mut *self.tracked.borrow_mut());
        if tracked.is_empty() {
            return;
        }
        let tracking = &hub.tracking;
        let writer = (self.caller.id > 0).then_some(self.caller.id);
        let mut batch: IndexSet<Vec<u8>> = IndexSet::new();
        let mut own_epochs = Vec::new();
        let mut notices = Vec::new();
        let flush_batch =
            |batch: &mut IndexSet<Vec<u8>>, notices: &mut Vec<_>, own: &mut Vec<u64>| {
                if !batch.is_empty() {
                    let keys: Vec<Vec<u8>> = std::mem::take(batch).into_iter().collect();
                    let (epoch, owed) = tracking.written(&keys, writer);
                    own.extend(epoch);
                    notices.extend(owed);
                }
            };
        for event in tracked {
            match event {
                Tracked::Written(key) => {
                    batch.insert(key);
                }
                Tracked::Read(keys) => {
                    flush_batch(&mut batch, &mut notices, &mut own_epochs);
                    let owed = tracking.remember(
                        self.caller.id,
                        &keys,
                        Since {
                            epoch: self.caller.epoch,
                            own: &own_epochs,
                        },
                        self.caller.table_max_keys,
                    );
                    notices.extend(owed);
                }
                Tracked::Flushed => {
                    flush_batch(&mut batch, &mut notices, &mut own_epochs);
                    notices.extend(tracking.flushed());
                }
            }
        }
        flush_batch(&mut batch, &mut notices, &mut own_epochs);
        hub.deliver_notices(notices);
    }

    /// Holds a message; `false` past [`EFFECTS_BYTES_MAX`] (nothing held).
    pub fn publish(&self, channel: &[u8], payload: &[u8], shard: bool) -> bool {
        let bytes = self.bytes.get() + channel.len() + payload.len();
        if bytes > EFFECTS_BYTES_MAX {
            return false;
        }
        self.bytes.set(bytes);
        self.messages.borrow_mut().push(Message {
            channel: channel.to_vec(),
            payload: payload.to_vec(),
            shard,
        });
        true
    }

    /// Holds `action` until the transaction commits (one action per state-changing command,
    /// so a transaction holds at most as many as it runs commands).
    pub fn after_commit(&self, action: AfterCommit) {
        self.actions.borrow_mut().push(action);
    }

    /// Holds a `MONITOR` line (a command a script or `EXEC` ran) until the commit.
    pub fn monitor(&self, line: Vec<u8>) {
        self.monitor_lines.borrow_mut().push(line);
    }

    /// Runs the actions, feeds the monitors, then publishes the messages on `hub`, in order
    /// (the transaction committed).
    pub fn apply(self, hub: &Hub) {
        for action in self.actions.take() {
            action();
        }
        for line in self.monitor_lines.take() {
            hub.feed_monitors(&line);
        }
        hub.count_dropped_events(self.dropped.get());
        for m in self.messages.take() {
            hub.publish(&m.channel, &m.payload, m.shard);
        }
        self.apply_tracking(hub);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::Kind;
    use crate::resp::Protocol;

    /// Mutation caught: a held message published before `apply`, or past the bound.
    #[test]
    fn messages_wait_for_apply_and_are_bounded() {
        let hub = Hub::default();
        hub.subscribe((1, 1), Protocol::Resp2, Kind::Channel, b"c");
        let effects = Effects::default();
        assert!(effects.publish(b"c", b"x", false));
        assert!(hub.take_mail((1, 1)).bytes.is_empty());
        assert!(!effects.publish(b"c", &vec![0; EFFECTS_BYTES_MAX], false));
        effects.apply(&hub);
        assert!(!hub.take_mail((1, 1)).bytes.is_empty());
    }
}
