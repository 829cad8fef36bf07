//! Token-for-token parity with mlx-lm: for every family, tiny random models of the family's real
//! config shape in several weight formats, written by mlx-lm; the engine's greedy 64 tokens
//! must equal mlx-lm's on the same files, for a raw and a chat-templated prompt, and its top
//! log-probabilities must agree with mlx-lm's.
#![allow(clippy::unwrap_used)]

mod common;

use rmx_engine::{ChatPrompt, Engine, Event, FinishReason, GenerateRequest};
use serde_json::json;

const MAX_TOKENS: usize = 64;
const TOP: usize = 8;

struct Run {
    tokens: Vec<u32>,
    text: String,
    /// (id, logprob) alternatives at steps 0 and 1.
    top: Vec<Vec<(u32, f32)>>,
}

fn generate(engine: &Engine, prompt: Vec<u32>) -> Run {
    let mut req = GenerateRequest::new(prompt, MAX_TOKENS);
    req.ignore_eos = true;
    req.top_logprobs = Some(TOP);
    let mut rx = engine.generate(req).unwrap();
    let mut run = Run {
        tokens: vec![],
        text: String::new(),
        top: vec![],
    };
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, text, logprob } => {
                run.tokens.push(id);
                run.text.push_str(&text);
                if run.top.len() < 2 {
                    run.top.push(logprob.unwrap().top);
                }
            }
            Event::Done { finish, text, .. } => {
                assert_eq!(finish, FinishReason::Length);
                run.text.push_str(&text);
                return run;
            }
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    panic!("stream ended without Done");
}

/// bf16 logits differ in the last bit at most where the math is the same; anything beyond a
/// couple of bf16 ulps at these magnitudes means a different computation.
fn tolerance(quant: &str) -> f32 {
    if quant == "f32" {
        1e-4
    } else {
        0.06
    }
}

fn check(family: &str, quant: &str) {
    let dir = common::model(family, quant);
    let engine = Engine::load(&dir).unwrap_or_else(|e| panic!("{family}-{quant}: load: {e}"));
    let prompts = [
        ("The capital of France is a city", false),
        ("Write a haiku about the sea.", true),
    ];
    for (prompt, chat) in prompts {
        let want = common::reference(&dir, prompt, chat, MAX_TOKENS);
        let ids = if chat {
            let c = ChatPrompt {
                messages: json!([{"role": "user", "content": prompt}]),
                add_generation_prompt: true,
                ..ChatPrompt::default()
            };
            engine.chat_tokens(&c).unwrap()
        } else {
            engine.raw_tokens(prompt).unwrap()
        };
        let what = format!("{family}-{quant} ({})", if chat { "chat" } else { "raw" });
        assert_eq!(
            ids, want.prompt_ids,
            "{what}: prompt tokens differ from mlx-lm's"
        );
        let got = generate(&engine, ids);
        let distinct = got
            .tokens
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len();
        assert!(
            distinct > 8,
            "{what}: degenerate test model ({distinct} distinct tokens)"
        );
        if let Some(i) = got
            .tokens
            .iter()
            .zip(&want.tokens)
            .position(|(a, b)| a != b)
        {
            panic!(
                "{what}: token {i} differs: rmx {:?} vs mlx-lm {:?}",
                &got.tokens[i..(i + 5).min(MAX_TOKENS)],
                &want.tokens[i..(i + 5).min(MAX_TOKENS)]
            );
        }
        assert_eq!(got.tokens.len(), want.tokens.len(), "{what}");
        for (step, alts) in got.top.iter().enumerate() {
            assert_eq!(alts.len(), TOP);
            for (id, lp) in alts {
                let r = want.logprobs[step][*id as usize];
                assert!(
                    (lp - r).abs() <= tolerance(quant),
                    "{what}: step {step} token {id}: logprob {lp} vs mlx-lm {r}"
                );
            }
        }
        let decoded = engine.tokenizer().decode(&got.tokens, true).unwrap();
        assert_eq!(
            got.text, decoded,
            "{what}: streamed text differs from decode(tokens)"
        );
    }
}

fn family(name: &str, quants: &[&str]) {
    for q in quants {
        check(name, q);
    }
}

const STANDARD: &[&str] = &["bf16", "8bit", "4bit"];

#[test]
fn llama() {
    family("llama", &["f32", "bf16", "8bit", "4bit", "4bit-mixed"]);
}

#[test]
fn llama_tied() {
    family("llama_tied", STANDARD);
}

#[test]
fn mistral() {
    family("mistral", STANDARD);
}

#[test]
fn qwen2() {
    family("qwen2", STANDARD);
}

#[test]
fn qwen3() {
    family("qwen3", &["f32", "bf16", "8bit", "4bit", "4bit-mixed"]);
}

#[test]
fn qwen3_tied() {
    family("qwen3_tied", STANDARD);
}

#[test]
fn gemma3() {
    family("gemma3", &["f32", "bf16", "8bit", "4bit"]);
}
