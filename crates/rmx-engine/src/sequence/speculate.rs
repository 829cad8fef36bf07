//! A speculating sequence's step (speculative.rs): the guesses of its method, read with the
//! last token in one forward, and the tokens the sampler agrees with kept.

use rmx_mlx::Array;
use rmx_models::CausalLm;

use super::{Progress, Sequence};
use crate::error::Result;
use crate::speculative;

impl Sequence {
    /// Whether a speculating sequence has guesses for its next step: a draft model and the
    /// multi-token-prediction head always have; prompt lookup has when the text's tail occurred
    /// before.
    pub(super) fn can_guess(&self) -> bool {
        if self.pause.active(self.generated) {
            return false;
        }
        match (&self.req.speculative, &self.draft) {
            (Some(_), Some(_)) => true,
            (Some(_), None) if self.mtp.is_some() => true,
            (Some(s), None) => {
                !speculative::prompt_lookup(&self.read_tokens(), s.draft_tokens()).is_empty()
            }
            (None, _) => false,
        }
    }

    /// One speculative step (speculative.rs): up to k guesses, by the draft model or prompt
    /// lookup, read with the last token in one forward; the tokens the sampler agrees with are
    /// sent, then the first one it does not (or the one after the whole block), and the caches
    /// are cut back to what those tokens read. Waits for the device: the next block depends on
    /// this one's tokens.
    pub(super) fn speculate(&mut self, model: &dyn CausalLm) -> Result<Progress> {
        let k = self
            .req
            .speculative
            .as_ref()
            .map_or(0, |s| s.draft_tokens());
        let context = self.read_tokens();
        let Some(&last) = context.last() else {
            return Ok(Progress::Finished);
        };
        // The last token counts as one of the block's tokens, so `max_tokens` is never passed.
        let left = self.req.max_tokens.saturating_sub(self.generated);
        let k = match self.pause.active(self.generated) {
            true => 0,
            false => k.min(left.saturating_sub(1)),
        };
        let guesses = match (&mut self.draft, &mut self.mtp) {
            (Some(d), _) => d.guesses(&context, k, model.info().vocab_size.max(0) as u32)?,
            (None, Some(m)) => m.guesses(model, &context, k)?,
            (None, None) => speculative::prompt_lookup(&context, k),
        };
        if guesses.is_empty() && self.constraint.is_none() {
            // Nothing to guess: plain steps, the next one queued before this one is read,
            // until the lookup finds something again (`guess_again`).
            self.pending = Some(self.step(model, &Array::from_slice(&[last], &[1, 1])?)?);
            return Ok(Progress::Working);
        }
        let read = (context.len() - 1) as i32;
        let mut feed = Vec::with_capacity(guesses.len() + 1);
        feed.push(last);
        feed.extend(&guesses);
        let n = feed.len() as i32;
        // Recurrent layers fold the block in: their states before it, to go back to.
        let before = speculative::recurrent_states(&self.cache);
        let hidden = model.forward_hidden(&Array::from_slice(&feed, &[1, n])?, &mut self.cache)?;
        let logits = model.lm_head(&hidden)?;
        self.drafts.drafted += guesses.len();
        // A plain greedy request takes every row's token with one argmax and one read.
        let greedy = if self.is_plain_greedy() {
            let ids = rmx_models::greedy_tokens(&logits, &logits.logsumexp(&[-1], true)?)?;
            let mut outs = vec![&ids];
            outs.extend(self.cache.iter().flat_map(|c| c.state()));
            rmx_mlx::eval(&outs)?;
            Some(ids.to_vec::<u32>()?)
        } else {
            None
        };
        for i in 0..feed.len() {
            let (id, pending) = match &greedy {
                Some(ids) => (ids[i], None),
                None => {
                    let row = logits
                        .slice_axis(1, i as i32, i as i32 + 1)?
                        .squeeze(&[1])?;
                    let p = self.sample_queued(&row)?;
                    (p.choice.token.item::<u32>()?, Some(p))
                }
            };
            let agrees = guesses.get(i) == Some(&id);
            if agrees {
                self.drafts.accepted += 1;
            }
            let done = self.emit_token(id, pending.as_ref())?;
            if done || !agrees {
                let taken = if agrees { i + 1 } else { i };
                self.pause.record(guesses.len(), taken, self.generated);
                if let Some(m) = &mut self.mtp {
                    let kept = hidden.slice_axis(1, 0, i as i32 + 1)?;
                    m.observe(model, &kept, read as usize)?;
                }
                // Keep what `last` and the agreed guesses read; `id` is the next unread token.
                speculative::keep_block(model, &mut self.cache, &feed, read, i + 1, before)?;
                if let Some(d) = &mut self.draft {
                    d.keep(context.len() + i)?;
                }
                return Ok(if done {
                    Progress::Finished
                } else {
                    Progress::Working
                });
            }
        }
        // The last row has no guess to agree with, so the loop always returns.
        unreachable!("a speculative block ended without its last token")
    }
}
