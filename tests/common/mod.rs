//! What the end-to-end tests share: a temporary directory, a real `tamer serve` process on a
//! free port, and a reader of whole RESP replies. Each test file uses what it needs.
#![allow(dead_code)]

pub mod conn;
pub mod table;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn temp_dir(name: &str) -> Dir {
    let dir = std::env::temp_dir().join(format!("tamer-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Dir(dir)
}

/// Whether `program args` runs and succeeds. Without it the test says SKIPPED and returns,
/// unless `TAMER_REQUIRE_PEERS` is set (CI), which makes a missing peer a failure.
pub fn have(program: &str, args: &[&str]) -> bool {
    let found = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("TAMER_REQUIRE_PEERS").is_err(),
            "{program} is missing (scripts/install-peers.sh) and TAMER_REQUIRE_PEERS is set"
        );
        eprintln!("SKIPPED: {program} is not installed (scripts/install-peers.sh)");
    }
    found
}

/// `redis-cli -p port args…`: its output, trimmed.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Connects to `127.0.0.1:port`, retrying for up to 5 s (a server still starting), with
/// `read_timeout` on the connection.
pub fn connect_to(port: u16, read_timeout: Duration) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(read_timeout)).unwrap();
                return s;
            }
            Err(e) if Instant::now() > deadline => panic!("connecting to {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A `redis-server` of our own on a free port, without persistence; killed on drop.
pub struct Redis(pub Child, pub u16);

impl Redis {
    pub fn start() -> Option<Redis> {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        Some(Redis(child, port))
    }

    pub fn connect(&self) -> TcpStream {
        connect_to(self.1, Duration::from_secs(10))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `args` as one RESP command (an array of bulk strings).
pub fn send_command(conn: &mut TcpStream, args: &[impl AsRef<str>]) {
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        request.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    conn.write_all(&request).unwrap();
}

/// Sends `args` as one command and reads its reply.
pub fn call(conn: &mut TcpStream, args: &[impl AsRef<str>]) -> String {
    send_command(conn, args);
    read_replies(conn, 1).remove(0)
}

/// A free port in 18000-18499 (the range the tests share): the next one after a
/// per-process offset that nothing listens on.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let offset = (std::process::id() % 25) as u16 * 20;
    for _ in 0..500 {
        let port = 18_000 + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % 500;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 18000-18499");
}

/// A `tamer serve` process on a free port (`free_port`); killed on drop.
pub struct Served {
    pub child: Child,
    pub port: u16,
    pub out: BufReader<std::process::ChildStdout>,
    /// The startup line.
    pub line: String,
}

impl Served {
    pub fn start(dir: &Path) -> Served {
        Self::start_with(dir, &[])
    }

    /// With `extra` flags; a 16 MiB cache unless they name `--cache-size`.
    pub fn start_with(dir: &Path, extra: &[&str]) -> Served {
        let cache: &[&str] = if extra.contains(&"--cache-size") {
            &[]
        } else {
            &["--cache-size", "16mb"]
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_tamer"))
            .args(["serve", "--port", &free_port().to_string()])
            .args(cache)
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting tamer serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("the startup line");
        // "... on 127.0.0.1:PORT; opened in ..."
        let port = line
            .split(" on 127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no address in the startup line: {line}"));
        Served {
            child,
            port,
            out,
            line,
        }
    }

    /// A connection with a 20 s read timeout.
    pub fn connect(&self) -> TcpStream {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match TcpStream::connect(("127.0.0.1", self.port)) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    return s;
                }
                Err(e) if Instant::now() > deadline => panic!("connecting: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// SIGTERM, then the exit status and the rest of stdout.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        // SAFETY: sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).unwrap();
        (status.code(), rest)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `n` replies (each up to its CRLF-terminated end, bulk bodies included).
pub fn read_replies(conn: &mut TcpStream, n: usize) -> Vec<String> {
    let mut buf = Vec::new();
    let mut replies = Vec::new();
    // Bounded by the read timeout: every pass reads or returns.
    while replies.len() < n {
        if let Some(len) = tamer_server::resp::reply_len(&buf).unwrap() {
            replies.push(String::from_utf8_lossy(&buf[..len]).into_owned());
            buf.drain(..len);
            continue;
        }
        let mut chunk = [0u8; 65536];
        let got = conn.read(&mut chunk).expect("a reply");
        assert!(
            got > 0,
            "the server closed the connection after {} replies",
            replies.len()
        );
        buf.extend_from_slice(&chunk[..got]);
    }
    replies
}

/// Runs the client script `tests/py/<script>` with `python` against `port`; panics with its
/// output unless it succeeds.
pub fn run_client_script(python: &str, script: &str, port: u16) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(script);
    let out = Command::new(python)
        .arg(path)
        .arg(port.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
