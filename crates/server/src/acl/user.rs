//! A user: whether it may log in, its passwords (SHA-256, hex) and its selectors (Redis's
//! `user`), changed by rules (`ACL SETUSER`, `user` lines) and described back as rules.

use sha2::{Digest, Sha256};

use super::selector::{has_spaces, Selector};
use super::RuleError;

/// Most passwords of one user.
const PASSWORDS_MAX: usize = 1_024;
/// Most selectors of one user, the root one included.
const SELECTORS_MAX: usize = 1_024;

/// See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub(crate) name: Vec<u8>,
    /// `on` (else `off`: no one may log in as it).
    pub(crate) enabled: bool,
    /// `nopass`: any password logs in.
    pub(crate) nopass: bool,
    /// `sanitize-payload` / `skip-sanitize-payload` (`None`: neither was given).
    pub(crate) sanitize_payload: Option<bool>,
    /// SHA-256 of each password, 64 lowercase hex digits.
    pub(crate) passwords: Vec<String>,
    /// The root selector first, then the `(...)` ones.
    pub(crate) selectors: Vec<Selector>,
}

/// SHA-256 of `password`, as lowercase hex (Redis's `ACLHashPassword`).
pub(crate) fn hash_password(password: &[u8]) -> String {
    Sha256::digest(password)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `hash` is 64 lowercase hex digits.
fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == 64 && hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl User {
    /// A new user as Redis creates one: off, no password, no command, no key; channels as
    /// `acl-pubsub-default` says.
    pub(crate) fn new(name: &[u8], allchannels: bool) -> Self {
        Self {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(allchannels)],
        }
    }

    /// The `default` user a fresh server has: on, no password, everything allowed.
    pub(crate) fn default_user() -> Self {
        let mut user = Self::new(b"default", false);
        for op in [&b"+@all"[..], b"~*", b"&*", b"on", b"nopass"] {
            user.apply(op, false)
                .expect("the default user's rules are valid");
        }
        user
    }

    pub(crate) fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one rule (Redis's `ACLSetUser`); `allchannels` is `acl-pubsub-default`.
    pub(crate) fn apply(&mut self, op: &[u8], allchannels: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        match op.to_ascii_lowercase().as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.sanitize_payload = Some(false),
            b"sanitize-payload" => self.sanitize_payload = Some(true),
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.truncate(1),
            b"reset" => self.reset(allchannels),
            [b'>' | b'#', ..] => self.add_password(op)?,
            [b'<' | b'!', ..] => self.remove_password(op)?,
            [b'(', .., b')'] => {
                if self.selectors.len() >= SELECTORS_MAX {
                    return Err(RuleError::TooMany);
                }
                let selector = selector_from(&op[1..op.len() - 1], allchannels)?;
                self.selectors.push(selector);
            }
            _ => self.selectors[0].apply(op)?,
        }
        Ok(())
    }

    /// `reset`: back to a new user's state, with `sanitize-payload`.
    fn reset(&mut self, allchannels: bool) {
        let name = std::mem::take(&mut self.name);
        *self = Self::new(&name, allchannels);
        self.sanitize_payload = Some(true);
    }

    fn add_password(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let hash = if op[0] == b'>' {
            hash_password(&op[1..])
        } else if valid_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        if !self.passwords.contains(&hash) {
            if self.passwords.len() >= PASSWORDS_MAX {
                return Err(RuleError::TooMany);
            }
            self.passwords.push(hash);
        }
        self.nopass = false;
        Ok(())
    }

    fn remove_password(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let hash = if op[0] == b'<' {
            hash_password(&op[1..])
        } else if valid_hash(&op[1..]) {
            String::from_utf8_lossy(&op[1..]).into_owned()
        } else {
            return Err(RuleError::BadHash);
        };
        let at = self.passwords.iter().position(|p| *p == hash);
        self.passwords.remove(at.ok_or(RuleError::NoSuchPassword)?);
        Ok(())
    }

    /// Whether `password` logs in as this user (disabled users take none).
    pub(crate) fn password_matches(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = hash_password(password);
        // Every stored hash is compared whole, so the time does not tell which one matched.
        self.passwords.iter().fold(false, |found, p| {
            found | constant_time_eq(p.as_bytes(), hash.as_bytes())
        })
    }

    /// Its flags as `ACL GETUSER` and `ACL LIST` name them, in Redis's order.
    pub(crate) fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// Its rules, as `ACL LIST` shows them after `user NAME` (Redis's `ACLDescribeUser`).
    pub(crate) fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for flag in self.flags() {
            out.extend_from_slice(flag.as_bytes());
            out.push(b' ');
        }
        for hash in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(hash.as_bytes());
            out.push(b' ');
        }
        for (i, selector) in self.selectors.iter().enumerate() {
            let rules = super::describe::selector(selector);
            if i > 0 {
                out.extend_from_slice(b" (");
            }
            out.extend_from_slice(&rules);
            if i > 0 {
                out.push(b')');
            }
        }
        out
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// A selector from the rules between a `(` and its `)`, split at spaces as Redis's
/// `sdssplitargs` splits them (quotes are not taken apart: patterns have no spaces).
fn selector_from(rules: &[u8], allchannels: bool) -> Result<Selector, RuleError> {
    let mut selector = Selector::new(allchannels);
    for rule in rules
        .split(|b| b.is_ascii_whitespace())
        .filter(|r| !r.is_empty())
    {
        selector.apply(rule)?;
    }
    Ok(selector)
}

/// Joins the rules of a selector given over several arguments (`(~a` `+get)`) into one, as
/// Redis's `ACLMergeSelectorArguments`: `Err` holds the index of an unclosed `(`.
pub(crate) fn merge_selectors(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut merged: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, &arg) in args.iter().enumerate() {
        if let Some((_, selector)) = &mut open {
            selector.push(b' ');
            selector.extend_from_slice(arg);
            if arg.last() == Some(&b')') {
                merged.push(open.take().expect("open").1);
            }
        } else if arg.first() == Some(&b'(') && arg.last() != Some(&b')') {
            open = Some((i, arg.to_vec()));
        } else {
            merged.push(arg.to_vec());
        }
    }
    match open {
        Some((at, _)) => Err(at),
        None => Ok(merged),
    }
}

/// Whether `name` may be a user's name.
pub(crate) fn valid_name(name: &[u8]) -> bool {
    !has_spaces(name)
}
