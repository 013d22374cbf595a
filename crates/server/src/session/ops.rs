//! The commands that run on the session (the table's `SessionOp`s): `HELLO`, `AUTH`,
//! `RESET`, `SELECT`, `QUIT`, `SHUTDOWN`, `MULTI`/`EXEC`/`DISCARD`/`WATCH`/`UNWATCH` (in
//! `super::transaction`), `CLIENT`'s subcommands (`super::clients` for the registry's), and
//! the (un)subscribe commands (`super::subscriptions`).

use tamer_store::DbHandle;

use super::state::Session;
use crate::commands::spec::SessionOp;
use crate::keyspace::dbmap::DbMap;
use crate::pubsub::Kind;
use crate::resp::{parse_i64, write, Protocol};

/// Redis's error for a client name with spaces or special characters.
const NAME_ERROR: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

/// A client name as Redis accepts it: printable ASCII without spaces.
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

impl Session {
    /// Runs session operation `op` (the gate checked its arity).
    pub(super) fn op(
        &mut self,
        op: SessionOp,
        handle: &DbHandle,
        map: &DbMap,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        match op {
            SessionOp::Auth => self.auth(args, out),
            SessionOp::Acl => self.acl(args, out),
            SessionOp::Hello => self.hello(args, out),
            SessionOp::Reset => self.reset(out),
            SessionOp::Monitor => self.start_monitor(out),
            SessionOp::Select => super::transaction::select(&mut self.db, args, out),
            SessionOp::Quit => {
                write::simple(out, "OK");
                self.quit = true;
            }
            SessionOp::Shutdown => {
                crate::commands::server::shutdown(&self.stats, args, out);
            }
            SessionOp::Multi => self.multi(out),
            SessionOp::Exec => self.exec(handle, map, out),
            SessionOp::Discard => self.discard(out),
            SessionOp::Watch => self.watch(handle, map, &args[1..], out),
            SessionOp::Unwatch => {
                self.unwatch_all();
                write::simple(out, "OK");
            }
            SessionOp::ClientId => write::integer(out, self.id as i64),
            SessionOp::ClientGetname => match &self.name {
                Some(name) => write::bulk(out, name),
                None => write::null(out, self.protocol),
            },
            SessionOp::ClientSetname => self.set_name(args[2], out),
            SessionOp::ClientList => self.client_list(args, out),
            SessionOp::ClientInfo => self.client_info(out),
            SessionOp::ClientKill => self.client_kill(args, out),
            SessionOp::ClientUnblock => self.client_unblock(args, out),
            SessionOp::ClientPause => self.client_pause(args, out),
            SessionOp::ClientUnpause => self.client_unpause(out),
            SessionOp::ClientNoEvict => self.client_no_evict(args[2], out),
            SessionOp::ClientReply => self.client_reply(args[2], out),
            SessionOp::ClientTracking => self.client_tracking(args, out),
            SessionOp::ClientCaching => self.client_caching(args[2], out),
            SessionOp::ClientGetredir => self.client_getredir(out),
            SessionOp::ClientTrackinginfo => self.client_trackinginfo(out),
            SessionOp::Subscribe => self.subscribe(Kind::Channel, &args[1..], out),
            SessionOp::Psubscribe => self.subscribe(Kind::Pattern, &args[1..], out),
            SessionOp::Ssubscribe => self.subscribe(Kind::Shard, &args[1..], out),
            SessionOp::Unsubscribe => self.unsubscribe(Kind::Channel, &args[1..], out),
            SessionOp::Punsubscribe => self.unsubscribe(Kind::Pattern, &args[1..], out),
            SessionOp::Sunsubscribe => self.unsubscribe(Kind::Shard, &args[1..], out),
        }
    }

    /// `CLIENT SETNAME name`.
    fn set_name(&mut self, name: &[u8], out: &mut Vec<u8>) {
        if !valid_name(name) {
            return write::error(out, NAME_ERROR);
        }
        self.name = (!name.is_empty()).then(|| name.to_vec());
        write::simple(out, "OK");
    }

    /// `AUTH [username] password`.
    fn auth(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let (user, pass) = match args {
            [_, pass] => (None, *pass),
            [_, user, pass] => (Some(*user), *pass),
            _ => return write::error(out, "ERR syntax error"),
        };
        match self.check_password(args[0], user, pass) {
            Some(text) => write::error(out, text),
            None => write::simple(out, "OK"),
        }
    }

    /// `AUTH [username] password` (`user` is `None` in the one-argument form, the `default`
    /// user) and `HELLO`'s `AUTH` (Redis's `ACLAuthenticateUser`): `None` when it passed (the
    /// client is now that user), else the error reply's text (and an `ACL LOG` entry).
    fn check_password(
        &mut self,
        object: &[u8],
        user: Option<&[u8]>,
        pass: &[u8],
    ) -> Option<&'static str> {
        const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
        let name = user.unwrap_or(b"default");
        let found = self.stats.acl.user(name);
        if user.is_none() && found.as_ref().is_some_and(|u| u.nopass) {
            // The old one-argument form is refused where the default user needs no password.
            return Some(
                "ERR AUTH <password> called without any password configured for the default \
                 user. Are you sure your configuration is correct?",
            );
        }
        match found {
            Some(found) if found.password_matches(pass) => {
                self.authenticated = true;
                self.set_user(found);
                None
            }
            _ => {
                self.log_auth_failure(object, name);
                Some(WRONGPASS)
            }
        }
    }

    /// `HELLO [protover [AUTH username password] [SETNAME name]]`.
    fn hello(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let protocol = match args.get(1).map(|v| parse_i64(v)) {
            None => self.protocol,
            Some(Some(2)) => Protocol::Resp2,
            Some(Some(3)) => Protocol::Resp3,
            Some(Some(_)) => return write::error(out, "NOPROTO unsupported protocol version"),
            Some(None) => {
                return write::error(
                    out,
                    "ERR Protocol version is not an integer or out of range",
                )
            }
        };
        let name = match self.hello_options(args, out) {
            Ok(name) => name,
            Err(()) => return,
        };
        if !self.authenticated {
            return write::error(
                out,
                "NOAUTH HELLO must be called with the client already authenticated, otherwise \
                 the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the \
                 client and select the RESP protocol version at the same time",
            );
        }
        if let Some(name) = name {
            if !valid_name(name) {
                return write::error(out, NAME_ERROR);
            }
            self.name = (!name.is_empty()).then(|| name.to_vec());
        }
        self.protocol = protocol;
        // The hub may hold it for tracking invalidations too.
        self.pubsub.set_protocol(self.client, protocol);
        self.tracking_protocol(protocol);
        self.hello_reply(out);
    }

    /// `HELLO`'s `AUTH` (checked at once) and `SETNAME` (its name returned), or `Err` with the
    /// error written.
    fn hello_options<'a>(
        &mut self,
        args: &[&'a [u8]],
        out: &mut Vec<u8>,
    ) -> Result<Option<&'a [u8]>, ()> {
        let (mut j, mut name) = (2, None);
        // Bounded: every pass consumes two or three arguments, or fails.
        while j < args.len() {
            let more = args.len() - j - 1;
            match &args[j].to_ascii_lowercase()[..] {
                b"auth" if more >= 2 => {
                    let (user, pass) = (args[j + 1], args[j + 2]);
                    if let Some(text) = self.check_password(args[0], Some(user), pass) {
                        write::error(out, text);
                        return Err(());
                    }
                    j += 3;
                }
                b"setname" if more >= 1 => {
                    name = Some(args[j + 1]);
                    j += 2;
                }
                _ => {
                    let opt = String::from_utf8_lossy(args[j]);
                    write::error(out, &format!("ERR Syntax error in HELLO option '{opt}'"));
                    return Err(());
                }
            }
        }
        Ok(name)
    }

    /// `HELLO`'s map of the server and the connection.
    fn hello_reply(&self, out: &mut Vec<u8>) {
        write::map(out, 7, self.protocol);
        for (k, v) in [("server", "tamer"), ("version", crate::REDIS_VERSION)] {
            write::bulk(out, k.as_bytes());
            write::bulk(out, v.as_bytes());
        }
        write::bulk(out, b"proto");
        write::integer(
            out,
            if self.protocol == Protocol::Resp3 {
                3
            } else {
                2
            },
        );
        write::bulk(out, b"id");
        write::integer(out, self.id as i64);
        for (k, v) in [("mode", "standalone"), ("role", "master")] {
            write::bulk(out, k.as_bytes());
            write::bulk(out, v.as_bytes());
        }
        write::bulk(out, b"modules");
        write::array(out, 0);
    }

    /// `MONITOR`: every command any client runs from now on reaches this one (`+OK` first).
    fn start_monitor(&mut self, out: &mut Vec<u8>) {
        if !self.monitor {
            self.monitor = true;
            self.pubsub.monitor(self.client, self.protocol);
        }
        write::simple(out, "OK");
    }

    /// `RESET`: the connection's state as a new connection's (database 0, RESP2, no name,
    /// no `MULTI`, nothing watched, no subscriptions, replies on, `NO-EVICT` off,
    /// authenticated only without a password).
    fn reset(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.monitor) {
            self.pubsub.unmonitor(self.client, out);
        }
        self.multi = None;
        self.unwatch_all();
        self.unsubscribe_all();
        self.tracking_off();
        self.replies = Default::default();
        self.db = 0;
        self.protocol = Protocol::Resp2;
        self.pubsub.set_protocol(self.client, Protocol::Resp2);
        self.name = None;
        self.no_evict = false;
        let default = self
            .stats
            .acl
            .user(b"default")
            .expect("the default user exists");
        self.authenticated = default.enabled && default.nopass;
        self.set_user(default);
        write::simple(out, "RESET");
    }
}
