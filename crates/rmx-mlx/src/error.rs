//! Every C++ exception becomes an `Error` naming the operation that raised it, so a failure deep
//! in a forward pass reads "MLX matmul: shapes (1,64) and (32,16) ..." rather than a bare string.

/// What went wrong in MLX or at the bridge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// MLX threw while running `op`.
    #[error("MLX {op}: {message}")]
    Mlx { op: &'static str, message: String },
    /// A distributed group could not start or reach its peers; the message says what to check.
    #[error("MLX {op}: {message}")]
    Distributed { op: &'static str, message: String },
    /// Arguments were rejected on the Rust side before reaching MLX.
    #[error("{op}: {message}")]
    Invalid { op: &'static str, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn check<T>(op: &'static str, r: std::result::Result<T, cxx::Exception>) -> Result<T> {
    r.map_err(|e| Error::Mlx {
        op,
        message: e.what().to_string(),
    })
}

pub(crate) fn invalid<T>(op: &'static str, message: impl Into<String>) -> Result<T> {
    Err(Error::Invalid {
        op,
        message: message.into(),
    })
}
