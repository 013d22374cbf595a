//! Properties of ACL users (rules and their descriptions).

mod properties {
    use proptest::prelude::*;

    use crate::acl::user::{merge_selectors, User};

    /// Rules as a user types them: valid ones of every kind, and junk.
    fn rule() -> impl Strategy<Value = Vec<u8>> {
        let words = prop::sample::select(vec![
            "on",
            "off",
            "nopass",
            "resetpass",
            ">pw",
            ">other",
            "<pw",
            "#x",
            "~k*",
            "~*",
            "%R~r*",
            "%W~w*",
            "%RW~x",
            "allkeys",
            "resetkeys",
            "&c*",
            "&*",
            "allchannels",
            "resetchannels",
            "+@all",
            "-@all",
            "+@read",
            "-@write",
            "+@hash",
            "-@dangerous",
            "+@admin",
            "+get",
            "-get",
            "+config",
            "-config|set",
            "+config|get",
            "+select|0",
            "+select|1",
            "+client|id",
            "-client",
            "+acl",
            "allcommands",
            "nocommands",
            "reset",
            "clearselectors",
            "(+get ~a*)",
            "(+@read %W~w* &x)",
            "(-@all)",
            "sanitize-payload",
            "skip-sanitize-payload",
            "+pfadd",
            "-@geo",
        ]);
        prop_oneof![
            8 => words.prop_map(|w| w.as_bytes().to_vec()),
            1 => prop::collection::vec(any::<u8>(), 0..6),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever rules a user was given (junk refused without a change), its description
        /// read back as rules makes the same user: catches a description that loses a
        /// first argument, a key permission, a selector or a category's subcommands.
        #[test]
        fn a_description_read_back_is_the_same_user(rules in prop::collection::vec(rule(), 0..12)) {
            let mut user = User::new(b"u", false);
            for r in &rules {
                let before = user.clone();
                if user.apply(r, false).is_err() {
                    prop_assert_eq!(&user.selectors, &before.selectors, "a refused rule changed nothing");
                    user = before;
                }
            }
            let description = user.describe();
            let words: Vec<&[u8]> = description.split(|&b| b == b' ').collect();
            let mut again = User::new(b"u", false);
            for r in merge_selectors(&words).expect("balanced") {
                again.apply(&r, false).expect("a description is valid rules");
            }
            // First arguments of a command whose bit is set change nothing (Redis keeps and
            // never shows them either).
            for s in &mut user.selectors {
                let set: Vec<usize> = s.firstargs.keys().copied().filter(|&id| s.bit(id)).collect();
                for id in set {
                    s.firstargs.remove(&id);
                }
            }
            prop_assert_eq!(&again.selectors, &user.selectors, "{}", String::from_utf8_lossy(&description));
            prop_assert_eq!(again.enabled, user.enabled);
            prop_assert_eq!(&again.passwords, &user.passwords);
        }
    }
}
