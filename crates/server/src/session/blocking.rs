//! The blocking pops outside `MULTI` (the commands the table flags `blocking`): one attempt;
//! when it found nothing, the session blocks on the keys it pops from, holding no thread,
//! until a write to one of them makes it first in line to try again (the network's table of
//! blocked clients, `crate::keyspace::blocked`), or its timeout passes.

use tamer_store::DbHandle;

use super::state::{Blocked, Session};
use crate::commands::spec::{Command, KeyFlags};
use crate::keyspace::dbmap::DbMap;
use crate::keyspace::store_key;
use crate::resp::{write, Protocol};

/// Whether `reply` is what a blocking pop replies when it found nothing: a null (array or
/// bulk, as its protocol writes them).
fn found_nothing(reply: &[u8], protocol: Protocol) -> bool {
    let (mut array, mut bulk) = (Vec::new(), Vec::new());
    write::null_array(&mut array, protocol);
    write::null(&mut bulk, protocol);
    reply == array || reply == bulk
}

impl Session {
    /// A blocking pop: one attempt; when it found nothing the session blocks
    /// (`self.blocked`) instead of replying.
    pub(super) fn blocking(
        &mut self,
        handle: &DbHandle,
        map: &DbMap,
        command: &'static Command,
        args: &[&[u8]],
        out: &mut Vec<u8>,
    ) {
        let before = out.len();
        self.one(handle, map, command, args, out);
        if !found_nothing(&out[before..], self.protocol) {
            return; // served, or an error
        }
        let empty_reply = out[before..].to_vec();
        let mut timeout_reply = Vec::new();
        write::null_array(&mut timeout_reply, self.protocol);
        out.truncate(before);
        // The attempt parsed the timeout: it is valid.
        let timeout_s = command
            .block_timeout(args)
            .and_then(|t| crate::commands::blocking_pops::parse_timeout(t).ok())
            .expect("a blocking pop that found nothing had a valid timeout");
        let deadline_ns = (timeout_s > 0.0)
            .then(|| tamer_device::now_ns().saturating_add((timeout_s * 1e9) as u64));
        // It waits on the keys it pops from (not, say, BLMOVE's destination).
        let keys = command
            .keys(args, true)
            .unwrap_or_default()
            .into_iter()
            .filter(|(_, spec)| spec.flags.contains(KeyFlags::DELETE))
            .map(|(i, _)| store_key(self.db as u32, args[i]))
            .collect();
        self.blocked = Some(Blocked {
            command,
            args: args.iter().map(|a| a.to_vec()).collect(),
            keys,
            deadline_ns,
            empty_reply,
            timeout_reply,
            postponed: false,
        });
    }

    /// `CLIENT PAUSE` holds `command` back: the session waits, as a blocked one, until the
    /// pause's end (`CLIENT UNPAUSE` releases it sooner); its request is kept to run then.
    pub(super) fn postpone(&mut self, command: &'static Command) {
        let now_ns = tamer_device::now_ns();
        let end_ns = self.stats.pause.current(now_ns).map_or(now_ns, |p| p.1);
        self.blocked = Some(Blocked {
            command,
            args: Vec::new(),
            keys: Vec::new(),
            deadline_ns: Some(end_ns),
            empty_reply: Vec::new(),
            timeout_reply: Vec::new(),
            postponed: true,
        });
    }

    /// Runs the blocked command again (its client came first in line after a write): it
    /// replies, or stays blocked when it found nothing again.
    pub fn retry_blocked(&mut self, handle: &DbHandle, map: &DbMap, out: &mut Vec<u8>) {
        let Some(b) = self.blocked.take() else {
            return;
        };
        let refs: Vec<&[u8]> = b.args.iter().map(Vec::as_slice).collect();
        let before = out.len();
        self.one(handle, map, b.command, &refs, out);
        if out[before..] == b.empty_reply[..] {
            out.truncate(before);
            self.blocked = Some(b);
        }
    }

    /// `CLIENT UNBLOCK ... ERROR` took the blocked command out: Redis's error.
    pub fn unblock_with_error(&mut self, out: &mut Vec<u8>) {
        if self.blocked.take().is_some() {
            write::error(out, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
        }
    }

    /// The blocked command's timeout passed: its reply.
    pub fn time_out(&mut self, out: &mut Vec<u8>) {
        if let Some(b) = self.blocked.take() {
            out.extend_from_slice(&b.timeout_reply);
        }
    }
}
