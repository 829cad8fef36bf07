//! A quantized KV cache (issue #24, `--kv-bits`): greedy tokens equal mlx-lm's `generate_step`
//! with the same `kv_bits`, `kv_group_size` and `quantized_kv_start` on tiny random models
//! (tests/py/tiny_models.py writes them and answers for mlx-lm), f32 and bf16, grouped-query
//! heads wider than hidden / heads; the cache's bytes per token drop by the format's ratio;
//! settings MLX cannot store are refused.
#![allow(clippy::unwrap_used)]

use rmx_engine::{Engine, Event, GenerateRequest, KvQuant};
use rmx_tests::models;

const PROMPT: &str = "The capital of France is a city";

/// The greedy tokens, and the 8 best (id, logprob) of the first two steps.
type Run = (Vec<u32>, Vec<Vec<(u32, f32)>>);

fn tokens(engine: &Engine, prompt: Vec<u32>, n: usize, kv: KvQuant) -> Result<Run, String> {
    let mut req = GenerateRequest::new(prompt, n);
    req.ignore_eos = true;
    req.no_prefix_cache = true;
    req.top_logprobs = Some(8);
    req.kv_quant = Some(kv);
    let mut rx = engine.generate(req).unwrap();
    let mut out = (vec![], vec![]);
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, logprob, .. } => {
                out.0.push(id);
                if out.1.len() < 2 {
                    out.1.push(logprob.unwrap().top);
                }
            }
            Event::Done { .. } => return Ok(out),
            Event::Error(e) => return Err(e),
        }
    }
    panic!("stream ended without Done");
}

/// `n` greedy tokens of `family`-`quant` with `bits`/`group` from position `start` on: rmx's and
/// mlx-lm's, exactly; and the first two steps' best log-probabilities within rounding (at 8 bits
/// the tokens of these models often equal unquantized ones, while f32 log-probabilities move by
/// up to 0.03: the tolerance of 1e-4 tells a quantized cache from a plain one).
fn check(family: &str, quant: &str, bits: i32, group: i32, start: i32, n: usize) {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let (b, g, s) = (bits.to_string(), group.to_string(), start.to_string());
    let extra = [
        "--kv-bits",
        &b,
        "--kv-group-size",
        &g,
        "--quantized-kv-start",
        &s,
    ];
    let (dir, pending) =
        models::model_with_references_and(family, quant, &[(PROMPT, false)], n, &extra);
    let engine = Engine::load(&dir).unwrap();
    let ids = engine.raw_tokens(PROMPT).unwrap();
    let kv = KvQuant::new(bits, group, start).unwrap();
    let (got, top) = tokens(&engine, ids.clone(), n, kv).unwrap();
    let want = pending.wait().remove(0);
    let what = format!("{family}-{quant} kv {bits}-bit g{group} from {start}");
    assert_eq!(ids, want.prompt_ids, "{what}: prompt tokens");
    let distinct = got.iter().collect::<std::collections::HashSet<_>>().len();
    assert!(distinct > n / 8, "{what}: degenerate test model");
    assert_eq!(
        got, want.tokens,
        "{what}: greedy tokens differ from mlx-lm's"
    );
    let tol = if quant == "f32" { 1e-4 } else { 0.06 };
    for (step, alts) in top.iter().enumerate() {
        for (id, lp) in alts {
            let r = want.logprobs[step][*id as usize];
            assert!(
                (lp - r).abs() <= tol,
                "{what}: step {step} token {id}: logprob {lp} vs mlx-lm {r}"
            );
        }
    }
}

// qwen3: 4 query heads on 2 kv heads of 32 (hidden 64); the _hd64 forms widen the heads to 64,
// which the default group size needs. A start of 12 converts the caches in the middle of the
// decode (the prompt is 7 tokens), as mlx-lm does after that step's forward.
#[test]
fn qwen3_f32_8bit_g32() {
    check("qwen3", "f32", 8, 32, 0, 32);
}

#[test]
fn qwen3_f32_4bit_g32_from_12() {
    check("qwen3", "f32", 4, 32, 12, 32);
}

#[test]
fn qwen3_bf16_4bit_g32() {
    check("qwen3", "bf16", 4, 32, 0, 24);
}

#[test]
fn qwen3_hd64_f32_4bit_g64() {
    check("qwen3_hd64", "f32", 4, 64, 0, 32);
}

#[test]
fn llama_hd64_f32_8bit_g64() {
    check("llama_hd64", "f32", 8, 64, 0, 32);
}

#[test]
fn llama_hd64_bf16_8bit_g64() {
    check("llama_hd64", "bf16", 8, 64, 0, 24);
}

#[test]
fn llama_hd64_bf16_4bit_g32_from_12() {
    check("llama_hd64", "bf16", 4, 32, 12, 24);
}

/// The tiny Llama's heads are 48 wide: no group size divides them, and the request fails with
/// what to do rather than MLX's message.
#[test]
fn heads_no_group_divides_are_refused_clearly() {
    let engine = Engine::load(&models::model("llama", "f32")).unwrap();
    let ids = engine.raw_tokens(PROMPT).unwrap();
    let e = tokens(&engine, ids, 4, KvQuant::new(8, 64, 0).unwrap()).unwrap_err();
    assert!(
        e.contains("48 dimensions") && e.contains("without --kv-bits"),
        "{e}"
    );
}
