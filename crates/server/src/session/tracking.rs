//! Client-side caching from the session's side: `CLIENT TRACKING`, `CLIENT CACHING`,
//! `CLIENT GETREDIR` and `CLIENT TRACKINGINFO` with Redis 7.0's checks, errors and replies,
//! and what a command's transaction is told of its caller ([`Caller`]). The table of who
//! read what, and the invalidations, are the hub's (`crate::pubsub::tracking`).

use std::sync::{Arc, Weak};

use super::state::{Session, Tracking};
use crate::pubsub::tracking::{Mode, Redirect, Target, PREFIXES_MAX};
use crate::pubsub::Caller;
use crate::resp::{parse_i64, write, Protocol};
use crate::stats::clients::ClientEntry;

/// `CLIENT TRACKING`'s options as parsed.
#[derive(Debug, Default)]
struct Options {
    mode: Mode,
    prefixes: Vec<Vec<u8>>,
}

/// Whether one of `a` and `b` starts with the other (Redis's `stringCheckPrefix`).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl Session {
    /// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT]
    /// [NOLOOP]`.
    pub(super) fn client_tracking(&mut self, args: &[&[u8]], out: &mut Vec<u8>) {
        let options = match self.tracking_options(&args[3..]) {
            Ok(options) => options,
            Err(text) => return write::error(out, &text),
        };
        match &args[2].to_ascii_lowercase()[..] {
            b"on" => {
                if let Err(text) = self.check_tracking(&options) {
                    return write::error(out, &text);
                }
                self.enable_tracking(options);
            }
            b"off" => self.tracking_off(),
            _ => return write::error(out, "ERR syntax error"),
        }
        write::simple(out, "OK");
    }

    /// Parses `CLIENT TRACKING`'s options (after `ON|OFF`), as Redis: in order, the
    /// redirect client checked as it is read.
    fn tracking_options(&self, args: &[&[u8]]) -> Result<Options, String> {
        let mut o = Options::default();
        let mut j = 0;
        // Bounded: every pass consumes one or two arguments.
        while j < args.len() {
            let more = j + 1 < args.len();
            match &args[j].to_ascii_lowercase()[..] {
                b"redirect" if more => {
                    j += 1;
                    if o.mode.redirect != 0 {
                        return Err(
                            "ERR A client can only redirect to a single other client".into()
                        );
                    }
                    let id =
                        parse_i64(args[j]).ok_or("ERR value is not an integer or out of range")?;
                    let live = u64::try_from(id)
                        .ok()
                        .and_then(|id| self.stats.clients.get(id))
                        .is_some_and(|e| !e.killed());
                    if !live {
                        return Err("ERR The client ID you want redirect to does not exist".into());
                    }
                    o.mode.redirect = id as u64;
                }
                b"bcast" => o.mode.bcast = true,
                b"optin" => o.mode.optin = true,
                b"optout" => o.mode.optout = true,
                b"noloop" => o.mode.noloop = true,
                b"prefix" if more => {
                    j += 1;
                    if o.prefixes.len() >= PREFIXES_MAX {
                        return Err(format!("ERR too many prefixes (at most {PREFIXES_MAX})"));
                    }
                    o.prefixes.push(args[j].to_vec());
                }
                _ => return Err("ERR syntax error".into()),
            }
            j += 1;
        }
        Ok(o)
    }

    /// `CLIENT TRACKING ON`'s checks of its options against each other and the mode the
    /// client tracks in, in Redis's order.
    fn check_tracking(&self, o: &Options) -> Result<(), String> {
        let m = &o.mode;
        if !m.bcast && !o.prefixes.is_empty() {
            return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
        }
        if self.tracking.is_some_and(|t| t.bcast != m.bcast) {
            return Err(
                "ERR You can't switch BCAST mode on/off before disabling tracking for \
                        this client, and then re-enabling it with a different mode."
                    .into(),
            );
        }
        if m.bcast && (m.optin || m.optout) {
            return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
        }
        if m.optin && m.optout {
            return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
        }
        let now = self.tracking.unwrap_or_default();
        if (m.optin && now.optout) || (m.optout && now.optin) {
            return Err(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for \
                        this client, and then re-enabling it with a different mode."
                    .into(),
            );
        }
        if m.bcast {
            self.check_prefixes(&o.prefixes)?;
        }
        Ok(())
    }

    /// No new prefix overlaps one the client has or another new one.
    fn check_prefixes(&self, prefixes: &[Vec<u8>]) -> Result<(), String> {
        let had = if self.tracking.is_some() {
            self.pubsub
                .tracking
                .info(self.id)
                .map(|i| i.mode.prefixes)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let show = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(old) = had.iter().find(|old| overlap(old, p)) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a \
                     single client must not overlap.",
                    show(p),
                    show(old)
                ));
            }
            if let Some(other) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes \
                     for a single client must not overlap.",
                    show(p),
                    show(other)
                ));
            }
        }
        Ok(())
    }

    /// Tracks in `o`'s mode from now on (Redis's `enableTracking`: the flags and the
    /// redirect replaced, prefixes added; `BCAST` without prefixes is every key's).
    fn enable_tracking(&mut self, o: Options) {
        let mut mode = o.mode;
        mode.prefixes = o.prefixes;
        if mode.bcast && mode.prefixes.is_empty() {
            mode.prefixes.push(Vec::new());
        }
        let redirect = (mode.redirect != 0)
            .then(|| self.stats.clients.get(mode.redirect))
            .flatten()
            .map(|e| {
                let entry: Weak<dyn Redirect> = Arc::downgrade(&e) as Weak<ClientEntry>;
                (mode.redirect, entry)
            });
        let target = Target {
            client: self.client,
            protocol: self.protocol,
            redirect,
        };
        self.tracking = Some(Tracking {
            bcast: mode.bcast,
            optin: mode.optin,
            optout: mode.optout,
            noloop: mode.noloop,
            redirect: mode.redirect,
            caching: false,
        });
        self.pubsub.tracking.enable(self.id, target, mode);
        self.update_entry();
    }

    /// Stops tracking (`OFF`, `RESET`, the connection's end).
    pub(super) fn tracking_off(&mut self) {
        if self.tracking.take().is_some() {
            self.pubsub.tracking.disable(self.id);
            self.update_entry();
        }
    }

    /// `CLIENT CACHING YES|NO`: whether the next command's reads are remembered, against
    /// the `OPTIN`/`OPTOUT` default.
    pub(super) fn client_caching(&mut self, arg: &[u8], out: &mut Vec<u8>) {
        let Some(t) = self.tracking.as_mut() else {
            return write::error(
                out,
                "ERR CLIENT CACHING can be called only when the client is in tracking mode \
                 with OPTIN or OPTOUT mode enabled",
            );
        };
        match &arg.to_ascii_lowercase()[..] {
            b"yes" if t.optin => t.caching = true,
            b"yes" => {
                return write::error(
                    out,
                    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN \
                     mode.",
                )
            }
            b"no" if t.optout => t.caching = true,
            b"no" => {
                return write::error(
                    out,
                    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT \
                     mode.",
                )
            }
            _ => return write::error(out, "ERR syntax error"),
        }
        write::simple(out, "OK");
    }

    /// `CLIENT GETREDIR`: the redirect client's ID, 0 without one, -1 when not tracking.
    pub(super) fn client_getredir(&self, out: &mut Vec<u8>) {
        write::integer(out, self.tracking.map_or(-1, |t| t.redirect as i64));
    }

    /// `CLIENT TRACKINGINFO`: a map of `flags` (a set), `redirect` and `prefixes` (sorted).
    pub(super) fn client_trackinginfo(&self, out: &mut Vec<u8>) {
        let info = self
            .tracking
            .and_then(|_| self.pubsub.tracking.info(self.id));
        let mut flags: Vec<&str> = Vec::new();
        match (&self.tracking, &info) {
            (Some(t), Some(i)) => {
                flags.push("on");
                let caching = [(t.bcast, "bcast", ""), (t.optin, "optin", "caching-yes")];
                for (on, name, cached) in
                    caching
                        .into_iter()
                        .chain([(t.optout, "optout", "caching-no")])
                {
                    if on {
                        flags.push(name);
                        if t.caching && !cached.is_empty() {
                            flags.push(cached);
                        }
                    }
                }
                if t.noloop {
                    flags.push("noloop");
                }
                if i.broken {
                    flags.push("broken_redirect");
                }
            }
            _ => flags.push("off"),
        }
        write::map(out, 3, self.protocol);
        write::bulk(out, b"flags");
        write::set(out, flags.len(), self.protocol);
        for f in &flags {
            write::bulk(out, f.as_bytes());
        }
        write::bulk(out, b"redirect");
        self.client_getredir(out);
        write::bulk(out, b"prefixes");
        let mut prefixes = info.map(|i| i.mode.prefixes).unwrap_or_default();
        prefixes.sort();
        write::array(out, prefixes.len());
        for p in &prefixes {
            write::bulk(out, p);
        }
    }

    /// What the transaction of the command about to run learns of its caller: whether its
    /// reads are remembered (tracking, not `BCAST`, and `OPTIN`/`OPTOUT` with `CLIENT
    /// CACHING` say so, as Redis's `trackingRememberKeys`).
    pub(super) fn caller(&self) -> Caller {
        // OPTIN remembers only after CACHING yes; OPTOUT all but after CACHING no.
        let cached = |t: &Tracking| {
            let allowed = if t.optin { t.caching } else { true };
            allowed && !(t.optout && t.caching)
        };
        let remembers = self.tracking.is_some_and(|t| !t.bcast && cached(&t));
        Caller {
            id: self.id,
            remembers,
            epoch: 0,
            table_max_keys: if remembers {
                self.stats.config.tracking_table_max_keys()
            } else {
                0
            },
        }
    }

    /// The caller of a transaction attempt about to begin: its reads' epoch taken now.
    pub(super) fn caller_now(&self, caller: Caller) -> Caller {
        Caller {
            epoch: if caller.remembers {
                self.pubsub.tracking.epoch()
            } else {
                0
            },
            ..caller
        }
    }

    /// `CLIENT CACHING`'s flag lasts one command (a `MULTI` block until its `EXEC`), unless
    /// that command is a `CLIENT` one (Redis's `resetClient`).
    pub(super) fn spend_caching(&mut self, client_command: bool) {
        if let Some(t) = self.tracking.as_mut() {
            if self.multi.is_none() && !client_command {
                t.caching = false;
            }
        }
    }

    /// The protocol this client's invalidations are written in changed (`HELLO`).
    pub(super) fn tracking_protocol(&self, protocol: Protocol) {
        if self.tracking.is_some() {
            self.pubsub.tracking.set_protocol(self.id, protocol);
        }
    }
}
