//! The families rmx runs, keyed by the names HF configs use. To add a family: write its module
//! (serde `Config` + forward) and add one row here.

use std::path::Path;

use crate::config::RawConfig;
use crate::error::{ModelError, Result};
use crate::model::CausalLm;
use crate::weights::Weights;

type Loader = fn(&RawConfig, &mut Weights) -> Result<Box<dyn CausalLm>>;

/// (`model_type`s, `architectures`, loader). mlx-lm reads `mistral` as `llama`; so do we.
const FAMILIES: &[(&[&str], &[&str], Loader)] = &[
    (
        &["llama", "mistral"],
        &["LlamaForCausalLM", "MistralForCausalLM"],
        crate::llama::load,
    ),
    (&["qwen2"], &["Qwen2ForCausalLM"], crate::qwen2::load),
    (&["qwen3"], &["Qwen3ForCausalLM"], crate::qwen3::load),
    (
        &["qwen3_moe"],
        &["Qwen3MoeForCausalLM"],
        crate::qwen3_moe::load,
    ),
    (&["gpt_oss"], &["GptOssForCausalLM"], crate::gpt_oss::load),
    (
        &["qwen3_next"],
        &["Qwen3NextForCausalLM"],
        crate::qwen3_next::load,
    ),
    (
        &["qwen3_5", "qwen3_5_moe"],
        &[
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
        ],
        crate::qwen3_5::load,
    ),
    (
        &["gemma3_text"],
        &["Gemma3ForCausalLM"],
        crate::gemma3::load,
    ),
    (
        &["gemma3"],
        &["Gemma3ForConditionalGeneration"],
        crate::gemma3::load_multimodal,
    ),
    (
        &["gemma4"],
        &["Gemma4ForConditionalGeneration"],
        crate::gemma4::load_multimodal,
    ),
    (
        &["gemma4_text"],
        &["Gemma4ForCausalLM"],
        crate::gemma4::load,
    ),
    (&["phi3"], &["Phi3ForCausalLM"], crate::phi3::load),
    (&["smollm3"], &["SmolLM3ForCausalLM"], crate::smollm3::load),
    (
        &["mistral3"],
        &["Mistral3ForConditionalGeneration"],
        crate::mistral3::load,
    ),
];

/// Model types rmx can load, for messages and `rmx info`.
pub fn supported() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .flat_map(|(t, _, _)| t.iter().copied())
        .collect()
}

/// `architectures` names rmx loads when a config's `model_type` is none of [`supported`].
pub fn supported_architectures() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .flat_map(|(_, a, _)| a.iter().copied())
        .collect()
}

fn loader_for(cfg: &RawConfig) -> Option<Loader> {
    FAMILIES
        .iter()
        .find(|(types, _, _)| types.contains(&cfg.model_type.as_str()))
        .or_else(|| {
            FAMILIES.iter().find(|(_, archs, _)| {
                cfg.architectures
                    .iter()
                    .any(|a| archs.contains(&a.as_str()))
            })
        })
        .map(|(_, _, l)| *l)
}

/// Whether a config names a family rmx supports (no weights are read).
pub fn is_supported(dir: &Path) -> Result<bool> {
    Ok(loader_for(&RawConfig::read(dir)?).is_some())
}

/// Loads the model in `dir` (config.json + *.safetensors). Weights stay lazily mapped until the
/// first evaluation; every tensor is checked against the config's shapes.
pub fn load(dir: &Path) -> Result<Box<dyn CausalLm>> {
    let cfg = RawConfig::read(dir)?;
    let loader = loader_for(&cfg).ok_or_else(|| ModelError::Unsupported {
        model_type: if cfg.model_type.is_empty() {
            cfg.architectures.join(",")
        } else {
            cfg.model_type.clone()
        },
        supported: supported().join(", "),
    })?;
    // After the family: an unsupported one is reported as that, whatever its sizes.
    cfg.check_sizes()?;
    let mut w = Weights::load(dir)?;
    // Modules that cannot know the file (rope settings, expert counts) name "config.json".
    let model = loader(&cfg, &mut w).map_err(|e| match e {
        ModelError::Config { path, message } if path == Path::new("config.json") => {
            ModelError::Config {
                path: cfg.path.clone(),
                message,
            }
        }
        e => e,
    })?;
    w.finish()?;
    Ok(model)
}
