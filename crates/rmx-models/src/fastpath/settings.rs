//! The fast path's choices, made once per process (the backend cannot change under a running
//! engine): the backend, and the knobs from rmx-settings' table, read when the first model
//! loads.

use std::sync::OnceLock;

use rmx_mlx::Backend;
use rmx_settings::EnvVars;

/// The most rows `qgemm_rows` takes by default (a batch's decode step); past it MLX's quantized
/// matmul (tensor cores) or the dequantized prefill runs. Its products run on CUDA cores: at 32
/// rows an 8B model's step is ~240 G multiply-adds, where they stop paying.
pub(super) const QGEMM_MAX_ROWS: usize = 32;

/// The choices, made once per process: the backend cannot change under a running engine.
#[derive(Debug, Clone, Copy)]
pub struct FastPath {
    /// rmx's GEMV kernels for single-row products (and fused projections).
    pub kernels: bool,
    pub rows_per_warp: i32,
    /// Dequantize + dense matmul from this many rows on.
    pub dequant_prefill_rows: Option<usize>,
    /// Contexts up to this many positions decode through `decode_attention` (`RMX_FAST_ATTN_MAX`,
    /// default 1,024): one block of 32 warps a head reads positions one after another, which
    /// past ~4K loses to MLX's two-pass attention.
    pub attn_max: i32,
    /// A dense layer's residual add as one cuBLAS call (beta = 1) for single rows too; off by
    /// default since MLX runs a one-row product as its own GEMV kernel, not cuBLAS.
    pub decode_addmm: bool,
    /// Blocks of the one-launch decoder layer (decode_layer.rs): one per SM, from the driver;
    /// `None` turns that kernel off.
    pub layer_blocks: Option<i32>,
    /// Consecutive decoder layers per launch of the layer kernel (`RMX_LAYERS_PER_LAUNCH`, 1-32).
    pub layers_per_launch: usize,
    /// The layer kernel's products as integer dot products on x staged in 8-bit planes
    /// (`RMX_LAYER_IDOT`, default on); float products otherwise.
    pub layer_idot: bool,
    /// A batch's decode step through the layer kernel's rows variant (`RMX_LAYER_ROWS`, default
    /// on with integer products; 0 runs a batch op by op).
    pub layer_rows: bool,
    /// A speculative verify's block (2-16 consecutive tokens of one sequence) through the rows
    /// kernel, each position with the sums a decode step there makes alone
    /// (`RMX_LAYER_BLOCK`, default on; 0 reads a block op by op). On the H200 it gave the plain
    /// decoding's text and cost 1.64x a decode step for one guess against 2.95x op by op.
    pub layer_block: bool,
    /// A verify block's rows of equal splits share each position's key and value loads
    /// (`RMX_LAYER_BLOCK_SHARE=1`; off by default: measured slower, session 31).
    pub layer_block_share: bool,
    /// A batch's decode step takes its 4-bit products on bf16 tensor cores
    /// (`RMX_LAYER_ROWS_MMA=1`, kernels/layer_rows_mma.cuh): within bf16 rounding of a row's
    /// answer alone, not bit-equal. Off by default: its first form gave 1.43x at 32 rows on the
    /// H100 (session 32), but batch invariance is exact without it, and its present form
    /// (session 33) and 4 rows are not yet measured.
    pub layer_rows_mma: bool,
    /// The rows kernel reads the GPU's clock at its phases and each launch prints where its time
    /// went (`RMX_LAYER_TIMES=1`; waits for every step: for measuring only).
    pub layer_times: bool,
    /// A decode step's embedding rows and greedy choice as one kernel each (`RMX_FUSED_TAIL`:
    /// `Some(on)` when set, `None` leaves it to the model's size, `fused_tail`).
    pub fused_tail: Option<bool>,
    /// Dequantize for prefill only from this many multiply-adds on (`RMX_DEQUANT_PREFILL_WORK`).
    pub dequant_prefill_work: u64,
    /// A prompt chunk's q/k/v heads from the fused QKV product in one kernel
    /// (`RMX_PREFILL_HEADS`, default on).
    pub prefill_heads: bool,
    /// Products of 2 up to this many rows (a batch's decode step) through `qgemm_rows`
    /// (`RMX_QGEMM_ROWS`, default 32; 1 leaves them to MLX).
    pub qgemm_max_rows: usize,
    /// A Gated DeltaNet layer's decode step as one kernel after one joined input projection
    /// (`RMX_DELTA_STEP`, default on).
    pub delta_step: bool,
    /// Attention by explicit products for a few queries and beside sinks (`RMX_PRODUCT_ATTN`;
    /// default with the CUDA fast path, where MLX's fused attention is built per shape).
    pub product_attn: bool,
    /// With it, attentions of up to this many scores (batch x heads x queries x keys) of any
    /// number of queries go by products too (`RMX_PRODUCT_ATTN_SCORES`, default 0).
    pub product_attn_scores: i64,
    /// A MoE layer's router choice for one token as one kernel (`RMX_MOE_ROUTE`, default on).
    pub moe_route: bool,
    /// A MoE layer's experts (router, choice, gate/up, down, shared expert) as three phases of
    /// the layer kernel (`RMX_LAYER_MOE`, default on); 0 runs them as four to nine launches
    /// after it.
    pub layer_moe: bool,
    /// mxfp4 products in the layer kernel, `RMX_LAYER_MXFP4`: `1` float products on x staged
    /// as floats, as MLX's own; `2` integer products on its 8-bit planes; `3` / `4` float
    /// products for the attention launches only / the experts only, to tell which drifts.
    /// Default off: it failed the logits check on GPT-OSS (docs/perf.md, session 24).
    /// Here: the attention (mixer) launches' products may be mxfp4 (1-3).
    pub layer_mxfp4_attn: bool,
    /// The experts' products may be mxfp4 (`RMX_LAYER_MXFP4` 1, 2 or 4).
    pub layer_mxfp4_experts: bool,
    /// The mxfp4 products are integer (`RMX_LAYER_MXFP4=2`, with `layer_idot`).
    pub layer_mxfp4_idot: bool,
}

/// A knob's number; one that is unset or not a number leaves the default.
fn env_num(name: &str) -> Option<usize> {
    rmx_settings::number(name).ok().flatten()
}

pub fn fast_path() -> FastPath {
    static PATH: OnceLock<FastPath> = OnceLock::new();
    *PATH.get_or_init(|| {
        let on =
            rmx_mlx::backend() == Backend::Cuda && !rmx_settings::is_zero(EnvVars::RMX_FAST_PATH);
        FastPath {
            kernels: on,
            rows_per_warp: env_num(EnvVars::RMX_QGEMV_ROWS).map_or(2, |r| r.clamp(1, 8) as i32),
            dequant_prefill_rows: match env_num(EnvVars::RMX_DEQUANT_PREFILL_ROWS) {
                _ if !on => None,
                Some(0) => None,
                Some(n) => Some(n),
                None => Some(512),
            },
            // Measured on the H100 (Qwen3-0.6B bf16, decode tok/s after a prompt of 2K / 4K /
            // 8K positions): this kernel 313 / 234 / 171, MLX's attention 203 / 141 / 233. 4,096
            // waits on a measurement of Llama-3-8B bf16's prefill@2K, whose first decode step
            // would move to this kernel (docs/perf.md, session 7).
            attn_max: env_num(EnvVars::RMX_FAST_ATTN_MAX).map_or(1024, |n| n.min(1 << 20) as i32),
            decode_addmm: env_num(EnvVars::RMX_DECODE_ADDMM) == Some(1),
            layer_blocks: match env_num(EnvVars::RMX_LAYER_KERNEL) {
                _ if !on => None,
                Some(0) => None,
                _ => rmx_mlx::cuda_sm_count(),
            },
            layer_idot: env_num(EnvVars::RMX_LAYER_IDOT) != Some(0),
            layer_rows: env_num(EnvVars::RMX_LAYER_ROWS) != Some(0),
            layer_block: env_num(EnvVars::RMX_LAYER_BLOCK) != Some(0),
            layer_block_share: env_num(EnvVars::RMX_LAYER_BLOCK_SHARE) == Some(1),
            layer_rows_mma: env_num(EnvVars::RMX_LAYER_ROWS_MMA) == Some(1),
            layer_times: env_num(EnvVars::RMX_LAYER_TIMES) == Some(1),
            fused_tail: env_num(EnvVars::RMX_FUSED_TAIL).map(|n| n != 0),
            layers_per_launch: env_num(EnvVars::RMX_LAYERS_PER_LAUNCH)
                .map_or(32, |n| n.clamp(1, 32)),
            dequant_prefill_work: env_num(EnvVars::RMX_DEQUANT_PREFILL_WORK)
                .map_or(1 << 32, |w| w as u64),
            prefill_heads: on && env_num(EnvVars::RMX_PREFILL_HEADS) != Some(0),
            qgemm_max_rows: env_num(EnvVars::RMX_QGEMM_ROWS).unwrap_or(QGEMM_MAX_ROWS),
            delta_step: on && env_num(EnvVars::RMX_DELTA_STEP) != Some(0),
            product_attn: env_num(EnvVars::RMX_PRODUCT_ATTN).map_or(on, |n| n != 0),
            product_attn_scores: env_num(EnvVars::RMX_PRODUCT_ATTN_SCORES)
                .map_or(0, |n| n.min(1 << 40) as i64),
            moe_route: on && env_num(EnvVars::RMX_MOE_ROUTE) != Some(0),
            layer_moe: on && env_num(EnvVars::RMX_LAYER_MOE) != Some(0),
            layer_mxfp4_attn: on && matches!(env_num(EnvVars::RMX_LAYER_MXFP4), Some(1..=3)),
            layer_mxfp4_experts: on && matches!(env_num(EnvVars::RMX_LAYER_MXFP4), Some(1 | 2 | 4)),
            layer_mxfp4_idot: env_num(EnvVars::RMX_LAYER_MXFP4) == Some(2),
        }
    })
}

/// The smallest hidden size whose decode steps take the fused tail by default: on the H100 it
/// took Llama-3-8B 4-bit (4,096) from 394.8 to 400.4 tok/s but Qwen3-0.6B 4-bit (1,024) from
/// 1,159 to ~1,040 tok/s, why not yet known (docs/perf.md, session 29).
const FUSED_TAIL_MIN_HIDDEN: i32 = 4096;

thread_local! {
    // The engine thread's model's hidden size (`set_model_hidden`); 0 before one is set.
    static MODEL_HIDDEN: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Tells this engine thread's kernels the size of the model it serves (the engine calls it
/// before the first step): `fused_tail` decides by it.
pub fn set_model_hidden(hidden: i32) {
    MODEL_HIDDEN.with(|h| h.set(hidden));
}

/// Whether this thread's decode steps take the fused embedding rows and greedy choice.
pub fn fused_tail() -> bool {
    let p = fast_path();
    tail_choice(p.kernels, p.fused_tail, MODEL_HIDDEN.with(|h| h.get()))
}

/// `fused_tail` from the fast path's state, the knob and the model's hidden size.
fn tail_choice(kernels: bool, knob: Option<bool>, hidden: i32) -> bool {
    kernels && knob.unwrap_or(hidden >= FUSED_TAIL_MIN_HIDDEN)
}

#[cfg(test)]
mod tests {
    use super::tail_choice;

    #[test]
    fn the_fused_tail_follows_the_knob_else_the_model_size_and_never_leaves_the_fast_path() {
        assert!(tail_choice(true, None, 4096));
        assert!(!tail_choice(true, None, 1024));
        assert!(!tail_choice(true, None, 0), "no model told: the ops");
        assert!(tail_choice(true, Some(true), 1024));
        assert!(!tail_choice(true, Some(false), 8192));
        assert!(
            !tail_choice(false, Some(true), 8192),
            "off the CUDA fast path: the ops"
        );
    }
}
