//! The settings registry: every `tamer serve` flag and the Redis settings clients commonly
//! read, under Redis's names, with their defaults, their kinds (how a value is checked and
//! normalized) and whether they change while the server runs. `CONFIG GET` / `CONFIG SET`,
//! the `--config tamer.toml` file and the command-line flags all go through it
//! (`docs/config.md`).
//!
//! Values are kept normalized as `CONFIG GET` prints them (sizes in bytes, booleans `yes` /
//! `no`); the ones read on the request path (`maxclients`, the slow log's and the latency
//! monitor's thresholds) are mirrored in atomics. `CONFIG SET` of several pairs checks every
//! pair first and changes nothing if one fails, as Redis 7.0.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keyspace_events::Classes;

pub mod buffer_limits;
pub mod keyspace_events;
mod redis_only;
pub mod rewrite;

pub use redis_only::{REDIS_ONLY, REDIS_ONLY_ALIASES};

/// How a setting's value is checked and normalized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer in `min..=max`.
    Int {
        /// The least value.
        min: i64,
        /// The greatest value.
        max: i64,
    },
    /// Bytes, with Redis's units (`1gb`, `512mb`, `64k`); shown as bytes.
    Memory,
    /// `yes` or `no`.
    Bool,
    /// One of the names (any case; shown lowercase).
    Enum(&'static [&'static str]),
    /// Any bytes.
    Text,
    /// `notify-keyspace-events`'s letters (shown in Redis's canonical order).
    KeyspaceEvents,
    /// `save`'s pairs of seconds (≥ 1) and changes (≥ 0), one space apart, or nothing.
    Save,
    /// `latency-tracking-info-percentiles`: numbers in `0..=100`, one space apart (shown as
    /// Redis shows them: `50 99 99.9`), or nothing.
    Percentiles,
    /// `client-output-buffer-limit`: `class hard soft seconds` for some of the classes
    /// `normal`, `replica` (shown `slave`) and `pubsub`; a `CONFIG SET` changes the classes
    /// it names (`buffer_limits::merge`).
    BufferLimits,
}

/// One setting of the registry.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// As `CONFIG GET` names it.
    pub name: &'static str,
    /// The default, as a user writes it (normalized like any value).
    pub default: &'static str,
    /// What values it takes.
    pub kind: Kind,
    /// Who may change it, and when.
    pub mutability: Mutability,
}

/// Who may change a setting, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutability {
    /// `CONFIG SET` changes it while the server runs.
    Live,
    /// Only the config file and the flags set it (Redis: "can't set immutable config").
    Immutable,
    /// As `Immutable` (Redis's protected settings: "can't set protected config").
    Protected,
    /// Redis's, kept at its default: tamer shows it and refuses any other value
    /// (accepting it silently would mislead: replication, TLS, ACL files, ...).
    Fixed,
}

const fn setting(name: &'static str, default: &'static str, kind: Kind, live: bool) -> Setting {
    Setting {
        name,
        default,
        kind,
        mutability: if live {
            Mutability::Live
        } else {
            Mutability::Immutable
        },
    }
}

impl Setting {
    /// One of Redis's settings that tamer accepts without effect (`redis_only`).
    pub const fn redis_only(
        name: &'static str,
        default: &'static str,
        kind: Kind,
        mutability: Mutability,
    ) -> Setting {
        Setting {
            name,
            default,
            kind,
            mutability,
        }
    }
}

/// Every setting: tamer's own ([`SETTINGS`]), then Redis's accepted without effect
/// ([`REDIS_ONLY`]); an index of [`find`] indexes this order.
pub fn registry() -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().chain(REDIS_ONLY)
}

/// The setting at index `i` of [`registry`].
pub fn setting_at(i: usize) -> &'static Setting {
    SETTINGS
        .get(i)
        .unwrap_or_else(|| &REDIS_ONLY[i - SETTINGS.len()])
}

/// Every alias: tamer's settings', then Redis-only settings'.
fn aliases() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    ALIASES.iter().chain(REDIS_ONLY_ALIASES)
}

const I64: i64 = i64::MAX;
/// Most slow-log entries kept (Redis allows up to 2^63; each entry holds up to 4 KiB of
/// arguments, so tamer bounds the log).
pub const MAX_SLOWLOG_LEN: i64 = 10_000;

/// Every setting, sorted by name.
pub const SETTINGS: &[Setting] = &[
    // The ACL file (`ACL SAVE`/`LOAD`; read at start when set).
    setting("aclfile", "", Kind::Text, false),
    setting("appendonly", "no", Kind::Bool, true),
    setting("bind", "127.0.0.1", Kind::Text, false),
    // Past this many ms a script is busy: other clients get -BUSY (0: never).
    setting(
        "busy-reply-threshold",
        "5000",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting("cache-size", "256mb", Kind::Memory, false),
    setting("client-query-buffer-limit", "64mb", Kind::Memory, false),
    // 0: the CPUs the process may use less one, at least one.
    setting("cores", "0", Kind::Int { min: 0, max: 256 }, false),
    setting("databases", "16", Kind::Int { min: 1, max: 16 }, false),
    setting("dir", "tamer-data", Kind::Text, false),
    setting(
        "dispatch",
        "shared",
        Kind::Enum(&["shared", "partitioned"]),
        false,
    ),
    setting(
        "durability",
        "commit",
        Kind::Enum(&["commit", "periodic", "none"]),
        false,
    ),
    // Redis's representation thresholds, honoured as tamer's packed-collection bounds
    // (`crate::keyspace::collection`).
    setting(
        "hash-max-listpack-entries",
        "512",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting(
        "hash-max-listpack-value",
        "64",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting("hz", "10", Kind::Int { min: 1, max: 500 }, false),
    setting(
        "latency-monitor-threshold",
        "0",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting("latency-tracking", "yes", Kind::Bool, true),
    setting(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        Kind::Percentiles,
        true,
    ),
    setting(
        "list-compress-depth",
        "0",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
    ),
    setting(
        "list-max-listpack-size",
        "-2",
        Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
        },
        true,
    ),
    setting(
        "maxclients",
        "10000",
        Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        true,
    ),
    setting("maxmemory", "0", Kind::Memory, false),
    setting("metrics-addr", "", Kind::Text, false),
    setting("notify-keyspace-events", "", Kind::KeyspaceEvents, true),
    setting("port", "6379", Kind::Int { min: 0, max: 65535 }, false),
    setting("prefetch", "yes", Kind::Bool, false),
    setting("protected-mode", "yes", Kind::Bool, false),
    setting("proto-max-bulk-len", "512mb", Kind::Memory, false),
    setting("requirepass", "", Kind::Text, true),
    setting("save", "", Kind::Save, true),
    // Admission's latency objective in µs; 0: none.
    setting(
        "set-max-intset-entries",
        "512",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting("slo-us", "0", Kind::Int { min: 0, max: I64 }, false),
    setting(
        "slowlog-log-slower-than",
        "10000",
        Kind::Int {
            min: i64::MIN,
            max: I64,
        },
        true,
    ),
    setting(
        "slowlog-max-len",
        "128",
        Kind::Int {
            min: 0,
            max: MAX_SLOWLOG_LEN,
        },
        true,
    ),
    setting("timeout", "0", Kind::Int { min: 0, max: 0 }, false),
    // Keys client-side caching's table remembers (0: no bound).
    setting(
        "tracking-table-max-keys",
        "1000000",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting(
        "zset-max-listpack-entries",
        "128",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
    setting(
        "zset-max-listpack-value",
        "64",
        Kind::Int { min: 0, max: I64 },
        true,
    ),
];

/// Who changes a setting: a client (`CONFIG SET`: live settings only) or the startup (the
/// file and the flags: any setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `CONFIG SET`: live settings only.
    Client,
    /// The config file and the flags: any setting.
    Startup,
}

/// The index of the setting named `name` (exactly, lowercase).
pub fn find(name: &str) -> Option<usize> {
    let name = aliases()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, setting)| setting);
    SETTINGS
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .or_else(|| {
            REDIS_ONLY
                .binary_search_by(|s| s.name.cmp(name))
                .ok()
                .map(|j| SETTINGS.len() + j)
        })
}

/// Redis's other names of settings (`CONFIG GET` lists them too, with the setting's value).
pub const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// Packed-collection bounds of one type: elements (fields, members) and the longest one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// Elements at most (Redis's `*-max-listpack-entries`).
    pub max_elements: u64,
    /// Bytes of the longest field, value or member (Redis's `*-max-listpack-value`).
    pub max_element_bytes: u64,
}

/// Parses a size as Redis's `memtoll`: digits with an optional unit `k`/`kb`/`m`/`mb`/
/// `g`/`gb` (`k` = 1000, `kb` = 1024, any case).
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

/// Redis's `save` normalized (its numbers as Redis shows them again): pairs of seconds
/// (≥ 1) and changes (≥ 0), split on single spaces, or empty; `None` when it is not.
fn save_points(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some(String::new());
    }
    let parts: Vec<&str> = value.split(' ').collect();
    if !parts.len().is_multiple_of(2) {
        return None;
    }
    let mut numbers = Vec::with_capacity(parts.len());
    for pair in parts.chunks(2) {
        let seconds = pair[0].parse::<i64>().ok().filter(|s| *s >= 1)?;
        let changes = pair[1].parse::<i64>().ok().filter(|c| *c >= 0)?;
        numbers.push(format!("{seconds} {changes}"));
    }
    Some(numbers.join(" "))
}

/// `value` checked against `kind` and normalized, or Redis's reason for refusing it.
pub fn normalize(kind: Kind, value: &str) -> Result<String, String> {
    match kind {
        Kind::Int { min, max } => {
            let n: i64 = value
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(n.to_string())
        }
        Kind::Memory => parse_memory(value)
            .map(|n| n.to_string())
            .ok_or_else(|| "argument must be a memory value".to_string()),
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".to_string()),
        },
        Kind::Enum(names) => {
            let lower = value.to_ascii_lowercase();
            if names.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                ))
            }
        }
        Kind::Text => Ok(value.to_string()),
        Kind::Percentiles => {
            percentiles(value).map(|p| p.iter().map(f64::to_string).collect::<Vec<_>>().join(" "))
        }
        Kind::KeyspaceEvents => Classes::parse(value)
            .map(Classes::every_letter)
            .map_err(str::to_string),
        Kind::Save => save_points(value).ok_or_else(|| "Invalid save parameters".to_string()),
        Kind::BufferLimits => buffer_limits::parse(value).map(|l| buffer_limits::show(&l)),
    }
}

/// `latency-tracking-info-percentiles`'s numbers, checked with Redis's errors.
pub fn percentiles(value: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for word in value.split_whitespace() {
        let p: f64 = word
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite())
            .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .to_string(),
            );
        }
        out.push(p);
    }
    Ok(out)
}

/// The server's settings (see the module docs).
#[derive(Debug)]
pub struct Config {
    /// Normalized values, by index into [`SETTINGS`].
    values: Mutex<Vec<String>>,
    max_clients: AtomicUsize,
    slowlog_slower_than_us: AtomicI64,
    slowlog_max_len: AtomicUsize,
    latency_threshold_ms: AtomicU64,
    latency_tracking: AtomicBool,
    busy_reply_threshold_ms: AtomicU64,
    tracking_table_max_keys: AtomicU64,
    keyspace_events: AtomicU16,
    /// Packing bounds: hash entries and value, zset entries and value, set entries.
    packing: [AtomicU64; 5],
    requirepass: Mutex<Option<Arc<Vec<u8>>>>,
    /// `user` lines of the configuration file.
    users: Mutex<Vec<String>>,
    /// The `--config` file (`CONFIG REWRITE` writes it).
    file: Mutex<Option<std::path::PathBuf>>,
}

impl Default for Config {
    fn default() -> Self {
        let values = registry()
            .map(|s| normalize(s.kind, s.default).expect("defaults are valid"))
            .collect();
        let config = Config {
            values: Mutex::new(values),
            max_clients: AtomicUsize::new(0),
            slowlog_slower_than_us: AtomicI64::new(0),
            slowlog_max_len: AtomicUsize::new(0),
            latency_threshold_ms: AtomicU64::new(0),
            latency_tracking: AtomicBool::new(true),
            busy_reply_threshold_ms: AtomicU64::new(0),
            tracking_table_max_keys: AtomicU64::new(0),
            keyspace_events: AtomicU16::new(0),
            packing: Default::default(),
            requirepass: Mutex::new(None),
            users: Mutex::new(Vec::new()),
            file: Mutex::new(None),
        };
        config.mirror();
        config
    }
}

impl Config {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.values.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value of the setting `name` (normalized). Panics on a name not in the registry: a
    /// caller names settings in code.
    pub fn get(&self, name: &str) -> String {
        let i = find(name).unwrap_or_else(|| panic!("no setting {name}"));
        self.lock()[i].clone()
    }

    /// A numeric setting's value.
    pub fn get_u64(&self, name: &str) -> u64 {
        self.get(name).parse().unwrap_or(0)
    }

    /// `busy-reply-threshold` (ms; 0: scripts are never busy).
    pub fn busy_reply_threshold_ms(&self) -> u64 {
        self.busy_reply_threshold_ms.load(Ordering::Relaxed)
    }
    /// `tracking-table-max-keys` (0: no bound).
    pub fn tracking_table_max_keys(&self) -> u64 {
        self.tracking_table_max_keys.load(Ordering::Relaxed)
    }
    /// `notify-keyspace-events`.
    pub fn keyspace_events(&self) -> Classes {
        Classes(self.keyspace_events.load(Ordering::Relaxed))
    }
    /// The packing bounds of hashes (`hash-max-listpack-*`).
    pub fn hash_packing(&self) -> Packing {
        self.packing_of(0)
    }
    /// The packing bounds of sorted sets (`zset-max-listpack-*`).
    pub fn zset_packing(&self) -> Packing {
        self.packing_of(2)
    }
    /// The packing bound of sets (`set-max-intset-entries`; no value bound, as Redis's).
    pub fn set_max_entries(&self) -> u64 {
        self.packing[4].load(Ordering::Relaxed)
    }
    fn packing_of(&self, at: usize) -> Packing {
        Packing {
            max_elements: self.packing[at].load(Ordering::Relaxed),
            max_element_bytes: self.packing[at + 1].load(Ordering::Relaxed),
        }
    }
    /// `maxclients`.
    pub fn max_clients(&self) -> usize {
        self.max_clients.load(Ordering::Relaxed)
    }
    /// Commands slower than this many µs enter the slow log (negative: none do).
    pub fn slowlog_slower_than_us(&self) -> i64 {
        self.slowlog_slower_than_us.load(Ordering::Relaxed)
    }
    /// `slowlog-max-len`.
    pub fn slowlog_max_len(&self) -> usize {
        self.slowlog_max_len.load(Ordering::Relaxed)
    }
    /// Whether each command's latency distribution is counted (`latency-tracking`).
    pub fn latency_tracking(&self) -> bool {
        self.latency_tracking.load(Ordering::Relaxed)
    }
    /// `latency-tracking-info-percentiles`.
    pub fn latency_percentiles(&self) -> Vec<f64> {
        percentiles(&self.get("latency-tracking-info-percentiles")).unwrap_or_default()
    }
    /// Commands at least this many ms long are latency events (0: the monitor is off).
    pub fn latency_threshold_ms(&self) -> u64 {
        self.latency_threshold_ms.load(Ordering::Relaxed)
    }
    /// The password clients must give (`None`: no password).
    pub fn requirepass(&self) -> Option<Arc<Vec<u8>>> {
        self.requirepass
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Copies the hot settings into their atomics.
    fn mirror(&self) {
        let values = self.lock().clone();
        let num = |name: &str| {
            values[find(name).expect("registered")]
                .parse::<i64>()
                .unwrap_or(0)
        };
        self.max_clients
            .store(num("maxclients") as usize, Ordering::Relaxed);
        self.slowlog_slower_than_us
            .store(num("slowlog-log-slower-than"), Ordering::Relaxed);
        self.slowlog_max_len
            .store(num("slowlog-max-len") as usize, Ordering::Relaxed);
        self.latency_threshold_ms
            .store(num("latency-monitor-threshold") as u64, Ordering::Relaxed);
        let tracking = values[find("latency-tracking").expect("registered")] == "yes";
        self.latency_tracking.store(tracking, Ordering::Relaxed);
        self.busy_reply_threshold_ms
            .store(num("busy-reply-threshold") as u64, Ordering::Relaxed);
        self.tracking_table_max_keys
            .store(num("tracking-table-max-keys") as u64, Ordering::Relaxed);
        let packing = [
            "hash-max-listpack-entries",
            "hash-max-listpack-value",
            "zset-max-listpack-entries",
            "zset-max-listpack-value",
            "set-max-intset-entries",
        ];
        for (slot, name) in self.packing.iter().zip(packing) {
            slot.store(num(name).max(0) as u64, Ordering::Relaxed);
        }
        let events = &values[find("notify-keyspace-events").expect("registered")];
        let events = Classes::parse(events).expect("normalized when set");
        self.keyspace_events.store(events.0, Ordering::Relaxed);
        let pass = &values[find("requirepass").expect("registered")];
        *self.requirepass.lock().unwrap_or_else(|p| p.into_inner()) =
            (!pass.is_empty()).then(|| Arc::new(pass.clone().into_bytes()));
    }

    /// Sets every pair or none (Redis 7.0's `CONFIG SET`): the error is Redis's reply text.
    pub fn set_many(&self, pairs: &[(&str, &str)], origin: Origin) -> Result<(), String> {
        let fail = |name: &str, why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
        };
        let mut changes: Vec<(usize, String)> = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let lower = name.to_ascii_lowercase();
            let Some(i) = find(&lower) else {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            if changes.iter().any(|(j, _)| *j == i) {
                return Err(fail(&lower, "duplicate parameter"));
            }
            let setting = setting_at(i);
            if let Some(why) = refusal(setting, origin) {
                return Err(fail(&lower, why));
            }
            let mut value = normalize(setting.kind, value).map_err(|why| fail(&lower, &why))?;
            if setting.kind == Kind::BufferLimits {
                value = buffer_limits::merge(&self.lock()[i], &value);
            }
            if setting.mutability == Mutability::Fixed
                && normalize(setting.kind, setting.default).as_ref() != Ok(&value)
            {
                return Err(fail(&lower, FIXED_REFUSAL));
            }
            changes.push((i, value));
        }
        {
            let mut values = self.lock();
            for (i, value) in changes {
                values[i] = value;
            }
        }
        self.mirror();
        Ok(())
    }

    /// `CONFIG GET pattern...`: each matching setting once, in the registry's order.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        let values = self.lock();
        registry()
            .zip(values.iter())
            .filter(|(s, _)| {
                patterns
                    .iter()
                    .any(|p| crate::glob::matches_nocase(p, s.name.as_bytes()))
            })
            .map(|(s, v)| (s.name, shown(s.kind, v)))
            .chain(aliases().filter_map(|(alias, setting)| {
                let wanted = patterns
                    .iter()
                    .any(|p| crate::glob::matches_nocase(p, alias.as_bytes()));
                let i = find(setting).expect("an alias names a setting");
                wanted.then(|| (*alias, shown(setting_at(i).kind, &values[i])))
            }))
            .collect()
    }
}

/// Why a `Fixed` setting is not changed (after Redis's "possibly related to argument").
const FIXED_REFUSAL: &str = "tamer does not support changing it (kept at Redis's default)";

/// Why `origin` may not set `setting` at all, as Redis words it.
fn refusal(setting: &Setting, origin: Origin) -> Option<&'static str> {
    match (setting.mutability, origin) {
        (Mutability::Live | Mutability::Fixed, _) => None,
        (_, Origin::Startup) => None,
        (Mutability::Immutable, Origin::Client) => Some("can't set immutable config"),
        (Mutability::Protected, Origin::Client) => Some("can't set protected config"),
    }
}

/// Most bytes of a `--config` file.
pub const MAX_CONFIG_FILE_BYTES: usize = 1 << 20;

/// A normalized value as `CONFIG GET` shows it: `notify-keyspace-events` in Redis's short
/// form (which hides `n` beside `A`), kept whole in the registry.
fn shown(kind: Kind, value: &str) -> String {
    match kind {
        Kind::KeyspaceEvents => Classes::parse(value)
            .map(Classes::letters)
            .unwrap_or_else(|_| value.to_string()),
        _ => value.to_string(),
    }
}

/// The settings of a TOML file (`key = value` at the top level, keys named as `CONFIG GET`
/// names them; integers, strings and booleans, a boolean meaning `yes`/`no`), checked
/// against the registry: an unknown key, a nested table or a bad value is an error naming it.
pub fn from_toml(text: &str) -> Result<Vec<(String, String)>, String> {
    if text.len() > MAX_CONFIG_FILE_BYTES {
        return Err(format!("larger than {MAX_CONFIG_FILE_BYTES} bytes"));
    }
    let table: BTreeMap<String, toml::Value> =
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
    let mut pairs = Vec::with_capacity(table.len());
    for (key, value) in table {
        if key == "user" {
            continue; // ACL users: `users_from_toml`.
        }
        let Some(i) = find(&key) else {
            let known: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
            // Redis's own settings are accepted too; the message lists tamer's.
            return Err(format!(
                "unknown setting '{key}' (known: {})",
                known.join(", ")
            ));
        };
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) => if b { "yes" } else { "no" }.to_string(),
            other => {
                return Err(format!(
                    "setting '{key}': a string, integer or boolean, not {}",
                    other.type_str()
                ))
            }
        };
        normalize(setting_at(i).kind, &text)
            .map_err(|why| format!("setting '{key}' = {text:?}: {why}"))?;
        pairs.push((key, text));
    }
    Ok(pairs)
}

/// The ACL users a configuration file defines (Redis's `user` directive): `user = "NAME
/// rules..."` or `user = ["NAME rules...", ...]`.
pub fn users_from_toml(text: &str) -> Result<Vec<String>, String> {
    if text.len() > MAX_CONFIG_FILE_BYTES {
        return Err(format!("larger than {MAX_CONFIG_FILE_BYTES} bytes"));
    }
    let table: BTreeMap<String, toml::Value> =
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
    let values = match table.get("user") {
        None => return Ok(Vec::new()),
        Some(toml::Value::Array(values)) => values.clone(),
        Some(value) => vec![value.clone()],
    };
    values
        .into_iter()
        .map(|v| match v {
            toml::Value::String(s) => Ok(s),
            other => Err(format!("setting 'user': strings, not {}", other.type_str())),
        })
        .collect()
}

impl Config {
    /// The ACL users the configuration defines (`user` lines), loaded at start.
    pub fn set_users(&self, users: Vec<String>) {
        *self.users.lock().unwrap_or_else(|p| p.into_inner()) = users;
    }

    /// Names the configuration file the server started with (`CONFIG REWRITE`, `INFO`).
    pub fn set_file(&self, path: std::path::PathBuf) {
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) = Some(path);
    }

    /// See [`Config::set_file`].
    pub fn file(&self) -> Option<std::path::PathBuf> {
        self.file.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// See [`Config::set_users`].
    pub fn users(&self) -> Vec<String> {
        self.users.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests;
