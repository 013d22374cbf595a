//! `tamer serve`: the store over the Redis protocol, until SIGINT, SIGTERM or `SHUTDOWN`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// `tamer serve`'s flags: each is the setting of the same name (`docs/config.md`); a flag
/// given overrides `--config`'s file, which overrides the default.
#[derive(Args)]
pub struct ServeArgs {
    /// A TOML file of settings (`key = value`, keys named as the flags and `CONFIG GET`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// TCP port (Redis's `port`; default 6379).
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (Redis's `bind`; one address; default 127.0.0.1).
    #[arg(long)]
    bind: Option<String>,
    /// Directory of the store file `tamer.db` (Redis's `dir`; default tamer-data).
    #[arg(long)]
    dir: Option<String>,
    /// DRAM for the page cache: bytes, or with a unit as Redis writes them (`256mb`, `1gb`;
    /// default 256mb).
    #[arg(long)]
    cache_size: Option<String>,
    /// When a write is acknowledged: `commit` (durable first; the default), `periodic`
    /// (within a second, as `appendfsync everysec`), `none` (at the next checkpoint).
    #[arg(long)]
    durability: Option<String>,
    /// Most client connections (Redis's `maxclients`; default 10000).
    #[arg(long)]
    maxclients: Option<u64>,
    /// A password every client must give with `AUTH` (Redis's `requirepass`).
    #[arg(long)]
    requirepass: Option<String>,
    /// The ACL file: its users are loaded at start, `ACL SAVE` and `ACL LOAD` write and read
    /// it (Redis's `aclfile`; default none).
    #[arg(long)]
    aclfile: Option<String>,
    /// Refuse to listen beyond loopback without `--requirepass` (Redis's `protected-mode`;
    /// default yes).
    #[arg(long)]
    protected_mode: Option<String>,
    /// Serve Prometheus metrics over HTTP at HOST:PORT (`GET /metrics`; default: off).
    #[arg(long)]
    metrics_addr: Option<String>,
    /// Cores running requests and polling the network (the store's runtime). Default 0: the
    /// CPUs this process may use less one (left to the kernel's network stack and the
    /// clients), at least one.
    #[arg(long)]
    cores: Option<String>,
    /// `shared` (default): one queue, the next free core runs the next request batch (seed
    /// 004); `partitioned`: each connection pinned to one core (the RSS baseline).
    #[arg(long)]
    dispatch: Option<String>,
    /// Latency objective in µs: requests past the queued work that meets it get `-BUSY`
    /// at once (admission). Default 0: none (only the fixed bounds).
    #[arg(long)]
    slo_us: Option<String>,
    /// Prefetch the pages of a request batch's keys before it runs (default yes).
    #[arg(long)]
    prefetch: Option<String>,
}

impl ServeArgs {
    /// The flags given, as (setting, value) pairs.
    fn settings(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        let mut add = |name: &'static str, value: Option<String>| {
            if let Some(v) = value {
                pairs.push((name, v));
            }
        };
        add("port", self.port.map(|p| p.to_string()));
        add("bind", self.bind.clone());
        add("dir", self.dir.clone());
        add("cache-size", self.cache_size.clone());
        add("durability", self.durability.clone());
        add("maxclients", self.maxclients.map(|n| n.to_string()));
        add("requirepass", self.requirepass.clone());
        add("aclfile", self.aclfile.clone());
        add("protected-mode", self.protected_mode.clone());
        add("metrics-addr", self.metrics_addr.clone());
        add("cores", self.cores.clone());
        add("dispatch", self.dispatch.clone());
        add("slo-us", self.slo_us.clone());
        add("prefetch", self.prefetch.clone());
        pairs
    }
}

static STOP_SIGNAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP_SIGNAL.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The settings of `tamer serve`: the defaults, then `--config`'s file, then the flags.
fn serve_config(args: &ServeArgs) -> Result<tamer_server::config::Config, String> {
    use tamer_server::config::{from_toml, Config, Origin};
    let config = Config::default();
    let startup = |name: &str, value: &str, from: &str| {
        config
            .set_many(&[(name, value)], Origin::Startup)
            .map_err(|e| format!("{from}: {}", e.trim_start_matches("ERR ")))
    };
    let mut durability_given = false;
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--config {}: {e}", path.display()))?;
        let pairs = from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let users = tamer_server::config::users_from_toml(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        config.set_users(users);
        config.set_file(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()));
        durability_given |= pairs.iter().any(|(name, _)| name == "durability");
        for (name, value) in pairs {
            startup(&name, &value, &path.display().to_string())?;
        }
    }
    for (name, value) in args.settings() {
        durability_given |= name == "durability";
        startup(name, &value, &format!("--{name}"))?;
    }
    if let Some(durability) = durability_of_redis_settings(&config, durability_given) {
        startup("durability", durability, "appendonly and appendfsync")?;
    }
    Ok(config)
}

/// The `durability` a copied `redis.conf` asks for, when `durability` itself was not given:
/// `appendonly yes` with `appendfsync always` is `commit`, `everysec` `periodic`, `no`
/// `none`. Without `appendonly yes` (Redis's default, which keeps RDB snapshots) nothing is
/// chosen: tamer's default stays, durable on every acknowledgement.
fn durability_of_redis_settings(
    config: &tamer_server::config::Config,
    durability_given: bool,
) -> Option<&'static str> {
    if durability_given || config.get("appendonly") != "yes" {
        return None;
    }
    match config.get("appendfsync").as_str() {
        "always" => Some("commit"),
        "everysec" => Some("periodic"),
        "no" => Some("none"),
        other => unreachable!("appendfsync is checked as it is set: {other}"),
    }
}

/// What `tamer serve` runs with, read from its settings.
struct Plan {
    config: std::sync::Arc<tamer_server::config::Config>,
    cache_bytes: u64,
    durability_name: String,
    durability: tamer_store::Durability,
    bind: String,
    requirepass: Option<String>,
    dispatch: tamer_server::net::Dispatch,
    prefetch: bool,
    cores: usize,
    slo_us: Option<u64>,
    /// The store file, in `dir` (made if missing).
    path: PathBuf,
}

impl Plan {
    /// Reads the settings; refuses to serve beyond loopback unprotected; makes the directory.
    fn of(config: tamer_server::config::Config) -> Result<Self, String> {
        let config = std::sync::Arc::new(config);
        let cache_bytes = config.get_u64("cache-size") / 4096 * 4096;
        let durability_name = config.get("durability");
        let durability = match durability_name.as_str() {
            "commit" => tamer_store::Durability::Commit,
            "periodic" => tamer_store::Durability::Periodic(std::time::Duration::from_secs(1)),
            _ => tamer_store::Durability::None,
        };
        let bind = config.get("bind");
        let loopback = matches!(bind.as_str(), "127.0.0.1" | "::1" | "localhost");
        let protected = config.get("protected-mode") == "yes";
        let requirepass = Some(config.get("requirepass")).filter(|p| !p.is_empty());
        if protected && !loopback && requirepass.is_none() {
            return Err(format!(
                "--bind {bind} reaches beyond this machine and no --requirepass is set: set one, \
                 or --protected-mode no to serve anyone who connects"
            ));
        }
        let dir = PathBuf::from(config.get("dir"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let dispatch = match config.get("dispatch").as_str() {
            "partitioned" => tamer_server::net::Dispatch::Partitioned,
            _ => tamer_server::net::Dispatch::Shared,
        };
        let prefetch = config.get("prefetch") == "yes";
        let cores = match config.get_u64("cores") as usize {
            // One CPU is left to the kernel's network work and the clients: idle cores spin.
            0 => allowed_cpus().saturating_sub(1).max(1),
            n => n,
        };
        let slo_us = Some(config.get_u64("slo-us")).filter(|&us| us > 0);
        Ok(Self {
            config,
            cache_bytes,
            durability_name,
            durability,
            bind,
            requirepass,
            dispatch,
            prefetch,
            cores,
            slo_us,
            path: dir.join("tamer.db"),
        })
    }

    /// The server's options over this plan's settings.
    fn server_options(&self) -> tamer_server::net::ServerOptions {
        tamer_server::net::ServerOptions {
            bind: self.bind.clone(),
            port: self.config.get_u64("port") as u16,
            max_clients: self.config.get_u64("maxclients") as usize,
            requirepass: self.requirepass.clone(),
            config: self.config.clone(),
            dispatch: self.dispatch,
            slo_us: self.slo_us,
            prefetch: self.prefetch,
        }
    }
}

/// `tamer serve`.
pub fn run(args: ServeArgs) -> ExitCode {
    let fail = |what: String| {
        eprintln!("error: {what}");
        ExitCode::FAILURE
    };
    let plan = match serve_config(&args).and_then(Plan::of) {
        Ok(plan) => plan,
        Err(e) => return fail(e),
    };
    let path = &plan.path;
    let started = std::time::Instant::now();
    let options = tamer_store::DbOptions::new(plan.cache_bytes)
        .durability(plan.durability)
        .cores(plan.cores);
    let db = match tamer_store::Db::open(path, options) {
        Ok(db) => std::sync::Arc::new(db),
        Err(e) => return fail(format!("opening {}: {e}", path.display())),
    };
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let server = match tamer_server::net::Server::start(db.clone(), plan.server_options()) {
        Ok(server) => server,
        Err(e) => return fail(e),
    };
    let metrics = match start_metrics(&plan.config, &server) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    print_serving(&plan, &db, &server, metrics.as_ref(), open_ms);
    wait_for_stop(&server.stats);
    println!("stopping");
    drop(metrics);
    if let Err(e) = server.stop() {
        eprintln!("error: stopping the server: {e}");
    }
    close_store(db, path)
}

/// The line saying what is served where, and what opening the store took.
fn print_serving(
    plan: &Plan,
    db: &tamer_store::Db,
    server: &tamer_server::net::Server,
    metrics: Option<&tamer_server::metrics::Metrics>,
    open_ms: f64,
) {
    let recovery = db.recovery_stats();
    println!(
        "tamer {} serving {} (cache {} MiB, durability {}, {} cores, dispatch {}, slo {}) on {}; \
         opened in {open_ms:.1} ms (recovery redid {} commit records in {} ms){}",
        env!("CARGO_PKG_VERSION"),
        plan.path.display(),
        plan.cache_bytes >> 20,
        plan.durability_name,
        plan.cores,
        plan.config.get("dispatch"),
        plan.slo_us.map_or("none".into(), |us| format!("{us} µs")),
        server.local_addr,
        recovery.records_redone,
        recovery.ns / 1_000_000,
        metrics.map_or(String::new(), |m| format!(
            "; metrics on http://{}/metrics",
            m.local_addr
        )),
    );
}

/// The metrics endpoint, if `metrics-addr` names one.
fn start_metrics(
    config: &tamer_server::config::Config,
    server: &tamer_server::net::Server,
) -> Result<Option<tamer_server::metrics::Metrics>, String> {
    let addr = config.get("metrics-addr");
    if addr.is_empty() {
        return Ok(None);
    }
    tamer_server::metrics::Metrics::start(&addr, server.stats.clone()).map(Some)
}

/// Waits for SIGINT, SIGTERM or `SHUTDOWN`.
fn wait_for_stop(stats: &tamer_server::stats::ServerStats) {
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_stop_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_stop_signal as *const () as libc::sighandler_t,
        );
    }
    let ordering = std::sync::atomic::Ordering::SeqCst;
    // Bounded by the signal or SHUTDOWN: polled every 50 ms.
    while !STOP_SIGNAL.load(ordering) && !stats.shutdown.load(ordering) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Closes the store once the jobs still running (which hold handles, and briefly the `Db`
/// for `INFO`) let go of it: waits at most 5 s.
fn close_store(mut db: std::sync::Arc<tamer_store::Db>, path: &std::path::Path) -> ExitCode {
    let mut waited_ms = 0;
    let db = loop {
        match std::sync::Arc::try_unwrap(db) {
            Ok(db) => break db,
            Err(shared) if waited_ms < 5_000 => {
                db = shared;
                std::thread::sleep(std::time::Duration::from_millis(10));
                waited_ms += 10;
            }
            Err(_) => {
                eprintln!("error: the store is still in use at shutdown");
                return ExitCode::FAILURE;
            }
        }
    };
    match db.close() {
        Ok(()) => {
            println!("closed cleanly");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: closing {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// CPUs this process may run on (its affinity mask, as `taskset` sets it).
fn allowed_cpus() -> usize {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    tamer_runtime::online_cpus()
}
