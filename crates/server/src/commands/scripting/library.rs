//! Function libraries (Redis 7.0's `FUNCTION LOAD`): a library's code, parsed from its
//! `#!lua name=<library>` line and run once in a Lua state to learn the functions it
//! registers; the set of libraries the server holds (the registry, in [`Scripts`], which
//! `FCALL` reads) and its record in the store, so that libraries survive restart and crash.
//!
//! ```text
//! store key    [0 u32 BE]"functions"
//! store value  [version u64 LE][libraries u32 LE]
//!              per library: [name bytes u32 LE][name][code bytes u32 LE][code]
//! ```
//!
//! Every change (`FUNCTION LOAD`, `DELETE`, `FLUSH`, `RESTORE`) reads the record, writes it
//! with the version bumped in the same transaction, and sets the registry once that commits
//! (a newer version only, so two changes committing close together leave the later one).

use std::collections::HashMap;
use std::sync::Arc;

use mlua::{Function, Table, Value};
use tamer_store::{DbError, Tx};

use super::shebang::ScriptFlags;
pub use super::state::{FunctionInfo, Libraries, Library};
use super::vm::{compile_named, Vm};
use super::Scripts;

/// Bytes of all libraries' code together (Redis has no bound; a library's code is one
/// argument, at most `proto-max-bulk-len`).
pub const LIBRARIES_BYTES_MAX: usize = 64 << 20;
/// Libraries held (Redis has no bound).
pub const LIBRARIES_MAX: usize = 10_000;
/// Functions one library registers.
pub const FUNCTIONS_PER_LIBRARY_MAX: usize = 10_000;

/// The store key of the libraries' record.
pub fn record_key() -> Vec<u8> {
    crate::keyspace::store_key(0, b"functions")
}

impl Scripts {
    /// The libraries `FCALL` runs.
    pub fn libraries(&self) -> Arc<Libraries> {
        Arc::clone(&self.libraries.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Sets the libraries, unless those held are as new.
    pub fn set_libraries(&self, libraries: Arc<Libraries>) {
        let mut held = self.libraries.lock().unwrap_or_else(|p| p.into_inner());
        if libraries.version > held.version {
            *held = libraries;
        }
    }
}

/// The libraries' record: its version and each library's (name, code).
pub type Record = (u64, Vec<(String, Vec<u8>)>);

/// The libraries' record (none: version 0, no library).
pub fn read_record(tx: &mut Tx<'_>) -> Result<Record, DbError> {
    let Some(bytes) = tx.get(&record_key())? else {
        return Ok((0, Vec::new()));
    };
    decode_record(&bytes)
        .ok_or_else(|| DbError::Runtime("the function libraries' record is corrupt".to_string()))
}

fn decode_record(mut bytes: &[u8]) -> Option<Record> {
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, rest) = bytes.split_at_checked(n)?;
        bytes = rest;
        Some(head)
    };
    let version = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    let mut libraries = Vec::with_capacity(count.min(LIBRARIES_MAX));
    for _ in 0..count {
        let n = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
        let name = String::from_utf8(take(n)?.to_vec()).ok()?;
        let n = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
        libraries.push((name, take(n)?.to_vec()));
    }
    take(0).filter(|_| bytes.is_empty())?;
    Some((version, libraries))
}

/// Writes the record of `libraries` at `version`.
pub fn write_record(
    tx: &mut Tx<'_>,
    version: u64,
    libraries: &[Arc<Library>],
) -> Result<(), DbError> {
    let mut out = Vec::new();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(libraries.len() as u32).to_le_bytes());
    for lib in libraries {
        out.extend_from_slice(&(lib.name.len() as u32).to_le_bytes());
        out.extend_from_slice(lib.name.as_bytes());
        out.extend_from_slice(&(lib.code.len() as u32).to_le_bytes());
        out.extend_from_slice(&lib.code);
    }
    tx.put(&record_key(), &out)
}

/// A library's name from its first line `#!<engine> name=<name> [...]`: `Err` is the reply.
pub fn library_name(code: &[u8]) -> Result<String, String> {
    const INVALID: &str = "ERR Invalid library metadata";
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err(INVALID.into());
    };
    let line = String::from_utf8_lossy(&code[..end]);
    let mut parts = line.split_ascii_whitespace();
    let engine = parts.next().ok_or(INVALID)?.trim_start_matches("#!");
    let mut name = None;
    for part in parts {
        let is_name = part.len() >= 5 && part[..5].eq_ignore_ascii_case("name=");
        if !is_name {
            return Err(format!("ERR Invalid metadata value given: {part}"));
        }
        if name.is_some() {
            return Err(
                "ERR Invalid metadata value, name argument was given multiple times".into(),
            );
        }
        name = Some(part[5..].to_string());
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    Ok(name)
}

/// Letters, digits and underscores, at least one (Redis's rule for library and function
/// names).
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Runs `code` (library `name`) in `vm`: its functions, with their callbacks in this state;
/// `Err` is the reply.
pub fn load_in(vm: &Vm, name: &str, code: &[u8]) -> Result<(Library, Vec<Function>), String> {
    let start = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let chunk = compile_named(&vm.lua, &code[start..], "@user_function")
        .map_err(|msg| format!("ERR Error compiling function: {msg}"))?;
    let (ok, got): (bool, Value) = vm
        .load_library
        .call(chunk)
        .map_err(|e| format!("ERR Error registering functions: {e}"))?;
    let Value::Table(got) = got else {
        return Err("ERR Error registering functions: no result".into());
    };
    if !ok {
        let text: String = got.raw_get("err").unwrap_or_default();
        return Err(format!("ERR Error registering functions: {text}"));
    }
    registered(name, code, &got)
}

/// What a library's load registered, checked as Redis checks it.
fn registered(name: &str, code: &[u8], got: &Table) -> Result<(Library, Vec<Function>), String> {
    let n = got.raw_len();
    if n == 0 {
        return Err("ERR No functions registered".into());
    }
    if n > FUNCTIONS_PER_LIBRARY_MAX {
        return Err(format!(
            "ERR tamer: a library registers at most {FUNCTIONS_PER_LIBRARY_MAX} functions"
        ));
    }
    let mut functions: Vec<FunctionInfo> = Vec::with_capacity(n);
    let mut callbacks = Vec::with_capacity(n);
    for i in 1..=n {
        let entry: Table = got.raw_get(i).map_err(|e| format!("ERR {e}"))?;
        // The prelude checked the name (letters, digits, `_`; once per library, any case).
        let fname: String = entry.raw_get("name").map_err(|e| format!("ERR {e}"))?;
        let description: Option<mlua::LuaString> = entry.raw_get("description").ok();
        let flags: Vec<String> = entry.raw_get("flags").unwrap_or_default();
        callbacks.push(entry.raw_get("callback").map_err(|e| format!("ERR {e}"))?);
        functions.push(FunctionInfo {
            name: fname,
            description: description.map(|d| d.as_bytes().to_vec()),
            flags: function_flags(&flags),
        });
    }
    let library = Library {
        name: name.to_string(),
        code: code.to_vec(),
        functions,
    };
    Ok((library, callbacks))
}

/// The flags a library registered (each checked by the prelude).
fn function_flags(names: &[String]) -> ScriptFlags {
    let mut flags = ScriptFlags::default();
    for name in names {
        match name.as_str() {
            "no-writes" => flags.no_writes = true,
            "allow-oom" => flags.allow_oom = true,
            "allow-stale" => flags.allow_stale = true,
            "no-cluster" => flags.no_cluster = true,
            "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
            _ => {}
        }
    }
    flags
}

/// The names of the flags set, in Redis's order (`FUNCTION LIST`).
pub fn flag_names(flags: ScriptFlags) -> Vec<&'static str> {
    let all = [
        (flags.no_writes, "no-writes"),
        (flags.allow_oom, "allow-oom"),
        (flags.allow_stale, "allow-stale"),
        (flags.no_cluster, "no-cluster"),
        (flags.allow_cross_slot_keys, "allow-cross-slot-keys"),
    ];
    all.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect()
}

/// Makes `vm` hold the callbacks of `libraries` (run again after any change).
pub fn refresh(vm: &mut Vm, libraries: &Libraries) -> Result<(), String> {
    if vm.functions.0 == libraries.version {
        return Ok(());
    }
    let mut callbacks = HashMap::with_capacity(libraries.function_count());
    for lib in libraries.by_name.values() {
        let (loaded, functions) = load_in(vm, &lib.name, &lib.code)?;
        for (info, callback) in loaded.functions.iter().zip(functions) {
            callbacks.insert(info.name.to_ascii_lowercase(), callback);
        }
    }
    vm.functions = (libraries.version, callbacks);
    Ok(())
}

/// The libraries of a record, loaded in `vm` (a library that no longer loads is left out
/// and named in the error list).
pub fn from_record(
    vm: &Vm,
    version: u64,
    record: Vec<(String, Vec<u8>)>,
) -> (Libraries, Vec<String>) {
    let mut loaded = Vec::with_capacity(record.len());
    let mut failed = Vec::new();
    for (name, code) in record {
        match load_in(vm, &name, &code) {
            Ok((lib, _)) => loaded.push(Arc::new(lib)),
            Err(text) => failed.push(format!("{name}: {text}")),
        }
    }
    (Libraries::new(version, loaded), failed)
}

/// Loads the libraries the store holds into `scripts` (at `tamer serve`'s start): a library
/// that no longer loads is left out and said on stderr.
pub fn load_at_start(
    db: &tamer_store::Db,
    scripts: &Arc<Scripts>,
    table: &'static crate::commands::spec::Table,
) -> Result<(), String> {
    let (version, record) = db
        .transaction(read_record)
        .map_err(|e| format!("reading the function libraries: {e}"))?;
    if record.is_empty() {
        return Ok(());
    }
    let vm = super::vm::lend(scripts, table)
        .map_err(|e| format!("starting Lua for the function libraries: {e}"))?;
    let (libraries, failed) = from_record(&vm, version, record);
    for f in failed {
        eprintln!("tamer: a function library no longer loads, left out: {f}");
    }
    scripts.set_libraries(Arc::new(libraries));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutations caught: a metadata error turned into another, an engine other than Lua
    /// accepted, a name with other characters accepted.
    #[test]
    fn library_names_as_redis_reads_them() {
        assert_eq!(library_name(b"#!lua name=mylib\nx"), Ok("mylib".into()));
        assert_eq!(library_name(b"#!LUA name=a_1\n"), Ok("a_1".into()));
        assert!(library_name(b"return 1")
            .unwrap_err()
            .contains("Missing library metadata"));
        assert!(library_name(b"#!lua\n")
            .unwrap_err()
            .contains("name was not given"));
        assert!(library_name(b"#!lua name=a")
            .unwrap_err()
            .contains("Invalid library metadata"));
        assert!(library_name(b"#!lua name=a NAME=b\n")
            .unwrap_err()
            .contains("multiple times"));
        assert!(library_name(b"#!lua name=a foo=b\n")
            .unwrap_err()
            .contains("Invalid metadata"));
        assert!(library_name(b"#!js name=a\n")
            .unwrap_err()
            .contains("Engine"));
        assert!(library_name(b"#!lua name=a-b\n")
            .unwrap_err()
            .contains("Library names"));
    }

    /// Mutation caught: the record's fields in another order or a length misread (a
    /// truncated or padded record must be refused).
    #[test]
    fn the_record_round_trips_and_refuses_garbage() {
        let lib = Arc::new(Library {
            name: "l".into(),
            code: b"#!lua name=l\n".to_vec(),
            functions: Vec::new(),
        });
        let mut out = Vec::new();
        out.extend_from_slice(&7u64.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(b"l");
        out.extend_from_slice(&(lib.code.len() as u32).to_le_bytes());
        out.extend_from_slice(&lib.code);
        assert_eq!(
            decode_record(&out),
            Some((7, vec![("l".to_string(), lib.code.clone())]))
        );
        assert_eq!(decode_record(&out[..out.len() - 1]), None);
        out.push(0);
        assert_eq!(decode_record(&out), None);
    }
}
