//! Model names and the on-disk store for rmx.
//!
//! - Names: built-in aliases (`data/aliases.toml`, compiled in) and user aliases
//!   (`$RMX_HOME/aliases.toml`) resolve to Hugging Face repo ids; `owner/name` and local model
//!   directories work too ([`Store::resolve`]).
//! - The store *is* the Hugging Face hub cache (`HF_HUB_CACHE`, `HF_HOME/hub`,
//!   `~/.cache/huggingface/hub`), so models fetched by mlx-lm or `hf download` are reused and
//!   the other way round ([`cache`]).
//! - [`Store::pull`] downloads what the engine needs, in parallel, resumable, verified, and
//!   reports [`PullEvent`]s to a [`Reporter`]; drawing them is the CLI's business.
//! - [`Store::list`], [`Store::remove`], [`Store::info`] return plain serializable structs;
//!   [`Store::local_models`] lists the folders user aliases name (imported models among them).
//! - [`Families`]: which model families the engine loads, handed in by the binary, so a pull
//!   refuses and `info` / `list` mark what would not load.
//!
//! No MLX here, and no `unsafe`.

pub mod aliases;
pub mod cache;
mod config;
mod disk;
mod error;
mod families;
mod hub_api;
mod info;
mod list;
mod local;
mod model_config;
mod params;
mod progress;
mod pull;
mod repo_id;
mod resolve;
mod store;
mod transfer;

pub use aliases::{Alias, AliasRegistry, AliasSource, ModelHints, ReasoningParser, ToolParser};
pub use cache::HubCache;
pub use config::{StoreConfig, DEFAULT_ENDPOINT};
pub use disk::{available_space, human_bytes, FreeSpaceFn};
pub use error::{StoreError, Unsupported};
pub use families::Families;
pub use info::{FileEntry, ModelInfo};
pub use list::{ModelEntry, ModelStatus, Removed};
pub use local::folder_size;
pub use model_config::Quantization;
pub use progress::{NoProgress, PlannedFile, PullEvent, Reporter};
pub use pull::Pulled;
pub use repo_id::RepoId;
pub use resolve::{resolve, ModelRef};
pub use store::Store;
