//! Chat templates rendered by rmx must be byte-identical to transformers'
//! `apply_chat_template(..., tokenize=False)`, for the real templates of the npm tokenizer
//! packages and for the ones in `tests/data` (ChatML, Mistral- and Llama-2-style, and a
//! template that gathers the Python behaviours templates use).

mod common;

use rmx_text::template::{ChatTemplate, RenderInput, TemplateError};
use rmx_text::tokenizer::Tokenizer;
use serde_json::{json, Map, Value};

/// (label, tokenizer package, template file in tests/data or the package's own template)
const TEMPLATES: [(&str, &str, Option<&str>); 8] = [
    ("llama3_1", "llama3_1", None),
    ("qwen3", "qwen3", None),
    ("gemma3", "gemma3", None),
    ("deepseek_v3", "deepseek_v3", None),
    ("chatml", "qwen3", Some("chatml.jinja")),
    ("mistral", "llama2", Some("mistral.jinja")),
    ("llama2", "llama2", Some("llama2.jinja")),
    ("python_isms", "llama3_1", Some("python_isms.jinja")),
];

fn tools() -> Value {
    json!([{
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7.5}
                },
                "required": ["location"]
            }
        }
    }])
}

/// (name, messages, whether tools go with it)
fn conversations() -> Vec<(&'static str, Value, bool)> {
    vec![
        (
            "system_user",
            json!([
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is the capital of France?"}
            ]),
            false,
        ),
        (
            "multi_turn",
            json!([
                {"role": "user", "content": "Ça va? 你好 😀"},
                {"role": "assistant", "content": "Très bien, merci!"},
                {"role": "user", "content": "Tell me a \"joke\" about 'quotes' & <tags>."}
            ]),
            false,
        ),
        (
            "tools_offered",
            json!([
                {"role": "system", "content": "Use tools when needed."},
                {"role": "user", "content": "Weather in Paris?"}
            ]),
            true,
        ),
        (
            "tool_calls_object_arguments",
            json!([
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}
                }]},
                {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 22}"},
                {"role": "assistant", "content": "It is 22°C in Paris."},
                {"role": "user", "content": "Thanks"}
            ]),
            true,
        ),
        (
            "tool_calls_string_arguments",
            json!([
                {"role": "user", "content": "Weather in Oslo and Rome?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Oslo\"}"}},
                    {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Rome\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "a", "content": "-3"},
                {"role": "tool", "tool_call_id": "b", "content": "19"}
            ]),
            true,
        ),
        (
            "reasoning",
            json!([
                {"role": "user", "content": "Capital of France?"},
                {"role": "assistant", "reasoning_content": "Easy.\nIt is Paris.", "content": "Paris."},
                {"role": "user", "content": "And Germany?"}
            ]),
            false,
        ),
        (
            "content_parts",
            json!([
                {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "text", "text": "Please."}]}
            ]),
            false,
        ),
        (
            "whitespace",
            json!([
                {"role": "user", "content": "  \n Hello there \n\n"},
                {"role": "assistant", "content": "\n<think>\nhidden\n</think>\n\n  Hi!  "},
                {"role": "user", "content": "\tok\t"}
            ]),
            false,
        ),
    ]
}

struct Case {
    label: String,
    package: &'static str,
    template: Option<String>,
    messages: Value,
    tools: Option<Value>,
    add_generation_prompt: bool,
    kwargs: Map<String, Value>,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (template_label, package, file) in TEMPLATES {
        let template = file.map(|file| {
            let path = common::data_path(file);
            std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
        });
        let thinking: &[Option<bool>] = match template_label {
            "qwen3" | "python_isms" => &[None, Some(true), Some(false)],
            _ => &[None],
        };
        for (name, messages, with_tools) in conversations() {
            for add_generation_prompt in [false, true] {
                for enable_thinking in thinking {
                    let mut kwargs = Map::new();
                    if let Some(on) = enable_thinking {
                        kwargs.insert("enable_thinking".into(), json!(on));
                    }
                    cases.push(Case {
                        label: format!(
                            "{template_label}/{name}/agp={add_generation_prompt}/thinking={enable_thinking:?}"
                        ),
                        package,
                        template: template.clone(),
                        messages: messages.clone(),
                        tools: with_tools.then(tools),
                        add_generation_prompt,
                        kwargs,
                    });
                }
            }
        }
    }
    cases
}

fn render_rmx(tokenizer: &Tokenizer, case: &Case) -> Result<String, TemplateError> {
    let source = match &case.template {
        Some(source) => source.as_str(),
        None => tokenizer
            .chat_template()
            .unwrap_or_else(|| panic!("{}: the package has no chat template", case.label)),
    };
    let template = ChatTemplate::new(source)?;
    let mut input =
        RenderInput::new(&case.messages).with_special_tokens(tokenizer.special_tokens());
    input.tools = case.tools.as_ref();
    input.add_generation_prompt = case.add_generation_prompt;
    input.kwargs = case.kwargs.clone();
    template.render(&input)
}

#[test]
fn chat_templates_render_byte_identical_to_transformers() {
    let cases = cases();
    let request = json!({
        "renders": cases.iter().map(|case| json!({
            "dir": common::tokenizer_dir(case.package),
            "template": case.template,
            "messages": case.messages,
            "tools": case.tools,
            "add_generation_prompt": case.add_generation_prompt,
            "kwargs": case.kwargs,
        })).collect::<Vec<_>>()
    });
    let answers = common::reference(&request);
    let answers = answers["renders"].as_array().expect("renders is a list");
    assert_eq!(answers.len(), cases.len());

    let mut tokenizers = std::collections::HashMap::new();
    let mut failures = Vec::new();
    let mut rendered = std::collections::BTreeMap::<&str, usize>::new();
    for (case, want) in cases.iter().zip(answers) {
        let tokenizer = tokenizers.entry(case.package).or_insert_with(|| {
            Tokenizer::from_dir(common::tokenizer_dir(case.package))
                .unwrap_or_else(|err| panic!("{}: {err}", case.package))
        });
        let got = render_rmx(tokenizer, case);
        let template_label = case.label.split('/').next().unwrap_or_default();
        match (want.get("text").and_then(Value::as_str), &got) {
            (Some(want), Ok(got)) if want == got => {
                *rendered.entry(template_label).or_default() += 1;
            }
            (Some(want), Ok(got)) => failures.push(format!(
                "{}: output differs\n--- transformers\n{want:?}\n--- rmx\n{got:?}",
                case.label
            )),
            (Some(_), Err(err)) => failures.push(format!(
                "{}: transformers rendered, rmx failed: {}",
                case.label,
                error_chain(err)
            )),
            (None, Ok(got)) => failures.push(format!(
                "{}: transformers failed ({want}), rmx rendered {got:?}",
                case.label
            )),
            (None, Err(err)) => {
                // Both refuse; a template's own raise_exception must carry its message.
                if let Some(message) = want.get("raised").and_then(Value::as_str) {
                    if !matches!(err, TemplateError::Raised(m) if m == message) {
                        failures.push(format!(
                            "{}: transformers raised {message:?}, rmx: {}",
                            case.label,
                            error_chain(err)
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    eprintln!("rendered identically, per template: {rendered:?}");
    // Refusing everything would also "match": each template must really render.
    for (label, _, _) in TEMPLATES {
        let count = rendered.get(label).copied().unwrap_or(0);
        assert!(count >= 4, "{label}: only {count} conversations rendered");
    }
}

#[test]
fn special_tokens_match_what_transformers_passes_to_templates() {
    let packages: Vec<&str> = common::TOKENIZERS.to_vec();
    let request = json!({
        "specials": packages.iter().map(|p| common::tokenizer_dir(p)).collect::<Vec<_>>()
    });
    let answers = common::reference(&request);
    for (package, want) in packages
        .iter()
        .zip(answers["specials"].as_array().expect("a list"))
    {
        let tokenizer = Tokenizer::from_dir(common::tokenizer_dir(package))
            .unwrap_or_else(|err| panic!("{package}: {err}"));
        let want = want.as_object().expect("special_tokens_map is a dict");
        for (name, token) in tokenizer.special_tokens() {
            assert_eq!(
                want.get(name).and_then(Value::as_str),
                Some(token.as_str()),
                "{package}: {name}"
            );
        }
        for (name, token) in want {
            // GemmaTokenizer's class adds a `<mask>` default that no file of the model names.
            if tokenizer.special_token(name).is_none()
                && !(*package == "gemma3" && name == "mask_token")
            {
                panic!("{package}: transformers has {name} = {token}, rmx has none");
            }
        }
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(err) = source {
        text.push_str(&format!(": {err:#}"));
        source = err.source();
    }
    text
}
