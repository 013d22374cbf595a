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
/// `CONFIG GET` (`crate::config::glob_match`, checked against Redis's `KEYS` in its tests),
/// which needs no stack.
pub fn matches(pattern: &[u8], string: &[u8]) -> bool {
    if pattern.iter().filter(|&&b| b == b'*').count() > STACK_SAFE_STARS {
        return crate::config::glob_match(pattern, string, false);
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
}
