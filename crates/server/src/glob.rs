//! Redis's glob patterns (`KEYS`, `SCAN ... MATCH`): `stringmatchlen` of Redis 7.0's `util.c`,
//! ported byte for byte. `*` any run, `?` any byte, `[abc]`, `[^a]`, `[a-z]` (ends in either
//! order), `\x` the byte `x`; an unclosed `[` ends the class at the pattern's end. As in
//! Redis, bytes compare as C's signed `char` in ranges, reads past the pattern's end see the
//! terminating NUL. A pattern of more than 64 stars runs an iterative matcher instead (no
//! stack depth on a user-level thread's 64 KiB stack), so Redis's limit (past 1000 nested
//! `*` nothing matches) does not apply. Once the rest of a pattern
//! fails at every position after a `*`, earlier `*`s are not retried (`skip_longer`), so a
//! match costs O(pattern × string), not exponential time.

/// Most nested `*` a match follows (Redis 7.0's protection against abusive patterns).
const MAX_NESTING: u32 = 1000;

/// Whether `string` matches glob `pattern` (case-sensitive). Runs the recursive port only
/// when the pattern's stars fit [`STACK_SAFE_STARS`] (its depth is one frame per star, on a
/// user-level thread's 64 KiB stack); a pattern with more runs the iterative matcher of
/// `CONFIG GET` ([`matches_iterative`], checked against Redis's `KEYS` in its tests),
/// which needs no stack.
pub fn matches(pattern: &[u8], string: &[u8]) -> bool {
    if pattern.iter().filter(|&&b| b == b'*').count() > STACK_SAFE_STARS {
        return matches_iterative(pattern, string, false);
    }
    let mut skip_longer = false;
    match_from(pattern, 0, string, &mut skip_longer, 0)
}

/// Stars the recursive matcher follows at most: 64 frames stay far within a user-level
/// thread's stack.
pub const STACK_SAFE_STARS: usize = 64;

/// The pattern byte at `i`, or the NUL past its end (C reads the terminator).
fn at(p: &[u8], i: usize) -> u8 {
    p.get(i).copied().unwrap_or(0)
}

/// `pattern[pi..]` against `s`.
fn match_from(p: &[u8], mut pi: usize, mut s: &[u8], skip_longer: &mut bool, nesting: u32) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    // Bounded: every pass consumes a pattern byte and at most one string byte.
    while pi < p.len() && !s.is_empty() {
        match p[pi] {
            b'*' => {
                while pi + 1 < p.len() && p[pi + 1] == b'*' {
                    pi += 1;
                }
                if pi + 1 == p.len() {
                    return true;
                }
                while !s.is_empty() {
                    if match_from(p, pi + 1, s, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                let (matched, end) = class(p, pi + 1, s[0]);
                if !matched {
                    return false;
                }
                pi = end;
                s = &s[1..];
            }
            b'\\' => {
                if p.len() - pi >= 2 {
                    pi += 1;
                }
                if p[pi] != s[0] {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if c != s[0] {
                    return false;
                }
                s = &s[1..];
            }
        }
        pi += 1;
        if s.is_empty() {
            while at(p, pi) == b'*' {
                pi += 1;
            }
            break;
        }
    }
    pi >= p.len() && s.is_empty()
}

/// A `[...]` class starting at `pi` (after the `[`) against byte `c`: whether it matched, and
/// the index of its closing `]` (or of the pattern's last byte when unclosed).
fn class(p: &[u8], mut pi: usize, c: u8) -> (bool, usize) {
    let not = at(p, pi) == b'^';
    if not {
        pi += 1;
    }
    let mut matched = false;
    loop {
        let left = p.len().saturating_sub(pi);
        if at(p, pi) == b'\\' && left >= 2 {
            pi += 1;
            matched |= p[pi] == c;
        } else if at(p, pi) == b']' {
            break;
        } else if left == 0 {
            pi -= 1;
            break;
        } else if left >= 3 && p[pi + 1] == b'-' {
            // C's `char` is signed here.
            let (mut start, mut end) = (p[pi] as i8, p[pi + 2] as i8);
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            matched |= (start..=end).contains(&(c as i8));
            pi += 2;
        } else {
            matched |= p[pi] == c;
        }
        pi += 1;
    }
    (matched != not, pi)
}

/// Redis's `stringmatchlen`: `*`, `?`, `[abc]`, `[^a-z]`, `\x`; `nocase` folds ASCII case.
/// Bounded: O(pattern × string) steps whatever the pattern (a mismatch backtracks only to the
/// last `*`, which is enough for these patterns), so a client's pattern of many stars cannot
/// make it exponential as a recursive matcher would be.
pub fn matches_iterative(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let (mut p, mut s) = (0, 0);
    // After the last star seen: (the pattern past it, the string position it resumes from).
    let mut star: Option<(usize, usize)> = None;
    while s < string.len() {
        if pattern.get(p) == Some(&b'*') {
            while pattern.get(p) == Some(&b'*') {
                p += 1;
            }
            star = Some((p, s));
            continue;
        }
        if let Some(next) = match_one(pattern, p, string[s], nocase) {
            p = next;
            s += 1;
            continue;
        }
        // A mismatch: the last star takes one more byte, or the match fails.
        let Some((after, from)) = star else {
            return false;
        };
        star = Some((after, from + 1));
        p = after;
        s = from + 1;
    }
    pattern[p.min(pattern.len())..].iter().all(|&b| b == b'*')
}

/// Matches the pattern element at `p` (not a star) against `c`: the index after it.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match *pattern.get(p)? {
        b'?' => Some(p + 1),
        b'[' => {
            let (matched, next) = class_match(pattern, p + 1, c, nocase);
            matched.then_some(next)
        }
        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], c).then_some(p + 2),
        literal => eq(literal, c).then_some(p + 1),
    }
}

/// A `[...]` class starting at `p` (after the `[`) against `c`: (matched, the index after
/// the class's `]`, or the pattern's end as Redis treats an unclosed class).
fn class_match(pattern: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let not = pattern.get(p) == Some(&b'^');
    if not {
        p += 1;
    }
    let mut matched = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            p += 1;
            matched |= fold(pattern[p]) == c;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[p]), fold(pattern[p + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            matched |= (lo..=hi).contains(&c);
            p += 2;
        } else {
            matched |= fold(pattern[p]) == c;
        }
        p += 1;
    }
    // Past the `]` (or at the end, for an unclosed class).
    (matched != not, (p + 1).min(pattern.len()))
}

/// Whether `string` matches glob `pattern`, ASCII case folded (`CONFIG GET`, `COMMAND LIST
/// FILTERBY PATTERN`, as Redis's `stringmatchlen(..., nocase=1)`).
pub fn matches_nocase(pattern: &[u8], string: &[u8]) -> bool {
    matches_iterative(pattern, string, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Redis 7.0's `stringmatchlen_impl` without `skipLongerMatches` and without the nesting
    /// limit, written as directly from the C as Rust allows (pointer arithmetic as indices,
    /// the string's own end as C's): the reference the fast version must agree with.
    fn reference(p: &[u8], mut pi: usize, s: &[u8], mut si: usize) -> bool {
        while pi < p.len() && si < s.len() {
            match p[pi] {
                b'*' => {
                    while pi + 1 < p.len() && p[pi + 1] == b'*' {
                        pi += 1;
                    }
                    if pi + 1 == p.len() {
                        return true;
                    }
                    return (si..s.len()).any(|k| reference(p, pi + 1, s, k));
                }
                b'?' => si += 1,
                b'[' => {
                    let (m, end) = class(p, pi + 1, s[si]);
                    if !m {
                        return false;
                    }
                    pi = end;
                    si += 1;
                }
                b'\\' if p.len() - pi >= 2 => {
                    pi += 1;
                    if p[pi] != s[si] {
                        return false;
                    }
                    si += 1;
                }
                c => {
                    if c != s[si] {
                        return false;
                    }
                    si += 1;
                }
            }
            pi += 1;
            if si == s.len() {
                while at(p, pi) == b'*' {
                    pi += 1;
                }
                break;
            }
        }
        pi >= p.len() && si == s.len()
    }

    /// Cases from Redis's own `stringmatchlen` tests and docs. Catches a class's negation or
    /// range inverted, an escape ignored, `?` matching nothing, an unclosed `[` read past the
    /// end, ranges compared unsigned.
    #[test]
    fn redis_cases() {
        let yes: &[(&[u8], &[u8])] = &[
            (b"h?llo", b"hello"),
            (b"h*llo", b"heeeello"),
            (b"h[ae]llo", b"hallo"),
            (b"h[^e]llo", b"hallo"),
            (b"h[a-b]llo", b"hbllo"),
            (b"h[b-a]llo", b"hbllo"),
            (b"h\\*llo", b"h*llo"),
            (b"a*", b"a"),
            (b"[a", b"a"),
            (b"[\\]]", b"]"),
            (b"\\", b"\\"),
            (b"*a*b*", b"xxaxxbxx"),
            (b"[\x80-\x7f]", b"\x00"),
        ];
        for (p, s) in yes {
            assert!(matches(p, s), "{:?} should match {:?}", p, s);
        }
        let no: &[(&[u8], &[u8])] = &[
            (b"h[^e]llo", b"hello"),
            (b"h[a-b]llo", b"hcllo"),
            (b"h?llo", b"hllo"),
            (b"h\\*llo", b"hallo"),
            (b"a", b""),
            (b"*", b""),
            (b"[", b"["),
            (b"", b"a"),
            (b"[a", b"b"),
            (b"[\x00-\x7f]", b"\x80"),
        ];
        for (p, s) in no {
            assert!(!matches(p, s), "{:?} should not match {:?}", p, s);
        }
        // An abusive pattern ends quickly (skip_longer). Past 64 stars the iterative matcher
        // answers (no stack depth): it matches where Redis's nesting limit (1000) gives up.
        let abusive = [b"a*".repeat(50), b"b".to_vec()].concat();
        assert!(!matches(&abusive, &[b'a'; 100]));
        let deep = b"*a".repeat(1200);
        assert!(matches(&deep, &b"a".repeat(1200)));
        assert!(!matches(&deep, &b"a".repeat(1199)));
    }

    proptest! {
        /// Catches the fast version's early exit (`skip_longer`) wrong: it must agree with the
        /// plain backtracking reference on every pattern and string over a small alphabet rich
        /// in the special bytes.
        #[test]
        fn agrees_with_the_reference(
            p in prop::collection::vec(prop::sample::select(b"ab*?[]^-\\\x80".to_vec()), 0..10),
            s in prop::collection::vec(prop::sample::select(b"ab*?[]^-\\\x80".to_vec()), 0..10),
        ) {
            prop_assert_eq!(matches(&p, &s), reference(&p, 0, &s, 0), "pattern {:?}", p);
        }
    }

    /// Catches a glob that mishandles a class, a range, negation, an escape, `?` or a star in
    /// the middle (each case is Redis's `stringmatchlen` answer).
    #[test]
    fn glob_matches_as_redis() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "maxclients", true),
            ("max*", "maxclients", true),
            ("max*", "maxmemory", true),
            ("*max*", "maxmemory", true),
            ("m?xclients", "maxclients", true),
            ("m?xclients", "mxclients", false),
            ("slowlog-*-len", "slowlog-max-len", true),
            ("slowlog-*-len", "slowlog-log-slower-than", false),
            ("[mp]ort", "port", true),
            ("[mp]ort", "sort", false),
            ("[^p]ort", "port", false),
            ("[^p]ort", "sort", true),
            ("[a-c]at", "bat", true),
            ("[c-a]at", "bat", true),
            ("[a-c]at", "dat", false),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("MAXCLIENTS", "maxclients", true),
            ("port", "ports", false),
            ("ports", "port", false),
            ("[abc", "a", true),
            ("**x", "abx", true),
        ];
        for &(pattern, string, want) in cases {
            assert_eq!(
                matches_iterative(pattern.as_bytes(), string.as_bytes(), true),
                want,
                "{pattern} vs {string}"
            );
        }
        assert!(
            !matches_iterative(b"MAX*", b"maxclients", false),
            "case matters without nocase"
        );
    }

    /// Catches a matcher that backtracks exponentially: 10,000 stars between `a`s against a
    /// 60-byte string that cannot match takes O(pattern × string), well under a second.
    #[test]
    fn glob_is_linear_in_stars() {
        let mut pattern = b"a*".repeat(10_000);
        pattern.push(b'b');
        let string = vec![b'a'; 60];
        let started = std::time::Instant::now();
        assert!(!matches_iterative(&pattern, &string, true));
        assert!(matches_iterative(
            &pattern[..pattern.len() - 1],
            &[b'a'; 10_000],
            true
        ));
        let took = started.elapsed();
        assert!(took < std::time::Duration::from_secs(1), "{took:?}");
    }
}
