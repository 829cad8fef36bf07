//! Token selection on the device. Everything here builds lazy MLX graphs so the next step can be
//! queued before the current token reaches the host: penalties keep their token counts on the
//! device, and the PRNG key is split on the device each step.
//!
//! Greedy selection is mlx-lm's exactly: `argmax(logits - logsumexp(logits))`, first index wins.

use rmx_mlx::{r#where, random, Array, Dtype};

use crate::error::Result;
use crate::request::SamplingParams;

pub struct Sampler {
    params: SamplingParams,
    vocab: i32,
    key: Option<Array>,
    /// Dense logit bias, `[1, vocab]`.
    bias: Option<Array>,
    /// `arange(vocab)`, for one-hot count updates.
    ids: Option<Array>,
    /// Tokens seen in prompt + output (repetition penalty), `[1, vocab]` bool.
    seen: Option<Array>,
    /// Occurrences in the output (presence/frequency penalties), `[1, vocab]` f32.
    counts: Option<Array>,
    /// `seen` and `counts` before the last choice was counted, for [`Sampler::replace_last`].
    before_last: (Option<Array>, Option<Array>),
}

/// One step's lazily computed choice.
pub struct Choice {
    /// `[1]` u32.
    pub token: Array,
    /// `[1, vocab]` log-probabilities the choice was made from.
    pub logprobs: Array,
}

impl Sampler {
    pub fn new(params: &SamplingParams, vocab: i32, prompt: &[u32]) -> Result<Sampler> {
        let seed = params.seed.unwrap_or_else(clock_seed);
        let key = if params.is_greedy() {
            None
        } else {
            Some(random::key(seed)?)
        };
        let bias = if params.logit_bias.is_empty() {
            None
        } else {
            let mut b = vec![0f32; vocab as usize];
            for (&id, &v) in &params.logit_bias {
                if let Some(slot) = b.get_mut(id as usize) {
                    *slot = v;
                }
            }
            Some(Array::from_slice(&b, &[1, vocab])?)
        };
        let (ids, seen, counts) = if params.has_penalties() {
            let mut s = vec![false; vocab as usize];
            for &t in prompt {
                if let Some(slot) = s.get_mut(t as usize) {
                    *slot = true;
                }
            }
            (
                Some(Array::arange(0.0, vocab as f64, 1.0, Dtype::U32)?.reshape(&[1, vocab])?),
                Some(Array::from_slice(&s, &[1, vocab])?),
                Some(Array::zeros(&[1, vocab], Dtype::F32)?),
            )
        } else {
            (None, None, None)
        };
        Ok(Sampler {
            params: params.clone(),
            vocab,
            key,
            bias,
            ids,
            seen,
            counts,
            before_last: (None, None),
        })
    }

    /// Applies penalties and bias to `[1, vocab]` logits (mlx-lm's logits processors).
    fn process(&self, logits: &Array) -> Result<Array> {
        let p = &self.params;
        let mut l = logits.clone();
        if let Some(b) = &self.bias {
            l = l.add(&b.astype(l.dtype())?)?;
        }
        if p.repetition_penalty != 1.0 {
            if let Some(seen) = &self.seen {
                let r = p.repetition_penalty as f64;
                let pen = r#where(
                    &l.greater_scalar(0.0)?,
                    &l.divide_scalar(r)?,
                    &l.multiply_scalar(r)?,
                )?;
                l = r#where(seen, &pen, &l)?;
            }
        }
        if p.presence_penalty != 0.0 || p.frequency_penalty != 0.0 {
            if let Some(c) = &self.counts {
                let present = c.greater_scalar(0.0)?.astype(Dtype::F32)?;
                let pen = present
                    .multiply_scalar(p.presence_penalty as f64)?
                    .add(&c.multiply_scalar(p.frequency_penalty as f64)?)?;
                l = l.subtract(&pen.astype(l.dtype())?)?;
            }
        }
        Ok(l)
    }

    /// Chooses the next token from `[1, vocab]` logits.
    pub fn choose(&mut self, logits: &Array) -> Result<Choice> {
        self.choose_within(logits, None)
    }

    /// Chooses the next token among the ids `allowed` marks (`[1, vocab]` bool; None: all).
    /// The others' logits become -inf before anything else looks at them, so greedy and
    /// random choices and the reported logprobs all see only the allowed tokens.
    pub fn choose_within(&mut self, logits: &Array, allowed: Option<&Array>) -> Result<Choice> {
        let mut logits = self.process(logits)?;
        if let Some(mask) = allowed {
            let neg_inf = logits.weak_scalar(f64::NEG_INFINITY)?;
            logits = r#where(mask, &logits, &neg_inf)?;
        }
        let lse = logits.logsumexp(&[], true)?;
        let logprobs = logits.subtract(&lse)?;
        let token = match self.key.take() {
            // The same token as logprobs.argmax(-1), in one kernel on the CUDA fast path.
            None => rmx_models::greedy_tokens(&logits, &lse)?,
            Some(key) => {
                let keys = random::split(&key, 2)?;
                self.key = Some(keys.slice_axis(0, 0, 1)?.reshape(&[2])?);
                let sub = keys.slice_axis(0, 1, 2)?.reshape(&[2])?;
                let filtered = self.filter(&logprobs)?;
                let scaled = filtered.multiply_scalar(1.0 / self.params.temperature as f64)?;
                random::categorical(&scaled, -1, Some(&sub))?.astype(Dtype::U32)?
            }
        };
        self.observe(&token)?;
        Ok(Choice { token, logprobs })
    }

    /// top-k, then top-p, then min-p: each sets excluded log-probabilities to -inf.
    fn filter(&self, lp: &Array) -> Result<Array> {
        let p = &self.params;
        let neg_inf = lp.weak_scalar(f64::NEG_INFINITY)?;
        let mut lp = lp.clone();
        // A `top_k` of the vocabulary or more keeps every token. Compared as i64: `top_k` is
        // any u32 a request sends, and 2^31 or more would wrap to a negative i32 that MLX
        // refuses.
        if p.top_k > 0 && i64::from(p.top_k) < i64::from(self.vocab) {
            let kth = lp.topk(p.top_k as i32, -1)?.min(&[-1], true)?;
            lp = r#where(&lp.less(&kth)?, &neg_inf, &lp)?;
        }
        if p.top_p > 0.0 && p.top_p < 1.0 {
            // Sort descending, keep tokens whose preceding mass is below top_p (so the most
            // likely token always stays), and scatter the decision back to vocabulary order.
            let order = lp.negative()?.argsort(-1)?;
            let sorted = lp.take_along_axis(&order, -1)?.astype(Dtype::F32)?.exp()?;
            let before = sorted.cumsum(-1, false, false)?;
            let keep_sorted = before.less_scalar(p.top_p as f64)?;
            let keep =
                Array::zeros(&lp.shape(), Dtype::Bool)?.put_along_axis(&order, &keep_sorted, -1)?;
            lp = r#where(&keep, &lp, &neg_inf)?;
        }
        if p.min_p > 0.0 {
            let floor = lp.max(&[-1], true)?.add_scalar((p.min_p as f64).ln())?;
            lp = r#where(&lp.less(&floor)?, &neg_inf, &lp)?;
        }
        Ok(lp)
    }

    fn observe(&mut self, token: &Array) -> Result<()> {
        let Some(ids) = &self.ids else { return Ok(()) };
        self.before_last = (self.seen.clone(), self.counts.clone());
        let hit = ids.equal(&token.reshape(&[1, 1])?.astype(Dtype::U32)?)?;
        if let Some(c) = &self.counts {
            self.counts = Some(c.add(&hit.astype(Dtype::F32)?)?);
        }
        if let Some(s) = &self.seen {
            self.seen = Some(s.logical_or(&hit)?);
        }
        Ok(())
    }

    /// The last choice was not used: `token` went to the model in its place (a thought closed
    /// for the model, thought.rs). The penalties count `token` instead; the random key stays
    /// split, which keeps a seeded answer repeatable.
    pub fn replace_last(&mut self, token: u32) -> Result<()> {
        let (Some(seen), Some(counts)) = std::mem::take(&mut self.before_last) else {
            // No penalties, or no choice counted since the last replacement.
            return Ok(());
        };
        self.seen = Some(seen);
        self.counts = Some(counts);
        self.observe(&Array::from_slice(&[token], &[1])?)
    }

    /// Arrays that carry state across steps (evaluate them with the step).
    pub fn state(&self) -> Vec<&Array> {
        self.key
            .iter()
            .chain(self.counts.iter())
            .chain(self.seen.iter())
            .collect()
    }
}

/// The seed of a request that names none: the clock's nanoseconds.
pub(crate) fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(s: &mut Sampler, logits: &[f32]) -> u32 {
        let l = Array::from_slice(logits, &[1, logits.len() as i32]).unwrap();
        s.choose(&l).unwrap().token.item::<u32>().unwrap()
    }

    #[test]
    fn a_replaced_choice_is_penalized_as_the_token_that_took_its_place() {
        for params in [
            SamplingParams {
                repetition_penalty: 2.0,
                ..SamplingParams::default()
            },
            SamplingParams {
                frequency_penalty: 3.0,
                ..SamplingParams::default()
            },
        ] {
            let mut s = Sampler::new(&params, 4, &[]).unwrap();
            assert_eq!(pick(&mut s, &[0.0, 5.0, 1.0, 0.0]), 1);
            s.replace_last(2).unwrap();
            // Token 2 now counts as seen and token 1 does not.
            assert_eq!(pick(&mut s, &[0.0, 5.0, 4.9, 0.0]), 1, "{params:?}");
            let mut s = Sampler::new(&params, 4, &[]).unwrap();
            assert_eq!(pick(&mut s, &[0.0, 5.0, 1.0, 0.0]), 1);
            assert_eq!(pick(&mut s, &[0.0, 5.0, 4.9, 0.0]), 2, "{params:?}");
        }
    }
}
