//! The GGUF architectures this crate converts, and what each is called on the HF / mlx-lm side.

/// A supported `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

impl Arch {
    pub fn from_gguf(name: &str) -> Option<Self> {
        Some(match name {
            "llama" => Self::Llama,
            "qwen2" => Self::Qwen2,
            "qwen3" => Self::Qwen3,
            "gemma3" => Self::Gemma3,
            _ => return None,
        })
    }

    /// The prefix of this architecture's metadata keys (`llama.block_count`, ...).
    pub fn gguf_name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma3 => "gemma3",
        }
    }

    /// config.json's `model_type`: the mlx-lm module that loads it. Gemma 3's text-only model
    /// is `gemma3_text`; plain `gemma3` is the vision wrapper.
    pub fn model_type(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma3 => "gemma3_text",
        }
    }

    /// config.json's `architectures` entry.
    pub fn hf_class(self) -> &'static str {
        match self {
            Self::Llama => "LlamaForCausalLM",
            Self::Qwen2 => "Qwen2ForCausalLM",
            Self::Qwen3 => "Qwen3ForCausalLM",
            Self::Gemma3 => "Gemma3ForCausalLM",
        }
    }
}
