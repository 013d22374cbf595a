//! `publish_fanout_vs_redis`: messages delivered per second to [`Plan::fanout_subscribers`]
//! subscribers of one channel. One publisher pipelines `PUBLISH`es of
//! [`Plan::payload_bytes`] in batches of [`Plan::fanout_batch`], at most
//! [`Plan::fanout_in_flight_max`] unanswered; the clock stops when every subscriber holds every
//! message. One thread on the load CPU drives every socket (non-blocking, epoll through mio)
//! and checks every byte each subscriber receives. The method of `scripts/pubsub-fanout.py`.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::{with_cpu, Ctx, Measured, Plan};
use crate::load::proto;
use crate::rpc::servers::Server;
use crate::types::client::{args, Conn};

/// The channel.
pub const CHANNEL: &str = "fan";
/// The longest one server's fan-out may take.
pub const TIMEOUT: Duration = Duration::from_secs(120);
/// Bytes read per `read` call.
const READ_CHUNK_BYTES: usize = 64 << 10;
/// The publisher's token (subscribers are `0..subscribers`).
const PUBLISHER: Token = Token(usize::MAX);

/// One round: both servers, tamer ÷ redis-server.
pub fn round(ctx: &mut Ctx) -> Result<(), String> {
    let measured = ctx.each_server(|ctx, server, _| measure(ctx.plan, server))?;
    ctx.compare("publish_fanout_vs_redis", "publish_fanout", measured);
    Ok(())
}

/// The frame a RESP2 subscriber receives for each message.
pub fn message_frame(channel: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = format!("*3\r\n$7\r\nmessage\r\n${}\r\n", channel.len()).into_bytes();
    out.extend_from_slice(channel);
    out.extend_from_slice(format!("\r\n${}\r\n", payload.len()).as_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
    out
}

/// Whether `chunk`, received `offset` bytes into a stream of `frame` repeated, is what that
/// stream holds there.
pub fn continues_frames(frame: &[u8], offset: u64, chunk: &[u8]) -> bool {
    if frame.is_empty() {
        return chunk.is_empty();
    }
    let mut at = (offset % frame.len() as u64) as usize;
    let mut rest = chunk;
    // Bounded: each pass consumes at least one byte.
    while !rest.is_empty() {
        let n = (frame.len() - at).min(rest.len());
        if rest[..n] != frame[at..at + n] {
            return false;
        }
        rest = &rest[n..];
        at = 0;
    }
    true
}

/// One server's fan-out: subscribers and the publisher connected, then the measured interval.
fn measure(plan: &Plan, server: &Server) -> Result<Measured, String> {
    let subscribers = (0..plan.fanout_subscribers)
        .map(|_| open(server.port(), Some(CHANNEL)))
        .collect::<Result<Vec<_>, _>>()?;
    let publisher = open(server.port(), None)?;
    let mut fanout = Fanout::new(plan, subscribers, publisher)?;
    let (seconds, cpu) = with_cpu(server, plan.load_cpu, || {
        std::thread::scope(|s| {
            s.spawn(|| {
                tamer_runtime::pin_to_cpu(plan.load_cpu);
                fanout.run()
            })
            .join()
            .unwrap_or_else(|_| Err("the fan-out thread panicked".into()))
        })
    })?;
    let ops = plan.fanout_subscribers as u64 * plan.fanout_messages;
    Ok(Measured::new(ops, seconds, cpu))
}

/// A connection, subscribed to `channel` if given, turned non-blocking.
fn open(port: u16, channel: Option<&str>) -> Result<TcpStream, String> {
    let mut conn = Conn::connect(port)?;
    if let Some(channel) = channel {
        conn.call(&args(&["SUBSCRIBE", channel]))?;
    }
    let (stream, unread) = conn.into_parts();
    if !unread.is_empty() {
        return Err(format!(
            "unexpected bytes after SUBSCRIBE: {}",
            String::from_utf8_lossy(&unread)
        ));
    }
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(TcpStream::from_std(stream))
}

/// The fan-out's sockets and counts.
struct Fanout {
    poll: Poll,
    subscribers: Vec<TcpStream>,
    /// Bytes each subscriber has received.
    received_bytes: Vec<u64>,
    /// Subscribers holding every message.
    complete: usize,
    publisher: TcpStream,
    out: Vec<u8>,
    out_sent: usize,
    /// Replies received, not yet counted.
    replies: Vec<u8>,
    published: u64,
    answered: u64,
    messages: u64,
    batch: usize,
    in_flight_max: u64,
    /// One PUBLISH, encoded.
    command: Vec<u8>,
    /// The reply every PUBLISH must get: the number of subscribers.
    reply: Vec<u8>,
    frame: Vec<u8>,
    want_bytes: u64,
    chunk: Vec<u8>,
}

impl Fanout {
    fn new(plan: &Plan, subscribers: Vec<TcpStream>, publisher: TcpStream) -> Result<Self, String> {
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
        let mut fanout = Self {
            poll,
            received_bytes: vec![0; subscribers.len()],
            reply: format!(":{}\r\n", subscribers.len()).into_bytes(),
            subscribers,
            complete: 0,
            publisher,
            out: Vec::new(),
            out_sent: 0,
            replies: Vec::new(),
            published: 0,
            answered: 0,
            messages: plan.fanout_messages,
            batch: plan.fanout_batch.max(1),
            in_flight_max: plan.fanout_in_flight_max.max(1),
            command: Vec::new(),
            frame: Vec::new(),
            want_bytes: 0,
            chunk: vec![0; READ_CHUNK_BYTES],
        };
        let payload = vec![b'p'; plan.payload_bytes];
        proto::resp_bulk(
            &mut fanout.command,
            &[b"PUBLISH", CHANNEL.as_bytes(), &payload],
        );
        fanout.frame = message_frame(CHANNEL.as_bytes(), &payload);
        fanout.want_bytes = fanout.frame.len() as u64 * fanout.messages;
        let registry = fanout.poll.registry();
        for (i, s) in fanout.subscribers.iter_mut().enumerate() {
            registry
                .register(s, Token(i), Interest::READABLE)
                .map_err(|e| format!("epoll register: {e}"))?;
        }
        registry
            .register(
                &mut fanout.publisher,
                PUBLISHER,
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| format!("epoll register: {e}"))?;
        Ok(fanout)
    }

    /// Publishes every message; seconds until every subscriber held every one.
    fn run(&mut self) -> Result<f64, String> {
        let mut events = Events::with_capacity(1024);
        let started = Instant::now();
        let mut delivered_s = None;
        // Bounded by TIMEOUT.
        loop {
            if delivered_s.is_none() && self.complete == self.subscribers.len() {
                delivered_s = Some(started.elapsed().as_secs_f64());
            }
            if let (Some(s), true) = (delivered_s, self.answered == self.messages) {
                return Ok(s);
            }
            if started.elapsed() > TIMEOUT {
                return Err(format!(
                    "not delivered within {TIMEOUT:?}: {} of {} subscribers hold every message, \
                     {} of {} PUBLISHes answered",
                    self.complete,
                    self.subscribers.len(),
                    self.answered,
                    self.messages
                ));
            }
            self.publish()?;
            self.poll
                .poll(&mut events, Some(Duration::from_millis(10)))
                .map_err(|e| format!("epoll: {e}"))?;
            for event in events.iter() {
                match event.token() {
                    PUBLISHER => self.read_replies()?,
                    Token(i) => self.read_subscriber(i)?,
                }
            }
        }
    }

    /// A batch more if the bound allows and the last one is written, then what the socket
    /// takes of it.
    fn publish(&mut self) -> Result<(), String> {
        if self.out_sent == self.out.len() {
            self.out.clear();
            self.out_sent = 0;
            if self.published < self.messages && self.published - self.answered < self.in_flight_max
            {
                let n = (self.batch as u64).min(self.messages - self.published);
                for _ in 0..n {
                    self.out.extend_from_slice(&self.command);
                }
                self.published += n;
            }
        }
        // Bounded: each pass writes at least one byte or leaves.
        while self.out_sent < self.out.len() {
            match self.publisher.write(&self.out[self.out_sent..]) {
                Ok(0) => return Err("publisher: the socket took nothing".into()),
                Ok(n) => self.out_sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("publisher: {e}")),
            }
        }
        Ok(())
    }

    /// Reads the publisher's replies until the socket would block; each must be the number
    /// of subscribers.
    fn read_replies(&mut self) -> Result<(), String> {
        // Bounded: the socket runs dry (what the server sent so far).
        loop {
            match self.publisher.read(&mut self.chunk) {
                Ok(0) => return Err("publisher: the server closed the connection".into()),
                Ok(n) => self.replies.extend_from_slice(&self.chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("publisher: {e}")),
            }
        }
        let mut at = 0;
        while let Some((len, _)) = proto::parse_resp(&self.replies[at..]).map_err(|e| e.0)? {
            let reply = &self.replies[at..at + len];
            if reply != self.reply {
                return Err(format!(
                    "PUBLISH answered {:?}, not {:?}",
                    String::from_utf8_lossy(reply),
                    String::from_utf8_lossy(&self.reply)
                ));
            }
            at += len;
            self.answered += 1;
        }
        self.replies.drain(..at);
        Ok(())
    }

    /// Reads subscriber `i`'s messages until its socket would block, checking every byte.
    fn read_subscriber(&mut self, i: usize) -> Result<(), String> {
        // Bounded: the socket runs dry; past the messages published it is an error.
        loop {
            match self.subscribers[i].read(&mut self.chunk) {
                Ok(0) => return Err(format!("subscriber {i}: the server closed the connection")),
                Ok(n) => {
                    let got = self.received_bytes[i];
                    if !continues_frames(&self.frame, got, &self.chunk[..n]) {
                        let shown = String::from_utf8_lossy(&self.chunk[..n.min(120)]);
                        return Err(format!(
                            "subscriber {i}: unexpected bytes at {got}: {shown:?}"
                        ));
                    }
                    self.received_bytes[i] = got + n as u64;
                    if self.received_bytes[i] > self.want_bytes {
                        return Err(format!("subscriber {i}: more messages than published"));
                    }
                    if self.received_bytes[i] == self.want_bytes {
                        self.complete += 1;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("subscriber {i}: {e}")),
            }
        }
    }
}
