//! Reads GGUF files (llama.cpp's model format) and converts them into MLX-format model
//! directories that mlx-lm and rmx load: `config.json`, `model.safetensors` (bf16 or MLX
//! affine 4/8-bit), `tokenizer.json`, `tokenizer_config.json`, `generation_config.json`.
//!
//! ```no_run
//! use rmx_gguf::{convert, GgufFile, NoProgress, Quant};
//! # fn main() -> Result<(), rmx_gguf::GgufError> {
//! let gguf = GgufFile::open("model.gguf")?;
//! println!("{} with {} tensors", gguf.architecture()?, gguf.tensors().len());
//! let embed = gguf.tensor_f32("token_embd.weight")?;
//! convert("model.gguf".as_ref(), "out".as_ref(), Quant::Q4, &mut NoProgress)?;
//! # Ok(()) }
//! ```

mod arch;
mod config;
mod convert;
mod dequant;
mod error;
mod ggml_type;
mod metadata;
mod names;
mod plausible;
mod quantize;
mod reader;
mod safetensors_writer;
mod tokenizer;

pub use arch::Arch;
pub use config::{build_config, QuantConfig};
pub use convert::{convert, ConvertSummary, NoProgress, Progress, Quant, Reporter};
pub use dequant::dequantize;
pub use error::{GgufError, Result};
pub use ggml_type::GgmlType;
pub use metadata::MetaValue;
pub use quantize::{affine_dequantize, affine_quantize, Quantized, GROUP_SIZE};
pub use reader::{GgufFile, TensorInfo};
pub use tokenizer::{build_tokenizer, TokenizerFiles};
