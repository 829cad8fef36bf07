//! `rmx info`: what a model is, from its files (config.json, safetensors headers, tokenizer
//! config) plus the alias hints.

use std::path::PathBuf;

use serde::Serialize;

use crate::aliases::ModelHints;
use crate::error::{IoContext, StoreError, Unsupported};
use crate::list::{status, weight_files, ModelStatus};
use crate::model_config::{ModelConfig, Quantization};
use crate::params::{count_parameters, read_header, TensorInfo};
use crate::repo_id::RepoId;
use crate::resolve::ModelRef;
use crate::store::Store;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    pub name: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelInfo {
    pub name: String,
    /// `None` for a local directory.
    pub repo: Option<RepoId>,
    pub commit: Option<String>,
    /// The folder the engine loads: a snapshot in the cache, or the local directory.
    pub path: PathBuf,
    /// config.json `architectures[0]`, the key rmx-models dispatches on.
    pub architecture: Option<String>,
    /// config.json `model_type`: the model's family.
    pub model_type: Option<String>,
    /// Set when the engine of this rmx cannot load the family (`null` when it can, or when
    /// the store was not told what the engine loads).
    pub cannot_load: Option<Unsupported>,
    /// Counted from safetensors headers (packed quantized weights unpacked).
    pub parameters: Option<u64>,
    pub quantization: Option<Quantization>,
    pub dtype: Option<String>,
    /// config.json `max_position_embeddings`, else the alias hint.
    pub context_length: Option<u64>,
    pub hints: ModelHints,
    pub chat_template: bool,
    /// The checkpoint is a vision-language model (config.json has `vision_config`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub vision_tower: bool,
    /// Its files carry the vision tower in the layout rmx loads for its family: it takes
    /// images. A vision-language checkpoint without it runs its text model only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub takes_images: bool,
    /// Its files carry a multi-token-prediction head (`mtp.*`) of a family rmx guesses with
    /// (`--speculative mtp`): the Hub's own Qwen3.5/3.6 and Qwen3-Next checkpoints, and
    /// `rmx import` of one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mtp_head: bool,
    pub files: Vec<FileEntry>,
    /// Sum of the file sizes.
    pub size: u64,
    pub status: ModelStatus,
}

/// The families whose multi-token-prediction head rmx-models reads (mtp.rs).
const MTP_FAMILIES: &[&str] = &["qwen3_5", "qwen3_5_moe", "qwen3_next"];

impl Store {
    pub fn info(&self, name: &str) -> Result<ModelInfo, StoreError> {
        info(self, name)
    }
}

fn info(store: &Store, name: &str) -> Result<ModelInfo, StoreError> {
    let model = store.resolve(name)?;
    let alias_hints = model.hints();
    let (repo, commit, path, model_status) = match model {
        ModelRef::Local { path, .. } => {
            let complete = crate::list::weights_complete(&path);
            let model_status = if complete {
                ModelStatus::Complete
            } else {
                ModelStatus::Partial
            };
            (None, None, path, model_status)
        }
        ModelRef::Hub { repo, .. } => {
            let cache = store.cache();
            let Some((commit, dir)) = cache.current_snapshot(&repo)? else {
                return Err(StoreError::NotInStore {
                    name: name.to_string(),
                    repo: repo.to_string(),
                    cache: cache.root().to_path_buf(),
                });
            };
            let model_status = status(&cache.repo_dir(&repo), Some(&dir));
            (Some(repo), Some(commit), dir, model_status)
        }
    };
    let config_path = path.join("config.json");
    let config = if config_path.is_file() {
        ModelConfig::read(&config_path)?
    } else {
        ModelConfig::default()
    };
    let model_type = config.model_type();
    let cannot_load = store.families().check_config(&config).err();
    let hints = alias_hints.unwrap_or_else(|| ModelHints::guess(model_type.as_deref()));

    let mut parameters = None;
    let mut weights_dtype = None;
    let mut takes_images = false;
    let mut mtp_head = false;
    let weights = weight_files(&path)?;
    if !weights.is_empty() && model_status == ModelStatus::Complete {
        let mut tensors = std::collections::BTreeMap::new();
        for file in &weights {
            tensors.append(&mut read_header(file)?);
        }
        parameters = Some(count_parameters(&tensors, &config));
        mtp_head = tensors.contains_key("mtp.fc.weight")
            && MTP_FAMILIES.contains(&model_type.as_deref().unwrap_or_default());
        weights_dtype = float_dtype(&tensors);
        takes_images = config.has_vision()
            && VISION_TOWERS.iter().any(|(family, key)| {
                model_type.as_deref() == Some(*family) && tensors.contains_key(*key)
            });
    }

    let mut files = Vec::new();
    for entry in std::fs::read_dir(&path).at("list", &path)? {
        let entry = entry.at("list", &path)?;
        // Follows the snapshot symlink: the size is the blob's. A dangling link (partial
        // snapshot) is skipped.
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if meta.is_file() {
            files.push(FileEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                size: meta.len(),
            });
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));

    Ok(ModelInfo {
        name: name.to_string(),
        architecture: config.architecture(),
        context_length: config.context_length().or(hints.context_length),
        quantization: config.quantization(),
        // mlx-lm's own writers leave `torch_dtype` out; the weights say it then.
        dtype: config.dtype().or(weights_dtype),
        model_type,
        cannot_load,
        parameters,
        hints,
        chat_template: has_chat_template(&path),
        vision_tower: config.has_vision(),
        takes_images,
        mtp_head,
        size: files.iter().map(|f| f.size).sum(),
        files,
        repo,
        commit,
        path,
        status: model_status,
    })
}

/// Per family, the tensor whose presence says the files carry the vision tower in the layout
/// rmx loads (the names rmx-models' loaders check: gemma3.rs, mistral3.rs, qwen3_5.rs).
const VISION_TOWERS: &[(&str, &str)] = &[
    (
        "gemma3",
        "vision_tower.vision_model.embeddings.patch_embedding.weight",
    ),
    ("mistral3", "vision_tower.vision_model.patch_conv.weight"),
    ("qwen3_5", "vision_tower.patch_embed.proj.weight"),
    ("qwen3_5_moe", "vision_tower.patch_embed.proj.weight"),
    ("gemma4", "vision_tower.patch_embedder.input_proj.weight"),
];

/// The float type most of the weights' elements have, in config.json's words (`bfloat16`);
/// None when no float tensor is stored.
fn float_dtype(tensors: &std::collections::BTreeMap<String, TensorInfo>) -> Option<String> {
    let mut elements: std::collections::BTreeMap<&str, u64> = Default::default();
    for t in tensors.values() {
        *elements.entry(t.dtype.as_str()).or_default() += t.shape.iter().product::<u64>();
    }
    let (dtype, _) = elements
        .into_iter()
        .filter(|(d, _)| matches!(*d, "BF16" | "F16" | "F32"))
        .max_by_key(|(_, n)| *n)?;
    Some(
        match dtype {
            "BF16" => "bfloat16",
            "F16" => "float16",
            _ => "float32",
        }
        .to_string(),
    )
}

/// A template in its own file (newer transformers) or inside tokenizer_config.json (older).
fn has_chat_template(dir: &std::path::Path) -> bool {
    if dir.join("chat_template.jinja").is_file() || dir.join("chat_template.json").is_file() {
        return true;
    }
    std::fs::read(dir.join("tokenizer_config.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|json| json.get("chat_template").is_some_and(|t| !t.is_null()))
}
