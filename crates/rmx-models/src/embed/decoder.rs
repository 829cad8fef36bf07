//! A decoder language model read as an embedding model (Qwen3-Embedding): the inputs run
//! left-padded through the family's own layers into a batch cache that masks the padding, and
//! the final-normed hidden states are pooled (last token, as its sentence-transformers files say).
//! The language-model head is never used: conversions drop it (mlx-embeddings' sanitize) or
//! keep it (mlx-lm's); either loads.

use std::path::Path;

use rmx_mlx::{concatenate, Array};

use super::pooling::{PoolMode, Pooling};
use super::Embedder;
use crate::batch_cache::BatchKvCache;
use crate::cache::LayerCache;
use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::model::{CausalLm, ModelInfo, ModelKind};
use crate::weights::Weights;

pub struct DecoderEmbedder {
    lm: Box<dyn CausalLm>,
    pooling: Pooling,
    /// Whether every layer's cache is a full KV cache, which a left-padded batch can use;
    /// otherwise (sliding windows, recurrent layers) inputs run one at a time.
    batches: bool,
    info: ModelInfo,
}

pub fn load(
    dir: &Path,
    cfg: &RawConfig,
    w: &mut Weights,
    causal: Option<crate::registry::Loader>,
) -> Result<Box<dyn Embedder>> {
    let Some(loader) = causal else {
        return Err(ModelError::Unsupported {
            model_type: cfg.model_type.clone(),
            supported: crate::registry::supported().join(", "),
        });
    };
    // Base-model checkpoints (HF's `Qwen3Model`) name tensors without the `model.` prefix the
    // language model's loader reads; `transformer.` is another spelling of it.
    w.rename(|n| {
        if n.starts_with("model.") || n.starts_with("lm_head.") {
            n.to_string()
        } else if let Some(rest) = n.strip_prefix("transformer.") {
            format!("model.{rest}")
        } else {
            format!("model.{n}")
        }
    });
    w.discard(|n| n.starts_with("lm_head."));
    // Without its head the model reads as tied: the loader then wants no lm_head tensor.
    let mut raw = cfg.raw.clone();
    if let Some(obj) = raw.as_object_mut() {
        obj.insert("tie_word_embeddings".into(), true.into());
    }
    let tied = RawConfig {
        path: cfg.path.clone(),
        raw,
        model_type: cfg.model_type.clone(),
        architectures: cfg.architectures.clone(),
        quant: cfg.quant.clone(),
    };
    let lm = loader(&tied, w)?;
    let pooling = Pooling::read(
        dir,
        Pooling {
            mode: PoolMode::LastToken,
            normalize: true,
        },
    )?;
    let batches = lm.make_cache().iter().all(LayerCache::is_trimmable);
    let mut info = lm.info().clone();
    info.kind = ModelKind::Embedding;
    info.tied_embeddings = false;
    info.layer_kinds
        .push(format!("{} pooling", pooling.mode.name()));
    Ok(Box::new(DecoderEmbedder {
        lm,
        pooling,
        batches,
        info,
    }))
}

/// The final-normed hidden states `[B, longest, hidden]` of `inputs` run through `lm` in one
/// forward, left-padded into batch caches that mask the padding (one input: a plain cache).
/// Each row's last column is its last token. Only for models whose layers all keep full KV
/// caches (`LayerCache::is_trimmable`); others take their inputs one at a time.
pub fn forward_left_padded(lm: &dyn CausalLm, inputs: &[&[u32]]) -> Result<Array> {
    let longest = inputs.iter().map(|t| t.len()).max().unwrap_or(0);
    let b = inputs.len();
    let mut ids = vec![0u32; b * longest];
    for (row, t) in inputs.iter().enumerate() {
        ids[row * longest + longest - t.len()..(row + 1) * longest].copy_from_slice(t);
    }
    let tokens = Array::from_slice(&ids, &[b as i32, longest as i32])?;
    let mut cache = if b == 1 {
        lm.make_cache()
    } else {
        let pads: Vec<i32> = inputs.iter().map(|t| (longest - t.len()) as i32).collect();
        lm.make_cache()
            .iter()
            .map(|_| BatchKvCache::padded(pads.clone()).map(LayerCache::Batch))
            .collect::<Result<Vec<_>>>()?
    };
    lm.forward_hidden(&tokens, &mut cache)
}

impl DecoderEmbedder {
    fn run(&self, inputs: &[&[u32]]) -> Result<Array> {
        let hidden = forward_left_padded(self.lm.as_ref(), inputs)?;
        let lens: Vec<usize> = inputs.iter().map(|t| t.len()).collect();
        self.pooling.apply(&hidden, &lens, true)
    }
}

impl Embedder for DecoderEmbedder {
    fn embed(&self, inputs: &[&[u32]]) -> Result<Array> {
        if self.batches || inputs.len() <= 1 {
            return self.run(inputs);
        }
        let rows = inputs
            .iter()
            .map(|t| self.run(&[t]))
            .collect::<Result<Vec<_>>>()?;
        Ok(concatenate(&rows.iter().collect::<Vec<_>>(), 0)?)
    }

    fn pooling(&self) -> Pooling {
        self.pooling
    }

    fn info(&self) -> &ModelInfo {
        &self.info
    }
}
