//! The commands ACL rules name (Redis 7.0's, [`super::universe::COMMANDS`]), each with an ID
//! that is its bit in a selector's command set, and the category bits they carry.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::universe::COMMANDS;
use crate::commands::spec::Command;

/// One command or subcommand (`container|sub`) of Redis 7.0.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Lowercase; a subcommand's is `container|sub`.
    pub(crate) name: &'static str,
    /// Its ACL categories ([`cat`]'s bits).
    pub(crate) categories: u64,
    /// It is a subcommand (its container comes before it).
    pub(crate) sub: bool,
}

/// The category bits, as `AclCategories` numbers them (and Redis's `ACL CAT` lists them).
pub(crate) mod cat {
    use crate::commands::spec::AclCategories as A;
    pub(crate) const KEYSPACE: u64 = A::KEYSPACE.0;
    pub(crate) const READ: u64 = A::READ.0;
    pub(crate) const WRITE: u64 = A::WRITE.0;
    pub(crate) const SET: u64 = A::SET.0;
    pub(crate) const SORTEDSET: u64 = A::SORTEDSET.0;
    pub(crate) const LIST: u64 = A::LIST.0;
    pub(crate) const HASH: u64 = A::HASH.0;
    pub(crate) const STRING: u64 = A::STRING.0;
    pub(crate) const BITMAP: u64 = A::BITMAP.0;
    pub(crate) const HYPERLOGLOG: u64 = A::HYPERLOGLOG.0;
    pub(crate) const GEO: u64 = A::GEO.0;
    pub(crate) const STREAM: u64 = A::STREAM.0;
    pub(crate) const PUBSUB: u64 = A::PUBSUB.0;
    pub(crate) const ADMIN: u64 = A::ADMIN.0;
    pub(crate) const FAST: u64 = A::FAST.0;
    pub(crate) const SLOW: u64 = A::SLOW.0;
    pub(crate) const BLOCKING: u64 = A::BLOCKING.0;
    pub(crate) const DANGEROUS: u64 = A::DANGEROUS.0;
    pub(crate) const CONNECTION: u64 = A::CONNECTION.0;
    pub(crate) const TRANSACTION: u64 = A::TRANSACTION.0;
    pub(crate) const SCRIPTING: u64 = A::SCRIPTING.0;
}

/// The category names in Redis's order (`ACL CAT`), each at its bit.
pub(crate) use crate::commands::spec::AclCategories;

/// Words of a selector's command set: one bit per entry of [`COMMANDS`] and the last bit
/// ([`FUTURE_BIT`]) for the commands to come (set only by `+@all`, as Redis's).
pub(crate) const WORDS: usize = 6;
/// The bit `+@all` sets beside every command's (Redis's reserved last bit).
pub(crate) const FUTURE_BIT: usize = WORDS * 64 - 1;

const _: () = assert!(
    COMMANDS.len() < FUTURE_BIT,
    "a command's bit is below the future bit"
);

/// A command's ID: its index in [`COMMANDS`].
pub(crate) type Id = usize;

/// Every entry with its ID.
pub(crate) fn all() -> impl Iterator<Item = (Id, &'static Entry)> {
    COMMANDS.iter().enumerate()
}

/// The subcommands of container `id` (those that follow it).
pub(crate) fn subcommands(id: Id) -> impl Iterator<Item = (Id, &'static Entry)> {
    let next = id + 1;
    COMMANDS[next..]
        .iter()
        .take_while(|e| e.sub)
        .enumerate()
        .map(move |(i, e)| (next + i, e))
}

/// Whether `id` is a container (it has subcommands).
pub(crate) fn is_container(id: Id) -> bool {
    COMMANDS.get(id + 1).is_some_and(|e| e.sub) && !COMMANDS[id].sub
}

/// The entry of `id`.
pub(crate) fn entry(id: Id) -> &'static Entry {
    &COMMANDS[id]
}

fn by_name() -> &'static HashMap<&'static str, Id> {
    static INDEX: OnceLock<HashMap<&'static str, Id>> = OnceLock::new();
    INDEX.get_or_init(|| all().map(|(id, e)| (e.name, id)).collect())
}

/// The command or subcommand `name` names (any case; `container|sub` for a subcommand),
/// as Redis's `ACLLookupCommand` finds it: `None` for an unknown one, for a `|` after a
/// command without subcommands, and for more than one `|`.
pub(crate) fn lookup(name: &[u8]) -> Option<Id> {
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    by_name().get(name.as_str()).copied()
}

/// The ID of a command of tamer's table (build.rs found every served command among
/// Redis's: `every_served_command_has_an_id` checks it is the right one).
pub(crate) fn of(command: &Command) -> Id {
    command.acl_id
}

/// The category named `name` (any case, without `@`).
pub(crate) fn category(name: &[u8]) -> Option<u64> {
    AclCategories::NAMES
        .iter()
        .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_followed_by_their_subcommands() {
        let config = lookup(b"CONFIG").expect("config");
        assert!(is_container(config));
        let subs: Vec<_> = subcommands(config).map(|(_, e)| e.name).collect();
        assert!(subs.contains(&"config|get") && subs.iter().all(|s| s.starts_with("config|")));
        assert!(!is_container(lookup(b"get").expect("get")));
        assert_eq!(lookup(b"get|x"), None);
        assert_eq!(lookup(b"config|get|x"), None);
        assert_eq!(category(b"Hash"), Some(cat::HASH));
        assert_eq!(category(b"all"), None);
    }

    #[test]
    fn every_served_command_has_an_id() {
        for command in crate::commands::table::TABLE.commands {
            assert_eq!(entry(of(command)).name, command.name);
            for sub in command.subcommands {
                assert_eq!(entry(of(sub)).name, sub.name);
            }
        }
    }
}
