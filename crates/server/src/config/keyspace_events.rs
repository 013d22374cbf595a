//! `notify-keyspace-events`: the keyspace event classes Redis names by letter, parsed and
//! printed as Redis's `keyspaceEventsStringToFlags` / `keyspaceEventsFlagsToString` do. The
//! events themselves are the keyspace's (`crate::keyspace::events`).

/// A set of event classes and the two channels, as `notify-keyspace-events` names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classes(pub u16);

/// One event class (a bit of [`Classes`]), by Redis's letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Class {
    /// `K`: published on `__keyspace@<db>__:<key>`.
    Keyspace = 1 << 0,
    /// `E`: published on `__keyevent@<db>__:<event>`.
    Keyevent = 1 << 1,
    /// `g`: `del`, `expire`, `rename_from` ... (type-independent).
    Generic = 1 << 2,
    /// `$`.
    String = 1 << 3,
    /// `l`.
    List = 1 << 4,
    /// `s`.
    Set = 1 << 5,
    /// `h`.
    Hash = 1 << 6,
    /// `z`.
    Zset = 1 << 7,
    /// `x`: a key expired (lazily or by the expirer).
    Expired = 1 << 8,
    /// `e`: a key evicted (tamer never evicts: data beyond DRAM lives on the device).
    Evicted = 1 << 9,
    /// `t`: streams.
    Stream = 1 << 10,
    /// `m`: a read lookup missed.
    KeyMiss = 1 << 11,
    /// `d`: modules.
    Module = 1 << 12,
    /// `n`: a key was created.
    New = 1 << 13,
}

/// The letters in `CONFIG GET`'s order, each with its class (`A` is handled apart).
const LETTERS: &[(u8, Class)] = &[
    (b'g', Class::Generic),
    (b'$', Class::String),
    (b'l', Class::List),
    (b's', Class::Set),
    (b'h', Class::Hash),
    (b'z', Class::Zset),
    (b'x', Class::Expired),
    (b'e', Class::Evicted),
    (b't', Class::Stream),
    (b'd', Class::Module),
    (b'n', Class::New),
];

/// `A`: every class but `m` and `n` (Redis's `NOTIFY_ALL`).
const ALL: u16 = Class::Generic as u16
    | Class::String as u16
    | Class::List as u16
    | Class::Set as u16
    | Class::Hash as u16
    | Class::Zset as u16
    | Class::Expired as u16
    | Class::Evicted as u16
    | Class::Stream as u16
    | Class::Module as u16;

/// Redis's reason for refusing a letter.
pub const INVALID_CLASS: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

impl Classes {
    /// Parses `notify-keyspace-events`'s letters (any order, repeats allowed).
    pub fn parse(text: &str) -> Result<Classes, &'static str> {
        let mut bits = 0u16;
        for c in text.bytes() {
            bits |= match c {
                b'A' => ALL,
                b'K' => Class::Keyspace as u16,
                b'E' => Class::Keyevent as u16,
                b'm' => Class::KeyMiss as u16,
                _ => match LETTERS.iter().find(|(l, _)| *l == c) {
                    Some((_, class)) => *class as u16,
                    None => return Err(INVALID_CLASS),
                },
            };
        }
        Ok(Classes(bits))
    }

    /// The letters as `CONFIG GET` shows them (Redis's `keyspaceEventsFlagsToString`).
    pub fn letters(self) -> String {
        let mut out = String::new();
        if self.0 & ALL == ALL {
            out.push('A');
        } else {
            for (letter, class) in LETTERS {
                if self.has(*class) {
                    out.push(*letter as char);
                }
            }
        }
        for (letter, class) in [
            ('K', Class::Keyspace),
            ('E', Class::Keyevent),
            ('m', Class::KeyMiss),
        ] {
            if self.has(class) {
                out.push(letter);
            }
        }
        out
    }

    /// Every letter of the set, `A` spelt out (so [`Classes::parse`] gives the set back).
    pub fn every_letter(self) -> String {
        let all = LETTERS.iter().chain(&[
            (b'K', Class::Keyspace),
            (b'E', Class::Keyevent),
            (b'm', Class::KeyMiss),
        ]);
        all.filter(|(_, class)| self.has(*class))
            .map(|(letter, _)| *letter as char)
            .collect()
    }

    /// The class is in the set.
    pub fn has(self, class: Class) -> bool {
        self.0 & class as u16 != 0
    }

    /// An event of `class` is published somewhere: its class and a channel are on.
    pub fn publishes(self, class: Class) -> bool {
        self.has(class) && (self.has(Class::Keyspace) || self.has(Class::Keyevent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mutations caught: a letter mapped to the wrong class, `A` including `m` or `n`, the
    /// canonical order changed, an unknown letter accepted.
    #[test]
    fn letters_parse_and_print_as_redis_does() {
        let cases = [
            ("", ""),
            ("KEA", "AKE"),
            ("Ex", "xE"),
            ("g$lshzxetd", "AKE"),
            ("nKm", "nKm"),
            ("An", "A"),
            ("zhsl$gK", "g$lshzK"),
        ];
        for (input, shown) in cases {
            let mut classes = Classes::parse(input).expect(input);
            if input == "g$lshzxetd" {
                classes.0 |= Class::Keyspace as u16 | Class::Keyevent as u16;
            }
            assert_eq!(classes.letters(), shown, "{input}");
        }
        assert_eq!(Classes::parse("Kq"), Err(INVALID_CLASS));
        let every = Classes::parse("AnmKE").unwrap();
        assert_eq!(Classes::parse(&every.every_letter()), Ok(every));
        assert!(!Classes::parse("A").unwrap().publishes(Class::Generic));
        assert!(Classes::parse("Kg").unwrap().publishes(Class::Generic));
        assert!(!Classes::parse("KA").unwrap().publishes(Class::New));
    }
}
