//! Engine errors: what failed to load, or why a request was refused.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Model(#[from] rmx_models::ModelError),
    #[error("{dir}: {source}")]
    Tokenizer {
        dir: PathBuf,
        #[source]
        source: rmx_text::tokenizer::TokenizerError,
    },
    #[error("chat template: {0}")]
    Template(#[from] rmx_text::template::TemplateError),
    #[error("{0} has no chat template; send a raw prompt instead")]
    NoTemplate(PathBuf),
    #[error("tokenizing the prompt: {0}")]
    Encode(#[source] rmx_text::tokenizer::TokenizerError),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {prompt} tokens but the model's context is {context}")]
    PromptTooLong { prompt: usize, context: usize },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("this is an embedding or reranking model: it makes vectors or scores, not text")]
    NotGenerative,
    #[error("this model is not a reranker (load one that scores query-document pairs, such as Qwen3-Reranker)")]
    NotReranker,
    #[error("this model generates text; it does not make embeddings (load an embedding model: a BERT-family encoder or Qwen3-Embedding)")]
    NotEmbedding,
    #[error("the engine thread has stopped")]
    Stopped,
    /// A generation that started and failed on the way (a device error, a lost rank).
    #[error("generation failed: {0}")]
    Generation(String),
    /// The group of ranks a split model runs on: a rank that ended, a word that did not
    /// cross.
    #[error("{0}")]
    Group(String),
    #[error("constrained output: {0}")]
    Constraint(#[from] rmx_text::constrain::ConstraintError),
    #[error(transparent)]
    Mlx(#[from] rmx_mlx::Error),
}

pub type Result<T> = std::result::Result<T, EngineError>;

/// A device error's text with what to do when it is the device running out of memory (CUDA's
/// "out of memory", Metal's "Insufficient Memory" or buffer-size refusal, the host's
/// `bad_alloc`), which MLX reports in words no user can act on; other texts come back as they
/// are. Measured: a 100 GB model on one 80 GB H100 failed with `cudaMallocAsync(...) failed:
/// out of memory` and nothing else (docs/distributed.md).
pub fn explain_device_error(text: String) -> String {
    const SIGNS: [&str; 5] = [
        "out of memory",
        "OutOfMemory",
        "Insufficient Memory",
        "maximum allowed buffer size",
        "bad_alloc",
    ];
    if !SIGNS.iter().any(|s| text.contains(s)) {
        return text;
    }
    format!(
        "the device ran out of memory ({text}): the model and its caches need more than it has; \
         use a smaller quantization, fewer sequences at once (RMX_MAX_BATCH) or shorter \
         prompts, or split the model over several GPUs or machines (rmx launch; \
         docs/distributed.md)"
    )
}

#[cfg(test)]
mod tests {
    use super::explain_device_error;

    #[test]
    fn out_of_memory_says_what_to_do_and_other_errors_pass_through() {
        let cuda = "MLX eval: cudaMallocAsync(&data, size, stream) failed: out of memory";
        let said = explain_device_error(cuda.to_string());
        assert!(
            said.starts_with("the device ran out of memory (MLX eval"),
            "{said}"
        );
        assert!(said.contains("rmx launch"), "{said}");
        let metal = "[METAL] Command buffer execution failed: Insufficient Memory";
        assert!(explain_device_error(metal.into()).contains("RMX_MAX_BATCH"));
        let other = "MLX eval: [matmul] shapes (1,4) and (5,4) cannot be multiplied";
        assert_eq!(explain_device_error(other.into()), other);
    }
}
