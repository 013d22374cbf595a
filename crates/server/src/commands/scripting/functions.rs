//! `FUNCTION LOAD|DELETE|FLUSH|LIST|STATS|KILL|DUMP|RESTORE`, `FCALL` and `FCALL_RO`
//! (Redis 7.0). A change reads and writes the libraries' record in the command's store
//! transaction (`library`), so it is atomic, durable on reply and survives restart; the
//! registry `FCALL` reads is set once the transaction commits.

use std::sync::Arc;

use tamer_store::{DbError, Tx};

use super::library::{
    flag_names, from_record, library_name, load_in, read_record, refresh, write_record, Libraries,
    Library, LIBRARIES_BYTES_MAX, LIBRARIES_MAX,
};
use super::run::{Invocation, RunOptions};
use super::state::FunctionCall;
use super::{dump, numkeys, run, vm};
use crate::commands::gate::BusyScript;
use crate::commands::spec::Table;
use crate::commands::Context;
use crate::resp::write;

type Result = std::result::Result<(), DbError>;

/// Writes `text` as the reply's error and ends the handler.
macro_rules! refuse {
    ($out:expr, $text:expr) => {{
        write::error($out, &$text);
        return Ok(());
    }};
}

/// The libraries the record in `tx` holds: the registry when it is at the record's version,
/// else the record loaded in `vm`.
fn current(
    ctx: &Context,
    vm: &vm::Vm,
    tx: &mut Tx<'_>,
) -> std::result::Result<Arc<Libraries>, DbError> {
    let (version, record) = read_record(tx)?;
    let held = ctx.scripts.libraries();
    if held.version == version {
        return Ok(held);
    }
    let (libraries, failed) = from_record(vm, version, record);
    if !failed.is_empty() {
        eprintln!(
            "tamer: function libraries that no longer load: {}",
            failed.join("; ")
        );
    }
    Ok(Arc::new(libraries))
}

/// Writes `libraries` as the next version and sets the registry once the transaction
/// commits: that version's libraries.
fn commit(
    ctx: &Context,
    tx: &mut Tx<'_>,
    base: &Libraries,
    libraries: Vec<Arc<Library>>,
) -> Result {
    let version = base.version + 1;
    write_record(tx, version, &libraries)?;
    let next = Arc::new(Libraries::new(version, libraries));
    let scripts = Arc::clone(ctx.scripts);
    ctx.effects
        .after_commit(Box::new(move || scripts.set_libraries(next)));
    Ok(())
}

/// Whether `lib` may join `base` (replacing its namesake when `replace`): `Err` is the reply.
fn admit(base: &Libraries, lib: &Library, how: Admit) -> std::result::Result<(), String> {
    if base.by_name.contains_key(&lib.name) && !how.replace {
        return Err(if how.quoted {
            format!("ERR Library '{}' already exists", lib.name)
        } else {
            format!("ERR Library {} already exists", lib.name)
        });
    }
    for f in &lib.functions {
        if let Some((owner, _)) = base.by_function.get(&f.name.to_ascii_lowercase()) {
            if owner.name != lib.name {
                return Err(format!("ERR Function {} already exists", f.name));
            }
        }
    }
    let kept = base.by_name.len() - usize::from(base.by_name.contains_key(&lib.name));
    if kept + 1 > LIBRARIES_MAX {
        return Err(format!(
            "ERR tamer: at most {LIBRARIES_MAX} function libraries"
        ));
    }
    let old = base.by_name.get(&lib.name).map_or(0, |l| l.code.len());
    if base.code_bytes() - old + lib.code.len() > LIBRARIES_BYTES_MAX {
        return Err(format!(
            "ERR tamer: the function libraries' code would pass {LIBRARIES_BYTES_MAX} bytes"
        ));
    }
    Ok(())
}

/// How a library joins the others: replacing its namesake or not, and the error's quotes
/// (`FUNCTION LOAD` quotes the name, `RESTORE` does not).
#[derive(Clone, Copy)]
struct Admit {
    replace: bool,
    quoted: bool,
}

/// `base`'s libraries with `lib` in place of its namesake.
fn with(base: &Libraries, lib: Arc<Library>) -> Vec<Arc<Library>> {
    let mut all: Vec<Arc<Library>> = base
        .by_name
        .values()
        .filter(|l| l.name != lib.name)
        .cloned()
        .collect();
    all.push(lib);
    all
}

/// `FUNCTION LOAD [REPLACE] function-code`: the library's name.
pub fn function_load(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    // Every argument before the code is `REPLACE` (repeats allowed, as Redis).
    let code = args[args.len() - 1];
    let options = &args[2..args.len() - 1];
    if let Some(bad) = options.iter().find(|o| !o.eq_ignore_ascii_case(b"replace")) {
        refuse!(
            out,
            format!("ERR Unknown option given: {}", String::from_utf8_lossy(bad))
        );
    }
    let replace = !options.is_empty();
    let name = match library_name(code) {
        Ok(name) => name,
        Err(text) => refuse!(out, text),
    };
    let Some(vm) = vm::lend_or_reply(ctx.scripts, t, out) else {
        return Ok(());
    };
    let lib = match load_in(&vm, &name, code) {
        Ok((lib, _)) => Arc::new(lib),
        Err(text) => refuse!(out, text),
    };
    let base = current(ctx, &vm, tx)?;
    let how = Admit {
        replace,
        quoted: true,
    };
    if let Err(text) = admit(&base, &lib, how) {
        refuse!(out, text);
    }
    commit(ctx, tx, &base, with(&base, lib))?;
    write::bulk(out, name.as_bytes());
    Ok(())
}

/// `FUNCTION DELETE library-name`.
pub fn function_delete(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let Some(vm) = vm::lend_or_reply(ctx.scripts, t, out) else {
        return Ok(());
    };
    let base = current(ctx, &vm, tx)?;
    let name = String::from_utf8_lossy(args[2]);
    if !base.by_name.contains_key(&*name) {
        refuse!(out, "ERR Library not found");
    }
    let rest = base
        .by_name
        .values()
        .filter(|l| l.name != name)
        .cloned()
        .collect();
    commit(ctx, tx, &base, rest)?;
    write::simple(out, "OK");
    Ok(())
}

/// `FUNCTION FLUSH [ASYNC|SYNC]`.
pub fn function_flush(
    _: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let mode_ok = match args {
        [_, _] => true,
        [_, _, mode] => mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async"),
        _ => refuse!(
            out,
            "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP."
        ),
    };
    if !mode_ok {
        refuse!(out, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    let (version, _) = read_record(tx)?;
    let base = Libraries {
        version,
        ..Libraries::default()
    };
    commit(ctx, tx, &base, Vec::new())?;
    write::simple(out, "OK");
    Ok(())
}

/// `FUNCTION LIST`'s options: `WITHCODE`, `LIBRARYNAME pattern`.
struct ListOptions<'a> {
    with_code: bool,
    pattern: Option<&'a [u8]>,
}

fn list_options<'a>(args: &[&'a [u8]]) -> std::result::Result<ListOptions<'a>, String> {
    let mut o = ListOptions {
        with_code: false,
        pattern: None,
    };
    let mut i = 2;
    // Bounded: every pass consumes one or two arguments, or fails.
    while i < args.len() {
        let arg = args[i];
        if arg.eq_ignore_ascii_case(b"withcode") && !o.with_code {
            o.with_code = true;
        } else if arg.eq_ignore_ascii_case(b"libraryname") && o.pattern.is_none() {
            let Some(p) = args.get(i + 1) else {
                return Err("ERR library name argument was not given".into());
            };
            o.pattern = Some(p);
            i += 1;
        } else {
            return Err(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(arg)
            ));
        }
        i += 1;
    }
    Ok(o)
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`.
pub fn function_list(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let o = match list_options(args) {
        Ok(o) => o,
        Err(text) => refuse!(out, text),
    };
    let Some(vm) = vm::lend_or_reply(ctx.scripts, t, out) else {
        return Ok(());
    };
    let base = current(ctx, &vm, tx)?;
    let shown: Vec<&Arc<Library>> = base
        .by_name
        .values()
        .filter(|l| {
            o.pattern
                .is_none_or(|p| crate::glob::matches_nocase(p, l.name.as_bytes()))
        })
        .collect();
    let p = ctx.protocol;
    write::array(out, shown.len());
    for lib in shown {
        write::map(out, 3 + usize::from(o.with_code), p);
        write::bulk(out, b"library_name");
        write::bulk(out, lib.name.as_bytes());
        write::bulk(out, b"engine");
        write::bulk(out, b"LUA");
        write::bulk(out, b"functions");
        write::array(out, lib.functions.len());
        for f in &lib.functions {
            write::map(out, 3, p);
            write::bulk(out, b"name");
            write::bulk(out, f.name.as_bytes());
            write::bulk(out, b"description");
            match &f.description {
                Some(d) => write::bulk(out, d),
                None => write::null(out, p),
            }
            write::bulk(out, b"flags");
            let flags = flag_names(f.flags);
            write::set(out, flags.len(), p);
            for flag in flags {
                write::simple(out, flag);
            }
        }
        if o.with_code {
            write::bulk(out, b"library_code");
            write::bulk(out, &lib.code);
        }
    }
    Ok(())
}

/// `FUNCTION STATS`: the running function, and the libraries and functions held.
pub fn function_stats(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let libraries = ctx.scripts.libraries();
    let p = ctx.protocol;
    write::map(out, 2, p);
    write::bulk(out, b"running_script");
    match ctx.scripts.running_function() {
        None => write::null(out, p),
        Some((call, ms)) => {
            write::map(out, 3, p);
            write::bulk(out, b"name");
            write::bulk(out, call.name.as_bytes());
            write::bulk(out, b"command");
            write::array(out, call.command.len());
            for arg in &call.command {
                write::bulk(out, arg);
            }
            write::bulk(out, b"duration_ms");
            write::integer(out, ms as i64);
        }
    }
    write::bulk(out, b"engines");
    write::map(out, 1, p);
    write::bulk(out, b"LUA");
    write::map(out, 2, p);
    write::bulk(out, b"libraries_count");
    write::integer(out, libraries.by_name.len() as i64);
    write::bulk(out, b"functions_count");
    write::integer(out, libraries.function_count() as i64);
    Ok(())
}

/// `FUNCTION KILL`: stops a busy function that has not written.
pub fn function_kill(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    super::kill_reply(ctx, BusyScript::Function, out);
    Ok(())
}

/// `FUNCTION DUMP`: every library's code in Redis's payload format.
pub fn function_dump(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    _: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let Some(vm) = vm::lend_or_reply(ctx.scripts, t, out) else {
        return Ok(());
    };
    let base = current(ctx, &vm, tx)?;
    let codes: Vec<&[u8]> = base.by_name.values().map(|l| &l.code[..]).collect();
    write::bulk(out, &dump::functions_payload(&codes));
    Ok(())
}

/// How `FUNCTION RESTORE` treats the libraries held.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Append,
    Replace,
    Flush,
}

/// `FUNCTION RESTORE serialized-value [FLUSH|APPEND|REPLACE]`.
pub fn function_restore(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
) -> Result {
    let policy = match args.get(3) {
        None => Policy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"append") => Policy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"replace") => Policy::Replace,
        Some(p) if p.eq_ignore_ascii_case(b"flush") => Policy::Flush,
        Some(_) => refuse!(
            out,
            "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
        ),
    };
    if args.len() > 4 {
        refuse!(
            out,
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP."
        );
    }
    let codes = match dump::functions_from_payload(args[2]) {
        Ok(codes) => codes,
        Err(text) => refuse!(out, text),
    };
    let Some(vm) = vm::lend_or_reply(ctx.scripts, t, out) else {
        return Ok(());
    };
    let mut base = current(ctx, &vm, tx)?;
    if policy == Policy::Flush {
        base = Arc::new(Libraries {
            version: base.version,
            ..Libraries::default()
        });
    }
    let mut next = Libraries::new(base.version, base.by_name.values().cloned().collect());
    for code in codes {
        let loaded = library_name(&code).and_then(|name| load_in(&vm, &name, &code));
        let lib = match loaded {
            Ok((lib, _)) => Arc::new(lib),
            Err(text) => refuse!(out, text),
        };
        let how = Admit {
            replace: policy == Policy::Replace,
            quoted: false,
        };
        if let Err(text) = admit(&next, &lib, how) {
            refuse!(out, text);
        }
        next = Libraries::new(next.version, with(&next, lib));
    }
    commit(ctx, tx, &base, next.by_name.into_values().collect())?;
    write::simple(out, "OK");
    Ok(())
}

/// `FCALL function numkeys [key ...] [arg ...]`.
pub fn fcall(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    a: &[&[u8]],
    o: &mut Vec<u8>,
) -> Result {
    fcall_generic(t, ctx, tx, a, o, false)
}

/// `FCALL_RO function numkeys [key ...] [arg ...]`.
pub fn fcall_ro(
    t: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    a: &[&[u8]],
    o: &mut Vec<u8>,
) -> Result {
    fcall_generic(t, ctx, tx, a, o, true)
}

fn fcall_generic(
    table: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    read_only: bool,
) -> Result {
    let libraries = ctx.scripts.libraries();
    let name = String::from_utf8_lossy(args[1]).to_ascii_lowercase();
    let Some((lib, i)) = libraries.by_function.get(&name) else {
        refuse!(out, "ERR Function not found");
    };
    // As `EVAL`'s, but a non-integer has its own text.
    if crate::resp::parse_i64(args[2]).is_none() {
        refuse!(out, "ERR Bad number of keys provided");
    }
    let keys = match numkeys(args) {
        Ok(n) => n,
        Err(text) => refuse!(out, text),
    };
    let flags = lib.functions[*i].flags;
    if read_only && !flags.no_writes {
        refuse!(
            out,
            "ERR Can not execute a script with write flag using *_ro command."
        );
    }
    let full = ctx
        .stats
        .out_of_space
        .load(std::sync::atomic::Ordering::Relaxed);
    if full && !flags.allow_oom && !flags.no_writes {
        refuse!(out, crate::commands::reply::OUT_OF_SPACE);
    }
    let Some(mut vm) = vm::lend_or_reply(ctx.scripts, table, out) else {
        return Ok(());
    };
    if let Err(text) = refresh(&mut vm, &libraries) {
        refuse!(out, text);
    }
    let function = match bound(&vm, &name, &args[3..3 + keys], &args[3 + keys..]) {
        Ok(f) => f,
        Err(err) => refuse!(out, format!("ERR {err}")),
    };
    let invocation = Invocation {
        function,
        call: Some(FunctionCall::new(args[1], args)),
        name: args[1],
        keys: &args[3..3 + keys],
        argv: &args[3 + keys..],
        options: RunOptions {
            read_only: read_only || flags.no_writes,
            flags: Some(flags),
        },
    };
    run::run(&mut vm, ctx.scripts, table, ctx, tx, invocation, out)
}

/// The callback of function `name` in `vm`, bound to its keys and arguments.
fn bound(vm: &vm::Vm, name: &str, keys: &[&[u8]], argv: &[&[u8]]) -> mlua::Result<mlua::Function> {
    let callback = vm
        .functions
        .1
        .get(name)
        .cloned()
        .ok_or_else(|| mlua::Error::runtime("Function not found"))?;
    let list = |items: &[&[u8]]| -> mlua::Result<mlua::Table> {
        let t = vm.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            t.raw_set(i + 1, vm.lua.create_string(item)?)?;
        }
        Ok(t)
    };
    vm.bind.call((callback, list(keys)?, list(argv)?))
}

/// `FUNCTION HELP`: Redis 7.0.15's lines.
pub fn function_help(_: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    const LINES: &[&str] = &[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    write::array(out, LINES.len());
    for line in LINES {
        write::simple(out, line);
    }
    Ok(())
}
