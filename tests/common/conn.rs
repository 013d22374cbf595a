//! A connection that keeps what it received and has not taken yet: replies and pushes one
//! at a time, or everything up to a `PING`'s reply (so a test waits on the server, never on
//! a timer).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One connection with what it received and not yet taken.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn new(port: u16) -> Conn {
        let stream = super::connect_to(port, Duration::from_secs(20));
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            request.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        self.stream.write_all(&request).unwrap();
    }

    /// Sends a request of any bytes.
    pub fn send_bytes(&mut self, args: &[&[u8]]) {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            request.extend_from_slice(a);
            request.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&request).unwrap();
    }

    /// The next reply or push.
    pub fn next(&mut self) -> String {
        // Bounded by the read timeout: every pass reads or returns.
        loop {
            if let Some(len) = tamer_server::resp::reply_len(&self.buf).unwrap() {
                let reply = String::from_utf8_lossy(&self.buf[..len]).into_owned();
                self.buf.drain(..len);
                return reply;
            }
            let mut chunk = [0u8; 65536];
            let got = self.stream.read(&mut chunk).expect("a reply");
            assert!(got > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    /// The next reply's bytes, as received.
    pub fn next_bytes(&mut self) -> Vec<u8> {
        // Bounded by the read timeout: every pass reads or returns.
        loop {
            if let Some(len) = tamer_server::resp::reply_len(&self.buf).unwrap() {
                return self.buf.drain(..len).collect();
            }
            let mut chunk = [0u8; 65536];
            let got = self.stream.read(&mut chunk).expect("a reply");
            assert!(got > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    /// Everything received up to the reply to a `PING` sent now (that reply left out).
    pub fn drain(&mut self) -> Vec<String> {
        self.send(&["PING", "sentinel"]);
        let mut got = Vec::new();
        // Bounded by the read timeout.
        loop {
            let r = self.next();
            if r == "$8\r\nsentinel\r\n" || r == "*2\r\n$4\r\npong\r\n$8\r\nsentinel\r\n" {
                return got;
            }
            got.push(r);
        }
    }
}
