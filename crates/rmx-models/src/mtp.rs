//! A checkpoint's multi-token-prediction head (Qwen3.5's and Qwen3.6's `mtp.*`), as vLLM's
//! `qwen3_5_mtp.py` runs it for speculative decoding: for the model's final-normed hidden state
//! at position `i` and the token at `i + 1`, `fc(concat(norm_e(embed(token)), norm_h(hidden)))`
//! goes through a full-attention decoder layer of the model's kind (with its own KV cache) and
//! a final norm; the model's lm_head then guesses the token at `i + 2`. Fed its own output and
//! that guess, it guesses on. Embedding and lm_head are the model's.
//!
//! mlx-lm reads no such head (its conversions drop `mtp.*`), so there is no MLX reference:
//! tests/py/mtp_model.py (`reference`) computes it with mlx-lm's own layers and norms.

use rmx_mlx::Array;

use crate::cache::LayerCache;
use crate::config::QuantConfig;
use crate::decoder_layer::DecoderLayer;
use crate::error::{ModelError, Result};
use crate::layers::{Linear, RmsNorm};
use crate::weights::Weights;

pub(crate) struct MtpHead {
    fc: Linear,
    norm_embedding: RmsNorm,
    norm_hidden: RmsNorm,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
}

impl MtpHead {
    /// The head under `mtp.`, its layers made by `layer` (weights, index from 0, prefix);
    /// `None` when the checkpoint has none.
    pub(crate) fn load(
        w: &mut Weights,
        q: &QuantConfig,
        hidden: i32,
        eps: f32,
        mut layer: impl FnMut(&mut Weights, i32, &str) -> Result<DecoderLayer>,
    ) -> Result<Option<MtpHead>> {
        if !w.has("mtp.fc.weight") {
            w.discard(|k| k.starts_with("mtp."));
            return Ok(None);
        }
        let n = (0..)
            .take_while(|i| w.has(&format!("mtp.layers.{i}.input_layernorm.weight")))
            .count() as i32;
        if n == 0 {
            return Err(ModelError::Config {
                path: "model.safetensors".into(),
                message: "the weights have mtp.fc.weight but no mtp.layers.0: the \
                          multi-token-prediction head is incomplete"
                    .into(),
            });
        }
        let norm = |w: &mut Weights, p: &str| RmsNorm::load(w, p, hidden, eps);
        Ok(Some(MtpHead {
            fc: Linear::load(w, q, "mtp.fc", 2 * hidden, hidden, false)?,
            norm_embedding: norm(w, "mtp.pre_fc_norm_embedding")?,
            norm_hidden: norm(w, "mtp.pre_fc_norm_hidden")?,
            layers: (0..n)
                .map(|i| layer(w, i, &format!("mtp.layers.{i}")))
                .collect::<Result<_>>()?,
            norm: norm(w, "mtp.norm")?,
        }))
    }

    pub(crate) fn layers(&self) -> usize {
        self.layers.len()
    }

    /// Its line among the model's layer kinds (`rmx info`, `rmx run -v`).
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}× MTP head ({}), for --speculative mtp",
            self.layers.len(),
            self.layers[0].describe(false)
        )
    }

    /// A fresh cache for each of its layers.
    pub(crate) fn make_cache(&self) -> Vec<LayerCache> {
        self.layers
            .iter()
            .map(|l| l.mixer.make_cache(None))
            .collect()
    }

    /// Guess step `step` (layer `step % layers`) over `embeds` (`[1, L, hidden]`, the tokens
    /// at `i + 1`) and `hidden` (the states at `i`), appending to that layer's cache: the
    /// final-normed states `[1, L, hidden]` whose lm_head rows guess the tokens at `i + 2`.
    pub(crate) fn forward(
        &self,
        embeds: &Array,
        hidden: &Array,
        step: usize,
        cache: &mut [LayerCache],
    ) -> Result<Array> {
        let i = step % self.layers.len();
        let x = rmx_mlx::concatenate(
            &[
                &self.norm_embedding.forward(embeds)?,
                &self.norm_hidden.forward(hidden)?,
            ],
            -1,
        )?;
        let x = self.fc.forward(&x)?;
        let mask = cache[i].mask(x.dim(1), None)?;
        let h = self.layers[i].forward_ops(&x, &mask, &mut cache[i])?;
        self.norm.forward(&h)
    }
}
