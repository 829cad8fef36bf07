//! Issue #20: structured output against a suite of JSON schemas (tests/data/json_schemas.json:
//! anyOf, oneOf, allOf, $ref and recursion, items and prefixItems, additionalProperties false,
//! enums and consts, patterns, formats, lengths, ranges, nesting). A random-weight model writes
//! whatever the mask lets through, so each answer shows what the constraint really enforces:
//! every one must end by itself within `max_tokens` and validate against its schema with
//! Python's `jsonschema` (formats checked), the reference validator.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use rmx_engine::{Constraint, Engine, Event, FinishReason, GenerateRequest};
use rmx_tests::models;
use serde_json::{json, Value};

const MAX_TOKENS: usize = 96;

/// The suite's schemas, by name.
fn schemas() -> Vec<(String, Value)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/json_schemas.json");
    let cases: Vec<Value> = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    cases
        .into_iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["schema"].clone()))
        .collect()
}

/// The answer's text and how it ended.
fn generate(e: &Engine, schema: &Value, seed: u64) -> (String, FinishReason) {
    let prompt = e
        .raw_tokens("Answer with JSON that matches the schema:")
        .unwrap();
    let mut req = GenerateRequest::new(prompt, MAX_TOKENS);
    req.sampling.temperature = 1.0;
    req.sampling.seed = Some(seed);
    req.constraint = Some(
        e.constrain(&Constraint::json_schema(schema.clone()))
            .unwrap(),
    );
    let mut rx = e.generate(req).unwrap();
    let mut text = String::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { text: t, .. } => text.push_str(&t),
            Event::Done {
                finish, text: t, ..
            } => {
                text.push_str(&t);
                return (text, finish);
            }
            Event::Error(err) => panic!("{err}"),
        }
    }
    panic!("no Done event")
}

/// Runs the Python validator over `(name, schema, output)` cases; returns its failures and
/// the formats it checked.
fn validate(cases: &[Value]) -> (Vec<Value>, Vec<String>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/validate_json_schema.py");
    let mut child = Command::new(rmx_tests::python())
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(cases).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let formats = answer["formats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    (answer["failures"].as_array().unwrap().clone(), formats)
}

#[test]
fn issue_20_every_constrained_answer_validates_against_its_schema() {
    let e = Engine::load(&models::model("qwen3", "bf16")).unwrap();
    let suite = schemas();
    assert!(suite.len() >= 50, "{} schemas", suite.len());
    let mut cases = Vec::new();
    let mut cut = Vec::new();
    for (seed, (name, schema)) in suite.iter().enumerate() {
        let (output, finish) = generate(&e, schema, seed as u64);
        if finish != FinishReason::Stop {
            cut.push(format!("{name}: {output}"));
        }
        cases.push(json!({"name": name, "schema": schema, "output": output}));
    }
    // The validator's verdict first: it says what is wrong with an answer, and a cut one is
    // also invalid.
    let (failures, formats) = validate(&cases);
    let shown: Vec<String> = failures
        .iter()
        .map(|f| {
            let name = f["name"].as_str().unwrap_or("");
            let output = cases
                .iter()
                .find(|c| c["name"] == name)
                .map_or("", |c| c["output"].as_str().unwrap_or(""));
            format!("{name}: {}\n  {output}", f["error"])
        })
        .collect();
    assert!(shown.is_empty(), "invalid answers:\n{}", shown.join("\n"));
    assert!(
        cut.is_empty(),
        "answers cut at max_tokens:\n{}",
        cut.join("\n")
    );
    // The suite exercises the formats it claims to, and the validator checked each.
    for f in ["date", "date-time", "time", "email", "uuid", "ipv4", "ipv6"] {
        assert!(
            formats.iter().any(|g| g == f),
            "format {f} unused: {formats:?}"
        );
    }
}

#[test]
fn a_schema_that_cannot_be_enforced_is_refused_with_the_keyword() {
    let e = Engine::load(&models::model("qwen3", "bf16")).unwrap();
    for (schema, word) in [
        (json!({"type": "array", "uniqueItems": true}), "uniqueItems"),
        (
            json!({"type": "string", "format": "no-such-format"}),
            "no-such-format",
        ),
        (json!({"$ref": "https://example.com/s.json"}), "example.com"),
    ] {
        let err = e.constrain(&Constraint::json_schema(schema)).unwrap_err();
        assert!(err.to_string().contains(word), "{err}");
    }
}
