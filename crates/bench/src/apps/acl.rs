//! `acl_overhead`: what checking a restricted user's permissions costs GETs. On each server,
//! [`SETUSER`] makes a user limited to `key:*` and the read and connection commands, the
//! keys are preloaded, then `redis-benchmark -c 50 -r 10000 -t get` runs as the default user
//! and as that one (`--user bench -a benchpw`), twice each in the order of
//! [`users_in_order`]: GET/s as the restricted user ÷ as the default user, tamer's
//! (`acl_overhead`) and redis-server's (`acl_overhead_redis`). A tamer that refuses
//! `ACL SETUSER` leaves `acl_overhead` not measured, noted with its error text; redis-server
//! refusing it is an error.

use super::redis_benchmark::Run;
use super::tracking::{gets, preload};
use super::{Ctx, Kind, Measured};
use crate::rpc::servers::Server;
use crate::types::client::{args, Conn};

/// The restricted user and its password.
pub const USER: (&str, &str) = ("bench", "benchpw");
/// The command that makes it.
pub const SETUSER: [&str; 8] = [
    "ACL",
    "SETUSER",
    "bench",
    "on",
    ">benchpw",
    "~key:*",
    "+@read",
    "+@connection",
];

/// What one server gave: GETs as the default user and as the restricted one, or the error
/// text of a server that refused to make the user.
type Outcome = Result<[Measured; 2], String>;

/// One round: both servers, each one's restricted ÷ default.
pub fn round(ctx: &mut Ctx) -> Result<(), String> {
    let outcomes = ctx.each_server(measure)?;
    for (kind, outcome) in [Kind::Tamer, Kind::Redis].into_iter().zip(outcomes) {
        let figure = match kind {
            Kind::Tamer => "acl_overhead",
            Kind::Redis => "acl_overhead_redis",
        };
        match outcome {
            Ok([default, restricted]) => {
                ctx.ratio(figure, restricted.ops_per_s, default.ops_per_s);
                ctx.measured("acl_get_default", kind, default);
                ctx.measured("acl_get_restricted", kind, restricted);
                let round = ctx.round;
                ctx.row(serde_json::json!({
                    "figure": figure,
                    "round": round,
                    "server": kind.name(),
                    "default": default,
                    "restricted": restricted,
                }));
            }
            Err(text) => ctx.note_once(format!(
                "{figure}: not measured: {} answered `ACL SETUSER` with {text:?}",
                kind.name()
            )),
        }
    }
    Ok(())
}

/// One server: the user made (or tamer's refusal), the keys loaded, GETs as each user.
fn measure(ctx: &mut Ctx, server: &Server, kind: Kind) -> Result<Outcome, String> {
    let mut conn = Conn::connect(server.port())?;
    match conn.call(&args(&SETUSER)) {
        Ok(_) => {}
        // An error reply (not a lost connection): tamer without ACLs yet.
        Err(text) if kind == Kind::Tamer && text.starts_with('-') => {
            return Ok(Err(text[1..].trim_end().to_string()));
        }
        Err(text) => return Err(format!("ACL SETUSER: {}", text.trim_end())),
    }
    preload(&gets(ctx.plan, ctx.seed, server.port())?)?;
    let (mut default, mut restricted) = (Measured::default(), Measured::default());
    for user in users_in_order(ctx.round) {
        let run = Run {
            port: server.port(),
            cpu: ctx.plan.load_cpu,
            clients: ctx.plan.clients,
            requests: (ctx.plan.acl_requests / 2).max(1),
            keyspace: ctx.plan.keys,
            user,
            test: ["-t", "get"].map(String::from).to_vec(),
        };
        let m = super::measure(&run, server)?;
        match user {
            None => default = default.merge(m),
            Some(_) => restricted = restricted.merge(m),
        }
    }
    Ok(Ok([default, restricted]))
}

/// The users of round `round`'s four runs, `ABBA` so that a drift of the machine's speed
/// within the round weighs on both alike: the default user (`None`) outside in even rounds,
/// the restricted one in odd rounds.
pub fn users_in_order(round: usize) -> [Option<(&'static str, &'static str)>; 4] {
    let (a, b) = if round.is_multiple_of(2) {
        (None, Some(USER))
    } else {
        (Some(USER), None)
    };
    [a, b, b, a]
}
