//! The scripts' shared state (the cache, the runs, the random generator), apart from what
//! uses it so that a command's context can hold it: `cache` and `control` implement it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use super::shebang::ScriptFlags;

/// Most scripts kept (Redis 7.0 keeps every one; past this the oldest `EVAL`ed go first).
pub const SCRIPTS_MAX: usize = 10_000;
/// Most bytes of script bodies kept.
pub const SCRIPT_BYTES_MAX: usize = 64 << 20;

/// A script's SHA1, as 40 lowercase hex digits.
pub type Sha = [u8; 40];

/// One cached script.
#[derive(Debug)]
pub struct Script {
    /// Its SHA1 (of the whole body, shebang included).
    pub sha: Sha,
    /// The body as sent.
    pub body: Box<[u8]>,
    /// Where the Lua code starts: after the shebang line, keeping its newline so that line
    /// numbers stay the user's.
    pub code_at: usize,
    /// The shebang's flags (`None`: no shebang, Redis's compatible mode).
    pub flags: Option<ScriptFlags>,
}

/// What `SCRIPT LOAD` or `EVAL` added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `EVAL`: may be evicted when the cache is full.
    Eval,
    /// `SCRIPT LOAD`: kept until `SCRIPT FLUSH`.
    Load,
}

#[derive(Debug, Default)]
pub(super) struct Cache {
    pub(super) scripts: HashMap<Sha, (Arc<Script>, Origin)>,
    /// `EVAL`ed scripts, oldest first (eviction order).
    pub(super) evictable: VecDeque<Sha>,
    pub(super) bytes: usize,
}

/// Most scripts running at once that the registry tracks (each connection runs one at a
/// time, so this is the connection bound's order; past it a run is not killable).
pub const RUNS_MAX: usize = 65_536;

/// One script run, as the hook and `SCRIPT KILL` see it.
#[derive(Debug)]
pub struct RunControl {
    pub(super) started: Instant,
    /// Past this the run is busy.
    pub(super) threshold: Duration,
    /// The run counted itself busy.
    pub(super) busy: AtomicBool,
    /// A write command of the script succeeded (`SCRIPT KILL` refuses it then).
    pub wrote: AtomicBool,
    /// `SCRIPT KILL` asked it to stop.
    pub killed: AtomicBool,
    /// The function it runs (`None`: a script, `EVAL`).
    pub(super) function: Option<FunctionCall>,
}

/// The function a run calls, as `FUNCTION STATS` shows it.
#[derive(Clone, Debug)]
pub struct FunctionCall {
    pub name: String,
    /// The command's arguments (at most [`CALL_ARGS_MAX`], each cut at
    /// [`CALL_ARG_BYTES_MAX`]).
    pub command: Vec<Vec<u8>>,
}

/// Arguments of a running function's command `FUNCTION STATS` shows (Redis shows them all).
pub const CALL_ARGS_MAX: usize = 32;
/// Bytes of each such argument.
pub const CALL_ARG_BYTES_MAX: usize = 128;

impl FunctionCall {
    /// The call of `name` by the command `args` (bounded).
    pub fn new(name: &[u8], args: &[&[u8]]) -> Self {
        FunctionCall {
            name: String::from_utf8_lossy(name).into_owned(),
            command: args
                .iter()
                .take(CALL_ARGS_MAX)
                .map(|a| a[..a.len().min(CALL_ARG_BYTES_MAX)].to_vec())
                .collect(),
        }
    }
}

/// The registry of runs.
#[derive(Debug, Default)]
pub struct Runs {
    pub(super) running: Mutex<Vec<Arc<RunControl>>>,
    pub(super) busy: AtomicUsize,
}

/// The server's scripts: each body by its SHA1 (what `EVAL` and `SCRIPT LOAD` compiled
/// once, bounded in count and bytes: `cache`), the scripts running (`control`), and the
/// random generator scripts share.
#[derive(Debug)]
pub struct Scripts {
    pub(super) cache: Mutex<Cache>,
    /// Bumped by `SCRIPT FLUSH`: a Lua state compiled before it drops its functions.
    pub(super) generation: AtomicU64,
    /// Redis's `lrand48` state (48 bits), shared by every script as Redis shares it.
    pub(super) rand48: Mutex<u64>,
    /// The scripts running now.
    pub(super) runs: Runs,
    /// The function libraries `FCALL` runs (`library`).
    pub(super) libraries: Mutex<Arc<Libraries>>,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            cache: Mutex::default(),
            generation: AtomicU64::new(0),
            // Redis's generator starts from this state when the process starts.
            rand48: Mutex::new(0x1234_ABCD_330E),
            runs: Runs::default(),
            libraries: Mutex::default(),
        }
    }
}

/// A function a library registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Vec<u8>>,
    pub flags: ScriptFlags,
}

/// A library: its name, its code as loaded, its functions in registration order.
#[derive(Debug, PartialEq, Eq)]
pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: Vec<FunctionInfo>,
}

/// The libraries at one version, by name, and their functions by name.
#[derive(Debug, Default)]
pub struct Libraries {
    pub version: u64,
    pub by_name: BTreeMap<String, Arc<Library>>,
    pub by_function: HashMap<String, (Arc<Library>, usize)>,
}

impl Libraries {
    /// `libraries` at `version`.
    pub fn new(version: u64, libraries: Vec<Arc<Library>>) -> Self {
        let mut by_function = HashMap::new();
        for lib in &libraries {
            for (i, f) in lib.functions.iter().enumerate() {
                // Function names are case-insensitive (`FCALL`, clashes between libraries).
                by_function.insert(f.name.to_ascii_lowercase(), (Arc::clone(lib), i));
            }
        }
        let by_name = libraries.into_iter().map(|l| (l.name.clone(), l)).collect();
        Libraries {
            version,
            by_name,
            by_function,
        }
    }

    /// Functions in all libraries.
    pub fn function_count(&self) -> usize {
        self.by_function.len()
    }

    /// The bytes of all libraries' code.
    pub fn code_bytes(&self) -> usize {
        self.by_name.values().map(|l| l.code.len()).sum()
    }
}
