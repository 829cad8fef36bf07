//! Token-for-token parity with mlx-lm: for every family, tiny random models of the family's real
//! config shape in several weight formats, written by mlx-lm; the engine's greedy tokens must
//! equal mlx-lm's on the same files, for a raw and a chat-templated prompt, and its top
//! log-probabilities must agree with mlx-lm's. One test per model, so the harness spreads them
//! over the cores; a reference worker (tests/support py_worker.rs, kept across the tests) writes
//! the model, then mlx-lm answers the prompts while the engine generates. (The engine side of all of them takes turns: rmx-mlx evaluates under one
//! process-wide lock, so the sum of the engine times is this suite's floor, whatever the cores.)
#![allow(clippy::unwrap_used)]

use rmx_tests::models;

use rmx_engine::{ChatPrompt, Engine, Event, FinishReason, GenerateRequest};
use serde_json::json;

/// Greedy tokens per prompt. The f32 form runs 64: it carries the checks of the decode path
/// itself (KV cache growth, positions, the 8-token sliding windows wrapping round many times),
/// and f32 is where a wrong computation cannot hide behind rounding. The bf16 form differs from
/// it only in the dtype every op runs in, which every step exercises: 32 steps still wrap each
/// window four times. The quantized forms differ only in how weights are stored and multiplied:
/// 16 steps; on MLX's CPU backend a quantized matmul over the real vocabularies (128K-262K rows)
/// costs ~0.1-0.19 s a token on each side, against ~0.015-0.045 s dense.
fn max_tokens(quant: &str) -> usize {
    match quant {
        "f32" => 64,
        "bf16" => 32,
        _ => 16,
    }
}
const TOP: usize = 8;
const LONG_PROMPT: &str = "In the beginning of the long winter the villagers gathered wood, \
    salted fish and mended the nets, while the children counted the geese that flew south over \
    the grey hills";

struct Run {
    tokens: Vec<u32>,
    text: String,
    /// (id, logprob) alternatives at steps 0 and 1.
    top: Vec<Vec<(u32, f32)>>,
}

fn generate(engine: &Engine, prompt: Vec<u32>, max_tokens: usize) -> Run {
    let mut req = GenerateRequest::new(prompt, max_tokens);
    req.ignore_eos = true;
    // mlx-lm reads every prompt whole: so does rmx here.
    req.no_prefix_cache = true;
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
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let n = max_tokens(quant);
    let mut prompts = vec![
        ("The capital of France is a city", false),
        ("Write a haiku about the sea.", true),
    ];
    if family.contains("moe") || family == "gpt_oss" || family == "qwen3_next" {
        // 32+ prompt tokens make 64+ (token, expert) pairs at top-2: mlx-lm's sorted expert
        // path, which the short prompts and decode steps never take.
        prompts.push((LONG_PROMPT, false));
    }
    let (dir, pending) = models::model_with_references(family, quant, &prompts, n);
    let engine = Engine::load(&dir).unwrap_or_else(|e| panic!("{family}-{quant}: load: {e}"));
    let mut runs = vec![];
    for (prompt, chat) in prompts {
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
        let got = generate(&engine, ids.clone(), n);
        runs.push((chat, ids, got));
    }
    let wants = pending.wait();
    assert_eq!(
        wants.len(),
        runs.len(),
        "{family}-{quant}: mlx-lm's answers"
    );
    for ((chat, ids, got), want) in runs.into_iter().zip(wants) {
        let what = format!("{family}-{quant} ({})", if chat { "chat" } else { "raw" });
        assert_eq!(
            ids, want.prompt_ids,
            "{what}: prompt tokens differ from mlx-lm's"
        );
        let distinct = got
            .tokens
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len();
        // Against a collapsed test model (one token over and over, or a 2-cycle), which would
        // pass whatever the engine computes. The random models do fall into runs and 2-cycles
        // for a stretch at times (llama-4bit's raw prompt: 8 distinct in its first 32 tokens,
        // 40 in 64), so the bar is one new token per 8 steps: 8 of 64, 4 of 32.
        assert!(
            distinct > n / 8,
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
                &got.tokens[i..(i + 5).min(n)],
                &want.tokens[i..(i + 5).min(n)]
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

// The 8-bit form is checked where a family quantizes something of its own (experts, routers,
// gated-delta projections, per-layer inputs) and on llama and qwen3 for the dense layers all the
// others share; families that differ from those only in attention or rope details (mistral,
// qwen2, the tied and YaRN variants, phi3) are checked quantized at 4 bits.
macro_rules! parity {
    ($($name:ident: $family:literal $quant:literal;)*) => {
        $(#[test]
        fn $name() {
            check($family, $quant);
        })*
    };
}

parity! {
    llama_f32: "llama" "f32";
    llama_bf16: "llama" "bf16";
    llama_8bit: "llama" "8bit";
    llama_4bit: "llama" "4bit";
    llama_4bit_mixed: "llama" "4bit-mixed";
    llama_tied_bf16: "llama_tied" "bf16";
    llama_tied_4bit: "llama_tied" "4bit";
    mistral_bf16: "mistral" "bf16";
    mistral_4bit: "mistral" "4bit";
    qwen2_bf16: "qwen2" "bf16";
    qwen2_4bit: "qwen2" "4bit";
    qwen3_f32: "qwen3" "f32";
    qwen3_bf16: "qwen3" "bf16";
    qwen3_8bit: "qwen3" "8bit";
    qwen3_4bit: "qwen3" "4bit";
    qwen3_4bit_mixed: "qwen3" "4bit-mixed";
    qwen3_mxfp8: "qwen3" "mxfp8";
    qwen3_nvfp4: "qwen3" "nvfp4";
    qwen3_tied_bf16: "qwen3_tied" "bf16";
    qwen3_tied_4bit: "qwen3_tied" "4bit";
    qwen3_yarn_f32: "qwen3_yarn" "f32";
    qwen3_yarn_bf16: "qwen3_yarn" "bf16";
    qwen3_yarn_4bit: "qwen3_yarn" "4bit";
    qwen3_moe_f32: "qwen3_moe" "f32";
    qwen3_moe_bf16: "qwen3_moe" "bf16";
    qwen3_moe_8bit: "qwen3_moe" "8bit";
    qwen3_moe_4bit: "qwen3_moe" "4bit";
    gpt_oss_f32: "gpt_oss" "f32";
    gpt_oss_bf16: "gpt_oss" "bf16";
    gpt_oss_8bit: "gpt_oss" "8bit";
    gpt_oss_4bit: "gpt_oss" "4bit";
    gpt_oss_mxfp4: "gpt_oss" "mxfp4";
    qwen3_next_f32: "qwen3_next" "f32";
    qwen3_next_bf16: "qwen3_next" "bf16";
    qwen3_next_8bit: "qwen3_next" "8bit";
    qwen3_next_4bit: "qwen3_next" "4bit";
    qwen3_5_f32: "qwen3_5" "f32";
    qwen3_5_bf16: "qwen3_5" "bf16";
    qwen3_5_8bit: "qwen3_5" "8bit";
    qwen3_5_4bit: "qwen3_5" "4bit";
    qwen3_5_moe_f32: "qwen3_5_moe" "f32";
    qwen3_5_moe_bf16: "qwen3_5_moe" "bf16";
    qwen3_5_moe_8bit: "qwen3_5_moe" "8bit";
    qwen3_5_moe_4bit: "qwen3_5_moe" "4bit";
    gemma3_f32: "gemma3" "f32";
    gemma3_bf16: "gemma3" "bf16";
    gemma3_8bit: "gemma3" "8bit";
    gemma3_4bit: "gemma3" "4bit";
    gemma4_f32: "gemma4" "f32";
    gemma4_bf16: "gemma4" "bf16";
    gemma4_8bit: "gemma4" "8bit";
    gemma4_4bit: "gemma4" "4bit";
    gemma4_moe_f32: "gemma4_moe" "f32";
    gemma4_moe_bf16: "gemma4_moe" "bf16";
    gemma4_moe_8bit: "gemma4_moe" "8bit";
    gemma4_moe_4bit: "gemma4_moe" "4bit";
    gemma4_text_f32: "gemma4_text" "f32";
    gemma4_text_bf16: "gemma4_text" "bf16";
    gemma4_text_4bit: "gemma4_text" "4bit";
    gemma3_vl_f32: "gemma3_vl" "f32";
    gemma3_vl_bf16: "gemma3_vl" "bf16";
    gemma3_vl_4bit: "gemma3_vl" "4bit";
    phi3_f32: "phi3" "f32";
    phi3_bf16: "phi3" "bf16";
    phi3_4bit: "phi3" "4bit";
    phi3_plain_f32: "phi3_plain" "f32";
    phi3_plain_bf16: "phi3_plain" "bf16";
    phi3_plain_4bit: "phi3_plain" "4bit";
    smollm3_f32: "smollm3" "f32";
    smollm3_bf16: "smollm3" "bf16";
    smollm3_4bit: "smollm3" "4bit";
    mistral3_f32: "mistral3" "f32";
    mistral3_bf16: "mistral3" "bf16";
    mistral3_4bit: "mistral3" "4bit";
}
