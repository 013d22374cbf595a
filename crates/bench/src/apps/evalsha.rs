//! `evalsha_vs_redis`: a 3-command Lua script ([`SCRIPT`]: `GET`, `INCR`, `EXPIRE` of
//! `KEYS[1]`, returning the `GET`), loaded with `SCRIPT LOAD`, called by `redis-benchmark -c 50
//! -n N -r 10000 evalsha SHA 1 key:__rand_int__` on the load CPU; tamer's requests/s ÷
//! redis-server's.

use super::redis_benchmark::Run;
use super::{bulk_text, measure, Ctx};
use crate::types::client::{args, Conn};

/// The script (issue 24's first EVALSHA measurement's).
pub const SCRIPT: &str = "local v = redis.call('get', KEYS[1]) redis.call('incr', KEYS[1]) \
                          redis.call('expire', KEYS[1], 100) return v";

/// One round: both servers, tamer ÷ redis-server.
pub fn round(ctx: &mut Ctx) -> Result<(), String> {
    let measured = ctx.each_server(|ctx, server, _| {
        let mut conn = Conn::connect(server.port())?;
        let reply = conn.call(&args(&["SCRIPT", "LOAD", SCRIPT]))?;
        let sha = bulk_text(&reply)
            .filter(|s| s.len() == 40)
            .ok_or_else(|| format!("SCRIPT LOAD answered {}", String::from_utf8_lossy(&reply)))?;
        // Once by hand first: an error reply names itself here.
        conn.call(&args(&["EVALSHA", &sha, "1", "key:probe"]))?;
        let run = Run {
            port: server.port(),
            cpu: ctx.plan.load_cpu,
            clients: ctx.plan.clients,
            requests: ctx.plan.evalsha_requests,
            keyspace: ctx.plan.keys,
            user: None,
            test: ["evalsha", &sha, "1", "key:__rand_int__"]
                .map(String::from)
                .to_vec(),
        };
        measure(&run, server)
    })?;
    ctx.compare("evalsha_vs_redis", "evalsha", measured);
    Ok(())
}
