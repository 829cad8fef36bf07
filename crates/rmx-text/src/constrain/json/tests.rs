use super::*;

const VALID: &[&str] = &[
    "{}",
    "  \n\t{ }",
    r#"{"a":1}"#,
    r#"{"a": -0.5e+3, "b": 0, "c": 12.25, "d": 1E9, "e": -0, "f": 3e-2}"#,
    r#"{"t": true, "f": false, "n": null}"#,
    r#"{"nested": {"deep": [1, [2, [3, {"x": []}]], {}]}}"#,
    r#"{"esc": "a\"b\\c\/d\b\f\n\r\t", "u": "\u00e9\u4E2D", "pair": "\ud83d\ude00"}"#,
    "{\"utf8\": \"héllo 中文 😀\"}",
    "{\n  \"pretty\": [\n    1,\n    2\n  ]\n}",
    r#"{"":""}"#,
];

fn accepts_all_prefixes(text: &str) {
    let mut s = JsonState::new();
    for (i, b) in text.bytes().enumerate() {
        assert!(
            !s.is_complete(),
            "{text:?}: complete before byte {i}, but the text goes on"
        );
        s.push(b)
            .unwrap_or_else(|e| panic!("{text:?}: byte {i} ({:?}) refused: {e:?}", b as char));
    }
    assert!(s.is_complete(), "{text:?}: not complete at the end");
    assert_eq!(s.min_close(), 0);
}

#[test]
fn every_prefix_of_valid_objects_is_accepted_and_the_whole_is_complete() {
    for text in VALID {
        // The cases are valid JSON by the reference parser too.
        serde_json::from_str::<serde_json::Value>(text).unwrap();
        accepts_all_prefixes(text);
    }
}

#[test]
fn serde_json_round_trips_are_accepted() {
    let v = serde_json::json!({
        "name": "get_weather",
        "arguments": {"city": "Zürich", "days": [1, 2.5, -3e10], "ok": true, "none": null,
                      "quote": "he said \"hi\"\n", "tab": "\t", "ctrl": "\u{1}"}
    });
    accepts_all_prefixes(&serde_json::to_string(&v).unwrap());
    accepts_all_prefixes(&serde_json::to_string_pretty(&v).unwrap());
}

/// Where each invalid text is refused: the offset of the first bad byte.
#[test]
fn invalid_inputs_are_refused_at_the_right_byte() {
    let cases: &[(&str, usize)] = &[
        ("[1]", 0),
        ("\"s\"", 0),
        ("x", 0),
        ("{a", 1),
        ("{\"a\" 1", 5),
        ("{\"a\":}", 5),
        ("{\"a\":1,}", 7),
        ("{\"a\":01}", 6),
        ("{\"a\":1.}", 7),
        ("{\"a\":-}", 6),
        ("{\"a\":1e}", 7),
        ("{\"a\":+1}", 5),
        ("{\"a\":tru}", 8),
        ("{\"a\":nul1}", 8),
        ("{\"a\":[1,]}", 8),
        ("{\"a\":[1}", 7),
        ("{\"a\":{]}", 6),
        ("{\"a\":\"\\x\"}", 7),
        ("{\"a\":\"\\u12G4\"}", 10),
        ("{\"a\":\"\n\"}", 6),
        ("{} ", 2),
        ("{}{}", 2),
        // A lone low surrogate, and a high one not followed by a low one.
        ("{\"a\":\"\\udc00\"}", 9),
        ("{\"a\":1e999}", 9),
        ("{\"a\":\"\\ud800x\"}", 12),
        ("{\"a\":\"\\ud800\\u0041\"}", 15),
    ];
    for &(text, at) in cases {
        let mut s = JsonState::new();
        let err = s.push_str(text).expect_err(text);
        assert_eq!(err.0, at, "{text:?}: refused at {} instead of {at}", err.0);
        assert_eq!(err.1, JsonError::Unexpected);
        // The state is left as before the call.
        assert_eq!(s, JsonState::new());
    }
}

#[test]
fn bad_utf8_inside_strings_is_refused() {
    let bad: &[&[u8]] = &[
        b"{\"a\":\"\xC0\x80",     // overlong
        b"{\"a\":\"\xED\xA0\x80", // a surrogate in UTF-8
        b"{\"a\":\"\xE2\x28",     // not a continuation byte
        b"{\"a\":\"\xF5\x80",     // past U+10FFFF
        b"{\"a\":\"\xF0\x80\x80", // overlong 4-byte
    ];
    for text in bad {
        assert!(JsonState::new().push_bytes(text).is_err(), "{text:?}");
    }
    // Half a character is a valid prefix: the rest may come with the next token.
    let mut s = JsonState::new();
    s.push_bytes(b"{\"a\":\"\xE4\xB8").unwrap();
    assert_eq!(s.min_close(), 1 + 1 + 1);
    s.push_bytes(b"\xAD\"}").unwrap();
    assert!(s.is_complete());
}

#[test]
fn nesting_deeper_than_the_limit_is_refused() {
    let mut s = JsonState::new();
    s.push(b'{').unwrap();
    s.push_str(r#""a":"#).unwrap();
    for _ in 1..MAX_DEPTH {
        s.push(b'[').unwrap();
    }
    assert_eq!(s.depth(), MAX_DEPTH);
    assert_eq!(s.push(b'['), Err(JsonError::TooDeep));
    assert_eq!(s.push(b'{'), Err(JsonError::TooDeep));
    for _ in 1..MAX_DEPTH {
        s.push(b']').unwrap();
    }
    s.push(b'}').unwrap();
    assert!(s.is_complete());
}

#[test]
fn min_close_is_the_length_of_a_shortest_completion() {
    // For each prefix, a completion of exactly `min_close` bytes exists: found by trying
    // every completion of that length over a small alphabet would be slow, so check the
    // one the function implies instead.
    let cases: &[(&str, &str)] = &[
        ("", "{}"),
        ("{", "}"),
        ("{\"ab", "\":0}"),
        ("{\"a\"", ":0}"),
        ("{\"a\":", "0}"),
        ("{\"a\":[", "]}"),
        ("{\"a\":[1,", "0]}"),
        ("{\"a\":-", "0}"),
        ("{\"a\":1.", "0}"),
        ("{\"a\":1e+", "0}"),
        ("{\"a\":12", "}"),
        ("{\"a\":tr", "ue}"),
        ("{\"a\":\"\\", "n\"}"),
        ("{\"a\":\"\\u0", "000\"}"),
        ("{\"a\":\"\\ud8", "00\\udc00\"}"),
        ("{\"a\":\"\\ud800", "\\udc00\"}"),
        ("{\"a\":1,", "\"\":0}"),
        ("{\"a\":{\"b\":[{", "}]}}"),
    ];
    for &(prefix, rest) in cases {
        let mut s = JsonState::new();
        s.push_str(prefix).unwrap();
        assert_eq!(s.min_close(), rest.len(), "{prefix:?}");
        s.push_str(rest).unwrap();
        assert!(s.is_complete(), "{prefix:?} + {rest:?}");
    }
}

#[test]
fn whitespace_runs_between_tokens_are_bounded() {
    let mut s = JsonState::new();
    s.push_str("{\n").unwrap();
    // A second line break in the same gap is refused; indentation up to the cap is not.
    assert_eq!(s.push(b'\n'), Err(JsonError::Unexpected));
    s.push_str(&" ".repeat(MAX_WS_RUN as usize)).unwrap();
    assert_eq!(s.push(b' '), Err(JsonError::Unexpected));
    // Any other byte starts a new gap; whitespace inside strings is text, not a gap.
    s.push_str(&format!("\"{}\":\n1", " ".repeat(100))).unwrap();
    s.push_str("\n}").unwrap();
    assert!(s.is_complete());
}

#[test]
fn top_level_values_of_each_kind() {
    let whole = |top: Top, text: &str| {
        let mut s = JsonState::of(top);
        s.push_str(text).map(|_| s)
    };
    assert!(whole(Top::String, "\"a\\n\"").unwrap().is_complete());
    assert!(whole(Top::Any, "null").unwrap().is_complete());
    assert!(whole(Top::Array, "[1, {}]").unwrap().is_complete());
    // A number is never complete by itself: it could go on. It can end, though.
    let n = whole(Top::Number, "-1.5e3").unwrap();
    assert!(!n.is_complete() && n.can_end());
    assert!(!whole(Top::Number, "-").unwrap().can_end());
    assert!(whole(Top::Integer, "12.5").is_err());
    assert!(whole(Top::Integer, "1e5").is_err());
    assert!(whole(Top::String, "1").is_err());
    assert!(whole(Top::Object, "[").is_err());
    assert_eq!(JsonState::of(Top::Integer).min_close(), 1);
    assert_eq!(JsonState::of(Top::String).min_close(), 2);
}
