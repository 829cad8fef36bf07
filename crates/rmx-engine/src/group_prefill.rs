//! New prompts that arrive together are prefilled in one forward: left-padded to the longest
//! into one batch cache (rmx_models::batch_cache), then each sequence takes its own row back as
//! a solo cache and joins the decode batch. Thirty-two 64-token prompts are then one 2K-row
//! forward instead of thirty-two small ones, each of which would wait for the others.
//!
//! Only for models whose layers all cut back (full attention): a recurrent state would fold the
//! padding in.

use rmx_mlx::Array;
use rmx_models::batch_cache::{self, BatchKvCache};
use rmx_models::{CausalLm, LayerCache};

use crate::error::{EngineError, Result};
use crate::sequence::{Sequence, PREFILL_CHUNK};

/// The most padded tokens (rows × the longest prompt) one group prefill reads.
pub const MAX_GROUP_TOKENS: usize = 2 * PREFILL_CHUNK;

/// Which of `lens` (prompt tokens to prefill, in arrival order) go in one group: the first ones
/// while the padded total stays within [`MAX_GROUP_TOKENS`]. Fewer than two is no group.
pub fn choose(lens: &[usize]) -> usize {
    let mut longest = 0;
    let mut n = 0;
    for &l in lens {
        let m = longest.max(l);
        if m * (n + 1) > MAX_GROUP_TOKENS {
            break;
        }
        longest = m;
        n += 1;
    }
    if n >= 2 {
        n
    } else {
        0
    }
}

/// Prefills `seqs` (each [`Sequence::prefills_fresh`]) in one forward; each gets its own cache
/// of its prompt (all but the last token) back.
pub fn prefill(model: &dyn CausalLm, seqs: &mut [Sequence]) -> Result<()> {
    let lens: Vec<usize> = seqs.iter().map(|s| s.prefill_tokens().len()).collect();
    let longest = lens.iter().copied().max().unwrap_or(0);
    let b = seqs.len();
    let mut ids = vec![0u32; b * longest];
    for (row, s) in seqs.iter().enumerate() {
        let t = s.prefill_tokens();
        ids[row * longest + longest - t.len()..(row + 1) * longest].copy_from_slice(t);
    }
    let tokens = Array::from_slice(&ids, &[b as i32, longest as i32])?;
    let pads: Vec<i32> = lens.iter().map(|l| (longest - l) as i32).collect();
    let mut cache = model
        .make_cache()
        .iter()
        .map(|_| BatchKvCache::padded(pads.clone()).map(LayerCache::Batch))
        .collect::<rmx_models::Result<Vec<_>>>()?;
    // Only the cache matters here: the hidden states are never evaluated.
    model.forward_hidden(&tokens, &mut cache)?;
    let mut own = Vec::with_capacity(b);
    for (row, &len) in lens.iter().enumerate() {
        let c = batch_cache::row(&cache, row, len as i32)?.ok_or_else(|| {
            EngineError::Invalid("a prefilled row's cache came back short".into())
        })?;
        own.push(c);
    }
    let state: Vec<&Array> = own.iter().flatten().flat_map(|c| c.state()).collect();
    rmx_mlx::eval(&state)?;
    drop(cache);
    for (s, c) in seqs.iter_mut().zip(own) {
        s.prefilled_with(c)?;
    }
    rmx_mlx::clear_cache();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_takes_arrivals_while_their_padded_total_fits() {
        assert_eq!(choose(&[63, 63, 63]), 3);
        assert_eq!(choose(&[100]), 0, "one is not a group");
        assert_eq!(choose(&[]), 0);
        // 2 x 2048 fits; a third row would make 3 x 2048.
        assert_eq!(choose(&[2048, 10, 10]), 2);
        assert_eq!(choose(&[10, 4000, 10]), 0);
        let many = vec![64; 100];
        assert_eq!(choose(&many), MAX_GROUP_TOKENS / 64);
    }
}
