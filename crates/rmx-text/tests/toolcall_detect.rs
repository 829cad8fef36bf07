//! Choosing the format: by name, and from the chat template a model ships. Also call ids.

mod toolcall_support;

use std::collections::HashSet;
use std::path::PathBuf;

use rmx_text::toolcall::{
    parse_complete, random_call_id, sequential_ids, ToolCallEvent, ToolCallFormat, ToolCallParser,
};
use serde_json::Value;

#[test]
fn from_name_knows_each_format_and_round_trips() {
    for f in ToolCallFormat::ALL {
        assert_eq!(ToolCallFormat::from_name(f.name()), Some(f));
    }
    assert_eq!(
        ToolCallFormat::from_name("hermes"),
        Some(ToolCallFormat::Hermes)
    );
    assert_eq!(
        ToolCallFormat::from_name("qwen3_coder"),
        Some(ToolCallFormat::Qwen3Coder)
    );
    assert_eq!(
        ToolCallFormat::from_name("Qwen3-Coder"),
        Some(ToolCallFormat::Qwen3Coder)
    );
    assert_eq!(
        ToolCallFormat::from_name("llama3_json"),
        Some(ToolCallFormat::Llama3Json)
    );
    assert_eq!(
        ToolCallFormat::from_name("mistral"),
        Some(ToolCallFormat::Mistral)
    );
    assert_eq!(
        ToolCallFormat::from_name("gemma"),
        Some(ToolCallFormat::Gemma)
    );
    assert_eq!(ToolCallFormat::from_name("pythonic"), None);
    assert_eq!(ToolCallFormat::from_name(""), None);
}

/// The Qwen3 template from the npm fixture package (scripts/test-env.sh fetches it).
fn qwen3_template() -> String {
    let root = std::env::var_os("RMX_TEST_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-fixtures")
        });
    let path = root.join("npm/tokenizer-qwen3/models/tokenizer_config.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} ({e}); run scripts/test-env.sh", path.display()));
    let config: Value = serde_json::from_str(&text).expect("tokenizer_config.json is JSON");
    config["chat_template"]
        .as_str()
        .expect("chat_template")
        .to_string()
}

#[test]
fn detects_hermes_from_the_real_qwen3_template() {
    assert_eq!(
        ToolCallFormat::detect_from_template(&qwen3_template()),
        Some(ToolCallFormat::Hermes)
    );
}

#[test]
fn detects_each_format_from_template_excerpts() {
    let cases = [
        // Qwen3-Coder's template has <tool_call> too; <function= decides.
        (
            "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + args_name + '>\\n' }}",
            Some(ToolCallFormat::Qwen3Coder),
        ),
        ("{{- '<tool_call>\\n{\"name\": \"' }}", Some(ToolCallFormat::Hermes)),
        ("{{- \"[TOOL_CALLS][\" }}{%- for tool_call in message.tool_calls %}", Some(ToolCallFormat::Mistral)),
        ("{{- '<|python_tag|>' + tool_call.name + '.call(' }}", Some(ToolCallFormat::Llama3Json)),
        ("wrapped in ```tool_code``` blocks", Some(ToolCallFormat::Gemma)),
        (
            "{{- '<|tool_call>call:' + tool_call.function.name + '{' }}{{- '}<tool_call|>' }}",
            Some(ToolCallFormat::Gemma4),
        ),
        ("{% for message in messages %}{{ message.content }}{% endfor %}", None),
    ];
    for (template, want) in cases {
        assert_eq!(
            ToolCallFormat::detect_from_template(template),
            want,
            "{template}"
        );
    }
}

#[test]
fn sequential_ids_are_deterministic_per_parser() {
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
    let mut p = ToolCallParser::new(ToolCallFormat::Hermes).with_id_generator(sequential_ids());
    let events = p.feed(text);
    let starts: Vec<(usize, String, String)> = events
        .iter()
        .filter_map(|e| match e {
            ToolCallEvent::ToolCallStart { index, id, name } => {
                Some((*index, id.clone(), name.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        vec![
            (0, "call_0".into(), "a".into()),
            (1, "call_1".into(), "b".into())
        ]
    );
    // Each call is Start, ArgsDelta, End with its own index.
    assert!(matches!(events[2], ToolCallEvent::ToolCallEnd { index: 0 }));
    assert!(matches!(events[5], ToolCallEvent::ToolCallEnd { index: 1 }));
}

#[test]
fn injected_generator_is_used() {
    let mut p = ToolCallParser::new(ToolCallFormat::Hermes)
        .with_id_generator(Box::new(|| "fixed".to_string()));
    let (_, calls) =
        p.parse_complete("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>");
    assert_eq!(calls[0].id, "fixed");
}

#[test]
fn random_ids_look_like_openai_ids_and_do_not_repeat() {
    let ids: Vec<String> = (0..1000).map(|_| random_call_id()).collect();
    for id in &ids {
        let tail = id.strip_prefix("call_").expect("call_ prefix");
        assert_eq!(tail.len(), 24, "{id}");
        assert!(tail.chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
    }
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    let (_, calls) = parse_complete(
        ToolCallFormat::Hermes,
        "<tool_call>{\"name\": \"a\"}</tool_call>",
    );
    assert!(calls[0].id.starts_with("call_") && calls[0].id.len() == 29);
}

#[test]
fn parser_is_reusable_after_finish() {
    let mut p = ToolCallParser::new(ToolCallFormat::Llama3Json).with_id_generator(sequential_ids());
    let first = p.parse_complete("{\"name\": \"a\", \"parameters\": {}}");
    let second = p.parse_complete("{\"name\": \"b\", \"parameters\": {}}");
    assert_eq!(first.1[0].name, "a");
    assert_eq!(second.1[0].name, "b");
    // Call indexes restart per output; ids keep counting.
    assert_eq!(second.1[0].id, "call_1");
}

#[test]
fn valid_json_arguments_read_exactly_as_serde_json_reads_them() {
    let args = [
        r#"{}"#,
        r#"{"a": 1, "b": -2.5e-3, "c": 12345678901234567890, "d": [true, false, null]}"#,
        r#"{"s": "quote \" backslash \\ slash \/ tab \t nl \n uni \u00e9 pair \ud83d\ude00"}"#,
        r#"{"nested": {"deep": [[], {}, [{"x": "}]"}]]}, "empty": ""}"#,
        r#"{"apostrophe": "it's", "brace": "{", "bracket": "]"}"#,
        r#"{"z": 1, "a": 2, "m": 3}"#,
    ];
    for a in args {
        let text = format!("<tool_call>\n{{\"name\": \"f\", \"arguments\": {a}}}\n</tool_call>");
        let (content, calls) = toolcall_support::parse(ToolCallFormat::Hermes, &text);
        assert_eq!(content, "");
        let got: Value = serde_json::from_str(&calls[0].arguments).expect("arguments are JSON");
        let want: Value = serde_json::from_str(a).expect("test JSON");
        assert_eq!(got, want, "{a}");
    }
    // Keys keep the model's order.
    let (_, calls) = toolcall_support::parse(
        ToolCallFormat::Hermes,
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": 2, \"m\": 3}}</tool_call>",
    );
    assert_eq!(calls[0].arguments, r#"{"z":1,"a":2,"m":3}"#);
}
