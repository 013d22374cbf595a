//! The session's ACL user (who it is, kept current as users change) and the `ACL` command
//! (Redis's `aclCommand`).

use std::path::Path;
use std::sync::Arc;

use super::state::Session;
use crate::acl::log::{self as acl_log, Context as LogContext};
use crate::acl::user::{merge_selectors, valid_name};
use crate::acl::{self, ids, Denied, User, USERS_MAX};
use crate::commands::context::Caller;
use crate::commands::permissions;
use crate::commands::spec::Command;
use crate::commands::table;
use crate::pubsub::Kind;
use crate::resp::{parse_i64, write, Protocol};
use crate::stats::clients::KillFilter;

/// Most bits `ACL GENPASS` makes.
const GENPASS_BITS_MAX: i64 = 4096;

fn now_ms() -> u64 {
    crate::keyspace::wall_ms()
}

impl Session {
    /// Reads the user again when the users changed since it was read. A deleted user's
    /// clients were closed; until the close lands, such a client is the default user,
    /// not authenticated (as Redis leaves it).
    pub(super) fn refresh_user(&mut self) {
        let epoch = self.stats.acl.epoch();
        if epoch == self.acl_epoch {
            return;
        }
        self.acl_epoch = epoch;
        match self.stats.acl.user(&self.user.name) {
            Some(user) => self.set_user(user),
            None => {
                self.authenticated = false;
                let default = self
                    .stats
                    .acl
                    .user(b"default")
                    .expect("the default user exists");
                self.set_user(default);
            }
        }
    }

    /// Makes `user` this client's user.
    pub(super) fn set_user(&mut self, user: Arc<User>) {
        self.restricted = !acl::unrestricted(&user);
        if let Some(entry) = &self.entry {
            if entry.state().user != user.name {
                let name = user.name.clone();
                entry.update(|s| s.user = name);
            }
        }
        self.user = user;
    }

    /// `EXEC` checks its queue again (the user's rules may have changed since it was
    /// queued): each queued command's denial, logged.
    pub(super) fn exec_denials(
        &mut self,
        queued: &[(&'static Command, Vec<Vec<u8>>)],
    ) -> Vec<Option<Denied>> {
        self.refresh_user();
        queued
            .iter()
            .map(|(command, args)| {
                if !self.restricted {
                    return None;
                }
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let denied = permissions::check(&self.user, command, &refs).err()?;
                self.log_denial(command, denied, &refs, LogContext::Multi);
                Some(denied)
            })
            .collect()
    }

    /// The caller a script's commands are checked as (`None`: it may run anything).
    pub(crate) fn acl_caller(&self) -> Option<Caller<'_>> {
        self.restricted.then(|| Caller {
            user: &self.user,
            client_id: self.id,
        })
    }

    /// Logs a denial of `command` (`ACL LOG`).
    pub(super) fn log_denial(
        &self,
        command: &Command,
        denied: Denied,
        args: &[&[u8]],
        context: LogContext,
    ) {
        let denial = permissions::Denial {
            command,
            denied,
            args,
            username: &self.user.name,
            client_id: self.id,
        };
        permissions::log_denial(&self.stats, denial, context);
    }

    /// Logs a failed login as `name` (`object`: the command's name as sent).
    pub(super) fn log_auth_failure(&self, object: &[u8], name: &[u8]) {
        let context = if self.multi.is_some() {
            LogContext::Multi
        } else {
            LogContext::Toplevel
        };
        let logged = permissions::Logged {
            reason: "auth",
            context,
            object: object.to_vec(),
            username: name,
            client_id: self.id,
        };
        permissions::log(&self.stats, logged);
    }

    /// `ACL subcommand ...` (the gate checked the subcommand's arity).
    pub(super) fn acl(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let acl = &self.stats.acl;
        let sub = args[1].to_ascii_lowercase();
        if matches!(&sub[..], b"cat" | b"genpass" | b"log") && args.len() > 3 {
            // Their arity says "at least 2"; Redis takes at most one argument more.
            let text = format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
                String::from_utf8_lossy(&args[1][..args[1].len().min(128)])
            );
            return write::error(out, &text);
        }
        match &sub[..] {
            b"setuser" => self.acl_setuser(args, out),
            b"deluser" => self.acl_deluser(&args[2..], out),
            b"getuser" => match acl.user(args[2]) {
                Some(user) => write_user(out, &user, self.protocol),
                None => write::null(out, self.protocol),
            },
            b"list" | b"users" => {
                let users = acl.users();
                write::array(out, users.len());
                for (name, user) in users.iter() {
                    if args[1].eq_ignore_ascii_case(b"users") {
                        write::bulk(out, name);
                    } else {
                        let line = [b"user ", &name[..], b" ", &user.describe()].concat();
                        write::bulk(out, &line);
                    }
                }
            }
            b"whoami" => write::bulk(out, &self.user.name),
            b"cat" => acl_cat(args.get(2).copied(), out),
            b"genpass" => acl_genpass(args.get(2).copied(), out),
            b"log" => self.acl_log(args.get(2).copied(), out),
            b"dryrun" => self.acl_dryrun(&args[2..], out),
            b"load" | b"save" => self.acl_file(args[1], out),
            _ => write_help(out),
        }
    }

    fn acl_setuser(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let name = args[2];
        if !valid_name(name) {
            return write::error(out, "ERR Usernames can't contain spaces or null characters");
        }
        let rules = match merge_selectors(&args[3..]) {
            Ok(rules) => rules,
            Err(at) => {
                let arg = String::from_utf8_lossy(args[3 + at]);
                return write::error(
                    out,
                    &format!("ERR Unmatched parenthesis in acl selector starting at '{arg}'."),
                );
            }
        };
        let allchannels = self.stats.config.get("acl-pubsub-default") == "allchannels";
        let mut users = self.stats.acl.users();
        let mut user = match users.get(name) {
            Some(user) => User::clone(user),
            None if users.len() >= USERS_MAX => {
                return write::error(
                    out,
                    &format!("ERR Too many users (tamer's bound, {USERS_MAX})"),
                )
            }
            None => User::new(name, allchannels),
        };
        for rule in &rules {
            if let Err(e) = user.apply(rule, allchannels) {
                let rule = String::from_utf8_lossy(rule);
                let text = format!("ERR Error in ACL SETUSER modifier '{rule}': {}", e.text());
                return write::error(out, &text);
            }
        }
        let old = users.insert(name.to_vec(), Arc::new(user.clone()));
        drop(users);
        self.stats.acl.changed();
        if let Some(old) = old {
            self.kill_pubsub_clients_if_needed(&user, &old);
        }
        write::simple(out, "OK");
    }

    /// Closes the clients of `old` that subscribe to a channel or pattern `new` no longer
    /// allows (Redis's `ACLKillPubsubClientsIfNeeded`: nothing to do when a selector allows
    /// every channel, or when `new`'s channels include all of `old`'s).
    fn kill_pubsub_clients_if_needed(&mut self, new: &User, old: &User) {
        if new.selectors.iter().any(|s| s.allchannels) {
            return;
        }
        let allowed: Vec<Vec<u8>> = new
            .selectors
            .iter()
            .flat_map(|s| s.channels.clone())
            .collect();
        let kept = old
            .selectors
            .iter()
            .flat_map(|s| &s.channels)
            .all(|c| allowed.contains(c));
        if kept {
            return;
        }
        for entry in self.stats.clients.list() {
            let state = entry.state();
            if state.user != old.name || state.subscriptions.iter().all(|&n| n == 0) {
                continue;
            }
            let client = (entry.slot, entry.id as u32);
            let sub = |kind| self.pubsub.subscriptions(client, kind);
            let violates = sub(Kind::Pattern)
                .iter()
                .any(|p| !acl::channel_allowed(&allowed, p, true))
                || [Kind::Channel, Kind::Shard]
                    .into_iter()
                    .flat_map(sub)
                    .any(|c| !acl::channel_allowed(&allowed, &c, false));
            if violates {
                let filter = KillFilter {
                    id: Some(entry.id),
                    skip_me: false,
                    ..KillFilter::default()
                };
                self.stats.clients.kill(&filter, self.id);
                self.quit |= entry.id == self.id;
            }
        }
    }

    fn acl_deluser(&mut self, names: &[&[u8]], out: &mut Vec<u8>) {
        if names.iter().any(|n| *n == b"default") {
            return write::error(out, "ERR The 'default' user cannot be removed");
        }
        let mut deleted = 0;
        for &name in names {
            if self.stats.acl.users().remove(name).is_none() {
                continue;
            }
            deleted += 1;
            self.stats.acl.changed();
            let filter = KillFilter {
                user: Some(name.to_vec()),
                ..KillFilter::default()
            };
            self.stats.clients.kill(&filter, self.id);
            self.quit |= self.user.name == name;
        }
        write::integer(out, deleted);
    }

    fn acl_log(&self, arg: Option<&[u8]>, out: &mut Vec<u8>) {
        let count = match arg {
            None => 10,
            Some(a) if a.eq_ignore_ascii_case(b"reset") => {
                self.stats.acl.log.reset();
                return write::simple(out, "OK");
            }
            Some(a) => match parse_i64(a) {
                Some(n) => n.max(0) as usize,
                None => return write::error(out, "ERR value is not an integer or out of range"),
            },
        };
        let entries = self.stats.acl.log.newest(count);
        write::array(out, entries.len());
        let now = now_ms();
        for e in &entries {
            acl_log::write_entry(out, e, now, self.protocol);
        }
    }

    /// `ACL DRYRUN user command [arg ...]`.
    fn acl_dryrun(&self, args: &[&[u8]], out: &mut Vec<u8>) {
        let Some(user) = self.stats.acl.user(args[0]) else {
            let name = String::from_utf8_lossy(args[0]);
            return write::error(out, &format!("ERR User '{name}' not found"));
        };
        let request = &args[1..];
        let Some(command) = table::lookup_request(request) else {
            let name = String::from_utf8_lossy(request[0]);
            return write::error(out, &format!("ERR Command '{name}' not found"));
        };
        if !command.arity_fits(request.len()) {
            let text = format!(
                "ERR wrong number of arguments for '{}' command",
                command.name
            );
            return write::error(out, &text);
        }
        let text = match permissions::check(&user, command, request) {
            Ok(()) => return write::simple(out, "OK"),
            Err(Denied::Command) => format!(
                "This user has no permissions to run the '{}' command",
                command.name
            ),
            Err(Denied::Key(at)) => format!(
                "This user has no permissions to access the '{}' key",
                String::from_utf8_lossy(request[at])
            ),
            Err(Denied::Channel(at)) => format!(
                "This user has no permissions to access the '{}' channel",
                String::from_utf8_lossy(request[at])
            ),
        };
        write::bulk(out, text.as_bytes());
    }

    /// `ACL LOAD` and `ACL SAVE`, with the file `aclfile` names.
    fn acl_file(&mut self, sub: &[u8], out: &mut Vec<u8>) {
        let path = self.stats.config.get("aclfile");
        if path.is_empty() {
            return write::error(
                out,
                "ERR This Redis instance is not configured to use an ACL file. You may want to \
                 specify users via the ACL SETUSER command and then issue a CONFIG REWRITE \
                 (assuming you have a Redis configuration file set) in order to store users in \
                 the Redis configuration.",
            );
        }
        if sub.eq_ignore_ascii_case(b"save") {
            let users = self.stats.acl.users().clone();
            return match acl::file::save(Path::new(&path), &users) {
                Ok(()) => write::simple(out, "OK"),
                Err(_) => write::error(
                    out,
                    "ERR There was an error trying to save the ACLs. Please check the server \
                     logs for more information",
                ),
            };
        }
        match acl::file::load(Path::new(&path)) {
            Ok(users) => {
                self.replace_users(users);
                write::simple(out, "OK");
            }
            Err(errors) => write::error(out, &format!("ERR {errors}")),
        }
    }

    /// Replaces every user (`ACL LOAD`): the clients of users that are gone or changed are
    /// closed, as Redis frees every old user and its clients.
    fn replace_users(&mut self, users: std::collections::BTreeMap<Vec<u8>, Arc<User>>) {
        let old = std::mem::replace(&mut *self.stats.acl.users(), users);
        self.stats.acl.changed();
        for name in old.keys().filter(|n| n.as_slice() != b"default") {
            let filter = KillFilter {
                user: Some(name.clone()),
                ..KillFilter::default()
            };
            self.stats.clients.kill(&filter, self.id);
            self.quit |= self.user.name == *name;
        }
    }
}

/// `ACL GETUSER`'s reply.
fn write_user(out: &mut Vec<u8>, user: &User, protocol: Protocol) {
    write::map(out, 6, protocol);
    write::bulk(out, b"flags");
    let flags = user.flags();
    write::set(out, flags.len(), protocol);
    for flag in flags {
        write::bulk(out, flag.as_bytes());
    }
    write::bulk(out, b"passwords");
    write::array(out, user.passwords.len());
    for hash in &user.passwords {
        write::bulk(out, hash.as_bytes());
    }
    write_selector(out, user.root());
    write::bulk(out, b"selectors");
    write::array(out, user.selectors.len() - 1);
    for selector in &user.selectors[1..] {
        write::map(out, 3, protocol);
        write_selector(out, selector);
    }
}

fn write_selector(out: &mut Vec<u8>, selector: &acl::selector::Selector) {
    use acl::describe;
    write::bulk(out, b"commands");
    write::bulk(out, &describe::commands(selector));
    write::bulk(out, b"keys");
    let keys = if selector.allkeys {
        b"~*".to_vec()
    } else {
        let patterns: Vec<Vec<u8>> = selector.keys.iter().map(describe::key_pattern).collect();
        patterns.join(&b' ')
    };
    write::bulk(out, &keys);
    write::bulk(out, b"channels");
    let channels = if selector.allchannels {
        b"&*".to_vec()
    } else {
        let patterns: Vec<Vec<u8>> = selector
            .channels
            .iter()
            .map(|c| [b"&", &c[..]].concat())
            .collect();
        patterns.join(&b' ')
    };
    write::bulk(out, &channels);
}

/// `ACL CAT [category]`.
fn acl_cat(category: Option<&[u8]>, out: &mut Vec<u8>) {
    let Some(name) = category else {
        write::array(out, ids::CATEGORIES.len());
        for name in ids::CATEGORIES {
            write::bulk(out, name.as_bytes());
        }
        return;
    };
    let Some(cat) = ids::category(name) else {
        let name = String::from_utf8_lossy(&name[..name.len().min(128)]);
        return write::error(out, &format!("ERR Unknown category '{name}'"));
    };
    let names: Vec<&str> = ids::all()
        .filter(|(_, e)| e.categories & cat != 0)
        .map(|(_, e)| e.name)
        .collect();
    write::array(out, names.len());
    for name in names {
        write::bulk(out, name.as_bytes());
    }
}

/// `ACL GENPASS [bits]`: random hex digits from the kernel.
fn acl_genpass(bits: Option<&[u8]>, out: &mut Vec<u8>) {
    let bits = match bits.map(parse_i64) {
        None => 256,
        Some(Some(n)) => n,
        Some(None) => return write::error(out, "ERR value is not an integer or out of range"),
    };
    if bits <= 0 || bits > GENPASS_BITS_MAX {
        let text = format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to {GENPASS_BITS_MAX}"
        );
        return write::error(out, &text);
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut random = vec![0u8; chars.div_ceil(2)];
    if let Err(e) = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random))
    {
        return write::error(out, &format!("ERR reading /dev/urandom: {e}"));
    }
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    write::bulk(out, &hex.as_bytes()[..chars]);
}

fn write_help(out: &mut Vec<u8>) {
    const HELP: &[&str] = &[
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
        "HELP",
        "    Print this help.",
    ];
    write::array(out, HELP.len());
    for line in HELP {
        write::simple(out, line);
    }
}
