//! `CLIENT LIST`, `INFO`, `KILL` and `NO-EVICT` on the server's client registry
//! (`crate::stats::clients`), with Redis 7.0's replies and error texts.

use super::state::Session;
use crate::keyspace::pause::PauseMode;
use crate::resp::{parse_i64, write};
use crate::stats::clients::KillFilter;

impl Session {
    /// `CLIENT LIST [TYPE type] [ID id ...]`.
    pub(super) fn client_list(&self, args: &[&[u8]], out: &mut Vec<u8>) {
        let mut ids: Option<Vec<u64>> = None;
        let mut normal = true;
        match args.get(2).map(|a| a.to_ascii_lowercase()).as_deref() {
            None => {}
            Some(b"type") if args.len() == 4 => match &args[3].to_ascii_lowercase()[..] {
                b"normal" => {}
                b"master" | b"replica" | b"slave" | b"pubsub" => normal = false,
                _ => {
                    let t = String::from_utf8_lossy(args[3]);
                    return write::error(out, &format!("ERR Unknown client type '{t}'"));
                }
            },
            Some(b"id") if args.len() >= 4 => {
                let mut list = Vec::with_capacity(args.len() - 3);
                for a in &args[3..] {
                    match parse_i64(a) {
                        Some(n) if n > 0 => list.push(n as u64),
                        _ => return write::error(out, "ERR Invalid client ID"),
                    }
                }
                ids = Some(list);
            }
            Some(_) => return write::error(out, "ERR syntax error"),
        }
        let mut text = String::new();
        for entry in self.stats.clients.list() {
            if normal && ids.as_ref().is_none_or(|ids| ids.contains(&entry.id)) {
                text.push_str(&entry.line());
                text.push('\n');
            }
        }
        write::verbatim(out, b"txt", text.as_bytes(), self.protocol);
    }

    /// `CLIENT INFO`: this connection's line of `CLIENT LIST`.
    pub(super) fn client_info(&self, out: &mut Vec<u8>) {
        let line = self.stats.clients.get(self.id).map(|e| e.line() + "\n");
        write::verbatim(
            out,
            b"txt",
            line.unwrap_or_default().as_bytes(),
            self.protocol,
        );
    }

    /// `CLIENT NO-EVICT on|off`.
    pub(super) fn client_no_evict(&mut self, on: &[u8], out: &mut Vec<u8>) {
        match &on.to_ascii_lowercase()[..] {
            b"on" | b"off" => {
                self.no_evict = on.eq_ignore_ascii_case(b"on");
                write::simple(out, "OK");
            }
            _ => write::error(out, "ERR syntax error"),
        }
    }

    /// `CLIENT REPLY ON|OFF|SKIP`: only `ON` replies (`+OK`); `OFF` silences the replies
    /// from here on, `SKIP` the next command's (unless they are off already).
    pub(super) fn client_reply(&mut self, mode: &[u8], out: &mut Vec<u8>) {
        match &mode.to_ascii_lowercase()[..] {
            b"on" => {
                self.replies.off = false;
                self.replies.skip = false;
                write::simple(out, "OK");
            }
            b"off" => self.replies.off = true,
            b"skip" => self.replies.skip_next |= !self.replies.off,
            _ => write::error(out, "ERR syntax error"),
        }
    }

    /// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`: 1 when that client waited in a blocking
    /// command (it then gets its timeout reply, or Redis's error), else 0.
    pub(super) fn client_unblock(&self, args: &[&[u8]], out: &mut Vec<u8>) {
        if args.len() > 4 {
            // Redis's CLIENT parses UNBLOCK's arity itself (the table says at least 3).
            let sub = String::from_utf8_lossy(args[1]);
            return write::error(
                out,
                &format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."),
            );
        }
        let Some(id) = parse_i64(args[2]) else {
            return write::error(out, "ERR value is not an integer or out of range");
        };
        let error = match args.get(3).map(|a| a.to_ascii_lowercase()).as_deref() {
            None | Some(b"timeout") => false,
            Some(b"error") => true,
            Some(_) => {
                return write::error(out, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
            }
        };
        // Connection ids are their generations (`u32`); any other id names no client.
        let unblocked = u32::try_from(id).is_ok_and(|id| self.watches.blocks.unblock(id, error));
        write::integer(out, i64::from(unblocked));
    }

    /// `CLIENT PAUSE timeout-ms [WRITE|ALL]`: Redis's checks in its order (arity, mode,
    /// timeout), then the pause, combined with one in force (`crate::keyspace::pause`).
    pub(super) fn client_pause(&self, args: &[&[u8]], out: &mut Vec<u8>) {
        if args.len() > 4 {
            // Redis's CLIENT parses PAUSE's arity itself (the table says at least 3).
            let sub = String::from_utf8_lossy(args[1]);
            return write::error(
                out,
                &format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."),
            );
        }
        let mode = match args.get(3).map(|a| a.to_ascii_lowercase()).as_deref() {
            None | Some(b"all") => PauseMode::All,
            Some(b"write") => PauseMode::Write,
            Some(_) => return write::error(out, "ERR CLIENT PAUSE mode must be WRITE or ALL"),
        };
        let Some(timeout_ms) = parse_i64(args[2]) else {
            return write::error(out, "ERR timeout is not an integer or out of range");
        };
        if timeout_ms < 0 {
            return write::error(out, "ERR timeout is negative");
        }
        let end_ns =
            tamer_device::now_ns().saturating_add((timeout_ms as u64).saturating_mul(1_000_000));
        self.stats.pause.pause(mode, end_ns);
        write::simple(out, "OK");
    }

    /// `CLIENT UNPAUSE`: the pause ends and the clients it held back run their requests.
    pub(super) fn client_unpause(&self, out: &mut Vec<u8>) {
        self.stats.pause.unpause();
        self.watches.blocks.release_postponed();
        write::simple(out, "OK");
    }

    /// `CLIENT KILL addr` (old form: `+OK` or an error) or `CLIENT KILL filter value ...` (the
    /// number killed); a client that killed itself closes after the reply.
    pub(super) fn client_kill(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let (stats, me) = (&self.stats, self.id);
        if args.len() == 3 {
            let filter = KillFilter {
                addr: Some(String::from_utf8_lossy(args[2]).into_owned()),
                ..KillFilter::default()
            };
            let is_me = stats
                .clients
                .get(me)
                .is_some_and(|e| Some(&e.addr) == filter.addr.as_ref());
            if stats.clients.kill(&filter, me) == 0 {
                return write::error(out, "ERR No such client");
            }
            write::simple(out, "OK");
            self.quit |= is_me;
            return;
        }
        let filter = match kill_filter(&args[2..], &stats.acl) {
            Ok(f) => f,
            Err(text) => return write::error(out, &text),
        };
        let is_me = !filter.skip_me
            && stats.clients.get(me).is_some_and(|e| {
                filter.id.is_none_or(|id| id == me)
                    && filter.addr.as_ref().is_none_or(|a| *a == e.addr)
                    && filter.laddr.as_ref().is_none_or(|a| *a == e.laddr)
                    && filter.user.as_ref().is_none_or(|u| *u == e.state().user)
                    && filter.type_matches.unwrap_or(true)
            });
        write::integer(out, stats.clients.kill(&filter, me) as i64);
        self.quit |= is_me;
    }
}

/// The filter of `CLIENT KILL`'s new form, or Redis's error text.
fn kill_filter(args: &[&[u8]], acl: &crate::acl::Acl) -> Result<KillFilter, String> {
    let mut f = KillFilter {
        skip_me: true,
        ..KillFilter::default()
    };
    if !args.len().is_multiple_of(2) {
        return Err("ERR syntax error".into());
    }
    for pair in args.chunks(2) {
        let value = String::from_utf8_lossy(pair[1]).into_owned();
        match &pair[0].to_ascii_lowercase()[..] {
            b"id" => match parse_i64(pair[1]) {
                Some(n) if n > 0 => f.id = Some(n as u64),
                _ => return Err("ERR client-id should be greater than 0".into()),
            },
            b"addr" => f.addr = Some(value),
            b"laddr" => f.laddr = Some(value),
            b"user" if acl.user(pair[1]).is_some() => f.user = Some(pair[1].to_vec()),
            b"user" => return Err(format!("ERR No such user '{value}'")),
            b"type" => match value.to_ascii_lowercase().as_str() {
                "normal" => f.type_matches = Some(true),
                "master" | "replica" | "slave" | "pubsub" => f.type_matches = Some(false),
                _ => return Err(format!("ERR Unknown client type '{value}'")),
            },
            b"skipme" => match value.to_ascii_lowercase().as_str() {
                "yes" => f.skip_me = true,
                "no" => f.skip_me = false,
                _ => return Err("ERR syntax error".into()),
            },
            _ => return Err("ERR syntax error".into()),
        }
    }
    Ok(f)
}
