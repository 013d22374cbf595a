//! Commands in store transactions: one command in a transaction of its own ([`Session::one`]),
//! and `MULTI`'s queue, `WATCH` and `EXEC` (the queued commands in one transaction).

use std::cell::Cell;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tamer_store::{DbError, DbHandle, Tx};

use super::state::{arity_error, Multi, Session, MAX_QUEUED, MAX_WATCHED};
use crate::commands::gate::OUT_OF_SPACE;
use crate::commands::spec::{Command, Flags, Run, SessionOp, TamerFlags};
use crate::commands::table;
use crate::commands::Context;
use crate::keyspace::dbmap::{self, DbMap};
use crate::keyspace::scope::Scope;
use crate::keyspace::{store_key, KeyspaceError, DATABASES};
use crate::pubsub::Effects;
use crate::resp::{parse_i64, write, Protocol};
use crate::stats::monitor::{Call, Outcome};

/// The reply span of each command an `EXEC` ran, and the time it took.
type Spans = Vec<(std::ops::Range<usize>, Duration)>;

/// The fingerprint of a key's stored bytes (`None`: absent or expired).
fn fingerprint(
    tx: &mut Tx<'_>,
    key: &[u8],
    namespace: u32,
    now_ms: u64,
) -> Result<Option<u64>, DbError> {
    let user_key = &key[4..];
    match crate::keyspace::get(&Scope::detached(namespace, now_ms), tx, user_key) {
        Ok(None) => Ok(None),
        Ok(Some(entry)) => {
            let mut h = DefaultHasher::new();
            entry.encode().hash(&mut h);
            Ok(Some(h.finish()))
        }
        Err(KeyspaceError::Store(e)) => Err(e),
        Err(_) => Ok(Some(0)),
    }
}

/// What a committed `EXEC`'s transaction left: the replies, the database and `QUIT`, each
/// reply's span and time, the map, and what it publishes.
struct Executed {
    replies: Vec<u8>,
    db: usize,
    quit: bool,
    spans: Spans,
    namespaces: [u32; DATABASES],
    effects: Effects,
}

/// The database map's gate as a command holds it.
enum MapGate<'a> {
    Shared(dbmap::Shared<'a>),
    Exclusive(dbmap::Exclusive<'a>),
}

impl<'a> MapGate<'a> {
    fn enter(map: &'a DbMap, exclusive: bool) -> Self {
        if exclusive {
            MapGate::Exclusive(map.exclusive())
        } else {
            MapGate::Shared(map.shared())
        }
    }

    fn namespaces(&self) -> [u32; DATABASES] {
        match self {
            MapGate::Shared(g) => g.namespaces,
            MapGate::Exclusive(g) => g.namespaces,
        }
    }

    fn exclusive(&self) -> bool {
        matches!(self, MapGate::Exclusive(_))
    }

    /// Publishes the map a committed transaction left (it can change only under the
    /// exclusive gate) and leaves the gate.
    fn publish(self, namespaces: [u32; DATABASES]) {
        match self {
            MapGate::Exclusive(mut g) => {
                if g.namespaces != namespaces {
                    g.publish(namespaces);
                }
            }
            MapGate::Shared(g) => {
                assert_eq!(g.namespaces, namespaces, "map changed under a shared gate")
            }
        }
    }
}

/// What a command run in a transaction needs from the server.
struct Env<'a> {
    map: &'a Cell<[u32; DATABASES]>,
    map_exclusive: bool,
    protocol: Protocol,
    session: &'a Session,
    max_value_bytes: usize,
    effects: &'a Effects,
}

impl Env<'_> {
    /// The context of a command on database `db`.
    fn context(&self, db: usize) -> Context<'_> {
        Context {
            scope: Scope {
                namespace: self.map.get()[db],
                db,
                now_ms: crate::keyspace::wall_ms(),
                watches: Some(&self.session.watches),
                lookups: Some(&self.session.stats.lookups),
                events: Some(self.effects),
                config: Some(&self.session.stats.config),
            },
            map: self.map,
            map_exclusive: self.map_exclusive,
            protocol: self.protocol,
            max_value_bytes: self.max_value_bytes,
            stats: &self.session.stats,
            scripts: &self.session.scripts,
            pubsub: &self.session.pubsub,
            effects: self.effects,
            pubsub_context: self.session.pubsub_context(),
            caller: self.session.acl_caller(),
        }
    }
}

/// Runs a command of the store in `tx` (`Tx` and `WithTable` handlers).
fn run_handler(
    command: &'static Command,
    ctx: &Context<'_>,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result<(), DbError> {
    match command.run {
        Run::Tx(handler) => handler(ctx, tx, args, out)?,
        Run::WithTable(handler) => handler(&table::TABLE, ctx, tx, args, out)?,
        Run::Session(_) | Run::Container => unreachable!("{command:?} runs on the session"),
    }
    remember_reads(command, ctx, args);
    Ok(())
}

/// A read-only command's keys are remembered for client-side caching when its caller's
/// reads are (scripts' own keys aside: the commands they call count, as Redis's).
fn remember_reads(command: &Command, ctx: &Context<'_>, args: &[&[u8]]) {
    if !ctx.effects.remembers()
        || !command.flags.contains(Flags::READONLY)
        || command.flags.contains(Flags::NOSCRIPT)
    {
        return;
    }
    if let Ok(positions) = command.keys(args, true) {
        let keys: Vec<&[u8]> = positions.iter().map(|(p, _)| args[*p]).collect();
        ctx.effects.read_keys(&keys);
    }
}

/// A queued command that changes the session rather than the store runs once the
/// transaction commits (`CLIENT`, `HELLO`, `AUTH`); `SELECT`, `QUIT` and `UNWATCH` run in it.
fn runs_after_commit(command: &Command) -> bool {
    matches!(command.run, Run::Session(op) if !matches!(op, SessionOp::Select | SessionOp::Quit | SessionOp::Unwatch))
}

impl Session {
    /// A transaction failed: Redis's error for it (`-OOM` when the device is full, which the
    /// gate then applies to the commands that take space until a write succeeds).
    fn store_failure(&self, err: DbError, out: &mut Vec<u8>) {
        if matches!(err, DbError::NoSpace { .. }) {
            self.stats.out_of_space.store(true, Ordering::Relaxed);
            write::error(out, OUT_OF_SPACE);
        } else {
            write::error(out, &format!("ERR {err}"));
        }
    }

    /// A write committed: the device had room.
    fn wrote(&self, command: &Command) {
        if command.flags.contains(Flags::WRITE) && self.stats.out_of_space.load(Ordering::Relaxed) {
            self.stats.out_of_space.store(false, Ordering::Relaxed);
        }
    }

    /// Runs one command of the store in a transaction of its own, inside the database map's
    /// gate (exclusive for a command that changes the map).
    pub(super) fn one(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        command: &'static Command,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        let gate = MapGate::enter(map, command.tamer.contains(TamerFlags::CHANGES_MAP));
        let (db, protocol, caller) = (self.db, self.protocol, self.caller());
        let result = handle.transaction(|tx| {
            let map = Cell::new(gate.namespaces());
            let caller = self.caller_now(caller);
            let effects = Effects::for_caller(self.stats.config.keyspace_events(), caller);
            let run = Env {
                map: &map,
                map_exclusive: gate.exclusive(),
                protocol,
                session: self,
                max_value_bytes: handle.max_value_bytes(),
                effects: &effects,
            };
            let mut reply = Vec::new();
            run_handler(command, &run.context(db), tx, args, &mut reply)?;
            Ok((reply, map.get(), effects))
        });
        match result {
            Ok((reply, namespaces, effects)) => {
                gate.publish(namespaces);
                // A client that publishes to itself gets the message before the reply (its
                // tracking invalidations after it: `crate::pubsub::tracking`).
                effects.apply(&self.pubsub);
                self.take_messages(out);
                out.extend_from_slice(&reply);
                self.wrote(command);
            }
            Err(err) => self.store_failure(err, out),
        }
    }

    /// Queues a command inside `MULTI` (the gate checked it): whether it was refused (the
    /// queue is full: the transaction fails at `EXEC`).
    pub(super) fn queue(
        &mut self,
        command: &'static Command,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> bool {
        let multi = self
            .multi
            .as_mut()
            .expect("the gate queues only inside MULTI");
        if multi.queued.len() >= MAX_QUEUED {
            write::error(out, "ERR too many commands queued in MULTI");
            multi.dirty = true;
            return true;
        }
        multi.writes |= crate::commands::gate::writes_or_replicates(command);
        multi
            .queued
            .push((command, args.iter().map(|a| a.to_vec()).collect()));
        write::simple(out, "QUEUED");
        false
    }

    /// `MULTI`.
    pub(super) fn multi(&mut self, out: &mut Vec<u8>) {
        if self.multi.is_some() {
            write::error(out, "ERR MULTI calls can not be nested");
            return;
        }
        self.multi = Some(Multi::default());
        write::simple(out, "OK");
    }

    /// `DISCARD`.
    pub(super) fn discard(&mut self, out: &mut Vec<u8>) {
        if self.multi.take().is_none() {
            write::error(out, "ERR DISCARD without MULTI");
            return;
        }
        self.unwatch_all();
        write::simple(out, "OK");
    }

    /// `WATCH key [key ...]`: each key read (its fingerprint) and registered.
    pub(super) fn watch(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        keys: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        if self.multi.is_some() {
            write::error(out, "ERR WATCH inside MULTI is not allowed");
            return;
        }
        if self.watched.len() + keys.len() > MAX_WATCHED {
            write::error(out, "ERR too many watched keys");
            return;
        }
        let gate = map.shared();
        let namespace = gate.namespaces[self.db];
        let now = crate::keyspace::wall_ms();
        // Watched by database, as Redis watches them: a swap or flush moves the database to
        // another namespace, and the watch follows the database.
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| store_key(self.db as u32, k)).collect();
        let result = handle.transaction(|tx| {
            keys.iter()
                .map(|k| Ok((k.clone(), fingerprint(tx, k, namespace, now)?)))
                .collect::<Result<Vec<_>, DbError>>()
        });
        let prints = match result {
            Ok(prints) => prints,
            Err(err) => return self.store_failure(err, out),
        };
        for (key, print) in prints {
            let Some(version) = self.watches.watch(&key) else {
                write::error(out, "ERR too many watched keys");
                return;
            };
            self.watched.push((key, print, version));
        }
        write::simple(out, "OK");
    }

    /// `EXEC`: the queued commands in one transaction, unless a watched key moved.
    pub(super) fn exec(&mut self, handle: &DbHandle, map: &DbMap, out: &mut Vec<u8>) {
        let Some(Multi { queued, dirty, .. }) = self.multi.take() else {
            write::error(out, "ERR EXEC without MULTI");
            return;
        };
        if dirty {
            self.unwatch_all();
            write::error(
                out,
                "EXECABORT Transaction discarded because of previous errors.",
            );
            return;
        }
        let changes_map = queued
            .iter()
            .any(|(c, _)| c.tamer.contains(TamerFlags::CHANGES_MAP));
        let denials = self.exec_denials(&queued);
        let gate = MapGate::enter(map, changes_map);
        let result =
            handle.transaction(|tx| self.exec_attempt(handle, &gate, tx, &queued, &denials));
        self.unwatch_all();
        match result {
            Ok(Some(Executed {
                replies,
                db,
                quit,
                spans,
                namespaces,
                effects,
            })) => {
                gate.publish(namespaces);
                effects.apply(&self.pubsub);
                self.take_messages(out);
                self.db = db;
                self.quit |= quit;
                let (replies, spans) = self.run_after_commit(handle, map, &queued, replies, spans);
                self.record_queued(&queued, &replies, spans);
                write::array(out, queued.len());
                out.extend_from_slice(&replies);
                if queued.iter().any(|(c, _)| c.flags.contains(Flags::WRITE)) {
                    self.stats.out_of_space.store(false, Ordering::Relaxed);
                }
            }
            Ok(None) => write::null_array(out, self.protocol),
            Err(err) => self.store_failure(err, out),
        }
    }

    /// One attempt of an `EXEC`'s transaction: `None` when a watched key moved.
    fn exec_attempt(
        &self,
        handle: &DbHandle,
        gate: &MapGate<'_>,
        tx: &mut Tx<'_>,
        queued: &[(&'static Command, Vec<Vec<u8>>)],
        denials: &[Option<crate::acl::Denied>],
    ) -> Result<Option<Executed>, DbError> {
        let now = crate::keyspace::wall_ms();
        for (key, print, version) in &self.watched {
            let db = u32::from_be_bytes(key[..4].try_into().expect("4 bytes"));
            let namespace = gate.namespaces()[db as usize];
            // Read first: the key's lock is held from here to the commit.
            let print_now = fingerprint(tx, key, namespace, now)?;
            if print_now != *print || self.watches.version(key) != *version {
                return Ok(None);
            }
        }
        let map = Cell::new(gate.namespaces());
        let caller = self.caller_now(self.caller());
        let effects = Effects::for_caller(self.stats.config.keyspace_events(), caller);
        let run = Env {
            map: &map,
            map_exclusive: gate.exclusive(),
            protocol: self.protocol,
            session: self,
            max_value_bytes: handle.max_value_bytes(),
            effects: &effects,
        };
        let (mut replies, mut db, mut quit) = (Vec::new(), self.db, false);
        let mut spans = Vec::with_capacity(queued.len());
        let monitors = self.pubsub.has_monitors();
        for ((command, args), denied) in queued.iter().zip(denials) {
            let (at, started) = (replies.len(), Instant::now());
            if let Some(denied) = denied {
                write::error(&mut replies, &denied.noperm_at_exec());
                spans.push((at..replies.len(), started.elapsed()));
                continue;
            }
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            // `MONITOR` lines go out with the commit, in the order the commands ran.
            if monitors && Self::monitored(command, true) {
                effects.monitor(self.monitor_line(&refs, db));
            }
            match command.run {
                Run::Session(SessionOp::Select) => select(&mut db, &refs, &mut replies),
                Run::Session(SessionOp::Quit) => {
                    write::simple(&mut replies, "OK");
                    quit = true;
                }
                // By EXEC the watches are already spent.
                Run::Session(SessionOp::Unwatch) => write::simple(&mut replies, "OK"),
                _ if runs_after_commit(command) => {}
                _ => run_handler(command, &run.context(db), tx, &refs, &mut replies)?,
            }
            if monitors && Self::monitored(command, false) {
                effects.monitor(self.monitor_line(&refs, db));
            }
            spans.push((at..replies.len(), started.elapsed()));
        }
        Ok(Some(Executed {
            replies,
            db,
            quit,
            spans,
            namespaces: map.get(),
            effects,
        }))
    }

    /// The replies of a committed `EXEC` with its session commands (`CLIENT`, `HELLO`,
    /// `AUTH`) run, in their places, on this session (they were left out of the transaction,
    /// whose replies are `replies`).
    fn run_after_commit(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        queued: &[(&'static Command, Vec<Vec<u8>>)],
        replies: Vec<u8>,
        spans: Spans,
    ) -> (Vec<u8>, Spans) {
        if !queued.iter().any(|(c, _)| runs_after_commit(c)) {
            return (replies, spans);
        }
        let mut out = Vec::with_capacity(replies.len());
        let mut placed = Vec::with_capacity(spans.len());
        for ((command, args), (span, took)) in queued.iter().zip(spans) {
            let at = out.len();
            match command.run {
                // A session command replied inside the transaction only if ACLs denied it.
                Run::Session(op) if runs_after_commit(command) && span.is_empty() => {
                    let started = Instant::now();
                    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                    if op == SessionOp::Ssubscribe {
                        // Redis denies it inside EXEC (SUBSCRIBE and PSUBSCRIBE are let
                        // through for compatibility).
                        write::error(
                            &mut out,
                            "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client",
                        );
                    } else {
                        self.op(op, handle, map, &refs, &mut out);
                    }
                    placed.push((at..out.len(), started.elapsed()));
                }
                _ => {
                    out.extend_from_slice(&replies[span]);
                    placed.push((at..out.len(), took));
                }
            }
        }
        (out, placed)
    }

    /// Counts the commands an `EXEC` ran (calls, failures, errors), as Redis counts each
    /// queued command besides `EXEC` itself.
    fn record_queued(
        &self,
        queued: &[(&'static Command, Vec<Vec<u8>>)],
        replies: &[u8],
        spans: Spans,
    ) {
        let monitor = &self.stats.monitor;
        let track_latency = self.stats.config.latency_tracking();
        for ((command, _), (span, took)) in queued.iter().zip(spans) {
            let reply = &replies[span];
            let outcome = if reply.first() == Some(&b'-') {
                monitor.record_error(reply);
                Outcome::Failed
            } else {
                Outcome::Ok
            };
            let call = Call {
                took,
                outcome,
                track_latency,
                waits: tamer_runtime::thread::Waits::default(),
            };
            monitor.record_call(command.name.as_bytes(), &call);
        }
    }
}

/// `SELECT index` on the database `db` (the session's, or an `EXEC`'s as it runs).
pub(super) fn select(db: &mut usize, args: &[&[u8]], out: &mut Vec<u8>) {
    if args.len() != 2 {
        return arity_error(out, "select");
    }
    match parse_i64(args[1]) {
        Some(n) if (0..DATABASES as i64).contains(&n) => {
            *db = n as usize;
            write::simple(out, "OK");
        }
        Some(_) => write::error(out, "ERR DB index is out of range"),
        None => write::error(out, "ERR value is not an integer or out of range"),
    }
}
