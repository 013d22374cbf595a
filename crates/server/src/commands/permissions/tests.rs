//! ACL rules and checks on the command table's requests, rule by rule: each test names the
//! mutation it catches.

use crate::acl::describe;
use crate::acl::user::{merge_selectors, User};
use crate::acl::{unrestricted, Denied, RuleError};
use crate::commands::table;

fn user(rules: &[&str]) -> User {
    let mut u = User::new(b"u", false);
    for r in rules {
        u.apply(r.as_bytes(), false)
            .unwrap_or_else(|e| panic!("{r}: {e:?}"));
    }
    u
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("ASCII rules")
}

fn run(u: &User, request: &[&str]) -> Result<(), Denied> {
    let args: Vec<&[u8]> = request.iter().map(|a| a.as_bytes()).collect();
    let command = table::lookup_request(&args).expect("a served command");
    super::check(u, command, &args)
}

#[test]
fn the_default_user_is_described_as_redis_describes_it() {
    // Catches: a wrong flag order, or `+@all` not setting the future bit.
    let u = User::default_user();
    assert_eq!(text(&u.describe()), "on nopass ~* &* +@all");
    assert!(unrestricted(&u));
}

#[test]
fn a_new_user_is_off_with_nothing() {
    let u = User::new(b"alice", false);
    assert_eq!(text(&u.describe()), "off resetchannels -@all");
    assert_eq!(run(&u, &["get", "k"]), Err(Denied::Command));
}

#[test]
fn commands_categories_and_first_args() {
    // Catches: a category not walking subcommands, `-` not clearing a container's
    // subcommands, first arguments compared with case.
    let u = user(&["+@hash", "-hdel", "+config|get", "+select|0", "+get", "~*"]);
    assert_eq!(run(&u, &["hset", "h", "f", "v"]), Ok(()));
    assert_eq!(run(&u, &["hdel", "h", "f"]), Err(Denied::Command));
    assert_eq!(run(&u, &["config", "get", "x"]), Ok(()));
    assert_eq!(run(&u, &["config", "set", "x", "y"]), Err(Denied::Command));
    assert_eq!(run(&u, &["select", "0"]), Ok(()));
    assert_eq!(run(&u, &["select", "1"]), Err(Denied::Command));
    assert_eq!(u.root().firstargs.len(), 1);
    assert_eq!(
        text(&describe::commands(u.root())),
        "-@all +@hash +config|get +get -hdel +select|0"
    );
    let all_but = user(&["+@all", "-@dangerous", "+flushall"]);
    assert_eq!(run(&all_but, &["flushdb"]), Err(Denied::Command));
    assert_eq!(run(&all_but, &["flushall"]), Ok(()));
    assert_eq!(
        text(&describe::commands(all_but.root())),
        "+@all -@admin -flushdb -info -keys -migrate -restore -restore-asking -sort -sort_ro \
         -swapdb"
    );
}

#[test]
fn keys_by_read_and_write_permission() {
    // Catches: %R~ patterns allowing writes, the access/update flags mapped the wrong way.
    let u = user(&["+@all", "%R~r*", "%W~w*", "~k*"]);
    assert_eq!(run(&u, &["get", "r1"]), Ok(()));
    assert_eq!(run(&u, &["set", "r1", "v"]), Err(Denied::Key(1)));
    assert_eq!(run(&u, &["set", "w1", "v"]), Ok(()));
    assert_eq!(run(&u, &["get", "w1"]), Err(Denied::Key(1)));
    assert_eq!(run(&u, &["copy", "r1", "w1"]), Ok(()));
    assert_eq!(run(&u, &["mset", "k1", "v", "x", "v"]), Err(Denied::Key(3)));
    assert_eq!(u.root().keys.len(), 3);
    assert_eq!(
        text(&user(&["%R~a", "%W~a"]).describe()),
        "off ~a resetchannels -@all"
    );
}

#[test]
fn channels_literal_for_patterns() {
    // Catches: PSUBSCRIBE's pattern matched as a glob, PUBLISH not checked.
    let u = user(&["+@all", "~*", "&news.*"]);
    assert_eq!(run(&u, &["publish", "news.a", "m"]), Ok(()));
    assert_eq!(run(&u, &["publish", "other", "m"]), Err(Denied::Channel(1)));
    assert_eq!(
        run(&u, &["subscribe", "news.a", "x"]),
        Err(Denied::Channel(2))
    );
    assert_eq!(run(&u, &["psubscribe", "news.*"]), Ok(()));
    assert_eq!(run(&u, &["psubscribe", "news.a*"]), Err(Denied::Channel(1)));
}

#[test]
fn selectors_are_alternatives() {
    // Catches: selectors checked as all-must-pass, the most relevant denial not kept.
    let u = user(&["+get", "~a*", "(+set ~b*)"]);
    assert_eq!(run(&u, &["get", "a1"]), Ok(()));
    assert_eq!(run(&u, &["set", "b1", "v"]), Ok(()));
    assert_eq!(run(&u, &["get", "b1"]), Err(Denied::Key(1)));
    assert_eq!(run(&u, &["hget", "a", "f"]), Err(Denied::Command));
    assert_eq!(
        text(&u.describe()),
        "off ~a* resetchannels -@all +get (~b* resetchannels -@all +set)"
    );
}

#[test]
fn rule_errors() {
    // Catches: a rule error that still changes the user, patterns after `*` accepted.
    let mut u = user(&["~*"]);
    assert_eq!(u.apply(b"~k", false), Err(RuleError::AfterAllKeys));
    assert_eq!(u.apply(b"+nosuch", false), Err(RuleError::Unknown));
    assert_eq!(u.apply(b"+@nosuch", false), Err(RuleError::Unknown));
    assert_eq!(u.apply(b"-select|0", false), Err(RuleError::Unknown));
    assert_eq!(
        u.apply(b"+config|get|x", false),
        Err(RuleError::FirstArgOfSubcommand)
    );
    assert_eq!(u.apply(b"<nopw", false), Err(RuleError::NoSuchPassword));
    assert_eq!(u.apply(b"#abc", false), Err(RuleError::BadHash));
    assert_eq!(user(&[]).apply(b"%X~k", false), Err(RuleError::Syntax));
    assert_eq!(user(&[]).apply(b"%~k", false), Err(RuleError::Syntax));
    assert_eq!(u.apply(b"bogus", false), Err(RuleError::Syntax));
}

#[test]
fn passwords() {
    // Catches: a disabled user logging in, `nopass` kept after a password.
    let mut u = user(&["on", ">secret"]);
    assert!(u.password_matches(b"secret") && !u.password_matches(b"other"));
    assert_eq!(
        u.passwords[0],
        "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
    );
    u.apply(b"off", false).expect("valid");
    assert!(!u.password_matches(b"secret"));
    u.apply(b"on", false).expect("valid");
    u.apply(b"nopass", false).expect("valid");
    assert!(u.password_matches(b"anything") && u.passwords.is_empty());
    u.apply(b"reset", false).expect("valid");
    assert_eq!(
        text(&u.describe()),
        "off sanitize-payload resetchannels -@all"
    );
}

#[test]
fn selector_arguments_merge() {
    let args: Vec<&[u8]> = vec![b"on", b"(+get", b"~a)", b"(+set)"];
    let merged = merge_selectors(&args).expect("balanced");
    assert_eq!(
        merged,
        vec![b"on".to_vec(), b"(+get ~a)".to_vec(), b"(+set)".to_vec()]
    );
    assert_eq!(merge_selectors(&[b"(+get".as_slice()]), Err(0));
}

#[test]
fn every_served_command_has_its_acl_id() {
    // Catches build.rs giving a command another command's bit.
    for command in table::TABLE.commands {
        assert_eq!(crate::acl::ids::entry(command.acl_id).name, command.name);
        for sub in command.subcommands {
            assert_eq!(crate::acl::ids::entry(sub.acl_id).name, sub.name);
        }
    }
}

#[test]
fn acl_categories_are_the_tables() {
    // Catches the ACL's category bits drifting from the command table's.
    assert_eq!(
        crate::acl::ids::CATEGORIES,
        crate::commands::spec::AclCategories::NAMES
    );
}
