//! Constrained decoding on a tiny random-weight model: its free output is garbage, so only the
//! constraint can make it a JSON object or a tool call, and the generation must end by itself
//! when the shape is complete.
#![allow(clippy::unwrap_used)]

use rmx_tests::models;

use std::time::Instant;

use rmx_engine::{Constraint, Engine, Event, FinishReason, GenerateRequest, Think, Tool};
use rmx_text::toolcall::{parse_complete, ToolCallFormat};

fn engine() -> Engine {
    Engine::load(&models::model("qwen3", "bf16")).unwrap()
}

fn collect(engine: &Engine, req: GenerateRequest) -> (Vec<u32>, String, FinishReason) {
    let mut rx = engine.generate(req).unwrap();
    let (mut ids, mut text) = (vec![], String::new());
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, text: t, .. } => {
                ids.push(id);
                text.push_str(&t);
            }
            Event::Done {
                finish, text: t, ..
            } => {
                text.push_str(&t);
                return (ids, text, finish);
            }
            Event::Error(e) => panic!("{e}"),
        }
    }
    panic!("no Done event")
}

fn request(e: &Engine, max_tokens: usize, temperature: f32, seed: u64) -> GenerateRequest {
    let prompt = e.raw_tokens("Reply with a JSON object:").unwrap();
    let mut req = GenerateRequest::new(prompt, max_tokens);
    req.sampling.temperature = temperature;
    req.sampling.seed = Some(seed);
    req
}

#[test]
fn json_mode_output_is_one_json_object_and_ends_there() {
    let e = engine();
    // Without the constraint the random model writes no JSON.
    let t = Instant::now();
    let (free_ids, free, _) = collect(&e, request(&e, 40, 0.0, 0));
    let free_ms = t.elapsed().as_secs_f64() * 1e3 / free_ids.len() as f64;
    assert!(
        serde_json::from_str::<serde_json::Value>(&free).is_err(),
        "{free}"
    );
    eprintln!("free t=0: {} tokens, {free_ms:.1} ms/token", free_ids.len());
    for (temperature, seed) in [(0.0, 0), (1.0, 1), (1.0, 2), (0.7, 3)] {
        let mut req = request(&e, 60, temperature, seed);
        req.constraint = Some(e.constrain(&Constraint::json_object()).unwrap());
        let t = Instant::now();
        let (ids, text, finish) = collect(&e, req);
        let per_token = t.elapsed().as_secs_f64() * 1e3 / ids.len() as f64;
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("t={temperature} seed={seed}: {text:?}: {err}"));
        assert!(v.is_object(), "{text}");
        assert_eq!(finish, FinishReason::Stop, "{text}");
        assert!(ids.len() <= 60);
        eprintln!(
            "json t={temperature}: {} tokens, {per_token:.1} ms/token: {text}",
            ids.len()
        );
    }
}

#[test]
fn a_forced_hermes_call_names_an_allowed_tool_with_json_arguments() {
    let e = engine();
    let names = ["get_weather", "get_time"];
    let tools = vec![
        Tool::new(
            "get_weather",
            Some(
                serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"]}),
            ),
        ),
        Tool::new("get_time", None),
    ];
    let call = e
        .constrain(&Constraint::tool_call(ToolCallFormat::Hermes, tools))
        .unwrap();
    for seed in 0..3 {
        let mut req = request(&e, 80, 1.0, seed);
        req.constraint = Some(call.clone());
        let (_, text, finish) = collect(&e, req);
        assert_eq!(finish, FinishReason::Stop, "{text}");
        let (content, calls) = parse_complete(ToolCallFormat::Hermes, &text);
        assert_eq!(calls.len(), 1, "{text}");
        assert_eq!(content.trim(), "", "{text}");
        assert!(names.contains(&calls[0].name.as_str()), "{text}");
        let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
        // The arguments follow the tool's schema: only its parameters, the required one there.
        let args = args.as_object().unwrap();
        if calls[0].name == "get_weather" {
            assert!(args["city"].is_string(), "{text}");
            assert_eq!(args.len(), 1, "{text}");
        }
    }
}

#[test]
fn a_thought_is_closed_in_time_for_the_object() {
    let e = engine();
    let mut req = request(&e, 30, 1.0, 7);
    let c = Constraint::json_object().with_think(Think::Inside);
    req.constraint = Some(e.constrain(&c).unwrap());
    let (_, text, finish) = collect(&e, req);
    assert_eq!(finish, FinishReason::Stop, "{text}");
    let (_, json) = text.split_once("</think>").unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert!(v.is_object(), "{text}");
}

/// Prints what masking costs per step on a 151,936-wide row (the host mask copied into MLX
/// and applied with `where`, then greedy selection), beside selection alone.
#[test]
fn mask_cost_per_step_is_printed() {
    use rmx_engine::sampler::Sampler;
    use rmx_engine::SamplingParams;
    use rmx_mlx::{Array, Dtype};
    let vocab = 151_936;
    let logits = Array::zeros(&[1, vocab], Dtype::F32).unwrap();
    let mut s = Sampler::new(&SamplingParams::default(), vocab, &[]).unwrap();
    let mut allowed = vec![false; vocab as usize];
    for i in (0..vocab as usize).step_by(3) {
        allowed[i] = true;
    }
    let n = 50;
    let t = Instant::now();
    for _ in 0..n {
        s.choose(&logits).unwrap().token.item::<u32>().unwrap();
    }
    let plain = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        let mask = Array::from_slice(&allowed, &[1, vocab]).unwrap();
        let id = s
            .choose_within(&logits, Some(&mask))
            .unwrap()
            .token
            .item::<u32>()
            .unwrap();
        assert!(allowed[id as usize]);
    }
    let masked = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    eprintln!("greedy choice per step: {plain:.0} us plain, {masked:.0} us with a host mask");
}

#[test]
fn a_forced_llama3_call_parses_on_the_llama_vocabulary() {
    let e = Engine::load(&models::model("llama", "bf16")).unwrap();
    let mut req = request(&e, 60, 1.0, 11);
    let c = Constraint::tool_call(
        ToolCallFormat::Llama3Json,
        vec![Tool::new("get_time", None)],
    );
    req.constraint = Some(e.constrain(&c).unwrap());
    let (_, text, finish) = collect(&e, req);
    assert_eq!(finish, FinishReason::Stop, "{text}");
    let (_, calls) = parse_complete(ToolCallFormat::Llama3Json, &text);
    assert_eq!(calls.len(), 1, "{text}");
    assert_eq!(calls[0].name, "get_time");
    let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert!(args.is_object(), "{text}");
}

#[test]
fn a_forced_call_after_a_thought_ends_in_time() {
    // The model may think first (open `<think>` itself, or start inside one): the thought is
    // closed and the call written before `max_tokens`, whatever the sampled text.
    let e = engine();
    let tools = vec![Tool::new(
        "get_weather",
        Some(serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    )];
    for think in [Think::MayOpen, Think::Inside] {
        let c = Constraint::tool_call(ToolCallFormat::Hermes, tools.clone()).with_think(think);
        let call = e.constrain(&c).unwrap();
        for seed in 0..6 {
            let mut req = request(&e, 60, 0.8, seed);
            req.constraint = Some(call.clone());
            let (_, text, finish) = collect(&e, req);
            assert_eq!(finish, FinishReason::Stop, "{think:?} seed {seed}: {text}");
            // A thought ends at its first `</think>`; the arguments may hold the text too.
            let answer = text
                .split_once("</think>")
                .map_or(text.as_str(), |(_, a)| a);
            let (_, calls) = parse_complete(ToolCallFormat::Hermes, answer.trim_start());
            assert_eq!(calls.len(), 1, "{think:?} seed {seed}: {text}");
        }
    }
}

#[test]
fn bench_reports_constrained_decode_beside_the_free_one() {
    // `rmx bench --json-schema`: every round is decoded free and under the schema.
    use rmx_engine::bench::{self, BenchConfig};
    let e = engine();
    let schema = serde_json::json!({"type": "object", "properties": {"note": {"type": "string"}},
                                    "required": ["note"], "additionalProperties": false});
    let cfg = BenchConfig {
        cases: vec![(16, 24)],
        rounds: 2,
        warmup: 0,
        constraint: Some(Constraint::json_schema(schema)),
        ..BenchConfig::default()
    };
    let mut lines = Vec::new();
    let cases = bench::run(&e, &cfg, |l| lines.push(l.to_string())).unwrap();
    let c = cases[0]
        .constrained
        .as_ref()
        .expect("the constrained rounds");
    assert!(c.decode_tps.median > 0.0 && c.decode_ratio > 0.0, "{c:?}");
    // The answer ends where the object closes, at the latest at the case's length.
    assert!((1.0..=24.0).contains(&c.gen_tokens.median), "{c:?}");
    assert!(
        lines.iter().all(|l| l.contains("constrained decode")),
        "{lines:?}"
    );
    let json = serde_json::to_value(&cases[0]).unwrap();
    assert!(json["constrained"]["decode_ratio"].is_number(), "{json}");
}
