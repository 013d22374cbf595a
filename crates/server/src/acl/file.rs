//! The ACL file (`aclfile`): one `user NAME rules...` line per user, as Redis writes and
//! reads it. Loading is all or nothing: any bad line leaves the users as they were.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::user::{merge_selectors, valid_name, User};

/// Most bytes of an ACL file read.
const FILE_BYTES_MAX: u64 = 64 << 20;

/// The users the file at `path` describes (`default` as it says, or as a fresh server has
/// it), or Redis's words for what is wrong with it.
pub fn load(path: &Path) -> Result<BTreeMap<Vec<u8>, Arc<User>>, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{shown}': {e}"))?;
    if meta.len() > FILE_BYTES_MAX {
        return Err(format!(
            "Error loading ACLs: '{shown}' is larger than {FILE_BYTES_MAX} bytes"
        ));
    }
    let text = std::fs::read(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{shown}': {e}"))?;
    let mut users = BTreeMap::new();
    let mut errors = String::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        load_line(line, &format!("{shown}:{}", i + 1), &mut users, &mut errors);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    with_default(users)
}

/// The users of the configuration's `user` lines (`NAME rules...` each) on top of a fresh
/// server's, or Redis's words for what is wrong: a `default` line starts from `reset`.
pub fn from_config(lines: &[String]) -> Result<BTreeMap<Vec<u8>, Arc<User>>, String> {
    let mut users = BTreeMap::new();
    let mut errors = String::new();
    for (i, line) in lines.iter().enumerate() {
        let mut line = format!("user {line}");
        if line.split(' ').nth(1) == Some("default") {
            line = line.replacen("user default", "user default reset", 1);
        }
        load_line(
            line.as_bytes(),
            &format!("user line {}", i + 1),
            &mut users,
            &mut errors,
        );
    }
    if !errors.is_empty() {
        return Err(errors.trim_end().to_string());
    }
    with_default(users)
}

/// `users` with the `default` user a fresh server has if they lack one, within
/// [`super::USERS_MAX`] users in all.
fn with_default(
    mut users: BTreeMap<Vec<u8>, Arc<User>>,
) -> Result<BTreeMap<Vec<u8>, Arc<User>>, String> {
    users
        .entry(b"default".to_vec())
        .or_insert_with(|| Arc::new(User::default_user()));
    if users.len() > super::USERS_MAX {
        return Err(format!(
            "more than {} users (tamer's bound)",
            super::USERS_MAX
        ));
    }
    Ok(users)
}

/// Loads one line into `users`; its problems are appended to `errors` in Redis's words
/// (`at` is `FILE:LINE`).
fn load_line(line: &[u8], at: &str, users: &mut BTreeMap<Vec<u8>, Arc<User>>, errors: &mut String) {
    let line = line.trim_ascii();
    let words: Vec<&[u8]> = line
        .split(|&b| b == b' ')
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return;
    }
    if words.len() < 2 || words[0] != b"user" {
        errors.push_str(&format!(
            "{at} should start with user keyword followed by the username. "
        ));
        return;
    }
    let name = words[1];
    let shown = String::from_utf8_lossy(name);
    if !valid_name(name) {
        errors.push_str(&format!(
            "'{at}: username '{shown}' contains invalid characters. "
        ));
        return;
    }
    if users.len() >= super::USERS_MAX {
        errors.push_str(&format!(
            "{at}: more than {} users (tamer's bound). ",
            super::USERS_MAX
        ));
        return;
    }
    if users.contains_key(name) {
        let line_number = at.rsplit(':').next().unwrap_or_default();
        errors.push_str(&format!(
            "WARNING: Duplicate user '{shown}' found on line {line_number}. "
        ));
        return;
    }
    let mut user = User::new(name, false);
    match merge_selectors(&words[2..]) {
        Err(_) => errors.push_str(&format!(
            "{at}: Unmatched parenthesis in selector definition."
        )),
        Ok(rules) => {
            // An unknown command is named (it tells nothing secret); of the other errors,
            // only a line's first is told (it may be a password), as Redis tells them.
            let mut told = false;
            for rule in &rules {
                match user.apply(rule.trim_ascii(), false) {
                    Ok(()) => {}
                    Err(e @ super::RuleError::Unknown) => {
                        let rule = String::from_utf8_lossy(rule);
                        let text = e.text();
                        errors.push_str(&format!(
                            "{at}: Error in applying operation '{rule}': {text}. "
                        ));
                    }
                    Err(_) if told => {}
                    Err(e) => {
                        errors.push_str(&format!("{at}: {}. ", e.text()));
                        told = true;
                    }
                }
            }
        }
    }
    users.insert(name.to_vec(), Arc::new(user));
}

/// Writes `users` to `path` (a temporary file, synced, renamed over it, the directory
/// synced), so that a crash leaves the old file or the new one.
pub fn save(path: &Path, users: &BTreeMap<Vec<u8>, Arc<User>>) -> std::io::Result<()> {
    let mut text = Vec::new();
    for (name, user) in users {
        text.extend_from_slice(b"user ");
        text.extend_from_slice(name);
        text.push(b' ');
        text.extend_from_slice(&user.describe());
        text.push(b'\n');
    }
    crate::config::rewrite::write_replacing(path, &text)
}

#[cfg(test)]
mod tests {
    /// Catches a file or configuration that defines users past `USERS_MAX`, which
    /// `ACL SETUSER` refuses.
    #[test]
    fn users_past_the_bound_are_refused() {
        let lines: Vec<String> = (0..super::super::USERS_MAX)
            .map(|i| format!("u{i} on"))
            .collect();
        let Err(err) = super::from_config(&lines) else {
            panic!("65,536 users and default accepted");
        };
        assert!(err.contains("more than 65536 users"), "{err}");
        assert!(
            super::from_config(&lines[1..]).is_ok(),
            "65,535 and default"
        );
    }
}
