//! `RMX_LAYER_TIMES=1`: where a batch's step spends its time inside the rows kernel. The kernel
//! is compiled with `RMX_ROWS_TIMES` (kernels/layer_rows.cuh): block 0 reads the GPU's clock as
//! it starts and as it leaves each phase's wait, every block as it finishes, into slots after the
//! scratch regions. Reading them back waits for the step, so this is for measuring, not serving:
//! each launch prints one stderr line with each phase kind's time summed over the layers.

use rmx_mlx::Array;

use super::Rows;
use crate::error::Result;

/// Phases a dense layer has in the kernel (kernels/layer.cuh's LAYER_PHASES).
pub(super) const PHASES: i32 = 5;

const NAMES: [&str; PHASES as usize] = ["qkv", "attention", "out", "gate_up", "down"];

/// The header line the rows kernel's source gets when the clocks are on.
pub(super) const DEFINE: &str = "#define RMX_ROWS_TIMES 1\n";

/// Each phase kind's µs summed over the layers, from the clocks (ns): `clocks[0]` the start,
/// `clocks[p + 1]` the end of phase p (block 0 leaving its wait; the last: the latest finish).
fn per_kind(clocks: &[u64], layers: usize, blocks: usize) -> [f64; PHASES as usize] {
    let phases = PHASES as usize * layers;
    let end = clocks[phases..phases + blocks]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    let mut sums = [0.0; PHASES as usize];
    for p in 0..phases {
        let (from, to) = (clocks[p], if p + 1 < phases { clocks[p + 1] } else { end });
        sums[p % PHASES as usize] += to.saturating_sub(from) as f64 / 1e3;
    }
    sums
}

/// Reads the clocks of the launch whose scratch output is `scratch` (slots from float `at`) and
/// prints them.
pub(super) fn report(
    scratch: &Array,
    at: i32,
    layers: usize,
    blocks: i32,
    rows: i32,
    kind: Rows,
) -> Result<()> {
    let words = 2 * (PHASES * layers as i32 + blocks);
    let raw = scratch.slice(&[at], &[at + words], &[1])?.to_vec::<f32>()?;
    let clocks: Vec<u64> = raw
        .chunks(2)
        .map(|w| u64::from(w[0].to_bits()) | (u64::from(w[1].to_bits()) << 32))
        .collect();
    let sums = per_kind(&clocks, layers, blocks as usize);
    let total: f64 = sums.iter().sum();
    let parts: Vec<String> = NAMES
        .iter()
        .zip(sums)
        .map(|(name, us)| format!("{name}={us:.1}"))
        .collect();
    eprintln!(
        "layer times rows={rows} kind={kind:?} layers={layers} {} total={total:.1}us",
        parts.join(" ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::per_kind;

    #[test]
    fn each_kind_sums_its_phases_over_the_layers_and_the_last_ends_at_the_latest_finish() {
        // Two layers: phases 0..9 end at 10, 20, ..., the last at the latest block's finish.
        let mut clocks: Vec<u64> = (0..10).map(|i| 1_000 + i * 10_000).collect();
        clocks.extend([95_000, 101_000, 99_000]);
        let sums = per_kind(&clocks, 2, 3);
        assert_eq!(sums, [20.0, 20.0, 20.0, 20.0, 10.0 + 10.0]);
    }
}
