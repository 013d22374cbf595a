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

/// Logs a denial of a command a script called (`ACL LOG`, context `lua`).
pub fn log_script_denial(
    stats: &ServerStats,
    caller: Caller<'_>,
    command: &Command,
    denied: Denied,
    args: &[&[u8]],
) {
    let object = match denied {
        Denied::Command => command.name.as_bytes().to_vec(),
        Denied::Key(at) | Denied::Channel(at) => args[at].to_vec(),
    };
    let entry = log::Entry {
        count: 1,
        reason: denied.reason(),
        context: log::Context::Lua,
        object,
        username: caller.user.name.clone(),
        at_ms: crate::keyspace::wall_ms(),
        client_info: stats
            .clients
            .get(caller.client_id)
            .map(|e| e.line())
            .unwrap_or_default(),
    };
    let len_max = stats.config.get_u64("acllog-max-len") as usize;
    stats.acl.log.add(entry, len_max);
}

#[cfg(test)]
mod tests;
