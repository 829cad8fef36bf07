//! The standardized single-user benchmark behind `rmx bench`: greedy generation from
//! deterministic pseudo-random prompts of fixed lengths, warm-up rounds discarded, the median
//! and spread of the measured rounds reported. The library measures; the CLI draws.
//!
//! With a constraint (`rmx bench --json-schema`), every round also decodes the same prompt
//! constrained, right before or after the free run (alternating, so neither is always the
//! one on a warmer machine), and the case reports both decode speeds: what structured output
//! costs per token.

use rmx_text::constrain::{Compiled, Constraint};
use serde::Serialize;

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::request::{Event, GenerateRequest};

#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// (prompt tokens, generated tokens) cases.
    pub cases: Vec<(usize, usize)>,
    pub rounds: usize,
    pub warmup: usize,
    /// Also decode every round under this constraint.
    pub constraint: Option<Constraint>,
}

impl Default for BenchConfig {
    /// The standard buckets: 128- and 512-token prompts, 128 and 512 new tokens.
    fn default() -> Self {
        BenchConfig {
            cases: vec![(128, 128), (128, 512), (512, 128), (512, 512)],
            rounds: 5,
            warmup: 1,
            constraint: None,
        }
    }
}

/// Median and range of one measure over the rounds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    fn of(mut v: Vec<f64>) -> Stat {
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Stat {
            median,
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }

    /// Half the range relative to the median, in percent.
    pub fn spread_pct(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / 2.0 / self.median * 100.0
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchCase {
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub prefill_tps: Stat,
    pub decode_tps: Stat,
    pub ttft_ms: Stat,
    pub peak_memory_bytes: usize,
    /// The same rounds decoded under the constraint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constrained: Option<ConstrainedCase>,
}

/// A case's rounds under the constraint.
#[derive(Debug, Clone, Serialize)]
pub struct ConstrainedCase {
    pub decode_tps: Stat,
    /// Tokens written per round: up to the case's, fewer where the shape was whole first.
    pub gen_tokens: Stat,
    /// Median constrained decode tok/s over the free one's.
    pub decode_ratio: f64,
}

/// A deterministic prompt of `n` ids spread over the vocabulary (no two rounds alike, so no
/// cache can help).
pub fn synthetic_prompt(n: usize, vocab: u32, round: u64) -> Vec<u32> {
    let mut s = 0x9e3779b97f4a7c15u64 ^ round.wrapping_mul(0xbf58476d1ce4e5b9);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Stay in the lower part of the vocabulary, where ordinary tokens live.
            (s % (vocab as u64 * 3 / 4).max(1)) as u32
        })
        .collect()
}

/// One round's measures.
struct Round {
    prefill_tps: f64,
    decode_tps: f64,
    ttft_ms: f64,
    tokens: usize,
}

/// Runs one generation to the end.
fn one(
    engine: &Engine,
    prompt: Vec<u32>,
    gen: usize,
    constraint: Option<&Compiled>,
) -> Result<Round> {
    let n = prompt.len();
    let mut req = GenerateRequest::new(prompt, gen);
    req.ignore_eos = true;
    // Each round reads the same prompt: measure its prefill, not the prefix cache.
    req.no_prefix_cache = true;
    req.constraint = constraint.cloned();
    let mut rx = engine.generate(req)?;
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { .. } => {}
            Event::Done { usage, timings, .. } => {
                return Ok(Round {
                    prefill_tps: timings.prefill_tps(n),
                    decode_tps: timings.decode_tps(usage.completion_tokens),
                    ttft_ms: timings.time_to_first_token.as_secs_f64() * 1e3,
                    tokens: usage.completion_tokens,
                })
            }
            Event::Error(e) => return Err(EngineError::Invalid(e)),
        }
    }
    Err(EngineError::Stopped)
}

/// Runs every case; `progress` hears a line per round.
pub fn run(
    engine: &Engine,
    cfg: &BenchConfig,
    mut progress: impl FnMut(&str),
) -> Result<Vec<BenchCase>> {
    let vocab = engine.info().vocab_size as u32;
    // Compiled once: what is measured is decoding, not compiling.
    let compiled = cfg
        .constraint
        .as_ref()
        .map(|c| engine.constrain(c))
        .transpose()?;
    let mut out = Vec::new();
    for (ci, &(p, g)) in cfg.cases.iter().enumerate() {
        let (mut pre, mut dec, mut ttft) = (vec![], vec![], vec![]);
        let (mut c_dec, mut c_tokens) = (vec![], vec![]);
        rmx_mlx::reset_peak_memory();
        for r in 0..cfg.warmup + cfg.rounds {
            let prompt = synthetic_prompt(p, vocab, (ci * 1000 + r) as u64);
            let constrained_first = r % 2 == 1;
            let mut under = None;
            if let (Some(c), true) = (&compiled, constrained_first) {
                under = Some(one(engine, prompt.clone(), g, Some(c))?);
            }
            let free = one(engine, prompt.clone(), g, None)?;
            if let (Some(c), false) = (&compiled, constrained_first) {
                under = Some(one(engine, prompt, g, Some(c))?);
            }
            let warm = r < cfg.warmup;
            let mut line = format!(
                "prompt {p} / gen {g}: {} {}: prefill {:.1} tok/s, decode {:.1} tok/s",
                if warm { "warm-up" } else { "round" },
                if warm { r + 1 } else { r + 1 - cfg.warmup },
                free.prefill_tps,
                free.decode_tps
            );
            if let Some(u) = &under {
                line.push_str(&format!(
                    "; constrained decode {:.1} tok/s ({} tokens)",
                    u.decode_tps, u.tokens
                ));
            }
            progress(&line);
            if !warm {
                pre.push(free.prefill_tps);
                dec.push(free.decode_tps);
                ttft.push(free.ttft_ms);
                if let Some(u) = under {
                    c_dec.push(u.decode_tps);
                    c_tokens.push(u.tokens as f64);
                }
            }
        }
        let decode_tps = Stat::of(dec);
        let constrained = compiled.as_ref().map(|_| {
            let c_decode = Stat::of(c_dec);
            ConstrainedCase {
                decode_ratio: if decode_tps.median > 0.0 {
                    c_decode.median / decode_tps.median
                } else {
                    0.0
                },
                decode_tps: c_decode,
                gen_tokens: Stat::of(c_tokens),
            }
        });
        out.push(BenchCase {
            prompt_tokens: p,
            gen_tokens: g,
            prefill_tps: Stat::of(pre),
            decode_tps,
            ttft_ms: Stat::of(ttft),
            peak_memory_bytes: rmx_mlx::peak_memory(),
            constrained,
        });
    }
    Ok(out)
}

/// One embedding case: `batch` inputs of `input_tokens` each per request.
#[derive(Debug, Clone, Serialize)]
pub struct EmbedCase {
    pub batch: usize,
    pub input_tokens: usize,
    pub inputs_per_s: Stat,
    pub tokens_per_s: Stat,
    pub latency_ms: Stat,
    pub peak_memory_bytes: usize,
}

/// The embedding benchmark: for each input length in `lens` and each batch size in `batches`,
/// requests of that many synthetic inputs, timed from submission to the vectors' arrival.
pub fn run_embed(
    engine: &Engine,
    lens: &[usize],
    batches: &[usize],
    rounds: usize,
    warmup: usize,
    mut progress: impl FnMut(&str),
) -> Result<Vec<EmbedCase>> {
    let vocab = engine.info().vocab_size as u32;
    let mut out = Vec::new();
    for (li, &n) in lens.iter().enumerate() {
        for &b in batches {
            let (mut ips, mut tps, mut lat) = (vec![], vec![], vec![]);
            rmx_mlx::reset_peak_memory();
            for r in 0..warmup + rounds {
                let inputs: Vec<Vec<u32>> = (0..b)
                    .map(|i| synthetic_prompt(n, vocab, (li * 1_000_000 + r * 1000 + i) as u64))
                    .collect();
                let t = std::time::Instant::now();
                engine
                    .embed(inputs)?
                    .blocking_recv()
                    .map_err(|_| EngineError::Stopped)?
                    .map_err(EngineError::Invalid)?;
                let s = t.elapsed().as_secs_f64();
                let warm = r < warmup;
                progress(&format!(
                    "{b} × {n} tokens: {} {}: {:.1} inputs/s, {:.0} tok/s",
                    if warm { "warm-up" } else { "round" },
                    if warm { r + 1 } else { r + 1 - warmup },
                    b as f64 / s,
                    (b * n) as f64 / s
                ));
                if !warm {
                    ips.push(b as f64 / s);
                    tps.push((b * n) as f64 / s);
                    lat.push(s * 1e3);
                }
            }
            out.push(EmbedCase {
                batch: b,
                input_tokens: n,
                inputs_per_s: Stat::of(ips),
                tokens_per_s: Stat::of(tps),
                latency_ms: Stat::of(lat),
                peak_memory_bytes: rmx_mlx::peak_memory(),
            });
        }
    }
    Ok(out)
}
