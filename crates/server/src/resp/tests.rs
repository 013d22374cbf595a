//! The codec against Redis's documented wire format and error texts, and property tests:
//! any request split at any points parses to its arguments; no input panics or holds more
//! arguments than the limit. Each test names the mutation it catches.

use proptest::prelude::*;

use super::write;
use super::*;

/// `args` as a client library sends them.
fn multibulk(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn parse_all(bytes: &[u8]) -> Result<Parsed, ProtocolError> {
    RequestParser::default().parse(bytes)
}

fn args_of(parsed: &Parsed, buf: &[u8]) -> Vec<Vec<u8>> {
    match parsed {
        Parsed::Request { args, .. } => args.iter().map(|a| a.bytes(buf).to_vec()).collect(),
        other => panic!("not a request: {other:?}"),
    }
}

fn err(bytes: &[u8]) -> String {
    parse_all(bytes).expect_err("a protocol error").0
}

/// Catches: ranges off by the header's length, a `consumed` that leaves the CRLF behind.
#[test]
fn a_multibulk_request_is_its_arguments() {
    let bytes = multibulk(&[b"SET".to_vec(), b"k".to_vec(), b"v\r\nx".to_vec()]);
    let parsed = parse_all(&bytes).unwrap();
    assert_eq!(args_of(&parsed, &bytes), [&b"SET"[..], b"k", b"v\r\nx"]);
    assert!(matches!(parsed, Parsed::Request { consumed, .. } if consumed == bytes.len()));
}

/// Catches: a parser that restarts from the beginning and loses arguments it had, or that
/// asks for fewer bytes than the bulk needs.
#[test]
fn incomplete_requests_say_how_many_bytes_they_need() {
    let bytes = b"*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n";
    let mut parser = RequestParser::default();
    assert_eq!(
        parser.parse(b"").unwrap(),
        Parsed::Incomplete { min_len: 1 }
    );
    assert_eq!(
        parser.parse(&bytes[..3]).unwrap(),
        Parsed::Incomplete { min_len: 4 }
    );
    // "$5" without its line end, then the bulk's first byte: all 24 bytes are needed.
    assert_eq!(
        parser.parse(&bytes[..15]).unwrap(),
        Parsed::Incomplete { min_len: 16 }
    );
    assert_eq!(
        parser.parse(&bytes[..18]).unwrap(),
        Parsed::Incomplete { min_len: 24 }
    );
    let parsed = parser.parse(bytes).unwrap();
    assert_eq!(args_of(&parsed, bytes), [&b"GET"[..], b"hello"]);
}

/// Redis ignores `*0` and `*-1` and empty inline lines. Catches a parser that returns an
/// empty request (a command dispatch on no name).
#[test]
fn empty_requests_are_nothing() {
    assert_eq!(
        parse_all(b"*0\r\n").unwrap(),
        Parsed::Nothing { consumed: 4 }
    );
    assert_eq!(
        parse_all(b"*-1\r\n").unwrap(),
        Parsed::Nothing { consumed: 5 }
    );
    assert_eq!(parse_all(b"\r\n").unwrap(), Parsed::Nothing { consumed: 2 });
    assert_eq!(
        parse_all(b"   \n").unwrap(),
        Parsed::Nothing { consumed: 4 }
    );
}

/// Redis 7.0's texts (networking.c). Catches a wrong text or a missing check.
#[test]
fn malformed_requests_get_redis_error_texts() {
    assert_eq!(err(b"*x\r\n"), "Protocol error: invalid multibulk length");
    assert_eq!(
        err(b"*2147483648\r\n"),
        "Protocol error: invalid multibulk length"
    );
    assert_eq!(err(b"*+1\r\n"), "Protocol error: invalid multibulk length");
    assert_eq!(err(b"*01\r\n"), "Protocol error: invalid multibulk length");
    assert_eq!(
        err(b"*1\r\n:1\r\n"),
        "Protocol error: expected '$', got ':'"
    );
    assert_eq!(
        err(b"*1\r\n*1\r\n"),
        "Protocol error: expected '$', got '*'"
    );
    assert_eq!(err(b"*1\r\n$-1\r\n"), "Protocol error: invalid bulk length");
    assert_eq!(
        err(b"*1\r\n$536870913\r\n"),
        "Protocol error: invalid bulk length"
    );
    assert_eq!(
        err(b"*1\r\n$abc\r\n"),
        "Protocol error: invalid bulk length"
    );
    assert_eq!(
        err(b"*1\r\n$1\r\nab\r\n"),
        "Protocol error: expected CRLF after a bulk string"
    );
    assert_eq!(err(b"*1\rx"), "Protocol error: expected '\\n' after '\\r'");
    assert_eq!(
        err(b"SET \"k v\n"),
        "Protocol error: unbalanced quotes in request"
    );
    assert_eq!(
        err(b"SET \"k\"v\n"),
        "Protocol error: unbalanced quotes in request"
    );
    assert_eq!(
        err(b"SET 'k\n"),
        "Protocol error: unbalanced quotes in request"
    );
}

/// Lines without an end past the inline limit fail at once, before more is buffered.
/// Catches a parser that waits for (and lets the caller buffer) an endless line.
#[test]
fn endless_lines_fail_at_the_inline_limit() {
    let limits = Limits {
        max_inline_bytes: 32,
        ..Limits::default()
    };
    let long = vec![b'a'; 40];
    let mut parser = RequestParser::new(limits);
    assert_eq!(
        parser.parse(&long).unwrap_err().0,
        "Protocol error: too big inline request"
    );
    let mut count = b"*".to_vec();
    count.extend_from_slice(&[b'1'; 40]);
    let mut parser = RequestParser::new(limits);
    assert_eq!(
        parser.parse(&count).unwrap_err().0,
        "Protocol error: too big mbulk count string"
    );
    let mut bulk = b"*1\r\n$".to_vec();
    bulk.extend_from_slice(&[b'1'; 40]);
    let mut parser = RequestParser::new(limits);
    assert_eq!(
        parser.parse(&bulk).unwrap_err().0,
        "Protocol error: too big bulk count string"
    );
    // Under the limit, the same lines are only incomplete.
    let mut parser = RequestParser::new(limits);
    assert!(matches!(
        parser.parse(&long[..30]),
        Ok(Parsed::Incomplete { .. })
    ));
}

/// A count past `max_args` and a bulk past `max_bulk_bytes` are refused from their header,
/// before any of their bytes arrive. Catches limits checked only after buffering.
#[test]
fn limits_are_checked_at_the_header() {
    let limits = Limits {
        max_args: 3,
        max_bulk_bytes: 10,
        ..Limits::default()
    };
    let mut parser = RequestParser::new(limits);
    assert_eq!(
        parser.parse(b"*4\r\n").unwrap_err().0,
        "Protocol error: invalid multibulk length"
    );
    let mut parser = RequestParser::new(limits);
    assert_eq!(
        parser.parse(b"*1\r\n$11\r\n").unwrap_err().0,
        "Protocol error: invalid bulk length"
    );
    let mut parser = RequestParser::new(limits);
    assert!(matches!(
        parser.parse(b"*1\r\n$10\r\n"),
        Ok(Parsed::Incomplete { min_len: 21 })
    ));
}

/// Inline commands split as `sdssplitargs` does. Catches escapes and quotes mishandled.
#[test]
fn inline_commands_split_as_redis_splits_them() {
    let cases: [(&[u8], &[&[u8]]); 6] = [
        (b"PING\r\n", &[b"PING"]),
        (b"  set  k   v \n", &[b"set", b"k", b"v"]),
        (b"SET k \"a b\"\r\n", &[b"SET", b"k", b"a b"]),
        (b"SET k \"\\x41\\n\\\"\"\n", &[b"SET", b"k", b"A\n\""]),
        (b"SET k 'it\\'s'\n", &[b"SET", b"k", b"it's"]),
        (b"SET k \"\"\n", &[b"SET", b"k", b""]),
    ];
    for (line, want) in cases {
        let parsed = parse_all(line).unwrap();
        let want: Vec<Vec<u8>> = want.iter().map(|a| a.to_vec()).collect();
        assert_eq!(
            args_of(&parsed, line),
            want,
            "{}",
            String::from_utf8_lossy(line)
        );
        assert!(matches!(parsed, Parsed::Request { consumed, .. } if consumed == line.len()));
    }
}

/// Catches a wrong `string2ll`: leading zeros, `-0`, overflow, signs.
#[test]
fn numbers_are_parsed_strictly() {
    assert_eq!(parse_i64(b"0"), Some(0));
    assert_eq!(parse_i64(b"-12"), Some(-12));
    assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"-0",
        b"007",
        b"+1",
        b" 1",
        b"1 ",
        b"9223372036854775808",
    ] {
        assert_eq!(parse_i64(bad), None, "{}", String::from_utf8_lossy(bad));
    }
}

/// Every reply type in both protocols, as Redis writes it. Catches a wrong type byte or a
/// RESP3 type leaking to a RESP2 client.
#[test]
fn replies_encode_as_redis_writes_them() {
    let enc = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    };
    use Protocol::{Resp2, Resp3};
    assert_eq!(enc(&|o| write::simple(o, "OK")), "+OK\r\n");
    assert_eq!(enc(&|o| write::simple(o, "a\r\nb")), "+a  b\r\n");
    assert_eq!(enc(&|o| write::error(o, "ERR unknown")), "-ERR unknown\r\n");
    assert_eq!(enc(&|o| write::integer(o, -7)), ":-7\r\n");
    assert_eq!(enc(&|o| write::bulk(o, b"hi")), "$2\r\nhi\r\n");
    assert_eq!(enc(&|o| write::bulk(o, b"")), "$0\r\n\r\n");
    assert_eq!(enc(&|o| write::null(o, Resp2)), "$-1\r\n");
    assert_eq!(enc(&|o| write::null(o, Resp3)), "_\r\n");
    assert_eq!(enc(&|o| write::null_array(o, Resp2)), "*-1\r\n");
    assert_eq!(enc(&|o| write::array(o, 3)), "*3\r\n");
    assert_eq!(enc(&|o| write::map(o, 2, Resp2)), "*4\r\n");
    assert_eq!(enc(&|o| write::map(o, 2, Resp3)), "%2\r\n");
    assert_eq!(enc(&|o| write::set(o, 2, Resp3)), "~2\r\n");
    assert_eq!(enc(&|o| write::push(o, 2, Resp3)), ">2\r\n");
    assert_eq!(enc(&|o| write::double(o, 1.5, Resp3)), ",1.5\r\n");
    assert_eq!(enc(&|o| write::double(o, 3.0, Resp2)), "$1\r\n3\r\n");
    assert_eq!(
        enc(&|o| write::double(o, f64::NEG_INFINITY, Resp3)),
        ",-inf\r\n"
    );
    assert_eq!(enc(&|o| write::boolean(o, true, Resp3)), "#t\r\n");
    assert_eq!(enc(&|o| write::boolean(o, false, Resp2)), ":0\r\n");
    assert_eq!(
        enc(&|o| write::verbatim(o, b"txt", b"hi", Resp3)),
        "=6\r\ntxt:hi\r\n"
    );
    assert_eq!(
        enc(&|o| write::verbatim(o, b"txt", b"hi", Resp2)),
        "$2\r\nhi\r\n"
    );
}

/// Catches an aggregate counted short (a map's pairs, nested arrays) or a bulk's CRLF left.
#[test]
fn reply_lengths_cover_whole_replies() {
    for reply in [
        &b"+OK\r\n"[..],
        b"$-1\r\n",
        b"$3\r\nabc\r\n",
        b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
        b"%1\r\n+k\r\n*2\r\n:1\r\n:2\r\n",
        b"*0\r\n",
        b"*-1\r\n",
    ] {
        let mut stream = reply.to_vec();
        stream.extend_from_slice(b"+NEXT\r\n");
        assert_eq!(reply_len(&stream).unwrap(), Some(reply.len()));
        for cut in 0..reply.len() {
            assert_eq!(reply_len(&reply[..cut]).unwrap(), None, "cut at {cut}");
        }
    }
}

fn arb_args() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A pipeline of requests, fed as it would arrive in reads split at arbitrary points,
    /// parses to exactly its requests. Catches state kept wrong across partial reads, and
    /// `consumed` off by any byte (the next request would then fail).
    #[test]
    fn pipelines_parse_across_any_read_boundaries(
        requests in prop::collection::vec(arb_args(), 1..5),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let stream: Vec<u8> = requests.iter().flat_map(|r| multibulk(r)).collect();
        let mut arrive: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        arrive.push(stream.len());
        arrive.sort_unstable();
        let mut parser = RequestParser::default();
        let (mut start, mut got) = (0usize, Vec::new());
        for end in arrive {
            // Bounded: each pass consumes a request or waits for the next read.
            loop {
                let buf = &stream[start..end];
                match parser.parse(buf).unwrap() {
                    Parsed::Request { args, consumed } => {
                        got.push(args.iter().map(|a| a.bytes(buf).to_vec()).collect::<Vec<_>>());
                        start += consumed;
                    }
                    Parsed::Nothing { consumed } => start += consumed,
                    Parsed::Incomplete { min_len } => {
                        prop_assert!(min_len > buf.len());
                        break;
                    }
                }
            }
        }
        prop_assert_eq!(start, stream.len());
        prop_assert_eq!(got, requests);
    }

    /// Any bytes: no panic, requests' ranges inside the buffer, never more arguments than
    /// the limit, `consumed` within the buffer. Catches an unchecked index or a limit bypass.
    #[test]
    fn any_bytes_are_parsed_or_refused_without_panic(
        bytes in prop::collection::vec(
            prop::sample::select(b"*$\r\n0123456789-ab \"'\\x".to_vec()), 0..80),
    ) {
        let limits = Limits { max_args: 4, max_bulk_bytes: 16, max_inline_bytes: 24 };
        let mut parser = RequestParser::new(limits);
        match parser.parse(&bytes) {
            Ok(Parsed::Request { args, consumed }) => {
                prop_assert!(consumed <= bytes.len());
                prop_assert!(!args.is_empty() && args.len() <= limits.max_args);
                for a in &args {
                    if let Arg::At(r) = a {
                        prop_assert!(r.end <= consumed);
                    }
                }
            }
            Ok(Parsed::Nothing { consumed }) => prop_assert!(consumed <= bytes.len()),
            Ok(Parsed::Incomplete { min_len }) => prop_assert!(min_len > bytes.len()),
            Err(e) => prop_assert!(e.0.starts_with("Protocol error: ")),
        }
    }
}
