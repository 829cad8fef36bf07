//! rmx's inference engine: an actor thread per model that owns its MLX arrays, runs the
//! sequences submitted to it (prefill in chunks, decode with the next step always queued),
//! samples on the device, and streams text, token ids, logprobs and usage back.

mod batch;
pub mod bench;
pub mod checkup;
pub mod doorbell;
pub mod draft;
pub mod embed;
mod engine;
mod error;
mod family;
pub mod group;
mod group_prefill;
pub mod image_cost;
mod image_input;
mod images;
mod load;
mod mirror;
pub mod mtp;
mod prefix_cache;
mod prefix_disk;
mod prompt;
mod request;
pub mod rerank;
pub mod sampler;
mod sequence;
pub mod speculative;
mod thought;
mod trace;
pub mod verify_cost;

pub use engine::{Engine, EngineOptions};
pub use error::{explain_device_error, EngineError, Result};
pub use family::{check_family, model_kind, supported_architectures, supported_model_types};
pub use image_input::ImageInput;
pub use prompt::ChatPrompt;
pub use request::{
    Event, FinishReason, GenerateRequest, SamplingParams, Timings, TokenLogprob, Usage,
};
pub use rmx_models::cache::KvQuant;
pub use rmx_models::{ModelError, ModelKind, Parallel, ParallelMode};
pub use rmx_text::constrain::{
    Compiled, Constraint, ConstraintError, Output as ConstraintOutput, Think, Tool, ToolMode,
};
pub use sequence::PREFILL_CHUNK;
pub use speculative::Speculation;
pub use thought::ThoughtBudget;
