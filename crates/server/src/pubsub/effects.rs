//! What a store transaction publishes, held until it commits: a transaction may run again
//! after a conflict (`EXEC`, a script), and one that fails publishes nothing, so a message
//! goes out once, after the writes it follows are durable and visible.

use std::cell::{Cell, RefCell};

use super::Hub;

/// Bytes of messages one transaction holds (past it, `PUBLISH` is refused).
pub const EFFECTS_BYTES_MAX: usize = 64 << 20;

/// One message to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Message {
    channel: Vec<u8>,
    payload: Vec<u8>,
    shard: bool,
}

/// The messages of one transaction attempt, in order.
#[derive(Debug, Default)]
pub struct Effects {
    messages: RefCell<Vec<Message>>,
    bytes: Cell<usize>,
}

impl Effects {
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

    /// Publishes what it holds on `hub`, in order (the transaction committed).
    pub fn apply(self, hub: &Hub) {
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
