//! The figures' targets, the table printed at the end of a run, and a note for each miss.

use super::Plan;
use crate::output::BenchResult;

/// A figure's target: the least it should reach, and the measurements printed under it
/// (`{stem}_per_s_{server}`, `{stem}_server_cpu_us_per_op_{server}`) with their labels.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// The figure.
    pub figure: &'static str,
    /// Its target: at least this.
    pub minimum: f64,
    /// The measurements behind it: stem and label.
    pub rows: &'static [(&'static str, &'static str)],
}

/// Issue 24 §8's figures and targets.
pub const TARGETS: [Target; 4] = [
    Target {
        figure: "evalsha_vs_redis",
        minimum: 1.0,
        rows: &[("evalsha", "EVALSHA")],
    },
    Target {
        figure: "publish_fanout_vs_redis",
        minimum: 1.0,
        rows: &[("publish_fanout", "messages delivered")],
    },
    Target {
        figure: "tracking_get_vs_redis",
        minimum: 1.0,
        rows: &[("tracking_get", "GET, tracking on")],
    },
    Target {
        figure: "acl_overhead",
        minimum: 0.97,
        rows: &[
            ("acl_get_default", "GET, default user"),
            ("acl_get_restricted", "GET, restricted user"),
        ],
    },
];

/// redis-server's own `acl_overhead`, printed beside tamer's (no target).
pub const ACL_OVERHEAD_REDIS: &str = "acl_overhead_redis";

/// What a figure's value says of its target: `met`, `miss`, or `not measured`.
pub fn verdict(value: Option<f64>, minimum: f64) -> &'static str {
    match value {
        None => "not measured",
        Some(v) if v >= minimum => "met",
        Some(_) => "miss",
    }
}

/// Every target figure present (null when not measured), the table printed, a note for each
/// miss.
pub fn finish(result: &mut BenchResult, plan: &Plan) {
    for name in TARGETS.iter().map(|t| t.figure).chain([ACL_OVERHEAD_REDIS]) {
        result.figures.entry(name.into()).or_insert(None);
    }
    let value = |result: &BenchResult, name: &str| result.figures.get(name).copied().flatten();
    let shown = |v: Option<f64>, decimals: usize| {
        v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.decimals$}"))
    };
    println!(
        "\napps: medians of {} rounds; rates in operations/s, CPU in server µs per operation, \
         the load CPU's busy fraction (tamer, redis) beside",
        plan.rounds
    );
    println!(
        "  {:<26} {:>7} {:>7}  {:<12} {:>11} {:>11} {:>9} {:>9} {:>13}",
        "figure",
        "value",
        "target",
        "verdict",
        "tamer /s",
        "redis /s",
        "tamer CPU",
        "redis CPU",
        "load CPU busy"
    );
    let mut misses = Vec::new();
    for t in &TARGETS {
        let v = value(result, t.figure);
        let verdict = verdict(v, t.minimum);
        println!(
            "  {:<26} {:>7} {:>7}  {verdict}",
            t.figure,
            shown(v, 3),
            format!("≥ {:.2}", t.minimum)
        );
        for (stem, label) in t.rows {
            let m = |what: &str, server: &str| value(result, &format!("{stem}_{what}_{server}"));
            println!(
                "    {label:<41} {:>11} {:>11} {:>9} {:>9} {:>6} {:>6}",
                shown(m("per_s", "tamer"), 0),
                shown(m("per_s", "redis"), 0),
                shown(m("server_cpu_us_per_op", "tamer"), 3),
                shown(m("server_cpu_us_per_op", "redis"), 3),
                shown(m("load_cpu_busy_fraction", "tamer"), 2),
                shown(m("load_cpu_busy_fraction", "redis"), 2),
            );
        }
        if verdict == "miss" {
            misses.push(format!(
                "{} = {:.3}: a miss (target ≥ {:.2})",
                t.figure,
                v.unwrap_or(f64::NAN),
                t.minimum
            ));
        }
    }
    println!(
        "  {:<26} {:>7}  (redis-server's, beside acl_overhead)",
        ACL_OVERHEAD_REDIS,
        shown(value(result, ACL_OVERHEAD_REDIS), 3)
    );
    for miss in misses {
        result.note(miss);
    }
}
