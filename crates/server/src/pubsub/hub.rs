//! The hub: who subscribes to what, and each subscriber's mail (see the module docs).
//!
//! Rules, each tested below: a publish counts one receiver per subscription it matches (a
//! client matching by a channel and two patterns counts three, and gets three messages), in
//! this order: the channel's subscribers in the order they subscribed, then each matching
//! pattern's; a subscriber whose mail would pass a bound is marked overflowed, its mail
//! dropped, and gets no more (the network closes it); the network is woken once per publish
//! that left mail for a subscriber that had none.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use indexmap::{IndexMap, IndexSet};

use super::message::message;
pub use super::tracking::Client;
use super::tracking::{Keys, Notice};
use super::{MailLimits, MAIL_TOTAL_BYTES};
use crate::resp::{write, Protocol};

/// What a client subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `SUBSCRIBE`: a channel, reached by `PUBLISH`.
    Channel,
    /// `PSUBSCRIBE`: a glob pattern over `PUBLISH`'s channels.
    Pattern,
    /// `SSUBSCRIBE`: a shard channel, reached by `SPUBLISH` only.
    Shard,
}

impl Kind {
    fn index(self) -> usize {
        match self {
            Kind::Channel => 0,
            Kind::Pattern => 1,
            Kind::Shard => 2,
        }
    }
}

/// What the network takes for a subscriber.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Mail {
    pub bytes: Vec<u8>,
    /// Its mail passed a bound: close the connection.
    pub overflowed: bool,
}

#[derive(Debug)]
struct Subscriber {
    protocol: Protocol,
    /// Its subscriptions of each kind, in the order made (a removal moves the last one into
    /// its place, so the order after removals is arbitrary, as Redis's dictionaries').
    subscribed: [IndexSet<Vec<u8>>; 3],
    mail: Queued,
    overflowed: bool,
    /// Since when its mail is past the soft bound (ns on `tamer_device::now_ns`).
    soft_since_ns: Option<u64>,
    /// It is in `MONITOR` mode (it stays in the hub without subscriptions).
    monitor: bool,
    /// It was sent a tracking invalidation (it stays in the hub until it disconnects).
    pushes: bool,
}

#[derive(Debug, Default)]
struct Inner {
    /// Channel → subscribers in the order they subscribed; the same for shard channels
    /// (index 2) and patterns (index 1, iterated in the order first subscribed).
    by_name: [IndexMap<Vec<u8>, Vec<Client>>; 3],
    subscribers: HashMap<Client, Subscriber>,
    /// Bytes of mail held, all subscribers together.
    mail_bytes: usize,
    /// Subscribers with mail (or overflowed) since the network last took them.
    ready: Vec<Client>,
    /// The clients in `MONITOR` mode, in the order they asked.
    monitors: Vec<Client>,
    /// One subscriber's bounds.
    limits: MailLimits,
}

/// What tells the network that mail waits (a core may be waiting in its ring).
pub type Waker = Box<dyn Fn() + Send + Sync>;

/// See the module docs.
#[derive(Default)]
pub struct Hub {
    inner: Mutex<Inner>,
    has_mail: AtomicBool,
    /// Subscribers now, read without the lock.
    subscribers: AtomicUsize,
    waker: OnceLock<Waker>,
    /// Clients in `MONITOR` mode, read without the lock.
    monitor_count: AtomicUsize,
    /// Keyspace events left out of transactions past their effects' bound.
    dropped_events: AtomicU64,
    /// Client-side caching's table.
    pub tracking: super::tracking::Tracking,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("subscribers", &self.subscribers.load(Ordering::Relaxed))
            .finish()
    }
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets one subscriber's bounds (`client-output-buffer-limit pubsub`).
    pub fn set_mail_limits(&self, limits: MailLimits) {
        self.lock().limits = limits;
    }

    /// Set by the network once it runs.
    pub fn set_waker(&self, waker: Waker) {
        let _ = self.waker.set(waker);
    }

    /// Subscribes `client` to `name`; whether it was new, and the client's subscriptions of
    /// that family then (channels and patterns together; shard channels apart), as the
    /// confirmation counts them.
    pub fn subscribe(
        &self,
        client: Client,
        protocol: Protocol,
        kind: Kind,
        name: &[u8],
    ) -> (bool, usize) {
        let mut inner = self.lock();
        let sub = self.member(&mut inner, client, protocol);
        let new = sub.subscribed[kind.index()].insert(name.to_vec());
        let count = family_count(sub, kind);
        if new {
            let list = inner.by_name[kind.index()]
                .entry(name.to_vec())
                .or_default();
            debug_assert!(!list.contains(&client));
            list.push(client);
        }
        (new, count)
    }

    /// `client`'s entry, made (without subscriptions) when it has none.
    fn member<'i>(
        &self,
        inner: &'i mut Inner,
        client: Client,
        protocol: Protocol,
    ) -> &'i mut Subscriber {
        inner.subscribers.entry(client).or_insert_with(|| {
            self.subscribers.fetch_add(1, Ordering::Relaxed);
            Subscriber {
                protocol,
                subscribed: Default::default(),
                mail: Queued::default(),
                overflowed: false,
                soft_since_ns: None,
                monitor: false,
                pushes: false,
            }
        })
    }

    /// Puts `client` in `MONITOR` mode: every command fed from now on reaches its mail.
    pub fn monitor(&self, client: Client, protocol: Protocol) {
        let mut inner = self.lock();
        let sub = self.member(&mut inner, client, protocol);
        if !sub.monitor {
            sub.monitor = true;
            inner.monitors.push(client);
            self.monitor_count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes `client` out of `MONITOR` mode (`RESET`); it leaves the hub if it subscribes
    /// to nothing, its mail appended to `out`.
    pub fn unmonitor(&self, client: Client, out: &mut Vec<u8>) {
        let mut inner = self.lock();
        let Some(sub) = inner.subscribers.get_mut(&client) else {
            return;
        };
        if std::mem::take(&mut sub.monitor) {
            inner.monitors.retain(|c| *c != client);
            self.monitor_count.fetch_sub(1, Ordering::Relaxed);
        }
        self.leave_if_done(&mut inner, client, out);
    }

    /// Some client is in `MONITOR` mode (read without the lock).
    pub fn has_monitors(&self) -> bool {
        self.monitor_count.load(Ordering::Relaxed) > 0
    }

    /// Appends `line` (a whole status reply) to every monitor's mail, bounded as a publish.
    pub fn feed_monitors(&self, line: &[u8]) {
        if !self.has_monitors() {
            return;
        }
        let mut inner = self.lock();
        let mut delivery = Delivery {
            now_ns: tamer_device::now_ns(),
            ..Delivery::default()
        };
        let mut frames = Frames::default();
        for i in 0..inner.monitors.len() {
            let client = inner.monitors[i];
            delivery.deliver(&mut inner, client, &mut frames, false, |out, _| {
                out.extend_from_slice(line)
            });
        }
        drop(inner);
        if delivery.woke {
            self.has_mail.store(true, Ordering::Release);
            if let Some(wake) = self.waker.get() {
                wake();
            }
        }
    }

    /// Unsubscribes `client` from `name`; whether it was subscribed, and its subscriptions of
    /// that family left. Once it has none of any kind it leaves the hub, and the mail still
    /// held for it is appended to `out` first (it was published before this).
    pub fn unsubscribe(
        &self,
        client: Client,
        kind: Kind,
        name: &[u8],
        out: &mut Vec<u8>,
    ) -> (bool, usize) {
        let mut inner = self.lock();
        let Some(sub) = inner.subscribers.get_mut(&client) else {
            return (false, 0);
        };
        let was = sub.subscribed[kind.index()].swap_remove(name);
        let count = family_count(sub, kind);
        if was {
            remove_from(&mut inner.by_name[kind.index()], name, client);
        }
        self.leave_if_done(&mut inner, client, out);
        (was, count)
    }

    /// `client`'s subscriptions of `kind`, in their order (an `UNSUBSCRIBE` without names).
    pub fn subscriptions(&self, client: Client, kind: Kind) -> Vec<Vec<u8>> {
        let inner = self.lock();
        inner
            .subscribers
            .get(&client)
            .map(|s| s.subscribed[kind.index()].iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many of each kind `client` subscribes to: channels, patterns, shard channels.
    pub fn counts(&self, client: Client) -> [usize; 3] {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return [0; 3];
        }
        let inner = self.lock();
        inner
            .subscribers
            .get(&client)
            .map_or([0; 3], |s| [0, 1, 2].map(|i| s.subscribed[i].len()))
    }

    /// Removes `client` from everything (its connection closed, or `RESET`); its mail is
    /// dropped.
    pub fn remove(&self, client: Client) {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut inner = self.lock();
        let Some(mut sub) = inner.subscribers.remove(&client) else {
            return;
        };
        self.subscribers.fetch_sub(1, Ordering::Relaxed);
        if sub.monitor {
            inner.monitors.retain(|c| *c != client);
            self.monitor_count.fetch_sub(1, Ordering::Relaxed);
        }
        inner.mail_bytes -= sub.mail.bytes;
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in std::mem::take(&mut sub.subscribed[kind.index()]) {
                remove_from(&mut inner.by_name[kind.index()], &name, client);
            }
        }
    }

    /// The protocol `client`'s messages are written in (after `HELLO`).
    pub fn set_protocol(&self, client: Client, protocol: Protocol) {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(sub) = self.lock().subscribers.get_mut(&client) {
            sub.protocol = protocol;
        }
    }

    fn leave_if_done(&self, inner: &mut Inner, client: Client, out: &mut Vec<u8>) {
        let done = inner.subscribers.get(&client).is_some_and(|s| {
            !s.monitor && !s.pushes && s.subscribed.iter().all(IndexSet::is_empty)
        });
        if !done {
            return;
        }
        let mut sub = inner.subscribers.remove(&client).expect("checked above");
        self.subscribers.fetch_sub(1, Ordering::Relaxed);
        inner.mail_bytes -= sub.mail.bytes;
        if !sub.overflowed {
            sub.mail.drain_into(out, true);
        }
    }
}

/// Subscriptions counted in a confirmation of `kind`: channels and patterns together, shard
/// channels apart.
fn family_count(sub: &Subscriber, kind: Kind) -> usize {
    match kind {
        Kind::Shard => sub.subscribed[2].len(),
        _ => sub.subscribed[0].len() + sub.subscribed[1].len(),
    }
}

fn remove_from(map: &mut IndexMap<Vec<u8>, Vec<Client>>, name: &[u8], client: Client) {
    let Some(list) = map.get_mut(name) else {
        debug_assert!(false, "a subscription missing from the hub's map");
        return;
    };
    list.retain(|c| *c != client);
    if list.is_empty() {
        map.swap_remove(name);
    }
}

impl Hub {
    /// Publishes `payload` on `channel` (`shard`: `SPUBLISH`, shard subscribers only); the
    /// receivers it reached.
    pub fn publish(&self, channel: &[u8], payload: &[u8], shard: bool) -> usize {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut inner = self.lock();
        let mut delivery = Delivery {
            now_ns: tamer_device::now_ns(),
            ..Delivery::default()
        };
        let (kind, family) = if shard {
            ("smessage", Kind::Shard)
        } else {
            ("message", Kind::Channel)
        };
        // Subscriber lists are read by position (delivery changes only the mailboxes), so
        // none is copied per publish.
        let family = family.index();
        if let Some(at) = inner.by_name[family].get_index_of(channel) {
            let mut frames = Frames::default();
            let count = inner.by_name[family][at].len();
            for i in 0..count {
                let client = inner.by_name[family][at][i];
                let write = |out: &mut Vec<u8>, p| message(out, p, kind, None, channel, payload);
                delivery.deliver(&mut inner, client, &mut frames, false, write);
            }
        }
        if !shard {
            let patterns = Kind::Pattern.index();
            let matching: Vec<usize> = (0..inner.by_name[patterns].len())
                .filter(|&i| {
                    let (p, _) = inner.by_name[patterns].get_index(i).expect("in range");
                    crate::glob::matches(p, channel)
                })
                .collect();
            for at in matching {
                let mut frames = Frames::default();
                let (pattern, clients) = inner.by_name[patterns].get_index(at).expect("kept");
                let (pattern, count) = (pattern.clone(), clients.len());
                for i in 0..count {
                    let client = inner.by_name[patterns][at][i];
                    let write = |out: &mut Vec<u8>, p| {
                        message(out, p, "pmessage", Some(&pattern), channel, payload);
                    };
                    delivery.deliver(&mut inner, client, &mut frames, false, write);
                }
            }
        }
        drop(inner);
        if delivery.woke {
            self.has_mail.store(true, Ordering::Release);
            if let Some(wake) = self.waker.get() {
                wake();
            }
        }
        delivery.receivers
    }

    /// Whether `client`'s mail overflowed (the network closes it).
    pub fn overflowed(&self, client: Client) -> bool {
        self.lock()
            .subscribers
            .get(&client)
            .is_some_and(|s| s.overflowed)
    }

    /// Whether mail waits for the network (read without the lock).
    pub fn has_mail(&self) -> bool {
        self.has_mail.load(Ordering::Acquire)
    }

    /// The subscribers with mail (or overflowed) since the last call.
    pub fn take_ready(&self) -> Vec<Client> {
        if !self.has_mail.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.lock().ready)
    }

    /// `client`'s mail, taken (an overflowed subscriber's says so and holds none).
    pub fn take_mail(&self, client: Client) -> Mail {
        self.take(client, true)
    }

    /// `client`'s mail but its tracking invalidations, taken while a command of it runs
    /// (an invalidation owed meanwhile follows that command's reply: `super::tracking`).
    pub fn take_messages(&self, client: Client) -> Mail {
        self.take(client, false)
    }

    fn take(&self, client: Client, invalidations: bool) -> Mail {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return Mail::default();
        }
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(sub) = inner.subscribers.get_mut(&client) else {
            return Mail::default();
        };
        let mut bytes = Vec::with_capacity(sub.mail.bytes);
        let held = sub.mail.bytes;
        sub.mail.drain_into(&mut bytes, invalidations);
        inner.mail_bytes -= held - sub.mail.bytes;
        if sub.mail.bytes == 0 {
            sub.soft_since_ns = None;
        }
        let overflowed = sub.overflowed;
        Mail { bytes, overflowed }
    }
}

/// Where one tracking invalidation goes, resolved before the hub's lock is taken.
struct Route {
    /// The tracking client's ID.
    id: u64,
    /// The client that gets it, the protocol it speaks as far as the registry knows, and
    /// whether it is the tracking client's `REDIRECT`.
    to: Client,
    protocol: Protocol,
    redirected: bool,
    /// Its redirect client is gone: the tracking client hears `tracking-redir-broken`.
    broken: Option<u64>,
    keys: Keys,
    /// The tracking client's protocol (a flush's null is written in it, as Redis's).
    own_protocol: Protocol,
}

fn route(n: Notice) -> Route {
    let own = (n.target.client, n.target.protocol);
    let (to, protocol, redirected, broken) = match &n.target.redirect {
        None => (own.0, own.1, false, None),
        Some((rid, entry)) => match entry.upgrade().and_then(|e| e.reach()) {
            Some((client, protocol)) => (client, protocol, true, None),
            None => (own.0, own.1, false, Some(*rid)),
        },
    };
    Route {
        id: n.id,
        to,
        protocol,
        redirected,
        broken,
        keys: n.keys,
        own_protocol: n.target.protocol,
    }
}

/// An invalidation's frame as `protocol` gets it (`message`: over RESP2's
/// `__redis__:invalidate` channel).
fn invalidation_frame(protocol: Protocol, message: bool, keys: &Keys, null: Protocol) -> Vec<u8> {
    let mut out = Vec::new();
    if message {
        write::array(&mut out, 3);
        write::bulk(&mut out, b"message");
        write::bulk(&mut out, b"__redis__:invalidate");
    } else {
        write::push(&mut out, 2, protocol);
        write::bulk(&mut out, b"invalidate");
    }
    match keys {
        Keys::Some(keys) => {
            write::array(&mut out, keys.len());
            for k in keys {
                write::bulk(&mut out, k);
            }
        }
        Keys::All => write::null(&mut out, null),
    }
    out
}

impl Hub {
    /// Sends tracking invalidations where their clients' modes say: a RESP3 client (or its
    /// RESP3 redirect client) as a push, a RESP2 redirect client that subscribes to
    /// something as a message on `__redis__:invalidate`, nobody else (Redis's
    /// `sendTrackingMessage`). A redirect client that is gone marks its tracking client
    /// broken, which hears of it in RESP3.
    pub fn deliver_notices(&self, notices: Vec<Notice>) {
        if notices.is_empty() {
            return;
        }
        // Routed under the lock: a redirect client's registry entry is marked closed before
        // its session leaves the hub, so no mail is left for a client that is gone.
        let mut inner = self.lock();
        let routes: Vec<Route> = notices.into_iter().map(route).collect();
        let mut delivery = Delivery {
            now_ns: tamer_device::now_ns(),
            ..Delivery::default()
        };
        let mut broken = Vec::new();
        for r in &routes {
            let frame = if let Some(rid) = r.broken {
                broken.push(r.id);
                if r.own_protocol != Protocol::Resp3 {
                    continue;
                }
                let mut out = Vec::new();
                write::push(&mut out, 2, Protocol::Resp3);
                write::bulk(&mut out, b"tracking-redir-broken");
                write::integer(&mut out, rid as i64);
                out
            } else {
                let member = inner.subscribers.get(&r.to);
                let protocol = member.map_or(r.protocol, |m| m.protocol);
                let subscribed = member.is_some_and(|m| m.subscribed.iter().any(|s| !s.is_empty()));
                match protocol {
                    Protocol::Resp3 => invalidation_frame(protocol, false, &r.keys, r.own_protocol),
                    Protocol::Resp2 if r.redirected && subscribed => {
                        invalidation_frame(protocol, true, &r.keys, r.own_protocol)
                    }
                    Protocol::Resp2 => continue,
                }
            };
            self.member(&mut inner, r.to, r.protocol).pushes = true;
            let mut frames = Frames::default();
            delivery.deliver(&mut inner, r.to, &mut frames, true, |out, _| {
                out.extend_from_slice(&frame);
            });
        }
        drop(inner);
        if delivery.woke {
            self.has_mail.store(true, Ordering::Release);
            if let Some(wake) = self.waker.get() {
                wake();
            }
        }
        for id in broken {
            self.tracking.mark_broken(id);
        }
    }
}

/// One message's frame in each protocol, formatted on first use and shared by every
/// subscriber that gets it (a fan-out holds one copy, not one per subscriber).
#[derive(Default)]
struct Frames {
    resp2: Option<Arc<[u8]>>,
    resp3: Option<Arc<[u8]>>,
}

impl Frames {
    fn of(&mut self, protocol: Protocol, write: impl Fn(&mut Vec<u8>, Protocol)) -> Arc<[u8]> {
        let slot = match protocol {
            Protocol::Resp2 => &mut self.resp2,
            Protocol::Resp3 => &mut self.resp3,
        };
        slot.get_or_insert_with(|| {
            let mut out = Vec::new();
            write(&mut out, protocol);
            out.into()
        })
        .clone()
    }
}

/// A subscriber's mail: shared frames in order (each marked when it is a tracking
/// invalidation), and their bytes.
#[derive(Debug, Default)]
struct Queued {
    frames: VecDeque<(Arc<[u8]>, bool)>,
    bytes: usize,
}

impl Queued {
    fn push(&mut self, frame: Arc<[u8]>, invalidation: bool) {
        self.bytes += frame.len();
        self.frames.push_back((frame, invalidation));
    }

    /// Appends the frames to `out` (the one copy a send needs), in order; the tracking
    /// invalidations too when `invalidations`, else they stay.
    fn drain_into(&mut self, out: &mut Vec<u8>, invalidations: bool) {
        let mut kept = VecDeque::new();
        for (f, invalidation) in self.frames.drain(..) {
            if invalidation && !invalidations {
                kept.push_back((f, invalidation));
            } else {
                out.extend_from_slice(&f);
            }
        }
        self.bytes = kept.iter().map(|(f, _)| f.len()).sum();
        self.frames = kept;
    }
}

/// A publish's progress: receivers counted, whether the network must be woken.
#[derive(Default)]
struct Delivery {
    now_ns: u64,
    receivers: usize,
    woke: bool,
}

impl Delivery {
    /// Appends the message to `client`'s mail (`invalidation`: a tracking invalidation),
    /// or marks it overflowed past a bound.
    fn deliver(
        &mut self,
        inner: &mut Inner,
        client: Client,
        frames: &mut Frames,
        invalidation: bool,
        write: impl Fn(&mut Vec<u8>, Protocol),
    ) {
        self.receivers += 1;
        let total = inner.mail_bytes;
        let Some(sub) = inner.subscribers.get_mut(&client) else {
            debug_assert!(false, "a subscription without its subscriber");
            return;
        };
        if sub.overflowed {
            return;
        }
        let frame = frames.of(sub.protocol, write);
        let had_mail = sub.mail.bytes > 0;
        let len = sub.mail.bytes + frame.len();
        let limits = inner.limits;
        let soft_expired = limits.soft_bytes > 0 && len > limits.soft_bytes && {
            let since_ns = *sub.soft_since_ns.get_or_insert(self.now_ns);
            self.now_ns.saturating_sub(since_ns) >= limits.soft_seconds * 1_000_000_000
        };
        let hard = limits.hard_bytes > 0 && len > limits.hard_bytes;
        if hard || total + frame.len() > MAIL_TOTAL_BYTES || soft_expired {
            sub.overflowed = true;
            inner.mail_bytes -= sub.mail.bytes;
            sub.mail = Queued::default();
            inner.ready.push(client);
            self.woke = true;
            return;
        }
        inner.mail_bytes += frame.len();
        sub.mail.push(frame, invalidation);
        if !had_mail {
            inner.ready.push(client);
            self.woke = true;
        }
    }
}

impl Hub {
    /// The names subscribed to of `kind` (`PUBSUB CHANNELS`, `SHARDCHANNELS`), those matching
    /// `pattern` when given.
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let inner = self.lock();
        inner.by_name[kind.index()]
            .keys()
            .filter(|n| pattern.is_none_or(|p| crate::glob::matches(p, n)))
            .cloned()
            .collect()
    }

    /// The receivers a publish on `channel` reaches now (each matching subscription).
    pub fn receivers(&self, channel: &[u8], shard: bool) -> usize {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let inner = self.lock();
        if shard {
            return inner.by_name[Kind::Shard.index()]
                .get(channel)
                .map_or(0, Vec::len);
        }
        let direct = inner.by_name[Kind::Channel.index()]
            .get(channel)
            .map_or(0, Vec::len);
        let by_pattern: usize = inner.by_name[Kind::Pattern.index()]
            .iter()
            .filter(|(p, _)| crate::glob::matches(p, channel))
            .map(|(_, c)| c.len())
            .sum();
        direct + by_pattern
    }

    /// Subscribers of `name` (`PUBSUB NUMSUB`, `SHARDNUMSUB`).
    pub fn numsub(&self, kind: Kind, name: &[u8]) -> usize {
        self.lock().by_name[kind.index()]
            .get(name)
            .map_or(0, Vec::len)
    }

    /// Distinct names subscribed to of `kind` (`PUBSUB NUMPAT` for patterns; `INFO`).
    pub fn len(&self, kind: Kind) -> usize {
        if self.subscribers.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        self.lock().by_name[kind.index()].len()
    }

    /// Keyspace events a transaction left out past its effects' bound.
    pub fn count_dropped_events(&self, events: u64) {
        if events > 0 {
            self.dropped_events.fetch_add(events, Ordering::Relaxed);
        }
    }

    /// Keyspace events left out so far (`INFO stats` `tamer_notifications_dropped`).
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events.load(Ordering::Relaxed)
    }

    /// Bytes of mail held for all subscribers.
    #[cfg(test)]
    pub fn mail_bytes(&self) -> usize {
        self.lock().mail_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Client = (1, 1);
    const B: Client = (2, 1);

    fn hub() -> Hub {
        Hub::default()
    }

    /// Mutation caught: counting a client once however many of its subscriptions match, or
    /// sending patterns' messages before the channel's.
    #[test]
    fn a_publish_counts_every_matching_subscription_channel_first() {
        let h = hub();
        h.subscribe(A, Protocol::Resp2, Kind::Pattern, b"n*");
        h.subscribe(A, Protocol::Resp2, Kind::Channel, b"news");
        h.subscribe(B, Protocol::Resp3, Kind::Pattern, b"*s");
        assert_eq!(h.publish(b"news", b"hi", false), 3);
        let a = h.take_mail(A).bytes;
        let mut want = Vec::new();
        message(&mut want, Protocol::Resp2, "message", None, b"news", b"hi");
        message(
            &mut want,
            Protocol::Resp2,
            "pmessage",
            Some(b"n*"),
            b"news",
            b"hi",
        );
        assert_eq!(a, want);
        let mut want_b = Vec::new();
        message(
            &mut want_b,
            Protocol::Resp3,
            "pmessage",
            Some(b"*s"),
            b"news",
            b"hi",
        );
        assert_eq!(h.take_mail(B).bytes, want_b);
        assert_eq!(h.publish(b"other", b"x", false), 0);
    }

    /// Mutation caught: shard channels reached by PUBLISH, or patterns by SPUBLISH.
    #[test]
    fn shard_channels_are_apart() {
        let h = hub();
        h.subscribe(A, Protocol::Resp2, Kind::Shard, b"s");
        h.subscribe(B, Protocol::Resp2, Kind::Pattern, b"*");
        assert_eq!(h.publish(b"s", b"x", true), 1);
        assert_eq!(h.publish(b"s", b"x", false), 1);
        assert_eq!(h.names(Kind::Shard, None), vec![b"s".to_vec()]);
        assert_eq!(
            h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c"),
            (true, 1)
        );
        assert_eq!(
            h.subscribe(A, Protocol::Resp2, Kind::Shard, b"t"),
            (true, 2)
        );
    }

    /// Mutation caught: a second subscription to the same name counted or listed twice.
    #[test]
    fn subscribing_twice_changes_nothing() {
        let h = hub();
        assert_eq!(
            h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c"),
            (true, 1)
        );
        assert_eq!(
            h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c"),
            (false, 1)
        );
        assert_eq!(h.numsub(Kind::Channel, b"c"), 1);
        assert_eq!(h.publish(b"c", b"x", false), 1);
    }

    /// Mutation caught: mail lost when the last unsubscribe removes the subscriber, or kept
    /// in the hub's byte count.
    #[test]
    fn the_last_unsubscribe_hands_over_the_mail_left() {
        let h = hub();
        h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c");
        h.publish(b"c", b"x", false);
        let mut out = Vec::new();
        assert_eq!(h.unsubscribe(A, Kind::Channel, b"c", &mut out), (true, 0));
        assert!(!out.is_empty());
        assert_eq!(h.mail_bytes(), 0);
        assert_eq!(h.len(Kind::Channel), 0);
        assert_eq!(h.unsubscribe(A, Kind::Channel, b"c", &mut out), (false, 0));
    }

    /// Mutation caught: a removed client still reached, or its names left behind.
    #[test]
    fn removal_forgets_everything() {
        let h = hub();
        h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c");
        h.subscribe(A, Protocol::Resp2, Kind::Pattern, b"p*");
        h.subscribe(B, Protocol::Resp2, Kind::Channel, b"c");
        h.publish(b"c", b"x", false);
        h.remove(A);
        assert_eq!(h.publish(b"c", b"x", false), 1);
        assert_eq!(h.len(Kind::Pattern), 0);
        assert_eq!(h.counts(A), [0, 0, 0]);
        assert_eq!(h.counts(B), [1, 0, 0]);
    }

    /// Mutation caught: mail growing past the hard bound instead of overflowing the
    /// subscriber, or an overflowed subscriber still queueing mail.
    #[test]
    fn mail_past_the_hard_bound_overflows_the_subscriber() {
        let h = hub();
        h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c");
        let payload = vec![b'x'; 1 << 20];
        for _ in 0..40 {
            assert_eq!(h.publish(b"c", &payload, false), 1);
        }
        // Listed when its mail started and again when it overflowed (the network may have
        // skipped it the first time, busy).
        assert_eq!(h.take_ready(), vec![A, A]);
        assert!(h.overflowed(A));
        let mail = h.take_mail(A);
        assert!(mail.overflowed);
        assert!(mail.bytes.is_empty());
        assert_eq!(h.mail_bytes(), 0);
    }

    /// Mutation caught: a tracking invalidation taken while its client's command runs
    /// (it must follow that command's reply), or its frame not Redis's push.
    #[test]
    fn invalidations_wait_for_the_command_and_messages_do_not() {
        let h = hub();
        h.subscribe(A, Protocol::Resp3, Kind::Channel, b"c");
        let notice = Notice {
            id: 1,
            target: super::super::tracking::Target {
                client: A,
                protocol: Protocol::Resp3,
                redirect: None,
            },
            keys: Keys::Some(vec![b"k".to_vec()]),
        };
        h.deliver_notices(vec![notice]);
        h.publish(b"c", b"x", false);
        let mut want = Vec::new();
        message(&mut want, Protocol::Resp3, "message", None, b"c", b"x");
        assert_eq!(h.take_messages(A).bytes, want);
        assert_eq!(
            h.take_mail(A).bytes,
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n".to_vec()
        );
        assert_eq!(h.mail_bytes(), 0);
    }

    /// Mutation caught: the network woken (or a client listed ready) for every message
    /// instead of when its mail starts.
    #[test]
    fn a_client_is_ready_once_per_batch_of_mail() {
        let h = hub();
        let wakes = std::sync::Arc::new(AtomicUsize::new(0));
        let w = wakes.clone();
        h.set_waker(Box::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        h.subscribe(A, Protocol::Resp2, Kind::Channel, b"c");
        h.publish(b"c", b"1", false);
        h.publish(b"c", b"2", false);
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        assert_eq!(h.take_ready(), vec![A]);
        assert!(h.take_ready().is_empty());
        h.take_mail(A);
        h.publish(b"c", b"3", false);
        assert_eq!(h.take_ready(), vec![A]);
    }
}
