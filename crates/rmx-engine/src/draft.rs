//! Speculation with a draft model: a smaller model of the same tokenizer (Qwen3-0.6B for
//! Qwen3-8B) guesses the next tokens greedily, and the target checks them in one forward pass
//! as it checks prompt lookup's (sequence.rs, `Sequence::speculate`).
//!
//! The draft decodes greedily, so its guess is a point mass: "draw x from the target's p,
//! accept the guess iff x equals it" is then the standard acceptance rule exactly, for greedy
//! and sampled requests alike (speculative.rs), and the output is the target's own.
//!
//! Drafts are loaded on the target's engine thread, which owns their arrays as it owns the
//! target's, once per folder; each speculating sequence keeps its own draft cache, which has
//! read a prefix of the sequence's tokens and is cut back to what the target kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rmx_mlx::Array;
use rmx_models::{CausalLm, LayerCache, Loaded};
use rmx_text::tokenizer::Tokenizer;

use crate::error::{EngineError, Result};
use crate::sequence::PREFILL_CHUNK;

/// A refusal unless `draft` gives every token the id `target` gives it: the target reads the
/// draft's ids as its own.
pub fn check_tokenizers(target: &Tokenizer, draft: &Tokenizer) -> Result<()> {
    let (t, d) = (
        target.inner().get_vocab(true),
        draft.inner().get_vocab(true),
    );
    let differ: Vec<(&String, &u32)> = d
        .iter()
        .filter(|(tok, id)| t.get(*tok) != Some(id))
        .collect();
    if t.len() == d.len() && differ.is_empty() {
        return Ok(());
    }
    let example = differ
        .iter()
        .min_by_key(|(_, id)| **id)
        .map(|(tok, id)| format!(" (id {id} is {tok:?} in the draft's)"))
        .unwrap_or_default();
    Err(EngineError::Invalid(format!(
        "the draft model's tokenizer differs from the model's: {} of its {} tokens differ and \
         the model has {}{example}; a draft must share the model's tokenizer (e.g. Qwen3-0.6B \
         for Qwen3-8B)",
        differ.len(),
        d.len(),
        t.len()
    )))
}

/// The drafts loaded on one engine thread, by folder.
#[derive(Default)]
pub struct DraftModels {
    loaded: HashMap<PathBuf, Rc<dyn CausalLm>>,
}

impl DraftModels {
    /// The draft in `dir`, loaded now if it is not yet. Drafts no sequence uses any more are
    /// freed before another is loaded, so the thread holds at most the ones in use and the new
    /// one.
    pub fn get(&mut self, dir: &Path) -> Result<Rc<dyn CausalLm>> {
        if let Some(m) = self.loaded.get(dir) {
            return Ok(m.clone());
        }
        self.loaded.retain(|_, m| Rc::strong_count(m) > 1);
        let model: Rc<dyn CausalLm> = match rmx_models::load_any(dir)? {
            Loaded::Causal(m) => Rc::from(m),
            Loaded::Embedder(_) => {
                return Err(EngineError::Invalid(format!(
                    "the draft model {} is an embedding model; a draft must generate",
                    dir.display()
                )))
            }
        };
        if !model.make_cache().iter().all(LayerCache::cuts_back_blocks) {
            return Err(EngineError::Invalid(format!(
                "the draft model {} has recurrent layers, whose state cannot be rolled back to \
                 drop a rejected guess; choose a draft of attention layers only",
                dir.display()
            )));
        }
        self.loaded.insert(dir.to_path_buf(), model.clone());
        Ok(model)
    }
}

/// One sequence's draft: the model, and its cache over the first `read` tokens of the
/// sequence (prompt and answer so far).
pub struct Draft {
    model: Rc<dyn CausalLm>,
    cache: Vec<LayerCache>,
    read: usize,
}

impl Draft {
    pub fn new(model: Rc<dyn CausalLm>) -> Draft {
        let cache = model.make_cache();
        Draft {
            model,
            cache,
            read: 0,
        }
    }

    /// Up to `k` greedy guesses after `context`, ids below `vocab` (the target's rows): the
    /// draft first reads what of `context` it has not (the whole prompt the first time, in
    /// prefill chunks; after that the one or two tokens the target added), then decodes
    /// `k - 1` more steps, queued lazily and read at once.
    pub fn guesses(&mut self, context: &[u32], k: usize, vocab: u32) -> Result<Vec<u32>> {
        if k == 0 || context.len() <= self.read {
            return Ok(Vec::new());
        }
        let mut from = self.read;
        while context.len() - from > PREFILL_CHUNK {
            let chunk = &context[from..from + PREFILL_CHUNK];
            self.model.forward_hidden(&row(chunk)?, &mut self.cache)?;
            let state: Vec<&Array> = self.cache.iter().flat_map(|c| c.state()).collect();
            rmx_mlx::eval(&state)?;
            from += PREFILL_CHUNK;
        }
        let mut logits = self.last_logits(&row(&context[from..])?)?;
        let mut ids = Vec::with_capacity(k);
        for i in 0..k {
            let id = logits.argmax(-1, false)?;
            if i + 1 < k {
                logits = self.last_logits(&id.reshape(&[1, 1])?)?;
            }
            ids.push(id);
        }
        let mut outs: Vec<&Array> = ids.iter().collect();
        outs.extend(self.cache.iter().flat_map(|c| c.state()));
        rmx_mlx::eval(&outs)?;
        self.read = context.len() + k - 1;
        let mut guesses = Vec::with_capacity(k);
        for id in &ids {
            let id = id.item::<u32>()?;
            // A draft with more rows than the target could name a token the target has not.
            if id >= vocab {
                break;
            }
            guesses.push(id);
        }
        // What it read past a guess cut off here is no guess of this block.
        self.keep(context.len() + guesses.len().min(k - 1))?;
        Ok(guesses)
    }

    /// The target kept the first `len` tokens of what the draft read: the rest is cut off,
    /// to be read again from the sequence's tokens.
    pub fn keep(&mut self, len: usize) -> Result<()> {
        if len < self.read {
            crate::speculative::cut_to(&mut self.cache, len as i32)?;
            self.read = len;
        }
        Ok(())
    }

    /// `[1, vocab]` logits of the draft's last position after reading `tokens`, lazily.
    fn last_logits(&mut self, tokens: &Array) -> Result<Array> {
        let hidden = self.model.forward_hidden(tokens, &mut self.cache)?;
        let logits = self.model.lm_head(&hidden)?;
        let l = logits.dim(1);
        Ok(logits.slice_axis(1, l - 1, l)?.squeeze(&[1])?)
    }
}

fn row(tokens: &[u32]) -> Result<Array> {
    Ok(Array::from_slice(tokens, &[1, tokens.len() as i32])?)
}
