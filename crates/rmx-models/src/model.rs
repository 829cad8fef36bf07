//! What the engine sees of a loaded model, whatever its family.

use rmx_mlx::Array;

use crate::cache::LayerCache;
use crate::error::{ModelError, Result};
use crate::vision::ImageEncoder;

/// Facts about a loaded model for the engine, `rmx ps` and `rmx info`.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub model_type: String,
    pub vocab_size: i32,
    pub hidden_size: i32,
    pub num_layers: i32,
    /// `max_position_embeddings`, when the config gives one.
    pub context_length: Option<i32>,
    /// Bits of the default quantization, if any.
    pub quant_bits: Option<i32>,
    pub tied_embeddings: bool,
    /// The kinds of decoder layer and how a decode step runs each, in layer order, as
    /// "N× attention + moe" lines (kernels rmx runs named in parentheses).
    pub layer_kinds: Vec<String>,
    /// What the model is for: chat and completions, or embeddings.
    pub kind: ModelKind,
    /// The layers of the checkpoint's multi-token-prediction head (mtp.rs) that speculative
    /// decoding can guess with; 0 when it has none (every MLX conversion).
    pub mtp_layers: usize,
}

/// What a loaded model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// A language model: generates text (chat, completions).
    Chat,
    /// An embedding model: turns inputs into vectors, generates nothing.
    Embedding,
    /// A reranker: scores how well documents answer a query, generates nothing.
    Rerank,
}

impl ModelKind {
    /// The word the APIs and `rmx ls` use.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Chat => "chat",
            ModelKind::Embedding => "embedding",
            ModelKind::Rerank => "rerank",
        }
    }
}

/// A decoder-only language model. Caches live outside it (one set per sequence), so several
/// sequences can share one model.
pub trait CausalLm {
    /// Runs `tokens` (`[B, L]` integer ids) through the layers, appending to `cache`, and
    /// returns the final-normed hidden states `[B, L, hidden]`.
    fn forward_hidden(&self, tokens: &Array, cache: &mut [LayerCache]) -> Result<Array>;

    /// Projects hidden states onto the vocabulary: `[..., hidden] -> [..., vocab]`.
    fn lm_head(&self, hidden: &Array) -> Result<Array>;

    /// A fresh cache for one sequence.
    fn make_cache(&self) -> Vec<LayerCache>;

    /// Whether several sequences' caches can be merged (batch_cache.rs) and decoded in one
    /// forward: no sliding windows, no rope that depends on the position itself.
    fn batches(&self) -> bool {
        false
    }

    fn info(&self) -> &ModelInfo;

    /// A fresh cache for the multi-token-prediction head (Qwen3.5's `mtp.*`, mtp.rs), one per
    /// layer ([`ModelInfo::mtp_layers`]).
    fn mtp_cache(&self) -> Vec<LayerCache> {
        Vec::new()
    }

    /// The multi-token-prediction head's guess step `step` over final-normed `hidden`
    /// (`[1, L, hidden]`, positions `i`) and `tokens` (`[1, L]`, the tokens at `i + 1`), in
    /// `cache` ([`CausalLm::mtp_cache`]): its final-normed states, whose [`CausalLm::lm_head`]
    /// rows guess the tokens at `i + 2`.
    fn mtp_forward(
        &self,
        hidden: &Array,
        tokens: &Array,
        step: usize,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let _ = (hidden, tokens, step, cache);
        Err(ModelError::NoMtp(self.info().model_type.clone()))
    }

    /// The image encoder of a vision-language model loaded with its vision weights.
    fn vision(&self) -> Option<&dyn ImageEncoder> {
        None
    }

    /// Whether a prompt's images move the positions of the tokens after them (Qwen3.5's
    /// multimodal rope): such a sequence is planned first ([`CausalLm::plan_images`], after any
    /// cached prefix is read: a stored prefix keeps no plan, its tokens were read at the same
    /// positions) and keeps its plan in its caches, which the engine keeps out of the batch and
    /// speculation (neither carries the plan).
    fn images_move_positions(&self) -> bool {
        false
    }

    /// Before a prompt with images is read: the whole `prompt` and each image's pixel-value
    /// size `(height, width)`, in order. A model whose images move positions keeps their plan
    /// in `cache`; others need nothing.
    fn plan_images(
        &self,
        prompt: &[u32],
        sizes: &[(u32, u32)],
        cache: &mut [LayerCache],
    ) -> Result<()> {
        let _ = (prompt, sizes, cache);
        Ok(())
    }

    /// [`CausalLm::forward_hidden`] for a prompt, or a chunk of one, with images: the rows of
    /// `features` (`[n, hidden]`, the encoder's output in prompt order) stand for the `n`
    /// image placeholder tokens among `tokens` (`[1, L]`).
    fn forward_hidden_with_images(
        &self,
        tokens: &Array,
        features: &Array,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let _ = (tokens, features, cache);
        Err(ModelError::Images(format!(
            "{} takes no images",
            self.info().model_type
        )))
    }
}
