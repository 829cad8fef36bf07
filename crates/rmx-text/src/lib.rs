//! The text side of rmx: everything between bytes and token ids that needs no MLX.
//!
//! Kept apart from `rmx-engine` so it builds and tests without the MLX runtime, and so the
//! server can parse and render without touching the engine thread.

pub mod constrain;
pub mod detok;
pub mod harmony;
pub mod image_prompt;
mod parsed_tokenizers;
pub mod prompt_limit;
pub mod reasoning;
pub mod stop;
pub mod template;
pub mod tokenizer;
pub mod toolcall;
