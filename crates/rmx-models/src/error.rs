//! Loading errors name the file and tensor, so a broken download reads as such.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("model type {model_type:?} is not supported (rmx knows: {supported})")]
    Unsupported {
        model_type: String,
        supported: String,
    },
    #[error("{dir}: no *.safetensors weight files")]
    NoWeights { dir: PathBuf },
    #[error("tensor {name} is missing from the weights ({files})")]
    MissingTensor { name: String, files: String },
    #[error("tensor {name} in {file} has shape {got:?}, expected {want:?}")]
    Shape {
        name: String,
        file: PathBuf,
        got: Vec<i32>,
        want: Vec<i32>,
    },
    #[error("tensor {name} in {file} is not used by this model (wrong config or files from another model?)")]
    Extra { name: String, file: PathBuf },
    #[error("loading {file}: {source}")]
    Load {
        file: PathBuf,
        #[source]
        source: rmx_mlx::Error,
    },
    /// The model cannot be split over this many ranks the way it was asked to be.
    #[error("splitting the model over {ranks} ranks: {message}")]
    Parallel { ranks: i32, message: String },
    /// Caches that cannot be decoded together (different kinds of layer, or a kind that does
    /// not batch): the engine's bug, never the user's.
    #[error("cannot batch these caches: {0}")]
    Batch(String),
    /// A quantized KV cache asked for with settings MLX cannot store, or for a layer that
    /// cannot read one.
    #[error("quantized KV cache: {0}")]
    KvQuant(String),
    /// Images given to a model that takes none, or that do not fit its prompt.
    #[error("images: {0}")]
    Images(String),
    /// MTP guesses asked of a model whose checkpoint has no such head (its model type).
    #[error("{0} has no multi-token-prediction head (mtp.*) in its weights")]
    NoMtp(String),
    #[error(transparent)]
    Mlx(#[from] rmx_mlx::Error),
}

pub type Result<T> = std::result::Result<T, ModelError>;

/// `map_err` for I/O on `path`: the error names the file.
pub(crate) fn io_at(path: &std::path::Path) -> impl Fn(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    }
}
