//! The server commands that act on the server rather than on keys: `CONFIG`, `SLOWLOG`,
//! `LATENCY`, `MEMORY USAGE`, `LASTSAVE`, `SHUTDOWN`, and `CLIENT LIST`/`INFO`/`KILL`/
//! `NO-EVICT`, with Redis 7.0's replies and error texts. Each handler writes its reply and
//! returns; none holds the store's locks except `MEMORY USAGE` (one read).

use std::sync::atomic::Ordering;

use tamer_store::{DbError, Tx, MAX_SMALL_RECORD};

use crate::config::Origin;
use crate::resp::{parse_i64, write, Protocol};
use crate::stats::clients::KillFilter;
use crate::stats::ServerStats;

fn arity(out: &mut Vec<u8>, name: &str) {
    write::error(
        out,
        &format!("ERR wrong number of arguments for '{name}' command"),
    );
}

fn unknown_sub(out: &mut Vec<u8>, sub: &[u8], command: &str) {
    let sub = String::from_utf8_lossy(sub);
    write::error(
        out,
        &format!("ERR unknown subcommand '{sub}'. Try {command} HELP."),
    );
}

fn lower(arg: Option<&Vec<u8>>) -> Vec<u8> {
    arg.map(|a| a.to_ascii_lowercase()).unwrap_or_default()
}

/// `CONFIG GET pattern... | SET name value... | RESETSTAT`.
pub fn config(stats: &ServerStats, protocol: Protocol, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let sub = lower(args.get(1));
    match &sub[..] {
        b"get" if args.len() < 3 => arity(out, "config|get"),
        b"get" => {
            let patterns: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
            let pairs = stats.config.matching(&patterns);
            write::map(out, pairs.len(), protocol);
            for (name, value) in pairs {
                write::bulk(out, name.as_bytes());
                write::bulk(out, value.as_bytes());
            }
        }
        b"set" if args.len() < 4 => arity(out, "config|set"),
        b"set" if !args.len().is_multiple_of(2) => write::error(out, "ERR syntax error"),
        b"set" => {
            let pairs: Vec<(String, String)> = args[2..]
                .chunks(2)
                .map(|p| {
                    (
                        String::from_utf8_lossy(&p[0]).into_owned(),
                        String::from_utf8_lossy(&p[1]).into_owned(),
                    )
                })
                .collect();
            let refs: Vec<(&str, &str)> = pairs
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            match stats.config.set_many(&refs, Origin::Client) {
                Ok(()) => write::simple(out, "OK"),
                Err(text) => write::error(out, &text),
            }
        }
        b"resetstat" if args.len() != 2 => arity(out, "config|resetstat"),
        b"resetstat" => {
            stats.reset();
            write::simple(out, "OK");
        }
        _ if args.len() < 2 => arity(out, "config"),
        _ => unknown_sub(out, &args[1], "CONFIG"),
    }
}

/// `SLOWLOG GET [count] | LEN | RESET`.
pub fn slowlog(stats: &ServerStats, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let sub = lower(args.get(1));
    match (&sub[..], args.len()) {
        (b"get", 2 | 3) => {
            let count = match args.get(2).map(|a| parse_i64(a)) {
                None => 10,
                Some(Some(-1)) => usize::MAX,
                Some(Some(n)) if n >= 0 => n as usize,
                Some(_) => {
                    return write::error(out, "ERR count should be greater than or equal to -1")
                }
            };
            let entries = stats.monitor.slowlog_get(count);
            write::array(out, entries.len());
            for e in entries {
                write::array(out, 6);
                write::integer(out, e.id as i64);
                write::integer(out, e.unix_secs as i64);
                write::integer(out, e.duration_us as i64);
                write::array(out, e.args.len());
                for a in &e.args {
                    write::bulk(out, a);
                }
                write::bulk(out, e.addr.as_bytes());
                write::bulk(out, &e.name);
            }
        }
        (b"len", 2) => write::integer(out, stats.monitor.slowlog_len() as i64),
        (b"reset", 2) => {
            stats.monitor.slowlog_reset();
            write::simple(out, "OK");
        }
        (b"len" | b"reset", _) => arity(out, &format!("slowlog|{}", String::from_utf8_lossy(&sub))),
        (_, 1) => arity(out, "slowlog"),
        (b"get", _) => {
            let sub = String::from_utf8_lossy(&args[1]);
            write::error(
                out,
                &format!(
                    "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try \
                     SLOWLOG HELP."
                ),
            );
        }
        _ => unknown_sub(out, &args[1], "SLOWLOG"),
    }
}

/// `LATENCY LATEST | HISTORY event | RESET [event...]`.
pub fn latency(stats: &ServerStats, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let sub = lower(args.get(1));
    match (&sub[..], args.len()) {
        (b"latest", 2) => {
            let events = stats.monitor.latency_events();
            write::array(out, events.len());
            for (name, e) in events {
                write::array(out, 4);
                write::bulk(out, name.as_bytes());
                write::integer(out, e.latest_secs as i64);
                write::integer(out, e.latest_ms as i64);
                write::integer(out, e.max_ms as i64);
            }
        }
        (b"history", 3) => {
            let events = stats.monitor.latency_events();
            let name = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            let history = events.get(name.as_str()).map(|e| e.history.clone());
            let history = history.unwrap_or_default();
            write::array(out, history.len());
            for (secs, ms) in history {
                write::array(out, 2);
                write::integer(out, secs as i64);
                write::integer(out, ms as i64);
            }
        }
        (b"reset", _) => {
            let names: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
            write::integer(out, stats.monitor.latency_reset(&names) as i64);
        }
        (b"latest" | b"history", _) => {
            arity(out, &format!("latency|{}", String::from_utf8_lossy(&sub)))
        }
        (_, 1) => arity(out, "latency"),
        _ => unknown_sub(out, &args[1], "LATENCY"),
    }
}

/// The bytes a record of `key_bytes` + `value_bytes` takes in the store: its 16-byte header,
/// key and value, padded to 16 in a shared data page, or whole 4 KiB pages of its own
/// extent past `MAX_SMALL_RECORD` (`docs/format.md`).
pub fn record_bytes(key_bytes: usize, value_bytes: usize) -> u64 {
    const RECORD_HEADER: usize = 16;
    const EXTENT_HEADER: usize = 8;
    const PAGE_PAYLOAD: usize = 4088;
    let record = RECORD_HEADER + key_bytes + value_bytes;
    if record <= MAX_SMALL_RECORD {
        // Padded to 16, except at the page's end (a page's data area is MAX_SMALL_RECORD).
        record.next_multiple_of(16).min(MAX_SMALL_RECORD) as u64
    } else {
        ((EXTENT_HEADER + record).div_ceil(PAGE_PAYLOAD) * 4096) as u64
    }
}

/// `MEMORY USAGE key [SAMPLES count]`: the key's record bytes in the store (its store key is
/// the user key and a 4-byte namespace; `SAMPLES` is checked and has nothing to sample).
pub fn memory(
    tx: &mut Tx<'_>,
    namespace: u32,
    protocol: Protocol,
    args: &[Vec<u8>],
    out: &mut Vec<u8>,
) -> Result<(), DbError> {
    let sub = lower(args.get(1));
    match &sub[..] {
        b"usage" if args.len() < 3 => arity(out, "memory|usage"),
        b"usage" => {
            if let Some(text) = usage_options_error(args) {
                write::error(out, text);
                return Ok(());
            }
            let now = crate::keyspace::wall_ms();
            match crate::keyspace::get(tx, namespace, &args[2], now) {
                Ok(Some(entry)) => {
                    let key_bytes = 4 + args[2].len();
                    write::integer(out, record_bytes(key_bytes, entry.encode().len()) as i64)
                }
                Ok(None) => write::null(out, protocol),
                Err(e) => return crate::commands::reply::keyspace_error(out, e),
            }
        }
        _ if args.len() < 2 => arity(out, "memory"),
        _ => unknown_sub(out, &args[1], "MEMORY"),
    }
    Ok(())
}

/// Redis's error for `MEMORY USAGE`'s options (`None`: valid).
fn usage_options_error(args: &[Vec<u8>]) -> Option<&'static str> {
    match args.len() {
        3 => None,
        5 if args[3].eq_ignore_ascii_case(b"samples") => match parse_i64(&args[4]) {
            None => Some("ERR value is not an integer or out of range"),
            Some(n) if n < 0 => Some("ERR syntax error"),
            Some(_) => None,
        },
        _ => Some("ERR syntax error"),
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: asks the process to close the store and
/// exit 0 (it always closes cleanly, with a checkpoint: `SAVE` and `NOSAVE` both do that);
/// `true` when the shutdown was asked (the caller then replies nothing, as Redis).
pub fn shutdown(stats: &ServerStats, args: &[Vec<u8>], out: &mut Vec<u8>) -> bool {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for a in &args[1..] {
        match &a.to_ascii_lowercase()[..] {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"now" | b"force" => other = true,
            b"abort" => abort = true,
            _ => {
                write::error(out, "ERR syntax error");
                return false;
            }
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        write::error(out, "ERR syntax error");
        return false;
    }
    if abort {
        write::error(out, "ERR No shutdown in progress.");
        return false;
    }
    stats.shutdown.store(true, Ordering::SeqCst);
    true
}

/// What `CLIENT LIST|INFO|KILL|NO-EVICT` does besides its reply.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ClientEffect {
    /// The caller killed itself: close it after the reply.
    pub close_me: bool,
    /// `NO-EVICT` set to this.
    pub no_evict: Option<bool>,
}

/// `CLIENT LIST [TYPE type] [ID id...]`, `CLIENT INFO`, `CLIENT KILL ...`,
/// `CLIENT NO-EVICT on|off` for connection `me`; `None` for another subcommand.
pub fn client(
    stats: &ServerStats,
    protocol: Protocol,
    me: u64,
    args: &[Vec<u8>],
    out: &mut Vec<u8>,
) -> Option<ClientEffect> {
    let sub = lower(args.get(1));
    let mut effect = ClientEffect::default();
    match &sub[..] {
        b"list" => client_list(stats, protocol, args, out),
        b"info" if args.len() != 2 => arity(out, "client|info"),
        b"info" => {
            let line = stats.clients.get(me).map(|e| e.line() + "\n");
            write::verbatim(out, b"txt", line.unwrap_or_default().as_bytes(), protocol);
        }
        b"no-evict" if args.len() != 3 => arity(out, "client|no-evict"),
        b"no-evict" => match &args[2].to_ascii_lowercase()[..] {
            b"on" | b"off" => {
                effect.no_evict = Some(args[2].eq_ignore_ascii_case(b"on"));
                write::simple(out, "OK");
            }
            _ => write::error(out, "ERR syntax error"),
        },
        b"kill" if args.len() < 3 => arity(out, "client|kill"),
        b"kill" => effect.close_me = client_kill(stats, me, args, out),
        _ => return None,
    }
    Some(effect)
}

fn client_list(stats: &ServerStats, protocol: Protocol, args: &[Vec<u8>], out: &mut Vec<u8>) {
    let mut ids: Option<Vec<u64>> = None;
    let mut normal = true;
    match args.get(2).map(|a| a.to_ascii_lowercase()).as_deref() {
        None => {}
        Some(b"type") if args.len() == 4 => match &args[3].to_ascii_lowercase()[..] {
            b"normal" => {}
            b"master" | b"replica" | b"slave" | b"pubsub" => normal = false,
            _ => {
                let t = String::from_utf8_lossy(&args[3]);
                return write::error(out, &format!("ERR Unknown client type '{t}'"));
            }
        },
        Some(b"id") if args.len() >= 4 => {
            let mut list = Vec::with_capacity(args.len() - 3);
            for a in &args[3..] {
                match parse_i64(a) {
                    Some(n) if n > 0 => list.push(n as u64),
                    _ => return write::error(out, "ERR Invalid client ID"),
                }
            }
            ids = Some(list);
        }
        Some(_) => return write::error(out, "ERR syntax error"),
    }
    let mut text = String::new();
    for entry in stats.clients.list() {
        if normal && ids.as_ref().is_none_or(|ids| ids.contains(&entry.id)) {
            text.push_str(&entry.line());
            text.push('\n');
        }
    }
    write::verbatim(out, b"txt", text.as_bytes(), protocol);
}

/// `CLIENT KILL addr` (old form: `+OK` or an error) or `CLIENT KILL filter value ...` (the
/// number killed): whether the caller killed itself.
fn client_kill(stats: &ServerStats, me: u64, args: &[Vec<u8>], out: &mut Vec<u8>) -> bool {
    if args.len() == 3 {
        let filter = KillFilter {
            addr: Some(String::from_utf8_lossy(&args[2]).into_owned()),
            ..KillFilter::default()
        };
        let is_me = stats
            .clients
            .get(me)
            .is_some_and(|e| Some(&e.addr) == filter.addr.as_ref());
        if stats.clients.kill(&filter, me) == 0 {
            write::error(out, "ERR No such client");
            return false;
        }
        write::simple(out, "OK");
        return is_me;
    }
    let filter = match kill_filter(&args[2..]) {
        Ok(f) => f,
        Err(text) => {
            write::error(out, &text);
            return false;
        }
    };
    let is_me = !filter.skip_me
        && stats.clients.get(me).is_some_and(|e| {
            filter.id.is_none_or(|id| id == me)
                && filter.addr.as_ref().is_none_or(|a| *a == e.addr)
                && filter.laddr.as_ref().is_none_or(|a| *a == e.laddr)
                && filter.user_matches.unwrap_or(true)
                && filter.type_matches.unwrap_or(true)
        });
    write::integer(out, stats.clients.kill(&filter, me) as i64);
    is_me
}

/// The filter of `CLIENT KILL`'s new form, or Redis's error text.
fn kill_filter(args: &[Vec<u8>]) -> Result<KillFilter, String> {
    let mut f = KillFilter {
        skip_me: true,
        ..KillFilter::default()
    };
    if !args.len().is_multiple_of(2) {
        return Err("ERR syntax error".into());
    }
    for pair in args.chunks(2) {
        let value = String::from_utf8_lossy(&pair[1]).into_owned();
        match &pair[0].to_ascii_lowercase()[..] {
            b"id" => match parse_i64(&pair[1]) {
                Some(n) if n > 0 => f.id = Some(n as u64),
                _ => return Err("ERR client-id should be greater than 0".into()),
            },
            b"addr" => f.addr = Some(value),
            b"laddr" => f.laddr = Some(value),
            b"user" if value == "default" => f.user_matches = Some(true),
            b"user" => return Err(format!("ERR No such user '{value}'")),
            b"type" => match value.to_ascii_lowercase().as_str() {
                "normal" => f.type_matches = Some(true),
                "master" | "replica" | "slave" | "pubsub" => f.type_matches = Some(false),
                _ => return Err(format!("ERR Unknown client type '{value}'")),
            },
            b"skipme" => match value.to_ascii_lowercase().as_str() {
                "yes" => f.skip_me = true,
                "no" => f.skip_me = false,
                _ => return Err("ERR syntax error".into()),
            },
            _ => return Err("ERR syntax error".into()),
        }
    }
    Ok(f)
}

/// `LASTSAVE`.
pub fn lastsave(stats: &ServerStats, out: &mut Vec<u8>) {
    write::integer(out, crate::stats::info::last_save_unix(stats) as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a MEMORY USAGE that leaves out the record header or the padding, or that
    /// counts an extent's bytes instead of its whole pages.
    #[test]
    fn record_bytes_follow_the_store_format() {
        // SET a b: store key 4 + 1 bytes, value 12 + 1: 16 + 5 + 13 = 34, padded to 48.
        assert_eq!(record_bytes(5, 13), 48);
        assert_eq!(record_bytes(0, 0), 16);
        assert_eq!(record_bytes(8, 8), 32);
        // The largest record in a shared page, and the first in an extent (1 page + 8-byte
        // extent header fit in 4088 bytes of payload).
        assert_eq!(
            record_bytes(4, MAX_SMALL_RECORD - 20),
            MAX_SMALL_RECORD as u64
        );
        assert_eq!(record_bytes(4, MAX_SMALL_RECORD - 19), 4096);
        assert_eq!(record_bytes(4, 2 * 4088), 3 * 4096);
    }

    /// Catches SHUTDOWN accepting a contradiction or ABORT, or refusing the flags it takes.
    #[test]
    fn shutdown_flags_as_redis() {
        let stats = ServerStats::new(0, std::sync::Arc::default(), &[]);
        let args =
            |s: &str| -> Vec<Vec<u8>> { s.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
        for refused in [
            "shutdown save nosave",
            "shutdown abort now",
            "shutdown x",
            "shutdown abort",
        ] {
            let mut out = Vec::new();
            assert!(!shutdown(&stats, &args(refused), &mut out), "{refused}");
            assert_eq!(out[0], b'-', "{refused}");
            assert!(!stats.shutdown.load(Ordering::SeqCst));
        }
        let mut out = Vec::new();
        assert!(shutdown(
            &stats,
            &args("shutdown NOSAVE now force"),
            &mut out
        ));
        assert!(out.is_empty() && stats.shutdown.load(Ordering::SeqCst));
    }
}
