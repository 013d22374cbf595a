//! Lua states: each made once with the sandbox (`prelude.lua`), kept in a small pool per OS
//! thread and lent to one script at a time (a script may park its user-level thread in a
//! device read; another script on the same core then takes another state), with the
//! functions it compiled.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, LuaString, StdLib, Table, Value};

use super::cache::{Script, Sha};
use super::Scripts;
use crate::commands::spec::Table as CommandTable;

/// Most idle Lua states kept per OS thread (more are made while more scripts run at once,
/// and dropped when they end).
const IDLE_STATES_MAX: usize = 4;
/// Most compiled functions a state keeps (past it, it forgets them all and compiles again).
const COMPILED_MAX: usize = 1_024;
/// Most memory one Lua state allocates: a script that needs more fails with Lua's "not
/// enough memory".
pub const LUA_MEMORY_MAX: usize = 256 << 20;

/// A Lua state with the sandbox.
pub struct Vm {
    pub(super) lua: Lua,
    /// The hidden table behind the globals (where `KEYS` and `ARGV` are set).
    pub(super) storage: Table,
    /// The primitives the prelude's `redis` library calls (`raw.call`, `raw.setresp` ...).
    pub(super) raw: Table,
    /// Calls a script under the message handler: `(true, value)` or `(false, error table)`.
    pub(super) run: Function,
    /// Runs a function library's chunk: `(true, registered)` or `(false, error table)`.
    pub(super) load_library: Function,
    /// Makes the closure FCALL runs: `bind(callback, keys, args)`.
    pub(super) bind: Function,
    compiled: HashMap<Sha, Function>,
    generation: u64,
    /// The function libraries' callbacks by function name, as of the registry's `version`.
    pub(super) functions: (u64, HashMap<String, Function>),
}

thread_local! {
    static IDLE: RefCell<Vec<Vm>> = const { RefCell::new(Vec::new()) };
}

/// A Lua state lent from this thread's pool (or made), back in the pool when dropped.
pub struct Lent(Option<Vm>);

impl std::ops::Deref for Lent {
    type Target = Vm;
    fn deref(&self) -> &Vm {
        self.0.as_ref().expect("lent until dropped")
    }
}

impl std::ops::DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut Vm {
        self.0.as_mut().expect("lent until dropped")
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(vm) = self.0.take() else { return };
        IDLE.with(|idle| {
            let mut idle = idle.borrow_mut();
            if idle.len() < IDLE_STATES_MAX {
                idle.push(vm);
            }
        });
    }
}

/// [`lend`], or `None` with the reply written (Lua could not start: its allocator refused).
pub fn lend_or_reply(
    scripts: &Arc<Scripts>,
    table: &'static CommandTable,
    out: &mut Vec<u8>,
) -> Option<Lent> {
    match lend(scripts, table) {
        Ok(vm) => Some(vm),
        Err(err) => {
            crate::resp::write::error(out, &format!("ERR could not start Lua: {err}"));
            None
        }
    }
}

/// A Lua state for one script, from this thread's pool or new.
pub fn lend(scripts: &Arc<Scripts>, table: &'static CommandTable) -> mlua::Result<Lent> {
    let vm = IDLE.with(|idle| idle.borrow_mut().pop());
    let mut vm = match vm {
        Some(vm) => vm,
        None => Vm::new(scripts, table)?,
    };
    let generation = scripts.generation();
    if vm.generation != generation {
        vm.compiled.clear();
        vm.generation = generation;
    }
    Ok(Lent(Some(vm)))
}

impl Vm {
    fn new(scripts: &Arc<Scripts>, table: &'static CommandTable) -> mlua::Result<Self> {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG;
        // SAFETY: the debug library is the unsafe part: the prelude keeps `debug.getinfo` for
        // its message handler and removes `debug` before any script runs, so scripts never
        // reach it; every chunk is loaded as text (the prelude refuses bytecode), and no C
        // module can be loaded (no `package`).
        let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::new()) };
        lua.set_memory_limit(LUA_MEMORY_MAX)?;
        let raw = primitives(&lua, scripts, table)?;
        let prelude = lua
            .load(include_str!("prelude.lua"))
            .set_name("=tamer")
            .set_mode(ChunkMode::Text)
            .into_function()?;
        let (globals, storage, run, load_library, bind): (
            Table,
            Table,
            Function,
            Function,
            Function,
        ) = prelude.call(raw.clone())?;
        lua.set_globals(globals)?;
        Ok(Self {
            lua,
            storage,
            raw,
            run,
            load_library,
            bind,
            compiled: HashMap::new(),
            generation: scripts.generation(),
            // No registry has version 0: the first FCALL loads the libraries.
            functions: (0, HashMap::new()),
        })
    }

    /// The compiled function of `script` (compiled now if this state has not yet): `Err` is
    /// Lua's message.
    pub fn function(&mut self, script: &Script) -> Result<Function, String> {
        if let Some(f) = self.compiled.get(&script.sha) {
            return Ok(f.clone());
        }
        let f = compile(&self.lua, &script.body[script.code_at..])?;
        if self.compiled.len() >= COMPILED_MAX {
            self.compiled.clear();
        }
        self.compiled.insert(script.sha, f.clone());
        Ok(f)
    }
}

/// Compiles `code` as a script's main chunk (`@user_script`, text only): `Err` is Lua's
/// message on one line.
pub fn compile(lua: &Lua, code: &[u8]) -> Result<Function, String> {
    compile_named(lua, code, "@user_script")
}

/// [`compile`] under the chunk name `name` (`@user_function` for a library).
pub fn compile_named(lua: &Lua, code: &[u8], name: &str) -> Result<Function, String> {
    lua.load(code)
        .set_name(name)
        .set_mode(ChunkMode::Text)
        .into_function()
        .map_err(|err| {
            let text = match err {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            };
            text.trim_end().replace(['\r', '\n'], " ")
        })
}

/// The primitives every run shares (`raw.call` and `raw.setresp` are set per run).
fn primitives(
    lua: &Lua,
    scripts: &Arc<Scripts>,
    table: &'static CommandTable,
) -> mlua::Result<Table> {
    let raw = lua.create_table()?;
    let s = Arc::clone(scripts);
    raw.set(
        "lrand48",
        lua.create_function(move |_, ()| Ok(s.lrand48()))?,
    )?;
    let s = Arc::clone(scripts);
    raw.set(
        "srand48",
        lua.create_function(move |_, seed: f64| {
            s.srand48(seed as i64 as i32);
            Ok(())
        })?,
    )?;
    raw.set(
        "sha1hex",
        lua.create_function(|lua, text: LuaString| {
            lua.create_string(super::cache::sha1_hex(&text.as_bytes()))
        })?,
    )?;
    raw.set(
        "log",
        lua.create_function(|_, (level, text): (u8, LuaString)| {
            // Redis's default log level (notice) shows NOTICE and WARNING.
            if level >= 2 {
                eprintln!("tamer: script: {}", text.to_string_lossy());
            }
            Ok(())
        })?,
    )?;
    raw.set(
        "command_exists",
        lua.create_function(move |_, name: LuaString| {
            Ok(table.lookup(&name.as_bytes()).is_some())
        })?,
    )?;
    raw.set(
        "cwrap",
        lua.create_function(|lua, f: Function| {
            // SAFETY: `call_upvalue` is a Lua C function that only calls its upvalue with its
            // arguments; `exec_raw` runs the push protected and takes the closure from the
            // stack (the function argument, popped, becomes its upvalue).
            unsafe {
                lua.exec_raw::<Function>(f, |state| {
                    mlua::ffi::lua_pushcclosure(state, call_upvalue, 1);
                })
            }
        })?,
    )?;
    raw.set(
        "bit",
        lua.create_function(|_, (name, args): (LuaString, mlua::Variadic<f64>)| {
            Ok(f64::from(bit_op(&name.to_str()?, &args)))
        })?,
    )?;
    raw.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, f64)| Ok(to_hex(tobit(x), n as i64)))?,
    )?;
    cjson_primitives(lua, &raw)?;
    msgpack_primitives(lua, &raw)?;
    struct_primitives(lua, &raw)?;
    raw.set("version", crate::REDIS_VERSION)?;
    raw.set("version_num", version_num(crate::REDIS_VERSION))?;
    Ok(raw)
}

/// `raw.cjson_encode(value, precision, max_depth, convert, ratio, safe, invalid)` and
/// `raw.cjson_decode(text, max_depth, invalid)`: `true` and the result, or `false` and the
/// error's message (the sandbox raises it at the script's line); `raw.null`.
fn cjson_primitives(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    type EncodeArgs = (Value, usize, usize, bool, i64, i64, u8);
    raw.set(
        "cjson_encode",
        lua.create_function(|lua, args: EncodeArgs| {
            let (value, precision, max_depth, sparse_convert, sparse_ratio, sparse_safe, invalid) =
                args;
            let options = super::cjson::EncodeOptions {
                precision,
                max_depth,
                sparse_convert,
                sparse_ratio,
                sparse_safe,
                invalid_numbers: invalid,
            };
            Ok(match super::cjson::encode(&value, options) {
                Ok(text) => (true, Value::String(lua.create_string(&text)?)),
                Err(e) => (false, Value::String(lua.create_string(&e)?)),
            })
        })?,
    )?;
    raw.set(
        "cjson_decode",
        lua.create_function(
            |lua, (text, max_depth, invalid): (LuaString, usize, bool)| {
                let options = super::cjson::DecodeOptions {
                    max_depth,
                    invalid_numbers: invalid,
                };
                Ok(match super::cjson::decode(lua, &text.as_bytes(), options) {
                    Ok(value) => (true, value),
                    Err(e) => (false, Value::String(lua.create_string(&e)?)),
                })
            },
        )?,
    )?;
    raw.set("null", super::cjson::null())
}

/// `raw.msgpack_pack(...)` and `raw.msgpack_unpack(s, limit, offset)`: `true`, the next
/// offset (nil after unpacking everything) and the values in a table with its count `n`, or
/// `false`, the error's message and whether it names the script's line.
fn msgpack_primitives(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    raw.set(
        "msgpack_pack",
        lua.create_function(|lua, values: mlua::Variadic<Value>| {
            let bytes = super::cmsgpack::pack(&values).map_err(mlua::Error::runtime)?;
            lua.create_string(&bytes)
        })?,
    )?;
    raw.set(
        "msgpack_unpack",
        lua.create_function(|lua, (s, limit, offset): (LuaString, i64, i64)| {
            let bytes = s.as_bytes();
            Ok(match super::cmsgpack::unpack(lua, &bytes, limit, offset) {
                Ok(u) => {
                    let values = lua.create_table()?;
                    values.raw_set("n", u.values.len())?;
                    for (i, v) in u.values.into_iter().enumerate() {
                        values.raw_set(i + 1, v)?;
                    }
                    let next = u
                        .next_offset
                        .map_or(Value::Nil, |o| Value::Number(o as f64));
                    (true, next, Value::Table(values))
                }
                Err(e) => {
                    let message = Value::String(lua.create_string(&e.message)?);
                    (false, message, Value::Boolean(e.positioned))
                }
            })
        })?,
    )
}

/// `raw.struct_pack(fmt, n, ...)` (the `n` values after the format), `raw.struct_unpack(fmt,
/// data, init)` and `raw.struct_size(fmt)`: `true` and the result (unpack's values in a table
/// with its count `n`), or `false` and the error's text.
fn struct_primitives(lua: &Lua, raw: &Table) -> mlua::Result<()> {
    use super::structlib;
    let failed = |lua: &Lua, e: String| -> mlua::Result<(bool, Value)> {
        Ok((false, Value::String(lua.create_string(&e)?)))
    };
    raw.set(
        "struct_pack",
        lua.create_function(
            move |lua, (fmt, n, rest): (LuaString, usize, mlua::Variadic<Value>)| {
                let mut args: Vec<Value> = rest.into_iter().collect();
                args.truncate(n);
                match structlib::pack(&fmt.as_bytes(), &args) {
                    Ok(bytes) => Ok((true, Value::String(lua.create_string(&bytes)?))),
                    Err(e) => failed(lua, e),
                }
            },
        )?,
    )?;
    raw.set(
        "struct_unpack",
        lua.create_function(move |lua, (fmt, data, init): (LuaString, LuaString, i64)| {
            match structlib::unpack(lua, &fmt.as_bytes(), &data.as_bytes(), init) {
                Ok(values) => {
                    let t = lua.create_table()?;
                    t.raw_set("n", values.len())?;
                    for (i, v) in values.into_iter().enumerate() {
                        t.raw_set(i + 1, v)?;
                    }
                    Ok((true, Value::Table(t)))
                }
                Err(e) => failed(lua, e),
            }
        })?,
    )?;
    raw.set(
        "struct_size",
        lua.create_function(
            move |lua, fmt: LuaString| match structlib::size(&fmt.as_bytes()) {
                Ok(n) => Ok((true, Value::Number(n as f64))),
                Err(e) => failed(lua, e),
            },
        )?,
    )
}

/// A C function calling its upvalue (a Lua function) with its arguments and returning its
/// results: Redis's library functions are C functions, so the script's frame stays on the
/// stack through `return redis.call(...)` (a tail call of a Lua function would remove it).
///
/// # Safety
/// Called by Lua only, as a C closure whose first upvalue is a function. An error raised by
/// the call unwinds through this frame, which holds nothing to drop.
unsafe extern "C-unwind" fn call_upvalue(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: `state` is the running state (see the function's contract).
    unsafe {
        let nargs = mlua::ffi::lua_gettop(state);
        mlua::ffi::lua_pushvalue(state, mlua::ffi::lua_upvalueindex(1));
        mlua::ffi::lua_insert(state, 1);
        mlua::ffi::lua_call(state, nargs, mlua::ffi::LUA_MULTRET);
        mlua::ffi::lua_gettop(state)
    }
}

/// LuaBitOp's conversion of a number to 32 bits: rounded to an integer, modulo 2^32, as a
/// signed value (the low word of the number plus 2^52 + 2^51).
fn tobit(x: f64) -> i32 {
    ((x + 6_755_399_441_055_744.0).to_bits() as u32) as i32
}

/// The bit library's operation `name` on `args` (checked numbers, as many as it takes).
fn bit_op(name: &str, args: &[f64]) -> i32 {
    let x = args.first().map_or(0, |&x| tobit(x));
    let n = args.get(1).map_or(0, |&n| tobit(n) as u32 & 31);
    let fold = |f: fn(i32, i32) -> i32| args.iter().skip(1).fold(x, |acc, &y| f(acc, tobit(y)));
    match name {
        "tobit" => x,
        "bnot" => !x,
        "bswap" => x.swap_bytes(),
        "band" => fold(|a, b| a & b),
        "bor" => fold(|a, b| a | b),
        "bxor" => fold(|a, b| a ^ b),
        "lshift" => ((x as u32) << n) as i32,
        "rshift" => ((x as u32) >> n) as i32,
        "arshift" => x >> n,
        "rol" => (x as u32).rotate_left(n) as i32,
        "ror" => (x as u32).rotate_right(n) as i32,
        _ => unreachable!("the prelude names only the library's operations"),
    }
}

/// `bit.tohex(x, n)`: the last `n` hex digits of `x` (upper case for a negative `n`; at
/// most 8).
fn to_hex(x: i32, n: i64) -> String {
    let upper = n < 0;
    let digits = n.unsigned_abs().min(8) as usize;
    let text = if upper {
        format!("{:08X}", x as u32)
    } else {
        format!("{:08x}", x as u32)
    };
    text[8 - digits..].to_string()
}

/// `0x00MMmmPP` of `"M.m.P"`.
fn version_num(version: &str) -> u32 {
    version
        .split('.')
        .take(3)
        .fold(0, |n, part| (n << 8) | part.parse::<u32>().unwrap_or(0))
}
