//! What a caller asks of the engine and what it hears back.

use std::collections::HashMap;
use std::time::Duration;

use rmx_text::constrain::Compiled;
use serde::{Deserialize, Serialize};

use crate::speculative::{Drafts, Off, Speculation};
use crate::thought::ThoughtBudget;

/// How to pick each next token. `temperature == 0` is greedy, exactly as mlx-lm.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SamplingParams {
    pub temperature: f32,
    /// Keep the smallest set of tokens whose probability adds up to `top_p` (1 = off).
    pub top_p: f32,
    /// Keep the `top_k` most likely tokens (0 = off).
    pub top_k: u32,
    /// Drop tokens less likely than `min_p` times the most likely one (0 = off).
    pub min_p: f32,
    /// HF-style: seen tokens' logits are divided (if positive) or multiplied by this (1 = off).
    pub repetition_penalty: f32,
    /// OpenAI-style: subtracted once from every seen token's logit.
    pub presence_penalty: f32,
    /// OpenAI-style: subtracted per occurrence.
    pub frequency_penalty: f32,
    /// Added to the logits of these token ids.
    pub logit_bias: HashMap<u32, f32>,
    /// Same seed, same request → same output. None picks one from the clock.
    pub seed: Option<u64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            logit_bias: HashMap::new(),
            seed: None,
        }
    }
}

impl SamplingParams {
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    pub fn has_penalties(&self) -> bool {
        self.repetition_penalty != 1.0
            || self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
    }
}

/// One generation.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    pub prompt: Vec<u32>,
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    /// Strings that end generation (they may span tokens); not included in the output.
    pub stop: Vec<String>,
    /// Token ids that end generation in addition to the model's EOS ids.
    pub stop_token_ids: Vec<u32>,
    /// Report this many most likely alternatives per token (with the chosen token's logprob).
    pub top_logprobs: Option<usize>,
    /// Keep special tokens in the text.
    pub keep_special_tokens: bool,
    /// Generate through EOS tokens (benchmarks and reference comparisons).
    pub ignore_eos: bool,
    /// Keep the output in this shape (a grammar from [`crate::Engine::constrain`]); the
    /// generation ends with [`FinishReason::Stop`] as soon as the shape is complete.
    pub constraint: Option<Compiled>,
    /// Store this request's keys and values quantized (mlx-lm's `kv_bits`, `kv_group_size`,
    /// `quantized_kv_start`). Such a request decodes alone, neither reads nor fills the prefix
    /// cache (its entries would be read by requests with other settings), and its full-attention
    /// layers attend through MLX's quantized matmul rather than the fast path's kernels.
    pub kv_quant: Option<rmx_models::cache::KvQuant>,
    /// Prefill the whole prompt even when the prefix cache holds part of it (benchmarks of
    /// prefill, comparisons with a reference that has no cache).
    pub no_prefix_cache: bool,
    /// The prompt's images, preprocessed (rmx-vision), in the order of their placeholders
    /// in `prompt` (images.rs).
    pub images: Vec<rmx_vision::PixelValues>,
    /// Guess tokens ahead and let the model check them in one forward (speculative.rs); the
    /// output is what it would be without.
    pub speculative: Option<Speculation>,
    /// Close the answer's thought after this many tokens (thought.rs).
    pub thought_budget: Option<ThoughtBudget>,
}

impl GenerateRequest {
    pub fn new(prompt: Vec<u32>, max_tokens: usize) -> GenerateRequest {
        GenerateRequest {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens,
            stop: Vec::new(),
            stop_token_ids: Vec::new(),
            top_logprobs: None,
            keep_special_tokens: false,
            ignore_eos: false,
            constraint: None,
            kv_quant: None,
            no_prefix_cache: false,
            images: Vec::new(),
            speculative: None,
            thought_budget: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// An EOS token or a stop string.
    Stop,
    /// `max_tokens` reached.
    Length,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub cached_tokens: usize,
    /// Speculative decoding's guesses and how many the model agreed with, when the request
    /// speculated.
    #[serde(default)]
    pub drafts: Option<Drafts>,
    /// Why a request that asked to speculate did not.
    #[serde(default)]
    pub speculation_off: Option<Off>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub id: u32,
    pub logprob: f32,
    /// The most likely tokens at this step, best first.
    pub top: Vec<(u32, f32)>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    /// From submission to the first generated token.
    pub time_to_first_token: Duration,
    pub prefill: Duration,
    pub decode: Duration,
    pub peak_memory: usize,
}

impl Timings {
    pub fn prefill_tps(&self, prompt_tokens: usize) -> f64 {
        prompt_tokens as f64 / self.prefill.as_secs_f64().max(1e-9)
    }

    /// Decode speed over the tokens after the first (the first one ends the prefill).
    pub fn decode_tps(&self, completion_tokens: usize) -> f64 {
        completion_tokens.saturating_sub(1) as f64 / self.decode.as_secs_f64().max(1e-9)
    }
}

/// What the engine streams back for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// One generated token and the text it completes (may be empty while a character or a
    /// possible stop string is held back).
    Token {
        id: u32,
        text: String,
        logprob: Option<TokenLogprob>,
    },
    /// The last event of a successful generation.
    Done {
        finish: FinishReason,
        /// The request's stop string that ended the generation (`None` for EOS, a stop token
        /// or the length limit); Anthropic's API reports which one matched.
        stop_sequence: Option<String>,
        /// Text released at the end (held-back characters), if any.
        text: String,
        usage: Usage,
        timings: Timings,
    },
    /// The generation failed; nothing follows.
    Error(String),
}
