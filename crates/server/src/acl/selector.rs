//! A selector: the commands, keys and channels one set of a user's rules allows (Redis's
//! `aclSelector`). A user has a root selector and any number of `(...)` ones; a command
//! runs when one of them allows it whole.

use std::collections::BTreeMap;

use super::ids::{self, Id, FUTURE_BIT, WORDS};
use super::RuleError;

/// A key pattern and what it allows (`~`: both, `%R~`: reading, `%W~`: writing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyPattern {
    pub(crate) pattern: Vec<u8>,
    pub(crate) read: bool,
    pub(crate) write: bool,
}

/// Most first arguments one selector allows of one command (`+select|0`).
const FIRSTARGS_PER_COMMAND_MAX: usize = 1_024;
/// Most key or channel patterns of one selector.
pub(crate) const PATTERNS_MAX: usize = 4_096;

/// See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selector {
    /// `~*` / `allkeys`.
    pub(crate) allkeys: bool,
    /// `&*` / `allchannels`.
    pub(crate) allchannels: bool,
    /// Every command bit is set (the future one included, which only `+@all` sets).
    pub(crate) allcommands: bool,
    /// One bit per command ID, and [`FUTURE_BIT`].
    pub(crate) bits: [u64; WORDS],
    /// The first arguments allowed of a command whose bit is clear (`+select|0`).
    pub(crate) firstargs: BTreeMap<Id, Vec<Vec<u8>>>,
    pub(crate) keys: Vec<KeyPattern>,
    pub(crate) channels: Vec<Vec<u8>>,
}

/// Whether `s` holds a space or a NUL (Redis's `ACLStringHasSpaces`).
pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b.is_ascii_whitespace() || b == 0 || b == 0x0b)
}

impl Selector {
    /// An empty selector: no command, no key; every channel when `allchannels`
    /// (`acl-pubsub-default`).
    pub(crate) fn new(allchannels: bool) -> Self {
        Self {
            allkeys: false,
            allchannels,
            allcommands: false,
            bits: [0; WORDS],
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    pub(crate) fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
            // Every bit set again (the future one only `+@all` sets): all commands, as a
            // `+@all` read back from the description makes it.
            self.allcommands = self.bits.iter().all(|w| *w == u64::MAX);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Allows or denies command `id`, and a container's subcommands with it (Redis's
    /// `ACLChangeSelectorPerm`).
    pub(crate) fn change(&mut self, id: Id, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        if ids::is_container(id) {
            for (sub, _) in ids::subcommands(id) {
                self.set_bit(sub, allow);
            }
        }
    }

    /// Allows or denies every command of category `cat`, walking containers and their
    /// subcommands as Redis does.
    pub(crate) fn change_category(&mut self, cat: u64, allow: bool) {
        for (id, entry) in ids::all() {
            if entry.categories & cat != 0 {
                self.change(id, allow);
            }
        }
    }

    /// How many commands of category `cat` are allowed and how many are not.
    pub(crate) fn count_category(&self, cat: u64) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for (id, entry) in ids::all() {
            if entry.categories & cat != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    fn set_all_commands(&mut self, on: bool) {
        self.bits = [if on { u64::MAX } else { 0 }; WORDS];
        self.allcommands = on;
        self.firstargs.clear();
    }

    /// Applies one rule (Redis's `ACLSetSelector`).
    pub(crate) fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_slice() {
            b"allkeys" | b"~*" => {
                self.allkeys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.allchannels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => self.set_all_commands(true),
            b"nocommands" | b"-@all" => self.set_all_commands(false),
            [b'~' | b'%', ..] => self.add_key_pattern(op)?,
            [b'&', rest @ ..] => self.add_channel(&op[1..1 + rest.len()])?,
            [sign @ (b'+' | b'-'), b'@', cat @ ..] => {
                let cat = ids::category(cat).ok_or(RuleError::Unknown)?;
                self.change_category(cat, *sign == b'+');
            }
            [b'+', ..] => self.allow_command(&op[1..])?,
            [b'-', ..] => {
                let id = ids::lookup(&op[1..]).ok_or(RuleError::Unknown)?;
                self.change(id, false);
            }
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// `~pattern`, `%R~pattern`, `%W~pattern`, `%RW~pattern`.
    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.allkeys {
            return Err(RuleError::AfterAllKeys);
        }
        let (read, write, pattern) = if op[0] == b'%' {
            // Without a `~`, the pattern is empty (as Redis reads `%RW`).
            let tilde = op.iter().position(|&b| b == b'~').unwrap_or(op.len());
            let (mut read, mut write) = (false, false);
            for &b in &op[1..tilde] {
                match b.to_ascii_uppercase() {
                    b'R' if !read => read = true,
                    b'W' if !write => write = true,
                    _ => return Err(RuleError::Syntax),
                }
            }
            (read, write, op.get(tilde + 1..).unwrap_or_default())
        } else {
            (true, true, &op[1..])
        };
        if has_spaces(pattern) || !(read || write) {
            return Err(RuleError::Syntax);
        }
        let count = self.keys.len();
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => {
                k.read |= read;
                k.write |= write;
            }
            None if count >= PATTERNS_MAX => return Err(RuleError::TooMany),
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    /// `&pattern`.
    fn add_channel(&mut self, pattern: &[u8]) -> Result<(), RuleError> {
        if self.allchannels {
            return Err(RuleError::AfterAllChannels);
        }
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        if !self.channels.iter().any(|c| c == pattern) {
            if self.channels.len() >= PATTERNS_MAX {
                return Err(RuleError::TooMany);
            }
            self.channels.push(pattern.to_vec());
        }
        Ok(())
    }

    /// `+command`, `+container|sub`, `+command|first-arg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let id = ids::lookup(name).ok_or(RuleError::Unknown)?;
            self.change(id, true);
            return Ok(());
        };
        let id = ids::lookup(&name[..bar]).ok_or(RuleError::Unknown)?;
        if ids::entry(id).sub {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        let first = &name[bar + 1..];
        if first.is_empty() {
            return Err(RuleError::Syntax);
        }
        if ids::is_container(id) {
            let sub = ids::lookup(name).ok_or(RuleError::Unknown)?;
            self.change(sub, true);
            return Ok(());
        }
        let allowed = self.firstargs.entry(id).or_default();
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(first)) {
            if allowed.len() >= FIRSTARGS_PER_COMMAND_MAX {
                return Err(RuleError::TooMany);
            }
            allowed.push(first.to_vec());
        }
        Ok(())
    }

    /// Whether `+@all` was the last word on commands (commands to come are allowed).
    pub(crate) fn future_commands(&self) -> bool {
        self.bit(FUTURE_BIT)
    }
}
