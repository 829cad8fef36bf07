//! The families rmx runs, keyed by the names HF configs use. To add a family: write its module
//! (serde `Config` + forward) and add one row here.

use std::path::Path;

use crate::config::RawConfig;
use crate::embed::Embedder;
use crate::error::{ModelError, Result};
use crate::model::{CausalLm, ModelInfo};
use crate::parallel::Parallel;
use crate::weights::Weights;

pub(crate) type Loader = fn(&RawConfig, &mut Weights) -> Result<Box<dyn CausalLm>>;

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

/// Model types rmx can load, for messages and `rmx info`: the language models' and the
/// encoders'.
pub fn supported() -> Vec<&'static str> {
    FAMILIES
        .iter()
        .flat_map(|(t, _, _)| t.iter().copied())
        .chain(crate::embed::ENCODER_TYPES.iter().copied())
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
    let cfg = RawConfig::read(dir)?;
    Ok(
        loader_for(&cfg).is_some()
            || crate::embed::ENCODER_TYPES.contains(&cfg.model_type.as_str()),
    )
}

/// A loaded model of either kind.
pub enum Loaded {
    Causal(Box<dyn CausalLm>),
    Embedder(Box<dyn Embedder>),
}

impl Loaded {
    pub fn info(&self) -> &ModelInfo {
        match self {
            Loaded::Causal(m) => m.info(),
            Loaded::Embedder(m) => m.info(),
        }
    }
}

fn unsupported(cfg: &RawConfig) -> ModelError {
    ModelError::Unsupported {
        model_type: if cfg.model_type.is_empty() {
            cfg.architectures.join(",")
        } else {
            cfg.model_type.clone()
        },
        supported: supported().join(", "),
    }
}

/// Loads the language model in `dir` (config.json + *.safetensors). Weights stay lazily
/// mapped until the first evaluation; every tensor is checked against the config's shapes.
pub fn load(dir: &Path) -> Result<Box<dyn CausalLm>> {
    match load_any(dir)? {
        Loaded::Causal(m) => Ok(m),
        Loaded::Embedder(_) => Err(ModelError::Config {
            path: dir.join("config.json"),
            message: "this is an embedding model; it does not generate text".into(),
        }),
    }
}

/// The `model_type`s [`load_parallel`] can split either way: the dense decoders on llama.rs's
/// layer (Phi-3's fused projections by their runs of rows), Qwen3-MoE, GPT-OSS, and the hybrids (Qwen3-Next, Qwen3.5, Qwen3.5-MoE: their Gated
/// DeltaNet heads split as mlx-lm's `shard()`). The others' own layouts are not split yet.
pub const PARALLEL: &[&str] = &[
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "smollm3",
    "qwen3_moe",
    "gpt_oss",
    "phi3",
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_moe",
];

/// Loads this rank's share of the language model in `dir`, split over `p`'s group as its mode
/// says (parallel.rs): every rank of the group loads the same directory, reading only its own
/// part of the weights, and runs every forward pass in step with the others.
pub fn load_parallel(dir: &Path, p: Parallel) -> Result<Box<dyn CausalLm>> {
    match load_with(dir, Some(p))? {
        Loaded::Causal(m) => Ok(m),
        Loaded::Embedder(_) => Err(ModelError::Config {
            path: dir.join("config.json"),
            message: "this is an embedding model; it does not generate text".into(),
        }),
    }
}

/// Loads the model in `dir`, a language model or an embedding model
/// ([`crate::embed::is_embedding`] tells them apart).
pub fn load_any(dir: &Path) -> Result<Loaded> {
    load_with(dir, None)
}

fn load_with(dir: &Path, parallel: Option<Parallel>) -> Result<Loaded> {
    let cfg = RawConfig::read(dir)?;
    let embedding = crate::embed::is_embedding(dir, &cfg);
    let loader = loader_for(&cfg);
    let encoder = crate::embed::ENCODER_TYPES.contains(&cfg.model_type.as_str());
    if loader.is_none() && !encoder {
        return Err(unsupported(&cfg));
    }
    // After the family: an unsupported one is reported as that, whatever its sizes.
    cfg.check_sizes()?;
    let mut w = Weights::load(dir)?;
    if let Some(p) = parallel {
        if embedding || !PARALLEL.contains(&cfg.model_type.as_str()) {
            return Err(ModelError::Parallel {
                ranks: p.size(),
                message: format!(
                    "{} parallelism splits only these model types yet: {} (this is {}{})",
                    p.mode().name(),
                    PARALLEL.join(", "),
                    cfg.model_type,
                    if embedding {
                        ", an embedding model"
                    } else {
                        ""
                    }
                ),
            });
        }
        w.set_parallel(p);
    }
    // Modules that cannot know the file (rope settings, expert counts) name "config.json".
    let in_file = |e| match e {
        ModelError::Config { path, message } if path == Path::new("config.json") => {
            ModelError::Config {
                path: cfg.path.clone(),
                message,
            }
        }
        e => e,
    };
    let model = if embedding {
        Loaded::Embedder(crate::embed::load(dir, &cfg, &mut w, loader).map_err(in_file)?)
    } else {
        let loader = loader.ok_or_else(|| unsupported(&cfg))?;
        Loaded::Causal(loader(&cfg, &mut w).map_err(in_file)?)
    };
    w.finish()?;
    Ok(model)
}
