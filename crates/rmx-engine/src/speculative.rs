//! Speculative decoding: guess the next tokens — by prompt lookup, finding the text's last few
//! tokens earlier in the prompt or the output and copying what followed them there, with a
//! draft model's greedy tokens (draft.rs), or with the model's own multi-token-prediction head
//! (mtp.rs) — and let the model check the guesses in one forward pass (sequence.rs,
//! `Sequence::speculate`).
//!
//! Why checking is exact: the model reads `[last, d1..dk]` at once, and row `i` of its logits
//! is what a plain decode step would have seen after `last, d1..di`. Each row is sampled by
//! the sequence's ordinary sampler (penalties, bias, top-k/p, min-p, a grammar's mask, the
//! seed's random stream, all as in a plain step) and the block stops at the first row whose
//! token differs from the guess. For greedy requests that is argmax agreement. For sampled
//! ones it is the standard speculative-sampling rule with a point-mass draft: "draw x from p,
//! accept d iff x == d" accepts d with probability p(d), and on rejection x is distributed as
//! p without d, renormalised, which is exactly the rule's resample. The sampler is asked once
//! per emitted token, in order, so even a seeded request's tokens are those of a plain run
//! (up to the rounding of a k+1-token forward against a one-token one).
//!
//! Rejected guesses are rolled back by cutting the KV caches back to the tokens kept
//! ([`cut_to`]): a full cache simply forgets them, and a sliding window's, written by the
//! block's multi-token update in temporal order, drops them as if the block had been shorter.
//! A recurrent layer (Qwen3.5's and Qwen3-Next's Gated DeltaNet) has folded the whole block
//! into its state, which cannot be cut: there every layer goes back to where it was before the
//! block (the recurrent states kept aside, [`recurrent_states`], the KV caches cut) and the kept
//! tokens are read again in one forward ([`keep_block`]). Only a block with a refused guess
//! pays that second forward; one taken whole is kept as it is.

use rmx_mlx::Array;
use rmx_models::cache::RecurrentCache;
use rmx_models::{CausalLm, LayerCache};
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// The most tokens one step may guess: a longer block costs a wider forward for guesses that
/// are rarely all right.
pub const MAX_DRAFT_TOKENS: usize = 16;

/// Guesses per step when a request names no number: copied code or text usually runs on for
/// more than this, and a wrong block of 6 costs a CPU or GPU little more than one token.
pub const DEFAULT_DRAFT_TOKENS: usize = 6;

/// Guesses per step for the multi-token-prediction head when a request names no number: each
/// guess after the first is the head fed its own output, which drifts from what the model
/// would compute, so few are worth a wider block (vLLM's Qwen3.5 examples use 2 or 3).
pub const DEFAULT_MTP_TOKENS: usize = 3;

/// The longest and shortest run of trailing tokens matched: the longest match wins, since it
/// is the likeliest to go on the same way (in code, a short run like `    }\n` recurs all over
/// a file, and only a longer one finds the place being copied); one token alone matches too
/// much by chance. The cap bounds a step's search in very repetitive text.
const NGRAM_MAX: usize = 64;
const NGRAM_MIN: usize = 2;

/// How a request speculates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "method")]
pub enum Speculation {
    /// Guesses copied from the prompt and the output so far, up to `draft_tokens` a step.
    PromptLookup { draft_tokens: usize },
    /// Guesses decoded greedily by the draft model in folder `model` (draft.rs), which shares
    /// the model's tokenizer ([`crate::Engine::use_draft`] checks it), `draft_tokens` a step.
    Draft {
        model: std::path::PathBuf,
        draft_tokens: usize,
    },
    /// Guesses made by the model's own multi-token-prediction head (mtp.rs; only checkpoints
    /// that keep `mtp.*` have one), `draft_tokens` a step.
    Mtp { draft_tokens: usize },
}

impl Speculation {
    /// Prompt lookup with `draft_tokens` guesses a step, checked against
    /// 1..=[`MAX_DRAFT_TOKENS`].
    pub fn prompt_lookup(draft_tokens: usize) -> Result<Speculation> {
        check_draft_tokens(draft_tokens)?;
        Ok(Speculation::PromptLookup { draft_tokens })
    }

    /// The draft model in `model` guessing `draft_tokens` a step, checked as
    /// [`Speculation::prompt_lookup`]'s.
    pub fn draft(model: impl Into<std::path::PathBuf>, draft_tokens: usize) -> Result<Speculation> {
        check_draft_tokens(draft_tokens)?;
        Ok(Speculation::Draft {
            model: model.into(),
            draft_tokens,
        })
    }

    /// The multi-token-prediction head guessing `draft_tokens` a step, checked as
    /// [`Speculation::prompt_lookup`]'s.
    pub fn mtp(draft_tokens: usize) -> Result<Speculation> {
        check_draft_tokens(draft_tokens)?;
        Ok(Speculation::Mtp { draft_tokens })
    }

    pub fn draft_tokens(&self) -> usize {
        match self {
            Speculation::PromptLookup { draft_tokens }
            | Speculation::Draft { draft_tokens, .. }
            | Speculation::Mtp { draft_tokens } => *draft_tokens,
        }
    }

    /// The draft model's folder, when a draft model guesses.
    pub fn draft_model(&self) -> Option<&std::path::Path> {
        match self {
            Speculation::Draft { model, .. } => Some(model),
            Speculation::PromptLookup { .. } | Speculation::Mtp { .. } => None,
        }
    }
}

/// `k` is a usable number of guesses per step.
pub fn check_draft_tokens(k: usize) -> Result<()> {
    if (1..=MAX_DRAFT_TOKENS).contains(&k) {
        Ok(())
    } else {
        Err(EngineError::Invalid(format!(
            "draft tokens must be between 1 and {MAX_DRAFT_TOKENS}, got {k}"
        )))
    }
}

/// Why a request that asked to speculate did not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Off {
    /// The model's caches can neither cut back nor undo a block's positions (every cache rmx
    /// has now can: kept for a cache kind that cannot).
    Cache,
    /// The model is split over several processes (rmx launch): the ranks would have to agree
    /// on every block's length, which they do not exchange yet.
    Group,
    /// The request quantizes its KV cache: a quantized cache is not cut back to drop rejected
    /// guesses, and the verify forward would read keys quantized at other points than a plain
    /// run's.
    KvQuant,
    /// The request caps its thought (thought.rs): the tokens that close it replace the
    /// model's choice one at a time, which a block of guesses would have to stop for.
    ThoughtBudget,
    /// The request's images moved its positions (Qwen3.5's multimodal rope): its caches carry
    /// the plan, which a block's cut back and undo do not yet.
    Images,
}

impl std::fmt::Display for Off {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Off::Cache => {
                "speculative decoding is off for this model: its caches cannot drop refused \
                 guesses"
            }
            Off::Group => "speculative decoding is off for a model split over several processes",
            Off::KvQuant => "speculative decoding is off for an answer with a quantized KV cache",
            Off::ThoughtBudget => {
                "speculative decoding is off for an answer with a thinking budget"
            }
            Off::Images => {
                "speculative decoding is off for an answer with images on this model (its \
                 images move the positions of what follows them)"
            }
        })
    }
}

/// Up to `k` tokens that may follow `context`: the tokens after the earlier place whose
/// preceding tokens match the most of `context`'s last ones (at least [`NGRAM_MIN`], counted
/// up to [`NGRAM_MAX`]), the latest of those places on a tie. Empty when none matches.
pub fn prompt_lookup(context: &[u32], k: usize) -> Vec<u32> {
    if k == 0 {
        return Vec::new();
    }
    let len = context.len();
    let Some(&last) = context.last() else {
        return Vec::new();
    };
    // (matched length, where the copy starts): the end of each earlier run that ends like
    // `context`, scanned latest first so the first of the longest is the latest.
    let mut best = (0, 0);
    for end in (1..len).rev() {
        if context[end - 1] != last {
            continue;
        }
        let most = NGRAM_MAX.min(end);
        let n = (0..most)
            .take_while(|&i| context[end - 1 - i] == context[len - 1 - i])
            .count();
        if n > best.0 {
            best = (n, end);
            if n == NGRAM_MAX {
                break;
            }
        }
    }
    let (n, from) = best;
    if n < NGRAM_MIN {
        return Vec::new();
    }
    context[from..(from + k).min(len)].to_vec()
}

/// Cuts every layer's cache back to its first `len` positions (the KV buffers keep their
/// size; the next write goes over what was cut).
pub fn cut_to(cache: &mut [LayerCache], len: i32) -> Result<()> {
    for c in cache {
        if !c.cut_back(len) {
            return Err(EngineError::Invalid(
                "speculative decoding cannot roll back this cache".into(),
            ));
        }
    }
    Ok(())
}

/// The recurrent layers' states (shared, not copied: a forward makes new ones), one per layer
/// in order, `None` for the others; `None` for a model without recurrent layers.
pub fn recurrent_states(cache: &[LayerCache]) -> Option<Vec<Option<RecurrentCache>>> {
    let states: Vec<Option<RecurrentCache>> = cache
        .iter()
        .map(|c| match c {
            LayerCache::Recurrent(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    states.iter().any(Option::is_some).then_some(states)
}

/// After a block of `feed` (the last token, then the guesses) read from position `read`: keeps
/// the first `kept` of it. Without recurrent layers (`before` is `None`) the caches are cut
/// back; with them, unless the whole block is kept, every layer goes back to `read` (the
/// recurrent ones to `before`) and `feed[..kept]` is read again.
pub fn keep_block(
    model: &dyn CausalLm,
    cache: &mut [LayerCache],
    feed: &[u32],
    read: i32,
    kept: usize,
    before: Option<Vec<Option<RecurrentCache>>>,
) -> Result<()> {
    let Some(before) = before else {
        return cut_to(cache, read + kept as i32);
    };
    if kept == feed.len() {
        return Ok(());
    }
    undo_block(cache, read, Some(before))?;
    let tokens = Array::from_slice(&feed[..kept], &[1, kept as i32])?;
    model.forward_hidden(&tokens, cache)?;
    let state: Vec<&Array> = cache.iter().flat_map(|c| c.state()).collect();
    rmx_mlx::eval(&state)?;
    Ok(())
}

/// Every layer back at position `read`, before the block a forward just read: the recurrent
/// ones to their states `before` it ([`recurrent_states`]), the others cut back.
pub fn undo_block(
    cache: &mut [LayerCache],
    read: i32,
    before: Option<Vec<Option<RecurrentCache>>>,
) -> Result<()> {
    let Some(before) = before else {
        return cut_to(cache, read);
    };
    for (c, b) in cache.iter_mut().zip(before) {
        match b {
            Some(r) => *c = LayerCache::Recurrent(r),
            None if c.cut_back(read) => {}
            None => {
                return Err(EngineError::Invalid(
                    "speculative decoding cannot roll back this cache".into(),
                ))
            }
        }
    }
    Ok(())
}

/// Blocks in a row whose every guess was refused before a sequence stops guessing for a while:
/// a draft (or a lookup) that keeps missing costs a block's forward for one token each time.
pub const PAUSE_AFTER: usize = 4;
/// Tokens a sequence then decodes plainly (pipelined) before it guesses again.
pub const PAUSE_TOKENS: usize = 16;

/// When a sequence guesses: it pauses after [`PAUSE_AFTER`] blocks in a row with nothing
/// accepted, for [`PAUSE_TOKENS`] tokens. The output is the same either way; only the speed
/// (and the guesses counted) change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pause {
    refused: usize,
    until: usize,
}

impl Pause {
    /// Whether the sequence, `generated` tokens in, decodes plainly now.
    pub fn active(&self, generated: usize) -> bool {
        generated < self.until
    }

    /// A block of `drafted` guesses of which `accepted` were taken, ending `generated` tokens in.
    pub fn record(&mut self, drafted: usize, accepted: usize, generated: usize) {
        if drafted == 0 {
            return;
        }
        if accepted > 0 {
            self.refused = 0;
            return;
        }
        self.refused += 1;
        if self.refused >= PAUSE_AFTER {
            self.refused = 0;
            self.until = generated + PAUSE_TOKENS;
        }
    }
}

/// Counts for one generation: guesses made and guesses the model agreed with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drafts {
    pub drafted: usize,
    pub accepted: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_latest_match_gives_what_followed_it() {
        // "1 2 3 4" occurs twice; the tail "2 3 4" matches its latest place first.
        let ctx = [1, 2, 3, 4, 5, 6, 9, 2, 3, 4, 7, 8, 2, 3, 4];
        assert_eq!(prompt_lookup(&ctx, 3), vec![7, 8, 2]);
        // A block runs out where the text does.
        assert_eq!(prompt_lookup(&[5, 6, 1, 5, 6], 4), vec![1, 5, 6]);
        // A 4-gram beats a later 2-gram.
        let ctx = [1, 2, 3, 4, 10, 3, 4, 11, 1, 2, 3, 4];
        assert_eq!(prompt_lookup(&ctx, 1), vec![10]);
    }

    #[test]
    fn a_longer_match_wins_over_a_later_short_one() {
        // Copying a file: the run "1 2 3 4" recurs, and only the longer one finds the line
        // being copied (the latest "1 2 3 4" is followed by 60).
        let file = [7, 8, 9, 1, 2, 3, 4, 50, 51, 6, 1, 2, 3, 4, 60];
        let mut ctx = file.to_vec();
        ctx.extend([99, 7, 8, 9, 1, 2, 3, 4]);
        assert_eq!(prompt_lookup(&ctx, 2), vec![50, 51]);
        // The cap: past NGRAM_MAX tokens of agreement, the latest place wins.
        let run: Vec<u32> = (0..NGRAM_MAX as u32 + 5).collect();
        let mut ctx = run.clone();
        ctx.push(500);
        ctx.extend(&run[5..]);
        ctx.push(600);
        ctx.extend(&run[5..]);
        assert_eq!(prompt_lookup(&ctx, 1), vec![600]);
    }

    #[test]
    fn a_run_of_refused_blocks_pauses_the_guessing() {
        let mut p = Pause::default();
        for g in 0..PAUSE_AFTER - 1 {
            p.record(4, 0, g);
            assert!(!p.active(g + 1));
        }
        // A block with a guess taken starts the count again.
        p.record(4, 1, 10);
        for g in 0..PAUSE_AFTER - 1 {
            p.record(4, 0, 11 + g);
        }
        assert!(!p.active(14));
        p.record(4, 0, 14);
        assert!(p.active(14) && p.active(14 + PAUSE_TOKENS - 1));
        assert!(!p.active(14 + PAUSE_TOKENS));
        // A step with nothing to guess counts neither way.
        p.record(0, 0, 40);
        assert!(!p.active(40));
    }

    #[test]
    fn no_match_no_guess() {
        assert!(prompt_lookup(&[1, 2, 3, 4, 5], 4).is_empty());
        assert!(prompt_lookup(&[7], 4).is_empty());
        // One repeated token alone is not enough (NGRAM_MIN is 2).
        assert!(prompt_lookup(&[7, 1, 2, 7], 4).is_empty());
    }

    #[test]
    fn draft_tokens_out_of_range_are_refused() {
        assert!(Speculation::prompt_lookup(0).is_err());
        assert!(Speculation::prompt_lookup(MAX_DRAFT_TOKENS + 1).is_err());
        assert_eq!(Speculation::prompt_lookup(4).unwrap().draft_tokens(), 4);
    }
}
