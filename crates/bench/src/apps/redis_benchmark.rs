//! redis-benchmark as the load generator: pinned with `taskset`, a fixed number of requests,
//! its CSV line's requests per second. redis-benchmark 7 stops at the first error reply
//! (exit status 1, `Error from server: ...` on stderr): that is an error here, with its text.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one run may take.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// One redis-benchmark run.
#[derive(Clone, Debug)]
pub struct Run<'a> {
    /// The server's port (on 127.0.0.1).
    pub port: u16,
    /// The CPU it runs on (`taskset -c`).
    pub cpu: usize,
    /// Parallel connections (`-c`).
    pub clients: usize,
    /// Requests in all (`-n`).
    pub requests: u64,
    /// `__rand_int__` ranges over `0..keyspace` (`-r`).
    pub keyspace: u64,
    /// Authenticate as this user with this password (`--user`, `-a`).
    pub user: Option<(&'a str, &'a str)>,
    /// The test: `-t get`, or a command line (`evalsha SHA 1 key:__rand_int__`).
    pub test: Vec<String>,
}

impl Run<'_> {
    /// Its arguments after `redis-benchmark`.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "-p",
            &self.port.to_string(),
            "-c",
            &self.clients.to_string(),
            "-n",
            &self.requests.to_string(),
            "-r",
            &self.keyspace.to_string(),
            "--csv",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some((user, password)) = self.user {
            args.extend(["--user", user, "-a", password].map(String::from));
        }
        args.extend(self.test.iter().cloned());
        args
    }

    /// Runs it (at most [`TIMEOUT`]): requests per second.
    pub fn run(&self) -> Result<f64, String> {
        let mut child = Command::new("taskset")
            .args(["-c", &self.cpu.to_string(), "redis-benchmark"])
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting redis-benchmark: {e}"))?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let deadline = Instant::now() + TIMEOUT;
        // Bounded by the deadline.
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("redis-benchmark ran past {TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let (stdout, stderr) = (
            stdout.join().unwrap_or_default(),
            stderr.join().unwrap_or_default(),
        );
        let test = self.test.join(" ");
        if !status.success() {
            return Err(format!(
                "redis-benchmark {test}: {status}: {}",
                errors_of(&stderr)
            ));
        }
        requests_per_s(&stdout)
            .ok_or_else(|| format!("redis-benchmark {test}: no rate in {stdout:?}"))
    }
}

/// A thread reading `pipe` to its end (when the process exits or is killed).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

/// The requests per second of the first test in redis-benchmark's `--csv` output
/// (`"test","rps",...` then `"GET","81300.81",...`).
pub fn requests_per_s(csv: &str) -> Option<f64> {
    csv.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('"') && !l.starts_with("\"test\""))
        .find_map(|l| l.split(',').nth(1)?.trim_matches('"').parse().ok())
        .filter(|r: &f64| r.is_finite() && *r > 0.0)
}

/// What redis-benchmark said on stderr, without its warning about a password on the command
/// line; the error lines first.
pub fn errors_of(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains("password with '-a'"))
        .collect();
    let mut errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("Error"))
        .collect();
    if errors.is_empty() {
        errors = lines;
    }
    errors.join("; ")
}
