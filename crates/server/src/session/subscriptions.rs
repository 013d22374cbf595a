//! A session's pub/sub subscriptions: `SUBSCRIBE`, `PSUBSCRIBE`, `SSUBSCRIBE` and their
//! `UNSUBSCRIBE` forms, on the server's hub (`crate::pubsub`), with Redis's confirmations.
//! In RESP2 a client that subscribes to anything is in the subscribed context: the gate
//! lets only the commands the table flags `subscribed_context` through.

use super::state::Session;
use crate::pubsub::{confirmation, Kind, SUBSCRIPTIONS_MAX};
use crate::resp::{write, Protocol};

/// The confirmation's kind word of a (un)subscribe of `kind`.
fn word(kind: Kind, subscribe: bool) -> &'static str {
    match (kind, subscribe) {
        (Kind::Channel, true) => "subscribe",
        (Kind::Pattern, true) => "psubscribe",
        (Kind::Shard, true) => "ssubscribe",
        (Kind::Channel, false) => "unsubscribe",
        (Kind::Pattern, false) => "punsubscribe",
        (Kind::Shard, false) => "sunsubscribe",
    }
}

impl Session {
    /// Whether the client is in RESP2's subscribed context.
    pub fn pubsub_context(&self) -> bool {
        self.protocol == Protocol::Resp2 && self.subscribed()
    }

    /// `SUBSCRIBE`/`PSUBSCRIBE`/`SSUBSCRIBE name [name ...]`: a confirmation per name.
    pub(super) fn subscribe(&mut self, kind: Kind, names: &[&[u8]], out: &mut Vec<u8>) {
        for name in names {
            if self.subscriptions.iter().sum::<usize>() >= SUBSCRIPTIONS_MAX {
                write::error(out, "ERR too many subscriptions for one client");
                break;
            }
            let (_, count) = self
                .pubsub
                .subscribe(self.client, self.protocol, kind, name);
            self.subscriptions = self.pubsub.counts(self.client);
            confirmation(out, self.protocol, word(kind, true), Some(name), count);
        }
    }

    /// `UNSUBSCRIBE`/`PUNSUBSCRIBE`/`SUNSUBSCRIBE [name ...]`: a confirmation per name, or
    /// per subscription of that kind without names (one with a null name when there is
    /// none).
    pub(super) fn unsubscribe(&mut self, kind: Kind, names: &[&[u8]], out: &mut Vec<u8>) {
        let names: Vec<Vec<u8>> = if names.is_empty() {
            self.pubsub.subscriptions(self.client, kind)
        } else {
            names.iter().map(|n| n.to_vec()).collect()
        };
        if names.is_empty() {
            let [channels, patterns, shard] = self.subscriptions;
            let count = if kind == Kind::Shard {
                shard
            } else {
                channels + patterns
            };
            confirmation(out, self.protocol, word(kind, false), None, count);
            return;
        }
        for name in &names {
            let (_, count) = self.pubsub.unsubscribe(self.client, kind, name, out);
            self.subscriptions = self.pubsub.counts(self.client);
            confirmation(out, self.protocol, word(kind, false), Some(name), count);
        }
    }

    /// Leaves every subscription (`RESET`), without confirmations. Mail published before
    /// `RESET` ran was taken before it (`Session::run`); any published since is dropped.
    pub(super) fn unsubscribe_all(&mut self) {
        if self.subscribed() {
            self.pubsub.remove(self.client);
            self.subscriptions = [0; 3];
        }
    }

    /// Moves this session's pub/sub mail into `out`, before the reply to the command it is
    /// about to run (it was published before that command ran).
    pub(super) fn take_mail(&self, out: &mut Vec<u8>) {
        if self.receives_mail() {
            out.extend_from_slice(&self.pubsub.take_mail(self.client).bytes);
        }
    }

    /// Moves this session's mail but its tracking invalidations into `out`, as a command
    /// of it ends (an invalidation owed meanwhile follows the command's reply).
    pub(super) fn take_messages(&self, out: &mut Vec<u8>) {
        if self.receives_mail() {
            out.extend_from_slice(&self.pubsub.take_messages(self.client).bytes);
        }
    }
}
