//! Well-formed output of each format: one call, several, text around them; each parsed whole
//! and streamed in every split, which must agree.

mod toolcall_support;

use rmx_text::toolcall::ToolCallFormat::{
    self, Gemma, Gemma4, Hermes, Llama3Json, Mistral, Qwen3Coder,
};
use serde_json::{json, Value};
use toolcall_support::{assert_stream_agrees, calls_of};

/// Checks `text` streams consistently and parses to `content` and `calls`.
fn check(
    format: ToolCallFormat,
    tools: &[Value],
    text: &str,
    content: &str,
    calls: &[(&str, Value)],
) {
    let (got_content, got_calls) = assert_stream_agrees(format, tools, text, true);
    assert_eq!(got_content, content, "content of {text:?}");
    let want: Vec<(String, Value)> = calls
        .iter()
        .map(|(n, a)| (n.to_string(), a.clone()))
        .collect();
    assert_eq!(calls_of(&got_calls), want, "calls of {text:?}");
    let ids: Vec<String> = got_calls.iter().map(|c| c.id.clone()).collect();
    let want_ids: Vec<String> = (0..calls.len()).map(|i| format!("call_{i}")).collect();
    assert_eq!(ids, want_ids);
}

fn weather_tools() -> Vec<Value> {
    vec![json!({
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "metric": {"type": "boolean"},
                    "hours": {"type": "array", "items": {"type": "integer"}},
                    "zip": {"type": "string"}
                },
                "required": ["city"]
            }
        }
    })]
}

// ---- Hermes (Qwen2.5 / Qwen3) ----

#[test]
fn hermes_single_call_as_qwen3_writes_it() {
    check(
        Hermes,
        &[],
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn hermes_several_calls_in_one_turn() {
    check(
        Hermes,
        &[],
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n\
         <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>\n\
         <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Asia/Tokyo\", \"fmt\": [\"h\", 24]}}\n</tool_call>",
        "",
        &[
            ("get_weather", json!({"city": "Paris"})),
            ("get_weather", json!({"city": "Tokyo"})),
            ("get_time", json!({"tz": "Asia/Tokyo", "fmt": ["h", 24]})),
        ],
    );
}

#[test]
fn hermes_content_before_and_after() {
    check(
        Hermes,
        &[],
        "I'll check the weather in Paris for you.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n\nOnce I have it, I'll summarise.",
        "I'll check the weather in Paris for you.\n\nOnce I have it, I'll summarise.",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn hermes_arguments_keep_unicode_escapes_and_nesting() {
    check(
        Hermes,
        &[],
        "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a \\\"b\\\".txt\", \"text\": \"caf\\u00e9 \\ud83d\\ude00\\nline2\", \"opts\": {\"mode\": 420, \"append\": false, \"tags\": null}}}\n</tool_call>",
        "",
        &[("write_file", json!({"path": "a \"b\".txt", "text": "café 😀\nline2", "opts": {"mode": 420, "append": false, "tags": null}}))],
    );
}

#[test]
fn hermes_plain_text_with_angle_brackets_is_untouched() {
    check(
        Hermes,
        &[],
        "Use <tool> tags or a < b, and <tool_ as a prefix: all fine.",
        "Use <tool> tags or a < b, and <tool_ as a prefix: all fine.",
        &[],
    );
}

// ---- Qwen3-Coder ----

const CODER_ONE: &str = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";

#[test]
fn qwen3_coder_single_call_typed_by_schema() {
    check(
        Qwen3Coder,
        &weather_tools(),
        CODER_ONE,
        "",
        &[("get_weather", json!({"city": "Paris", "days": 3}))],
    );
}

#[test]
fn qwen3_coder_without_schema_values_stay_strings() {
    check(
        Qwen3Coder,
        &[],
        CODER_ONE,
        "",
        &[("get_weather", json!({"city": "Paris", "days": "3"}))],
    );
}

#[test]
fn qwen3_coder_string_typed_value_that_looks_like_a_number_stays_a_string() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=zip>\n10001\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=hours>\n[9, 12]\n</parameter>\n</function>\n</tool_call>";
    check(
        Qwen3Coder,
        &weather_tools(),
        text,
        "",
        &[(
            "get_weather",
            json!({"city": "New York", "zip": "10001", "metric": true, "hours": [9, 12]}),
        )],
    );
}

#[test]
fn qwen3_coder_multiline_value_keeps_inner_newlines() {
    let text = "<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/main.rs\n</parameter>\n<parameter=content>\nfn main() {\n    println!(\"hi\");\n}\n</parameter>\n</function>\n</tool_call>";
    check(
        Qwen3Coder,
        &[],
        text,
        "",
        &[(
            "write_file",
            json!({"path": "src/main.rs", "content": "fn main() {\n    println!(\"hi\");\n}"}),
        )],
    );
}

#[test]
fn qwen3_coder_several_calls_and_content_around() {
    let text = format!("Let me look at both cities.\n{CODER_ONE}\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLyon\n</parameter>\n</function>\n</tool_call>\nDone.");
    check(
        Qwen3Coder,
        &weather_tools(),
        &text,
        "Let me look at both cities.\nDone.",
        &[
            ("get_weather", json!({"city": "Paris", "days": 3})),
            ("get_weather", json!({"city": "Lyon"})),
        ],
    );
}

// ---- Llama 3 JSON ----

#[test]
fn llama3_whole_reply_is_one_call() {
    check(
        Llama3Json,
        &[],
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
        "",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn llama3_python_tag_and_semicolon_separated_calls() {
    check(
        Llama3Json,
        &[],
        "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}",
        "",
        &[("get_weather", json!({"city": "Paris"})), ("get_time", json!({"tz": "CET"}))],
    );
}

#[test]
fn llama3_bare_calls_separated_by_semicolons() {
    check(
        Llama3Json,
        &[],
        "{\"name\": \"a\", \"parameters\": {}};{\"name\": \"b\", \"parameters\": {\"x\": 1}} ; {\"name\": \"c\", \"parameters\": {\"y\": [1, 2]}}",
        "",
        &[("a", json!({})), ("b", json!({"x": 1})), ("c", json!({"y": [1, 2]}))],
    );
}

#[test]
fn llama3_content_before_python_tag_and_after_call() {
    check(
        Llama3Json,
        &[],
        "Let me look that up.\n<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\nThis fetches the current weather.",
        "Let me look that up.\nThis fetches the current weather.",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn llama3_bare_call_then_text() {
    check(
        Llama3Json,
        &[],
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n\nI asked for the weather.",
        "I asked for the weather.",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn llama3_builtin_tool_in_python_syntax() {
    check(
        Llama3Json,
        &[],
        "<|python_tag|>brave_search.call(query=\"weather in Paris\")",
        "",
        &[("brave_search", json!({"query": "weather in Paris"}))],
    );
}

#[test]
fn llama3_json_answer_that_is_not_a_call_stays_content() {
    // The user asked for JSON: a `name` alone does not make a call.
    let text = "{\"name\": \"Ada Lovelace\", \"born\": 1815}";
    check(Llama3Json, &[], text, text, &[]);
    let text = "[1, 2, 3] are the numbers.";
    check(Llama3Json, &[], text, text, &[]);
}

// ---- Mistral ----

#[test]
fn mistral_v03_array_single_call() {
    check(
        Mistral,
        &[],
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
        "",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn mistral_v03_array_several_calls() {
    check(
        Mistral,
        &[],
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]",
        "",
        &[("get_weather", json!({"city": "Paris"})), ("get_weather", json!({"city": "Rome"}))],
    );
}

#[test]
fn mistral_args_format_several_calls() {
    check(
        Mistral,
        &[],
        "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": \"CET\", \"list\": [\"a]\", \"{b\", \"say \\\"}\\\" \\\\\"]}",
        "",
        &[("get_weather", json!({"city": "Paris"})), ("get_time", json!({"tz": "CET", "list": ["a]", "{b", "say \"}\" \\"]}))],
    );
}

#[test]
fn mistral_call_id_before_args() {
    check(
        Mistral,
        &[],
        "[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Paris\"}",
        "",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn mistral_content_before_and_after() {
    check(
        Mistral,
        &[],
        "Sure, checking now. [TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"} Anything else?",
        "Sure, checking now. Anything else?",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

// ---- Gemma ----

#[test]
fn gemma_tool_code_single_call() {
    check(
        Gemma,
        &[],
        "```tool_code\nget_weather(city=\"Paris\", days=3, metric=True, unit=None)\n```",
        "",
        &[(
            "get_weather",
            json!({"city": "Paris", "days": 3, "metric": true, "unit": null}),
        )],
    );
}

#[test]
fn gemma_tool_code_several_calls_and_print_wrapper() {
    check(
        Gemma,
        &[],
        "```tool_code\nprint(get_weather(city='Paris'))\nget_time(tz=\"CET\", fields=[\"h\", \"m\"], opts={'a': 1.5})\n```",
        "",
        &[("get_weather", json!({"city": "Paris"})), ("get_time", json!({"tz": "CET", "fields": ["h", "m"], "opts": {"a": 1.5}}))],
    );
}

#[test]
fn gemma_content_around_fences() {
    check(
        Gemma,
        &[],
        "I'll check both.\n```tool_code\nget_weather(city=\"Paris\")\n```\n```tool_code\nget_weather(city=\"Oslo\")\n```\nBack soon.",
        "I'll check both.\nBack soon.",
        &[("get_weather", json!({"city": "Paris"})), ("get_weather", json!({"city": "Oslo"}))],
    );
}

#[test]
fn gemma_bare_json_reply() {
    check(
        Gemma,
        &[],
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
        "",
        &[("get_weather", json!({"city": "Paris"}))],
    );
}

#[test]
fn gemma_ordinary_code_fence_is_content() {
    let text = "Here:\n```python\nprint(get_weather(city='Paris'))\n```";
    check(Gemma, &[], text, text, &[]);
}

// ---- Gemma 4 ----

#[test]
fn gemma4_single_call_with_delimited_strings() {
    check(
        Gemma4,
        &weather_tools(),
        "<|tool_call>call:get_weather{city:<|\"|>Paris, {\"FR\"}<|\"|>,days:3,metric:true,hours:[9,12]}<tool_call|>",
        "",
        &[(
            "get_weather",
            json!({"city": "Paris, {\"FR\"}", "days": 3, "metric": true, "hours": [9, 12]}),
        )],
    );
}

#[test]
fn gemma4_several_calls_and_content_around() {
    check(
        Gemma4,
        &[],
        "Checking.<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|><|tool_call>call:get_time{}<tool_call|>Done.",
        "Checking.Done.",
        &[("get_weather", json!({"city": "Oslo"})), ("get_time", json!({}))],
    );
}

#[test]
fn every_format_passes_plain_text_through() {
    let text = "The capital of France is Paris.\n\nIt has about 2 million people; {not json} [1].";
    for f in ToolCallFormat::ALL {
        check(f, &[], text, text, &[]);
    }
}
