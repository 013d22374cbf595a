use super::*;

/// Catches a CONFIG SET that applies the pairs before a later one fails (Redis 7.0 sets all
/// or none), that lets a client change an immutable setting, or that misses a duplicate.
#[test]
fn set_many_is_all_or_none() {
    let config = Config::default();
    let err = config
        .set_many(
            &[("maxclients", "5"), ("slowlog-max-len", "x")],
            Origin::Client,
        )
        .unwrap_err();
    assert_eq!(
        err,
        "ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument \
         couldn't be parsed into an integer"
    );
    assert_eq!(config.get("maxclients"), "10000");
    assert_eq!(config.max_clients(), 10_000);
    let err = config
        .set_many(&[("databases", "4")], Origin::Client)
        .unwrap_err();
    assert!(
        err.ends_with("'databases') - can't set immutable config"),
        "{err}"
    );
    config
        .set_many(&[("databases", "4")], Origin::Startup)
        .unwrap();
    assert_eq!(config.get("databases"), "4");
    let err = config
        .set_many(&[("maxclients", "5"), ("MAXCLIENTS", "6")], Origin::Client)
        .unwrap_err();
    assert!(err.ends_with("duplicate parameter"), "{err}");
    let err = config
        .set_many(&[("nosuch", "1")], Origin::Client)
        .unwrap_err();
    assert_eq!(
        err,
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    config
        .set_many(
            &[
                ("maxclients", "5"),
                ("slowlog-log-slower-than", "-1"),
                ("requirepass", "pw"),
            ],
            Origin::Client,
        )
        .unwrap();
    assert_eq!(config.max_clients(), 5);
    assert_eq!(config.slowlog_slower_than_us(), -1);
    assert_eq!(
        config.requirepass().as_deref().map(Vec::as_slice),
        Some(&b"pw"[..])
    );
    config
        .set_many(&[("requirepass", "")], Origin::Client)
        .unwrap();
    assert!(config.requirepass().is_none(), "an empty password is none");
}

/// Catches values kept as typed instead of normalized (sizes in bytes, yes/no lowercase) and
/// ranges not enforced, including tamer's bound on the slow log.
#[test]
fn values_are_checked_and_normalized() {
    let config = Config::default();
    assert_eq!(config.get("proto-max-bulk-len"), "536870912");
    assert_eq!(config.get("cache-size"), (256u64 << 20).to_string());
    config
        .set_many(
            &[("cache-size", "1GB"), ("protected-mode", "NO")],
            Origin::Startup,
        )
        .unwrap();
    assert_eq!(config.get("cache-size"), (1u64 << 30).to_string());
    assert_eq!(config.get("protected-mode"), "no");
    assert_eq!(parse_memory("64k"), Some(64_000));
    assert_eq!(parse_memory("64kb"), Some(65_536));
    assert_eq!(parse_memory("10x"), None);
    assert_eq!(parse_memory("99999999999999999999gb"), None);
    let err = config
        .set_many(&[("slowlog-max-len", "10001")], Origin::Client)
        .unwrap_err();
    assert!(
        err.ends_with("argument must be between 0 and 10000 inclusive"),
        "{err}"
    );
    let err = config
        .set_many(&[("durability", "sometimes")], Origin::Startup)
        .unwrap_err();
    assert!(err.contains("commit, periodic, none"), "{err}");
}

/// Catches CONFIG GET listing a setting twice for two patterns, or missing one.
#[test]
fn matching_lists_each_setting_once() {
    let config = Config::default();
    let got = config.matching(&[b"max*", b"maxclients", b"port"]);
    let names: Vec<&str> = got.iter().map(|(n, _)| *n).collect();
    let want = [
        "maxclients",
        "maxmemory",
        "port",
        "maxmemory-clients",
        "maxmemory-eviction-tenacity",
        "maxmemory-policy",
        "maxmemory-samples",
    ];
    assert_eq!(names, want);
    assert_eq!(
        config.matching(&[b"*"]).len(),
        SETTINGS.len() + ALIASES.len() + REDIS_ONLY.len() + REDIS_ONLY_ALIASES.len()
    );
}

/// Catches a registry out of order (lookups binary-search it), with a bad default, with a
/// name in both tables, or with an alias that names no setting.
#[test]
fn registry_is_sorted_and_defaults_valid() {
    for table in [SETTINGS, REDIS_ONLY] {
        for pair in table.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
    }
    for s in registry() {
        normalize(s.kind, s.default).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        assert_eq!(setting_at(find(s.name).unwrap()).name, s.name);
    }
    for s in REDIS_ONLY {
        assert!(
            SETTINGS.binary_search_by(|t| t.name.cmp(s.name)).is_err(),
            "{}",
            s.name
        );
    }
    for (alias, name) in ALIASES.iter().chain(REDIS_ONLY_ALIASES) {
        assert_eq!(setting_at(find(alias).unwrap()).name, *name);
    }
}

/// Catches a `Fixed` setting that takes another value (from a client or the config file),
/// or that refuses its own default; an immutable or protected one a client changes.
#[test]
fn redis_only_settings_keep_their_mutability() {
    let config = Config::default();
    let fixed = "ERR CONFIG SET failed (possibly related to argument 'tls-port') - tamer does \
                 not support changing it (kept at Redis's default)";
    for origin in [Origin::Client, Origin::Startup] {
        assert_eq!(
            config.set_many(&[("tls-port", "6380")], origin),
            Err(fixed.into())
        );
        assert_eq!(config.set_many(&[("tls-port", "0")], origin), Ok(()));
        assert!(config
            .set_many(&[("slaveof", "localhost 6379")], origin)
            .is_err());
    }
    let immutable = config.set_many(&[("tcp-backlog", "100")], Origin::Client);
    assert!(immutable
        .unwrap_err()
        .ends_with("can't set immutable config"));
    let protected = config.set_many(&[("dbfilename", "x.rdb")], Origin::Client);
    assert!(protected
        .unwrap_err()
        .ends_with("can't set protected config"));
    config
        .set_many(&[("tcp-backlog", "100")], Origin::Startup)
        .unwrap();
    config
        .set_many(&[("maxmemory-policy", "AllKeys-LRU")], Origin::Client)
        .unwrap();
    assert_eq!(config.get("maxmemory-policy"), "allkeys-lru");
    assert_eq!(config.get("tcp-backlog"), "100");
}

/// Catches a TOML loader that accepts an unknown key, a bad value or a nested table, or
/// that reads booleans other than as yes/no.
#[test]
fn toml_is_checked_against_the_registry() {
    let pairs = from_toml("port = 7000\nprotected-mode = false\ncache-size = \"1gb\"\n").unwrap();
    assert_eq!(
        pairs,
        [
            ("cache-size".to_string(), "1gb".to_string()),
            ("port".to_string(), "7000".to_string()),
            ("protected-mode".to_string(), "no".to_string()),
        ]
    );
    let err = from_toml("prot = 1").unwrap_err();
    assert!(err.starts_with("unknown setting 'prot'"), "{err}");
    let err = from_toml("port = 70000").unwrap_err();
    assert!(err.contains("between 0 and 65535"), "{err}");
    let err = from_toml("[server]\nport = 1").unwrap_err();
    assert!(err.contains("unknown setting 'server'"), "{err}");
    let err = from_toml("port = [1]").unwrap_err();
    assert!(err.contains("not array"), "{err}");
    assert!(from_toml("port = ").is_err());
}

/// Catches an alias that `CONFIG SET` does not take, that sets something else, or that
/// `CONFIG GET` leaves out (Redis lists `lua-time-limit` beside `busy-reply-threshold`).
#[test]
fn an_alias_reads_and_writes_its_setting() {
    let config = Config::default();
    config
        .set_many(&[("lua-time-limit", "100")], Origin::Client)
        .unwrap();
    assert_eq!(config.busy_reply_threshold_ms(), 100);
    let got = config.matching(&[b"*time-limit*".as_slice()]);
    assert_eq!(got, [("lua-time-limit", "100".to_string())]);
    let got = config.matching(&[b"busy*".as_slice()]);
    assert_eq!(got, [("busy-reply-threshold", "100".to_string())]);
}

/// Catches a `save` check looser or stricter than Redis's (odd pairs, zero seconds, negative
/// changes, doubled spaces refused; empty and zero changes taken; numbers shown again).
#[test]
fn save_is_checked_as_redis_checks_it() {
    for ok in ["", "1 0", "3600 1 300 100"] {
        assert_eq!(normalize(Kind::Save, ok), Ok(ok.to_string()), "{ok:?}");
    }
    assert_eq!(normalize(Kind::Save, "+5 1"), Ok("5 1".to_string()));
    for bad in ["1", "0 1", "-1 1", "1 -1", "1 2 3", " 10   20 ", "1x 2"] {
        assert_eq!(
            normalize(Kind::Save, bad),
            Err("Invalid save parameters".to_string()),
            "{bad:?}"
        );
    }
}

/// `CONFIG REWRITE`'s text. Catches a comment or an unknown line dropped, a setting written
/// twice, a default added, an old `user` array (over several lines) kept beside the new one.
#[test]
fn rewrite_keeps_comments_and_updates_in_place() {
    let config = Config::default();
    config
        .set_many(
            &[("maxclients", "1234"), ("slowlog-max-len", "7")],
            Origin::Client,
        )
        .expect("valid");
    let old = "# my settings\nport = 6390\nmaxclients = 10\n\nuser = [\n  \"a on\",\n  \"b off\",\n]\nnotify-keyspace-events = \"\"\n";
    let values = config.lock().clone();
    let users = Some(vec!["default on nopass ~* &* +@all".to_string()]);
    let text = super::rewrite::rewritten(old, &values, users);
    assert_eq!(
        text,
        "# my settings\nport = 6379\nmaxclients = 1234\n\nnotify-keyspace-events = \"\"\n\
         # Written by CONFIG REWRITE\nslowlog-max-len = 7\n\
         user = [\n    \"default on nopass ~* &* +@all\",\n]\n"
    );
    let pairs = from_toml(&text).expect("the rewritten file parses");
    assert!(pairs.contains(&("maxclients".to_string(), "1234".to_string())));
    assert_eq!(users_from_toml(&text).expect("users").len(), 1);
}
