//! One script run inside the caller's store transaction: `redis.call` runs each command's
//! handler on the same transaction (so the script is atomic, isolated, and durable on reply
//! like any command), with Redis's checks, and the script's value becomes the reply.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mlua::{Function, HookTriggers, Lua, LuaString, Value, Variadic};
use tamer_store::{DbError, Tx};

use super::control::RunControl;
use super::convert::{lua_to_reply, reply_to_lua, ReplyOptions};
use super::shebang::ScriptFlags;
use super::vm::Vm;
use super::Scripts;
use crate::commands::permissions;
use crate::commands::spec::{Command, Flags, Run, SessionOp, Table};
use crate::commands::Context;
use crate::keyspace::scope::Scope;
use crate::keyspace::DATABASES;
use crate::pubsub::{monitor_line, MonitorSource};
use crate::resp::{parse_i64, write, Protocol};

/// VM instructions between two checks of the clock and of `SCRIPT KILL` (and a yield of the
/// core to its other threads).
const HOOK_INSTRUCTIONS: u32 = 100_000;

/// How a script runs.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// `EVAL_RO`/`EVALSHA_RO`, or a `no-writes` shebang: write commands fail.
    pub read_only: bool,
    /// The shebang's flags (`None`: Redis's compatible mode).
    pub flags: Option<ScriptFlags>,
}

/// What a run keeps between its `redis.call`s.
struct RunState<'c, 't, 'tx> {
    ctx: Context<'c>,
    tx: &'t mut Tx<'tx>,
    table: &'static Table,
    db: usize,
    resp3: bool,
    options: RunOptions,
    control: &'c RunControl,
    /// The script's `KEYS`: client-side caching remembers them once it reads anything (as
    /// Redis remembers its caller's keys, not those the commands read).
    keys: &'c [&'c [u8]],
    /// A store error (a conflict to retry, a full device ...): the script stops and the
    /// transaction returns it, whatever the script does with the error it saw.
    failed: Option<DbError>,
}

/// The error table a failed `redis.call` hands the script.
fn error_value(lua: &Lua, text: &str) -> mlua::Result<(bool, Value)> {
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok((false, Value::Table(t)))
}

/// `redis.acl_check_cmd` asks through `raw.call` with this first argument (no command's
/// name starts with a NUL), so that a run makes no function of its own for it.
const ACL_CHECK_MARK: &[u8] = b"\0acl_check_cmd";

impl<'c> RunState<'c, '_, '_> {
    /// Whether the script's caller may run `args` (`redis.acl_check_cmd`; the prelude
    /// checked that the command exists).
    fn acl_allows(&self, args: &[&[u8]]) -> bool {
        let Some(command) = self.table.lookup_request(args) else {
            return false;
        };
        self.ctx
            .caller
            .is_none_or(|caller| permissions::check(caller.user, command, args).is_ok())
    }

    /// Redis's checks of a command called from a script: `Err` is the error's text.
    fn check(&self, args: &[&[u8]]) -> Result<&'static Command, &'static str> {
        let command = self
            .table
            .lookup_request(args)
            .ok_or("ERR Unknown Redis command called from script")?;
        let argc = args.len() as i64;
        if (command.arity > 0 && argc != command.arity) || argc < -command.arity {
            return Err("ERR Wrong number of args calling Redis command from script");
        }
        if command.flags.contains(Flags::NOSCRIPT) {
            return Err("ERR This Redis command is not allowed from script");
        }
        if let Some(caller) = self.ctx.caller {
            if let Err(denied) = permissions::check(caller.user, command, args) {
                permissions::log_script_denial(self.ctx.stats, caller, command, denied, args);
                return Err(denied.script_error());
            }
        }
        if command.flags.contains(Flags::WRITE) && self.options.read_only {
            return Err("ERR Write commands are not allowed from read-only scripts.");
        }
        let allow_oom = self
            .options
            .flags
            .is_some_and(|f| f.allow_oom || f.no_writes);
        if command.flags.contains(Flags::DENYOOM)
            && !allow_oom
            && !self.control.wrote.load(Ordering::Relaxed)
            && self.ctx.stats.out_of_space.load(Ordering::Relaxed)
        {
            return Err(crate::commands::reply::OUT_OF_SPACE);
        }
        Ok(command)
    }

    /// `redis.call`/`redis.pcall`'s primitive: `(true, reply)` or `(false, error table)`.
    fn call(&mut self, lua: &Lua, args: &[LuaString]) -> mlua::Result<(bool, Value)> {
        if self.failed.is_some() {
            return error_value(lua, "ERR the script's transaction failed");
        }
        let bytes: Vec<_> = args.iter().map(LuaString::as_bytes).collect();
        let args: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
        if args.first() == Some(&ACL_CHECK_MARK) {
            return Ok((true, Value::Boolean(self.acl_allows(&args[1..]))));
        }
        let command = match self.check(&args) {
            Ok(command) => command,
            Err(text) => return error_value(lua, text),
        };
        let mut reply = Vec::new();
        match command.run {
            Run::Session(SessionOp::Select) => self.select(&args, &mut reply),
            Run::Session(_) | Run::Container => {
                return error_value(lua, "ERR This Redis command is not allowed from script")
            }
            Run::Tx(handler) => {
                let ctx = self.context();
                if let Err(err) = handler(&ctx, self.tx, &args, &mut reply) {
                    return self.fail(lua, err);
                }
            }
            Run::WithTable(handler) => {
                let ctx = self.context();
                if let Err(err) = handler(self.table, &ctx, self.tx, &args, &mut reply) {
                    return self.fail(lua, err);
                }
            }
        }
        self.feed_monitors(command, &args);
        if command.flags.contains(Flags::READONLY) {
            self.ctx.effects.read_keys(self.keys);
        }
        if command.flags.contains(Flags::WRITE) && reply.first() != Some(&b'-') {
            self.control.wrote.store(true, Ordering::Relaxed);
        }
        let (value, is_error) = reply_to_lua(lua, &reply)?;
        Ok((!is_error, value))
    }

    /// A command the script ran, for `MONITOR` clients (`[db lua]`), once the transaction
    /// commits.
    fn feed_monitors(&self, command: &Command, args: &[&[u8]]) {
        let shown =
            !command.flags.contains(Flags::ADMIN) && !command.flags.contains(Flags::SKIP_MONITOR);
        if shown && self.ctx.pubsub.has_monitors() {
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            let line = monitor_line(now_us, self.db, MonitorSource::Lua, args);
            self.ctx.effects.monitor(line);
        }
    }

    fn fail(&mut self, lua: &Lua, err: DbError) -> mlua::Result<(bool, Value)> {
        let text = format!("ERR {err}");
        self.failed = Some(err);
        error_value(lua, &text)
    }

    /// The context of a command the script calls: its database and protocol.
    fn context(&self) -> Context<'c> {
        Context {
            scope: Scope {
                namespace: self.ctx.map.get()[self.db],
                db: self.db,
                ..self.ctx.scope
            },
            protocol: if self.resp3 {
                Protocol::Resp3
            } else {
                Protocol::Resp2
            },
            ..self.ctx
        }
    }

    /// `SELECT` in a script: the script's database only.
    fn select(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        match parse_i64(args[1]) {
            Some(n) if (0..DATABASES as i64).contains(&n) => {
                self.db = n as usize;
                write::simple(out, "OK");
            }
            Some(_) => write::error(out, "ERR DB index is out of range"),
            None => write::error(out, "ERR value is not an integer or out of range"),
        }
    }
}

/// The keys or arguments as a Lua array of strings.
fn strings(lua: &Lua, items: &[&[u8]]) -> mlua::Result<mlua::Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(t)
}

/// What a run needs besides the state and the transaction.
pub struct Invocation<'a> {
    pub function: Function,
    /// What errors name: the script's SHA1 or the function's name.
    pub name: &'a [u8],
    /// The function called (`None`: a script).
    pub call: Option<super::state::FunctionCall>,
    pub keys: &'a [&'a [u8]],
    pub argv: &'a [&'a [u8]],
    pub options: RunOptions,
}

/// Runs a compiled script in `tx` and writes its reply; `Err` only for a store error.
pub fn run(
    vm: &mut Vm,
    scripts: &Arc<Scripts>,
    table: &'static Table,
    ctx: &Context<'_>,
    tx: &mut Tx<'_>,
    invocation: Invocation<'_>,
    out: &mut Vec<u8>,
) -> Result<(), DbError> {
    let threshold_ms = ctx.stats.config.busy_reply_threshold_ms();
    let control = scripts.running(threshold_ms, invocation.call.clone());
    set_hook(&vm.lua, Arc::clone(&control), Arc::clone(scripts));
    let state = RefCell::new(RunState {
        ctx: *ctx,
        tx,
        table,
        db: ctx.db,
        resp3: false,
        options: invocation.options,
        control: &control,
        keys: invocation.keys,
        failed: None,
    });
    let result = vm.lua.scope(|scope| {
        let call = scope.create_function(|lua, args: Variadic<LuaString>| {
            state.borrow_mut().call(lua, &args)
        })?;
        let setresp = scope.create_function(|_, n: u8| {
            state.borrow_mut().resp3 = n == 3;
            Ok(())
        })?;
        vm.raw.raw_set("call", call)?;
        vm.raw.raw_set("setresp", setresp)?;
        vm.storage
            .raw_set("KEYS", strings(&vm.lua, invocation.keys)?)?;
        vm.storage
            .raw_set("ARGV", strings(&vm.lua, invocation.argv)?)?;
        vm.run.call::<(bool, Value)>(invocation.function.clone())
    });
    vm.lua.remove_hook();
    scripts.finished(&control);
    let state = state.into_inner();
    if let Some(err) = state.failed {
        return Err(err);
    }
    match result {
        Ok((true, value)) => {
            let options = ReplyOptions {
                protocol: ctx.protocol,
                script_resp3: state.resp3,
            };
            lua_to_reply(&value, options, out);
        }
        Ok((false, err)) => error_reply(&err, invocation.name, &control, out),
        Err(err) => write::error(
            out,
            &format!(
                "ERR Error running script {}, {}",
                String::from_utf8_lossy(invocation.name),
                one_line(&err.to_string(), 100)
            ),
        ),
    }
    Ok(())
}

/// Checks the clock and `SCRIPT KILL` every [`HOOK_INSTRUCTIONS`], and lets the core's other
/// threads run.
fn set_hook(lua: &Lua, control: Arc<RunControl>, scripts: Arc<Scripts>) {
    let triggers = HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS);
    let hook = move |lua: &Lua, _: &mlua::debug::Debug| {
        scripts.tick(&control);
        if control.killed.load(Ordering::Acquire) {
            // From now on every line fails, so that a `pcall` cannot keep the script alive.
            let control = Arc::clone(&control);
            let _ = lua.set_hook(HookTriggers::EVERY_LINE, move |_, _| {
                let _ = &control;
                Err(mlua::Error::runtime(
                    "Script killed by user with SCRIPT KILL...",
                ))
            });
            return Err(mlua::Error::runtime(
                "Script killed by user with SCRIPT KILL...",
            ));
        }
        // The core's loop polls the network and runs other requests meanwhile (they may find
        // this script busy).
        if tamer_runtime::thread::in_user_thread() {
            tamer_runtime::thread::yield_now();
        }
        Ok(mlua::VmState::Continue)
    };
    // Setting a hook fails only on a closed state.
    let _ = lua.set_hook(triggers, hook);
}

/// `text` on one line, at most `max_chars` characters.
fn one_line(text: &str, max_chars: usize) -> String {
    text.chars()
        .take(max_chars)
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect()
}

/// The reply of a script that raised `err` (the message handler's table).
fn error_reply(err: &Value, sha: &[u8], control: &RunControl, out: &mut Vec<u8>) {
    let sha = String::from_utf8_lossy(sha);
    let Value::Table(t) = err else {
        let text = err.to_string().unwrap_or_default();
        return write::error(
            out,
            &format!("ERR Error running script {sha}, {}", one_line(&text, 100)),
        );
    };
    let field = |name: &str| match t.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(s.to_string_lossy()),
        Ok(Value::Integer(n)) => Some(n.to_string()),
        Ok(Value::Number(x)) => Some((x as i64).to_string()),
        _ => None,
    };
    let text = if control.killed.load(Ordering::Acquire) {
        Some("ERR Script killed by user with SCRIPT KILL...".to_string())
    } else {
        field("err")
    };
    let Some(text) = text else {
        return write::error(
            out,
            &format!("ERR Error running script {sha}, the error has no 'err' string"),
        );
    };
    let mut line = one_line(&text, usize::MAX);
    if let (Some(source), Some(at)) = (field("source"), field("line")) {
        line.push_str(&format!(" script: {sha}, on {source}:{at}."));
    }
    write::error(out, &line);
}
