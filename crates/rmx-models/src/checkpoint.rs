//! `rmx import FOLDER`: a Qwen3.5/3.6 or Qwen3-Next checkpoint as the Hub ships it
//! (transformers' layout)
//! written as an MLX-format folder, optionally quantized, keeping its multi-token-prediction
//! head (`mtp.*`), which `mlx_lm.convert` drops. Everything else is what `mlx_lm.convert`
//! writes from the same files: mlx-lm's sanitize (hub_layout.rs), then MLX's affine
//! quantization of every product's weight (4 or 8 bits, groups of 64) whose rows split into
//! groups, the MoE routers at 8 bits as mlx-lm's `quant_predicate`s have them; the head's
//! products are quantized like the model's.

use std::path::{Path, PathBuf};

use rmx_mlx::quant::{quantize, QuantSpec};
use rmx_mlx::Array;
use serde_json::{json, Value};

use crate::config::RawConfig;
use crate::error::{io_at, ModelError, Result};
use crate::hub_layout::Hub;
use crate::weights::Weights;

/// The families whose Hub checkpoints `import_checkpoint` reads.
pub const IMPORTABLE: &[&str] = &["qwen3_5", "qwen3_5_moe", "qwen3_next"];

/// About what each written weights file holds, as mlx-lm's shards.
const SHARD_BYTES: u64 = 4 << 30;

/// What [`import_checkpoint`] wrote.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    pub model_type: String,
    pub tensors: usize,
    pub bytes_written: u64,
    /// Whether the multi-token-prediction head came along.
    pub mtp: bool,
}

/// Writes the checkpoint in `src` as an MLX-format model in `dst` (a new folder), its products
/// quantized to `bits` (4 or 8; `None` keeps the stored floats). `progress` hears each tensor
/// written: (index from 1, total, name).
pub fn import_checkpoint(
    src: &Path,
    dst: &Path,
    bits: Option<i32>,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<ImportSummary> {
    let raw = RawConfig::read(src)?;
    let bad = |message: String| ModelError::Config {
        path: raw.path.clone(),
        message,
    };
    if !IMPORTABLE.contains(&raw.model_type.as_str()) {
        return Err(bad(format!(
            "importing a folder takes a Qwen3.5/3.6 or Qwen3-Next checkpoint as the Hub ships it \
             (model_type {}), not {:?}; other families load from an MLX conversion \
             (`mlx_lm.convert`)",
            IMPORTABLE.join(" or "),
            raw.model_type
        )));
    }
    if raw.raw.get("quantization").is_some() || raw.raw.get("quantization_config").is_some() {
        return Err(bad(
            "this checkpoint is quantized already; import takes its float weights".into(),
        ));
    }
    let mut w = Weights::load(src)?;
    if !crate::hub_layout::is_transformers(&w) {
        return Err(bad(
            "these weights are in MLX's layout already: run the folder as it is".into(),
        ));
    }
    let hub = match raw.model_type.as_str() {
        "qwen3_next" => Hub::Qwen3Next,
        _ => Hub::Qwen35,
    };
    crate::hub_layout::to_mlx(&mut w, hub)?;
    let text = raw.raw.get("text_config").unwrap_or(&raw.raw);
    if text.get("tie_word_embeddings").and_then(Value::as_bool) == Some(true) {
        w.discard(|k| k.starts_with("language_model.lm_head.") || k.starts_with("lm_head."));
    }
    let experts = text.get("num_experts").and_then(Value::as_i64).unwrap_or(0) > 0;
    let default = bits.map(|b| QuantSpec::affine(64, b));
    let names = w.names();
    let mtp = names.iter().any(|n| n.starts_with("mtp."));
    std::fs::create_dir_all(dst).map_err(io_at(dst))?;

    // Each tensor (quantized ones as their three), in shards of about SHARD_BYTES.
    let mut overrides = serde_json::Map::new();
    // Written shards are let go: only one is held at a time.
    let mut shard: Vec<(String, Array)> = Vec::new();
    let mut shard_bytes = 0u64;
    let total = names.len();
    let mut files = Vec::new();
    let mut bytes_written = 0u64;
    for (i, name) in names.iter().enumerate() {
        let a = w.take_whole(name)?;
        // mlx-lm's qwen3_5 / qwen3_next quant_predicate: the routers keep 8 bits, written per module
        // whatever the default.
        let router = experts
            && (name.ends_with("mlp.gate.weight") || name.ends_with("shared_expert_gate.weight"));
        let spec = default
            .filter(|s| quantizes(name, &a, s.group_size))
            .map(|s| if router { QuantSpec::affine(64, 8) } else { s });
        let parts = match spec {
            Some(s) => {
                let module = name.trim_end_matches(".weight");
                if router {
                    overrides.insert(
                        module.into(),
                        json!({"group_size": s.group_size, "bits": s.bits}),
                    );
                }
                let q = quantize(&a, s)?;
                let mut parts = vec![
                    (name.clone(), q.weight),
                    (format!("{module}.scales"), q.scales),
                ];
                if let Some(b) = q.biases {
                    parts.push((format!("{module}.biases"), b));
                }
                parts
            }
            None => vec![(name.clone(), a)],
        };
        // Each tensor made now, so its source is let go before the next is read: a shard then
        // holds only what it writes, not four times that in bf16 sources.
        let made: Vec<&Array> = parts.iter().map(|(_, a)| a).collect();
        rmx_mlx::eval(&made)?;
        rmx_mlx::clear_cache();
        for (n, a) in parts {
            let size = a.nbytes() as u64;
            if shard_bytes + size > SHARD_BYTES && !shard.is_empty() {
                bytes_written += write_shard(dst, files.len(), &shard, &mut files)?;
                shard.clear();
                shard_bytes = 0;
            }
            shard_bytes += size;
            shard.push((n, a));
        }
        progress(i + 1, total, name);
    }
    if !shard.is_empty() {
        bytes_written += write_shard(dst, files.len(), &shard, &mut files)?;
    }
    name_shards(dst, &mut files)?;
    write_config(&raw, dst, default, overrides)?;
    copy_side_files(src, dst)?;
    Ok(ImportSummary {
        model_type: raw.model_type.clone(),
        tensors: total,
        bytes_written,
        mtp,
    })
}

/// Whether `name` is a product's weight MLX's quantization takes: two or more axes (the
/// convolutions excepted, which mlx-lm leaves as they are) and rows of whole groups.
fn quantizes(name: &str, a: &Array, group: i32) -> bool {
    name.ends_with(".weight") && a.ndim() >= 2 && !name.contains("conv1d") && a.dim(-1) % group == 0
}

/// Writes one shard (evaluating what it holds), returning its bytes; named for now by index.
fn write_shard(
    dst: &Path,
    index: usize,
    tensors: &[(String, Array)],
    files: &mut Vec<(PathBuf, Vec<String>)>,
) -> Result<u64> {
    // (MLX names a file it saves `*.safetensors` whatever it is given.)
    let path = dst.join(format!("model-{:05}.partial.safetensors", index + 1));
    let refs: Vec<(&str, &Array)> = tensors.iter().map(|(n, a)| (n.as_str(), a)).collect();
    rmx_mlx::io::save_safetensors(&path, &refs, &[("format", "mlx")])?;
    files.push((path, tensors.iter().map(|(n, _)| n.clone()).collect()));
    Ok(tensors.iter().map(|(_, a)| a.nbytes() as u64).sum())
}

/// The shards under mlx-lm's names (`model.safetensors`, or `model-0000i-of-0000n` with an
/// index).
fn name_shards(dst: &Path, files: &mut [(PathBuf, Vec<String>)]) -> Result<()> {
    let n = files.len();
    let mut map = serde_json::Map::new();
    for (i, (path, names)) in files.iter_mut().enumerate() {
        let name = match n {
            1 => "model.safetensors".to_string(),
            _ => format!("model-{:05}-of-{n:05}.safetensors", i + 1),
        };
        let to = dst.join(&name);
        std::fs::rename(&*path, &to).map_err(io_at(&to))?;
        *path = to;
        for t in names.iter() {
            map.insert(t.clone(), Value::String(name.clone()));
        }
    }
    if n > 1 {
        let index = json!({"metadata": {}, "weight_map": map});
        let path = dst.join("model.safetensors.index.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&index).unwrap_or_default(),
        )
        .map_err(io_at(&path))?;
    }
    Ok(())
}

/// The source's config with mlx-lm's `quantization` (and `quantization_config`) block.
fn write_config(
    raw: &RawConfig,
    dst: &Path,
    default: Option<QuantSpec>,
    overrides: serde_json::Map<String, Value>,
) -> Result<()> {
    let mut config = raw.raw.clone();
    if let (Some(s), Some(obj)) = (default, config.as_object_mut()) {
        let mut q = json!({"group_size": s.group_size, "bits": s.bits, "mode": "affine"});
        if let Some(qo) = q.as_object_mut() {
            qo.extend(overrides);
        }
        obj.insert("quantization".into(), q.clone());
        obj.insert("quantization_config".into(), q);
    }
    let path = dst.join("config.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&config).unwrap_or_default() + "\n",
    )
    .map_err(io_at(&path))
}

/// The tokenizer, template and generation files: every plain file but the weights, their
/// index and the config.
fn copy_side_files(src: &Path, dst: &Path) -> Result<()> {
    for entry in std::fs::read_dir(src).map_err(io_at(src))? {
        let path = entry.map_err(io_at(src))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let skip = name == "config.json"
            || name.ends_with(".safetensors")
            || name.ends_with(".index.json")
            || name.starts_with('.');
        if path.is_file() && !skip {
            std::fs::copy(&path, dst.join(name)).map_err(io_at(&path))?;
        }
    }
    Ok(())
}
