//! Several sequences' caches as one, so a decode step runs over all of them in one forward:
//! mlx-lm's `BatchKVCache` layout. Key/value rows are left-padded to a common length (row `b`
//! holds its positions in columns `pad[b]..idx`), the mask hides the padding, and rope reads
//! each row's own position. Recurrent (DeltaNet) states need no padding: they stack on the
//! batch axis.
//!
//! Sequences are prefilled alone and merged in once they decode; finished ones are dropped by
//! [`keep`], and one row can be taken back out as a solo cache (for the prefix cache) by
//! [`row`]. Sliding-window caches do not batch: a model that has them decodes its sequences
//! one by one.

use rmx_mlx::{concatenate, Array};

use crate::cache::batch_rows;
pub use crate::cache::BatchKvCache;
use crate::cache::{LayerCache, RecurrentCache};
use crate::error::{ModelError, Result};

/// Whether a sequence's cache can join a batch: full attention and recurrent layers only.
pub fn batches(cache: &[LayerCache]) -> bool {
    cache.iter().all(|c| {
        matches!(
            c,
            LayerCache::Full(_) | LayerCache::Batch(_) | LayerCache::Recurrent(_)
        )
    })
}

/// One cache holding every row of `parts` (solo caches or batches, layer for layer alike), in
/// order.
pub fn merge(mut parts: Vec<Vec<LayerCache>>) -> Result<Vec<LayerCache>> {
    if parts.len() == 1 {
        // One sequence keeps its own cache, so it decodes on the solo fast path.
        return Ok(parts.pop().unwrap_or_default());
    }
    let layers = parts.first().map_or(0, Vec::len);
    if parts.iter().any(|p| p.len() != layers) {
        return Err(ModelError::Batch("caches of different models".into()));
    }
    let mut columns: Vec<Vec<LayerCache>> = (0..layers).map(|_| Vec::new()).collect();
    for part in parts {
        for (col, c) in columns.iter_mut().zip(part) {
            col.push(c);
        }
    }
    columns.into_iter().map(merge_layer).collect()
}

fn merge_layer(col: Vec<LayerCache>) -> Result<LayerCache> {
    if col.iter().all(|c| matches!(c, LayerCache::Recurrent(_))) {
        let mut conv = Vec::new();
        let mut state = Vec::new();
        let mut offset = 0;
        for c in col {
            let LayerCache::Recurrent(c) = c else {
                unreachable!("checked above")
            };
            let (Some(cv), Some(st)) = (c.conv, c.state) else {
                return Err(ModelError::Batch(
                    "a recurrent layer has read nothing yet".into(),
                ));
            };
            conv.push(cv);
            state.push(st);
            offset = offset.max(c.offset);
        }
        let cat = |v: &[Array]| concatenate(&v.iter().collect::<Vec<_>>(), 0);
        return Ok(LayerCache::Recurrent(RecurrentCache {
            conv: Some(cat(&conv)?),
            state: Some(cat(&state)?),
            offset,
        }));
    }
    let parts = col
        .into_iter()
        .map(|c| match c {
            LayerCache::Full(kv) => BatchKvCache::from_solo(kv),
            LayerCache::Batch(b) => Ok(b),
            LayerCache::Rotating(_) | LayerCache::Recurrent(_) | LayerCache::Quantized(_) => {
                Err(ModelError::Batch("a sliding-window or mixed layer".into()))
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LayerCache::Batch(BatchKvCache::merge(parts)?))
}

/// Keeps only `rows` of a batch, in that order.
pub fn keep(cache: &mut [LayerCache], rows: &[usize]) -> Result<()> {
    for c in cache.iter_mut() {
        match c {
            LayerCache::Batch(b) => b.keep(rows)?,
            LayerCache::Recurrent(r) => {
                let idx = batch_rows(rows)?;
                let take = |a: &Option<Array>| -> Result<Option<Array>> {
                    Ok(match a {
                        Some(a) => Some(a.take(&idx, 0)?),
                        None => None,
                    })
                };
                r.conv = take(&r.conv)?;
                r.state = take(&r.state)?;
            }
            LayerCache::Full(_) | LayerCache::Rotating(_) | LayerCache::Quantized(_) => {
                return Err(ModelError::Batch("keep: not a batch".into()))
            }
        }
    }
    Ok(())
}

/// Row `r` of a batch as a solo cache of its first `len` positions, with buffers of its own:
/// what the sequence alone would have left. `None` when a layer cannot give that (a recurrent
/// state holds exactly what its row has read, so `len` must be all of it).
pub fn row(cache: &[LayerCache], r: usize, len: i32) -> Result<Option<Vec<LayerCache>>> {
    let mut out = Vec::with_capacity(cache.len());
    for c in cache {
        match c {
            LayerCache::Batch(b) => match b.row(r, len)? {
                Some(kv) if kv.offset == len => out.push(LayerCache::Full(kv)),
                _ => return Ok(None),
            },
            LayerCache::Recurrent(rc) => {
                let one = |a: &Option<Array>| -> Result<Option<Array>> {
                    Ok(match a {
                        Some(a) => Some(a.slice_axis(0, r as i32, r as i32 + 1)?.copy()?),
                        None => None,
                    })
                };
                out.push(LayerCache::Recurrent(RecurrentCache {
                    conv: one(&rc.conv)?,
                    state: one(&rc.state)?,
                    offset: len,
                }));
            }
            LayerCache::Full(_) | LayerCache::Rotating(_) | LayerCache::Quantized(_) => {
                return Err(ModelError::Batch("row: not a batch".into()))
            }
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{seq_slice, AttnMask, KvCache};

    /// A solo cache of `n` positions where position p holds `base + p` in every element.
    fn solo(n: i32, base: f32) -> LayerCache {
        let data: Vec<f32> = (0..2)
            .flat_map(|_| (0..n).flat_map(move |p| [base + p as f32; 4]))
            .collect();
        let k = Array::from_slice(&data, &[1, 2, n, 4]).unwrap();
        let mut c = KvCache::default();
        c.update_and_fetch(&k, &k).unwrap();
        LayerCache::Full(c)
    }

    fn values(c: &LayerCache) -> Vec<f32> {
        let LayerCache::Full(kv) = c else {
            panic!("a solo cache")
        };
        let k = kv.keys.as_ref().unwrap();
        seq_slice(k, 0, kv.offset).unwrap().to_vec::<f32>().unwrap()
    }

    #[test]
    fn rows_of_different_lengths_merge_left_padded_and_come_back_out_whole() {
        let (a, b) = (solo(3, 100.0), solo(5, 200.0));
        let (want_a, want_b) = (values(&a), values(&b));
        let mut batch = merge(vec![vec![a], vec![b]]).unwrap();
        let LayerCache::Batch(bc) = &batch[0] else {
            panic!("two rows make a batch")
        };
        assert_eq!((bc.rows(), bc.offset()), (2, 5));
        assert_eq!(bc.positions().to_vec::<i32>().unwrap(), vec![3, 5]);
        // One query each: row 0 must not see its two padding columns.
        let AttnMask::Array(m) = bc.mask(1).unwrap() else {
            panic!("padding needs a mask")
        };
        assert_eq!(m.shape(), vec![2, 1, 1, 6]);
        let m = m.to_vec::<bool>().unwrap();
        assert_eq!(&m[..6], &[false, false, true, true, true, true]);
        assert!(m[6..].iter().all(|v| *v));

        let rows = |batch: &[LayerCache], r, len| {
            let mut out = row(batch, r, len).unwrap().expect("the row's whole length");
            values(&out.remove(0))
        };
        assert_eq!(rows(&batch, 0, 3), want_a);
        assert_eq!(rows(&batch, 1, 5), want_b);
        // A row's cache is exactly what it has read: any other length is refused.
        assert!(row(&batch, 0, 4).unwrap().is_none());

        // A step writes one position to each row; then row 1 leaves and row 0 keeps its own.
        let one = Array::from_slice(&[7.0f32; 16], &[2, 2, 1, 4]).unwrap();
        batch[0].update_and_fetch(&one, &one).unwrap();
        keep(&mut batch, &[0]).unwrap();
        let LayerCache::Batch(bc) = &batch[0] else {
            panic!("still a batch layout")
        };
        // The shared padding is cut: row 0 starts at column 0 again.
        assert_eq!((bc.rows(), bc.offset()), (1, 4));
        assert_eq!(bc.positions().to_vec::<i32>().unwrap(), vec![4]);
        let mut after = want_a.clone();
        // Position 3 of each of the two heads: the rows are [head, position, 4].
        after.splice(12..12, [7.0; 4]);
        after.extend([7.0; 4]);
        assert_eq!(rows(&batch, 0, 4), after);
    }

    #[test]
    fn recurrent_states_stack_and_split_by_row() {
        let state = |v: f32| {
            LayerCache::Recurrent(RecurrentCache {
                conv: Some(Array::from_slice(&[v; 6], &[1, 3, 2]).unwrap()),
                state: Some(Array::from_slice(&[v; 4], &[1, 1, 2, 2]).unwrap()),
                offset: 0,
            })
        };
        let mut batch = merge(vec![vec![state(1.0)], vec![state(2.0)], vec![state(3.0)]]).unwrap();
        keep(&mut batch, &[2, 0]).unwrap();
        let out = row(&batch, 0, 9).unwrap().unwrap();
        let LayerCache::Recurrent(r) = &out[0] else {
            panic!("recurrent")
        };
        assert_eq!(r.offset, 9);
        assert_eq!(
            r.conv.as_ref().unwrap().to_vec::<f32>().unwrap(),
            vec![3.0; 6]
        );
        assert_eq!(r.state.as_ref().unwrap().shape(), vec![1, 1, 2, 2]);
    }
}
