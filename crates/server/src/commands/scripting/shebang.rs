//! A script's first line `#!lua flags=...` (Redis 7.0): which engine, and what the script
//! declares it does.

/// The flags a shebang declares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// `no-writes`: the script only reads (it may run under `EVAL_RO`, and when full).
    pub no_writes: bool,
    /// `allow-oom`: it runs even when the device is full.
    pub allow_oom: bool,
    /// `allow-stale`: accepted (tamer has no replicas yet).
    pub allow_stale: bool,
    /// `no-cluster`: accepted (tamer has no cluster mode yet).
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`: accepted (no cluster mode).
    pub allow_cross_slot_keys: bool,
}

/// A script's shebang: `Ok(None)` without one, else its flags and where the code starts (the
/// first line's newline, kept so that line numbers stay the user's); `Err` is the reply.
pub fn parse(body: &[u8]) -> Result<Option<(ScriptFlags, usize)>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let Some(newline) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..newline]);
    let mut parts = line.split_ascii_whitespace();
    let Some(engine) = parts.next() else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = ScriptFlags::default();
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
                _ => return Err(format!("ERR Unexpected flag in script shebang: {flag}")),
            }
        }
    }
    Ok(Some((flags, newline)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Catches each of Redis's shebang errors turning into another, a flag misread, or the
    /// code's start moved off the newline (line numbers would shift).
    #[test]
    fn shebangs_parse_as_redis_parses_them() {
        assert_eq!(parse(b"return 1"), Ok(None));
        assert_eq!(
            parse(b"#!lua\nreturn 1"),
            Ok(Some((ScriptFlags::default(), 5)))
        );
        let (flags, at) = parse(b"#!lua flags=no-writes,allow-oom\nreturn 1")
            .unwrap()
            .unwrap();
        assert!(flags.no_writes && flags.allow_oom && !flags.allow_stale);
        assert_eq!(at, 31);
        assert_eq!(
            parse(b"#!lua flags=\nx"),
            Ok(Some((ScriptFlags::default(), 12)))
        );
        let err = |body: &[u8]| parse(body).unwrap_err();
        assert_eq!(err(b"#!lua"), "ERR Invalid script shebang");
        assert_eq!(err(b"#!\n"), "ERR Unexpected engine in script shebang: #!");
        assert_eq!(
            err(b"#!not-lua\nreturn 1"),
            "ERR Unexpected engine in script shebang: #!not-lua"
        );
        assert_eq!(
            err(b"#!lua badger=data\nreturn 1"),
            "ERR Unknown lua shebang option: badger=data"
        );
        assert_eq!(
            err(b"#!lua flags=allow-oom,what?\nreturn 1"),
            "ERR Unexpected flag in script shebang: what?"
        );
    }
}
