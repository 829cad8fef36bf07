//! The hybrid families' checkpoints in transformers' own layout (the Hub's `Qwen/Qwen3.5-*`
//! and `Qwen/Qwen3-Next-*` repos), read as mlx-lm's `sanitize` reads them (`qwen3_5.py`,
//! `qwen3_5_moe.py`, `qwen3_next.py`): the convolution of each DeltaNet layer as
//! `[channels, 1, kernel]`, RMS norms stored minus one, a MoE layer's experts fused in one
//! `experts.gate_up_proj` / `experts.down_proj` pair (Qwen3.5) or stored one by one
//! (Qwen3-Next), and Qwen3.5's text model under `model.language_model.` (MLX conversions:
//! `language_model.model.`).
//!
//! Only these checkpoints keep the multi-token-prediction heads (`mtp.*`, which mlx-lm's
//! conversion drops): their norms are stored minus one like the rest, so they get the same 1.

use std::collections::BTreeMap;

use crate::error::{ModelError, Result};
use crate::weights::Weights;

/// Whose checkpoint it is: where the names and the experts differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hub {
    Qwen35,
    Qwen3Next,
}

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

/// Whether the weights are in transformers' layout: a convolution whose last axis is not 1
/// (mlx-lm's test for Qwen3.5), or experts stored one by one (its test for Qwen3-Next).
pub(crate) fn is_transformers(w: &Weights) -> bool {
    w.any(|k, shape| {
        (k.ends_with("conv1d.weight") && shape.last() != Some(&1)) || k.contains(".experts.0.")
    })
}

/// Rewrites a transformers-layout checkpoint into the names and layout MLX conversions have
/// (the vision tower's tensors dropped: its transformers layout is not read).
pub(crate) fn to_mlx(w: &mut Weights, hub: Hub) -> Result<()> {
    if hub == Hub::Qwen35 {
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
    }
    // Per-expert tensors by (the MLP, the projection): expert index -> name.
    let mut experts: BTreeMap<(String, String), BTreeMap<usize, String>> = BTreeMap::new();
    for name in w.names() {
        if name.ends_with("conv1d.weight") {
            w.map(&name, |a| match a.dim(-1) {
                1 => Ok(a.clone()),
                _ => Ok(a.swapaxes(1, 2)?),
            })?;
        } else if SHIFTED_NORMS.iter().any(|s| name.ends_with(s)) {
            w.map(&name, |a| match a.ndim() {
                1 => Ok(a.add_scalar(1.0)?),
                _ => Ok(a.clone()),
            })?;
        } else if let Some(mlp) = name.strip_suffix(".experts.gate_up_proj") {
            fuse_split(w, &name, mlp)?;
        } else if let Some((mlp, e, proj)) = one_expert(&name) {
            experts
                .entry((mlp.to_string(), proj.to_string()))
                .or_default()
                .insert(e, name.clone());
        }
    }
    for ((mlp, proj), by_index) in experts {
        let Some(file) = by_index.values().next().and_then(|n| w.file_of(n)) else {
            continue;
        };
        if by_index.keys().enumerate().any(|(i, e)| i != *e) {
            return Err(ModelError::Config {
                path: w.file_path(file),
                message: format!(
                    "{mlp}.experts: the experts' {proj} tensors are not numbered 0..{}",
                    by_index.len()
                ),
            });
        }
        let parts: Vec<rmx_mlx::Array> = by_index
            .values()
            .map(|n| w.take_whole(n))
            .collect::<Result<_>>()?;
        let refs: Vec<&rmx_mlx::Array> = parts.iter().collect();
        let stacked = rmx_mlx::stack(&refs, 0)?;
        w.insert(&format!("{mlp}.switch_mlp.{proj}.weight"), stacked, file);
    }
    Ok(())
}

/// `{mlp}.experts.{e}.{proj}.weight` -> (mlp, e, proj).
fn one_expert(name: &str) -> Option<(&str, usize, &str)> {
    let rest = name.strip_suffix(".weight")?;
    let (mlp, tail) = rest.split_once(".experts.")?;
    let (e, proj) = tail.split_once('.')?;
    Some((mlp, e.parse().ok()?, proj))
}

/// Qwen3.5's fused `{mlp}.experts.gate_up_proj` (`[experts, 2 * inter, hidden]`) and its
/// `down_proj` as switch_mlp's three.
fn fuse_split(w: &mut Weights, name: &str, mlp: &str) -> Result<()> {
    let Some(file) = w.file_of(name) else {
        return Ok(());
    };
    let fused = w.take(name, &[-1, -1, -1])?;
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::one_expert;

    #[test]
    fn expert_names_split() {
        assert_eq!(
            one_expert("model.layers.3.mlp.experts.17.down_proj.weight"),
            Some(("model.layers.3.mlp", 17, "down_proj"))
        );
        assert_eq!(one_expert("model.layers.3.mlp.experts.gate_up_proj"), None);
        assert_eq!(
            one_expert("model.layers.3.mlp.shared_expert.up_proj.weight"),
            None
        );
    }
}
