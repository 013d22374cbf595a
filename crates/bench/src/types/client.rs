//! A plain RESP client for `tamer bench types`: blocking sockets, commands as argument lists,
//! replies framed by the load generator's parser, and closed loops that keep one request in
//! flight per connection over several connections per thread.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::load::proto::{parse_resp, Reply};

/// One connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// Encodes a command.
pub fn encode(args: &[Vec<u8>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Conn {
    /// Connects to a server on 127.0.0.1 at `port`.
    pub fn connect(port: u16) -> Result<Self, String> {
        let stream =
            TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            stream,
            buf: Vec::with_capacity(64 << 10),
        })
    }

    /// The socket and the bytes received but not yet taken as replies (to go on reading it
    /// another way, e.g. non-blocking).
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        (self.stream, self.buf)
    }

    /// Sends one command (its arguments) without waiting for the reply.
    pub fn send(&mut self, args: &[Vec<u8>]) -> Result<(), String> {
        let mut out = Vec::with_capacity(64);
        encode(args, &mut out);
        self.send_raw(&out)
    }

    /// Sends bytes already in RESP without waiting for a reply.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .map_err(|e| format!("send: {e}"))
    }

    /// The next reply's kind and bytes.
    pub fn reply(&mut self) -> Result<(Reply, Vec<u8>), String> {
        // Bounded by the read timeout: every pass reads or returns.
        loop {
            if let Some((n, kind)) = parse_resp(&self.buf).map_err(|e| e.0)? {
                let bytes: Vec<u8> = self.buf.drain(..n).collect();
                return Ok((kind, bytes));
            }
            let mut chunk = [0u8; 64 << 10];
            let got = self
                .stream
                .read(&mut chunk)
                .map_err(|e| format!("read: {e}"))?;
            if got == 0 {
                return Err("the server closed the connection".into());
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    /// Sends and waits for the reply; an error reply is an error.
    pub fn call(&mut self, args: &[Vec<u8>]) -> Result<Vec<u8>, String> {
        self.send(args)?;
        match self.reply()? {
            (Reply::Error | Reply::Busy, bytes) => {
                Err(String::from_utf8_lossy(&bytes).into_owned())
            }
            (_, bytes) => Ok(bytes),
        }
    }

    /// Sends every command, then reads every reply (a pipeline); the error replies counted.
    pub fn pipeline(&mut self, commands: &[Vec<Vec<u8>>]) -> Result<usize, String> {
        let mut out = Vec::new();
        for c in commands {
            encode(c, &mut out);
        }
        self.send_raw(&out)?;
        let mut errors = 0;
        for _ in commands {
            if matches!(self.reply()?.0, Reply::Error | Reply::Busy) {
                errors += 1;
            }
        }
        Ok(errors)
    }
}

/// Argument list from text parts.
pub fn args(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// What a closed loop measured.
pub struct Measured {
    /// Operations answered.
    pub ops: u64,
    /// Operations answered with an error.
    pub errors: u64,
    /// Length of the window, seconds.
    pub seconds: f64,
    /// Latency of each operation, ns.
    pub latency: Histogram<u64>,
    /// The first error reply seen, if any.
    pub first_error: Option<String>,
}

impl Measured {
    /// Operations per second.
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }

    /// Latency quantile `q`, µs.
    pub fn p(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1_000.0
    }
}

/// Pins the calling thread to `cpu` (best effort).
pub fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity on this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs `threads` threads (pinned to `cpu`) of `conns` connections each to `port`, keeping one
/// request in flight per connection for `duration`; `make` gives each request (seeded per
/// thread). Returns what all threads measured.
pub fn closed_loop(
    port: u16,
    threads: usize,
    conns: usize,
    duration: Duration,
    cpu: Option<usize>,
    seed: u64,
    make: &(dyn Fn(&mut SmallRng) -> Vec<Vec<u8>> + Sync),
) -> Result<Measured, String> {
    let results: Vec<Result<Measured, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<Measured, String> {
                    if let Some(cpu) = cpu {
                        pin_to(cpu);
                    }
                    let mut rng = SmallRng::seed_from_u64(seed ^ ((t as u64 + 1) * 0x9E37));
                    let mut cs = (0..conns)
                        .map(|_| Conn::connect(port))
                        .collect::<Result<Vec<_>, _>>()?;
                    let mut m = Measured {
                        ops: 0,
                        errors: 0,
                        seconds: 0.0,
                        latency: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("bounds"),
                        first_error: None,
                    };
                    let start = Instant::now();
                    let mut sent = vec![Instant::now(); conns];
                    // Bounded by `duration`.
                    while start.elapsed() < duration {
                        for (i, c) in cs.iter_mut().enumerate() {
                            c.send(&make(&mut rng))?;
                            sent[i] = Instant::now();
                        }
                        for (i, c) in cs.iter_mut().enumerate() {
                            let (kind, bytes) = c.reply()?;
                            let ns = sent[i].elapsed().as_nanos() as u64;
                            let _ = m.latency.record(ns.max(1));
                            m.ops += 1;
                            if matches!(kind, Reply::Error | Reply::Busy) {
                                m.errors += 1;
                                m.first_error.get_or_insert_with(|| {
                                    String::from_utf8_lossy(&bytes).into_owned()
                                });
                            }
                        }
                    }
                    m.seconds = start.elapsed().as_secs_f64();
                    Ok(m)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a driver thread"))
            .collect()
    });
    let mut total: Option<Measured> = None;
    for r in results {
        let m = r?;
        match total.as_mut() {
            None => total = Some(m),
            Some(t) => {
                t.ops += m.ops;
                t.errors += m.errors;
                t.seconds = t.seconds.max(m.seconds);
                t.latency.add(&m.latency).map_err(|e| e.to_string())?;
                if t.first_error.is_none() {
                    t.first_error = m.first_error;
                }
            }
        }
    }
    total.ok_or_else(|| "no driver thread".into())
}

/// The value of `field` in an `INFO` reply's text.
pub fn info_field(conn: &mut Conn, section: &str, field: &str) -> Result<f64, String> {
    let bytes = conn.call(&args(&["info", section]))?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("INFO {section} has no {field}"))
}
