//! Devices and the live backend. MLX picks the backend when it is built (the runtime rmx links
//! against: CPU, CUDA or Metal); rmx only asks which one it got.

use crate::error::{check, Result};
use crate::ffi::bridge;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Metal,
    Cuda,
    Cpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Metal => "metal",
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }
}

/// MLX settings rmx picks where the user has not. Call first thing in `main`, before any thread
/// starts: they are environment variables, which MLX reads once, from C++.
///
/// `MLX_MAX_OPS_PER_BUFFER`: MLX's CUDA backend launches a CUDA graph once 100 ops are encoded
/// (its H100 default), so the GPU waits for the first 100 of a prompt chunk's ~340 before it
/// starts. At 20, measured on the H100 (docs/perf.md row 25), Qwen3-0.6B 4-bit prefill@2K rose
/// from 139K to 168K tok/s with decode unchanged. Not on macOS: the Metal backend reads the same
/// variable, with defaults per chip of its own.
///
/// `MLX_PTX_CACHE_DIR`: where MLX's CUDA backend keeps the kernels NVRTC compiled (rmx's and its
/// own). Its default is under the temporary folder, which a reboot empties, and a model's first
/// tokens then wait for every kernel to compile again (3-6 minutes for Qwen3.5 or GPT-OSS on an
/// H100, docs/perf.md session 18). rmx keeps them in `cache_dir/cuda-kernels/mlx-<version>`
/// (`cache_dir` is `$RMX_HOME/cache`); one folder a machine, as MLX's own is.
pub fn runtime_defaults(cache_dir: Option<&std::path::Path>) {
    if cfg!(target_os = "macos") {
        return;
    }
    if std::env::var_os("MLX_MAX_OPS_PER_BUFFER").is_none() {
        std::env::set_var("MLX_MAX_OPS_PER_BUFFER", "20");
    }
    if let (None, Some(dir)) = (std::env::var_os("MLX_PTX_CACHE_DIR"), cache_dir) {
        let kernels = dir
            .join("cuda-kernels")
            .join(format!("mlx-{BUILD_MLX_VERSION}"));
        std::env::set_var("MLX_PTX_CACHE_DIR", kernels);
    }
}

/// The backend this process runs on: the GPU one when the linked runtime has a usable GPU.
pub fn backend() -> Backend {
    if bridge::metal_available() {
        Backend::Metal
    } else if bridge::cuda_available() {
        Backend::Cuda
    } else {
        Backend::Cpu
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    Cpu,
    Gpu,
}

pub fn default_device() -> DeviceType {
    if bridge::default_device_type() == 1 {
        DeviceType::Gpu
    } else {
        DeviceType::Cpu
    }
}

/// Makes `d` the device new ops run on (for the whole process).
pub fn set_default_device(d: DeviceType) -> Result<()> {
    check(
        "set_default_device",
        bridge::set_default_device(matches!(d, DeviceType::Gpu) as u8),
    )
}

pub fn gpu_available() -> bool {
    bridge::gpu_available()
}

/// Waits for all queued work on every stream.
pub fn synchronize() -> Result<()> {
    let _g = crate::eval_lock::lock();
    check("synchronize", bridge::synchronize())
}

/// MLX's description of a device as a JSON object (device name, memory size, ...).
pub fn device_info_json(d: DeviceType) -> Result<String> {
    check(
        "device_info",
        bridge::device_info_json(matches!(d, DeviceType::Gpu) as u8),
    )
}

/// The number of streaming multiprocessors of CUDA device 0, from the driver; `None` without a
/// CUDA driver. Kernels that synchronize across their whole grid size it by this.
pub fn cuda_sm_count() -> Option<i32> {
    static N: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let n = *N.get_or_init(bridge::cuda_sm_count);
    (n > 0).then_some(n)
}

/// The most shared memory, in bytes, one block of a kernel on CUDA device 0 may opt into (227 KB
/// on an H100, 163 KB on an A100); `None` without a CUDA driver.
pub fn cuda_shared_memory_optin() -> Option<i32> {
    static N: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let n = *N.get_or_init(bridge::cuda_shared_memory_optin);
    (n > 0).then_some(n)
}

/// The version of the libmlx this process runs against.
pub fn mlx_version() -> String {
    bridge::version()
}

/// The version whose headers this crate was built with.
pub const BUILD_MLX_VERSION: &str = env!("RMX_MLX_BUILD_VERSION");

/// Where the build found libmlx (the rpath binaries carry).
pub const BUILD_MLX_LIBDIR: &str = env!("RMX_MLX_LIBDIR");
