//! What a store transaction publishes, held until it commits: a transaction may run again
//! after a conflict (`EXEC`, a script), and one that fails publishes nothing, so a message
//! goes out once, after the writes it follows are durable and visible. Its keyspace events
//! (`notify-keyspace-events`) are messages like `PUBLISH`'s, in the order they happen.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

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
}

impl Effects {
    /// Effects that publish the keyspace events of `classes`.
    pub fn new(classes: Classes) -> Self {
        Effects {
            classes,
            ..Effects::default()
        }
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
        for action in self.actions.into_inner() {
            action();
        }
        for line in self.monitor_lines.into_inner() {
            hub.feed_monitors(&line);
        }
        hub.count_dropped_events(self.dropped.get());
        for m in self.messages.into_inner() {
            hub.publish(&m.channel, &m.payload, m.shard);
        }
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
