//! A selector described as rules (Redis's `ACLDescribeSelector`): keys, channels, then the
//! commands, found as Redis finds them: `+@all` or `-@all`, then the categories that fit
//! best, one at a time, then the single commands that still differ (applied to a scratch
//! selector as they are emitted, so the description sets exactly the selector's bits).
//!
//! Redis emits the single commands in its command dictionary's order, which is random per
//! process; tamer emits them in name order.

use super::ids::{self, CATEGORIES};
use super::selector::{KeyPattern, Selector};

/// The rules that make `selector` (its keys, channels and commands), as bytes: patterns are
/// any bytes but spaces.
pub(crate) fn selector(selector: &Selector) -> Vec<u8> {
    let mut out = Vec::new();
    if selector.allkeys {
        out.extend_from_slice(b"~* ");
    } else {
        for key in &selector.keys {
            out.extend_from_slice(&key_pattern(key));
            out.push(b' ');
        }
    }
    if selector.allchannels {
        out.extend_from_slice(b"&* ");
    } else {
        out.extend_from_slice(b"resetchannels ");
        for channel in &selector.channels {
            out.push(b'&');
            out.extend_from_slice(channel);
            out.push(b' ');
        }
    }
    out.extend_from_slice(&commands(selector));
    out
}

/// `~p`, `%R~p` or `%W~p`.
pub(crate) fn key_pattern(key: &KeyPattern) -> Vec<u8> {
    let prefix: &[u8] = match (key.read, key.write) {
        (true, true) => b"~",
        (true, false) => b"%R~",
        (false, true) => b"%W~",
        (false, false) => unreachable!("a key pattern allows something (checked as it is set)"),
    };
    [prefix, &key.pattern].concat()
}

/// The command rules of `selector` (Redis's `ACLDescribeSelectorCommandRules`).
pub(crate) fn commands(selector: &Selector) -> Vec<u8> {
    let additive = !selector.future_commands();
    let mut rules: Vec<Vec<u8>> = vec![if additive { &b"-@all"[..] } else { b"+@all" }.to_vec()];
    let mut fake = Selector::new(false);
    fake.apply(&rules[0]).expect("a valid rule");
    let mut left = selector.clone();
    let mut applied = [false; CATEGORIES.len()];
    // Each pass applies one category: bounded by their number.
    for _ in 0..CATEGORIES.len() {
        let Some(best) = best_category(&left, additive, &applied) else {
            break;
        };
        applied[best] = true;
        let cat = 1 << best;
        fake.change_category(cat, additive);
        left.change_category(cat, !additive);
        let sign = if additive { "+@" } else { "-@" };
        rules.push(format!("{sign}{}", CATEGORIES[best]).into_bytes());
    }
    single_commands(selector, &mut fake, &mut rules);
    assert_eq!(
        fake.bits, selector.bits,
        "the description sets the selector's bits"
    );
    rules.join(&b' ')
}

/// The category with more commands in common with `left` than not, and the fewest
/// differences (then the most in common), not yet applied.
fn best_category(left: &Selector, additive: bool, applied: &[bool]) -> Option<usize> {
    let mut best = None;
    let (mut diff_min, mut same_max) = (usize::MAX, 0);
    for (i, _) in CATEGORIES.iter().enumerate() {
        if applied[i] {
            continue;
        }
        let (on, off) = left.count_category(1 << i);
        let (diff, same) = if additive { (off, on) } else { (on, off) };
        if same > diff && (diff < diff_min || (diff == diff_min && same > same_max)) {
            best = Some(i);
            diff_min = diff;
            same_max = same;
        }
    }
    best
}

/// The single commands (and first arguments) where `fake` still differs from `selector`.
fn single_commands(selector: &Selector, fake: &mut Selector, rules: &mut Vec<Vec<u8>>) {
    for (id, entry) in ids::all() {
        let bit = selector.bit(id);
        if bit != fake.bit(id) {
            rules.push(format!("{}{}", if bit { '+' } else { '-' }, entry.name).into_bytes());
            fake.change(id, bit);
        }
        if bit {
            continue;
        }
        for first in selector.firstargs.get(&id).into_iter().flatten() {
            rules.push([b"+", entry.name.as_bytes(), b"|", first].concat());
        }
    }
}
