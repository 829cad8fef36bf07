//! Embedding models: a model that turns each input into one vector. Encoders (BERT, XLM-R,
//! ModernBERT) are their own modules; a decoder trained for embeddings (Qwen3-Embedding) is the
//! family's language model read through [`decoder::DecoderEmbedder`], pooled at its last token.
//! Pooling and normalization come from the model's sentence-transformers files ([`pooling`]).

mod bert;
mod decoder;
mod modernbert;
pub mod pooling;

use std::path::Path;

use rmx_mlx::Array;

use crate::config::RawConfig;
use crate::error::Result;
use crate::model::ModelInfo;
use crate::weights::Weights;
pub use decoder::forward_left_padded;
pub use pooling::{PoolMode, Pooling};

/// A loaded embedding model. Like [`crate::CausalLm`], its arrays belong to the engine thread.
pub trait Embedder {
    /// One vector per input (token ids, none empty), `[inputs, dim]` float32, pooled and
    /// normalized as the model says. The inputs run as one padded batch.
    fn embed(&self, inputs: &[&[u32]]) -> Result<Array>;

    fn pooling(&self) -> Pooling;

    fn info(&self) -> &ModelInfo;
}

/// `model_type`s of the encoder families.
pub const ENCODER_TYPES: &[&str] = &["bert", "xlm-roberta", "roberta", "modernbert"];

/// Whether the model in `dir` (its `config` read) is an embedding model: an encoder family, a
/// sentence-transformers folder (`modules.json` with a Pooling module), a decoder saved
/// without its language-model head (`Qwen3Model`, as conversions that keep the base class
/// name it), or a model whose name says so (below).
pub fn is_embedding(dir: &Path, cfg: &RawConfig) -> bool {
    ENCODER_TYPES.contains(&cfg.model_type.as_str())
        || pooling::is_sentence_transformer(dir)
        || cfg
            .architectures
            .iter()
            .any(|a| a.ends_with("Model") && !a.ends_with("ForCausalLM"))
        || named_embedding(dir)
}

/// mlx-lm's converter copies neither `modules.json` nor a base-class name into its output, so
/// an MLX conversion of Qwen3-Embedding reads like a Qwen3 chat model but for its name: the
/// folder's, or for a Hub cache snapshot (`models--owner--name/snapshots/<commit>`) the repo's.
/// A name with "embedding" in it (any case) is read as an embedding model.
fn named_embedding(dir: &Path) -> bool {
    model_name(dir).contains("embedding")
}

/// A model's name in lower case: its folder's, or for a Hub cache snapshot
/// (`models--owner--name/snapshots/<commit>`) the repo's.
fn model_name(dir: &Path) -> String {
    let name = match dir.parent() {
        Some(p) if p.file_name().is_some_and(|n| n == "snapshots") => p.parent(),
        _ => Some(dir),
    };
    name.and_then(Path::file_name)
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default()
}

/// Whether a language model in `dir` is a reranker that scores by its next token (Qwen3-Reranker:
/// "yes" against "no" after a fixed judging prompt). Its files are a plain Qwen3 chat model's;
/// only the name ("reranker", any case) tells.
pub fn is_reranker(dir: &Path) -> bool {
    model_name(dir).contains("reranker")
}

/// What the model in `dir` is for, judged from its files as [`crate::load_any`] and the engine
/// judge them (config.json, the sentence-transformers files, its name), without reading any
/// weight: for listings of models not loaded.
pub fn kind_of(dir: &Path) -> Result<crate::ModelKind> {
    let cfg = RawConfig::read(dir)?;
    Ok(if is_embedding(dir, &cfg) {
        crate::ModelKind::Embedding
    } else if is_reranker(dir) {
        crate::ModelKind::Rerank
    } else {
        crate::ModelKind::Chat
    })
}

/// Loads an embedding model; `causal` builds a decoder family's language model from the
/// weights (the registry's loader for the config).
pub(crate) fn load(
    dir: &Path,
    cfg: &RawConfig,
    w: &mut Weights,
    causal: Option<crate::registry::Loader>,
) -> Result<Box<dyn Embedder>> {
    match cfg.model_type.as_str() {
        "modernbert" => {
            let pooling = Pooling::read(dir, modernbert::default_pooling())?;
            modernbert::load(cfg, w, pooling)
        }
        t if ENCODER_TYPES.contains(&t) => {
            let default = bert::default_pooling(cfg);
            bert::load(cfg, w, Pooling::read(dir, default)?)
        }
        _ => decoder::load(dir, cfg, w, causal),
    }
}
