//! One load thread: an event loop (mio over epoll) driving its share of the connections.
//!
//! Open loop: arrivals are drawn ahead as Poisson gaps; each is due at its scheduled time and
//! goes to a connection (round robin, or the hot connections first when skewed). A connection
//! with a free slot (fewer than `pipeline` in flight) sends it at once; otherwise it waits in
//! that connection's backlog (at most [`MAX_BACKLOG`]) *with its scheduled time*, so its latency
//! includes the wait: no coordinated omission. Closed loop: every connection keeps `pipeline`
//! operations in flight, each timed from its send. Per pass: arrivals due so far, one write per
//! connection with something to send, one `epoll_wait` (≤ [`MAX_EVENTS`] events).

use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::conn::{Conn, Done, InFlight};
use super::proto::{self, Reply};
use super::spec::{KeyChooser, OpKind};
use super::stats::Stats;
use super::timer::Timer;
use super::{LoadOptions, Shared};
use crate::workload::Poisson;

/// Most arrivals waiting for a slot on one connection; past it an arrival is counted as
/// `overflowed` and not sent.
pub const MAX_BACKLOG: usize = 1 << 16;
/// Events taken per `epoll_wait`.
const MAX_EVENTS: usize = 1024;
/// The timer's token (connections are `0..connections`).
const TIMER: Token = Token(usize::MAX);
/// How close to an arrival the loop stops sleeping and spins.
const SPIN_NS: u64 = 200_000;
/// How long replies are awaited after the window ends.
const DRAIN: Duration = Duration::from_secs(2);
/// How long a setup command's reply is awaited.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The fill phase's keys for this worker: `next`, `next + stride`, ... below `end`.
#[derive(Clone, Copy, Debug)]
pub struct Fill {
    pub next: u64,
    pub stride: u64,
    pub end: u64,
}

pub struct Worker<'a> {
    opts: &'a LoadOptions,
    conns: Vec<Conn>,
    /// The first `hot` connections get `opts.hot_share` of the arrivals.
    hot: usize,
    poll: Poll,
    timer: Timer,
    rng: SmallRng,
    chooser: &'a KeyChooser,
    value: Vec<u8>,
    clock: Instant,
    round_robin: usize,
    fill: Option<Fill>,
    pub stats: Stats,
}

impl<'a> Worker<'a> {
    /// Connects `count` connections (the first `hot` of them hot).
    pub fn connect(
        opts: &'a LoadOptions,
        chooser: &'a KeyChooser,
        count: usize,
        hot: usize,
        seed: u64,
    ) -> Result<Self, String> {
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
        let mut conns = Vec::with_capacity(count);
        for i in 0..count {
            let stream = connect(&opts.host, opts.port, &opts.setup)?;
            let mut stream = mio::net::TcpStream::from_std(stream);
            poll.registry()
                .register(
                    &mut stream,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| format!("epoll register: {e}"))?;
            conns.push(Conn::new(stream, opts.pipeline));
        }
        let timer = Timer::new(poll.registry(), TIMER)?;
        Ok(Self {
            opts,
            conns,
            hot,
            poll,
            timer,
            rng: SmallRng::seed_from_u64(seed),
            chooser,
            value: vec![b'v'; opts.value_bytes],
            clock: Instant::now(),
            round_robin: 0,
            fill: None,
            stats: Stats::new(),
        })
    }

    fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    /// Sets every key of `fill` (closed loop, SETs) and returns when all are answered.
    pub fn run_fill(&mut self, fill: Fill, shared: &Shared) -> Result<(), String> {
        self.fill = Some(fill);
        self.clock = Instant::now();
        self.stats.window(0, u64::MAX);
        self.run_loop(None, u64::MAX, shared)
    }

    /// The measured run: warm-up, then the window, then the drain.
    pub fn run(&mut self, rate_per_s: Option<f64>, shared: &Shared) -> Result<(), String> {
        self.fill = None;
        self.stats = Stats::new();
        self.clock = Instant::now();
        let warmup_ns = self.opts.warmup.as_nanos() as u64;
        let end_ns = warmup_ns + self.opts.duration.as_nanos() as u64;
        self.stats.window(warmup_ns, end_ns);
        self.run_loop(rate_per_s.map(Poisson::new), end_ns, shared)
    }

    fn run_loop(
        &mut self,
        arrivals: Option<Poisson>,
        end_ns: u64,
        shared: &Shared,
    ) -> Result<(), String> {
        let mut events = Events::with_capacity(MAX_EVENTS);
        let mut done = Vec::with_capacity(1024);
        let mut next_arrival_ns = arrivals.map_or(0, |p| p.next_gap_ns(&mut self.rng));
        let mut drain_until_ns = None;
        loop {
            let now = self.now_ns();
            if now >= end_ns && drain_until_ns.is_none() {
                drain_until_ns = Some(now + DRAIN.as_nanos() as u64);
            }
            if drain_until_ns.is_none() {
                match arrivals {
                    Some(p) => self.arrive(now, &mut next_arrival_ns, p)?,
                    None => self.refill(now)?,
                }
            }
            self.flush_all();
            let idle = self
                .conns
                .iter()
                .all(|c| c.in_flight.is_empty() || !c.alive);
            let filled = self.fill.is_some_and(|f| f.next >= f.end);
            if (idle && (filled || drain_until_ns.is_some()))
                || drain_until_ns.is_some_and(|d| now > d)
            {
                break;
            }
            let timeout = self.timeout(
                arrivals.is_some(),
                drain_until_ns.is_some(),
                next_arrival_ns,
                end_ns,
            );
            self.poll
                .poll(&mut events, Some(timeout))
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .map_err(|e| format!("epoll_wait: {e}"))?;
            self.handle(&events, &mut done, arrivals.is_some(), shared)?;
            if self.conns.iter().all(|c| !c.alive) {
                return Err(format!(
                    "every connection to {}:{} failed: {}",
                    self.opts.host,
                    self.opts.port,
                    self.stats.last_error.as_deref().unwrap_or("?")
                ));
            }
        }
        for c in &self.conns {
            self.stats.unfinished += c.in_flight.len() as u64;
            self.stats.unsent += c.backlog.len() as u64;
        }
        Ok(())
    }

    /// One `epoll_wait`'s events: writes resumed, replies read and recorded, and (open loop)
    /// waiting arrivals sent into the slots the replies freed.
    fn handle(
        &mut self,
        events: &Events,
        done: &mut Vec<Done>,
        open: bool,
        shared: &Shared,
    ) -> Result<(), String> {
        for event in events.iter() {
            if event.token() == TIMER {
                self.timer.clear();
                continue;
            }
            let ci = event.token().0;
            if event.is_writable() && self.conns[ci].alive {
                if let Err(e) = self.conns[ci].flush() {
                    self.fail(ci, e.to_string());
                }
            }
            let readable = event.is_readable() || event.is_read_closed() || event.is_error();
            if !readable || !self.conns[ci].alive {
                continue;
            }
            done.clear();
            let received = self.conns[ci].receive(self.opts.protocol, done);
            let now = self.now_ns();
            for d in done.iter() {
                self.stats.record(d.start_ns, now, d.reply);
            }
            shared.add_completed(done.len() as u64);
            match received {
                Err(e) => self.fail(ci, e),
                Ok(()) if open => self.serve_backlog(ci)?,
                Ok(()) => {}
            }
        }
        Ok(())
    }

    /// How long the next `epoll_wait` may block. With operations in flight, or an arrival
    /// due within [`SPIN_NS`], none: the loop spins, because waking a thread whose vCPU has
    /// halted can take milliseconds, which a generator that sleeps would add to every latency. Otherwise the timer wakes it
    /// [`SPIN_NS`] before the next arrival.
    fn timeout(&self, open: bool, draining: bool, next_arrival_ns: u64, end_ns: u64) -> Duration {
        let busy = self
            .conns
            .iter()
            .any(|c| c.alive && !c.in_flight.is_empty());
        let now = self.now_ns();
        if busy || (open && next_arrival_ns.saturating_sub(now) <= SPIN_NS) {
            return Duration::ZERO;
        }
        if draining {
            return Duration::from_millis(10);
        }
        if open {
            self.timer.arm(next_arrival_ns - now - SPIN_NS);
            return Duration::from_millis(100);
        }
        Duration::from_nanos(end_ns.saturating_sub(now)).min(Duration::from_millis(50))
    }

    /// Issues every arrival due by `now` (open loop): `batch` operations each.
    fn arrive(&mut self, now: u64, next_ns: &mut u64, arrivals: Poisson) -> Result<(), String> {
        while *next_ns <= now {
            let ci = self.pick_conn();
            for _ in 0..self.opts.batch {
                let conn = &self.conns[ci];
                let free = conn.in_flight.len() < self.opts.pipeline && conn.backlog.is_empty();
                if free {
                    self.issue(ci, *next_ns)?;
                } else if conn.backlog.len() < MAX_BACKLOG {
                    self.conns[ci].backlog.push_back(*next_ns);
                } else {
                    self.stats.overflow(*next_ns);
                }
            }
            *next_ns += arrivals.next_gap_ns(&mut self.rng).max(1);
        }
        Ok(())
    }

    fn serve_backlog(&mut self, ci: usize) -> Result<(), String> {
        while self.conns[ci].in_flight.len() < self.opts.pipeline {
            let Some(due) = self.conns[ci].backlog.pop_front() else {
                break;
            };
            self.issue(ci, due)?;
        }
        Ok(())
    }

    /// Tops every live connection up to `pipeline` in flight (closed loop).
    fn refill(&mut self, now: u64) -> Result<(), String> {
        for ci in 0..self.conns.len() {
            while self.conns[ci].alive && self.conns[ci].in_flight.len() < self.opts.pipeline {
                if !self.issue(ci, now)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Encodes one operation due at `start_ns` on connection `ci`; false when the fill has no
    /// key left.
    fn issue(&mut self, ci: usize, start_ns: u64) -> Result<bool, String> {
        let (op, keys) = match &mut self.fill {
            Some(f) if f.next >= f.end => return Ok(false),
            Some(f) => {
                f.next += f.stride;
                (OpKind::Set, [f.next - f.stride, 0])
            }
            None => {
                let op = self.opts.mix.pick(&mut self.rng);
                (
                    op,
                    [
                        self.chooser.next(&mut self.rng),
                        self.chooser.next(&mut self.rng),
                    ],
                )
            }
        };
        let conn = &mut self.conns[ci];
        let replies = proto::encode(self.opts.protocol, op, keys, &mut self.value, &mut conn.out);
        conn.in_flight.push_back(InFlight {
            start_ns,
            replies_left: replies,
            worst: Reply::Ok,
        });
        Ok(true)
    }

    fn flush_all(&mut self) {
        for ci in 0..self.conns.len() {
            if self.conns[ci].alive && !self.conns[ci].out.is_empty() {
                if let Err(e) = self.conns[ci].flush() {
                    self.fail(ci, e.to_string());
                }
            }
        }
    }

    /// A connection failed: what it had in flight or waiting counts as errors; it is closed.
    fn fail(&mut self, ci: usize, error: String) {
        let conn = &mut self.conns[ci];
        conn.alive = false;
        let lost: Vec<u64> = conn
            .in_flight
            .drain(..)
            .map(|f| f.start_ns)
            .chain(conn.backlog.drain(..))
            .collect();
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.stats.connection_failed(&lost, error);
    }

    /// The connection of the next arrival (a live one).
    fn pick_conn(&mut self) -> usize {
        let n = self.conns.len();
        for _ in 0..n * 2 {
            let ci = if self.hot > 0 && self.hot < n {
                if self.rng.gen_bool(self.opts.hot_share) {
                    self.rng.gen_range(0..self.hot)
                } else {
                    self.rng.gen_range(self.hot..n)
                }
            } else {
                self.round_robin = (self.round_robin + 1) % n;
                self.round_robin
            };
            if self.conns[ci].alive {
                return ci;
            }
        }
        self.conns.iter().position(|c| c.alive).unwrap_or(0)
    }
}

fn connect(host: &str, port: u16, setup: &[Vec<Vec<u8>>]) -> Result<std::net::TcpStream, String> {
    use std::net::ToSocketAddrs;
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))?;
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    handshake(&mut stream, setup)?;
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(stream)
}

/// Sends the `setup` commands on a blocking `stream` and reads their replies (each within
/// [`SETUP_TIMEOUT`]); an error reply is an error naming its command.
fn handshake(stream: &mut std::net::TcpStream, setup: &[Vec<Vec<u8>>]) -> Result<(), String> {
    use std::io::{Read, Write};
    if setup.is_empty() {
        return Ok(());
    }
    let mut out = Vec::new();
    for command in setup {
        let parts: Vec<&[u8]> = command.iter().map(Vec::as_slice).collect();
        proto::resp_bulk(&mut out, &parts);
    }
    stream
        .set_read_timeout(Some(SETUP_TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream.write_all(&out).map_err(|e| format!("setup: {e}"))?;
    let (mut inbuf, mut chunk) = (Vec::new(), [0u8; 4096]);
    let mut commands = setup.iter();
    // Bounded: each pass parses a reply or reads (within the timeout) or fails.
    while let Some(command) = commands.as_slice().first() {
        match proto::parse_resp(&inbuf).map_err(|e| e.0)? {
            Some((len, kind)) => {
                if matches!(kind, Reply::Error | Reply::Busy) {
                    let name = String::from_utf8_lossy(&command.join(&b' ')).into_owned();
                    let text = String::from_utf8_lossy(&inbuf[..len]);
                    return Err(format!("setup {name}: {}", text.trim_end()));
                }
                inbuf.drain(..len);
                commands.next();
            }
            None => match stream.read(&mut chunk) {
                Ok(0) => return Err("setup: the server closed the connection".into()),
                Ok(n) => inbuf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("setup: {e}")),
            },
        }
    }
    stream.set_read_timeout(None).map_err(|e| e.to_string())
}
