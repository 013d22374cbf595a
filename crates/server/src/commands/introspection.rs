//! `COMMAND` and its subcommands, answered from the table (`super::table`): `COUNT`, `LIST
//! [FILTERBY MODULE|ACLCAT|PATTERN]`, `INFO`, `DOCS` (each entry's replies were rendered from
//! Redis 7.0's metadata at build time), `GETKEYS` and `GETKEYSANDFLAGS` (from the key specs),
//! reply for reply as redis-server 7.0. redis-cli builds its hints from `COMMAND DOCS`;
//! cluster-aware clients find keys through `COMMAND INFO`'s key specs or `GETKEYS`.
//!
//! Lists come in the table's order (by name); Redis's follow its hash table, so clients must
//! not rely on either.

use tamer_store::{DbError, Tx};

use super::spec::{AclCategories, Command, Flags, KeyFlags, Table};
use super::Context;
use crate::resp::{write, Protocol};

type Result = std::result::Result<(), DbError>;

/// The rendering of an entry's replies for the client's protocol.
fn index(protocol: Protocol) -> usize {
    usize::from(protocol == Protocol::Resp3)
}

/// `COMMAND`: every command's `COMMAND INFO` entry.
pub fn all(
    table: &'static Table,
    ctx: &Context,
    _: &mut Tx<'_>,
    _: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    write::array(out, table.commands.len());
    for c in table.commands {
        out.extend_from_slice(c.info[index(ctx.protocol)]);
    }
    Ok(())
}

/// `COMMAND COUNT`: the commands (not their subcommands).
pub fn count(
    table: &'static Table,
    _: &Context,
    _: &mut Tx<'_>,
    _: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    write::integer(out, table.commands.len() as i64);
    Ok(())
}

/// The command or subcommand a `COMMAND INFO`/`DOCS` argument names (`container|sub`).
fn find(table: &'static Table, name: &[u8]) -> Option<&'static Command> {
    let mut parts = name.splitn(2, |&b| b == b'|');
    let top = parts.next()?;
    let command = table.lookup(top)?;
    match parts.next() {
        None => Some(command),
        Some(sub) => command.subcommand(sub),
    }
}

/// `COMMAND INFO [name ...]`: each name's entry or a null; none: every command's.
pub fn info(
    table: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    if args.len() == 2 {
        return all(table, ctx, tx, args, out);
    }
    write::array(out, args.len() - 2);
    for name in &args[2..] {
        match find(table, name) {
            Some(c) => out.extend_from_slice(c.info[index(ctx.protocol)]),
            None => write::null(out, ctx.protocol),
        }
    }
    Ok(())
}

/// `COMMAND DOCS [name ...]`: a map of each known name's docs; none: every command's.
pub fn docs(
    table: &'static Table,
    ctx: &Context,
    _: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let found: Vec<&Command> = if args.len() == 2 {
        table.commands.iter().collect()
    } else {
        args[2..].iter().filter_map(|n| find(table, n)).collect()
    };
    write::map(out, found.len(), ctx.protocol);
    for c in found {
        write::bulk(out, c.name.as_bytes());
        out.extend_from_slice(c.docs[index(ctx.protocol)]);
    }
    Ok(())
}

/// How `COMMAND LIST` filters.
enum Filter<'a> {
    All,
    /// Module commands: tamer has none.
    Module,
    Category(Option<AclCategories>),
    Pattern(&'a [u8]),
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: the names of
/// the commands and subcommands that pass.
pub fn list(
    table: &'static Table,
    _: &Context,
    _: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let filter = match &args[2..] {
        [] => Filter::All,
        [by, kind, value] if by.eq_ignore_ascii_case(b"filterby") => {
            match &kind.to_ascii_lowercase()[..] {
                b"module" => Filter::Module,
                b"aclcat" => Filter::Category(category(value)),
                b"pattern" => Filter::Pattern(value),
                _ => {
                    write::error(out, "ERR syntax error");
                    return Ok(());
                }
            }
        }
        _ => {
            write::error(out, "ERR syntax error");
            return Ok(());
        }
    };
    let names: Vec<&str> = table
        .commands
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands))
        .filter(|c| match &filter {
            Filter::All => true,
            Filter::Module => false,
            Filter::Category(cat) => cat.is_some_and(|cat| c.acl.0 & cat.0 != 0),
            Filter::Pattern(p) => crate::glob::matches_nocase(p, c.name.as_bytes()),
        })
        .map(|c| c.name)
        .collect();
    write::array(out, names.len());
    for name in names {
        write::bulk(out, name.as_bytes());
    }
    Ok(())
}

/// The ACL category named `name` (any case).
fn category(name: &[u8]) -> Option<AclCategories> {
    AclCategories::NAMES
        .iter()
        .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| AclCategories(1 << i))
}

/// `COMMAND GETKEYS command [arg ...]`: the keys the command would use.
pub fn getkeys(
    table: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    getkeys_generic(table, ctx, tx, args, out, false)
}

/// `COMMAND GETKEYSANDFLAGS command [arg ...]`: the keys with how the command uses each.
pub fn getkeysandflags(
    table: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    getkeys_generic(table, ctx, tx, args, out, true)
}

/// Redis's `getKeysSubcommandImpl`.
fn getkeys_generic(
    table: &'static Table,
    ctx: &Context,
    _: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    with_flags: bool,
) -> Result {
    let target = &args[2..];
    let command = table.lookup_request(target);
    let Some(command) = command else {
        write::error(out, "ERR Invalid command specified");
        return Ok(());
    };
    if !command.has_keys() {
        write::error(out, "ERR The command has no key arguments");
        return Ok(());
    }
    if !command.arity_fits(target.len()) {
        write::error(out, "ERR Invalid number of arguments specified for command");
        return Ok(());
    }
    let keys = command.keys(target, false).unwrap_or_default();
    if keys.is_empty() && !command.flags.contains(Flags::NO_MANDATORY_KEYS) {
        write::error(out, "ERR Invalid arguments specified for command");
        return Ok(());
    }
    write::array(out, keys.len());
    for (position, spec) in keys {
        if with_flags {
            write::array(out, 2);
        }
        write::bulk(out, target[position]);
        if with_flags {
            let flags = match command.key_flags {
                Some(flags_of) if spec.flags.contains(KeyFlags::VARIABLE_FLAGS) => flags_of(target),
                _ => spec.flags,
            };
            write::set(out, flags.names().count(), ctx.protocol);
            for name in flags.names() {
                write::simple(out, name);
            }
        }
    }
    Ok(())
}
