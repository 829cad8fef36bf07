//! One request's generation: its cache, sampler and text state, advanced one unit of work at a
//! time (a prefill chunk or a token) so the scheduler can interleave sequences.
//!
//! The step order is mlx-lm's `generate_step`: prefill `prompt[:-1]` in chunks, run the last
//! prompt token as the first decode step, and always queue step n+1 (async) before reading
//! token n, so the device never waits for the host.
//!
//! A constrained sequence cannot sample step n+1 before it has read token n (the grammar's
//! next mask depends on it), but it still queues step n+1's forward pass first: the host
//! then reads token n, advances the grammar and computes the mask while the device runs the
//! forward, and only the sampling waits for the mask.

use std::collections::{HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rmx_mlx::Array;
use rmx_models::{CausalLm, LayerCache};
use rmx_text::constrain::ConstraintState;
use rmx_text::detok::Detokenizer;
use rmx_text::stop::StopMatcher;
use rmx_text::tokenizer::Tokenizer;
use tokio::sync::mpsc::UnboundedSender;

use crate::draft::Draft;
use crate::error::Result;
use crate::images::ImageRows;
use crate::load::Busy;
use crate::mtp::MtpDraft;
use crate::request::{Event, FinishReason, GenerateRequest, Timings, TokenLogprob, Usage};
use crate::sampler::{Choice, Sampler};
use crate::speculative::{self, Drafts, Off, Speculation};
use crate::thought::ThoughtWatch;

mod speculate;

/// mlx-lm's default prefill chunk.
pub const PREFILL_CHUNK: usize = 2048;

pub enum Progress {
    Working,
    Finished,
}

/// Where a sequence bound for the batch stands after a unit of prefill work.
pub enum Prep {
    Working,
    /// Prefilled: the next decode step can run in the batch, feeding [`Sequence::take_feed`].
    Ready,
    Finished,
}

pub struct Pending {
    pub choice: Choice,
    /// `(ids, logprobs)` of the top alternatives, `[n]` each.
    top: Option<(Array, Array)>,
    chosen_lp: Option<Array>,
}

impl Pending {
    /// The logprob arrays to evaluate with the step.
    pub fn outputs(&self) -> Vec<&Array> {
        let mut outs: Vec<&Array> = Vec::new();
        if let Some((a, b)) = &self.top {
            outs.push(a);
            outs.push(b);
        }
        outs.extend(self.chosen_lp.iter());
        outs
    }
}

pub struct Sequence {
    /// The prompt's image features, for its prefill (images.rs).
    images: Option<ImageRows>,
    /// Its images moved its positions (Qwen3.5): the plan lives in its caches, which a batch's
    /// merged cache does not carry, so it decodes alone.
    planned: bool,
    req: GenerateRequest,
    tx: UnboundedSender<Event>,
    busy: Busy,
    cache: Vec<LayerCache>,
    sampler: Sampler,
    detok: Detokenizer,
    stop: StopMatcher,
    stop_ids: HashSet<u32>,
    prefilled: usize,
    pending: Option<Pending>,
    generated: usize,
    submitted: Instant,
    first_token: Option<Instant>,
    constraint: Option<Constrained>,
    /// Prompt tokens whose cache came from the prefix cache.
    cached: usize,
    /// Every token read back so far, in order: with the prompt, what the cache has read.
    emitted: Vec<u32>,
    /// The model's cache cannot be cut back: copy it where the prompt's prefill ends, for the
    /// prefix cache, and hand the copy over once ([`Sequence::take_snapshot`]).
    snapshot_prefill: bool,
    snapshot: Option<(Vec<u32>, Vec<LayerCache>)>,
    /// The token the next batch step feeds: the prompt's last, or the first generated one
    /// when that step ran alone (a sequence with nothing prefilled has no cache to merge).
    feed: Option<Array>,
    /// Guesses made and agreed with, when the request speculates.
    drafts: Drafts,
    /// Why the request's speculation was turned off.
    speculation_off: Option<Off>,
    /// See [`Start::cache_key`].
    cache_key: Option<Vec<u32>>,
    /// The draft model guessing for this sequence, with its own cache (draft.rs).
    draft: Option<Draft>,
    /// The model's multi-token-prediction head guessing for this sequence (mtp.rs).
    mtp: Option<MtpDraft>,
    /// A speculating sequence decodes plainly, pipelined, while the lookup finds nothing to
    /// guess; once it finds something, the queued step's token is the last plain one and the
    /// next unit of work is a speculative block.
    guess_again: bool,
    /// Guessing paused after a run of refused blocks (speculative.rs).
    pause: speculative::Pause,
    /// The request's thinking budget, watching the answer's thought.
    thought: Option<ThoughtWatch>,
    /// Tokens that go to the model next in place of its own choices (a thought closed for
    /// it): each replaces one sampled token, as input and as output.
    forced: VecDeque<u32>,
}

/// How a sequence starts: when it was asked for, the prefix cache's part in it.
pub struct Start {
    pub submitted: Instant,
    /// A cache of the prompt's first tokens, from the prefix cache.
    pub prefix: Option<Prefix>,
    /// Copy the cache where the prompt's prefill ends (a model whose cache cannot be cut).
    pub snapshot_prefill: bool,
    /// Its place in the engine's count of running sequences.
    pub busy: Busy,
    /// Why the engine turned off the request's speculation (already cleared from it).
    pub speculation_off: Option<Off>,
    /// The prompt as the prefix cache knows it, where it differs from the tokens (images:
    /// images.rs `cache_key`).
    pub cache_key: Option<Vec<u32>>,
    /// The draft model that guesses, when the request speculates with one.
    pub draft: Option<Rc<dyn CausalLm>>,
}

/// A cache to start from: the first `len` prompt tokens, already read.
pub struct Prefix {
    pub len: usize,
    pub cache: Vec<LayerCache>,
}

/// A sequence's constraint, and how its mask reaches the device.
struct Constrained {
    state: ConstraintState,
    /// The model's vocabulary size: the logits can be wider than the tokenizer.
    width: usize,
    mask: MaskRow,
    /// The last mask's device array, while the grammar allows the same ids again (inside a
    /// string most steps do): it is reused, with no upload and no expansion on the device.
    last: Option<Array>,
    /// Host time the last mask took, grammar to device array (for `RMX_TRACE_STEPS`).
    last_mask_ms: f64,
}

/// On the CPU backend the mask is a row of bools the host fills. On a GPU it crosses as bits
/// (a 32nd of the bytes: 19 KB for a 150K vocabulary rather than 150 KB, read by the device
/// every step) and is expanded there: each id's bit is its word, taken by `word_of`, divided
/// by `bit_of` (2 to the id's place in the word) and taken modulo 2.
enum MaskRow {
    Bools(Vec<bool>),
    Bits {
        words: Vec<u32>,
        /// The words the last device array was made of.
        sent: Vec<u32>,
        word_of: Array,
        bit_of: Array,
    },
}

impl MaskRow {
    fn new(width: usize) -> Result<MaskRow> {
        let bits = match rmx_settings::var(rmx_settings::EnvVars::RMX_MASK_ROW).as_deref() {
            Some("bits") => true,
            Some("bools") => false,
            _ => rmx_mlx::backend() != rmx_mlx::Backend::Cpu,
        };
        if !bits {
            return Ok(MaskRow::Bools(vec![false; width]));
        }
        let word_of: Vec<u32> = (0..width as u32).map(|i| i / 32).collect();
        let bit_of: Vec<u32> = (0..width as u32).map(|i| 1 << (i % 32)).collect();
        Ok(MaskRow::Bits {
            words: vec![0; width.div_ceil(32)],
            sent: Vec::new(),
            word_of: Array::from_slice(&word_of, &[width as i32])?,
            bit_of: Array::from_slice(&bit_of, &[width as i32])?,
        })
    }
}

/// `[width]` bool from the mask's bits (see [`MaskRow`]).
fn expand_bits(words: &[u32], word_of: &Array, bit_of: &Array) -> Result<Array> {
    Ok(Array::from_slice(words, &[words.len() as i32])?
        .take(word_of, 0)?
        .floor_divide(bit_of)?
        .remainder_scalar(2.0)?
        .not_equal_scalar(0.0)?)
}

impl Constrained {
    /// `[1, width]` bool: the ids allowed next, with `left` tokens left counting this one.
    fn mask(&mut self, left: usize) -> Result<Array> {
        let t = Instant::now();
        let mask = self.state.mask(left)?;
        let row = [1, self.width as i32];
        let array = match &mut self.mask {
            MaskRow::Bools(row_bools) => {
                mask.fill(row_bools);
                Array::from_slice(row_bools, &row)?
            }
            MaskRow::Bits {
                words,
                sent,
                word_of,
                bit_of,
            } => {
                mask.fill_words(words);
                match &self.last {
                    Some(last) if words == sent => last.clone(),
                    _ => {
                        sent.clone_from(words);
                        expand_bits(words, word_of, bit_of)?.reshape(&row)?
                    }
                }
            }
        };
        self.last = Some(array.clone());
        self.last_mask_ms = t.elapsed().as_secs_f64() * 1e3;
        Ok(array)
    }
}

impl Sequence {
    pub fn new(
        req: GenerateRequest,
        tx: UnboundedSender<Event>,
        model: &dyn CausalLm,
        tokenizer: &Arc<Tokenizer>,
        start: Start,
    ) -> Result<Sequence> {
        let Start {
            submitted,
            prefix,
            snapshot_prefill,
            busy,
            speculation_off,
            cache_key,
            draft,
        } = start;
        let width = model.info().vocab_size.max(0) as usize;
        let constraint = match &req.constraint {
            Some(c) => Some(Constrained {
                state: ConstraintState::new(c),
                width,
                mask: MaskRow::new(width)?,
                last: None,
                last_mask_ms: 0.0,
            }),
            None => None,
        };
        let sampler = Sampler::new(&req.sampling, model.info().vocab_size, &req.prompt)?;
        let mut thought = req.thought_budget.clone().map(ThoughtWatch::new);
        let forced: VecDeque<u32> = thought
            .as_mut()
            .and_then(|w| w.at_start())
            .unwrap_or_default()
            .into();
        let mut stop_ids: HashSet<u32> = if req.ignore_eos {
            HashSet::new()
        } else {
            tokenizer.eos_token_ids().iter().copied().collect()
        };
        stop_ids.extend(req.stop_token_ids.iter().copied());
        let (cached, mut cache) = match prefix {
            Some(p) if p.len < req.prompt.len() => (p.len, p.cache),
            _ => (0, model.make_cache()),
        };
        let images = if req.images.is_empty() {
            None
        } else {
            let mut rows = ImageRows::encode(model, &req.images, &req.prompt)?;
            rows.skip_read(&req.prompt[..cached]);
            let sizes: Vec<(u32, u32)> = req.images.iter().map(|i| (i.height, i.width)).collect();
            model.plan_images(&req.prompt, &sizes, &mut cache)?;
            Some(rows)
        };
        let planned = images.is_some() && model.images_move_positions();
        Ok(Sequence {
            planned,
            images,
            detok: Detokenizer::new(tokenizer.clone()).with_special_tokens(req.keep_special_tokens),
            stop: StopMatcher::new(req.stop.clone()),
            cache,
            sampler,
            stop_ids,
            prefilled: cached,
            cached,
            emitted: Vec::new(),
            snapshot_prefill,
            snapshot: None,
            feed: None,
            drafts: Drafts::default(),
            speculation_off,
            cache_key,
            draft: draft.map(Draft::new),
            mtp: match &req.speculative {
                Some(Speculation::Mtp { .. }) if model.info().mtp_layers > 0 => {
                    Some(MtpDraft::new(model))
                }
                _ => None,
            },
            guess_again: false,
            pause: speculative::Pause::default(),
            thought,
            forced,
            pending: None,
            generated: 0,
            submitted,
            first_token: None,
            constraint,
            req,
            tx,
            busy,
        })
    }

    /// The client went away: drop everything (the cache goes with `self`).
    pub fn is_cancelled(&self) -> bool {
        self.tx.is_closed()
    }

    pub fn fail(&self, message: String) {
        self.busy.release();
        let _ = self.tx.send(Event::Error(message));
    }

    /// Whether this sequence can decode in the batch: a constrained one reads each token before
    /// the next step's mask exists, and a speculating one feeds a block of guesses each step,
    /// so they run alone.
    pub fn batches(&self) -> bool {
        if self.req.kv_quant.is_some() {
            // Its caches turn quantized after a forward (quantize_kv), which a batch's merged
            // cache cannot.
            return false;
        }
        self.constraint.is_none() && self.req.speculative.is_none() && !self.planned
    }

    /// Nothing but the plain greedy choice (no penalties, bias or logprobs): a batch step takes
    /// such rows' tokens with one argmax over all of them.
    pub fn is_plain_greedy(&self) -> bool {
        let p = &self.req.sampling;
        p.is_greedy()
            && p.logit_bias.is_empty()
            && !p.has_penalties()
            && self.req.top_logprobs.is_none()
            && self.constraint.is_none()
    }

    /// One unit of work towards decoding in the batch: a prefill chunk, or the first step alone
    /// when nothing is prefilled (a one-token prompt).
    pub fn prepare(&mut self, model: &dyn CausalLm) -> Result<Prep> {
        let total = self.req.prompt.len();
        if total - self.prefilled > 1 {
            self.prefill_chunk(model)?;
            return Ok(Prep::Working);
        }
        self.snapshot_prompt()?;
        if self.prefilled > 0 {
            let last = self.req.prompt[total - 1];
            self.feed = Some(Array::from_slice(&[last], &[1])?);
            return Ok(Prep::Ready);
        }
        let last = self.req.prompt[total - 1];
        let first = self.step(model, &Array::from_slice(&[last], &[1, 1])?)?;
        if let Some(id) = self.take_forced()? {
            if self.emit_forced(id, Some(&first))? {
                return Ok(Prep::Finished);
            }
            self.feed = Some(Array::from_slice(&[id], &[1])?);
            return Ok(Prep::Ready);
        }
        if self.emit(&first)? {
            return Ok(Prep::Finished);
        }
        self.feed = Some(first.choice.token);
        Ok(Prep::Ready)
    }

    /// Whether this sequence can be prefilled together with other new ones in one forward
    /// (group_prefill.rs): nothing read yet (no prefix from the cache) and a prompt of at most
    /// one chunk.
    pub fn prefills_fresh(&self) -> bool {
        self.prefilled == 0
            && !self.snapshot_prefill
            && self.images.is_none()
            && (1..=PREFILL_CHUNK).contains(&self.prefill_left())
    }

    /// The prompt tokens a prefill reads: all but the last, which the first decode step reads.
    pub fn prefill_tokens(&self) -> &[u32] {
        &self.req.prompt[..self.req.prompt.len().saturating_sub(1)]
    }

    /// Takes a cache that has read [`Sequence::prefill_tokens`] (prefilled with others): the
    /// sequence is then ready for the batch.
    pub fn prefilled_with(&mut self, cache: Vec<LayerCache>) -> Result<()> {
        let total = self.req.prompt.len();
        self.cache = cache;
        self.prefilled = total - 1;
        self.feed = Some(Array::from_slice(&[self.req.prompt[total - 1]], &[1])?);
        Ok(())
    }

    /// Prompt tokens still to prefill before the sequence can decode.
    pub fn prefill_left(&self) -> usize {
        self.req.prompt.len().saturating_sub(self.prefilled + 1)
    }

    /// The token the first batch step feeds, `[1]` u32.
    pub fn take_feed(&mut self) -> Option<Array> {
        self.feed.take()
    }

    /// The cache as it stands (for `rmx ps`'s memory).
    pub fn cache(&self) -> &[LayerCache] {
        &self.cache
    }

    /// The cache, for merging into the batch (the sequence keeps an empty one).
    pub fn take_cache(&mut self) -> Vec<LayerCache> {
        std::mem::take(&mut self.cache)
    }

    /// The tokens this sequence's cache has read once each generated token has been fed: its
    /// prompt, then what it generated.
    pub fn read_tokens(&self) -> Vec<u32> {
        let mut t = self.req.prompt.clone();
        t.extend(&self.emitted);
        t
    }

    /// [`Sequence::read_tokens`] as the prefix cache keys them (an image's placeholders by
    /// the image: images.rs).
    pub fn cache_tokens(&self) -> Vec<u32> {
        let mut t = self
            .cache_key
            .clone()
            .unwrap_or_else(|| self.req.prompt.clone());
        t.extend(&self.emitted);
        t
    }

    fn snapshot_prompt(&mut self) -> Result<()> {
        if self.snapshot_prefill && self.prefilled > self.cached {
            self.snapshot_prefill = false;
            let cache = self
                .cache
                .iter()
                .map(LayerCache::snapshot)
                .collect::<rmx_models::Result<Vec<_>>>()?;
            // Now, not lazily: the next step's kernel writes into the live buffers in place.
            let state: Vec<&Array> = cache.iter().flat_map(|c| c.state()).collect();
            rmx_mlx::eval(&state)?;
            let key = self.cache_key.as_deref().unwrap_or(&self.req.prompt);
            self.snapshot = Some((key[..self.prefilled].to_vec(), cache));
        }
        Ok(())
    }

    /// Does one unit of work.
    pub fn advance(&mut self, model: &dyn CausalLm) -> Result<Progress> {
        let total = self.req.prompt.len();
        if self.pending.is_none() {
            if total - self.prefilled > 1 {
                self.prefill_chunk(model)?;
                return Ok(Progress::Working);
            }
            self.snapshot_prompt()?;
            if self.req.speculative.is_some() {
                return self.speculate(model);
            }
            let last = self.req.prompt[total - 1];
            let first = self.step(model, &Array::from_slice(&[last], &[1, 1])?)?;
            self.pending = Some(first);
        }
        let Some(current) = self.pending.take() else {
            return Ok(Progress::Working);
        };
        // A token forced in place of this choice goes to the model and the client instead.
        let forced = self.take_forced()?;
        let input = match forced {
            Some(id) => Array::from_slice(&[id], &[1, 1])?,
            None => current.choice.token.reshape(&[1, 1])?,
        };
        if self.constraint.is_some() {
            // The next step's mask depends on this token, so it is sampled after this token
            // is read; its forward pass is queued first, to run while the mask is computed.
            let t0 = Instant::now();
            let logits = if self.generated + 1 < self.req.max_tokens {
                Some(self.forward(model, &input)?)
            } else {
                None
            };
            let t1 = Instant::now();
            let done = match forced {
                Some(id) => self.emit_forced(id, Some(&current))?,
                None => self.emit(&current)?,
            };
            if done {
                return Ok(Progress::Finished);
            }
            let t2 = Instant::now();
            if let Some(logits) = logits {
                self.pending = Some(self.sample_queued(&logits)?);
            }
            if crate::trace::on() {
                let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
                let mask = self.constraint.as_ref().map_or(0.0, |c| c.last_mask_ms);
                eprintln!(
                    "rmx-trace: constrained step queue={:.2}ms read+emit={:.2}ms mask={mask:.2}ms \
                     sample={:.2}ms",
                    ms(t0, t1),
                    ms(t1, t2),
                    ms(t2, Instant::now()) - mask
                );
            }
            return Ok(Progress::Working);
        }
        // Queue the next step before reading this one, unless this is the last token (or the
        // last plain one before a speculative block).
        let last_plain = std::mem::take(&mut self.guess_again);
        let next = if self.generated + 1 < self.req.max_tokens && !last_plain {
            Some(self.step(model, &input)?)
        } else {
            None
        };
        let done = match forced {
            Some(id) => self.emit_forced(id, Some(&current))?,
            None => self.emit(&current)?,
        };
        if done {
            return Ok(Progress::Finished);
        }
        if next.is_some() {
            self.guess_again = self.can_guess();
        }
        self.pending = next;
        Ok(Progress::Working)
    }

    fn prefill_chunk(&mut self, model: &dyn CausalLm) -> Result<()> {
        let remaining = self.req.prompt.len() - self.prefilled - 1;
        let mut n = remaining.min(PREFILL_CHUNK);
        if let Some(images) = &self.images {
            let start = self.prefilled;
            n = images.chunk_end(&self.req.prompt, start, start + n) - start;
        }
        let chunk = &self.req.prompt[self.prefilled..self.prefilled + n];
        let tokens = Array::from_slice(chunk, &[1, n as i32])?;
        // Only the cache matters here (and what the multi-token-prediction head reads of the
        // hidden states).
        let hidden = match &mut self.images {
            Some(images) => images.forward(model, chunk, &tokens, &mut self.cache)?,
            None => model.forward_hidden(&tokens, &mut self.cache)?,
        };
        if let Some(m) = &mut self.mtp {
            m.observe(model, &hidden, self.prefilled)?;
            m.catch_up(model, &self.req.prompt)?;
        }
        self.quantize_kv()?;
        let mut state: Vec<&Array> = self.cache.iter().flat_map(|c| c.state()).collect();
        if let Some(m) = &self.mtp {
            state.extend(m.state());
        }
        rmx_mlx::eval(&state)?;
        self.prefilled += n;
        rmx_mlx::clear_cache();
        Ok(())
    }

    /// mlx-lm's `maybe_quantize_kv_cache`, after every model call as its `generate_step` runs
    /// it: full-attention caches that hold `start` positions or more become quantized.
    fn quantize_kv(&mut self) -> Result<()> {
        if let Some(q) = &self.req.kv_quant {
            rmx_models::cache::quantize_caches(&mut self.cache, q)?;
        }
        Ok(())
    }

    fn step(&mut self, model: &dyn CausalLm, tokens: &Array) -> Result<Pending> {
        let logits = self.logits(model, tokens)?;
        self.sample_queued(&logits)
    }

    /// The last position's `[1, vocab]` logits for `tokens`, lazily (their states handed to
    /// the multi-token-prediction head, when it guesses for this sequence).
    fn logits(&mut self, model: &dyn CausalLm, tokens: &Array) -> Result<Array> {
        let at = self.cache.first().map_or(0, |c| c.offset()) as usize;
        let hidden = model.forward_hidden(tokens, &mut self.cache)?;
        if let Some(m) = &mut self.mtp {
            m.observe(model, &hidden, at)?;
        }
        self.quantize_kv()?;
        let logits = model.lm_head(&hidden)?;
        let l = logits.dim(1);
        Ok(logits.slice_axis(1, l - 1, l)?.squeeze(&[1])?)
    }

    /// [`Sequence::logits`], queued on the device at once.
    fn forward(&mut self, model: &dyn CausalLm, tokens: &Array) -> Result<Array> {
        let logits = self.logits(model, tokens)?;
        rmx_mlx::async_eval(&[&logits])?;
        Ok(logits)
    }

    /// Samples from `logits` and queues the choice (and what carries over) on the device.
    fn sample_queued(&mut self, logits: &Array) -> Result<Pending> {
        let pending = self.sample(logits)?;
        // The log-probabilities only where they are reported (`outputs`): a greedy token does not
        // need them (`rmx_models::greedy_tokens`), and a forced one takes them lazily.
        let mut outs: Vec<&Array> = vec![&pending.choice.token];
        outs.extend(pending.outputs());
        outs.extend(self.sampler.state());
        rmx_mlx::async_eval(&outs)?;
        Ok(pending)
    }

    /// Chooses the next token from this sequence's `[1, vocab]` logits, lazily: the caller
    /// evaluates the choice's arrays, [`Pending::outputs`] and [`Sequence::sampler_state`].
    pub fn sample(&mut self, logits: &Array) -> Result<Pending> {
        let left = self.req.max_tokens.saturating_sub(self.generated);
        let mask = match self.constraint.as_mut() {
            Some(c) => Some(c.mask(left)?),
            None => None,
        };
        let choice = self.sampler.choose_within(logits, mask.as_ref())?;
        let (top, chosen_lp) = match self.req.top_logprobs {
            Some(n) => {
                let lp = choice.logprobs.reshape(&[-1])?;
                let chosen = lp.take(&choice.token, 0)?;
                let n = n.clamp(1, lp.size()) as i32;
                let top = if n > 0 {
                    let idx = lp
                        .negative()?
                        .argpartition(n - 1, -1)?
                        .slice_axis(0, 0, n)?;
                    Some((idx.clone(), lp.take(&idx, 0)?))
                } else {
                    None
                };
                (top, Some(chosen))
            }
            None => (None, None),
        };
        Ok(Pending {
            choice,
            top,
            chosen_lp,
        })
    }

    /// The token that replaces this sequence's latest choice, if one is forced (a thought
    /// closed for the model): the sampler counts it instead. The caller feeds it to the model
    /// and sends it with [`Sequence::emit_token`].
    pub fn take_forced(&mut self) -> Result<Option<u32>> {
        let Some(id) = self.forced.pop_front() else {
            return Ok(None);
        };
        self.sampler.replace_last(id)?;
        Ok(Some(id))
    }

    /// The sampler's arrays that carry over to the next step.
    pub fn sampler_state(&self) -> Vec<&Array> {
        self.sampler.state()
    }

    /// The copy of the cache taken where the prompt's prefill ended, once.
    pub fn take_snapshot(&mut self) -> Option<(Vec<u32>, Vec<LayerCache>)> {
        self.snapshot.take()
    }

    /// The tokens the finished sequence's cache has read and the cache, evaluated, for the
    /// prefix cache.
    pub fn into_entry(self) -> Result<Option<(Vec<u32>, Vec<LayerCache>)>> {
        if self.req.kv_quant.is_some() {
            // Quantized keys are no answer for a request without (or with other) settings.
            return Ok(None);
        }
        let Some(read) = self.cache.first().map(|c| c.offset() as usize) else {
            return Ok(None);
        };
        let mut tokens = self.cache_tokens();
        if read == 0 || read > tokens.len() {
            return Ok(None);
        }
        tokens.truncate(read);
        let state: Vec<&Array> = self.cache.iter().flat_map(|c| c.state()).collect();
        rmx_mlx::eval(&state)?;
        Ok(Some((tokens, self.cache)))
    }

    /// Reads the pending token and sends it; true when the generation is over.
    fn emit(&mut self, p: &Pending) -> Result<bool> {
        let id = p.choice.token.item::<u32>()?;
        self.emit_token(id, Some(p))
    }

    /// Sends token `id`, forced in place of `p`'s choice, with the model's logprob of it at
    /// that step when logprobs were asked for; true when the generation is over.
    pub fn emit_forced(&mut self, id: u32, p: Option<&Pending>) -> Result<bool> {
        let given = match p {
            Some(p) if p.chosen_lp.is_some() => {
                let token = Array::from_slice(&[id], &[1])?;
                let chosen_lp = p.choice.logprobs.reshape(&[-1])?.take(&token, 0)?;
                Some(Pending {
                    choice: Choice {
                        token,
                        logprobs: p.choice.logprobs.clone(),
                    },
                    top: p.top.clone(),
                    chosen_lp: Some(chosen_lp),
                })
            }
            _ => None,
        };
        self.emit_token(id, given.as_ref())
    }

    /// Sends token `id` (with `p`'s logprobs, when it was sampled alone); true when the
    /// generation is over.
    pub fn emit_token(&mut self, id: u32, p: Option<&Pending>) -> Result<bool> {
        self.emitted.push(id);
        if self.first_token.is_none() {
            self.first_token = Some(Instant::now());
        }
        self.generated += 1;
        if let Some(c) = self.constraint.as_mut() {
            c.state.accept(id)?;
        }
        if self.stop_ids.contains(&id) {
            self.finish(FinishReason::Stop, None, String::new());
            return Ok(true);
        }
        let logprob = match p.map(|p| (&p.chosen_lp, &p.top)) {
            Some((Some(c), top)) => {
                let mut alts = Vec::new();
                if let Some((ids, lps)) = top {
                    let ids = ids.to_vec::<u32>()?;
                    let lps = lps.to_vec::<f32>()?;
                    alts = ids.into_iter().zip(lps).collect();
                    alts.sort_by(|a, b| b.1.total_cmp(&a.1));
                }
                Some(TokenLogprob {
                    id,
                    logprob: c.item::<f32>()?,
                    top: alts,
                })
            }
            _ => None,
        };
        let text = self.detok.push(id).unwrap_or_default();
        if let Some(ids) = self.thought.as_mut().and_then(|w| w.push(&text)) {
            self.forced.extend(ids);
        }
        let out = self.stop.push(&text);
        let _ = self.tx.send(Event::Token {
            id,
            text: out.text,
            logprob,
        });
        if out.stop.is_some() {
            self.finish(FinishReason::Stop, out.stop, String::new());
            return Ok(true);
        }
        if self
            .constraint
            .as_ref()
            .is_some_and(|c| c.state.is_complete())
        {
            // The shape is whole: nothing may follow, so stop without asking for EOS.
            let (stop, text) = self.flush();
            self.finish(FinishReason::Stop, stop, text);
            return Ok(true);
        }
        if self.generated >= self.req.max_tokens {
            let (stop, text) = self.flush();
            // A stop string completed by the last token's held-back text still ended the answer.
            let finish = match stop {
                Some(_) => FinishReason::Stop,
                None => FinishReason::Length,
            };
            self.finish(finish, stop, text);
            return Ok(true);
        }
        Ok(false)
    }

    /// The text held back by the detokenizer and the stop matcher, and the stop string it
    /// completed, if any.
    fn flush(&mut self) -> (Option<String>, String) {
        let rest = self.detok.finish().unwrap_or_default();
        let mut tail = self.stop.push(&rest);
        if tail.stop.is_none() {
            tail.text.push_str(&self.stop.finish());
        }
        (tail.stop, tail.text)
    }

    fn finish(&mut self, finish: FinishReason, stop_sequence: Option<String>, text: String) {
        let now = Instant::now();
        let first = self.first_token.unwrap_or(now);
        let timings = Timings {
            time_to_first_token: first - self.submitted,
            prefill: first - self.submitted,
            decode: now - first,
            peak_memory: rmx_mlx::peak_memory(),
        };
        let usage = Usage {
            prompt_tokens: self.req.prompt.len(),
            completion_tokens: self.generated,
            cached_tokens: self.cached,
            drafts: self.req.speculative.as_ref().map(|_| self.drafts),
            speculation_off: self.speculation_off,
        };
        self.busy.release();
        let _ = self.tx.send(Event::Done {
            finish,
            stop_sequence,
            text,
            usage,
            timings,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU's way of building the mask (bits expanded on the device) gives the same row as
    /// the CPU's, at the word edges and past the last word too.
    #[test]
    fn mask_bits_expand_to_the_same_row() -> Result<()> {
        let width = 70;
        let allowed = [0u32, 1, 31, 32, 63, 64, 69];
        let mut words = vec![0u32; width / 32 + 1];
        for &id in &allowed {
            words[id as usize / 32] |= 1 << (id % 32);
        }
        let word_of: Vec<u32> = (0..width as u32).map(|i| i / 32).collect();
        let bit_of: Vec<u32> = (0..width as u32).map(|i| 1 << (i % 32)).collect();
        let row = expand_bits(
            &words,
            &Array::from_slice(&word_of, &[width as i32])?,
            &Array::from_slice(&bit_of, &[width as i32])?,
        )?;
        let got: Vec<bool> = row.to_vec::<bool>()?;
        let want: Vec<bool> = (0..width as u32).map(|i| allowed.contains(&i)).collect();
        assert_eq!(got, want);
        Ok(())
    }
}
