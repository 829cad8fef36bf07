use super::*;
use crate::toolcall::parse_complete;

/// Every printable ASCII byte alone, some multi-byte pieces that cross JSON's structure, half
/// a UTF-8 character, and a `<think>` token, as byte-level vocabularies have them.
fn toy_vocab() -> TokenBytes {
    let mut pieces: Vec<Option<Box<[u8]>>> = (0x20u8..0x7F)
        .chain([b'\n'])
        .map(|b| Some(vec![b].into_boxed_slice()))
        .collect();
    for p in [
        "{\"", "\":", "\": \"", "\"}", "\", \"", "true", "false", "null", "123", "-0.5", "e+3",
        "},", "]}", "  ", "\n}", "hello", " world", "\\n", "\\u00", "e9", "<think>", "</think>",
        "get_", "weather", "time", "\"name\"",
    ] {
        pieces.push(Some(p.as_bytes().to_vec().into_boxed_slice()));
    }
    pieces.push(Some(b"\xE4\xB8".to_vec().into_boxed_slice()));
    pieces.push(Some(b"\xAD".to_vec().into_boxed_slice()));
    // A special token: no bytes.
    pieces.push(None);
    TokenBytes::from_pieces(pieces)
}

/// A reproducible walk that picks among the allowed ids with a xorshift generator.
fn walk(c: &Constraint, vocab: &TokenBytes, max_tokens: usize, seed: u64) -> (String, bool) {
    let mut state = ConstraintState::new(c, vocab).unwrap();
    let mut rng = seed | 1;
    let mut out = Vec::new();
    for step in 0..max_tokens {
        if state.is_complete() {
            break;
        }
        let ids = state.allowed(vocab, max_tokens - step).unwrap();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let id = ids[(rng % ids.len() as u64) as usize];
        state.accept(vocab, id).unwrap();
        out.extend_from_slice(vocab.get(id).unwrap());
    }
    // Thoughts are free text, so only the shape's part is sure to be UTF-8.
    (
        String::from_utf8_lossy(&out).into_owned(),
        state.is_complete(),
    )
}

#[test]
fn random_walks_under_json_mode_are_json_objects_within_max_tokens() {
    let vocab = toy_vocab();
    for seed in 0..200 {
        for max_tokens in [2, 3, 8, 40] {
            let (text, done) = walk(&Constraint::json_object(), &vocab, max_tokens, seed);
            assert!(
                done,
                "seed {seed}, max {max_tokens}: not complete: {text:?}"
            );
            let v: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("seed {seed}: {text:?}: {e}"));
            assert!(v.is_object(), "{text:?}");
        }
    }
}

#[test]
fn forced_hermes_calls_parse_into_one_call_of_an_allowed_tool() {
    let vocab = toy_vocab();
    let names = vec!["get_weather".to_string(), "get_time".to_string()];
    let c = Constraint::tool_call(ToolCallFormat::Hermes, names.clone()).unwrap();
    for seed in 0..100 {
        let (text, done) = walk(&c, &vocab, 80, seed);
        assert!(done, "{text:?}");
        assert!(text.starts_with("<tool_call>\n{\"name\": \""), "{text:?}");
        let (content, calls) = parse_complete(ToolCallFormat::Hermes, &text);
        assert_eq!(content.trim(), "", "{text:?}");
        assert_eq!(calls.len(), 1, "{text:?}");
        assert!(names.contains(&calls[0].name), "{text:?}");
        let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert!(args.is_object());
    }
}

#[test]
fn forced_llama3_calls_parse_into_one_call_of_an_allowed_tool() {
    let vocab = toy_vocab();
    let c = Constraint::tool_call(ToolCallFormat::Llama3Json, vec!["get_time".into()]).unwrap();
    for seed in 0..50 {
        let (text, done) = walk(&c, &vocab, 60, seed);
        assert!(done, "{text:?}");
        let (_, calls) = parse_complete(ToolCallFormat::Llama3Json, &text);
        assert_eq!(calls.len(), 1, "{text:?}");
        assert_eq!(calls[0].name, "get_time");
    }
}

#[test]
fn formats_that_cannot_be_forced_are_refused_by_name() {
    for f in [
        ToolCallFormat::Mistral,
        ToolCallFormat::Gemma,
        ToolCallFormat::Gemma4,
        ToolCallFormat::Qwen3Coder,
    ] {
        let e = Constraint::tool_call(f, vec!["f".into()]).unwrap_err();
        assert_eq!(e, ConstraintError::UnsupportedFormat(f));
        assert!(e.to_string().contains(f.name()), "{e}");
    }
    assert_eq!(
        Constraint::tool_call(ToolCallFormat::Hermes, vec![]).unwrap_err(),
        ConstraintError::NoNames
    );
}

#[test]
fn a_thought_runs_free_until_think_closes_then_the_shape_holds() {
    let vocab = toy_vocab();
    let c = Constraint::json_object().with_think(Think::Inside);
    let mut state = ConstraintState::new(&c, &vocab).unwrap();
    // While thinking, text that is no JSON at all is allowed.
    let hello = vocab.find("hello").unwrap();
    assert!(state.allowed(&vocab, 100).unwrap().contains(&hello));
    state.accept(&vocab, hello).unwrap();
    state
        .accept(&vocab, vocab.find("</think>").unwrap())
        .unwrap();
    assert!(!state.allowed(&vocab, 100).unwrap().contains(&hello));
    // Budget: with few tokens left, the thought is closed by force.
    for seed in 0..50 {
        let (text, done) = walk(&c, &vocab, 12, seed);
        assert!(done, "{text:?}");
        let json = text.split("</think>").nth(1).unwrap();
        assert!(serde_json::from_str::<serde_json::Value>(json)
            .unwrap()
            .is_object());
    }
}

#[test]
fn may_open_allows_the_think_token_only_first() {
    let vocab = toy_vocab();
    let open = vocab.find("<think>").unwrap();
    let c = Constraint::json_object().with_think(Think::MayOpen);
    let mut state = ConstraintState::new(&c, &vocab).unwrap();
    assert!(state.allowed(&vocab, 100).unwrap().contains(&open));
    state.accept(&vocab, vocab.find(" ").unwrap()).unwrap();
    assert!(!state.allowed(&vocab, 100).unwrap().contains(&open));
    let mut no = ConstraintState::new(&Constraint::json_object(), &vocab).unwrap();
    assert!(!no.allowed(&vocab, 100).unwrap().contains(&open));
}

#[test]
fn special_tokens_are_never_allowed_and_partial_utf8_pieces_are() {
    let vocab = toy_vocab();
    let special = (vocab.len() - 1) as u32;
    let half = vocab
        .find("\u{4E2D}")
        .map_or((vocab.len() - 3) as u32, |i| i);
    let mut state = ConstraintState::new(&Constraint::json_object(), &vocab).unwrap();
    for t in ["{\"", "hello", "\":", " ", "\""] {
        state.accept(&vocab, vocab.find(t).unwrap()).unwrap();
    }
    let ids = state.allowed(&vocab, 100).unwrap();
    assert!(!ids.contains(&special));
    assert!(ids.contains(&half), "the first half of 中 may start");
    // The lone continuation byte may not.
    assert!(!ids.contains(&(vocab.len() as u32 - 2)));
}

#[test]
fn after_a_thought_the_think_token_is_not_allowed_again() {
    let vocab = toy_vocab();
    let open = vocab.find("<think>").unwrap();
    let c = Constraint::json_object().with_think(Think::MayOpen);
    let mut state = ConstraintState::new(&c, &vocab).unwrap();
    assert!(state.allowed(&vocab, 100).unwrap().contains(&open));
    state.accept(&vocab, open).unwrap();
    state
        .accept(&vocab, vocab.find("</think>").unwrap())
        .unwrap();
    let ids = state.allowed(&vocab, 100).unwrap();
    assert!(!ids.contains(&open));
    assert!(ids.contains(&vocab.find("{\"").unwrap()));
}

#[test]
fn random_walks_under_a_schema_have_its_keys_and_types() {
    let vocab = toy_vocab();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "score": {"type": "number"},
            "ok": {"type": "boolean"},
            "kind": {"enum": ["cat", "dog"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "none": {"type": "null"},
            "home": {"type": "object", "properties": {"city": {"type": "string"}}},
            "any": {}
        },
        "required": ["name", "age"]
    });
    let c = Constraint::json_schema(schema);
    for seed in 0..100 {
        let (text, done) = walk(&c, &vocab, 120, seed);
        assert!(done, "seed {seed}: {text:?}");
        let v: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["name", "age", "score", "ok", "kind", "tags", "none", "home", "any"],
            "{text}"
        );
        assert!(v["name"].is_string(), "{text}");
        // An integer: serde reads `-0` as a float, so check the value, not the kind.
        assert!(
            v["age"].as_f64().is_some_and(|f| f.fract() == 0.0),
            "{text}"
        );
        assert!(v["score"].is_number(), "{text}");
        assert!(v["ok"].is_boolean(), "{text}");
        assert!(v["kind"] == "cat" || v["kind"] == "dog", "{text}");
        assert!(v["tags"].is_array(), "{text}");
        assert!(v["none"].is_null(), "{text}");
        assert!(v["home"]["city"].is_string(), "{text}");
    }
}

#[test]
fn schemas_that_say_nothing_enforceable_are_any_object() {
    let vocab = toy_vocab();
    for schema in [
        serde_json::json!({"type": "object"}),
        serde_json::json!({"anyOf": [{"type": "string"}]}),
        serde_json::json!(true),
    ] {
        let (text, done) = walk(&Constraint::json_schema(schema), &vocab, 30, 1);
        assert!(done, "{text:?}");
        assert!(serde_json::from_str::<serde_json::Value>(&text)
            .unwrap()
            .is_object());
    }
}
