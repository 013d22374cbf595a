//! The commands that act on the server rather than on keys: `PING`, `ECHO`, `TIME`, `INFO`,
//! `LASTSAVE`, `CONFIG`, `SLOWLOG`, `LATENCY`, `MEMORY USAGE`, and `SHUTDOWN`'s arguments,
//! with Redis 7.0's replies and error texts. The gate has checked each one's arity (a
//! container's subcommand included). None holds the store's locks except `INFO keyspace`
//! (the key counts) and `MEMORY USAGE` (one read).

use std::sync::atomic::Ordering;

use tamer_store::{DbError, Tx, MAX_SMALL_RECORD};

use super::reply::keyspace_error;
use super::Context;
use crate::config::Origin;
use crate::keyspace::{KeyspaceError, DATABASES};
use crate::pubsub::Kind;
use crate::resp::{parse_i64, write};
use crate::stats::ServerStats;

type Result = std::result::Result<(), DbError>;

/// `PING [message]`.
pub fn ping(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    match args {
        [_] if ctx.pubsub_context => crate::pubsub::ping_reply(out, None),
        [_, message] if ctx.pubsub_context => crate::pubsub::ping_reply(out, Some(message)),
        [_] => write::simple(out, "PONG"),
        [_, message] => write::bulk(out, message),
        // Redis checks PING's arity itself (its table's arity is -1).
        _ => write::error(out, "ERR wrong number of arguments for 'ping' command"),
    }
    Ok(())
}

/// `ECHO message`.
pub fn echo(_: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::bulk(out, args[1]);
    Ok(())
}

/// `TIME`: (seconds, microseconds) of the wall clock.
pub fn time(_: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    write::array(out, 2);
    write::bulk(out, now.as_secs().to_string().as_bytes());
    write::bulk(out, now.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// `INFO [section ...]`; the `keyspace` section reads each database's key count.
pub fn info(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let keyspace = if crate::stats::info::wants(&args[1..], "keyspace") {
        let mut counts = [0u64; DATABASES];
        for (count, ns) in counts.iter_mut().zip(ctx.map.get()) {
            *count = match crate::keyspace::key_count(tx, ns) {
                Ok(n) => n,
                Err(KeyspaceError::Store(e)) => return Err(e),
                Err(_) => 0,
            };
        }
        Some(counts)
    } else {
        None
    };
    let (cached_scripts, cached_script_bytes) = ctx.scripts.usage();
    let libraries = ctx.scripts.libraries();
    let gathered = crate::stats::info::Gathered {
        functions: libraries.function_count(),
        function_bytes: libraries.code_bytes(),
        keyspace: keyspace.as_ref(),
        cached_scripts,
        cached_script_bytes,
        pubsub: [Kind::Channel, Kind::Pattern, Kind::Shard].map(|k| ctx.pubsub.len(k)),
        keyspace_events_dropped: ctx.pubsub.dropped_events(),
        tracking: ctx.pubsub.tracking.figures(),
    };
    let text = crate::stats::info::text(ctx.stats, &args[1..], gathered);
    write::verbatim(out, b"txt", text.as_bytes(), ctx.protocol);
    Ok(())
}

/// `LASTSAVE`.
pub fn lastsave(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::integer(out, crate::stats::info::last_save_unix(ctx.stats) as i64);
    Ok(())
}

/// `CONFIG GET pattern [pattern ...]`.
pub fn config_get(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let pairs = ctx.stats.config.matching(&args[2..]);
    write::map(out, pairs.len(), ctx.protocol);
    for (name, value) in pairs {
        write::bulk(out, name.as_bytes());
        write::bulk(out, value.as_bytes());
    }
    Ok(())
}

/// `CONFIG SET name value [name value ...]`: all or none.
pub fn config_set(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if !args.len().is_multiple_of(2) {
        write::error(out, "ERR syntax error");
        return Ok(());
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let pairs: Vec<(String, String)> = args[2..]
        .chunks(2)
        .map(|p| (text(p[0]), text(p[1])))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    match ctx.stats.config.set_many(&refs, Origin::Client) {
        Ok(()) => {
            if refs
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("requirepass"))
            {
                ctx.stats.sync_requirepass();
            }
            apply_buffer_limits(&ctx.stats.config, ctx.pubsub);
            write::simple(out, "OK");
        }
        Err(text) => write::error(out, &text),
    }
    Ok(())
}

/// Gives the pub/sub hub `client-output-buffer-limit`'s `pubsub` class.
pub fn apply_buffer_limits(config: &crate::config::Config, hub: &crate::pubsub::Hub) {
    use crate::config::buffer_limits;
    let value = config.get("client-output-buffer-limit");
    let limit = buffer_limits::of_class(&value, 2).expect("the pubsub class is always set");
    hub.set_mail_limits(crate::pubsub::MailLimits {
        hard_bytes: usize::try_from(limit.hard_bytes).unwrap_or(usize::MAX),
        soft_bytes: usize::try_from(limit.soft_bytes).unwrap_or(usize::MAX),
        soft_seconds: limit.soft_seconds,
    });
}

/// `CONFIG REWRITE`: the `--config` file says what the server runs with now
/// (`crate::config::rewrite`), its `user` lines the ACL users unless an `aclfile` holds them.
pub fn config_rewrite(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let config = &ctx.stats.config;
    let users = config.get("aclfile").is_empty().then(|| {
        let users = ctx.stats.acl.users();
        users
            .iter()
            .map(|(name, user)| {
                let rules = user.describe();
                format!(
                    "{} {}",
                    String::from_utf8_lossy(name),
                    String::from_utf8_lossy(&rules)
                )
            })
            .collect()
    });
    match crate::config::rewrite::rewrite(config, users) {
        Ok(()) => write::simple(out, "OK"),
        Err(text) => write::error(out, &text),
    }
    Ok(())
}

/// `CONFIG RESETSTAT`.
pub fn config_resetstat(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ctx.stats.reset();
    write::simple(out, "OK");
    Ok(())
}

/// `SLOWLOG GET [count]`.
pub fn slowlog_get(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let count = match args {
        [_, _] => 10,
        [_, _, n] => match parse_i64(n) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => {
                write::error(out, "ERR count should be greater than or equal to -1");
                return Ok(());
            }
        },
        _ => {
            let sub = String::from_utf8_lossy(args[1]);
            write::error(
                out,
                &format!(
                    "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try \
                     SLOWLOG HELP."
                ),
            );
            return Ok(());
        }
    };
    let entries = ctx.stats.monitor.slowlog_get(count);
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
    Ok(())
}

/// `SLOWLOG LEN`.
pub fn slowlog_len(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::integer(out, ctx.stats.monitor.slowlog_len() as i64);
    Ok(())
}

/// `SLOWLOG RESET`.
pub fn slowlog_reset(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    ctx.stats.monitor.slowlog_reset();
    write::simple(out, "OK");
    Ok(())
}

/// `LATENCY LATEST`.
pub fn latency_latest(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let events = ctx.stats.monitor.latency_events();
    write::array(out, events.len());
    for (name, e) in events {
        write::array(out, 4);
        write::bulk(out, name.as_bytes());
        write::integer(out, e.latest_secs as i64);
        write::integer(out, e.latest_ms as i64);
        write::integer(out, e.max_ms as i64);
    }
    Ok(())
}

/// `LATENCY HISTORY event`.
pub fn latency_history(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let events = ctx.stats.monitor.latency_events();
    let name = String::from_utf8_lossy(args[2]).to_ascii_lowercase();
    let history = events.get(name.as_str()).map(|e| e.history.clone());
    let history = history.unwrap_or_default();
    write::array(out, history.len());
    for (secs, ms) in history {
        write::array(out, 2);
        write::integer(out, secs as i64);
        write::integer(out, ms as i64);
    }
    Ok(())
}

/// `LATENCY HISTOGRAM [command ...]`: each named command's calls and cumulative latency
/// distribution (`stats::latency::cdf_levels`), as Redis's `fillCommandCDF` writes them; with
/// no name, every command that has any. A container's name brings its subcommands; a name
/// given twice is answered twice; a name without calls, or unknown, is left out.
pub fn latency_histogram(
    ctx: &Context,
    _: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let monitor = &ctx.stats.monitor;
    let mut named: Vec<(&'static str, Vec<u64>)> = Vec::new();
    let mut add = |name: &'static str, counts: Vec<u64>| {
        if counts.iter().any(|&n| n > 0) {
            named.push((name, counts));
        }
    };
    if args.len() == 2 {
        for (name, c) in monitor.all() {
            add(name, c.latency.counts());
        }
    }
    for arg in &args[2..] {
        let wanted = String::from_utf8_lossy(arg).to_ascii_lowercase();
        let container = format!("{wanted}|");
        for (name, c) in monitor.all() {
            if name == wanted || name.starts_with(&container) {
                add(name, c.latency.counts());
            }
        }
    }
    write::map(out, named.len(), ctx.protocol);
    for (name, counts) in named {
        let levels = crate::stats::latency::cdf_levels(&counts);
        write::bulk(out, name.as_bytes());
        write::map(out, 2, ctx.protocol);
        write::bulk(out, b"calls");
        write::integer(out, counts.iter().sum::<u64>() as i64);
        write::bulk(out, b"histogram_usec");
        write::map(out, levels.len(), ctx.protocol);
        for (level_us, calls) in levels {
            write::integer(out, level_us as i64);
            write::integer(out, calls as i64);
        }
    }
    Ok(())
}

/// `LATENCY RESET [event ...]`: how many events it reset.
pub fn latency_reset(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::integer(out, ctx.stats.monitor.latency_reset(&args[2..]) as i64);
    Ok(())
}

/// `MEMORY USAGE key [SAMPLES count]`: the key's record bytes in the store (its store key is
/// the user key and a 4-byte namespace; `SAMPLES` is checked and has nothing to sample).
pub fn memory_usage(ctx: &Context, tx: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    if let Some(text) = usage_options_error(args) {
        write::error(out, text);
        return Ok(());
    }
    match crate::keyspace::get(ctx, tx, args[2]) {
        Ok(Some(entry)) => {
            let key_bytes = 4 + args[2].len();
            write::integer(out, record_bytes(key_bytes, entry.encode().len()) as i64)
        }
        Ok(None) => write::null(out, ctx.protocol),
        Err(e) => return keyspace_error(out, e),
    }
    Ok(())
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

/// Redis's error for `MEMORY USAGE`'s options (`None`: valid).
fn usage_options_error(args: &[&[u8]]) -> Option<&'static str> {
    match args.len() {
        3 => None,
        5 if args[3].eq_ignore_ascii_case(b"samples") => match parse_i64(args[4]) {
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
pub fn shutdown(stats: &ServerStats, args: &[&[u8]], out: &mut Vec<u8>) -> bool {
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
            |s: &'static str| -> Vec<&'static [u8]> { s.split(' ').map(str::as_bytes).collect() };
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
