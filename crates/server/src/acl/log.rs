//! `ACL LOG`: the denials and failed logins, newest first, a repeat within a minute counted
//! in its entry (Redis's `addACLLogEntry`). Bounded by `acllog-max-len` and
//! [`ENTRIES_MAX`].

use std::collections::VecDeque;
use std::sync::Mutex;

/// Most entries, whatever `acllog-max-len` says.
pub const ENTRIES_MAX: usize = 10_000;
/// A denial within this many ms of a like one is counted in it.
const GROUPING_MS_MAX: u64 = 60_000;
/// How many of the newest entries a denial is compared with.
const SCAN_MAX: usize = 10;

/// Where the denial happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    pub context: Context,
    /// The command's name, the key, the channel, or `AUTH`'s name as sent.
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix ms of its last occurrence.
    pub at_ms: u64,
    /// `CLIENT INFO` of its last client.
    pub client_info: String,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct Log {
    entries: Mutex<VecDeque<Entry>>,
}

impl Log {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `entry` (its count 1), or counts it in a like recent one; keeps `len_max`
    /// entries at most.
    pub fn add(&self, entry: Entry, len_max: usize) {
        let mut entries = self.lock();
        let like = entries.iter().take(SCAN_MAX).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.at_ms.abs_diff(entry.at_ms) <= GROUPING_MS_MAX
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(at) = like {
            let mut found = entries.remove(at).expect("found");
            found.count += 1;
            found.at_ms = entry.at_ms;
            found.client_info = entry.client_info;
            entries.push_front(found);
            return;
        }
        entries.push_front(entry);
        entries.truncate(len_max.min(ENTRIES_MAX));
    }

    /// The newest `count` entries.
    pub fn newest(&self, count: usize) -> Vec<Entry> {
        self.lock().iter().take(count).cloned().collect()
    }

    /// `ACL LOG RESET`.
    pub fn reset(&self) {
        self.lock().clear();
    }
}

/// The reply of one entry: a map of Redis's seven fields.
pub fn write_entry(out: &mut Vec<u8>, e: &Entry, now_ms: u64, protocol: crate::resp::Protocol) {
    use crate::resp::write;
    write::map(out, 7, protocol);
    write::bulk(out, b"count");
    write::integer(out, e.count as i64);
    write::bulk(out, b"reason");
    write::bulk(out, e.reason.as_bytes());
    write::bulk(out, b"context");
    write::bulk(out, e.context.name().as_bytes());
    write::bulk(out, b"object");
    write::bulk(out, &e.object);
    write::bulk(out, b"username");
    write::bulk(out, &e.username);
    write::bulk(out, b"age-seconds");
    write::double(
        out,
        now_ms.saturating_sub(e.at_ms) as f64 / 1000.0,
        protocol,
    );
    write::bulk(out, b"client-info");
    write::bulk(out, e.client_info.as_bytes());
}
