//! Continuous batching: every decoding sequence advances in one forward per step, over one
//! merged cache (rmx_models::batch_cache). Sequences are prefilled alone, join between steps,
//! and leave between steps (finished, or their client hung up); the cache rows follow.
//!
//! As in a solo decode, step n+1 is queued before step n's tokens are read, so the device
//! never waits for the host: a row that step n finishes has one wasted row in step n+1, and
//! leaves before step n+2.

use rmx_mlx::{concatenate, r#where, Array};
use rmx_models::{batch_cache, CausalLm, LayerCache};

use crate::error::Result;
use crate::prefix_cache::PrefixCache;
use crate::sequence::{Pending, Sequence};

/// How many sequences decode together when `RMX_MAX_BATCH` is not set; more wait for a row.
pub(crate) const DEFAULT_MAX_ROWS: usize = 32;

struct Row {
    seq: Sequence,
    /// Finished: its row leaves at the next step.
    done: bool,
}

/// A queued step's outputs, one row per batch row at the time it was queued.
struct Step {
    /// `[B]` u32: each row's chosen token.
    tokens: Array,
    /// The rows sampled one by one (penalties, logprobs, random): their choices.
    alone: Vec<Option<Pending>>,
}

#[derive(Default)]
pub struct Batch {
    rows: Vec<Row>,
    cache: Vec<LayerCache>,
    pending: Option<Step>,
}

impl Batch {
    /// Rows that are still generating.
    pub fn live(&self) -> usize {
        self.rows.iter().filter(|r| !r.done).count()
    }

    /// The rows' merged cache (for `rmx ps`'s memory).
    pub fn cache(&self) -> &[LayerCache] {
        &self.cache
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// One decode step: rows that finished or were cancelled leave (finished ones' caches go
    /// to the prefix cache), `joiners` join, the next step is queued, and the previous step's
    /// tokens are read and sent.
    pub fn step(
        &mut self,
        model: &dyn CausalLm,
        joiners: Vec<Sequence>,
        prefixes: &mut PrefixCache,
    ) -> Result<()> {
        let t0 = std::time::Instant::now();
        let joined = joiners.len();
        let carried = self.drop_finished()?;
        let (mut feeds, prev) = match carried {
            Some((tokens, step)) => (vec![tokens], Some(step)),
            None => (Vec::new(), None),
        };
        let kept = self.rows.len();
        // Rows whose latest choice a forced token replaces (a thought closed for the model):
        // the token goes in as the row's input now, and out to its client when read.
        let mut forced = Vec::with_capacity(kept);
        for r in &mut self.rows {
            forced.push(r.seq.take_forced()?);
        }
        if let Some(tokens) = feeds
            .first_mut()
            .filter(|_| forced.iter().any(Option::is_some))
        {
            *tokens = with_forced(tokens, &forced)?;
        }
        if !joiners.is_empty() {
            let mut parts = Vec::with_capacity(joiners.len() + 1);
            if kept > 0 {
                parts.push(std::mem::take(&mut self.cache));
            }
            for mut seq in joiners {
                let Some(feed) = seq.take_feed() else {
                    seq.fail("the engine lost a sequence's first token".into());
                    continue;
                };
                feeds.push(feed);
                parts.push(seq.take_cache());
                self.rows.push(Row { seq, done: false });
            }
            self.cache = batch_cache::merge(parts)?;
        }
        if self.rows.is_empty() {
            self.cache.clear();
            return Ok(());
        }
        let feed_refs: Vec<&Array> = feeds.iter().collect();
        let inputs = concatenate(&feed_refs, 0)?.reshape(&[-1, 1])?;
        let t1 = std::time::Instant::now();
        self.pending = Some(self.queue(model, &inputs)?);
        let t2 = std::time::Instant::now();
        if let Some(prev) = prev {
            self.read(prev, &forced, prefixes)?;
        }
        if crate::trace::on() {
            let ms = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e3;
            let t3 = std::time::Instant::now();
            eprintln!(
                "rmx-trace: step rows={} joined={joined} leave+join={:.2}ms queue={:.2}ms read={:.2}ms",
                self.rows.len(),
                ms(t0, t1),
                ms(t1, t2),
                ms(t2, t3)
            );
        }
        Ok(())
    }

    /// Drops rows that are done or cancelled. Returns the previous step's tokens for the rows
    /// that stay (the next step's inputs) and that step, narrowed to them, still to be read.
    fn drop_finished(&mut self) -> Result<Option<(Array, Step)>> {
        let Some(prev) = self.pending.take() else {
            return Ok(None);
        };
        let keep: Vec<usize> = (0..self.rows.len())
            .filter(|&i| !self.rows[i].done && !self.rows[i].seq.is_cancelled())
            .collect();
        if keep.len() == self.rows.len() {
            return Ok(Some((prev.tokens.clone(), prev)));
        }
        let mut alone = prev.alone;
        let rows = std::mem::take(&mut self.rows);
        let mut kept_alone = Vec::with_capacity(keep.len());
        for (i, (row, a)) in rows.into_iter().zip(alone.drain(..)).enumerate() {
            if keep.binary_search(&i).is_ok() {
                self.rows.push(row);
                kept_alone.push(a);
            }
        }
        if keep.is_empty() {
            self.cache.clear();
            return Ok(None);
        }
        batch_cache::keep(&mut self.cache, &keep)?;
        if let [last] = self.rows.as_slice() {
            // One row left: back to a solo cache, which the decode fast path runs.
            let read = last.seq.read_tokens().len() as i32;
            self.cache = batch_cache::row(&self.cache, 0, read)?.ok_or_else(|| {
                crate::error::EngineError::Invalid("the batch lost its last row's cache".into())
            })?;
        }
        let idx: Vec<u32> = keep.iter().map(|&i| i as u32).collect();
        let idx = Array::from_slice(&idx, &[idx.len() as i32])?;
        let tokens = prev.tokens.take(&idx, 0)?;
        Ok(Some((
            tokens.clone(),
            Step {
                tokens,
                alone: kept_alone,
            },
        )))
    }

    /// Queues one forward over every row and each row's choice.
    fn queue(&mut self, model: &dyn CausalLm, inputs: &Array) -> Result<Step> {
        let hidden = model.forward_hidden(inputs, &mut self.cache)?;
        let logits = model.lm_head(&hidden)?;
        let b = logits.dim(0);
        let logits = logits.reshape(&[b, -1])?;
        let step = if self.rows.iter().all(|r| r.seq.is_plain_greedy()) {
            // mlx-lm's greedy choice, row by row in one op: argmax(logits - logsumexp(logits)).
            let lse = logits.logsumexp(&[-1], true)?;
            Step {
                tokens: rmx_models::greedy_tokens(&logits, &lse)?,
                alone: (0..b).map(|_| None).collect(),
            }
        } else {
            let mut alone = Vec::with_capacity(b as usize);
            for (i, r) in self.rows.iter_mut().enumerate() {
                let row = logits.slice_axis(0, i as i32, i as i32 + 1)?;
                alone.push(Some(r.seq.sample(&row)?));
            }
            let toks: Vec<&Array> = alone
                .iter()
                .flatten()
                .map(|p: &Pending| &p.choice.token)
                .collect();
            Step {
                tokens: concatenate(&toks, 0)?,
                alone,
            }
        };
        let mut outs: Vec<&Array> = vec![&step.tokens];
        for p in step.alone.iter().flatten() {
            outs.extend(p.outputs());
        }
        for r in &self.rows {
            outs.extend(r.seq.sampler_state());
        }
        outs.extend(self.cache.iter().flat_map(|c| c.state()));
        rmx_mlx::async_eval(&outs)?;
        Ok(step)
    }

    /// Reads a step's tokens for the rows it ran (one `forced` entry each: the token that
    /// replaces the row's choice, if any) and sends them. A row that finishes leaves its cache
    /// to the prefix cache now (the step just queued has fed its last token), so the next
    /// request already finds it.
    fn read(
        &mut self,
        step: Step,
        forced: &[Option<u32>],
        prefixes: &mut PrefixCache,
    ) -> Result<()> {
        let ids = step.tokens.to_vec::<u32>()?;
        let rows = ids.iter().zip(&step.alone).zip(forced).enumerate();
        for (i, ((&id, alone), forced)) in rows {
            let Some(row) = self.rows.get_mut(i) else {
                break;
            };
            if row.done {
                continue;
            }
            row.done = match forced {
                Some(f) => row.seq.emit_forced(*f, alone.as_ref())?,
                None => row.seq.emit_token(id, alone.as_ref())?,
            };
            if row.done && prefixes.is_enabled() {
                self.keep_prefix(i, prefixes);
            }
        }
        Ok(())
    }

    /// Row `i`'s cache into the prefix cache: moved when it is the only row (as a sequence
    /// decoded alone leaves it), copied out of a batch otherwise. A cache that cannot be
    /// copied or evaluated only costs the prefill it would have saved.
    fn keep_prefix(&mut self, i: usize, prefixes: &mut PrefixCache) {
        let mut tokens = self.rows[i].seq.cache_tokens();
        let cache = if self.rows.len() == 1 {
            let cache = std::mem::take(&mut self.cache);
            let read = cache.first().map_or(0, |c| c.offset() as usize);
            if read == 0 || read > tokens.len() {
                return;
            }
            tokens.truncate(read);
            cache
        } else {
            match batch_cache::row(&self.cache, i, tokens.len() as i32) {
                Ok(Some(c)) => c,
                _ => return,
            }
        };
        let state: Vec<&Array> = cache.iter().flat_map(|c| c.state()).collect();
        if rmx_mlx::eval(&state).is_ok() {
            prefixes.insert(tokens, cache);
        }
    }

    /// Ends every row with `message` (a step failed) and empties the batch.
    pub fn fail_all(&mut self, message: &str) {
        for r in self.rows.drain(..) {
            if !r.done {
                r.seq.fail(message.to_string());
            }
        }
        self.cache.clear();
        self.pending = None;
    }
}

/// `tokens` (`[B]` u32, still on the device) with the rows that have a forced token replaced.
fn with_forced(tokens: &Array, forced: &[Option<u32>]) -> Result<Array> {
    let n = forced.len() as i32;
    let take: Vec<bool> = forced.iter().map(Option::is_some).collect();
    let ids: Vec<u32> = forced.iter().map(|f| f.unwrap_or(0)).collect();
    let take = Array::from_slice(&take, &[n])?;
    let ids = Array::from_slice(&ids, &[n])?;
    Ok(r#where(&take, &ids, tokens)?)
}
