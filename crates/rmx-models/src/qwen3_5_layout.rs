//! Qwen3.5 checkpoints in transformers' own layout (the Hub's `Qwen/Qwen3.5-*` repos), read as
//! mlx-lm's `qwen3_5.py` / `qwen3_5_moe.py` `sanitize` reads them: the text model's tensors
//! under `model.language_model.` (MLX conversions: `language_model.model.`), the convolution
//! of each DeltaNet layer as `[channels, 1, kernel]`, RMS norms stored minus one, and a MoE
//! layer's experts as one fused `experts.gate_up_proj` / `experts.down_proj` pair.
//!
//! Only these checkpoints keep the multi-token-prediction heads (`mtp.*`, which mlx-lm's
//! conversion drops): their norms are stored minus one like the rest, so they get the same 1.

use crate::error::Result;
use crate::weights::Weights;

/// Norms stored minus one in transformers' layout, by how their names end: mlx-lm's list, and
/// the MTP heads' own three.
const SHIFTED_NORMS: &[&str] = &[
    ".input_layernorm.weight",
    ".post_attention_layernorm.weight",
    "model.norm.weight",
    ".q_norm.weight",
    ".k_norm.weight",
    "mtp.norm.weight",
    "mtp.pre_fc_norm_hidden.weight",
    "mtp.pre_fc_norm_embedding.weight",
];

/// Whether the weights are in transformers' layout: mlx-lm's test, a convolution whose last
/// axis is not 1.
pub(crate) fn is_transformers(w: &Weights) -> bool {
    w.any(|k, shape| k.ends_with("conv1d.weight") && shape.last() != Some(&1))
}

/// Rewrites a transformers-layout checkpoint into the names and layout MLX conversions have
/// (the vision tower's tensors dropped: its transformers layout is not read).
pub(crate) fn to_mlx(w: &mut Weights) -> Result<()> {
    w.discard(|k| k.starts_with("model.visual.") || k.starts_with("visual."));
    w.rename(|k| {
        if let Some(rest) = k.strip_prefix("model.language_model.") {
            format!("language_model.model.{rest}")
        } else if k.starts_with("mtp.") || k.starts_with("language_model.") {
            k.to_string()
        } else {
            format!("language_model.{k}")
        }
    });
    for name in w.names() {
        if name.ends_with("conv1d.weight") {
            w.map(&name, |a| Ok(a.swapaxes(1, 2)?))?;
        } else if SHIFTED_NORMS.iter().any(|s| name.ends_with(s)) {
            w.map(&name, |a| match a.ndim() {
                1 => Ok(a.add_scalar(1.0)?),
                _ => Ok(a.clone()),
            })?;
        } else if let Some(mlp) = name.strip_suffix(".experts.gate_up_proj") {
            let Some(file) = w.file_of(&name) else {
                continue;
            };
            let fused = w.take(&name, &[-1, -1, -1])?;
            let mid = fused.dim(1) / 2;
            let gate = fused.slice_axis(1, 0, mid)?.contiguous()?;
            let up = fused.slice_axis(1, mid, 2 * mid)?.contiguous()?;
            w.insert(&format!("{mlp}.switch_mlp.gate_proj.weight"), gate, file);
            w.insert(&format!("{mlp}.switch_mlp.up_proj.weight"), up, file);
            let down = format!("{mlp}.experts.down_proj");
            if let Some(file) = w.file_of(&down) {
                let d = w.take(&down, &[-1, -1, -1])?;
                w.insert(&format!("{mlp}.switch_mlp.down_proj.weight"), d, file);
            }
        }
    }
    Ok(())
}
