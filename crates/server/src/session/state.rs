//! The session's state and its entry point: [`Session::run`] passes a request through the
//! gate, runs it where the table says, and records it (command counters, errors, slow log,
//! latency monitor, the client registry's entry).

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tamer_store::DbHandle;

use crate::commands::gate::{self, Refusal, Snapshot, Verdict};
use crate::commands::scripting::Scripts;
use crate::commands::spec::{Command, Flags, Run, SessionOp, TamerFlags};
use crate::keyspace::dbmap::DbMap;
use crate::keyspace::watches::Watches;
use crate::pubsub::{monitor_line, Client, Hub, MonitorSource};
use crate::resp::{write, Protocol};
use crate::stats::clients::ClientEntry;
use crate::stats::monitor::{Call, Outcome, SlowEntry};
use crate::stats::ServerStats;

/// Most commands `MULTI` queues (past it the transaction is refused at `EXEC`).
pub const MAX_QUEUED: usize = 65_536;
/// Most keys one connection watches.
pub const MAX_WATCHED: usize = 4_096;
/// Most bytes of an unknown command's name (or subcommand) in its label.
const LABEL_BYTES_MAX: usize = 32;

/// A tracking client's mode, as its session keeps it (the prefixes are the hub's).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Tracking {
    pub(super) bcast: bool,
    pub(super) optin: bool,
    pub(super) optout: bool,
    pub(super) noloop: bool,
    /// `REDIRECT`'s client ID (0: none).
    pub(super) redirect: u64,
    /// `CLIENT CACHING` was given for the next command (Redis's
    /// `CLIENT_TRACKING_CACHING`).
    pub(super) caching: bool,
}

/// A connection's state (see the module docs).
#[derive(Debug)]
pub struct Session {
    /// The selected database.
    pub db: usize,
    /// RESP2 or RESP3 (`HELLO`).
    pub protocol: Protocol,
    /// Inside `MULTI`: the queued commands.
    pub(super) multi: Option<Multi>,
    /// Watched keys: ([database u32 BE][key], fingerprint, version when watched).
    pub(super) watched: Vec<(Vec<u8>, Option<u64>, u64)>,
    /// `QUIT` was asked (or the client killed itself): reply, then close.
    pub quit: bool,
    pub(super) watches: Arc<Watches>,
    /// `CLIENT ID`.
    pub id: u64,
    /// `CLIENT SETNAME`.
    pub(super) name: Option<Vec<u8>>,
    /// Whether this client authenticated (or its user needs no password).
    pub(super) authenticated: bool,
    /// Its ACL user, as of [`Session::acl_epoch`].
    pub(super) user: Arc<crate::acl::User>,
    /// The ACL's epoch when `user` was read (a change of the users reads it again).
    pub(super) acl_epoch: u64,
    /// `user` may not run everything: requests are checked.
    pub(super) restricted: bool,
    pub(super) stats: Arc<ServerStats>,
    /// Its entry in the connection registry (`None` for a session without a connection).
    pub(super) entry: Option<Arc<ClientEntry>>,
    /// `CLIENT NO-EVICT`.
    pub(super) no_evict: bool,
    /// A blocking pop that found nothing and waits (the network keeps the connection's other
    /// requests until it replies).
    pub blocked: Option<Blocked>,
    /// The server's scripts.
    pub(super) scripts: Arc<Scripts>,
    /// The server's pub/sub hub, and this connection as the hub names it.
    pub(super) pubsub: Arc<Hub>,
    pub(super) client: Client,
    /// Its subscriptions: channels, patterns, shard channels (the hub's, mirrored).
    pub(super) subscriptions: [usize; 3],
    /// `MONITOR` mode: every command run reaches its mail.
    pub(super) monitor: bool,
    /// `CLIENT REPLY`'s state.
    pub(super) replies: ReplyMode,
    /// `CLIENT TRACKING`'s mode (`None`: off).
    pub(super) tracking: Option<Tracking>,
}

/// Which replies `CLIENT REPLY` silences (Redis's `CLIENT_REPLY_OFF`, `_SKIP_NEXT`, `_SKIP`).
/// Pub/sub's confirmations and messages go out regardless, as Redis pushes them.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ReplyMode {
    /// `OFF`: no replies until `ON`.
    pub(super) off: bool,
    /// `SKIP` was the last command: the next one's reply is silenced.
    pub(super) skip_next: bool,
    /// This command's reply is silenced (`SKIP` came before it).
    pub(super) skip: bool,
}

/// The server's parts a session works with.
#[derive(Clone, Debug)]
pub struct Services {
    pub watches: Arc<Watches>,
    pub stats: Arc<ServerStats>,
    pub scripts: Arc<Scripts>,
    pub pubsub: Arc<Hub>,
}

#[cfg(test)]
impl Services {
    /// Fresh parts around `stats`, for tests.
    pub fn new(stats: Arc<ServerStats>) -> Self {
        Self {
            watches: Arc::default(),
            stats,
            scripts: Arc::default(),
            pubsub: Arc::default(),
        }
    }
}

/// `MULTI`'s queue, and whether a command was refused while queueing (`EXEC` then fails).
#[derive(Debug, Default)]
pub(super) struct Multi {
    pub(super) queued: Vec<(&'static Command, Vec<Vec<u8>>)>,
    pub(super) dirty: bool,
    /// A queued command writes or may replicate (`CLIENT PAUSE WRITE` holds `EXEC` back):
    /// kept as commands are queued, so the gate does not scan the queue at every request.
    pub(super) writes: bool,
}

/// A blocked command (`BLPOP` ...) of this session.
#[derive(Debug)]
pub struct Blocked {
    /// The command and its arguments, run again when a write readies it.
    pub command: &'static Command,
    /// Its arguments (the name first).
    pub args: Vec<Vec<u8>>,
    /// Its keys as the watches name them (`[database u32 BE][key]`).
    pub keys: Vec<Vec<u8>>,
    /// When it times out (`tamer_device::now_ns`); `None`: never.
    pub deadline_ns: Option<u64>,
    /// What its attempt replied when it found nothing (a retry that replies the same
    /// found nothing again).
    pub empty_reply: Vec<u8>,
    /// Its reply when its time is up (or `CLIENT UNBLOCK` ends it): a null array, as Redis
    /// replies to every blocked list and sorted-set command, `BLMOVE` included.
    pub timeout_reply: Vec<u8>,
    /// Held back by `CLIENT PAUSE` (not run yet: its request waits with the connection's
    /// others and passes the gate again when the pause ends, without a reply of its own).
    pub postponed: bool,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.unwatch_all();
        if self.tracking.is_some() {
            self.pubsub.tracking.disable(self.id);
        }
        // The hub may hold it for tracking invalidations whatever the session did.
        self.pubsub.remove(self.client);
    }
}

impl Session {
    /// A new connection's session, in database 0, on the server's `services` (its registry
    /// entry, if the connection is registered, found in their stats). `client` is its
    /// connection's slot and generation; the generation is its `CLIENT ID`.
    pub fn new(services: &Services, client: Client) -> Self {
        let Services {
            watches,
            stats,
            scripts,
            pubsub,
        } = services.clone();
        let id = u64::from(client.1);
        let acl_epoch = stats.acl.epoch();
        let user = stats.acl.user(b"default").expect("the default user exists");
        Self {
            db: 0,
            protocol: Protocol::Resp2,
            multi: None,
            blocked: None,
            watched: Vec::new(),
            quit: false,
            watches,
            id,
            name: None,
            authenticated: user.enabled && user.nopass,
            restricted: !crate::acl::unrestricted(&user),
            user,
            acl_epoch,
            entry: stats.clients.get(id),
            stats,
            no_evict: false,
            scripts,
            pubsub,
            client,
            subscriptions: [0; 3],
            monitor: false,
            replies: ReplyMode::default(),
            tracking: None,
        }
    }

    /// Whether it subscribes to anything (of any kind).
    pub fn subscribed(&self) -> bool {
        self.subscriptions.iter().any(|&n| n > 0)
    }

    /// The hub holds mail for this client: it subscribes to something, monitors, or
    /// tracks (a redirect client that the hub holds mail for is known to the network).
    pub fn receives_mail(&self) -> bool {
        self.subscribed() || self.monitor || self.tracking.is_some()
    }

    /// What the gate knows of this client and the server now.
    fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            user: self.restricted.then_some(&*self.user),
            authenticated: self.authenticated,
            in_multi: self.multi.is_some(),
            blocked: self.blocked.is_some(),
            loading: self.stats.loading.load(Ordering::Relaxed),
            out_of_space: self.stats.out_of_space.load(Ordering::Relaxed),
            script_busy: self.scripts.busy(),
            monitor: self.monitor,
            pubsub_context: self.pubsub_context(),
            paused: self.stats.pause.now().map(|p| p.0),
            multi_writes: self.multi.as_ref().is_some_and(|m| m.writes),
        }
    }

    /// Runs one request, appending its reply, and records it. The request comes back when
    /// the gate keeps it waiting (this client is blocked): the caller runs it later.
    pub fn run(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        args: Vec<Vec<u8>>,
        out: &mut Vec<u8>,
    ) -> Option<Vec<Vec<u8>>> {
        let started = Instant::now();
        let waits_before = tamer_runtime::thread::waits();
        self.take_mail(out);
        self.refresh_user();
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let verdict = gate::decide(&refs, self.snapshot());
        if verdict == Verdict::Wait {
            return Some(args);
        }
        if let Verdict::Postpone(command) = verdict {
            self.postpone(command);
            return Some(args);
        }
        self.stats.commands.fetch_add(1, Ordering::Relaxed);
        let label = label(verdict, &refs);
        if let Some(entry) = &self.entry {
            let cmd = label.to_string();
            entry.update(|s| {
                s.cmd = cmd;
                s.last_active = started;
            });
        }
        let before = out.len();
        let rejected = match verdict {
            Verdict::Refuse(refusal) => {
                if let gate::Refusal::NoPerm(command, denied) = refusal {
                    let context = if self.multi.is_some() {
                        crate::acl::log::Context::Multi
                    } else {
                        crate::acl::log::Context::Toplevel
                    };
                    self.log_denial(command, denied, &refs, context);
                }
                refusal.write(&refs, out);
                if refusal.discards_multi() {
                    self.multi = None;
                    self.unwatch_all();
                } else {
                    self.flag_multi();
                }
                true
            }
            Verdict::Queue(command) => self.queue(command, &refs, out),
            Verdict::Run(command) => {
                // Scripts and functions are fed before they run, so that the commands they
                // call come after them (Redis's `evalCommand`); the others once they ran.
                let before_run = command.flags.contains(Flags::SKIP_MONITOR);
                if before_run {
                    self.feed_monitors(command, &refs, true);
                }
                self.execute(handle, map, command, &refs, out);
                if !before_run {
                    self.feed_monitors(command, &refs, false);
                }
                false
            }
            Verdict::Wait | Verdict::Postpone(_) => unreachable!("returned above"),
        };
        let queued = matches!(verdict, Verdict::Queue(_)) && !rejected;
        let secret = command_of(verdict).is_some_and(|c| c.tamer.contains(TamerFlags::SECRET_ARGS));
        drop(refs);
        // The slow log leaves out what may carry a password.
        let logged = (!secret).then_some(args);
        self.update_entry();
        if !queued {
            let waits = waits_since(waits_before);
            self.record(&label, logged, (started, waits), &out[before..], rejected);
        }
        self.silence(command_of(verdict), out, before);
        let client_command = command_of(verdict).is_some_and(|c| c.name.starts_with("client"));
        self.spend_caching(client_command);
        None
    }

    /// Feeds `MONITOR` clients this command (`explicit`: a script or function, before it
    /// runs), unless it is an administrative one, as Redis shows commands.
    fn feed_monitors(&self, command: &'static Command, args: &[&[u8]], explicit: bool) {
        if !self.pubsub.has_monitors() {
            return;
        }
        if Self::monitored(command, explicit) {
            self.pubsub.feed_monitors(&self.monitor_line(args, self.db));
        }
    }

    /// Whether `MONITOR` shows `command` (`explicit`: fed by itself before it runs, as
    /// scripts and functions are; the others after).
    pub(super) fn monitored(command: &Command, explicit: bool) -> bool {
        !command.flags.contains(Flags::ADMIN)
            && command.flags.contains(Flags::SKIP_MONITOR) == explicit
    }

    /// This client's `MONITOR` line for `args` run in database `db`.
    pub(super) fn monitor_line(&self, args: &[&[u8]], db: usize) -> Vec<u8> {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        monitor_line(now_us, db, MonitorSource::Client(&self.addr()), args)
    }

    /// This client's address, as `CLIENT LIST` shows it.
    pub(super) fn addr(&self) -> String {
        self.entry
            .as_ref()
            .map(|e| e.addr.clone())
            .unwrap_or_default()
    }

    /// Runs a command the gate let through, as the table says.
    fn execute(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        command: &'static Command,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        match command.run {
            Run::Session(op) => self.op(op, handle, map, args, out),
            Run::Container => unreachable!("a container alone is refused by its arity"),
            Run::Tx(_) | Run::WithTable(_) if command.flags.contains(Flags::BLOCKING) => {
                self.blocking(handle, map, command, args, out);
            }
            Run::Tx(_) | Run::WithTable(_) => self.one(handle, map, command, args, out),
        }
    }

    /// Drops this command's reply (from `before`) when `CLIENT REPLY` silences it, keeping
    /// pub/sub's confirmations; then the next command's state, as Redis's `resetClient`.
    fn silence(&mut self, command: Option<&'static Command>, out: &mut Vec<u8>, before: usize) {
        let pushes = command.is_some_and(|c| {
            matches!(
                c.run,
                Run::Session(
                    SessionOp::Subscribe
                        | SessionOp::Psubscribe
                        | SessionOp::Ssubscribe
                        | SessionOp::Unsubscribe
                        | SessionOp::Punsubscribe
                        | SessionOp::Sunsubscribe
                )
            )
        });
        if (self.replies.off || self.replies.skip) && !pushes {
            out.truncate(before);
        }
        self.replies.skip = std::mem::take(&mut self.replies.skip_next);
    }

    /// A refusal inside `MULTI` makes `EXEC` fail.
    pub(super) fn flag_multi(&mut self) {
        if let Some(multi) = self.multi.as_mut() {
            multi.dirty = true;
        }
    }

    /// The client registry's view of this session, after a command.
    pub(super) fn update_entry(&self) {
        let Some(entry) = &self.entry else {
            return;
        };
        let (name, db, resp) = (self.name.clone(), self.db, self.protocol);
        let (multi, no_evict) = (self.multi.as_ref().map(|m| m.queued.len()), self.no_evict);
        let subscriptions = self.subscriptions;
        let tracking = self.tracking.map(|t| (t.bcast, t.redirect));
        entry.update(|s| {
            s.tracking = tracking;
            s.subscriptions = subscriptions;
            s.name = name.unwrap_or_default();
            s.db = db;
            s.resp = if resp == Protocol::Resp3 { 3 } else { 2 };
            s.multi = multi;
            s.no_evict = no_evict;
        });
    }

    /// What `run` records once a command replied: `label` names it as commandstats does
    /// (`get`, `config|get`); `rejected`: the gate (or `MULTI`'s queue) refused it.
    fn record(
        &self,
        label: &str,
        args: Option<Vec<Vec<u8>>>,
        (started, waits): (Instant, tamer_runtime::thread::Waits),
        reply: &[u8],
        rejected: bool,
    ) {
        let took = started.elapsed();
        let monitor = &self.stats.monitor;
        let outcome = match reply.first() {
            Some(b'-') if rejected => Outcome::Rejected,
            Some(b'-') => Outcome::Failed,
            _ => Outcome::Ok,
        };
        if outcome != Outcome::Ok {
            monitor.record_error(reply);
        }
        let config = &self.stats.config;
        let call = Call {
            took,
            outcome,
            track_latency: config.latency_tracking(),
            waits,
        };
        monitor.record_call(label.as_bytes(), &call);
        let us = took.as_micros() as u64;
        let threshold_us = config.slowlog_slower_than_us();
        if let Some(args) = args.filter(|_| threshold_us >= 0 && us >= threshold_us as u64) {
            let entry = SlowEntry {
                id: 0,
                unix_secs: crate::keyspace::wall_ms() / 1000,
                duration_us: us,
                args,
                addr: self
                    .entry
                    .as_ref()
                    .map_or(String::new(), |e| e.addr.clone()),
                name: self.name.clone().unwrap_or_default(),
            };
            monitor.slowlog_push(entry, config.slowlog_max_len());
        }
        let threshold_ms = config.latency_threshold_ms();
        let ms = took.as_millis() as u64;
        if threshold_ms > 0 && ms >= threshold_ms {
            monitor.latency_add("command", crate::keyspace::wall_ms() / 1000, ms);
        }
    }

    /// The network core refused one of this client's requests with `-BUSY` (admission):
    /// inside `MULTI` the transaction will abort at `EXEC` (`EXECABORT`), as after a queueing
    /// error; a refused `EXEC`, `DISCARD` or `RESET` (`ends_multi`) ends it unrun.
    pub fn refused(&mut self, ends_multi: bool) {
        if ends_multi && self.multi.is_some() {
            self.multi = None;
            self.unwatch_all();
        } else {
            self.flag_multi();
        }
    }

    pub(super) fn unwatch_all(&mut self) {
        for (key, _, _) in self.watched.drain(..) {
            self.watches.unwatch(&key);
        }
    }
}

/// The command a verdict is about, if the table has it.
fn command_of(verdict: Verdict) -> Option<&'static Command> {
    match verdict {
        Verdict::Run(c) | Verdict::Queue(c) => Some(c),
        Verdict::Refuse(refusal) => refusal.command(),
        Verdict::Postpone(c) => Some(c),
        Verdict::Wait => None,
    }
}

/// A request as `CLIENT LIST`'s `cmd=` and commandstats name it: the table's name of its
/// command or subcommand, else its name as sent (lowercase, cut short).
fn label(verdict: Verdict, args: &[&[u8]]) -> Cow<'static, str> {
    let cut =
        |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(LABEL_BYTES_MAX)]).to_ascii_lowercase();
    match verdict {
        Verdict::Refuse(Refusal::UnknownCommand) => Cow::Owned(cut(args[0])),
        Verdict::Refuse(Refusal::UnknownSubcommand(c)) => {
            Cow::Owned(format!("{}|{}", c.name, cut(args[1])))
        }
        _ => match command_of(verdict) {
            Some(c) => Cow::Borrowed(c.name),
            None => Cow::Owned(cut(args[0])),
        },
    }
}

/// Redis's wrong-arity error for a command its handler checks itself.
pub(super) fn arity_error(out: &mut Vec<u8>, name: &str) {
    write::error(
        out,
        &format!("ERR wrong number of arguments for '{name}' command"),
    );
}

/// What the calling thread waited for since `before` (its job's waits then).
fn waits_since(before: tamer_runtime::thread::Waits) -> tamer_runtime::thread::Waits {
    let now = tamer_runtime::thread::waits();
    tamer_runtime::thread::Waits {
        device_ns: now.device_ns.saturating_sub(before.device_ns),
        commit_ns: now.commit_ns.saturating_sub(before.commit_ns),
        checkpoint_ns: now.checkpoint_ns.saturating_sub(before.checkpoint_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::dbmap::DbMap;
    use tamer_store::{Db, DbOptions, DeviceKind};

    fn reply(s: &mut Session, db: &Db, map: &Arc<DbMap>, words: &[&str]) -> String {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let map = map.clone();
        let mut session = std::mem::replace(
            s,
            Session::new(
                &Services::new(Arc::new(ServerStats::new(0, Arc::default(), &[]))),
                (0, 0),
            ),
        );
        let (session, out) = db
            .run(move |h| {
                let mut out = Vec::new();
                assert!(session.run(h, &map, args, &mut out).is_none());
                (session, out)
            })
            .unwrap();
        *s = session;
        String::from_utf8(out).unwrap()
    }

    /// A request refused with `-BUSY` inside `MULTI` aborts the transaction at `EXEC`, and a
    /// refused `EXEC` ends it unrun, so the session never runs what the client was told was
    /// refused. Mutations caught: `refused` ignored (EXEC commits the queued SET without the
    /// refused command, or later commands reply QUEUED after a refused EXEC).
    #[test]
    fn a_busy_refusal_inside_multi_aborts_or_ends_it() {
        let device = DeviceKind::Emulated {
            latency_ns: 1_000,
            capacity_bytes: 64 << 20,
        };
        let db = Db::open("unused", DbOptions::new(16 << 20).device(device).cores(1)).unwrap();
        let map = Arc::new(DbMap::new(std::array::from_fn(|i| i as u32 + 1)));
        let stats = Arc::new(ServerStats::new(0, Arc::default(), &[]));
        let mut s = Session::new(&Services::new(stats), (0, 1));
        assert_eq!(reply(&mut s, &db, &map, &["MULTI"]), "+OK\r\n");
        assert_eq!(reply(&mut s, &db, &map, &["SET", "a", "1"]), "+QUEUED\r\n");
        s.refused(false); // INCR b, refused on arrival
        assert!(reply(&mut s, &db, &map, &["EXEC"]).starts_with("-EXECABORT"));
        assert_eq!(reply(&mut s, &db, &map, &["GET", "a"]), "$-1\r\n");
        assert_eq!(reply(&mut s, &db, &map, &["MULTI"]), "+OK\r\n");
        assert_eq!(reply(&mut s, &db, &map, &["SET", "a", "1"]), "+QUEUED\r\n");
        s.refused(true); // EXEC, refused on arrival
        assert_eq!(reply(&mut s, &db, &map, &["SET", "a", "2"]), "+OK\r\n");
        assert_eq!(reply(&mut s, &db, &map, &["GET", "a"]), "$1\r\n2\r\n");
    }

    /// A full device, end to end through the session: the write the store refuses replies
    /// `-OOM`, the gate then refuses the commands that take space before they run, reads and
    /// deletes go on, and a write that succeeds lifts the refusal. Mutations caught: `NoSpace`
    /// replied as a plain `ERR`, the flag never set (the gate lets `SET` run into the store
    /// again) or never cleared (the server refuses writes for ever).
    #[test]
    fn a_full_device_replies_oom_and_keeps_reads_and_deletes() {
        let device = DeviceKind::Emulated {
            latency_ns: 1_000,
            capacity_bytes: 8 << 20,
        };
        let db = Db::open("unused", DbOptions::new(4 << 20).device(device).cores(1)).unwrap();
        let map = Arc::new(DbMap::new(std::array::from_fn(|i| i as u32 + 1)));
        let stats = Arc::new(ServerStats::new(0, Arc::default(), &[]));
        let mut s = Session::new(&Services::new(stats.clone()), (0, 1));
        let value = "v".repeat(64 << 10);
        let mut stored = 0;
        // Bounded: 8 MiB hold fewer than 128 values of 64 KiB.
        let refused = loop {
            let key = format!("k{stored}");
            let r = reply(&mut s, &db, &map, &["SET", &key, &value]);
            if r != "+OK\r\n" {
                break r;
            }
            stored += 1;
            assert!(stored < 1_000, "8 MiB took {stored} values of 64 KiB");
        };
        assert!(refused.starts_with("-OOM "), "{refused}");
        assert!(stats.out_of_space.load(Ordering::Relaxed));
        assert!(stored > 0, "nothing fitted");
        let again = reply(&mut s, &db, &map, &["SET", "small", "1"]);
        assert!(again.starts_with("-OOM "), "the gate refuses it: {again}");
        let read = reply(&mut s, &db, &map, &["GET", "k0"]);
        assert_eq!(read, format!("${}\r\n{value}\r\n", value.len()));
        let keys: Vec<String> = (0..stored).map(|i| format!("k{i}")).collect();
        let mut del = vec!["DEL"];
        del.extend(keys.iter().map(String::as_str));
        assert_eq!(reply(&mut s, &db, &map, &del), format!(":{stored}\r\n"));
        assert!(
            !stats.out_of_space.load(Ordering::Relaxed),
            "a write succeeded"
        );
        let after = reply(&mut s, &db, &map, &["SET", "small", "1"]);
        assert!(after == "+OK\r\n" || after.starts_with("-OOM "), "{after}");
        db.close().unwrap();
    }
}
