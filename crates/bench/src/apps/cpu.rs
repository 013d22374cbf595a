//! The measurements beside a rate: the server's CPU time and the load CPU's busy time over a
//! measured interval (`/proc/PID/stat`, `/proc/stat`).

use serde::Serialize;

use super::redis_benchmark::Run;
use crate::rpc::servers::Server;

/// Runs `run` against `server` (its load on `run.cpu`): its requests, their time and the CPU
/// read over them.
pub fn measure(run: &Run, server: &Server) -> Result<Measured, String> {
    let (per_s, cpu) = with_cpu(server, run.cpu, || run.run())?;
    Ok(Measured::new(
        run.requests,
        run.requests as f64 / per_s,
        cpu,
    ))
}

/// One server's measurement of a figure.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Measured {
    /// Operations (requests, or messages delivered).
    pub ops: u64,
    /// The measured interval, seconds.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_s: f64,
    /// The server's CPU time (user + system) over the measured interval, seconds.
    pub server_cpu_s: f64,
    /// How busy the load CPU was meanwhile (its `/proc/stat` time not idle, 0..=1): near 1,
    /// the clients, not the server, set the pace.
    pub load_cpu_busy_fraction: f64,
}

impl Measured {
    /// `ops` in `seconds` (a rate of 0 when no time passed), with the CPU time read over them.
    pub fn new(ops: u64, seconds: f64, cpu: Cpu) -> Self {
        Self {
            ops,
            seconds,
            ops_per_s: if seconds > 0.0 {
                ops as f64 / seconds
            } else {
                0.0
            },
            server_cpu_s: cpu.server_s,
            load_cpu_busy_fraction: cpu.load_busy_fraction,
        }
    }

    /// The server's CPU µs per operation.
    pub fn server_cpu_us_per_op(&self) -> f64 {
        self.server_cpu_s * 1e6 / self.ops.max(1) as f64
    }

    /// Two measurements as one: operations and times added, the load CPU's busy fraction
    /// weighted by time.
    pub fn merge(self, other: Measured) -> Measured {
        let seconds = self.seconds + other.seconds;
        let busy = if seconds > 0.0 {
            (self.load_cpu_busy_fraction * self.seconds
                + other.load_cpu_busy_fraction * other.seconds)
                / seconds
        } else {
            0.0
        };
        Measured::new(
            self.ops + other.ops,
            seconds,
            Cpu {
                server_s: self.server_cpu_s + other.server_cpu_s,
                load_busy_fraction: busy,
            },
        )
    }
}

/// CPU time read over a measured interval.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu {
    /// The server's user + system time, seconds.
    pub server_s: f64,
    /// The load CPU's time not idle ÷ its time, 0..=1.
    pub load_busy_fraction: f64,
}

/// Runs `f` (the measured interval) and reads the server's CPU time and the load CPU's
/// busy time over it.
pub fn with_cpu<T>(
    server: &Server,
    load_cpu: usize,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<(T, Cpu), String> {
    let server_s = || {
        server
            .cpu_seconds()
            .ok_or_else(|| format!("no CPU time in /proc/{}/stat", server.pid()))
    };
    let load = || {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|stat| cpu_jiffies(&stat, load_cpu))
            .ok_or_else(|| format!("no cpu{load_cpu} in /proc/stat"))
    };
    let (server_before, load_before) = (server_s()?, load()?);
    let out = f()?;
    let (server_after, load_after) = (server_s()?, load()?);
    let (busy, total) = (
        load_after.0.saturating_sub(load_before.0),
        load_after.1.saturating_sub(load_before.1),
    );
    let cpu = Cpu {
        server_s: server_after - server_before,
        load_busy_fraction: busy as f64 / total.max(1) as f64,
    };
    Ok((out, cpu))
}

/// CPU `cpu`'s busy and total jiffies in `/proc/stat`'s text: its `cpuN` line's first eight
/// counts (user, nice, system, idle, iowait, irq, softirq, steal) summed, less idle and iowait.
pub fn cpu_jiffies(stat: &str, cpu: usize) -> Option<(u64, u64)> {
    let prefix = format!("cpu{cpu} ");
    let line = stat.lines().find(|l| l.starts_with(&prefix))?;
    let counts: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = counts.iter().sum();
    let idle = counts.get(3)? + counts.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}
