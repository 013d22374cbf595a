//! Server processes under test: `tamer serve`, `redis-server`, `memcached`, each started fresh
//! (optionally pinned with `taskset`), on a port in [`PORTS`], killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// The ports servers are started on (this machine's rule for benches and tests).
pub const PORTS: std::ops::Range<u16> = 17_000..18_000;
/// How long a server may take to accept its first connection.
const START_TIMEOUT: Duration = Duration::from_secs(60);

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A port in [`PORTS`] nobody listens on now (tried from a per-process offset).
pub fn free_port() -> Result<u16, String> {
    let span = PORTS.end - PORTS.start;
    let base = (std::process::id() % u32::from(span)) as u16;
    for _ in 0..span {
        let i = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let port = PORTS.start + (base + i) % span;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(format!("no free port in {PORTS:?}"))
}

/// Whether `program` runs (`--version`).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg(if program == "memcached" {
            "-V"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How to start one server.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The server's name in the figures.
    pub name: String,
    /// The program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The port it listens on.
    pub port: u16,
    /// `taskset -c CPUS` (e.g. "1"), or none.
    pub cpus: Option<String>,
}

impl Launch {
    /// redis-server without persistence (no RDB saves, no AOF) unless `extra` asks.
    pub fn redis(port: u16, extra: &[&str]) -> Self {
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        Self {
            name: "redis".into(),
            program: "redis-server".into(),
            args,
            port,
            cpus: None,
        }
    }

    /// memcached on loopback, TCP only, one worker thread (`-t 1`) unless `extra` says.
    pub fn memcached(port: u16, extra: &[&str]) -> Self {
        let mut args: Vec<String> = [
            "-p",
            &port.to_string(),
            "-l",
            "127.0.0.1",
            "-U",
            "0",
            "-u",
            "root",
            "-t",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        Self {
            name: "memcached".into(),
            program: "memcached".into(),
            args,
            port,
            cpus: None,
        }
    }

    /// `tamer serve` (this binary, or `TAMER_BIN`) on a store under `dir`.
    pub fn tamer(port: u16, dir: &Path, extra: &[&str]) -> Self {
        let program = std::env::var_os("TAMER_BIN")
            .map(PathBuf::from)
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| "tamer".into());
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--port".into(),
            port.to_string(),
            "--dir".into(),
        ];
        args.push(dir.display().to_string());
        args.extend(extra.iter().map(|s| s.to_string()));
        Self {
            name: "tamer".into(),
            program,
            args,
            port,
            cpus: None,
        }
    }

    /// Runs it under `taskset -c cpus`.
    pub fn pinned(mut self, cpus: &str) -> Self {
        self.cpus = Some(cpus.into());
        self
    }
}

/// A running server; killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// How it was started.
    pub launch: Launch,
}

impl Server {
    /// Starts the server and waits until it answers on its port.
    pub fn start(launch: Launch) -> Result<Self, String> {
        let mut command = match &launch.cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(&launch.program);
                c
            }
            None => Command::new(&launch.program),
        };
        let child = command
            .args(&launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", launch.program.display()))?;
        let mut server = Self { child, launch };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited at start: {status} ({:?})",
                    self.launch.name, self.launch.args
                ));
            }
            if TcpStream::connect(("127.0.0.1", self.launch.port)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} never accepted on port {}",
                    self.launch.name, self.launch.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.launch.port
    }

    /// Waits (at most `timeout`) for the process to exit by itself (after `SHUTDOWN`); its
    /// exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<i32>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status.code());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} did not exit within {timeout:?}",
                    self.launch.name
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (SIGSTOP to stall it, SIGCONT to resume).
    pub fn signal(&self, signal: i32) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The CPU time it has used so far (user + system, from /proc), seconds: a figure a
    /// shared machine disturbs far less than throughput, since time stolen by the hypervisor or
    /// spent waiting for a CPU is not in it.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        // Fields after the command name, which may hold spaces, ends with ')'.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        // SAFETY: sysconf has no preconditions.
        let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (ticks_per_s > 0).then(|| (utime + stime) as f64 / ticks_per_s as f64)
    }

    /// Its resident memory (VmRSS), bytes.
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()
            .map(|k| k * 1024)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends one command line (inline) and reads the reply up to a quiet 100 ms or `max_bytes`.
pub fn ask(port: u16, line: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .map_err(|e| e.to_string())?;
    s.write_all(format!("{line}\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < 1 << 20 {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}
