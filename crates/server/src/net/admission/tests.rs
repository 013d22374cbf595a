use std::time::{Duration, Instant};

use super::*;

fn snap(queued: usize, incoming: usize) -> Snapshot {
    Snapshot {
        queued,
        incoming,
        slo_ns: Some(1_000_000),
        rate_per_s: Some(100_000.0),
        service_ns: Some(10_000),
    }
}

/// Rule 1. Mutation caught: refusing when nothing is queued (a server that refuses forever
/// once its rate estimate is low).
#[test]
fn nothing_queued_admits_whatever_the_estimate() {
    let mut s = snap(0, 64);
    s.rate_per_s = Some(1.0);
    assert_eq!(decide(s), Decision::Admit);
    s.incoming = QUEUED_REQUESTS_MAX * 2;
    assert_eq!(decide(s), Decision::Admit);
}

/// Rule 2. Mutation caught: the hard bound ignored without an objective.
#[test]
fn the_hard_bound_holds_without_an_objective() {
    let mut s = snap(QUEUED_REQUESTS_MAX - 10, 10);
    s.slo_ns = None;
    assert_eq!(decide(s), Decision::Admit);
    s.incoming = 11;
    assert_eq!(decide(s), Decision::RefuseFull);
}

/// Rule 3. Mutation caught: refusing before anything was measured.
#[test]
fn nothing_measured_admits() {
    let mut s = snap(10_000, 64);
    s.rate_per_s = None;
    assert_eq!(decide(s), Decision::Admit);
    let mut s = snap(10_000, 64);
    s.service_ns = None;
    assert_eq!(decide(s), Decision::Admit);
}

/// Rule 4, at its edge: 100k/s and 10 µs of service leave 990 µs of a 1 ms objective, 99
/// requests of wait. Mutations caught: the service time left out (admits 100), the incoming
/// batch left out (admits 90 + 10 as 90), a comparison the wrong way.
#[test]
fn the_objective_bounds_the_expected_wait() {
    assert_eq!(decide(snap(89, 10)), Decision::Admit);
    assert_eq!(decide(snap(90, 10)), Decision::RefuseSlo);
    assert_eq!(decide(snap(99, 1)), Decision::RefuseSlo);
    assert_eq!(decide(snap(98, 1)), Decision::Admit);
    // A faster server admits more behind the same objective.
    let mut s = snap(500, 10);
    s.rate_per_s = Some(1_000_000.0);
    assert_eq!(decide(s), Decision::Admit);
}

/// The meter's drain rate is completions over busy time only: idle gaps between busy
/// periods do not lower it. Mutations caught: wall time instead of busy time (the rate
/// halves), the queue count not decremented.
#[test]
fn the_meter_measures_the_rate_over_busy_time() {
    let mut m = Meter::new();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    // Two busy periods of 5 ms, 500 requests each, 100 ms apart: 100k/s.
    m.admitted(500, t0);
    m.finished(500, 2_000_000, t0 + ms(5));
    assert_eq!(m.queued(), 0);
    m.admitted(500, t0 + ms(105));
    m.finished(250, 1_000_000, t0 + ms(107));
    m.finished(250, 1_000_000, t0 + ms(110));
    let rate = m.snapshot(1, None).rate_per_s.expect("measured");
    assert!((rate - 100_000.0).abs() < 1.0, "{rate}");
    let service = m.snapshot(1, None).service_ns.expect("measured");
    assert_eq!(service, 4_000, "2 ms of job time over 500 requests");
}

/// A window shorter than the minimum makes no estimate. Mutation caught: a rate from one
/// request (a noisy estimate that refuses wrongly).
#[test]
fn a_short_window_makes_no_estimate() {
    let mut m = Meter::new();
    let t0 = Instant::now();
    m.admitted(1, t0);
    m.finished(1, 10_000, t0 + Duration::from_micros(20));
    assert_eq!(m.snapshot(1, None).rate_per_s, None);
}
