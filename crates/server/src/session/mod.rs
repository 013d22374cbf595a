//! A connection's session: what its commands change besides the keyspace (the selected
//! database, `MULTI`'s queue, `WATCH`ed keys, `QUIT`), and the commands that act on it. The
//! network core moves a connection's session into each job that runs its requests and takes
//! it back with the replies, so one connection's requests always see the session in order.
//!
//! `MULTI` ... `EXEC` runs the queued commands in **one** store transaction: atomic, isolated
//! from every other client, and in `commit` mode durable when `EXEC` returns. As in Redis 7.0,
//! a command refused while queueing (unknown, wrong arity) makes `EXEC` fail with
//! `EXECABORT`, and a command that fails inside `EXEC` does not undo the others. `WATCH`
//! registers each key with the server's [`Watches`] (every write to it bumps its version) and
//! remembers a fingerprint of its stored bytes; `EXEC` reads the keys inside its transaction
//! (holding their locks) and aborts (a null reply) if a version moved (any write, as Redis's
//! `touchWatchedKey`) or the fingerprint changed (the key expired meanwhile). A writer bumps
//! the version before it commits, so a write racing `EXEC` may abort it where Redis, which
//! runs one command at a time, would have ordered the write after: never the other way.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use tamer_store::{DbError, DbHandle, Tx};

use std::sync::Arc;
use std::time::Instant;

use crate::stats::clients::ClientEntry;
use std::cell::Cell;

use crate::commands::{self, Context};
use crate::keyspace::dbmap::DbMap;
use crate::keyspace::scope::Scope;
use crate::keyspace::watches::Watches;
use crate::keyspace::{store_key, DATABASES};
use crate::resp::{parse_i64, write, Protocol};
use crate::stats::monitor::{Outcome, SlowEntry};
use crate::stats::ServerStats;

/// Most commands `MULTI` queues (past it the transaction is refused at `EXEC`).
pub const MAX_QUEUED: usize = 65_536;
/// Most keys one connection watches.
pub const MAX_WATCHED: usize = 4_096;

/// A connection's state (see the module docs).
#[derive(Debug)]
pub struct Session {
    pub db: usize,
    pub protocol: Protocol,
    /// Inside `MULTI`: the queued commands, and whether one was refused.
    multi: Option<(Vec<Vec<Vec<u8>>>, bool)>,
    /// Watched keys: ([database u32 BE][key], fingerprint, version when watched).
    watched: Vec<(Vec<u8>, Option<u64>, u64)>,
    /// `QUIT` was asked: reply, then close.
    pub quit: bool,
    watches: Arc<Watches>,
    /// `CLIENT ID`.
    pub id: u64,
    /// `CLIENT SETNAME`.
    name: Option<Vec<u8>>,
    /// Whether this client passed the server's `requirepass` (read from its settings).
    authenticated: bool,
    stats: Arc<ServerStats>,
    /// Its entry in the connection registry (`None` for a session without a connection).
    entry: Option<Arc<ClientEntry>>,
    /// `CLIENT NO-EVICT`.
    no_evict: bool,
    /// A blocking pop that found nothing and waits (`crate::keyspace::blocked`; the network keeps the
    /// connection's other requests until it replies).
    pub blocked: Option<Blocked>,
}

/// A blocked command (`BLPOP` ...) of this session.
#[derive(Debug)]
pub struct Blocked {
    pub args: Vec<Vec<u8>>,
    /// Its keys as `Watches` names them (`[database u32 BE][key]`).
    pub keys: Vec<Vec<u8>>,
    /// When it times out (`tamer_device::now_ns`); `None`: never.
    pub deadline_ns: Option<u64>,
    /// Its reply then.
    pub timeout_reply: Vec<u8>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.unwatch_all();
    }
}

/// The fingerprint of a key's stored bytes (`None`: absent or expired).
fn fingerprint(
    tx: &mut Tx<'_>,
    key: &[u8],
    namespace: u32,
    now_ms: u64,
) -> Result<Option<u64>, DbError> {
    let user_key = &key[4..];
    match crate::keyspace::get(tx, namespace, user_key, now_ms) {
        Ok(None) => Ok(None),
        Ok(Some(entry)) => {
            let mut h = DefaultHasher::new();
            entry.encode().hash(&mut h);
            Ok(Some(h.finish()))
        }
        Err(crate::keyspace::KeyspaceError::Store(e)) => Err(e),
        Err(_) => Ok(Some(0)),
    }
}

/// Redis's error for a client name with spaces or special characters.
const NAME_ERROR: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

/// A client name as Redis accepts it: printable ASCII without spaces.
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn arity_error(out: &mut Vec<u8>, name: &str) {
    write::error(
        out,
        &format!("ERR wrong number of arguments for '{name}' command"),
    );
}

impl Session {
    /// A new connection's session, in database 0, on the server's `watches` (its registry
    /// entry, if the connection `id` is registered, found in `stats`).
    pub fn new(watches: Arc<Watches>, id: u64, stats: Arc<ServerStats>) -> Self {
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
            authenticated: stats.config.requirepass().is_none(),
            entry: stats.clients.get(id),
            stats,
            no_evict: false,
        }
    }

    /// `AUTH [username] password` (`user` is `None` in the one-argument form) and `HELLO`'s
    /// `AUTH`, as Redis 7.0's `default` user (the only one): `None` when it passed, else the
    /// error reply's text.
    fn check_password(&mut self, user: Option<&[u8]>, pass: &[u8]) -> Option<&'static str> {
        const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
        if user.is_some_and(|u| u != b"default") {
            return Some(WRONGPASS);
        }
        match &self.stats.config.requirepass() {
            // No password: the default user takes any (`nopass`), but the old one-argument
            // form is refused, as Redis refuses it.
            None if user.is_none() => Some(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            ),
            None => {
                self.authenticated = true;
                None
            }
            Some(password) if pass == password.as_slice() => {
                self.authenticated = true;
                None
            }
            Some(_) => Some(WRONGPASS),
        }
    }

    /// `HELLO [protover [AUTH username password] [SETNAME name]]`.
    fn hello(&mut self, args: &[Vec<u8>], out: &mut Vec<u8>) {
        let mut protocol = self.protocol;
        if let Some(v) = args.get(1) {
            match parse_i64(v) {
                Some(2) => protocol = Protocol::Resp2,
                Some(3) => protocol = Protocol::Resp3,
                Some(_) => {
                    write::error(out, "NOPROTO unsupported protocol version");
                    return;
                }
                None => {
                    write::error(
                        out,
                        "ERR Protocol version is not an integer or out of range",
                    );
                    return;
                }
            }
        }
        let mut j = 2;
        let mut name = None;
        // Bounded: every pass consumes two or three arguments, or fails.
        while j < args.len() {
            let more = args.len() - j - 1;
            match &args[j].to_ascii_lowercase()[..] {
                b"auth" if more >= 2 => {
                    let (user, pass) = (args[j + 1].clone(), args[j + 2].clone());
                    if let Some(text) = self.check_password(Some(&user), &pass) {
                        write::error(out, text);
                        return;
                    }
                    j += 3;
                }
                b"setname" if more >= 1 => {
                    name = Some(args[j + 1].clone());
                    j += 2;
                }
                _ => {
                    let opt = String::from_utf8_lossy(&args[j]);
                    write::error(out, &format!("ERR Syntax error in HELLO option '{opt}'"));
                    return;
                }
            }
        }
        if !self.authenticated {
            write::error(
                out,
                "NOAUTH HELLO must be called with the client already authenticated, otherwise \
                 the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the \
                 client and select the RESP protocol version at the same time",
            );
            return;
        }
        if let Some(name) = name {
            if !valid_name(&name) {
                write::error(out, NAME_ERROR);
                return;
            }
            self.name = (!name.is_empty()).then_some(name);
        }
        self.protocol = protocol;
        write::map(out, 7, protocol);
        for (k, v) in [("server", "tamer"), ("version", crate::REDIS_VERSION)] {
            write::bulk(out, k.as_bytes());
            write::bulk(out, v.as_bytes());
        }
        write::bulk(out, b"proto");
        write::integer(out, if protocol == Protocol::Resp3 { 3 } else { 2 });
        write::bulk(out, b"id");
        write::integer(out, self.id as i64);
        for (k, v) in [("mode", "standalone"), ("role", "master")] {
            write::bulk(out, k.as_bytes());
            write::bulk(out, v.as_bytes());
        }
        write::bulk(out, b"modules");
        write::array(out, 0);
    }

    /// `CLIENT ID | SETNAME name | GETNAME` (the rest of `CLIENT` is not built yet).
    fn client(&mut self, args: &[Vec<u8>], out: &mut Vec<u8>) {
        let Some(sub) = args.get(1) else {
            arity_error(out, "client");
            return;
        };
        let lower = sub.to_ascii_lowercase();
        match (&lower[..], args.len()) {
            (b"id", 2) => write::integer(out, self.id as i64),
            (b"getname", 2) => match &self.name {
                Some(name) => write::bulk(out, name),
                None => write::null(out, self.protocol),
            },
            (b"setname", 3) if !valid_name(&args[2]) => write::error(out, NAME_ERROR),
            (b"setname", 3) => {
                self.name = (!args[2].is_empty()).then(|| args[2].clone());
                write::simple(out, "OK");
            }
            (b"list" | b"info" | b"kill" | b"no-evict", _) => {
                let effect =
                    crate::commands::server::client(&self.stats, self.protocol, self.id, args, out);
                let effect = effect.expect("a CLIENT subcommand admin serves");
                self.quit |= effect.close_me;
                if let Some(on) = effect.no_evict {
                    self.no_evict = on;
                }
            }
            (b"id" | b"getname" | b"setname", _) => {
                let sub = String::from_utf8_lossy(&lower);
                write::error(
                    out,
                    &format!("ERR wrong number of arguments for 'client|{sub}' command"),
                );
            }
            _ => {
                let sub = String::from_utf8_lossy(sub);
                write::error(
                    out,
                    &format!("ERR unknown subcommand '{sub}'. Try CLIENT HELP."),
                );
            }
        }
    }

    /// The network core refused one of this client's requests with `-BUSY` (admission):
    /// inside `MULTI` the transaction will abort at `EXEC` (`EXECABORT`), as after a queueing
    /// error; a refused `EXEC`, `DISCARD` or `RESET` (`ends_multi`) ends it unrun.
    pub fn refused(&mut self, ends_multi: bool) {
        if ends_multi && self.multi.is_some() {
            self.multi = None;
            self.unwatch_all();
        } else if let Some((_, dirty)) = self.multi.as_mut() {
            *dirty = true;
        }
    }

    fn unwatch_all(&mut self) {
        for (key, _, _) in self.watched.drain(..) {
            self.watches.unwatch(&key);
        }
    }

    /// Runs one request, appending its reply, and records it (command counters, errors,
    /// slow log, latency monitor, the registry's entry).
    pub fn run(&mut self, handle: &DbHandle, map: &DbMap, args: Vec<Vec<u8>>, out: &mut Vec<u8>) {
        let started = Instant::now();
        let before = out.len();
        let name = args[0].to_ascii_lowercase();
        // Inside MULTI, this request is queued (or refused at queueing), not run.
        let queueing = self.multi.is_some()
            && !matches!(
                &name[..],
                b"exec"
                    | b"discard"
                    | b"multi"
                    | b"watch"
                    | b"quit"
                    | b"hello"
                    | b"auth"
                    | b"reset"
                    | b"shutdown"
            );
        let label = command_label(&name, &args);
        if let Some(entry) = &self.entry {
            let cmd = label.clone();
            entry.update(|s| {
                s.cmd = cmd;
                s.last_active = started;
            });
        }
        self.dispatch(handle, map, &args, out);
        // The slow log leaves out what may carry a password.
        let logged = (!matches!(&name[..], b"auth" | b"hello")).then_some(args);
        self.record(label.as_bytes(), logged, started, &out[before..], queueing);
    }

    /// What `run` records once a command replied: `label` names it as commandstats does
    /// (`get`, `config|get`).
    fn record(
        &self,
        label: &[u8],
        args: Option<Vec<Vec<u8>>>,
        started: Instant,
        reply: &[u8],
        queueing: bool,
    ) {
        let took = started.elapsed();
        let monitor = &self.stats.monitor;
        let outcome = if reply.first() == Some(&b'-') {
            monitor.record_error(reply);
            let rejected = reply.starts_with(b"-ERR wrong number of arguments")
                || reply.starts_with(b"-NOAUTH")
                || queueing;
            if rejected {
                Outcome::Rejected
            } else {
                Outcome::Failed
            }
        } else {
            Outcome::Ok
        };
        if let Some(entry) = &self.entry {
            let (name, db, resp) = (self.name.clone(), self.db, self.protocol);
            let (multi, no_evict) = (self.multi.as_ref().map(|(q, _)| q.len()), self.no_evict);
            entry.update(|s| {
                s.name = name.unwrap_or_default();
                s.db = db;
                s.resp = if resp == Protocol::Resp3 { 3 } else { 2 };
                s.multi = multi;
                s.no_evict = no_evict;
            });
        }
        if queueing && reply == b"+QUEUED\r\n" {
            return;
        }
        monitor.record_call(label, took, outcome);
        let config = &self.stats.config;
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

    /// `RESET`: the connection's state as a new connection's (database 0, RESP2, no name,
    /// no `MULTI`, nothing watched, `NO-EVICT` off, authenticated only without a password).
    fn reset(&mut self, out: &mut Vec<u8>) {
        self.multi = None;
        self.unwatch_all();
        self.db = 0;
        self.protocol = Protocol::Resp2;
        self.name = None;
        self.no_evict = false;
        self.authenticated = self.stats.config.requirepass().is_none();
        write::simple(out, "RESET");
    }

    /// The commands that run at once, even inside `MULTI` (`HELLO`, `AUTH`, `RESET`; `CLIENT`
    /// and `SHUTDOWN` outside it): whether `name` was one.
    fn immediate(&mut self, name: &[u8], args: &[Vec<u8>], out: &mut Vec<u8>) -> bool {
        match name {
            b"hello" => self.hello(args, out),
            b"auth" if !(2..=3).contains(&args.len()) => arity_error(out, "auth"),
            b"auth" => {
                let (user, pass) = match args {
                    [_, pass] => (None, pass.clone()),
                    [_, user, pass] => (Some(user.clone()), pass.clone()),
                    _ => unreachable!("arity checked"),
                };
                match self.check_password(user.as_deref(), &pass) {
                    Some(text) => write::error(out, text),
                    None => write::simple(out, "OK"),
                }
            }
            b"client" if self.multi.is_none() => self.client(args, out),
            b"reset" if args.len() != 1 => arity_error(out, "reset"),
            b"reset" => self.reset(out),
            b"shutdown" if self.multi.is_some() => {
                if let Some((_, dirty)) = self.multi.as_mut() {
                    *dirty = true;
                }
                write::error(out, "ERR Command not allowed inside a transaction");
            }
            b"shutdown" => {
                crate::commands::server::shutdown(&self.stats, args, out);
            }
            _ => return false,
        }
        true
    }

    /// Runs one request, appending its reply.
    fn dispatch(&mut self, handle: &DbHandle, map: &DbMap, args: &[Vec<u8>], out: &mut Vec<u8>) {
        let name = args[0].to_ascii_lowercase();
        self.stats
            .commands
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !self.authenticated && !matches!(&name[..], b"auth" | b"hello" | b"quit" | b"reset") {
            write::error(out, "NOAUTH Authentication required.");
            if let Some((_, dirty)) = self.multi.as_mut() {
                *dirty = true;
            }
            return;
        }
        if self.immediate(&name, args, out) {
            return;
        }
        let session_command = matches!(
            &name[..],
            b"exec" | b"discard" | b"multi" | b"watch" | b"quit"
        );
        if self.multi.is_some() && !session_command {
            self.queue(args, &name, out);
            return;
        }
        match &name[..] {
            b"multi" if args.len() != 1 => arity_error(out, "multi"),
            b"multi" if self.multi.is_some() => {
                write::error(out, "ERR MULTI calls can not be nested")
            }
            b"multi" => {
                self.multi = Some((Vec::new(), false));
                write::simple(out, "OK");
            }
            b"exec" if args.len() != 1 => arity_error(out, "exec"),
            b"exec" => self.exec(handle, map, out),
            b"discard" if args.len() != 1 => arity_error(out, "discard"),
            b"discard" if self.multi.is_none() => write::error(out, "ERR DISCARD without MULTI"),
            b"discard" => {
                self.multi = None;
                self.unwatch_all();
                write::simple(out, "OK");
            }
            b"watch" if args.len() < 2 => arity_error(out, "watch"),
            b"watch" if self.multi.is_some() => {
                write::error(out, "ERR WATCH inside MULTI is not allowed")
            }
            b"watch" => self.watch(handle, map, &args[1..], out),
            b"unwatch" if args.len() != 1 => arity_error(out, "unwatch"),
            b"unwatch" => {
                self.unwatch_all();
                write::simple(out, "OK");
            }
            _ if crate::commands::blocking_pops::is_blocking(&name) => {
                self.blocking(handle, map, &name, args, out)
            }
            _ => self.one(handle, map, &name, args, out),
        }
    }

    /// A blocking pop outside `MULTI`: one attempt; when it found nothing the session blocks
    /// (`self.blocked`) instead of replying.
    fn blocking(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        name: &[u8],
        args: &[Vec<u8>],
        out: &mut Vec<u8>,
    ) {
        let before = out.len();
        self.one(handle, map, name, args, out);
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let Some(spec) = crate::commands::blocking_pops::spec(&refs) else {
            return;
        };
        let timeout_reply =
            crate::commands::blocking_pops::timeout_reply(spec.null_bulk, self.protocol);
        if out[before..] != timeout_reply[..] {
            return; // served, or an error
        }
        out.truncate(before);
        let deadline_ns = (spec.timeout_s > 0.0)
            .then(|| tamer_device::now_ns().saturating_add((spec.timeout_s * 1e9) as u64));
        let keys = spec
            .keys
            .iter()
            .map(|k| store_key(self.db as u32, k))
            .collect();
        self.blocked = Some(Blocked {
            args: args.to_vec(),
            keys,
            deadline_ns,
            timeout_reply,
        });
    }

    /// Runs the blocked command again (its client came first in line after a write): it
    /// replies, or stays blocked when it found nothing again.
    pub fn retry_blocked(&mut self, handle: &DbHandle, map: &DbMap, out: &mut Vec<u8>) {
        let Some(b) = self.blocked.take() else {
            return;
        };
        let name = b.args[0].to_ascii_lowercase();
        let before = out.len();
        self.one(handle, map, &name, &b.args, out);
        if out[before..] == b.timeout_reply[..] {
            out.truncate(before);
            self.blocked = Some(b);
        }
    }

    /// The blocked command's timeout passed: its reply.
    pub fn time_out(&mut self, out: &mut Vec<u8>) {
        if let Some(b) = self.blocked.take() {
            out.extend_from_slice(&b.timeout_reply);
        }
    }

    /// Runs one command of the table (or `SELECT`, `PING`, ...) in a transaction of its own,
    /// inside the database map's gate (exclusive for a command that changes the map).
    fn one(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        name: &[u8],
        args: &[Vec<u8>],
        out: &mut Vec<u8>,
    ) {
        let (db0, protocol) = (self.db, self.protocol);
        let watches = self.watches.clone();
        let stats = self.stats.clone();
        let gate = MapGate::enter(map, commands::changes_map(name));
        let result = handle.transaction(|tx| {
            let (mut db, mut quit, mut reply) = (db0, false, Vec::new());
            let map = Cell::new(gate.namespaces());
            let run = Run {
                map: &map,
                map_exclusive: gate.exclusive(),
                protocol,
                watches: &watches,
                stats: &stats,
                max_value_bytes: handle.max_value_bytes(),
            };
            run.one(tx, &mut db, &mut quit, args, &mut reply)?;
            Ok((reply, db, quit, map.get()))
        });
        match result {
            Ok((reply, db, quit, namespaces)) => {
                gate.publish(namespaces);
                out.extend_from_slice(&reply);
                self.db = db;
                self.quit |= quit;
            }
            Err(err) => write::error(out, &format!("ERR {err}")),
        }
    }

    /// Queues a command inside `MULTI`, or refuses it (and the transaction).
    fn queue(&mut self, args: &[Vec<u8>], name: &[u8], out: &mut Vec<u8>) {
        let (queued, dirty) = self.multi.as_mut().expect("inside MULTI");
        // The table's arity, or the metadata's for a command the session serves.
        let arity = commands::lookup(name)
            .map(|c| c.arity)
            .or_else(|| commands::meta::arity(name));
        let Some(arity) = arity else {
            write::error(out, &commands::unknown_command_text(args));
            *dirty = true;
            return;
        };
        let n = args.len() as i32;
        // The table's arity, as Redis checks it here (PING's is -1: `PING a b` is queued and
        // fails inside EXEC).
        if (arity > 0 && n != arity) || n < arity.abs() {
            arity_error(out, &String::from_utf8_lossy(name));
            *dirty = true;
            return;
        }
        // A container's subcommand is looked up and its arity checked here too, as Redis
        // does (an unknown one aborts the transaction at EXEC).
        if let Some(text) = subcommand_error(name, args) {
            write::error(out, &text);
            *dirty = true;
            return;
        }
        if queued.len() >= MAX_QUEUED {
            write::error(out, "ERR too many commands queued in MULTI");
            *dirty = true;
            return;
        }
        queued.push(args.to_vec());
        write::simple(out, "QUEUED");
    }

    /// `WATCH key [key ...]`: each key read (its fingerprint) and registered.
    fn watch(&mut self, handle: &DbHandle, map: &DbMap, keys: &[Vec<u8>], out: &mut Vec<u8>) {
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
            Err(err) => {
                write::error(out, &format!("ERR {err}"));
                return;
            }
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
    fn exec(&mut self, handle: &DbHandle, map: &DbMap, out: &mut Vec<u8>) {
        let Some((queued, dirty)) = self.multi.take() else {
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
        let (start_db, protocol) = (self.db, self.protocol);
        let now = crate::keyspace::wall_ms();
        let watches = self.watches.clone();
        let stats = self.stats.clone();
        let watched = &self.watched;
        let changes_map = queued
            .iter()
            .any(|args| commands::changes_map(&args[0].to_ascii_lowercase()));
        let gate = MapGate::enter(map, changes_map);
        let result = handle.transaction(|tx| {
            for (key, print, version) in watched {
                let db = u32::from_be_bytes(key[..4].try_into().expect("4 bytes"));
                let namespace = gate.namespaces()[db as usize];
                // Read first: the key's lock is held from here to the commit.
                let print_now = fingerprint(tx, key, namespace, now)?;
                if print_now != *print || watches.version(key) != *version {
                    return Ok(None);
                }
            }
            let mut replies = Vec::new();
            let (mut db, mut quit) = (start_db, false);
            let map = Cell::new(gate.namespaces());
            let run = Run {
                map: &map,
                map_exclusive: gate.exclusive(),
                protocol,
                watches: &watches,
                stats: &stats,
                max_value_bytes: handle.max_value_bytes(),
            };
            // Each command's reply span and time, for the counters once this attempt commits.
            let mut spans = Vec::with_capacity(queued.len());
            for args in &queued {
                let (at, started) = (replies.len(), Instant::now());
                // `CLIENT` changes the session, not the store: it runs once this commits.
                if !args[0].eq_ignore_ascii_case(b"client") {
                    run.one(tx, &mut db, &mut quit, args, &mut replies)?;
                }
                spans.push((at..replies.len(), started.elapsed()));
            }
            Ok(Some((replies, db, spans, map.get())))
        });
        self.unwatch_all();
        match result {
            Ok(Some((replies, db, spans, namespaces))) => {
                gate.publish(namespaces);
                self.db = db;
                let (replies, spans) = self.run_client_commands(&queued, replies, spans);
                self.record_queued(&queued, &replies, spans);
                write::array(out, queued.len());
                out.extend_from_slice(&replies);
                self.db = db;
            }
            Ok(None) => write::null_array(out, protocol),
            Err(err) => write::error(out, &format!("ERR {err}")),
        }
    }
}

/// The reply span of each command an `EXEC` ran, and the time it took.
type Spans = Vec<(std::ops::Range<usize>, std::time::Duration)>;

impl Session {
    /// The replies of a committed `EXEC` with its `CLIENT` commands run, in their places, on
    /// this session (they were left out of the transaction, whose replies are `replies`).
    fn run_client_commands(
        &mut self,
        queued: &[Vec<Vec<u8>>],
        replies: Vec<u8>,
        spans: Spans,
    ) -> (Vec<u8>, Spans) {
        if !queued.iter().any(|a| a[0].eq_ignore_ascii_case(b"client")) {
            return (replies, spans);
        }
        let mut out = Vec::with_capacity(replies.len());
        let mut placed = Vec::with_capacity(spans.len());
        for (args, (span, took)) in queued.iter().zip(spans) {
            let at = out.len();
            if args[0].eq_ignore_ascii_case(b"client") {
                debug_assert!(span.is_empty(), "CLIENT replied inside the transaction");
                let started = Instant::now();
                self.client(args, &mut out);
                placed.push((at..out.len(), started.elapsed()));
            } else {
                out.extend_from_slice(&replies[span]);
                placed.push((at..out.len(), took));
            }
        }
        (out, placed)
    }

    /// Counts the commands an `EXEC` ran (calls, failures, errors), as Redis counts each
    /// queued command besides `EXEC` itself.
    fn record_queued(&self, queued: &[Vec<Vec<u8>>], replies: &[u8], spans: Spans) {
        let monitor = &self.stats.monitor;
        for (args, (span, took)) in queued.iter().zip(spans) {
            let reply = &replies[span];
            let outcome = if reply.first() == Some(&b'-') {
                monitor.record_error(reply);
                Outcome::Failed
            } else {
                Outcome::Ok
            };
            let label = command_label(&args[0].to_ascii_lowercase(), args);
            monitor.record_call(label.as_bytes(), took, outcome);
        }
    }
}

/// The database map's gate as a command holds it.
enum MapGate<'a> {
    Shared(crate::keyspace::dbmap::Shared<'a>),
    Exclusive(crate::keyspace::dbmap::Exclusive<'a>),
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

/// What a command run needs from the server.
struct Run<'a> {
    map: &'a Cell<[u32; DATABASES]>,
    map_exclusive: bool,
    protocol: Protocol,
    watches: &'a Watches,
    stats: &'a ServerStats,
    max_value_bytes: usize,
}

impl Run<'_> {
    /// Runs one command (a session command, or one of the table's) in `tx`.
    fn one(
        &self,
        tx: &mut Tx<'_>,
        db: &mut usize,
        quit: &mut bool,
        args: &[Vec<u8>],
        out: &mut Vec<u8>,
    ) -> Result<(), DbError> {
        let name = args[0].to_ascii_lowercase();
        match &name[..] {
            b"ping" => match args.len() {
                1 => write::simple(out, "PONG"),
                2 => write::bulk(out, &args[1]),
                _ => arity_error(out, "ping"),
            },
            b"echo" if args.len() == 2 => write::bulk(out, &args[1]),
            b"echo" => arity_error(out, "echo"),
            b"quit" => {
                write::simple(out, "OK");
                *quit = true;
            }
            // Queued inside MULTI: by EXEC the watches are already spent.
            b"unwatch" => write::simple(out, "OK"),
            b"time" if args.len() != 1 => arity_error(out, "time"),
            b"time" => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                write::array(out, 2);
                write::bulk(out, now.as_secs().to_string().as_bytes());
                write::bulk(out, now.subsec_micros().to_string().as_bytes());
            }
            b"info" => {
                let keyspace = if crate::stats::info::wants(&args[1..], "keyspace") {
                    let namespaces = self.map.get();
                    let mut counts = [0u64; DATABASES];
                    for (count, ns) in counts.iter_mut().zip(namespaces) {
                        *count = match crate::keyspace::key_count(tx, ns) {
                            Ok(n) => n,
                            Err(crate::keyspace::KeyspaceError::Store(e)) => return Err(e),
                            Err(_) => 0,
                        };
                    }
                    Some(counts)
                } else {
                    None
                };
                let text = crate::stats::info::text(self.stats, &args[1..], keyspace.as_ref());
                write::verbatim(out, b"txt", text.as_bytes(), self.protocol);
            }
            b"command" => commands::meta::command(self.protocol, args, out),
            b"config" => crate::commands::server::config(self.stats, self.protocol, args, out),
            b"slowlog" => crate::commands::server::slowlog(self.stats, args, out),
            b"latency" => crate::commands::server::latency(self.stats, args, out),
            b"lastsave" if args.len() != 1 => arity_error(out, "lastsave"),
            b"lastsave" => crate::commands::server::lastsave(self.stats, out),
            b"memory" => {
                let namespace = self.map.get()[*db];
                crate::commands::server::memory(tx, namespace, self.protocol, args, out)?;
            }
            b"select" if args.len() != 2 => arity_error(out, "select"),
            b"select" => match parse_i64(&args[1]) {
                Some(n) if (0..DATABASES as i64).contains(&n) => {
                    *db = n as usize;
                    write::simple(out, "OK");
                }
                Some(_) => write::error(out, "ERR DB index is out of range"),
                None => write::error(out, "ERR value is not an integer or out of range"),
            },
            _ => {
                let ctx = Context {
                    scope: Scope {
                        namespace: self.map.get()[*db],
                        db: *db,
                        now_ms: crate::keyspace::wall_ms(),
                        watches: Some(self.watches),
                        lookups: Some(&self.stats.lookups),
                    },
                    map: self.map,
                    map_exclusive: self.map_exclusive,
                    protocol: self.protocol,
                    max_value_bytes: self.max_value_bytes,
                };
                let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                commands::execute(&ctx, tx, &refs, out)?;
            }
        }
        Ok(())
    }
}

/// The error Redis gives when queueing container command `name` (lowercase) with `args`: an
/// unknown subcommand, or a subcommand's wrong arity; `None` for anything else.
fn subcommand_error(name: &[u8], args: &[Vec<u8>]) -> Option<String> {
    let (info, _) = commands::meta::find(name)?;
    if info.get("subcommands")?.list().is_empty() {
        return None;
    }
    let sub = String::from_utf8_lossy(args.get(1)?).to_ascii_lowercase();
    let full = format!("{}|{sub}", String::from_utf8_lossy(name));
    let Some((sub_info, _)) = commands::meta::find(full.as_bytes()) else {
        let upper = String::from_utf8_lossy(name).to_ascii_uppercase();
        let sub = String::from_utf8_lossy(&args[1]);
        return Some(format!("ERR unknown subcommand '{sub}'. Try {upper} HELP."));
    };
    let arity = sub_info.get("arity")?.int();
    let n = args.len() as i64;
    ((arity > 0 && n != arity) || n < arity.abs())
        .then(|| format!("ERR wrong number of arguments for '{full}' command"))
}

/// A command as `CLIENT LIST`'s `cmd=` and commandstats name it: a container command with
/// its subcommand (`client|list`), any other by its name.
fn command_label(name: &[u8], args: &[Vec<u8>]) -> String {
    let name = String::from_utf8_lossy(name).into_owned();
    match args.get(1) {
        Some(sub) if commands::CONTAINERS.contains(&name.as_str()) => {
            let sub = String::from_utf8_lossy(&sub[..sub.len().min(32)]).to_ascii_lowercase();
            format!("{name}|{sub}")
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tamer_store::{Db, DbOptions, DeviceKind};

    fn reply(s: &mut Session, db: &Db, map: &Arc<DbMap>, words: &[&str]) -> String {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        let map = map.clone();
        let mut session = std::mem::replace(
            s,
            Session::new(
                Arc::default(),
                0,
                Arc::new(ServerStats::new(0, Arc::default(), &[])),
            ),
        );
        let (session, out) = db
            .run(move |h| {
                let mut out = Vec::new();
                session.run(h, &map, args, &mut out);
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
        let mut s = Session::new(Arc::default(), 1, stats);
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
}
