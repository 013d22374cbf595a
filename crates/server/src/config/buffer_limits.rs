//! `client-output-buffer-limit`: `class hard soft seconds` per client class, as Redis 7.0
//! checks, merges and shows it. tamer applies the `pubsub` class to its subscribers' mail;
//! `normal` and `replica` are kept and shown (tamer bounds a normal client's unsent replies
//! by its own fixed bound, and has no replicas yet).

/// One class's bounds: 0 bytes is no bound of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Past it the client is closed at once.
    pub hard_bytes: u64,
    /// Past it for `soft_seconds` the client is closed.
    pub soft_bytes: u64,
    /// How long the soft bound may be passed.
    pub soft_seconds: u64,
}

/// The classes, in the order Redis shows them.
pub const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

const WRONG_COUNT: &str = "Wrong number of arguments in buffer limit configuration.";
const BAD_CLASS: &str = "Invalid client class specified in buffer limit configuration.";
const BAD_LIMIT: &str =
    "Error in hard, soft or soft_seconds setting in buffer limit configuration.";

/// The classes `value` sets, each with its limit (`Err`: Redis's reason).
pub fn parse(value: &str) -> Result<Vec<(usize, Limit)>, String> {
    let words: Vec<&str> = value.split_ascii_whitespace().collect();
    if !words.len().is_multiple_of(4) {
        return Err(WRONG_COUNT.into());
    }
    words
        .chunks(4)
        .map(|w| {
            let class = match w[0].to_ascii_lowercase().as_str() {
                "normal" => 0,
                "slave" | "replica" => 1,
                "pubsub" => 2,
                _ => return Err(BAD_CLASS.to_string()),
            };
            let bytes = |s: &str| super::parse_memory(s).ok_or_else(|| BAD_LIMIT.to_string());
            let soft_seconds = w[3].parse::<u64>().map_err(|_| BAD_LIMIT.to_string())?;
            let limit = Limit {
                hard_bytes: bytes(w[1])?,
                soft_bytes: bytes(w[2])?,
                soft_seconds,
            };
            Ok((class, limit))
        })
        .collect()
}

/// `classes` as Redis shows them (bytes, class names canonical).
pub fn show(classes: &[(usize, Limit)]) -> String {
    let words: Vec<String> = classes
        .iter()
        .map(|(class, l)| {
            format!(
                "{} {} {} {}",
                CLASSES[*class], l.hard_bytes, l.soft_bytes, l.soft_seconds
            )
        })
        .collect();
    words.join(" ")
}

/// `current` (every class, normalized) with the classes `change` (normalized) names changed.
pub fn merge(current: &str, change: &str) -> String {
    let mut all = parse(current).expect("a normalized value parses");
    for (class, limit) in parse(change).expect("a normalized value parses") {
        match all.iter_mut().find(|(c, _)| *c == class) {
            Some(slot) => slot.1 = limit,
            None => all.push((class, limit)),
        }
    }
    all.sort_by_key(|(class, _)| *class);
    show(&all)
}

/// The limit of `class` (an index of [`CLASSES`]) in a normalized value.
pub fn of_class(value: &str, class: usize) -> Option<Limit> {
    let all = parse(value).ok()?;
    all.into_iter().find(|(c, _)| *c == class).map(|(_, l)| l)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches a class set wrongly merged (the others lost), units not taken, or Redis's
    /// checks missed.
    #[test]
    fn parsed_merged_and_shown_as_redis() {
        let default = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";
        let change = show(&parse("PubSub 1mb 512kb 10").expect("valid"));
        assert_eq!(change, "pubsub 1048576 524288 10");
        assert_eq!(
            merge(default, &change),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10"
        );
        assert_eq!(
            merge(default, &show(&parse("replica 1 2 3").expect("valid"))),
            "normal 0 0 0 slave 1 2 3 pubsub 33554432 8388608 60"
        );
        assert_eq!(merge(default, ""), default);
        assert_eq!(parse("pubsub 1mb 512kb"), Err(WRONG_COUNT.into()));
        assert_eq!(parse("master 1 1 1"), Err(BAD_CLASS.into()));
        assert_eq!(parse("normal x 1 1"), Err(BAD_LIMIT.into()));
        assert_eq!(parse("normal 1 1 -1"), Err(BAD_LIMIT.into()));
        assert_eq!(of_class(default, 2).map(|l| l.soft_seconds), Some(60));
    }
}
