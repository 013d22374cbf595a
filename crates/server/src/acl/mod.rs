//! ACL users (Redis 7.0's): who a client is, and what it may run, on which keys and
//! channels.
//!
//! - [`ids`]: the commands rules name (all of Redis 7.0's, from [`universe`]) and their bits.
//! - [`selector`]: one set of command, key and channel rules; [`user`]: a user's flags,
//!   passwords and selectors; [`describe`]: a selector back as rules (`ACL LIST`).
//! - [`check`]: whether a user may run a request (the gate's rule 6, and `redis.call`).
//! - [`Acl`]: the users by name, and the log of denials (`ACL LOG`).
//!
//! Bounds: [`USERS_MAX`] users, [`log::ENTRIES_MAX`] log entries (`acllog-max-len` below
//! it), and per user the bounds of [`user`] and [`selector`].

pub(crate) mod categories;
pub(crate) mod describe;
pub(crate) mod file;
pub(crate) mod ids;
pub(crate) mod log;
pub(crate) mod selector;
mod universe;
pub(crate) mod user;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::glob;
pub use user::User;

/// Most users.
pub const USERS_MAX: usize = 65_536;

/// Why a rule was refused (Redis's `ACLSetUserStringError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    Unknown,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
    /// A bound of [`user`] or [`selector`] (tamer's own).
    TooMany,
}

impl RuleError {
    /// Redis's words for it.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::AfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::AfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
            RuleError::TooMany => "Too many passwords, patterns or selectors (tamer's bound)",
        }
    }
}

/// Why a user may not run a request, in Redis's order of relevance (a command refused by
/// every selector says the last key or channel no selector allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    /// The command (or subcommand).
    Command,
    /// The key at this argument.
    Key(usize),
    /// The channel at this argument.
    Channel(usize),
}

impl Denied {
    /// `ACL LOG`'s reason.
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }

    /// The `-NOPERM` text the gate replies with.
    pub fn noperm(self, command_name: &str) -> String {
        match self {
            Denied::Command => {
                format!("NOPERM this user has no permissions to run the '{command_name}' command")
            }
            Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys \
                               used as arguments"
                .to_string(),
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the \
                                   channels used as arguments"
                .to_string(),
        }
    }

    /// The error `EXEC` replies for a queued command the user may no longer run.
    pub fn noperm_at_exec(self) -> String {
        let reason = match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
             the EXEC call. This command is no longer allowed for the following reason: {reason}"
        )
    }

    /// The error a script's `redis.call` gets.
    pub fn script_error(self) -> &'static str {
        match self {
            Denied::Command => {
                "ERR The user executing the script can't run this command or subcommand"
            }
            Denied::Key(_) => {
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command arguments"
            }
            Denied::Channel(_) => {
                "ERR The user executing the script can't publish to the channel mentioned in \
                 the command"
            }
        }
    }
}

/// Whether every selector of `user` allows everything (no request needs checking).
pub fn unrestricted(user: &User) -> bool {
    let root = user.root();
    root.allcommands && root.allkeys && root.allchannels
}

/// How a request uses a key: read (Redis's key spec flag `access`), written (`insert`,
/// `delete`, `update`), both, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyUse {
    pub read: bool,
    pub write: bool,
}

/// Which arguments of a request are channels, as Redis's `ACLDoesCommandHaveChannels`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channels {
    /// None.
    None,
    /// The first (`PUBLISH`, `SPUBLISH`).
    First,
    /// All but the name (`SUBSCRIBE`, `SSUBSCRIBE`).
    All,
    /// All but the name, each a pattern that must be one of the user's exactly
    /// (`PSUBSCRIBE`).
    AllPatterns,
}

/// A request as the check sees it (the command layer makes it from the command table:
/// `commands::permissions`).
pub struct Request<'a> {
    /// Its command's ACL ID ([`ids`]).
    pub id: ids::Id,
    /// The command runs before authentication (`AUTH`, `HELLO`): always allowed.
    pub no_auth: bool,
    /// Its arguments, the name first.
    pub args: &'a [&'a [u8]],
    /// Its keys (positions in `args`) and how it uses them; asked at most once, only when a
    /// selector restricts keys.
    pub keys: &'a dyn Fn() -> Vec<(usize, KeyUse)>,
    pub channels: Channels,
}

/// Whether `user` may run `request`: Redis's `ACLCheckAllUserCommandPerm` (one selector must
/// allow it whole; else the most relevant denial, the last key or channel refused).
pub fn check(user: &User, request: &Request<'_>) -> Result<(), Denied> {
    let mut keys: Option<Vec<(usize, KeyUse)>> = None;
    let mut relevant = Denied::Command;
    for selector in &user.selectors {
        match check_selector(selector, request, &mut keys) {
            Ok(()) => return Ok(()),
            Err(denied) if denied > relevant => relevant = denied,
            Err(_) => {}
        }
    }
    Err(relevant)
}

fn check_selector(
    selector: &selector::Selector,
    request: &Request<'_>,
    keys: &mut Option<Vec<(usize, KeyUse)>>,
) -> Result<(), Denied> {
    let (id, args) = (request.id, request.args);
    if !selector.allcommands && !request.no_auth && !selector.bit(id) {
        let first = args.get(1).ok_or(Denied::Command)?;
        let allowed = selector.firstargs.get(&id).ok_or(Denied::Command)?;
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(first)) {
            return Err(Denied::Command);
        }
    }
    if !selector.allkeys {
        let keys = keys.get_or_insert_with(|| (request.keys)());
        for &(at, key_use) in keys.iter() {
            if !key_allowed(selector, args[at], key_use) {
                return Err(Denied::Key(at));
            }
        }
    }
    if !selector.allchannels {
        let (channels, literal) = match request.channels {
            Channels::None => (0..0, false),
            Channels::First => (1..2.min(args.len()), false),
            Channels::All => (1..args.len(), false),
            Channels::AllPatterns => (1..args.len(), true),
        };
        for at in channels {
            if !channel_allowed(&selector.channels, args[at], literal) {
                return Err(Denied::Channel(at));
            }
        }
    }
    Ok(())
}

/// Whether a pattern of `selector` allows `key` used as `key_use` says (Redis's
/// `ACLSelectorCheckKey`).
fn key_allowed(selector: &selector::Selector, key: &[u8], key_use: KeyUse) -> bool {
    let KeyUse { read, write } = key_use;
    selector
        .keys
        .iter()
        .any(|p| (p.read || !read) && (p.write || !write) && glob::matches(&p.pattern, key))
}

/// Whether `channels` allow `channel` (`literal`: a `PSUBSCRIBE` pattern must be one of them
/// exactly).
pub(crate) fn channel_allowed(channels: &[Vec<u8>], channel: &[u8], literal: bool) -> bool {
    channels.iter().any(|p| {
        if literal {
            p == channel
        } else {
            glob::matches(p, channel)
        }
    })
}

/// The server's users and ACL log. Every change bumps [`Acl::epoch`], so a session that
/// caches its user notices with one atomic load per request.
#[derive(Debug)]
pub struct Acl {
    users: Mutex<BTreeMap<Vec<u8>, Arc<User>>>,
    epoch: AtomicU64,
    pub(crate) log: log::Log,
}

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::default_user()));
        Self {
            users: Mutex::new(users),
            epoch: AtomicU64::new(1),
            log: log::Log::default(),
        }
    }
}

impl Acl {
    /// The users, locked (a change must [`Acl::changed`]).
    pub(crate) fn users(&self) -> MutexGuard<'_, BTreeMap<Vec<u8>, Arc<User>>> {
        self.users.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a change of the users.
    pub(crate) fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// The epoch of the users' last change.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The user named `name`.
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users().get(name).cloned()
    }

    /// `requirepass`: the default user's passwords become this one (none: `nopass`), as
    /// Redis's `ACLUpdateDefaultUserPassword`.
    pub fn set_default_password(&self, password: Option<&[u8]>) {
        let mut users = self.users();
        let current = users.get(&b"default"[..]).expect("the default user exists");
        let mut user = User::clone(current);
        user.apply(b"resetpass", false).expect("valid");
        match password {
            Some(p) => user.apply(&[b">", p].concat(), false).expect("valid"),
            None => user.apply(b"nopass", false).expect("valid"),
        }
        users.insert(b"default".to_vec(), Arc::new(user));
        drop(users);
        self.changed();
    }
}

#[cfg(test)]
mod tests;
