//! What one speculative verify step costs against a plain decode step (`rmx bench
//! --verify-cost`), so the speedup at any acceptance rate can be read off.
//!
//! A step that checks k drafted tokens runs `[last, d1..dk]`, k + 1 tokens, through the model
//! over the sequence's cache and projects every row onto the vocabulary (each row's token is
//! sampled); then the rejected tokens are cut off the cache. Here a prompt is read once, and
//! then, for each k, such a step is timed (k = 0 is the plain decode step) and cut back, round
//! after round, on the engine thread that owns the model, as the engine itself would run it.
//! With the step costs c(k), prompt lookup that drafts k tokens and has each accepted with
//! probability a emits (1 - a^(k+1)) / (1 - a) tokens per step: its speedup is that count
//! times c(0) / c(k).

use std::time::Instant;

use rmx_mlx::Array;
use rmx_models::{CausalLm, LayerCache};
use serde::Serialize;

use crate::bench::{synthetic_prompt, Stat};
use crate::error::Result;
use crate::speculative::{recurrent_states, undo_block};

/// One k's step time.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyCost {
    /// Tokens drafted (0: a plain decode step).
    pub drafted: usize,
    pub step_ms: Stat,
}

impl VerifyCost {
    /// Tokens per step at which speculating with this k breaks even with plain decoding:
    /// `step(k) / step(0)`.
    pub fn break_even_tokens(&self, plain: &VerifyCost) -> f64 {
        self.step_ms.median / plain.step_ms.median
    }
}

/// The expected tokens a step emits when each of `k` drafts is accepted with probability `a`
/// (independently, in order), counting the model's own token after the last accepted one.
pub fn tokens_per_step(k: usize, a: f64) -> f64 {
    (0..=k).map(|i| a.powi(i as i32)).sum()
}

/// Times a plain decode step and verify steps of each of `drafted` (k) tokens, `rounds` times
/// each after a discarded one, over the cache of a `prompt_tokens`-token prompt.
pub(crate) fn measure(
    model: &dyn CausalLm,
    prompt_tokens: usize,
    drafted: &[usize],
    rounds: usize,
) -> Result<Vec<VerifyCost>> {
    let vocab = model.info().vocab_size.max(2) as u32;
    let prompt = synthetic_prompt(prompt_tokens.max(1), vocab, 0);
    let mut cache = model.make_cache();
    step(model, &prompt, &mut cache)?;
    let base = prompt.len() as i32;
    let mut ks = vec![0];
    ks.extend(drafted.iter().copied().filter(|k| *k > 0));
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); ks.len()];
    for round in 0..=rounds {
        for (i, k) in ks.iter().enumerate() {
            let tokens = synthetic_prompt(k + 1, vocab, 1 + round as u64);
            let before = recurrent_states(&cache);
            let start = Instant::now();
            step(model, &tokens, &mut cache)?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            undo_block(&mut cache, base, before)?;
            if round > 0 {
                times[i].push(ms);
            }
        }
    }
    Ok(ks
        .into_iter()
        .zip(times)
        .map(|(drafted, t)| VerifyCost {
            drafted,
            step_ms: Stat::of(t),
        })
        .collect())
}

/// One forward over `tokens` with every row's logits, evaluated with the cache.
fn step(model: &dyn CausalLm, tokens: &[u32], cache: &mut [LayerCache]) -> Result<()> {
    let ids = Array::from_slice(tokens, &[1, tokens.len() as i32])?;
    let hidden = model.forward_hidden(&ids, cache)?;
    let logits = model.lm_head(&hidden)?;
    let mut outs = vec![&logits];
    outs.extend(cache.iter().flat_map(LayerCache::state));
    rmx_mlx::eval(&outs)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tokens_per_step;

    #[test]
    fn tokens_per_step_counts_the_accepted_run_and_the_models_own_token() {
        assert_eq!(tokens_per_step(4, 0.0), 1.0);
        assert_eq!(tokens_per_step(4, 1.0), 5.0);
        assert!((tokens_per_step(2, 0.5) - 1.75).abs() < 1e-12);
    }
}
