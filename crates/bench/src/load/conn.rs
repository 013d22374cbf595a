//! One connection of a load worker: a non-blocking socket, its bytes to send, its bytes
//! received, and the operations in flight on it (at most the pipeline depth), oldest first.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};

use mio::net::TcpStream;

use super::proto::{self, ProtoError, Reply};
use super::spec::Protocol;

/// Most bytes held received but unparsed (a reply larger than this closes the connection).
pub const MAX_INBUF_BYTES: usize = 64 << 20;
/// Bytes read per `read` call.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// An operation sent and not yet answered.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    /// When it was due: its scheduled time in the open loop, its send time in the closed.
    pub start_ns: u64,
    pub replies_left: u32,
    /// The worst of its replies so far.
    pub worst: Reply,
}

/// An operation finished: when it was due and what it got.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    pub start_ns: u64,
    pub reply: Reply,
}

pub struct Conn {
    pub stream: TcpStream,
    pub out: Vec<u8>,
    out_sent: usize,
    inbuf: Vec<u8>,
    pub in_flight: VecDeque<InFlight>,
    /// Open loop: arrivals due on this connection that wait for a free slot (their scheduled
    /// times), bounded by the worker.
    pub backlog: VecDeque<u64>,
    pub alive: bool,
}

impl Conn {
    pub fn new(stream: TcpStream, depth: usize) -> Self {
        Self {
            stream,
            out: Vec::with_capacity(64 << 10),
            out_sent: 0,
            inbuf: Vec::with_capacity(READ_CHUNK_BYTES),
            in_flight: VecDeque::with_capacity(depth),
            backlog: VecDeque::new(),
            alive: true,
        }
    }

    /// Writes what it can of `out` (until the socket would block).
    pub fn flush(&mut self) -> std::io::Result<()> {
        while self.out_sent < self.out.len() {
            match self.stream.write(&self.out[self.out_sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.out_sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.out_sent == self.out.len() {
            self.out.clear();
            self.out_sent = 0;
        }
        Ok(())
    }

    /// Reads until the socket would block and completes the operations whose last reply
    /// arrived, appending them to `done`. An unparsable reply, a reply nobody asked for, or
    /// end of stream is an error.
    pub fn receive(&mut self, proto: Protocol, done: &mut Vec<Done>) -> Result<(), String> {
        loop {
            let old = self.inbuf.len();
            if old + READ_CHUNK_BYTES > MAX_INBUF_BYTES {
                return Err(format!("a reply past {MAX_INBUF_BYTES} bytes"));
            }
            self.inbuf.resize(old + READ_CHUNK_BYTES, 0);
            match self.stream.read(&mut self.inbuf[old..]) {
                Ok(0) => {
                    self.inbuf.truncate(old);
                    return Err("the server closed the connection".into());
                }
                Ok(n) => {
                    self.inbuf.truncate(old + n);
                    self.parse(proto, done)?;
                }
                Err(e) => {
                    self.inbuf.truncate(old);
                    match e.kind() {
                        ErrorKind::WouldBlock => return Ok(()),
                        ErrorKind::Interrupted => {}
                        _ => return Err(e.to_string()),
                    }
                }
            }
        }
    }

    fn parse(&mut self, proto: Protocol, done: &mut Vec<Done>) -> Result<(), String> {
        let mut at = 0;
        while at < self.inbuf.len() {
            let parsed = match proto {
                Protocol::Resp => proto::parse_resp(&self.inbuf[at..]),
                Protocol::Memcache => proto::parse_memcache(&self.inbuf[at..]),
            };
            let (len, reply) = match parsed {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(ProtoError(e)) => return Err(e),
            };
            if proto == Protocol::Resp && proto::is_push(&self.inbuf[at..]) {
                at += len;
                continue;
            }
            at += len;
            let op = self.in_flight.front_mut().ok_or("a reply to no request")?;
            op.worst = op.worst.max(reply);
            op.replies_left -= 1;
            if op.replies_left == 0 {
                done.push(Done {
                    start_ns: op.start_ns,
                    reply: op.worst,
                });
                self.in_flight.pop_front();
            }
        }
        self.inbuf.drain(..at);
        Ok(())
    }
}
