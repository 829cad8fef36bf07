//! The standardized single-user benchmark behind `rmx bench`: greedy generation from
//! deterministic pseudo-random prompts of fixed lengths, warm-up rounds discarded, the median
//! and spread of the measured rounds reported. The library measures; the CLI draws.
//!
//! With a constraint (`rmx bench --json-schema`), every round also decodes the same prompt
//! constrained, right before or after the free run (alternating, so neither is always the
//! one on a warmer machine), and the case reports both decode speeds: what structured output
//! costs per token.
//!
//! With stream counts (`rmx bench --streams 8,32`), every case also runs that many sequences at
//! once, each its own prompt, and reports what serving many users gets: the aggregate tok/s and
//! the time to the first token across the streams (as scripts/bench/streams.py measures a
//! server, without HTTP in the way).

use std::time::Instant;

use rmx_text::constrain::{Compiled, Constraint};
use serde::Serialize;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::request::{Event, GenerateRequest, Timings};

#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// (prompt tokens, generated tokens) cases.
    pub cases: Vec<(usize, usize)>,
    pub rounds: usize,
    pub warmup: usize,
    /// Also decode every round under this constraint.
    pub constraint: Option<Constraint>,
    /// Also run every case with this many sequences at once (each count above 1).
    pub streams: Vec<usize>,
    /// Every generation stores its KV cache quantized (`rmx bench --kv-bits`); such
    /// sequences decode one by one, so several streams then take turns.
    pub kv_quant: Option<rmx_models::cache::KvQuant>,
    /// Every generation speculates (`rmx bench --speculative`); such sequences decode one by
    /// one. The synthetic prompts repeat nothing, so prompt lookup rarely guesses there: what
    /// this measures is the cost of the guesses, not a real prompt's gain.
    pub speculative: Option<crate::Speculation>,
}

/// What every measured generation is asked for besides its prompt and length.
#[derive(Clone)]
struct Knobs {
    kv_quant: Option<rmx_models::cache::KvQuant>,
    speculative: Option<crate::Speculation>,
}

impl BenchConfig {
    fn knobs(&self) -> Knobs {
        Knobs {
            kv_quant: self.kv_quant,
            speculative: self.speculative.clone(),
        }
    }
}

impl Default for BenchConfig {
    /// The standard buckets: 128- and 512-token prompts, 128 and 512 new tokens.
    fn default() -> Self {
        BenchConfig {
            cases: vec![(128, 128), (128, 512), (512, 128), (512, 512)],
            rounds: 5,
            warmup: 1,
            constraint: None,
            streams: Vec::new(),
            kv_quant: None,
            speculative: None,
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
    pub(crate) fn of(mut v: Vec<f64>) -> Stat {
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
    /// The greedy tokens of the first measured round: two runs of the same model (one device
    /// against several, one build against another) can be compared token for token.
    pub tokens: Vec<u32>,
    /// The case with several sequences at once, one entry per stream count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub concurrent: Vec<StreamsCase>,
    /// Guesses made and accepted over the measured rounds, when they speculated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<crate::speculative::Drafts>,
}

/// A case run as `streams` sequences at once, each with its own prompt.
#[derive(Debug, Clone, Serialize)]
pub struct StreamsCase {
    pub streams: usize,
    /// Every token generated over the round's wall time (prefills included).
    pub aggregate_tps: Stat,
    /// The tokens after each stream's first over the span in which all streams decode.
    pub aggregate_decode_tps: Stat,
    pub ttft_median_ms: Stat,
    pub ttft_p95_ms: Stat,
    /// One stream's decode tok/s (median over the streams).
    pub per_stream_decode_tps: Stat,
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
    ids: Vec<u32>,
    drafts: Option<crate::speculative::Drafts>,
}

/// Submits one measured generation: `gen` tokens whatever the model says (no EOS), the
/// prompt read whole; its events and the prompt's length.
fn submit(
    engine: &Engine,
    prompt: Vec<u32>,
    gen: usize,
    constraint: Option<&Compiled>,
    knobs: &Knobs,
) -> Result<(UnboundedReceiver<Event>, usize)> {
    let n = prompt.len();
    let mut req = GenerateRequest::new(prompt, gen);
    req.ignore_eos = true;
    // Each round reads the same prompt: measure its prefill, not the prefix cache.
    req.no_prefix_cache = true;
    req.constraint = constraint.cloned();
    req.kv_quant = knobs.kv_quant;
    req.speculative = knobs.speculative.clone();
    Ok((engine.generate(req)?, n))
}

/// Runs one generation to the end.
fn one(
    engine: &Engine,
    prompt: Vec<u32>,
    gen: usize,
    constraint: Option<&Compiled>,
    knobs: Knobs,
) -> Result<Round> {
    let (rx, n) = submit(engine, prompt, gen, constraint, &knobs)?;
    finish(rx, n).map(|(round, _)| round)
}

/// Reads one generation's events to the end: its measures, and its decode time.
fn finish(mut rx: UnboundedReceiver<Event>, prompt_tokens: usize) -> Result<(Round, Timings)> {
    let mut ids = Vec::new();
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => ids.push(id),
            Event::Done { usage, timings, .. } => {
                let round = Round {
                    prefill_tps: timings.prefill_tps(prompt_tokens),
                    decode_tps: timings.decode_tps(usage.completion_tokens),
                    ttft_ms: timings.time_to_first_token.as_secs_f64() * 1e3,
                    tokens: usage.completion_tokens,
                    ids,
                    drafts: usage.drafts,
                };
                return Ok((round, timings));
            }
            Event::Error(e) => return Err(EngineError::Generation(e)),
        }
    }
    Err(EngineError::Stopped)
}

/// One round of `prompts.len()` sequences submitted together.
struct StreamsRound {
    aggregate_tps: f64,
    aggregate_decode_tps: f64,
    ttft_median_ms: f64,
    ttft_p95_ms: f64,
    per_stream_decode_tps: f64,
}

fn together(
    engine: &Engine,
    prompts: Vec<Vec<u32>>,
    gen: usize,
    knobs: Knobs,
) -> Result<StreamsRound> {
    let start = Instant::now();
    let mut waiting = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        waiting.push(submit(engine, prompt, gen, None, &knobs)?);
    }
    // Events wait in their channels, so reading the streams one after another loses nothing;
    // the engine's own timings say when each stream's first and last tokens came.
    let mut done = Vec::with_capacity(waiting.len());
    for (rx, n) in waiting {
        done.push(finish(rx, n)?);
    }
    let wall = start.elapsed().as_secs_f64();
    let first = |t: &Timings| t.time_to_first_token.as_secs_f64();
    let last = |t: &Timings| first(t) + t.decode.as_secs_f64();
    let tokens: usize = done.iter().map(|(r, _)| r.tokens).sum();
    let decoded: usize = done.iter().map(|(r, _)| r.tokens.saturating_sub(1)).sum();
    let span = done.iter().map(|(_, t)| last(t)).fold(0.0, f64::max)
        - done.iter().map(|(_, t)| first(t)).fold(0.0, f64::max);
    let mut ttfts: Vec<f64> = done.iter().map(|(r, _)| r.ttft_ms).collect();
    ttfts.sort_by(|a, b| a.total_cmp(b));
    Ok(StreamsRound {
        aggregate_tps: tokens as f64 / wall.max(1e-9),
        aggregate_decode_tps: if span > 0.0 {
            decoded as f64 / span
        } else {
            0.0
        },
        ttft_median_ms: Stat::of(ttfts.clone()).median,
        // The nearest rank, as streams.py takes it.
        ttft_p95_ms: ttfts[((ttfts.len() - 1) as f64 * 0.95).round() as usize],
        per_stream_decode_tps: Stat::of(done.iter().map(|(r, _)| r.decode_tps).collect()).median,
    })
}

/// Runs case (`p`, `g`) as `streams` sequences at once, warm-up rounds first.
fn run_streams(
    engine: &Engine,
    cfg: &BenchConfig,
    case: usize,
    (p, g): (usize, usize),
    streams: usize,
    progress: &mut impl FnMut(&str),
) -> Result<StreamsCase> {
    let vocab = engine.info().vocab_size as u32;
    let mut rounds = Vec::new();
    for r in 0..cfg.warmup + cfg.rounds {
        let prompts = (0..streams)
            .map(|s| synthetic_prompt(p, vocab, ((case * 1000 + r) * 1000 + s) as u64 + 1))
            .collect();
        let round = together(engine, prompts, g, cfg.knobs())?;
        let warm = r < cfg.warmup;
        progress(&format!(
            "prompt {p} / gen {g} x {streams} streams: {} {}: {:.1} tok/s aggregate, TTFT p95 \
             {:.0} ms",
            if warm { "warm-up" } else { "round" },
            if warm { r + 1 } else { r + 1 - cfg.warmup },
            round.aggregate_tps,
            round.ttft_p95_ms
        ));
        if !warm {
            rounds.push(round);
        }
    }
    let stat = |f: fn(&StreamsRound) -> f64| Stat::of(rounds.iter().map(f).collect());
    Ok(StreamsCase {
        streams,
        aggregate_tps: stat(|r| r.aggregate_tps),
        aggregate_decode_tps: stat(|r| r.aggregate_decode_tps),
        ttft_median_ms: stat(|r| r.ttft_median_ms),
        ttft_p95_ms: stat(|r| r.ttft_p95_ms),
        per_stream_decode_tps: stat(|r| r.per_stream_decode_tps),
    })
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
        let mut tokens = Vec::new();
        let mut drafts = crate::speculative::Drafts::default();
        rmx_mlx::reset_peak_memory();
        for r in 0..cfg.warmup + cfg.rounds {
            let prompt = synthetic_prompt(p, vocab, (ci * 1000 + r) as u64);
            let constrained_first = r % 2 == 1;
            let mut under = None;
            if let (Some(c), true) = (&compiled, constrained_first) {
                under = Some(one(engine, prompt.clone(), g, Some(c), cfg.knobs())?);
            }
            let free = one(engine, prompt.clone(), g, None, cfg.knobs())?;
            if let (Some(c), false) = (&compiled, constrained_first) {
                under = Some(one(engine, prompt, g, Some(c), cfg.knobs())?);
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
            if r == cfg.warmup {
                tokens = free.ids.clone();
            }
            if !warm {
                if let Some(d) = free.drafts {
                    drafts.drafted += d.drafted;
                    drafts.accepted += d.accepted;
                }
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
        let peak_memory_bytes = rmx_mlx::peak_memory();
        let mut concurrent = Vec::new();
        for &s in cfg.streams.iter().filter(|&&s| s > 1) {
            concurrent.push(run_streams(engine, cfg, ci, (p, g), s, &mut progress)?);
        }
        out.push(BenchCase {
            prompt_tokens: p,
            gen_tokens: g,
            prefill_tps: Stat::of(pre),
            decode_tps,
            ttft_ms: Stat::of(ttft),
            peak_memory_bytes,
            constrained,
            tokens,
            concurrent,
            speculative: cfg.speculative.as_ref().map(|_| drafts),
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
