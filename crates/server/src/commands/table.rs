//! The command table: one entry per command and subcommand tamer serves, with what Redis 7.0
//! knows of it (arity, flags, ACL categories, key specs, its `COMMAND INFO` and `COMMAND DOCS`
//! replies) and what tamer adds (its handler, tamer's own flags). `build.rs` generates it from
//! `meta.json` (Redis's metadata of these commands) and `table.toml` (tamer's side), so that
//! the table is the one place that knows the commands: the gate (`super::gate`) decides from
//! it, the session and the network read its flags, and `COMMAND` replies from it.

use super::spec::{
    AclCategories, BeginSearch, Command, FindKeys, Flags, KeyFlags, KeySpec, Run, SessionOp, Table,
    TamerFlags,
};

include!(concat!(env!("OUT_DIR"), "/command_table.rs"));

/// The table, with its name index.
pub static TABLE: Table = Table {
    commands: &COMMANDS,
    name_seed: NAME_SEED,
    name_slots: &NAME_SLOTS,
};

/// The command named `name` (any case): one hash, one compare.
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    TABLE.lookup(name)
}

/// The command or subcommand a request names (a container sent alone is itself).
pub fn lookup_request<A: AsRef<[u8]>>(args: &[A]) -> Option<&'static Command> {
    TABLE.lookup_request(args)
}

/// Every command and subcommand, containers first then their subcommands.
pub fn all_with_subcommands() -> impl Iterator<Item = &'static Command> {
    COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a perfect hash that loses a name (a slot overwritten), a lookup that cares for
    /// case, or one that answers a name it does not hold (a slot's command not compared).
    #[test]
    fn lookup_finds_each_command_in_any_case_and_nothing_else() {
        for command in TABLE.commands {
            let name = command.name;
            assert_eq!(lookup(name.as_bytes()), Some(command), "{name}");
            let upper = name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()), Some(command), "{upper}");
        }
        let mut x: u64 = 0x1234_5678;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 12) as usize;
            let word: Vec<u8> = (0..len)
                .map(|i| b'a' + ((x >> (i * 5)) % 26) as u8)
                .collect();
            if let Some(c) = lookup(&word) {
                assert!(c.name.as_bytes().eq_ignore_ascii_case(&word), "{word:?}");
            }
        }
        for absent in ["", "nosuch", "getx", "ge", "config|get", "subscribex"] {
            assert_eq!(lookup(absent.as_bytes()), None, "{absent}");
        }
    }
}
