//! The command table: one entry per command and subcommand tamer serves, with what Redis 7.0
//! knows of it (arity, flags, ACL categories, key specs, its `COMMAND INFO` and `COMMAND DOCS`
//! replies) and what tamer adds (its handler, tamer's own flags). `build.rs` generates it from
//! `meta.json` (Redis's metadata of these commands) and `table.toml` (tamer's side), so that
//! the table is the one place that knows the commands: the gate (`super::gate`) decides from
//! it, the session and the network read its flags, and `COMMAND` replies from it.

use super::spec::{
    AclCategories, BeginSearch, Command, FindKeys, Flags, KeyFlags, KeySpec, Run, SessionOp,
    TamerFlags,
};

include!(concat!(env!("OUT_DIR"), "/command_table.rs"));

/// Longest name [`lookup`] looks up: longer ones are no command's.
const NAME_BYTES_MAX: usize = 32;

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    let mut lower = [0u8; NAME_BYTES_MAX];
    let lower = lower.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    index_of(lower).map(|i| &COMMANDS[i])
}

/// The command or subcommand a request names (a container sent alone is itself).
pub fn lookup_request<A: AsRef<[u8]>>(args: &[A]) -> Option<&'static Command> {
    let command = lookup(args.first()?.as_ref())?;
    match args.get(1) {
        Some(sub) if !command.subcommands.is_empty() => command.subcommand(sub.as_ref()),
        _ => Some(command),
    }
}

/// Every command tamer serves, sorted by name (subcommands in their containers).
pub fn all() -> &'static [Command] {
    &COMMANDS
}

/// Every command and subcommand, containers first then their subcommands.
pub fn all_with_subcommands() -> impl Iterator<Item = &'static Command> {
    COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
}
