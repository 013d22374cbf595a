//! The command table: one entry per command and subcommand tamer serves, with what Redis 7.0
//! knows of it (arity, flags, ACL categories, key specs, its `COMMAND INFO` and `COMMAND DOCS`
//! replies) and what tamer adds (its handler, tamer's own flags). `build.rs` generates it from
//! `meta.json` (Redis's metadata of these commands) and `table.toml` (tamer's side), so that
//! the table is the one place that knows the commands: the gate (`super::gate`) decides from
//! it, the session and the network read its flags, and `COMMAND` replies from it.

use tamer_store::{DbError, Tx};

use super::context::Context;

/// A handler that runs in a store transaction: `args[0]` is the command's name. It writes
/// Redis-level errors into its reply and returns `Err` only for a store error (a conflict
/// retries the whole transaction, so it writes nothing but its reply and its changes).
pub type TxHandler = fn(&Context<'_>, &mut Tx<'_>, &[&[u8]], &mut Vec<u8>) -> Result<(), DbError>;

/// A [`TxHandler`] that is also given the table (`COMMAND`'s subcommands read it).
pub type TableHandler = fn(
    &'static [Command],
    &Context<'_>,
    &mut Tx<'_>,
    &[&[u8]],
    &mut Vec<u8>,
) -> Result<(), DbError>;

/// What runs a command.
#[derive(Clone, Copy)]
pub enum Run {
    /// A handler in a store transaction.
    Tx(TxHandler),
    /// A handler in a store transaction, given the table.
    WithTable(TableHandler),
    /// The session runs it (it matches the operation).
    Session(SessionOp),
    /// A command of subcommands: each has its own entry.
    Container,
}

/// A set of Redis's command flags (the constants are generated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags(pub u64);

/// A set of Redis's ACL categories (the constants are generated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclCategories(pub u64);

/// A set of Redis's key spec flags (the constants are generated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyFlags(pub u64);

/// A set of tamer's own flags (the constants are generated; `table.toml` documents them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TamerFlags(pub u64);

macro_rules! bit_set {
    ($($ty:ident),*) => {$(
        impl $ty {
            /// Whether every flag of `other` is in this set.
            pub const fn contains(self, other: $ty) -> bool {
                self.0 & other.0 == other.0
            }

            /// The names of the set's flags, in bit order.
            pub fn names(self) -> impl Iterator<Item = &'static str> {
                $ty::NAMES
                    .iter()
                    .enumerate()
                    .filter(move |(i, _)| self.0 & (1 << i) != 0)
                    .map(|(_, n)| *n)
            }
        }
    )*};
}

bit_set!(Flags, AclCategories, KeyFlags, TamerFlags);

/// Where a key spec's search for keys begins (Redis's `begin_search`).
#[derive(Clone, Copy, Debug)]
pub enum BeginSearch {
    /// At this argument.
    Index(i64),
    /// After the first argument equal to `keyword` (any case), searched from `start_from`
    /// (negative: backwards from the end).
    Keyword {
        /// The keyword.
        keyword: &'static str,
        /// Where the search starts.
        start_from: i64,
    },
    /// Not described: the spec finds nothing.
    Unknown,
}

/// How a key spec finds its keys from where the search began (Redis's `find_keys`).
#[derive(Clone, Copy, Debug)]
pub enum FindKeys {
    /// Keys up to `last_key` (from the beginning; negative: from the end, or with `limit`, a
    /// fraction of the rest), every `key_step` arguments.
    Range {
        /// The last key's offset.
        last_key: i64,
        /// Arguments between keys.
        key_step: i64,
        /// With `last_key` -1: the keys are the first 1/`limit` of the rest.
        limit: i64,
    },
    /// The number of keys at `keynum_index`, the first `first_key` after it.
    Keynum {
        /// The count's offset.
        keynum_index: i64,
        /// The first key's offset from the count.
        first_key: i64,
        /// Arguments between keys.
        key_step: i64,
    },
    /// Not described: the spec finds nothing.
    Unknown,
}

/// One of a command's key specs.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// How the command uses these keys.
    pub flags: KeyFlags,
    /// The same flags as `COMMAND GETKEYSANDFLAGS` names them, in its order.
    pub flag_names: &'static [&'static str],
    /// Where the search begins.
    pub begin: BeginSearch,
    /// How the keys are found.
    pub find: FindKeys,
}

/// One command or subcommand.
pub struct Command {
    /// Lowercase; a subcommand's is `container|sub`.
    pub name: &'static str,
    /// Redis's convention: `n > 0` exactly `n` arguments (the name included), `n < 0` at
    /// least `-n`.
    pub arity: i64,
    /// Redis's flags.
    pub flags: Flags,
    /// Redis's ACL categories.
    pub acl: AclCategories,
    /// Where its keys are.
    pub key_specs: &'static [KeySpec],
    /// Its subcommands, sorted by name (a container's).
    pub subcommands: &'static [Command],
    /// What runs it.
    pub run: Run,
    /// tamer's own flags.
    pub tamer: TamerFlags,
    /// A blocking command's timeout argument: its index, or -1 for the last; 0: none.
    pub block_timeout_at: i64,
    /// Its `COMMAND INFO` entry: RESP2, RESP3.
    pub info: [&'static [u8]; 2],
    /// Its `COMMAND DOCS` value: RESP2, RESP3.
    pub docs: [&'static [u8]; 2],
}

/// Entries are statics, each its own command: equal when the same.
impl PartialEq for Command {
    fn eq(&self, other: &Command) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Command {}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

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

/// Why `COMMAND GETKEYS` found no keys where some were due (Redis's invalid key spec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidKeys;

impl Command {
    /// Whether `argc` arguments (the name included) fit the command's arity.
    pub fn arity_fits(&self, argc: usize) -> bool {
        let argc = argc as i64;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// The subcommand `sub` (any case) of this container.
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static Command> {
        let container = self.name.len();
        self.subcommands
            .iter()
            .find(|s| s.name.as_bytes()[container + 1..].eq_ignore_ascii_case(sub))
    }

    /// A blocking command's timeout argument in `args`.
    pub fn block_timeout<'a>(&self, args: &[&'a [u8]]) -> Option<&'a [u8]> {
        match self.block_timeout_at {
            0 => None,
            -1 => args.last().copied(),
            i => args.get(usize::try_from(i).ok()?).copied(),
        }
    }

    /// Whether the command names keys (Redis's `doesCommandHaveKeys`).
    pub fn has_keys(&self) -> bool {
        self.key_specs
            .iter()
            .any(|s| !s.flags.contains(KeyFlags::NOT_KEY))
    }

    /// The positions of the keys in `args` (`args[0]` the name), each with its spec, as
    /// Redis's `getKeysUsingKeySpecs` finds them; `partial`: a spec that does not fit `args`
    /// is skipped, else it makes the whole search invalid.
    pub fn keys<A: AsRef<[u8]>>(
        &self,
        args: &[A],
        partial: bool,
    ) -> Result<Vec<(usize, &'static KeySpec)>, InvalidKeys> {
        let mut keys = Vec::new();
        for spec in self.key_specs {
            if spec.flags.contains(KeyFlags::NOT_KEY) {
                continue;
            }
            match spec_keys(spec, args, self.arity) {
                Ok(Some(positions)) => keys.extend(positions.map(|p| (p, spec))),
                Ok(None) => {}
                Err(InvalidKeys) if partial => {}
                Err(InvalidKeys) => return Err(InvalidKeys),
            }
        }
        Ok(keys)
    }
}

/// The key positions one spec finds in `args`: `None` when its keyword is absent.
fn spec_keys<A: AsRef<[u8]>>(
    spec: &KeySpec,
    args: &[A],
    arity: i64,
) -> Result<Option<impl Iterator<Item = usize>>, InvalidKeys> {
    let argc = args.len() as i64;
    let first = match spec.begin {
        BeginSearch::Index(i) => i,
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => match keyword_position(args, keyword, start_from) {
            Some(i) => i + 1,
            None => return Ok(None),
        },
        BeginSearch::Unknown => return Err(InvalidKeys),
    };
    let (first, last, step) = match spec.find {
        FindKeys::Range {
            last_key,
            key_step,
            limit,
        } => {
            let last = if last_key >= 0 {
                first + last_key
            } else if limit == 0 {
                argc + last_key
            } else {
                first + ((argc - first) / limit + last_key)
            };
            (first, last, key_step)
        }
        FindKeys::Keynum {
            keynum_index,
            first_key,
            key_step,
        } => {
            if keynum_index >= argc {
                return Err(InvalidKeys);
            }
            let count = args
                .get(usize::try_from(first + keynum_index).map_err(|_| InvalidKeys)?)
                .and_then(|a| crate::resp::parse_i64(a.as_ref()))
                .filter(|n| *n >= 0)
                .ok_or(InvalidKeys)?;
            let first = first + first_key;
            (first, first.saturating_add(count) - 1, key_step)
        }
        FindKeys::Unknown => return Err(InvalidKeys),
    };
    if last >= argc || last < first || first >= argc {
        return Err(InvalidKeys);
    }
    assert!(
        step > 0 && first > 0,
        "a key spec steps forward from an argument"
    );
    // A command of fixed arity declares keys within it; one of variable arity may end short.
    debug_assert!(arity < 0 || last < arity, "keys past a fixed arity");
    Ok(Some(
        (first as usize..=last as usize).step_by(step as usize),
    ))
}

/// The position of `keyword` (any case) searched from `start_from` (negative: backwards from
/// the end), as Redis's keyword search.
fn keyword_position<A: AsRef<[u8]>>(args: &[A], keyword: &str, start_from: i64) -> Option<i64> {
    let argc = args.len() as i64;
    let (start, end) = if start_from > 0 {
        (start_from, argc - 1)
    } else {
        (argc + start_from, 1)
    };
    let mut i = start;
    // Bounded by the arguments: `i` moves towards `end` and stops outside them.
    while i != end {
        if i >= argc || i < 1 {
            return None;
        }
        if args[i as usize]
            .as_ref()
            .eq_ignore_ascii_case(keyword.as_bytes())
        {
            return Some(i);
        }
        i += if start <= end { 1 } else { -1 };
    }
    None
}
