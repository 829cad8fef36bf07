//! Malformed calls as small models write them: each must still become a structured call, and
//! what cannot be read must come back as content. Streaming must agree with whole-text parsing
//! on these too.

mod toolcall_support;

use rmx_text::toolcall::ToolCallFormat::{self, Gemma, Hermes, Llama3Json, Mistral, Qwen3Coder};
use serde_json::{json, Value};
use toolcall_support::{assert_stream_agrees, calls_of};

fn check(
    format: ToolCallFormat,
    tools: &[Value],
    text: &str,
    content: &str,
    calls: &[(&str, Value)],
) {
    let (got_content, got_calls) = assert_stream_agrees(format, tools, text, false);
    assert_eq!(got_content, content, "content of {text:?}");
    let want: Vec<(String, Value)> = calls
        .iter()
        .map(|(n, a)| (n.to_string(), a.clone()))
        .collect();
    assert_eq!(calls_of(&got_calls), want, "calls of {text:?}");
}

fn paris() -> Vec<(&'static str, Value)> {
    vec![("get_weather", json!({"city": "Paris"}))]
}

// ---- broken JSON ----

#[test]
fn trailing_commas() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\",},}\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn single_quotes() {
    let text = "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn unquoted_keys() {
    let text = "<tool_call>\n{name: \"get_weather\", arguments: {city: \"Paris\"}}\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn missing_closing_braces_before_the_closing_tag() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn python_literals_in_json() {
    let text = "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"on\": True, \"label\": None, \"snooze\": False, \"at\": .5}}\n</tool_call>";
    check(
        Hermes,
        &[],
        text,
        "",
        &[(
            "set_alarm",
            json!({"on": true, "label": null, "snooze": false, "at": 0.5}),
        )],
    );
}

#[test]
fn arguments_given_as_a_json_string() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
    let text = "{\"name\": \"get_weather\", \"parameters\": \"{'city': 'Paris'}\"}";
    check(Llama3Json, &[], text, "", &paris());
}

#[test]
fn missing_arguments_become_an_empty_object() {
    let text = "<tool_call>\n{\"name\": \"list_files\"}\n</tool_call>";
    check(Hermes, &[], text, "", &[("list_files", json!({}))]);
}

#[test]
fn openai_shaped_call_object() {
    let text = "<tool_call>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn several_calls_in_one_block_as_array_or_sequence() {
    let two = vec![("a", json!({"x": 1})), ("b", json!({}))];
    let text = "<tool_call>\n[{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]\n</tool_call>";
    check(Hermes, &[], text, "", &two);
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>";
    check(Hermes, &[], text, "", &two);
}

// ---- missing closing tags, cut-off generations ----

#[test]
fn missing_closing_tag_at_end_of_generation() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn cut_off_inside_the_closing_tag() {
    let text =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn cut_off_inside_the_arguments() {
    let text = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3";
    check(
        Hermes,
        &[],
        text,
        "Checking.",
        &[("get_weather", json!({"city": "Paris", "days": 3}))],
    );
    // Cut inside a key: the partial field is dropped, the rest kept.
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"da";
    check(Hermes, &[], text, "", &paris());
}

#[test]
fn closing_tag_forgotten_before_the_next_call() {
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"k\": \"v\"}}\n</tool_call>";
    check(
        Hermes,
        &[],
        text,
        "",
        &[("a", json!({})), ("b", json!({"k": "v"}))],
    );
}

#[test]
fn text_after_an_unterminated_call_is_content() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\nHope that helps!";
    check(Hermes, &[], text, "Hope that helps!", &paris());
}

// ---- garbage stays content ----

#[test]
fn unreadable_block_is_kept_verbatim() {
    let text = "<tool_call>\nI am not sure which tool to use.\n</tool_call>";
    check(Hermes, &[], text, text, &[]);
}

#[test]
fn unreadable_block_then_a_good_one() {
    let text = "Trying.\n<tool_call>\n{\"nom\": \"x\"}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    check(
        Hermes,
        &[],
        text,
        "Trying.\n<tool_call>\n{\"nom\": \"x\"}\n</tool_call>",
        &paris(),
    );
}

#[test]
fn unterminated_garbage_is_kept_verbatim() {
    let text = "Answer: <tool_call> is what I would use, but no.";
    check(Hermes, &[], text, text, &[]);
}

// ---- Qwen3-Coder ----

#[test]
fn qwen3_coder_missing_end_tags() {
    let tools = [
        json!({"name": "get_weather", "parameters": {"properties": {"days": {"type": "integer"}}}}),
    ];
    let text =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n3\n";
    check(
        Qwen3Coder,
        &tools,
        text,
        "",
        &[("get_weather", json!({"city": "Paris", "days": 3}))],
    );
}

#[test]
fn qwen3_coder_function_without_tool_call_wrapper() {
    let text = "Sure.\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>";
    check(Qwen3Coder, &[], text, "Sure.", &paris());
}

#[test]
fn qwen3_coder_hermes_json_inside_its_tags() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    check(Qwen3Coder, &[], text, "", &paris());
}

#[test]
fn qwen3_coder_value_not_of_its_declared_type_stays_a_string() {
    let tools = [
        json!({"name": "get_weather", "input_schema": {"properties": {"days": {"type": "integer"}}}}),
    ];
    let text = "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>";
    check(
        Qwen3Coder,
        &tools,
        text,
        "",
        &[("get_weather", json!({"days": "three"}))],
    );
}

#[test]
fn hermes_reads_qwen3_coder_xml_too() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
    check(Hermes, &[], text, "", &paris());
}

// ---- Llama 3 ----

#[test]
fn llama3_bare_call_missing_closing_brace() {
    let text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}";
    check(Llama3Json, &[], text, "", &paris());
}

#[test]
fn llama3_single_quotes_and_arguments_key() {
    let text = "<|python_tag|>{'name': 'get_weather', 'arguments': {'city': 'Paris',}}";
    check(Llama3Json, &[], text, "", &paris());
}

#[test]
fn llama3_text_before_bare_json_is_not_a_call() {
    // Only a reply that *is* the JSON counts as a call without `<|python_tag|>`.
    let text = "You could call {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}.";
    check(Llama3Json, &[], text, text, &[]);
}

// ---- Mistral ----

#[test]
fn mistral_args_cut_off() {
    let text = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"";
    check(Mistral, &[], text, "", &paris());
}

#[test]
fn mistral_array_trailing_commas_and_unclosed() {
    let text = "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\",},";
    check(Mistral, &[], text, "", &paris());
}

#[test]
fn mistral_name_then_json_without_args_marker() {
    let text = "[TOOL_CALLS]get_weather{\"city\": \"Paris\"}";
    check(Mistral, &[], text, "", &paris());
}

#[test]
fn mistral_garbage_after_marker_is_kept() {
    let text = "[TOOL_CALLS]I can't call tools for that.";
    check(Mistral, &[], text, text, &[]);
}

// ---- Gemma ----

#[test]
fn gemma_unterminated_fence() {
    let text = "```tool_code\nget_weather(city=\"Paris\")\n";
    check(Gemma, &[], text, "", &paris());
}

#[test]
fn gemma_json_inside_fence() {
    let text =
        "```tool_code\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n```";
    check(Gemma, &[], text, "", &paris());
}

#[test]
fn gemma_positional_arguments_are_kept_as_text() {
    let text = "```tool_code\nget_weather(\"Paris\")\n```";
    check(Gemma, &[], text, text, &[]);
}

// ---- tags inside arguments ----

#[test]
fn tags_inside_a_string_argument_are_argument_text() {
    let text = "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"text\": \"a </tool_call> b <tool_call> c\"}}\n</tool_call>";
    check(
        Hermes,
        &[],
        text,
        "",
        &[(
            "write_file",
            json!({"text": "a </tool_call> b <tool_call> c"}),
        )],
    );
}

#[test]
fn an_unterminated_string_does_not_hide_the_closing_tag_on_the_next_line() {
    let text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris}}\n</tool_call>\nDone.";
    let (content, _) = assert_stream_agrees(Hermes, &[], text, false);
    assert!(content.ends_with("Done."), "{content:?}");
    assert!(!content.contains("</tool_call>\nDone"), "{content:?}");
}
