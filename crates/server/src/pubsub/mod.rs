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
//! Bounds: a subscriber's mail (here and unsent at the network) past
//! [`MAIL_HARD_BYTES`], or past [`MAIL_SOFT_BYTES`] for [`MAIL_SOFT_SECONDS`], closes its
//! connection (Redis's `client-output-buffer-limit pubsub 32mb 8mb 60`); all mailboxes
//! together hold at most [`MAIL_TOTAL_BYTES`] (a publish past it closes the receiver instead
//! of queueing); a client subscribes to at most [`SUBSCRIPTIONS_MAX`] channels and patterns.

mod effects;
mod hub;
mod message;
pub mod tracking;

pub use effects::{Caller, DirectEvents, Effects};
pub use hub::{Client, Hub, Kind};
pub use message::{confirmation, monitor_line, ping_reply, MonitorSource};

/// A subscriber's mail past this closes its connection at once.
pub const MAIL_HARD_BYTES: usize = 32 << 20;
/// A subscriber's mail past this for [`MAIL_SOFT_SECONDS`] closes its connection.
pub const MAIL_SOFT_BYTES: usize = 8 << 20;
pub const MAIL_SOFT_SECONDS: u64 = 60;
/// All subscribers' mail held in the hub together.
pub const MAIL_TOTAL_BYTES: usize = 1 << 30;
/// Channels, patterns and shard channels one client subscribes to, together.
pub const SUBSCRIPTIONS_MAX: usize = 1 << 20;
