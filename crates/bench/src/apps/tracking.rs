//! `tracking_get_vs_redis`: GETs with client-side caching's tracking on. [`Plan::keys`]
//! keys are preloaded; then [`Plan::tracking_connections`] connections, each switched to RESP3
//! (`HELLO 3`) with `CLIENT TRACKING ON` (each GET remembers its key on the server), pipeline
//! GETs of random keys, [`Plan::tracking_depth`] in flight each, for
//! [`Plan::tracking_window`] (the load generator, [`crate::load`], closed loop on the load
//! CPU); tamer's GET/s ÷ redis-server's. The method of `scripts/tracking-get.py`.

use std::time::Duration;

use super::{with_cpu, Ctx, Measured, Plan};
use crate::load::{self, LoadOptions};
use crate::rpc::scenarios::fill;
use crate::rpc::servers::Server;
use crate::types::client::args;

/// One round: both servers, tamer ÷ redis-server.
pub fn round(ctx: &mut Ctx) -> Result<(), String> {
    let measured = ctx.each_server(|ctx, server, _| measure(ctx.plan, ctx.seed, server))?;
    ctx.compare("tracking_get_vs_redis", "tracking_get", measured);
    Ok(())
}

/// The load of `plan`'s GET figures on `port`: its keys and values, closed loop on the load
/// CPU (GETs only).
pub fn gets(plan: &Plan, seed: u64, port: u16) -> Result<LoadOptions, String> {
    let mut o = LoadOptions::new(port);
    o.keys = plan.keys;
    o.value_bytes = plan.value_bytes;
    o.seed = seed;
    o.cpus = vec![plan.load_cpu];
    o.mix = "get=1".parse()?;
    Ok(o)
}

/// Sets every key of `o` and checks each was stored.
pub fn preload(o: &LoadOptions) -> Result<(), String> {
    let f = fill(o)?;
    if f.keys != o.keys || f.errors > 0 {
        return Err(format!(
            "preloading {} keys: {} set, {} errors",
            o.keys, f.keys, f.errors
        ));
    }
    Ok(())
}

fn measure(plan: &Plan, seed: u64, server: &Server) -> Result<Measured, String> {
    let mut o = gets(plan, seed, server.port())?;
    preload(&o)?;
    o.connections = plan.tracking_connections;
    o.pipeline = plan.tracking_depth;
    o.duration = plan.tracking_window;
    // No warm-up: the server's CPU is read around the whole run, so every GET answered in it
    // counts (the drain after the window is a pipeline's depth per connection).
    o.warmup = Duration::ZERO;
    o.setup = vec![args(&["HELLO", "3"]), args(&["CLIENT", "TRACKING", "ON"])];
    let (r, cpu) = with_cpu(server, plan.load_cpu, || load::run(&o))?;
    if r.errors > 0 || r.busy > 0 || r.connection_errors > 0 || r.nil > 0 {
        return Err(format!(
            "GETs: {} errors, {} busy, {} misses, {} connections failed ({})",
            r.errors,
            r.busy,
            r.nil,
            r.connection_errors,
            r.last_error.unwrap_or_default()
        ));
    }
    Ok(Measured::new(r.answered, r.window_s, cpu))
}
