//! Pub/sub: the channels, patterns and shard channels clients subscribe to, and the mail a
//! `PUBLISH` leaves for each subscriber until the network sends it.
//!
//! A publish runs on whichever core runs the publisher's job; it formats the message once per
//! protocol, appends it to every receiver's mailbox in the [`Hub`] and wakes the network,
//! which moves the mail into the receiver's reply bytes and sends it. A session that is
//! itself running a job (its connection has requests in flight) takes its own mail before
//! each command it runs, so a subscriber sees a message after the replies to the commands
//! that ran before the publish, as Redis orders them.
//!
//! A command publishes through the [`Effects`] of its store transaction, which go out once
//! it commits.
//!
//! Bounds: a subscriber's mail (here and unsent at the network) past its hard bound, or past
//! its soft bound for the soft bound's seconds, closes its connection ([`MailLimits`]:
//! `client-output-buffer-limit`'s `pubsub` class, by default Redis's 32mb 8mb 60); all mailboxes
//! together hold at most [`MAIL_TOTAL_BYTES`] (a publish past it closes the receiver instead
//! of queueing); a client subscribes to at most [`SUBSCRIPTIONS_MAX`] channels and patterns.

mod effects;
mod hub;
mod message;
pub mod tracking;

pub use effects::{Caller, DirectEvents, Effects};
pub use hub::{Client, Hub, Kind};
pub use message::{confirmation, monitor_line, ping_reply, MonitorSource};

/// A subscriber's mail past this closes its connection at once (by default).
pub const MAIL_HARD_BYTES: usize = 32 << 20;
/// A subscriber's mail past this for [`MAIL_SOFT_SECONDS`] closes its connection (by
/// default).
pub const MAIL_SOFT_BYTES: usize = 8 << 20;
pub const MAIL_SOFT_SECONDS: u64 = 60;

/// The bounds of one subscriber's mail (`client-output-buffer-limit pubsub`): 0 bytes is no
/// bound of that kind, as in Redis ([`MAIL_TOTAL_BYTES`] bounds all mail whatever they say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MailLimits {
    pub hard_bytes: usize,
    pub soft_bytes: usize,
    pub soft_seconds: u64,
}

impl Default for MailLimits {
    fn default() -> Self {
        Self {
            hard_bytes: MAIL_HARD_BYTES,
            soft_bytes: MAIL_SOFT_BYTES,
            soft_seconds: MAIL_SOFT_SECONDS,
        }
    }
}
/// All subscribers' mail held in the hub together.
pub const MAIL_TOTAL_BYTES: usize = 1 << 30;
/// Channels, patterns and shard channels one client subscribes to, together.
pub const SUBSCRIPTIONS_MAX: usize = 1 << 20;
