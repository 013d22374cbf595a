//! `CONFIG REWRITE`: the `--config` file made to say what the server runs with, as Redis
//! rewrites `redis.conf`. Each line setting a known setting gets its current value in place;
//! comments, blank lines and the order stay; settings that differ from their defaults and
//! were not in the file are added at its end; the `user` lines become the current ACL users
//! (none when an `aclfile` holds them). The file is replaced whole: written to a temporary
//! file, synced, renamed over it, its directory synced.

use std::io::Write;
use std::path::Path;

use super::{find, registry, Config, Kind, MAX_CONFIG_FILE_BYTES};

/// The error when the server started without `--config` (Redis's words).
pub const NO_FILE: &str = "ERR The server is running without a config file";

/// Rewrites the configuration file (`users`: the ACL users as `NAME rules` lines, or `None`
/// to leave none in it). `Err` holds the error reply's text.
pub fn rewrite(config: &Config, users: Option<Vec<String>>) -> Result<(), String> {
    let path = config.file().ok_or_else(|| NO_FILE.to_string())?;
    let old = match std::fs::read_to_string(&path) {
        Ok(text) if text.len() > MAX_CONFIG_FILE_BYTES => {
            return Err(format!(
                "ERR Rewriting config file: larger than {MAX_CONFIG_FILE_BYTES} bytes"
            ))
        }
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("ERR Rewriting config file: {e}")),
    };
    let values = config.lock().clone();
    let text = rewritten(&old, &values, users);
    write_replacing(&path, text.as_bytes()).map_err(|e| format!("ERR Rewriting config file: {e}"))
}

/// `old` with `values` (one per [`registry`] entry) and `users` put in (see the module docs).
pub(super) fn rewritten(old: &str, values: &[String], users: Option<Vec<String>>) -> String {
    let settings: Vec<_> = registry().collect();
    let mut done = vec![false; settings.len()];
    let mut out = String::with_capacity(old.len() + 256);
    let mut lines = old.lines();
    // Bounded by the file's lines: each pass takes at least one.
    while let Some(line) = lines.next() {
        let Some((key, rest)) = assignment(line) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        if key == "user" {
            skip_value(rest, &mut lines);
            continue;
        }
        match find(key) {
            Some(i) => {
                done[i] = true;
                out.push_str(&format!(
                    "{key} = {}\n",
                    value(settings[i].kind, &values[i])
                ));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let mut header = false;
    for (i, setting) in settings.iter().enumerate() {
        let default = super::normalize(setting.kind, setting.default).unwrap_or_default();
        if done[i] || values[i] == default {
            continue;
        }
        if !header {
            out.push_str("# Written by CONFIG REWRITE\n");
            header = true;
        }
        out.push_str(&format!(
            "{} = {}\n",
            setting.name,
            value(setting.kind, &values[i])
        ));
    }
    if let Some(users) = users.filter(|u| !u.is_empty()) {
        let quoted: Vec<String> = users.iter().map(|u| format!("    {},", quote(u))).collect();
        out.push_str(&format!("user = [\n{}\n]\n", quoted.join("\n")));
    }
    out
}

/// `key = rest` of a top-level assignment line.
fn assignment(line: &str) -> Option<(&str, &str)> {
    let trimmed = line.trim_start();
    if trimmed.starts_with('#') || trimmed.starts_with('[') {
        return None;
    }
    let (key, rest) = trimmed.split_once('=')?;
    let key = key.trim();
    (!key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
    .then_some((key, rest))
}

/// Skips the rest of a value that goes on over the next lines (an array of `user` lines):
/// lines are taken until what was read parses as one TOML value.
fn skip_value<'a>(first: &str, lines: &mut impl Iterator<Item = &'a str>) {
    let mut value = first.to_string();
    // Bounded by the file's lines.
    while toml::from_str::<toml::Table>(&format!("x = {value}")).is_err() {
        match lines.next() {
            Some(line) => {
                value.push('\n');
                value.push_str(line);
            }
            None => return,
        }
    }
}

/// A value as the file writes it: integers bare, the rest as TOML strings.
fn value(kind: Kind, v: &str) -> String {
    match kind {
        Kind::Int { .. } if v.parse::<i64>().is_ok() => v.to_string(),
        _ => quote(v),
    }
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Writes `bytes` to `path` through a synced temporary file renamed over it, its directory
/// synced: a crash leaves the old file or the new one (the config and ACL files).
pub fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("rewrite-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        std::fs::File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
