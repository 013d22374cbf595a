//! The commands ACL rules name (Redis 7.0's, [`super::universe::COMMANDS`]), each with an ID
//! that is its bit in a selector's command set, and the category bits they carry.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::universe::COMMANDS;

pub(crate) use super::categories::{Entry, CATEGORIES};

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

/// The category named `name` (any case, without `@`).
pub(crate) fn category(name: &[u8]) -> Option<u64> {
    CATEGORIES
        .iter()
        .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

#[cfg(test)]
mod tests {
    use super::super::categories::cat;
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
}
