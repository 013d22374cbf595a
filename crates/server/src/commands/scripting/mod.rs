//! Lua scripting as Redis 7.0 has it: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and
//! `SCRIPT LOAD|EXISTS|FLUSH|KILL`.
//!
//! A script runs inside the caller's store transaction (`run`): every command it calls
//! runs its handler on that transaction, so the script is atomic and isolated like
//! `MULTI`/`EXEC`, durable on reply in `commit` mode, and all or nothing after a crash. A
//! store conflict retries the whole transaction, and with it the script. A command that
//! reads a key not in DRAM parks the user-level thread as any command does; the Lua state
//! is lent to this one script meanwhile (`vm`).
//!
//! Parts: `state` (the shared state a command's context holds), `cache` (scripts by SHA1,
//! bounded), `shebang` (`#!lua flags=...`), `vm` (the
//! sandboxed Lua states, `prelude.lua`), `convert` (replies ⇄ Lua values), `run` (one
//! run and `redis.call`), `control` (busy scripts and `SCRIPT KILL`).

mod cache;
mod cjson;
mod cmsgpack;
mod control;
mod convert;
mod dump;
mod functions;
mod library;
mod run;
mod shebang;
mod state;
mod structlib;
mod vm;

use std::sync::Arc;

use tamer_store::{DbError, Tx};

use cache::{normalize, sha1_hex, Origin, Script};
use control::Kill;
pub use functions::{
    fcall, fcall_ro, function_delete, function_dump, function_flush, function_help, function_kill,
    function_list, function_load, function_restore, function_stats,
};
pub use library::load_at_start;
use run::{Invocation, RunOptions};
pub use state::Scripts;

use super::gate::BusyScript;
use super::spec::Table;
use super::Context;
use crate::resp::{parse_i64, write};

type Result = std::result::Result<(), DbError>;

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// Which of the four `EVAL` commands.
#[derive(Clone, Copy, Debug)]
struct EvalKind {
    /// `EVALSHA`: the script by its SHA1.
    by_sha: bool,
    /// `_RO`: write commands fail.
    read_only: bool,
}

/// Defines one of the four `EVAL` commands' handlers.
macro_rules! eval_command {
    ($(#[$doc:meta])* $name:ident, by_sha: $by_sha:expr, read_only: $read_only:expr) => {
        $(#[$doc])*
        pub fn $name(
            t: &'static Table,
            ctx: &Context,
            tx: &mut Tx<'_>,
            a: &[&[u8]],
            o: &mut Vec<u8>,
        ) -> Result {
            let kind = EvalKind {
                by_sha: $by_sha,
                read_only: $read_only,
            };
            eval_generic(t, ctx, tx, a, o, kind)
        }
    };
}

eval_command!(
    /// `EVAL script numkeys [key ...] [arg ...]`.
    eval, by_sha: false, read_only: false
);
eval_command!(
    /// `EVAL_RO script numkeys [key ...] [arg ...]`.
    eval_ro, by_sha: false, read_only: true
);
eval_command!(
    /// `EVALSHA sha1 numkeys [key ...] [arg ...]`.
    evalsha, by_sha: true, read_only: false
);
eval_command!(
    /// `EVALSHA_RO sha1 numkeys [key ...] [arg ...]`.
    evalsha_ro, by_sha: true, read_only: true
);

/// `numkeys` checked against the arguments, as Redis checks it: `Err` is the reply.
pub(super) fn numkeys(args: &[&[u8]]) -> std::result::Result<usize, &'static str> {
    let n = parse_i64(args[2]).ok_or("ERR value is not an integer or out of range")?;
    if n > (args.len() - 3) as i64 {
        return Err("ERR Number of keys can't be greater than number of args");
    }
    if n < 0 {
        return Err("ERR Number of keys can't be negative");
    }
    Ok(n as usize)
}

/// Parses and compiles `body` in `vm`, then caches it: `Err` is the reply.
fn load(
    vm: &mut vm::Vm,
    scripts: &Scripts,
    body: &[u8],
    origin: Origin,
) -> std::result::Result<Arc<Script>, String> {
    let sha = sha1_hex(body);
    if let Some(script) = scripts.get(&sha) {
        if origin == Origin::Load {
            scripts.insert(Arc::clone(&script), origin)?;
        }
        return Ok(script);
    }
    let (flags, code_at) = match shebang::parse(body)? {
        Some((flags, at)) => (Some(flags), at),
        None => (None, 0),
    };
    let script = Arc::new(Script {
        sha,
        body: body.into(),
        code_at,
        flags,
    });
    vm.function(&script)
        .map_err(|msg| format!("ERR Error compiling script (new function): {msg}"))?;
    scripts.insert(Arc::clone(&script), origin)?;
    Ok(script)
}

fn eval_generic(
    table: &'static Table,
    ctx: &Context,
    tx: &mut Tx<'_>,
    args: &[&[u8]],
    out: &mut Vec<u8>,
    kind: EvalKind,
) -> Result {
    if kind.by_sha && args[1].len() != 40 {
        write::error(out, NOSCRIPT);
        return Ok(());
    }
    let keys = match numkeys(args) {
        Ok(n) => n,
        Err(text) => {
            write::error(out, text);
            return Ok(());
        }
    };
    let scripts = ctx.scripts;
    let Some(mut vm) = vm::lend_or_reply(scripts, table, out) else {
        return Ok(());
    };
    let script = if kind.by_sha {
        scripts.get(args[1]).ok_or_else(|| NOSCRIPT.to_string())
    } else {
        load(&mut vm, scripts, args[1], Origin::Eval)
    };
    let script = match script.and_then(|s| check_flags(ctx, &s, kind).map(|()| s)) {
        Ok(script) => script,
        Err(text) => {
            write::error(out, &text);
            return Ok(());
        }
    };
    let function = match vm.function(&script) {
        Ok(f) => f,
        Err(msg) => {
            write::error(
                out,
                &format!("ERR Error compiling script (new function): {msg}"),
            );
            return Ok(());
        }
    };
    let no_writes = script.flags.is_some_and(|f| f.no_writes);
    let invocation = Invocation {
        function,
        name: &script.sha,
        call: None,
        keys: &args[3..3 + keys],
        argv: &args[3 + keys..],
        options: RunOptions {
            read_only: kind.read_only || no_writes,
            flags: script.flags,
        },
    };
    run::run(&mut vm, scripts, table, ctx, tx, invocation, out)
}

/// What a shebang script's flags refuse before it runs: `Err` is the reply.
fn check_flags(ctx: &Context, script: &Script, kind: EvalKind) -> std::result::Result<(), String> {
    let Some(flags) = script.flags else {
        return Ok(());
    };
    if kind.read_only && !flags.no_writes {
        return Err("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    let full = ctx
        .stats
        .out_of_space
        .load(std::sync::atomic::Ordering::Relaxed);
    if full && !flags.allow_oom && !flags.no_writes {
        return Err(super::reply::OUT_OF_SPACE.into());
    }
    Ok(())
}

/// `SCRIPT LOAD script`.
pub fn script_load(
    t: &'static Table,
    ctx: &Context,
    _: &mut Tx<'_>,
    a: &[&[u8]],
    o: &mut Vec<u8>,
) -> Result {
    let Some(mut vm) = vm::lend_or_reply(ctx.scripts, t, o) else {
        return Ok(());
    };
    match load(&mut vm, ctx.scripts, a[2], Origin::Load) {
        Ok(script) => write::bulk(o, &script.sha),
        Err(text) => write::error(o, &text),
    }
    Ok(())
}

/// `SCRIPT EXISTS sha1 [sha1 ...]`.
pub fn script_exists(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    write::array(out, args.len() - 2);
    for sha in &args[2..] {
        let known = normalize(sha).is_some_and(|sha| ctx.scripts.contains(&sha));
        write::integer(out, i64::from(known));
    }
    Ok(())
}

/// `SCRIPT FLUSH [ASYNC|SYNC]`.
pub fn script_flush(ctx: &Context, _: &mut Tx<'_>, args: &[&[u8]], out: &mut Vec<u8>) -> Result {
    let mode_ok = match args {
        [_, _] => true,
        [_, _, mode] => mode.eq_ignore_ascii_case(b"sync") || mode.eq_ignore_ascii_case(b"async"),
        _ => false,
    };
    if !mode_ok {
        write::error(out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        return Ok(());
    }
    ctx.scripts.flush();
    write::simple(out, "OK");
    Ok(())
}

/// `SCRIPT KILL`.
pub fn script_kill(ctx: &Context, _: &mut Tx<'_>, _: &[&[u8]], out: &mut Vec<u8>) -> Result {
    kill_reply(ctx, BusyScript::Eval, out);
    Ok(())
}

/// `SCRIPT KILL` (`kind` `Eval`) or `FUNCTION KILL`'s reply.
fn kill_reply(ctx: &Context, kind: BusyScript, out: &mut Vec<u8>) {
    match ctx.scripts.kill(kind) {
        Kill::OtherKind(busy) => write::error(out, super::gate::busy_error(busy)),
        Kill::Killed => write::simple(out, "OK"),
        Kill::NotBusy => write::error(out, "NOTBUSY No scripts in execution right now."),
        Kill::Unkillable => write::error(
            out,
            "UNKILLABLE Sorry the script already executed write commands against the dataset. \
             You can either wait the script termination or kill the server in a hard way using \
             the SHUTDOWN NOSAVE command.",
        ),
    }
}
