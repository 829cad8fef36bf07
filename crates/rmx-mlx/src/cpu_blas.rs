//! What MLX's CPU backend multiplies float32 with. On Linux the pip runtime links netlib's
//! reference BLAS, a loop nest many times slower than tuned code, whose cost grows with every
//! row; rmx runs those products on kernels of its own instead, which compute every element in
//! one fixed order, so that an element never depends on the rows, columns or length of the
//! product around it (cpp/cpu_blas.cc says why no tuned BLAS does that).

use std::str::FromStr;

use crate::ffi::bridge;

/// Where float32 products on the CPU run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuBlas {
    /// rmx's row-stable kernels (the default on Linux).
    Rmx,
    /// The BLAS the MLX runtime links: netlib's reference one in the Linux wheel, Accelerate on
    /// macOS. What mlx-lm multiplies with, so comparisons with it can be bit for bit.
    Mlx,
}

impl FromStr for CpuBlas {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rmx" => Ok(Self::Rmx),
            "mlx" => Ok(Self::Mlx),
            other => Err(format!(
                "`{other}` is not a CPU BLAS rmx knows (rmx or mlx)"
            )),
        }
    }
}

/// Choose where float32 products on the CPU run from now on, for the whole process. No effect
/// on macOS, where MLX's own (Accelerate) always runs them.
pub fn set_cpu_blas(which: CpuBlas) {
    bridge::cpu_blas_select(which == CpuBlas::Mlx);
}

/// Where they run now.
pub fn cpu_blas() -> CpuBlas {
    if bridge::cpu_blas_is_mlx() {
        CpuBlas::Mlx
    } else {
        CpuBlas::Rmx
    }
}

/// The same in words, with the kernels' instruction set and threads (for `rmx doctor`).
pub fn cpu_blas_description() -> String {
    bridge::cpu_blas_describe()
}

/// How many products rmx's `cblas_sgemm` has taken in this process: it grows once MLX's CPU
/// backend multiplies float32, which shows the runtime's calls reach it.
pub fn cpu_blas_calls() -> u64 {
    bridge::cpu_blas_calls()
}
