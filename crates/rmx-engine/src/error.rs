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
    #[error("constrained output: {0}")]
    Constraint(#[from] rmx_text::constrain::ConstraintError),
    #[error(transparent)]
    Mlx(#[from] rmx_mlx::Error),
}

pub type Result<T> = std::result::Result<T, EngineError>;
