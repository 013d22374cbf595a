//! ACL permissions of a request of the command table: what `crate::acl::check` needs of a
//! command (its ACL ID, whether it runs before authentication, its keys as its key specs
//! find them, which arguments are channels), and the `ACL LOG` entry of a script's denial.

use super::context::Caller;
use super::spec::{BeginSearch, Command, FindKeys, Flags, KeyFlags};
use crate::acl::{self, log, Channels, Denied, KeyUse, Request, User};
use crate::stats::ServerStats;

/// Whether `user` may run `command` with `args` (`args[0]` its name).
pub fn check(user: &User, command: &Command, args: &[&[u8]]) -> Result<(), Denied> {
    let keys = || {
        if command.has_keys() {
            keys_of(command, args)
        } else {
            Vec::new()
        }
    };
    let channels = match command.name {
        "publish" | "spublish" => Channels::First,
        "subscribe" | "ssubscribe" => Channels::All,
        "psubscribe" => Channels::AllPatterns,
        _ => Channels::None,
    };
    let request = Request {
        id: command.acl_id,
        no_auth: command.flags.contains(Flags::NO_AUTH),
        args,
        keys: &keys,
        channels,
    };
    acl::check(user, &request)
}

/// The keys of a request and how it uses them (Redis's `getKeysFromCommandWithSpecs`: a
/// request its key specs do not fit names no key; `access` is a read, `insert`, `delete` and
/// `update` writes). A command of one key at a fixed place (`GET`, `SET` ...) is read
/// without walking the specs.
fn keys_of(command: &Command, args: &[&[u8]]) -> Vec<(usize, KeyUse)> {
    let key_use = |flags: KeyFlags| KeyUse {
        read: flags.contains(KeyFlags::ACCESS),
        write: flags.contains(KeyFlags::INSERT)
            || flags.contains(KeyFlags::DELETE)
            || flags.contains(KeyFlags::UPDATE),
    };
    if let [spec] = command.key_specs {
        let fixed = matches!(spec.find, FindKeys::Range { last_key: 0, .. })
            && !spec.flags.contains(KeyFlags::VARIABLE_FLAGS)
            && !spec.flags.contains(KeyFlags::NOT_KEY);
        if let (true, BeginSearch::Index(at)) = (fixed, spec.begin) {
            let at = at as usize;
            return if at < args.len() {
                vec![(at, key_use(spec.flags))]
            } else {
                Vec::new()
            };
        }
    }
    let keys = command.keys(args, false).unwrap_or_default();
    keys.into_iter()
        .map(|(at, spec)| {
            let flags = match command.key_flags {
                Some(flags_of) if spec.flags.contains(KeyFlags::VARIABLE_FLAGS) => flags_of(args),
                _ => spec.flags,
            };
            (at, key_use(flags))
        })
        .collect()
}

/// One `ACL LOG` entry: what was refused, to whom, from which client (its `CLIENT INFO`
/// line), kept within `acllog-max-len`.
pub struct Logged<'a> {
    pub reason: &'static str,
    pub context: log::Context,
    pub object: Vec<u8>,
    pub username: &'a [u8],
    pub client_id: u64,
}

/// Adds `logged` to `ACL LOG`.
pub fn log(stats: &ServerStats, logged: Logged<'_>) {
    let entry = log::Entry {
        count: 1,
        reason: logged.reason,
        context: logged.context,
        object: logged.object,
        username: logged.username.to_vec(),
        at_ms: crate::keyspace::wall_ms(),
        client_info: stats
            .clients
            .get(logged.client_id)
            .map(|e| e.line())
            .unwrap_or_default(),
    };
    let len_max = stats.config.get_u64("acllog-max-len") as usize;
    stats.acl.log.add(entry, len_max);
}

/// Logs a denial of `command` with `args` by `user` (`context`: where it was refused).
pub fn log_denial(stats: &ServerStats, denial: Denial<'_>, context: log::Context) {
    let Denial {
        command,
        denied,
        args,
        username,
        client_id,
    } = denial;
    let object = match denied {
        Denied::Command => command.name.as_bytes().to_vec(),
        Denied::Key(at) | Denied::Channel(at) => args[at].to_vec(),
    };
    let logged = Logged {
        reason: denied.reason(),
        context,
        object,
        username,
        client_id,
    };
    log(stats, logged);
}

/// A denied request, as [`log_denial`] logs it.
pub struct Denial<'a> {
    pub command: &'a Command,
    pub denied: Denied,
    pub args: &'a [&'a [u8]],
    pub username: &'a [u8],
    pub client_id: u64,
}

/// Logs a denial of a command a script called (`ACL LOG`, context `lua`).
pub fn log_script_denial(
    stats: &ServerStats,
    caller: Caller<'_>,
    command: &Command,
    denied: Denied,
    args: &[&[u8]],
) {
    let denial = Denial {
        command,
        denied,
        args,
        username: &caller.user.name,
        client_id: caller.client_id,
    };
    log_denial(stats, denial, log::Context::Lua);
}

#[cfg(test)]
mod tests;
