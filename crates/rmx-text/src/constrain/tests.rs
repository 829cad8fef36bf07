use serde_json::{json, Value};

use super::state::Mask;
use super::*;
use crate::toolcall::parse_complete;

/// Every printable ASCII byte alone, some multi-byte pieces that cross JSON's structure, half
/// a UTF-8 character, `<think>` pieces, and an EOS (the last id), as byte-level vocabularies
/// have them.
fn toy_compiler() -> Compiler {
    let mut pieces: Vec<Vec<u8>> = (0x20u8..0x7F).chain([b'\n']).map(|b| vec![b]).collect();
    for p in [
        "{\"",
        "\":",
        "\": \"",
        "\"}",
        "\", \"",
        "true",
        "false",
        "null",
        "123",
        "-0.5",
        "e+3",
        "},",
        "]}",
        "  ",
        "\n}",
        "hello",
        " world",
        "\\n",
        "\\u00",
        "e9",
        "<think>",
        "</think>",
        "get_",
        "weather",
        "time",
        "\"name\"",
        "<tool_call>",
        "</tool_call>",
    ] {
        pieces.push(p.as_bytes().to_vec());
    }
    pieces.push(b"\xE4\xB8".to_vec());
    pieces.push(b"\xAD".to_vec());
    let eos = pieces.len() as u32;
    let mut all: Vec<Option<&[u8]>> = pieces.iter().map(|p| Some(p.as_slice())).collect();
    all.push(None);
    Compiler::new(Vocabulary::from_pieces(&all, &[eos])).unwrap()
}

const EOS_FREE: bool = false;

/// Whether `text` is one JSON object. Numbers of any size are JSON (`1e99999` is, and
/// Python reads it as inf), though serde_json's `Value` refuses them: its `IgnoredAny` does not.
fn is_json_object(text: &str) -> bool {
    text.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// A reproducible walk that picks among the allowed ids with a xorshift generator; an EOS
/// ends it like the engine's stop ids do (unless `ignore_eos`).
fn walk(
    compiler: &Compiler,
    c: &Constraint,
    max_tokens: usize,
    seed: u64,
    ignore_eos: bool,
) -> (String, bool) {
    let compiled = compiler.compile(c).unwrap();
    let mut state = ConstraintState::new(&compiled);
    let trie = compiler.factory.tok_env().tok_trie();
    let eos = trie.eos_token();
    let mut rng = seed | 1;
    let mut out = Vec::new();
    for step in 0..max_tokens {
        if state.is_complete() {
            break;
        }
        let ids = state.mask(max_tokens - step).unwrap().ids();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let id = ids[(rng % ids.len() as u64) as usize];
        state.accept(id).unwrap();
        if id == eos && !ignore_eos {
            return (String::from_utf8_lossy(&out).into_owned(), true);
        }
        if id != eos {
            out.extend_from_slice(trie.token(id));
        }
    }
    // Thoughts are free text, so only the shape's part is sure to be UTF-8.
    (
        String::from_utf8_lossy(&out).into_owned(),
        state.is_complete(),
    )
}

#[test]
fn random_walks_under_json_mode_are_json_objects_within_max_tokens() {
    let compiler = toy_compiler();
    for seed in 0..60 {
        for max_tokens in [2, 3, 8, 40] {
            let (text, done) = walk(
                &compiler,
                &Constraint::json_object(),
                max_tokens,
                seed,
                EOS_FREE,
            );
            assert!(
                done,
                "seed {seed}, max {max_tokens}: not complete: {text:?}"
            );
            assert!(is_json_object(&text), "seed {seed}: {text:?}");
        }
    }
}

fn weather_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "get_weather",
            Some(json!({"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"enum": ["c", "f"]}}, "required": ["city"]})),
        ),
        Tool::new(
            "get_time",
            Some(json!({"type": "object", "properties": {}})),
        ),
    ]
}

#[test]
fn forced_hermes_calls_are_one_call_of_an_allowed_tool_with_valid_arguments() {
    let compiler = toy_compiler();
    let c = Constraint::tool_call(ToolCallFormat::Hermes, weather_tools());
    for seed in 0..40 {
        let (text, done) = walk(&compiler, &c, 80, seed, EOS_FREE);
        assert!(done, "{text:?}");
        assert!(text.starts_with("<tool_call>\n{\"name\": \""), "{text:?}");
        let (content, calls) = parse_complete(ToolCallFormat::Hermes, &text);
        assert_eq!(content.trim(), "", "{text:?}");
        assert_eq!(calls.len(), 1, "{text:?}");
        let args: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        let args = args.as_object().unwrap();
        match calls[0].name.as_str() {
            // Only the declared parameters, the required one there, each of its type.
            "get_weather" => {
                assert!(args["city"]
                    .as_str()
                    .is_some_and(|c| c.chars().count() <= 12));
                assert!(args.keys().all(|k| k == "city" || k == "unit"), "{text:?}");
                assert!(args.get("unit").is_none_or(|u| u == "c" || u == "f"));
            }
            "get_time" => assert!(args.is_empty(), "{text:?}"),
            other => panic!("{other}: {text:?}"),
        }
    }
}

#[test]
fn forced_llama3_calls_use_the_parameters_key() {
    let compiler = toy_compiler();
    let c = Constraint::tool_call(ToolCallFormat::Llama3Json, weather_tools());
    for seed in 0..10 {
        let (text, done) = walk(&compiler, &c, 60, seed, EOS_FREE);
        assert!(done, "{text:?}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["parameters"].is_object(), "{text:?}");
    }
}

#[test]
fn tool_calls_need_a_format_that_can_be_forced_and_a_tool() {
    let compiler = toy_compiler();
    let c = Constraint::tool_call(ToolCallFormat::Mistral, weather_tools());
    assert!(matches!(
        compiler.compile(&c),
        Err(ConstraintError::UnsupportedFormat(ToolCallFormat::Mistral))
    ));
    let c = Constraint::tool_call(ToolCallFormat::Hermes, vec![]);
    assert_eq!(compiler.compile(&c).unwrap_err(), ConstraintError::NoTools);
}

#[test]
fn a_bad_parameters_schema_names_its_tool() {
    let compiler = toy_compiler();
    let mut tools = weather_tools();
    tools.push(Tool::new(
        "broken",
        Some(json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "(("}}})),
    ));
    let err = compiler
        .compile(&Constraint::tool_call(ToolCallFormat::Hermes, tools))
        .unwrap_err();
    assert!(err.is_invalid_request());
    assert!(err.to_string().contains("tool `broken`"), "{err}");
}

#[test]
fn a_thought_is_closed_in_time_for_the_object() {
    let compiler = toy_compiler();
    let c = Constraint::json_object().with_think(Think::Inside);
    for seed in 0..40 {
        for max_tokens in [6, 12, 30] {
            let (text, done) = walk(&compiler, &c, max_tokens, seed, EOS_FREE);
            assert!(done, "seed {seed}: {text:?}");
            let (_, json) = text.split_once("</think>").unwrap();
            assert!(is_json_object(json.trim_start()), "{text:?}");
        }
    }
}

#[test]
fn a_thought_may_open_only_at_the_start() {
    let compiler = toy_compiler();
    let c = Constraint::json_object().with_think(Think::MayOpen);
    let (mut thought, mut plain) = (0, 0);
    for seed in 0..60 {
        let (text, done) = walk(&compiler, &c, 30, seed, EOS_FREE);
        assert!(done, "{text:?}");
        let json = match text.strip_prefix("<think>") {
            Some(rest) => {
                thought += 1;
                rest.split_once("</think>").unwrap().1.trim_start()
            }
            None => {
                plain += 1;
                text.as_str()
            }
        };
        assert!(is_json_object(json), "{text:?}");
    }
    assert!(
        thought > 0 && plain > 0,
        "{thought} thoughts, {plain} plain"
    );
}

#[test]
fn schemas_enforce_refs_any_of_items_and_closed_objects() {
    let compiler = toy_compiler();
    let schema = json!({
        "$defs": {"point": {"type": "object", "properties": {
            "x": {"type": "integer", "minimum": -5, "maximum": 5}, "y": {"type": "integer"}},
            "required": ["x", "y"], "additionalProperties": false}},
        "type": "object",
        "properties": {
            "points": {"type": "array", "items": {"$ref": "#/$defs/point"}, "maxItems": 3},
            "label": {"anyOf": [{"type": "null"}, {"type": "string", "pattern": "^[a-c]{1,3}$"}]},
        },
        "required": ["points", "label"],
        "additionalProperties": false,
    });
    for seed in 0..30 {
        let (text, done) = walk(
            &compiler,
            &Constraint::json_schema(schema.clone()),
            120,
            seed,
            EOS_FREE,
        );
        assert!(done, "{text:?}");
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let o = v.as_object().unwrap();
        assert_eq!(o.keys().collect::<Vec<_>>(), ["points", "label"], "{text}");
        for p in o["points"].as_array().unwrap() {
            let p = p.as_object().unwrap();
            assert_eq!(p.keys().collect::<Vec<_>>(), ["x", "y"], "{text}");
            assert!((-5..=5).contains(&p["x"].as_i64().unwrap()), "{text}");
        }
        let label = &o["label"];
        assert!(
            label.is_null()
                || label
                    .as_str()
                    .is_some_and(|s| (1..=3).contains(&s.len())
                        && s.bytes().all(|b| (b'a'..=b'c').contains(&b))),
            "{text}"
        );
    }
}

#[test]
fn regexes_choices_and_lark_grammars_are_whole_matches() {
    let compiler = toy_compiler();
    for seed in 0..20 {
        let (text, done) = walk(
            &compiler,
            &Constraint::regex("[a-f]{2}-[0-9]{3}"),
            20,
            seed,
            EOS_FREE,
        );
        assert!(done, "{text:?}");
        assert_eq!(text.len(), 6, "{text:?}");
        assert_eq!(&text[2..3], "-");
        let choices = vec![
            "yes".to_string(),
            "no".to_string(),
            "yes, later".to_string(),
        ];
        let (text, _) = walk(
            &compiler,
            &Constraint::choice(choices.clone()),
            20,
            seed,
            EOS_FREE,
        );
        assert!(choices.contains(&text), "{text:?}");
        let lark = "start: \"(\" NUM (\",\" NUM)* \")\"\nNUM: /[0-9]{1,2}/";
        let (text, done) = walk(&compiler, &Constraint::lark(lark), 30, seed, EOS_FREE);
        assert!(done, "{text:?}");
        assert!(text.starts_with('(') && text.ends_with(')'), "{text:?}");
    }
}

#[test]
fn an_accepting_grammar_that_could_go_on_ends_on_eos() {
    // "yes" and "yes, later": after "yes" the output may end (EOS) or go on.
    let compiler = toy_compiler();
    let c = Constraint::choice(vec!["yes".into(), "yes, later".into()]);
    let compiled = compiler.compile(&c).unwrap();
    let mut state = ConstraintState::new(&compiled);
    let trie = compiler.factory.tok_env().tok_trie();
    for b in b"yes" {
        state.accept(trie.token_id(&[*b]).unwrap()).unwrap();
    }
    assert!(!state.is_complete());
    let mask = state.mask(100).unwrap();
    assert!(mask.allows(trie.eos_token()));
    assert!(mask.allows(trie.token_id(b",").unwrap()));
    state.accept(trie.eos_token()).unwrap();
    assert!(state.is_complete());
}

#[test]
fn invalid_schemas_and_grammars_are_refused_with_the_reason() {
    let compiler = toy_compiler();
    for (c, want) in [
        (
            Constraint::json_schema(json!({"type": "object", "uniqueItems": true})),
            "uniqueItems",
        ),
        (Constraint::json_schema(json!({"type": "strnig"})), "strnig"),
        (Constraint::json_schema(json!(false)), "false"),
        (
            Constraint::json_schema(json!({"$ref": "#/$defs/missing"})),
            "missing",
        ),
        (Constraint::regex("(unclosed"), "unclosed"),
        (Constraint::lark("start: undefined_rule"), "undefined_rule"),
        (Constraint::choice(vec![]), "at least one"),
    ] {
        let err = compiler.compile(&c).unwrap_err();
        assert!(err.is_invalid_request(), "{c:?}: {err}");
        assert!(err.to_string().contains(want), "{c:?}: {err}");
    }
}

#[test]
fn masks_fill_bool_rows_of_any_width() {
    let mut set = llguidance::toktrie::SimpleVob::alloc(70);
    set.allow_token(3);
    set.allow_token(64);
    set.allow_token(69);
    let mut row = vec![true; 66];
    Mask::Set(set).fill(&mut row);
    let on: Vec<usize> = (0..row.len()).filter(|&i| row[i]).collect();
    assert_eq!(on, [3, 64]);
    let mut row = vec![true; 10];
    Mask::One(7).fill(&mut row);
    assert_eq!(row.iter().filter(|&&b| b).count(), 1);
    assert!(row[7]);
}

#[test]
fn a_single_forced_tool_after_a_thought_ends_in_time() {
    // One tool: the call's markup up to the arguments is all forced, a long stretch with no
    // choice in it, which the completion must still reach the end of.
    let compiler = toy_compiler();
    let tools = vec![Tool::new(
        "get_weather",
        Some(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )];
    for think in [Think::No, Think::Inside] {
        let c = Constraint::tool_call(ToolCallFormat::Hermes, tools.clone()).with_think(think);
        for seed in 0..40 {
            let (text, done) = walk(&compiler, &c, 80, seed, EOS_FREE);
            assert!(done, "{think:?} seed {seed}: {text:?}");
            let call = match think {
                Think::Inside => text.split_once("</think>").unwrap().1,
                _ => text.as_str(),
            };
            let (_, calls) = parse_complete(ToolCallFormat::Hermes, call.trim_start());
            assert_eq!(calls.len(), 1, "{text:?}");
            assert_eq!(calls[0].name, "get_weather");
        }
    }
}

#[test]
fn half_a_character_in_a_thought_is_finished_before_the_close() {
    let compiler = toy_compiler();
    let trie = compiler.factory.tok_env().tok_trie();
    let c = Constraint::json_object().with_think(Think::Inside);
    let mut state = ConstraintState::new(&compiler.compile(&c).unwrap());
    let mut out = b"\xE4\xB8".to_vec();
    state.accept(trie.token_id(&out).unwrap()).unwrap();
    // Four tokens left: the character's last byte, `</think>`, `{`, `}` (the toy vocabulary
    // has no `{}` piece).
    for left in (1..=4).rev() {
        let id = state.mask(left).unwrap().ids()[0];
        state.accept(id).unwrap();
        out.extend_from_slice(trie.token(id));
    }
    assert!(state.is_complete(), "{}", String::from_utf8_lossy(&out));
    assert_eq!(String::from_utf8(out).unwrap(), "中</think>{}");
}

#[test]
fn strict_tools_in_text_make_every_call_whole_and_valid() {
    let compiler = toy_compiler();
    let c = Constraint::tool_calls_in_text(ToolCallFormat::Hermes, weather_tools());
    let compiled = compiler.compile(&c).unwrap();
    let trie = compiler.factory.tok_env().tok_trie();
    let feed = |text: &str| {
        let mut state = ConstraintState::new(&compiled);
        for b in text.bytes() {
            let id = trie.token_id(&[b]).unwrap();
            if !state.mask(1000).unwrap().allows(id) {
                return false;
            }
            state.accept(id).unwrap();
        }
        true
    };
    // Text alone, and text with a valid call, go through.
    assert!(feed("Let me check."));
    assert!(feed(
        "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>ok"
    ));
    // A call of an unknown tool, arguments outside the schema, or a broken opening do not.
    assert!(!feed("x<tool_call>\n{\"name\": \"delete_all\""));
    assert!(!feed(
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"}ood went dog\""
    ));
    assert!(!feed("<tool_call>{"));
    // Random walks: wherever a call opens, it is a whole call of an allowed tool.
    for seed in 0..30 {
        let (text, _) = walk(&compiler, &c, 60, seed, EOS_FREE);
        for part in text.split("<tool_call>").skip(1) {
            let call = format!("<tool_call>{part}");
            if let Some(end) = call.find("</tool_call>") {
                let (_, calls) = parse_complete(ToolCallFormat::Hermes, &call[..end + 12]);
                assert_eq!(calls.len(), 1, "{text:?}");
            }
        }
    }
}
