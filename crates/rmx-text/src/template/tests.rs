//! Behaviours of transformers' environment that templates rely on; the byte-for-byte
//! comparison with transformers itself is `tests/template_parity.rs`.

use serde_json::json;

use super::*;

fn render(source: &str, messages: Json) -> Result<String, TemplateError> {
    ChatTemplate::new(source)?.render(&RenderInput::new(&messages))
}

#[test]
fn raise_exception_becomes_a_raised_error_with_its_message() {
    let source = "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}";
    let err = render(source, json!([{"role": "system", "content": "x"}]));
    match err {
        Err(TemplateError::Raised(message)) => {
            assert_eq!(message, "Conversation must start with user")
        }
        other => panic!("expected a raised error, got {other:?}"),
    }
}

#[test]
fn values_print_as_python_prints_them() -> Result<(), TemplateError> {
    let source = "{{ messages[0].a }}|{{ messages[0].b }}|{{ messages[0].c }}|{{ messages[0].d }}|{{ messages[0].missing }}|{{ messages[0].d|string }}";
    let out = render(
        source,
        json!([{"a": true, "b": false, "c": [1, "x"], "d": {"k": "v"}, "z": null}]),
    )?;
    assert_eq!(out, "True|False|[1, 'x']|{'k': 'v'}||{'k': 'v'}");
    Ok(())
}

#[test]
fn null_keys_are_dropped_and_reasoning_is_aliased() -> Result<(), TemplateError> {
    let source = "{{ messages[0].content is defined }} {{ messages[0].thinking }} {{ messages[0].reasoning_content }}";
    let out = render(
        source,
        json!([{"role": "assistant", "content": null, "reasoning": "hmm"}]),
    )?;
    assert_eq!(out, "False hmm hmm");
    Ok(())
}

#[test]
fn tojson_is_python_json_dumps() -> Result<(), TemplateError> {
    let messages = json!([{"v": {"b": "é<>&'\"", "a": [1, 2.0, null, true], "e": {}}}]);
    let out = render("{{ messages[0].v | tojson }}", messages.clone())?;
    assert_eq!(
        out,
        r#"{"b": "é<>&'\"", "a": [1, 2.0, null, true], "e": {}}"#
    );
    let out = render("{{ messages[0].v | tojson(indent=2) }}", messages.clone())?;
    assert_eq!(
        out,
        "{\n  \"b\": \"é<>&'\\\"\",\n  \"a\": [\n    1,\n    2.0,\n    null,\n    true\n  ],\n  \"e\": {}\n}"
    );
    let out = render(
        "{{ messages[0].v | tojson(separators=(',', ':'), sort_keys=true, ensure_ascii=true) }}",
        messages,
    )?;
    assert_eq!(out, r#"{"a":[1,2.0,null,true],"b":"\u00e9<>&'\"","e":{}}"#);
    Ok(())
}

#[test]
fn blocks_trim_and_strip_like_transformers() -> Result<(), TemplateError> {
    let source = "{% for m in messages %}\n    {% if m.role == 'user' %}\nU:{{ m.content }}\n    {% endif %}\n{% endfor %}\n";
    let out = render(source, json!([{"role": "user", "content": "hi"}]))?;
    assert_eq!(out, "U:hi\n");
    Ok(())
}

#[test]
fn loop_controls_and_python_string_methods_work() -> Result<(), TemplateError> {
    let source = "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}{{ m.content.strip().split('</think>')[-1].lstrip('\\n') }};{{ m.content.rsplit(' ', 1)[0] }};{% endfor %}";
    let out = render(
        source,
        json!([
            {"content": " <think>a</think>\nanswer one "},
            {"content": "skipped"},
            {"content": "x y z"}
        ]),
    )?;
    assert_eq!(out, "answer one; <think>a</think>\nanswer one;x y z;x y;");
    Ok(())
}

#[test]
fn strftime_now_formats_today() -> Result<(), TemplateError> {
    let out = render("{{ strftime_now('%Y') }}", json!([]))?;
    assert_eq!(out.len(), 4);
    assert!(out.chars().all(|c| c.is_ascii_digit()), "{out}");
    Ok(())
}

#[test]
fn kwargs_override_special_tokens_and_tools_default_to_none() -> Result<(), TemplateError> {
    let template = ChatTemplate::new("{{ bos_token }}|{{ tools is none }}|{{ enable_thinking }}")?;
    let messages = json!([]);
    let mut input = RenderInput::new(&messages);
    input
        .special_tokens
        .insert("bos_token".into(), json!("<s>"));
    input.kwargs.insert("enable_thinking".into(), json!(false));
    assert_eq!(template.render(&input)?, "<s>|True|False");
    input.kwargs.insert("bos_token".into(), json!("<B>"));
    assert_eq!(template.render(&input)?, "<B>|True|False");
    Ok(())
}

#[test]
fn a_broken_template_is_a_syntax_error() {
    assert!(matches!(
        ChatTemplate::new("{% for %}"),
        Err(TemplateError::Syntax(_))
    ));
}

/// Issue #20: a hostile template ends quickly with [`TemplateError::Limit`] naming the bound.
fn assert_limited(source: &str, limit: Limit) {
    let started = std::time::Instant::now();
    let result = render(source, json!([{"role": "user", "content": "hi"}]));
    match result {
        Err(TemplateError::Limit(got)) => assert_eq!(got, limit, "{source}"),
        other => panic!("expected the {limit:?} limit for {source}, got {other:?}"),
    }
    // Generous: the point is "ends", not a speed; debug builds on a loaded machine are slow.
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "{source}: {took:?}"
    );
}

#[test]
fn issue_20_a_nested_loop_runs_out_of_fuel() {
    assert_limited(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        Limit::Fuel,
    );
}

#[test]
fn issue_20_string_doubling_is_stopped_at_the_value_cap() {
    // minijinja scopes a `set` in a loop to one iteration, so the probe's plain form only
    // doubles once; these forms carry the string from one step to the next.
    let unrolled = format!("{{% set s = 'x' %}}{}", "{% set s = s ~ s %}".repeat(40));
    assert_limited(&unrolled, Limit::ValueSize);
    assert_limited(
        "{% macro grow(s, n) %}{% set t = s ~ s %}{{ grow(t, n - 1) if n > 0 }}{% endmacro %}{{ grow('x', 40) }}",
        Limit::ValueSize,
    );
    assert_limited(
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        Limit::ValueSize,
    );
    let captured = format!(
        "{{% set s = 'x' %}}{}",
        "{% set s %}{{ s }}{{ s }}{% endset %}".repeat(40)
    );
    assert_limited(&captured, Limit::ValueSize);
}

#[test]
fn issue_20_a_huge_indent_width_is_refused_before_it_is_allocated() {
    assert_limited("{{ 'x'|indent(10000000000, true) }}", Limit::ValueSize);
    assert_limited(
        "{{ 'x'|indent(width=10000000000, first=true) }}",
        Limit::ValueSize,
    );
}

/// The bounded `indent` is still minijinja's for real widths (tool schemas use it).
#[test]
fn indent_keeps_its_meaning() -> Result<(), TemplateError> {
    let out = render(
        "{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(width=3, first=true) }}",
        json!([{"role": "user", "content": "hi"}]),
    )?;
    assert_eq!(out, "a\n  b|   a\n   b");
    Ok(())
}

#[test]
fn issue_20_a_recursive_macro_hits_the_recursion_limit() {
    assert_limited(
        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        Limit::Recursion,
    );
}

#[test]
fn issue_20_output_past_the_cap_is_refused() {
    assert_limited(
        "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
        Limit::Output,
    );
}

/// The guards added after assignments leave whitespace control as it was.
#[test]
fn assignment_guards_keep_whitespace_control() -> Result<(), TemplateError> {
    let source = "{% set a = 'A' %}\n  {% set b = 'B' -%}\n  {{ a }}{{ b }}\n{% set c %}C{% endset +%}\n{{ c }}|{% set d, e = 1, 2 %}{{ d }}{{ e }}";
    let out = render(source, json!([]))?;
    assert_eq!(out, "AB\n\nC|12");
    Ok(())
}
