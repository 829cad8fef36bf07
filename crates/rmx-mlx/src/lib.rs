//! rmx's bridge to MLX: the only crate that touches MLX, C++ or `unsafe`.
//!
//! * MLX is bound through `cxx` against MLX's own runtime (libmlx + headers from the PyPI
//!   wheels, Homebrew, or `MLX_DIR`); `build/` finds it and docs/mlx-bridge.md says how.
//! * Every C++ exception becomes an [`Error`] naming the operation; nothing aborts.
//! * Thread safety is enforced by types: [`Array`], [`Compiled`] and [`Kernel`] are neither
//!   `Send` nor `Sync`, so the arrays of a model live and die on its engine thread. Evaluation
//!   takes a process-wide lock because MLX's scheduler is global (`eval_lock.rs`).
//! * Several processes (ranks) run one model through MLX's distributed layer
//!   ([`distributed::Group`]); a group handle may move between threads, its arrays may not.

mod array;
mod compile;
mod cpu_blas;
mod device;
mod dtype;
mod error;
mod eval;
mod eval_lock;
mod ffi;
mod kernel;
mod memory;
mod ops;

pub mod distributed;
pub mod fast;
pub mod io;
pub mod quant;
pub mod random;

pub use array::Array;
pub use compile::{compile, Compiled};
pub use cpu_blas::{cpu_blas, cpu_blas_calls, cpu_blas_description, set_cpu_blas, CpuBlas};
pub use device::{
    backend, cuda_shared_memory_optin, cuda_sm_count, default_device, device_info_json,
    gpu_available, mlx_version, runtime_defaults, set_default_device, synchronize, Backend,
    DeviceType, BUILD_MLX_LIBDIR, BUILD_MLX_VERSION,
};
pub use dtype::{Dtype, Element};
pub use error::{Error, Result};
pub use eval::{async_eval, eval};
pub use kernel::{Kernel, KernelLang, Launch, TemplateArg};
pub use memory::{
    active_memory, cache_memory, clear_cache, peak_memory, reset_peak_memory, set_cache_limit,
    set_memory_limit,
};
pub use ops::{addmm, concatenate, gather_mm, r#where, stack};

pub use half::{bf16, f16};
