//! The gate every request passes before a handler runs (Redis's `processCommand`): one pure
//! function of the request's arguments, the table, and a [`Snapshot`] of the client and the
//! server, tested rule by rule below. In Redis's order:
//!
//! 1. A blocked client's next request waits (its connection holds it until the blocked
//!    command replies).
//! 2. The command is looked up: an unknown command, or an unknown subcommand of a
//!    container, is refused with Redis's text.
//! 3. Its arity (a subcommand's own) is checked.
//! 4. A client that has not authenticated may run only the `no_auth` commands.
//! 5. A `no_multi` command is refused inside `MULTI`.
//! 6. A restricted ACL user may run only what one of its selectors allows whole: the
//!    command (or one of its first arguments), every key its key specs find (read or
//!    written as their flags say), every channel it publishes or subscribes to
//!    (`super::permissions::check`).
//! 7. While the store's device is full, a `denyoom` command is refused with `-OOM` (and
//!    inside `MULTI` every command but the ones that end it, as Redis refuses them over
//!    `maxmemory`).
//! 8. A RESP2 client that subscribes to anything may run only the `subscribed_context`
//!    commands.
//! 9. While the store loads, only the `loading` commands run.
//! 10. While a script is busy, only the `allow_busy` commands run.
//! 11. A `MONITOR` client may not run a command that reads or writes keys (Redis's rule for
//!     replicas, which monitors are to it).
//! 12. While `CLIENT PAUSE` is in force, a command it covers is postponed (the client waits,
//!     its request kept, until the pause ends): in `ALL` mode every command, in `WRITE`
//!     mode those that write or may replicate (Redis's `may-replicate`: `PUBLISH`, scripts,
//!     ...) and an `EXEC` whose queue holds one. Queueing is postponed too, as Redis's check
//!     comes before it.
//! 13. Inside `MULTI`, every command but the ones that run in it is queued.
//!
//! A refusal inside `MULTI` makes the transaction fail at `EXEC` (`EXECABORT`), as Redis's
//! `flagTransaction`; a refused `EXEC` discards it and says why. Cluster slots will be a rule
//! between 6 and 7.
//! Admission's `-BUSY` is decided earlier, by the network as a request arrives
//! (`crate::net::admission`).

use super::spec::{Command, Flags, Run, SessionOp, TamerFlags};
use super::table;
pub use crate::keyspace::pause::PauseMode;
use crate::resp::write;

/// What the gate knows of the client and the server when a request arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot<'a> {
    /// The client passed `AUTH` (or no password is set).
    pub authenticated: bool,
    /// The client's ACL user, when it may not run everything (`None`: nothing to check).
    pub user: Option<&'a crate::acl::User>,
    /// The client is inside `MULTI`.
    pub in_multi: bool,
    /// The client waits in a blocking command.
    pub blocked: bool,
    /// The store is loading (recovering) while the server serves.
    pub loading: bool,
    /// The store's device refused a write for want of space, and no write has succeeded
    /// since.
    pub out_of_space: bool,
    /// A script (`EVAL`) or a function (`FCALL`) has run past `busy-reply-threshold` and
    /// not ended.
    pub script_busy: Option<BusyScript>,
    /// The client is in RESP2's subscribed context (it subscribes to something).
    pub pubsub_context: bool,
    /// The client is in `MONITOR` mode (Redis then treats it as a replica).
    pub monitor: bool,
    /// The `CLIENT PAUSE` in force, if any.
    pub paused: Option<PauseMode>,
    /// The client's `MULTI` queue holds a command that writes or may replicate.
    pub multi_writes: bool,
}

/// What runs past `busy-reply-threshold`: the refusal names the command that stops it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyScript {
    /// `EVAL` and friends: `SCRIPT KILL`.
    Eval,
    /// `FCALL` and `FCALL_RO`: `FUNCTION KILL`.
    Function,
}

/// Redis's `-BUSY` text while `busy` runs (without the leading `-`).
pub fn busy_error(busy: BusyScript) -> &'static str {
    match busy {
        BusyScript::Eval => {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        }
        BusyScript::Function => {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        }
    }
}

/// What happens to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Run it now.
    Run(&'static Command),
    /// Queue it (inside `MULTI`: the reply is `QUEUED`).
    Queue(&'static Command),
    /// Keep it until the client's blocked command replies.
    Wait,
    /// Keep it until the `CLIENT PAUSE` in force ends (then it passes the gate again).
    Postpone(&'static Command),
    /// Refuse it with [`Refusal::write`]'s error.
    Refuse(Refusal),
}

/// Why a request is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No such command.
    UnknownCommand,
    /// No such subcommand of this container.
    UnknownSubcommand(&'static Command),
    /// The command (or subcommand) takes another number of arguments.
    Arity(&'static Command),
    /// The client must authenticate first.
    NoAuth(&'static Command),
    /// The command cannot run inside `MULTI`.
    NoMulti(&'static Command),
    /// The device is full and the command may take more of it.
    OutOfSpace(&'static Command),
    /// The store is loading and the command needs it.
    Loading(&'static Command),
    /// A script is busy and the command is not one that may run meanwhile.
    Busy(&'static Command, BusyScript),
    /// A RESP2 client that subscribes may run only the (un)subscribe commands, `PING`,
    /// `QUIT` and `RESET`.
    PubsubContext(&'static Command),
    /// A `MONITOR` client may not run a command that reads or writes keys.
    Monitor(&'static Command),
    /// The client's ACL user may not run it (on these keys or channels).
    NoPerm(&'static Command, crate::acl::Denied),
}

pub use super::reply::OUT_OF_SPACE;

/// The gate (see the module docs): `args[0]` is the command's name.
pub fn decide(args: &[&[u8]], s: Snapshot<'_>) -> Verdict {
    assert!(!args.is_empty(), "a request has a name");
    if s.blocked {
        return Verdict::Wait;
    }
    let command = match find(args) {
        Ok(command) => command,
        Err(refusal) => return Verdict::Refuse(refusal),
    };
    if !command.arity_fits(args.len()) {
        return Verdict::Refuse(Refusal::Arity(command));
    }
    if !s.authenticated && !command.flags.contains(Flags::NO_AUTH) {
        return Verdict::Refuse(Refusal::NoAuth(command));
    }
    if s.in_multi && command.flags.contains(Flags::NO_MULTI) {
        return Verdict::Refuse(Refusal::NoMulti(command));
    }
    if let Some(denied) = s
        .user
        .and_then(|u| super::permissions::check(u, command, args).err())
    {
        return Verdict::Refuse(Refusal::NoPerm(command, denied));
    }
    // Redis lets `EXEC`, `DISCARD`, `QUIT` and `RESET` end a transaction over `maxmemory`.
    let ends_multi = command.tamer.contains(TamerFlags::TRANSACTION_BOUNDARY)
        && !matches!(command.run, Run::Session(SessionOp::Multi));
    let takes_space = command.flags.contains(Flags::DENYOOM) || (s.in_multi && !ends_multi);
    if s.out_of_space && takes_space {
        return Verdict::Refuse(Refusal::OutOfSpace(command));
    }
    if s.pubsub_context && !command.tamer.contains(TamerFlags::SUBSCRIBED_CONTEXT) {
        return Verdict::Refuse(Refusal::PubsubContext(command));
    }
    if s.loading && !command.flags.contains(Flags::LOADING) {
        return Verdict::Refuse(Refusal::Loading(command));
    }
    if let Some(busy) = s
        .script_busy
        .filter(|_| !command.flags.contains(Flags::ALLOW_BUSY))
    {
        return Verdict::Refuse(Refusal::Busy(command, busy));
    }
    let keyspace = writes_or_replicates(command) || command.flags.contains(Flags::READONLY);
    if s.monitor && keyspace {
        return Verdict::Refuse(Refusal::Monitor(command));
    }
    if s.paused
        .is_some_and(|mode| paused_for(command, mode, s.multi_writes))
    {
        return Verdict::Postpone(command);
    }
    if s.in_multi && !command.tamer.contains(TamerFlags::RUNS_IN_MULTI) {
        return Verdict::Queue(command);
    }
    Verdict::Run(command)
}

/// Whether a pause in `mode` holds `command` back (`multi_writes`: the client's queue holds
/// a command that writes or may replicate).
fn paused_for(command: &Command, mode: PauseMode, multi_writes: bool) -> bool {
    let exec = matches!(command.run, Run::Session(SessionOp::Exec));
    mode == PauseMode::All || writes_or_replicates(command) || (exec && multi_writes)
}

/// A command Redis's `CLIENT PAUSE WRITE` holds back: `write` or `may-replicate`.
pub fn writes_or_replicates(command: &Command) -> bool {
    command.flags.contains(Flags::WRITE)
        || command.flags.contains(Flags::MAY_REPLICATE)
        || command.tamer.contains(TamerFlags::MAY_REPLICATE)
}

/// The command or subcommand `args` names (Redis's `lookupCommand`: a container sent alone is
/// the container itself).
fn find(args: &[&[u8]]) -> Result<&'static Command, Refusal> {
    let command = table::lookup(args[0]).ok_or(Refusal::UnknownCommand)?;
    if command.subcommands.is_empty() || args.len() < 2 {
        return Ok(command);
    }
    command
        .subcommand(args[1])
        .ok_or(Refusal::UnknownSubcommand(command))
}

/// Most bytes of the arguments Redis quotes in an unknown command's error.
const QUOTED_BYTES_MAX: usize = 128;

impl Refusal {
    /// The command refused, when the table has it.
    pub fn command(self) -> Option<&'static Command> {
        match self {
            Refusal::UnknownCommand | Refusal::UnknownSubcommand(_) => None,
            Refusal::Arity(c)
            | Refusal::NoAuth(c)
            | Refusal::NoMulti(c)
            | Refusal::OutOfSpace(c)
            | Refusal::Loading(c)
            | Refusal::Busy(c, _)
            | Refusal::Monitor(c)
            | Refusal::NoPerm(c, _)
            | Refusal::PubsubContext(c) => Some(c),
        }
    }

    /// Whether the refusal discards the client's transaction: a refused `EXEC` (Redis's
    /// `execCommandAbort`); any other refusal inside `MULTI` makes `EXEC` fail.
    pub fn discards_multi(self) -> bool {
        self.command()
            .is_some_and(|c| matches!(c.run, Run::Session(SessionOp::Exec)))
    }

    /// Writes the refusal's error reply for the request `args`, as Redis 7.0 words it.
    pub fn write(self, args: &[&[u8]], out: &mut Vec<u8>) {
        let text = self.text(args);
        if self.discards_multi() {
            let reason = text.strip_prefix("ERR ").unwrap_or(&text);
            write::error(
                out,
                &format!("EXECABORT Transaction discarded because of: {reason}"),
            );
        } else {
            write::error(out, &text);
        }
    }

    fn text(self, args: &[&[u8]]) -> String {
        match self {
            Refusal::UnknownCommand => unknown_command_text(args),
            Refusal::UnknownSubcommand(container) => {
                let sub = &args[1][..args[1].len().min(QUOTED_BYTES_MAX)];
                format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    String::from_utf8_lossy(sub),
                    container.name.to_ascii_uppercase()
                )
            }
            Refusal::Arity(command) => format!(
                "ERR wrong number of arguments for '{}' command",
                command.name
            ),
            Refusal::NoAuth(_) => "NOAUTH Authentication required.".to_string(),
            Refusal::NoMulti(_) => "ERR Command not allowed inside a transaction".to_string(),
            Refusal::OutOfSpace(_) => OUT_OF_SPACE.to_string(),
            Refusal::Loading(_) => "LOADING Redis is loading the dataset in memory".to_string(),
            Refusal::Busy(_, busy) => busy_error(busy).to_string(),
            Refusal::Monitor(_) => "ERR Replica can't interact with the keyspace".to_string(),
            Refusal::NoPerm(command, denied) => denied.noperm(command.name),
            Refusal::PubsubContext(command) => format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
                 RESET are allowed in this context",
                command.name
            ),
        }
    }
}

/// Redis 7.0's reply to an unknown command: its name, then its arguments quoted while the
/// quoted text is under 128 bytes, each cut to what is left of them.
pub fn unknown_command_text(args: &[&[u8]]) -> String {
    let mut quoted = String::new();
    for a in &args[1..] {
        if quoted.len() >= QUOTED_BYTES_MAX {
            break;
        }
        let room = QUOTED_BYTES_MAX - quoted.len();
        quoted.push('\'');
        quoted.push_str(&String::from_utf8_lossy(&a[..a.len().min(room)]));
        quoted.push_str("' ");
    }
    format!(
        "ERR unknown command '{}', with args beginning with: {quoted}",
        String::from_utf8_lossy(args[0])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<&[u8]> {
        line.split(' ').map(str::as_bytes).collect()
    }

    fn decide_line(line: &str, s: Snapshot) -> Verdict {
        decide(&args(line), s)
    }

    fn reply(line: &str, s: Snapshot) -> String {
        let a = args(line);
        match decide(&a, s) {
            Verdict::Refuse(r) => {
                let mut out = Vec::new();
                r.write(&a, &mut out);
                String::from_utf8(out).unwrap()
            }
            other => format!("{other:?}"),
        }
    }

    const OK: Snapshot = Snapshot {
        authenticated: true,
        user: None,
        in_multi: false,
        blocked: false,
        loading: false,
        out_of_space: false,
        script_busy: None,
        pubsub_context: false,
        monitor: false,
        paused: None,
        multi_writes: false,
    };

    /// Rule 6. Catches an ACL check before authentication or `no_multi`, after the device
    /// refusal or queueing (a denied command inside `MULTI` must be refused, not queued),
    /// or one that ignores the keys.
    #[test]
    fn acl_permissions_come_after_no_multi_and_before_out_of_space() {
        let mut user = crate::acl::User::new(b"u", false);
        for rule in ["+get", "~k*"] {
            user.apply(rule.as_bytes(), false).expect("valid");
        }
        let s = Snapshot {
            user: Some(&user),
            ..OK
        };
        assert!(matches!(decide_line("get k1", s), Verdict::Run(_)));
        assert!(matches!(
            decide_line("get x", s),
            Verdict::Refuse(Refusal::NoPerm(_, crate::acl::Denied::Key(1)))
        ));
        let full_multi = Snapshot {
            in_multi: true,
            out_of_space: true,
            ..s
        };
        assert!(matches!(
            decide_line("set k v", full_multi),
            Verdict::Refuse(Refusal::NoPerm(_, crate::acl::Denied::Command))
        ));
        assert!(matches!(
            decide_line("shutdown", full_multi),
            Verdict::Refuse(Refusal::NoMulti(_))
        ));
        let anonymous = Snapshot {
            authenticated: false,
            ..s
        };
        assert!(matches!(
            decide_line("set k v", anonymous),
            Verdict::Refuse(Refusal::NoAuth(_))
        ));
    }

    /// Rule 12. Catches a `WRITE` pause that holds back reads, lets writes, `PUBLISH`,
    /// `EVAL` or an `EXEC` of writes through, or checks before the refusals (an unknown
    /// command must be refused at once); an `ALL` pause that lets anything through; a pause
    /// checked after queueing (a write queued in `MULTI` must wait).
    #[test]
    fn a_pause_postpones_what_it_covers() {
        let write = Snapshot {
            paused: Some(PauseMode::Write),
            ..OK
        };
        let postponed = |line: &str, s| matches!(decide_line(line, s), Verdict::Postpone(_));
        for line in [
            "set a b",
            "publish c m",
            "eval x 0",
            "evalsha x 0",
            "fcall f 0",
            "del a",
        ] {
            assert!(postponed(line, write), "{line}");
        }
        for line in [
            "get a",
            "eval_ro x 0",
            "ping",
            "exec",
            "client unpause",
            "info",
        ] {
            assert!(!postponed(line, write), "{line}");
        }
        let exec_of_writes = Snapshot {
            in_multi: true,
            multi_writes: true,
            ..write
        };
        assert!(postponed("exec", exec_of_writes));
        let in_multi = Snapshot {
            in_multi: true,
            ..write
        };
        assert!(postponed("set a b", in_multi));
        assert!(matches!(decide_line("get a", in_multi), Verdict::Queue(_)));
        assert!(matches!(decide_line("nosuch", write), Verdict::Refuse(_)));
        assert!(matches!(decide_line("get", write), Verdict::Refuse(_)));
        let monitor = Snapshot {
            monitor: true,
            ..write
        };
        assert!(matches!(
            decide_line("set a b", monitor),
            Verdict::Refuse(Refusal::Monitor(_))
        ));
        let all = Snapshot {
            paused: Some(PauseMode::All),
            ..OK
        };
        for line in ["get a", "ping", "client unpause", "info"] {
            assert!(postponed(line, all), "{line}");
        }
    }

    /// Rule 1. Catches a blocked client's next request run (or refused) before its blocked
    /// command replied.
    #[test]
    fn a_blocked_client_waits() {
        let blocked = Snapshot {
            blocked: true,
            ..OK
        };
        assert_eq!(decide_line("get a", blocked), Verdict::Wait);
        assert_eq!(decide_line("nosuch", blocked), Verdict::Wait);
    }

    /// Rule 2. Catches a case-sensitive lookup, a container's unknown subcommand treated as an
    /// unknown command (or run as the container), and Redis's texts changed.
    #[test]
    fn unknown_commands_and_subcommands() {
        assert!(matches!(decide_line("GeT a", OK), Verdict::Run(c) if c.name == "get"));
        assert!(
            matches!(decide_line("CONFIG GET x", OK), Verdict::Run(c) if c.name == "config|get")
        );
        assert_eq!(
            reply("foo bar", OK),
            "-ERR unknown command 'foo', with args beginning with: 'bar' \r\n"
        );
        assert_eq!(
            reply("config foo", OK),
            "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n"
        );
        // A container alone is the container: its own arity decides.
        assert_eq!(
            reply("config", OK),
            "-ERR wrong number of arguments for 'config' command\r\n"
        );
        assert!(matches!(decide_line("command", OK), Verdict::Run(c) if c.name == "command"));
    }

    /// Rule 2's text. Catches each argument cut to 128 bytes on its own instead of the quoted
    /// text as a whole (Redis stops quoting at 128 bytes).
    #[test]
    fn unknown_command_text_stops_at_128_bytes() {
        let long = "a".repeat(200);
        let line = format!("foo {long} b c");
        let a = args(&line);
        assert_eq!(
            unknown_command_text(&a),
            format!(
                "ERR unknown command 'foo', with args beginning with: '{}' ",
                "a".repeat(128)
            )
        );
        let a = args("foo x y");
        assert_eq!(
            unknown_command_text(&a),
            "ERR unknown command 'foo', with args beginning with: 'x' 'y' "
        );
    }

    /// Rule 3, for every command and subcommand of the table: one argument short, and one
    /// too many for a fixed arity. Catches an arity checked as `>=` for a fixed arity, `-n`
    /// read as exactly `n`, or a subcommand checked against its container's arity; and the
    /// blocking pops that once panicked on too few arguments.
    #[test]
    fn arity_of_every_command() {
        for command in table::all_with_subcommands() {
            let words: Vec<&str> = command.name.split('|').collect();
            let min = command.arity.unsigned_abs() as usize;
            let with = |n: usize| -> Vec<&[u8]> {
                let mut a: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
                a.resize(n.max(a.len()), b"x");
                a
            };
            if min > words.len() {
                let a = with(min - 1);
                assert_eq!(
                    decide(&a, OK),
                    Verdict::Refuse(Refusal::Arity(command)),
                    "{} with {} arguments",
                    command.name,
                    a.len()
                );
            }
            if command.arity > 0 {
                assert_eq!(
                    decide(&with(min + 1), OK),
                    Verdict::Refuse(Refusal::Arity(command)),
                    "{} with {} arguments",
                    command.name,
                    min + 1
                );
            }
            if !command.subcommands.is_empty() && min > 1 {
                continue; // a container fits only with one of its subcommands
            }
            let fits = decide(&with(min), OK);
            assert!(
                matches!(fits, Verdict::Run(c) if std::ptr::eq(c, command)),
                "{}: {fits:?}",
                command.name
            );
        }
    }

    /// Rule 4. Catches a command run before `AUTH`, or `AUTH`/`HELLO`/`QUIT`/`RESET` refused
    /// (the `no_auth` commands); the arity is checked first, as in Redis.
    #[test]
    fn authentication_first() {
        let anonymous = Snapshot {
            authenticated: false,
            ..OK
        };
        assert!(matches!(
            decide_line("get a", anonymous),
            Verdict::Refuse(Refusal::NoAuth(_))
        ));
        for line in ["auth pw", "hello 3", "quit", "reset"] {
            assert!(
                matches!(decide_line(line, anonymous), Verdict::Run(_)),
                "{line}"
            );
        }
        assert!(matches!(
            decide_line("get", anonymous),
            Verdict::Refuse(Refusal::Arity(_))
        ));
        assert_eq!(
            reply("get a", anonymous),
            "-NOAUTH Authentication required.\r\n"
        );
    }

    /// Rules 5 and 13. Catches `SHUTDOWN` queued, a command run inside `MULTI` instead of
    /// queued, or one of `EXEC`, `DISCARD`, `MULTI`, `WATCH`, `QUIT`, `RESET` queued.
    #[test]
    fn inside_multi() {
        let multi = Snapshot {
            in_multi: true,
            ..OK
        };
        assert!(matches!(
            decide_line("shutdown", multi),
            Verdict::Refuse(Refusal::NoMulti(_))
        ));
        assert!(matches!(decide_line("set a b", multi), Verdict::Queue(_)));
        for line in ["hello 3", "auth pw", "client id", "select 1", "ping"] {
            assert!(
                matches!(decide_line(line, multi), Verdict::Queue(_)),
                "{line}"
            );
        }
        for line in ["exec", "discard", "multi", "watch a", "quit", "reset"] {
            assert!(
                matches!(decide_line(line, multi), Verdict::Run(_)),
                "{line}"
            );
        }
        assert!(matches!(decide_line("shutdown", OK), Verdict::Run(_)));
    }

    /// Rule 7. Catches a `denyoom` write run on a full device, a read or a delete refused
    /// there, or (inside `MULTI`) a queued read let through where Redis refuses every
    /// command but those that end the transaction.
    #[test]
    fn a_full_device_refuses_what_takes_space() {
        let full = Snapshot {
            out_of_space: true,
            ..OK
        };
        assert!(matches!(
            decide_line("set a b", full),
            Verdict::Refuse(Refusal::OutOfSpace(_))
        ));
        assert!(matches!(
            decide_line("rpush l a", full),
            Verdict::Refuse(Refusal::OutOfSpace(_))
        ));
        for line in ["get a", "del a", "lpop l", "flushall", "ping"] {
            assert!(matches!(decide_line(line, full), Verdict::Run(_)), "{line}");
        }
        let full_multi = Snapshot {
            in_multi: true,
            ..full
        };
        assert!(matches!(
            decide_line("get a", full_multi),
            Verdict::Refuse(Refusal::OutOfSpace(_))
        ));
        for line in ["exec", "discard", "quit", "reset"] {
            assert!(
                matches!(decide_line(line, full_multi), Verdict::Run(_)),
                "{line}"
            );
        }
        assert!(reply("set a b", full).starts_with("-OOM "));
    }

    /// Rule 9. Catches a command without the `loading` flag run while the store loads (`GET`,
    /// and `PING`, which Redis refuses too), or `INFO`/`AUTH`/`SELECT` (which have it)
    /// refused.
    #[test]
    fn loading_allows_only_loading_commands() {
        let loading = Snapshot {
            loading: true,
            ..OK
        };
        assert!(matches!(
            decide_line("get a", loading),
            Verdict::Refuse(Refusal::Loading(_))
        ));
        for line in ["info", "auth pw", "select 1"] {
            assert!(
                matches!(decide_line(line, loading), Verdict::Run(_)),
                "{line}"
            );
        }
        assert!(matches!(
            decide_line("ping", loading),
            Verdict::Refuse(Refusal::Loading(_))
        ));
        assert!(reply("get a", loading).starts_with("-LOADING "));
    }

    /// Rule: RESP2's subscribed context. Catches a command Redis refuses there let through,
    /// or one it allows refused, or the refusal's text changed.
    #[test]
    fn a_subscribed_resp2_client_runs_only_pubsub_commands() {
        let subscribed = Snapshot {
            pubsub_context: true,
            ..OK
        };
        for line in ["get a", "publish c m", "pubsub numpat", "multi", "hello 3"] {
            assert!(
                matches!(
                    decide_line(line, subscribed),
                    Verdict::Refuse(Refusal::PubsubContext(_))
                ),
                "{line}"
            );
        }
        for line in [
            "subscribe c",
            "unsubscribe",
            "psubscribe p*",
            "punsubscribe",
            "ssubscribe s",
            "sunsubscribe",
            "ping",
            "quit",
            "reset",
        ] {
            assert!(
                matches!(decide_line(line, subscribed), Verdict::Run(_)),
                "{line}"
            );
        }
        assert_eq!(
            reply("config get x", subscribed),
            "-ERR Can't execute 'config|get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
             QUIT / RESET are allowed in this context\r\n"
        );
    }

    /// Rule: a busy script. Catches `-BUSY` for the commands Redis lets through (`SCRIPT
    /// KILL`, `SHUTDOWN`, `AUTH`, `MULTI` ...), or none given while a script is busy, or
    /// a `-BUSY` while none is.
    #[test]
    fn a_busy_script_refuses_what_may_not_run_meanwhile() {
        let busy = Snapshot {
            script_busy: Some(BusyScript::Eval),
            ..OK
        };
        for line in ["get a", "set a b", "eval x 0", "ping", "script load x"] {
            assert!(
                matches!(decide_line(line, busy), Verdict::Refuse(Refusal::Busy(..))),
                "{line}"
            );
            assert!(matches!(decide_line(line, OK), Verdict::Run(_)), "{line}");
        }
        assert_eq!(
            reply("get a", busy),
            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN \
             NOSAVE.\r\n"
        );
        for line in [
            "script kill",
            "shutdown nosave",
            "auth x",
            "multi",
            "discard",
            "reset",
        ] {
            assert!(matches!(decide_line(line, busy), Verdict::Run(_)), "{line}");
        }
    }

    /// Rule 11: a `MONITOR` client. Catches a key command run by a monitor (Redis refuses it
    /// as a replica's), or a command without keys refused.
    #[test]
    fn a_monitor_may_not_touch_keys() {
        let monitor = Snapshot {
            monitor: true,
            ..OK
        };
        for line in ["get a", "set a b", "del a", "function flush"] {
            assert_eq!(
                reply(line, monitor),
                "-ERR Replica can't interact with the keyspace\r\n",
                "{line}"
            );
        }
        for line in ["ping", "echo x", "client id", "reset", "quit"] {
            assert!(
                matches!(decide_line(line, monitor), Verdict::Run(_)),
                "{line}"
            );
        }
    }

    /// The rules' order. Catches a later rule decided first: an unauthenticated client's
    /// unknown command is unknown (not `NOAUTH`), a bad arity inside `MULTI` is refused (not
    /// queued), and a blocked client waits whatever it sent.
    #[test]
    fn rules_apply_in_redis_order() {
        let everything = Snapshot {
            authenticated: false,
            user: None,
            in_multi: true,
            blocked: false,
            loading: true,
            out_of_space: true,
            script_busy: Some(BusyScript::Eval),
            pubsub_context: true,
            monitor: true,
            paused: None,
            multi_writes: true,
        };
        assert_eq!(
            decide_line("nosuch", everything),
            Verdict::Refuse(Refusal::UnknownCommand)
        );
        assert!(matches!(
            decide_line("get", everything),
            Verdict::Refuse(Refusal::Arity(_))
        ));
        assert!(matches!(
            decide_line("get a", everything),
            Verdict::Refuse(Refusal::NoAuth(_))
        ));
        let authenticated = Snapshot {
            authenticated: true,
            ..everything
        };
        assert!(matches!(
            decide_line("shutdown", authenticated),
            Verdict::Refuse(Refusal::NoMulti(_))
        ));
        assert!(matches!(
            decide_line("get a", authenticated),
            Verdict::Refuse(Refusal::OutOfSpace(_))
        ));
        let room = Snapshot {
            out_of_space: false,
            ..authenticated
        };
        assert!(matches!(
            decide_line("get a", room),
            Verdict::Refuse(Refusal::PubsubContext(_))
        ));
        assert!(matches!(
            decide_line("ping", room),
            Verdict::Refuse(Refusal::Loading(_))
        ));
        let loaded = Snapshot {
            loading: false,
            ..room
        };
        assert!(matches!(
            decide_line("ping", loaded),
            Verdict::Refuse(Refusal::Busy(..))
        ));
        let idle = Snapshot {
            script_busy: None,
            ..loaded
        };
        assert!(matches!(decide_line("ping", idle), Verdict::Queue(_)));
        let blocked = Snapshot {
            blocked: true,
            ..everything
        };
        assert_eq!(decide_line("nosuch", blocked), Verdict::Wait);
    }
}
