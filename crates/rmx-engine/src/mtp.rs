//! Speculation with the model's own multi-token-prediction head (Qwen3.5's `mtp.*`,
//! rmx-models' mtp.rs): the head reads the model's final-normed state at each position with the
//! token that followed it, and guesses the token after that; fed its own output and guess, it
//! guesses on. The model checks the guesses in one forward as it checks prompt lookup's
//! (sequence.rs, `Sequence::speculate`); the head decodes greedily, so its guess is a point
//! mass and the acceptance rule is the standard one (draft.rs says why).
//!
//! Each speculating sequence keeps the head's KV cache over the positions whose states the model
//! gave it: the prompt's chunks as they are read, the positions each verify block kept and
//! the plain steps between blocks (while guessing is paused). Positions the model read without
//! handing their states over (a prefix from the cache) leave a gap: the head then starts a
//! fresh cache from the next state it gets. Its attention is relative (rope), so a cache begun
//! late differs only in seeing less; the output never depends on the head, only the speed does.

use rmx_mlx::Array;
use rmx_models::{CausalLm, LayerCache};

use crate::error::Result;

/// One sequence's head.
pub struct MtpDraft {
    cache: Vec<LayerCache>,
    /// The model's states the head has not read yet, from position `next - rows` to `next`.
    pending: Option<Array>,
    /// The position after the last state handed over.
    next: usize,
    /// The head's output at the last position it read, which guesses the token two on.
    last: Option<Array>,
}

impl MtpDraft {
    pub fn new(model: &dyn CausalLm) -> MtpDraft {
        MtpDraft {
            cache: model.mtp_cache(),
            pending: None,
            next: 0,
            last: None,
        }
    }

    /// The model's final-normed states `[1, n, hidden]` for positions `from..from + n`. After a
    /// gap (or a position handed over twice) the head starts over.
    pub fn observe(&mut self, model: &dyn CausalLm, hidden: &Array, from: usize) -> Result<()> {
        if from != self.next {
            *self = MtpDraft::new(model);
        }
        self.pending = Some(match self.pending.take() {
            Some(p) => rmx_mlx::concatenate(&[&p, hidden], 1)?,
            None => hidden.clone(),
        });
        self.next = from + hidden.dim(1) as usize;
        Ok(())
    }

    /// Reads the pending states whose next token `tokens` (the sequence so far) already has,
    /// lazily; its cache's arrays are in [`MtpDraft::state`].
    pub fn catch_up(&mut self, model: &dyn CausalLm, tokens: &[u32]) -> Result<()> {
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        let rows = p.dim(1) as usize;
        let first = self.next - rows;
        let ready = rows.min(tokens.len().saturating_sub(first + 1));
        if ready == 0 {
            self.pending = Some(p);
            return Ok(());
        }
        let next = &tokens[first + 1..first + 1 + ready];
        let states = p.slice_axis(1, 0, ready as i32)?;
        let ids = Array::from_slice(next, &[1, ready as i32])?;
        let out = model.mtp_forward(&states, &ids, 0, &mut self.cache)?;
        self.last = Some(out.slice_axis(1, ready as i32 - 1, ready as i32)?);
        if ready < rows {
            self.pending = Some(p.slice_axis(1, ready as i32, rows as i32)?);
        }
        Ok(())
    }

    /// Up to `k` greedy guesses for the tokens after `tokens` (the sequence so far, whose last
    /// token the model has not read): none unless the head has read the state just before it.
    pub fn guesses(&mut self, model: &dyn CausalLm, tokens: &[u32], k: usize) -> Result<Vec<u32>> {
        self.catch_up(model, tokens)?;
        let ready = self.pending.is_none() && self.next + 1 == tokens.len();
        let Some(last) = self.last.as_ref().filter(|_| ready && k > 0) else {
            return Ok(Vec::new());
        };
        // What the head read of the model's own states; the guess steps go past it.
        let kept = self.cache[0].offset();
        let mut out = last.clone();
        let mut ids = Vec::with_capacity(k);
        for i in 0..k {
            let id = model.lm_head(&out)?.argmax(-1, false)?;
            if i + 1 < k {
                out = model.mtp_forward(&out, &id, 0, &mut self.cache)?;
            }
            ids.push(id);
        }
        let mut outs: Vec<&Array> = ids.iter().collect();
        outs.extend(self.state());
        rmx_mlx::eval(&outs)?;
        // The guess steps are no positions the model read: cut, to be read again from the
        // model's own states once it has checked them.
        crate::speculative::cut_to(&mut self.cache, kept)?;
        // The model's own lm_head named them: every id is one of its rows.
        ids.iter().map(|id| Ok(id.item::<u32>()?)).collect()
    }

    /// The head cache's arrays, to evaluate with the model's.
    pub fn state(&self) -> Vec<&Array> {
        self.cache.iter().flat_map(|c| c.state()).collect()
    }
}
