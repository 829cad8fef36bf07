//! Issue #20: the bounds on a chat template's render (`template/limits.rs`) leave room for
//! every real template: a long agent session (30 tool schemas, about 15K tokens of
//! conversation with tool calls) renders with each fixture package's own template.

mod common;

use rmx_text::template::{ChatTemplate, RenderInput, TemplateError};
use rmx_text::tokenizer::Tokenizer;
use serde_json::{json, Value};

const PACKAGES: [&str; 7] = [
    "qwen3",
    "llama3_1",
    "gemma3",
    "deepseek_v3",
    "gptoss",
    "mistral_nemo",
    "llama2",
];

fn tools() -> Value {
    let tools: Vec<Value> = (0..30)
        .map(|i| {
            json!({"type": "function", "function": {
                "name": format!("tool_{i}"),
                "description": format!("Tool number {i}: reads, searches and edits files in the workspace, with options."),
                "parameters": {"type": "object", "properties": {
                    "path": {"type": "string", "description": "A path relative to the workspace root."},
                    "pattern": {"type": "string", "description": "A regular expression to look for."},
                    "limit": {"type": "integer", "description": "How many results at most."},
                    "mode": {"type": "string", "enum": ["read", "write", "append"]},
                }, "required": ["path"]},
            }})
        })
        .collect();
    Value::Array(tools)
}

/// User and assistant turns (each assistant turn one tool call and its result, then prose),
/// long enough for about 15K tokens.
fn agent_session() -> Value {
    let paragraph = "The function reads the configuration, validates each field against the schema, and returns the first error it finds together with the line it came from. ";
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."})];
    for turn in 0..40 {
        messages.push(
            json!({"role": "user", "content": format!("Step {turn}: {}", paragraph.repeat(5))}),
        );
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{
            "id": format!("call{turn:05}"), "type": "function",
            "function": {"name": format!("tool_{}", turn % 30), "arguments": {"path": "src/lib.rs", "limit": 5}},
        }]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call{turn:05}"), "content": paragraph.repeat(3)}));
        messages.push(json!({"role": "assistant", "content": paragraph.repeat(2)}));
    }
    messages.push(json!({"role": "user", "content": "Now fix it."}));
    Value::Array(messages)
}

#[test]
fn issue_20_a_long_agent_session_renders_within_the_limits() {
    let (messages, tools) = (agent_session(), tools());
    for package in PACKAGES {
        let tokenizer = Tokenizer::from_dir(common::tokenizer_dir(package))
            .unwrap_or_else(|err| panic!("{package}: {err}"));
        let Some(source) = tokenizer.chat_template() else {
            continue;
        };
        let template = ChatTemplate::new(source).unwrap_or_else(|err| panic!("{package}: {err}"));
        let mut input = RenderInput::new(&messages).with_special_tokens(tokenizer.special_tokens());
        input.tools = Some(&tools);
        input.add_generation_prompt = true;
        match template.render(&input) {
            Ok(text) => {
                let tokens = tokenizer.encode(&text, false).expect("encode").len();
                assert!(tokens > 10_000, "{package}: only {tokens} tokens");
            }
            // Some formats refuse a tool-call shape (strict role alternation, one call per
            // turn): that is the template's own word, not a limit.
            Err(TemplateError::Raised(_)) if package != "qwen3" => {}
            Err(err) => panic!("{package}: {err}: {:?}", std::error::Error::source(&err)),
        }
    }
}
