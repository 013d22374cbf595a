//! `INFO`: Redis 7.0's sections and field names, plus a `tamer` section (the store's cache,
//! device, commits and checkpoints, admission). A section is built only when asked for.
//!
//! `default` (and no argument) is `server`, `clients`, `memory`, `persistence`, `stats`,
//! `replication`, `cpu`, `errorstats`, `keyspace`, `tamer`; `all` adds `commandstats`;
//! `everything` is `all`. Unknown section names add nothing, as in Redis. `keyspace` lists
//! each database holding keys as `dbN:keys=K` from the `DBSIZE` counts (expired keys not yet
//! removed included, as Redis counts them); Redis's `expires` and `avg_ttl` are left out:
//! tamer keeps no count of keys with a TTL.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::stats::ServerStats;

/// Sections in the order Redis prints them, and whether `default` includes each.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("commandsplit", false),
    ("cluster", true),
    ("keyspace", true),
    ("tamer", true),
];

/// Which sections `args` ask for.
fn wanted(args: &[&[u8]]) -> Vec<&'static str> {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_ascii_lowercase()).collect();
    let has = |w: &[u8]| args.iter().any(|a| a == w);
    let all = has(b"all") || has(b"everything");
    let default = args.is_empty() || has(b"default");
    SECTIONS
        .iter()
        .filter(|(name, in_default)| all || (default && *in_default) || has(name.as_bytes()))
        .map(|(name, _)| *name)
        .collect()
}

/// Whether `args` ask for section `name`.
pub fn wants(args: &[&[u8]], name: &str) -> bool {
    wanted(args).contains(&name)
}

/// What `INFO` reports that the command gathers from above this layer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gathered<'a> {
    /// Each database's key count, when the keyspace section is asked for.
    pub keyspace: Option<&'a [u64; 16]>,
    /// Scripts cached (`number_of_cached_scripts`).
    pub cached_scripts: usize,
    /// Functions in the function libraries (`number_of_functions`).
    pub functions: usize,
    /// The libraries' code bytes (`used_memory_functions`).
    pub function_bytes: usize,
    /// Their bodies' bytes (`used_memory_scripts_eval`).
    pub cached_script_bytes: usize,
    /// Channels, patterns and shard channels subscribed to (`pubsub_channels` ...).
    pub pubsub: [usize; 3],
    /// Keyspace events left out past a transaction's bound (`tamer_notifications_dropped`).
    pub keyspace_events_dropped: u64,
    /// Client-side caching's table (`tracking_clients`, `tracking_total_keys` ...).
    pub tracking: crate::pubsub::tracking::Figures,
}

/// `INFO`'s text: `# Section` then `field:value` lines, sections separated by a blank line.
pub fn text(stats: &ServerStats, args: &[&[u8]], gathered: Gathered<'_>) -> String {
    let parts: Vec<String> = wanted(args)
        .into_iter()
        .map(|name| match name {
            "server" => server(stats),
            "clients" => clients(stats, gathered),
            "memory" => memory(stats, gathered),
            "persistence" => persistence(stats),
            "stats" => counters(stats, gathered),
            "replication" => replication(stats),
            "cpu" => cpu(),
            "commandstats" => commandstats(stats),
            "errorstats" => errorstats(stats),
            "latencystats" => latencystats(stats),
            "commandsplit" => commandsplit(stats),
            "keyspace" => keyspace_section(gathered.keyspace),
            "modules" => "# Modules\r\n".to_string(),
            // Clients (redis-py's test fixtures, cluster-aware clients) read this field.
            "cluster" => "# Cluster\r\ncluster_enabled:0\r\n".to_string(),
            _ => tamer(stats),
        })
        .collect();
    parts.join("\r\n")
}

fn keyspace_section(counts: Option<&[u64; 16]>) -> String {
    let mut text = "# Keyspace\r\n".to_string();
    for (db, &keys) in counts.into_iter().flatten().enumerate() {
        if keys > 0 {
            let _ = write!(text, "db{db}:keys={keys}\r\n");
        }
    }
    text
}

fn server(stats: &ServerStats) -> String {
    let uptime = stats.started.elapsed().as_secs();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let hz = stats.config.get("hz");
    format!(
        "# Server\r\nredis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
         tamer_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\narch_bits:64\r\n\
         multiplexing_api:io_uring\r\nprocess_id:{}\r\nprocess_supervised:no\r\n\
         run_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{now_us}\r\n\
         uptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{hz}\r\n\
         configured_hz:{hz}\r\nexecutable:{}\r\nconfig_file:{}\r\nio_threads_active:0\r\n",
        crate::REDIS_VERSION,
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        std::process::id(),
        stats.replid,
        stats.port,
        uptime / 86_400,
        std::env::current_exe().map_or(String::new(), |p| p.display().to_string()),
        stats
            .config
            .file()
            .map_or(String::new(), |p| p.display().to_string()),
    )
}

fn clients(stats: &ServerStats, gathered: Gathered<'_>) -> String {
    format!(
        "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n\
         tracking_clients:{}\r\n",
        stats.connected.load(Ordering::Relaxed),
        stats.config.max_clients(),
        stats.blocked_clients.load(Ordering::Relaxed),
        gathered.tracking.clients,
    )
}

/// The process's resident bytes (`/proc/self/statm`), 0 where it cannot be read.
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page
}

/// Redis's `bytesToHuman`.
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..=1023 => format!("{bytes}B"),
        1024..=1_048_575 => format!("{:.2}K", b / 1024.0),
        1_048_576..=1_073_741_823 => format!("{:.2}M", b / 1_048_576.0),
        _ => format!("{:.2}G", b / 1_073_741_824.0),
    }
}

fn memory(stats: &ServerStats, gathered: Gathered<'_>) -> String {
    let rss = rss_bytes();
    let cache = stats
        .db()
        .map_or(0, |db| db.handle().cache().config().capacity_bytes);
    let maxmemory = stats.config.get_u64("maxmemory");
    format!(
        "# Memory\r\nused_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
         used_memory_rss_human:{}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\n\
         maxmemory_policy:noeviction\r\nused_memory_scripts_eval:{}\r\n\
         number_of_cached_scripts:{}\r\nnumber_of_functions:{}\r\nused_memory_functions:{}\r\n\
         used_memory_scripts:{}\r\ntamer_cache_bytes:{cache}\r\ntamer_cache_human:{}\r\n",
        human(rss),
        human(rss),
        human(maxmemory),
        gathered.cached_script_bytes,
        gathered.cached_scripts,
        gathered.functions,
        gathered.function_bytes,
        gathered.cached_script_bytes + gathered.function_bytes,
        human(cache)
    )
}

/// `LASTSAVE`: the last checkpoint's Unix time (s), or the start's if none ran since open
/// (opening the store leaves it checkpointed).
pub fn last_save_unix(stats: &ServerStats) -> u64 {
    let ms = stats
        .db()
        .map_or(0, |db| db.checkpoint_stats().last_unix_ms);
    if ms == 0 {
        stats.started_unix
    } else {
        ms / 1000
    }
}

fn persistence(stats: &ServerStats) -> String {
    let checkpoints = stats.db().map_or(0, |db| db.checkpoint_stats().checkpoints);
    format!(
        "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\n\
         rdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\n\
         aof_enabled:0\r\naof_rewrite_in_progress:0\r\ntamer_durability:{}\r\n\
         tamer_checkpoints:{checkpoints}\r\ntamer_last_checkpoint_time:{}\r\n",
        last_save_unix(stats),
        stats.config.get("durability"),
        last_save_unix(stats),
    )
}

fn counters(stats: &ServerStats, gathered: Gathered<'_>) -> String {
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let [channels, patterns, shard] = gathered.pubsub;
    let pubsub = format!(
        "pubsub_channels:{channels}\r\npubsub_patterns:{patterns}\r\n\
         pubsubshard_channels:{shard}\r\nclient_output_buffer_limit_disconnections:{}\r\n\
         tamer_notifications_dropped:{}\r\ntracking_total_keys:{}\r\n\
         tracking_total_items:{}\r\ntracking_total_prefixes:{}\r\n",
        load(&stats.pubsub_overflows),
        gathered.keyspace_events_dropped,
        gathered.tracking.keys,
        gathered.tracking.items,
        gathered.tracking.prefixes,
    );
    let counters = format!(
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
         rejected_connections:{}\r\ntotal_error_replies:{}\r\ntamer_admitted_requests:{}\r\n\
         tamer_busy_replies:{}\r\nexpired_keys:{}\r\nexpired_stale_perc:{:.2}\r\n\
         expired_time_cap_reached_count:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n",
        load(&stats.connections_received),
        load(&stats.commands),
        load(&stats.rejected),
        load(&stats.monitor.total_errors),
        load(&stats.admitted),
        load(&stats.busy),
        stats.expiry.expired_keys(),
        stats.expiry.expired_stale_perc(),
        stats.expiry.expired_time_cap_reached_count(),
        load(&stats.lookups.hits),
        load(&stats.lookups.misses),
    );
    counters + &pubsub
}

fn replication(stats: &ServerStats) -> String {
    format!(
        "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\
         master_failover_state:no-failover\r\nmaster_replid:{}\r\n\
         master_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\n\
         second_repl_offset:-1\r\nrepl_backlog_active:0\r\n",
        stats.replid
    )
}

fn cpu() -> String {
    // SAFETY: `rusage` is plain integers, for which all zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut children: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into live structs.
    unsafe {
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut children);
    }
    let t = |tv: libc::timeval| format!("{}.{:06}", tv.tv_sec, tv.tv_usec);
    format!(
        "# CPU\r\nused_cpu_sys:{}\r\nused_cpu_user:{}\r\nused_cpu_sys_children:{}\r\n\
         used_cpu_user_children:{}\r\n",
        t(usage.ru_stime),
        t(usage.ru_utime),
        t(children.ru_stime),
        t(children.ru_utime)
    )
}

fn commandstats(stats: &ServerStats) -> String {
    let mut s = "# Commandstats\r\n".to_string();
    for (name, c) in stats.monitor.all() {
        let calls = c.calls.load(Ordering::Relaxed);
        let rejected = c.rejected.load(Ordering::Relaxed);
        if calls == 0 && rejected == 0 {
            continue;
        }
        let nsec = c.nsec.load(Ordering::Relaxed);
        let usec = nsec / 1000;
        let per_call = if calls == 0 {
            0.0
        } else {
            nsec as f64 / 1000.0 / calls as f64
        };
        let _ = write!(
            s,
            "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},\
             rejected_calls={rejected},failed_calls={}\r\n",
            c.failed.load(Ordering::Relaxed)
        );
    }
    s
}

/// Each command's percentiles (`latency-tracking-info-percentiles`) in µs, as Redis 7.0
/// prints them: `latency_percentiles_usec_get:p50=1.003,p99=4.015,p99.9=4.015`.
fn latencystats(stats: &ServerStats) -> String {
    let percentiles = stats.config.latency_percentiles();
    let mut s = "# Latencystats\r\n".to_string();
    for (name, c) in stats.monitor.all() {
        let counts = c.latency.counts();
        if counts.iter().all(|&n| n == 0) {
            continue;
        }
        let values: Vec<String> = percentiles
            .iter()
            .map(|&p| {
                let value = crate::stats::latency::percentile_us(&counts, p);
                format!("p{p}={value:.3}")
            })
            .collect();
        let _ = write!(
            s,
            "latency_percentiles_usec_{name}:{}\r\n",
            values.join(",")
        );
    }
    s
}

/// tamer's own: where each command's time went (µs in all): waiting for the device, for a
/// group commit, for a checkpoint, and the rest running (`cmdsplit_set:calls=...`).
fn commandsplit(stats: &ServerStats) -> String {
    let mut s = "# Commandsplit\r\n".to_string();
    for (name, c) in stats.monitor.all() {
        let calls = c.calls.load(Ordering::Relaxed);
        if calls == 0 {
            continue;
        }
        let us = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) / 1_000;
        let (total, device, commit, checkpoint) = (
            us(&c.nsec),
            us(&c.device_ns),
            us(&c.commit_ns),
            us(&c.checkpoint_ns),
        );
        let running = total.saturating_sub(device + commit + checkpoint);
        let _ = write!(
            s,
            "cmdsplit_{name}:calls={calls},usec={total},usec_running={running},\
             usec_device={device},usec_commit={commit},usec_checkpoint={checkpoint}\r\n"
        );
    }
    let jobs = stats.jobs_started.load(Ordering::Relaxed);
    let _ = write!(
        s,
        "jobs_started:{jobs}\r\njobs_queued_usec_total:{}\r\njobs_queued_usec_max:{}\r\n",
        stats.jobs_queued_ns.load(Ordering::Relaxed) / 1_000,
        stats.jobs_queued_ns_max.load(Ordering::Relaxed) / 1_000,
    );
    s
}

fn errorstats(stats: &ServerStats) -> String {
    let mut s = "# Errorstats\r\n".to_string();
    for (prefix, count) in stats.monitor.errors() {
        let _ = write!(s, "errorstat_{prefix}:count={count}\r\n");
    }
    s
}

/// Pages the store wrote to the device: the cache's write-backs, the group commits' queue and
/// data pages, the checkpoints' index pages (`INFO tamer` and the metrics).
pub fn device_writes(
    cache_write_backs: u64,
    commit: &tamer_store::CommitStats,
    checkpoint: &tamer_store::CheckpointStats,
) -> u64 {
    cache_write_backs
        + commit.queue_pages_written
        + commit.data_pages_written
        + checkpoint.index_pages_written
}

fn tamer(stats: &ServerStats) -> String {
    let Some(db) = stats.db() else {
        return "# Tamer\r\n".to_string();
    };
    let cache = db.cache_stats();
    let commit = db.commit_stats();
    let checkpoint = db.checkpoint_stats();
    let device_writes = device_writes(cache.write_backs, &commit, &checkpoint);
    format!(
        "# Tamer\r\ncache_hits:{}\r\ncache_misses:{}\r\ncache_evictions:{}\r\n\
         cache_write_backs:{}\r\ndevice_reads:{}\r\ndevice_writes:{device_writes}\r\n\
         device_in_flight:{}\r\ncommits_staged:{}\r\ngroup_commits:{}\r\n\
         staging_overflows:{}\r\ncheckpoints:{}\r\ncheckpoint_writers_waited_us:{}\r\n\
         checkpoint_max_us:{}\r\nadmitted_requests:{}\r\nbusy_replies:{}\r\n\
         busy_replies_slo:{}\r\nbusy_replies_full:{}\r\nadmission_drain_rate_per_sec:{}\r\n\
         admission_service_ns:{}\r\nruntime_queue_depth:{}\r\n",
        cache.hits,
        cache.misses,
        cache.evictions,
        cache.write_backs,
        cache.misses,
        db.runtime().device_in_flight(),
        commit.staged,
        commit.group_commits,
        commit.overflows,
        checkpoint.checkpoints,
        checkpoint.total_ns / 1_000,
        checkpoint.max_ns / 1_000,
        stats.admitted.load(Ordering::Relaxed),
        stats.busy.load(Ordering::Relaxed),
        stats.admission.refused_slo.load(Ordering::Relaxed),
        stats.admission.refused_full.load(Ordering::Relaxed),
        stats.admission.rate_per_s.load(Ordering::Relaxed),
        stats.admission.service_ns.load(Ordering::Relaxed),
        db.runtime().queued(),
    ) + &writer_waits(&checkpoint)
}

/// The writers' waits for checkpoints: how many, in all, the longest, and quantiles of
/// their distribution (a power-of-two bucket's upper bound, µs).
fn writer_waits(checkpoint: &tamer_store::CheckpointStats) -> String {
    format!(
        "checkpoint_writer_waits:{}\r\ncheckpoint_writer_wait_us_total:{}\r\n\
         checkpoint_writer_wait_us_max:{}\r\ncheckpoint_writer_wait_us_p50:{}\r\n\
         checkpoint_writer_wait_us_p99:{}\r\ncheckpoint_writer_wait_us_p999:{}\r\n",
        checkpoint.writer_waits,
        checkpoint.writer_wait_ns_total / 1_000,
        checkpoint.writer_wait_ns_max / 1_000,
        checkpoint.writer_wait_us_quantile(0.5),
        checkpoint.writer_wait_us_quantile(0.99),
        checkpoint.writer_wait_us_quantile(0.999),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(args: &[&str]) -> Vec<&'static str> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        wanted(&args)
    }

    /// Catches a section selection unlike Redis's: `default` with `commandstats`, `all`
    /// without it, named sections not in Redis's order, names not folded, unknown names
    /// adding a section.
    #[test]
    fn sections_are_chosen_as_redis_chooses_them() {
        let default = ask(&[]);
        assert_eq!(default, ask(&["default"]));
        assert!(default.contains(&"memory") && default.contains(&"tamer"));
        assert!(!default.contains(&"commandstats"));
        assert_eq!(ask(&["all"]).len(), SECTIONS.len());
        assert_eq!(ask(&["everything"]).len(), SECTIONS.len());
        assert_eq!(ask(&["CPU", "memory"]), ["memory", "cpu"]);
        assert_eq!(ask(&["commandstats", "nosuch"]), ["commandstats"]);
        assert!(ask(&["nosuch"]).is_empty());
        let stats = ServerStats::new(1, std::sync::Arc::default(), &["get"]);
        let text = text(
            &stats,
            &[&b"clients"[..], &b"replication"[..]],
            Gathered::default(),
        );
        assert!(
            text.starts_with("# Clients\r\nconnected_clients:0\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\n\r\n# Replication\r\nrole:master\r\n"),
            "{text}"
        );
        // redis-py's fixtures read cluster_enabled from the default INFO.
        assert!(default.contains(&"cluster") && default.contains(&"modules"));
        let text = self::text(&stats, &[], Gathered::default());
        assert!(
            text.contains("# Cluster\r\ncluster_enabled:0\r\n"),
            "{text}"
        );
    }
}
