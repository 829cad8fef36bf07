//! Pipeline parallelism (parallel.rs): rank r runs a contiguous range of the layers, the first
//! ranks the first layers (mlx-lm's `PipelineMixin` gives rank 0 the last ones; the order does
//! not change the result, and first-to-first reads more naturally); the low ranks take one
//! extra layer each when the layers do not divide evenly. A step's activations go from rank to
//! rank (the ring's `send`/`recv` reach the next rank), and the last rank's output is gathered
//! to every rank so each computes the same logits, as mlx-lm's pipeline does.
//!
//! MLX's nccl backend has no send/recv, only collectives. There the hand-overs are `all_sum`s
//! instead: the k-th of a step's N sums carries rank k's output (every other rank adds zeros,
//! which changes no bit), so rank k + 1 reads its input from the k-th and every rank the last
//! rank's output from the N-th. Each rank issues all N in the same order — the zeros of the
//! k-th made to depend on the (k-1)-th's result, or a rank could reach a later sum first and
//! wait for ever. Over NVLink that costs a few microseconds more per step than a send would.
//!
//! Every rank must evaluate every collective of a step, or the others wait for ever. A prompt
//! chunk evaluates only the caches, which on the first ranks do not need the hand-over; so
//! each rank's last cache is made to depend on the gathered output (mlx-lm does the same with
//! `mx.depends`).

use rmx_mlx::distributed::{depends, Group};
use rmx_mlx::Array;

use crate::cache::LayerCache;
use crate::error::Result;
use crate::parallel::{Parallel, Part};

/// Each of `size` ranks' layers: contiguous, the low ranks one extra when they do not divide.
fn stages(layers: i32, size: i32) -> Vec<Part> {
    let (base, extra) = (layers / size, layers % size);
    let len = |r: i32| base + i32::from(r < extra);
    (0..size)
        .map(|r| Part {
            start: (0..r).map(len).sum(),
            len: len(r),
        })
        .collect()
}

/// This rank's place in the pipeline.
pub(crate) struct Stage {
    group: Group,
    rank: i32,
    size: i32,
    layers: Part,
    /// Hand-overs by `all_sum` (no send/recv on this backend).
    by_collectives: bool,
}

impl Stage {
    pub fn new(p: &Parallel, layers: i32) -> Result<Stage> {
        if layers < p.size {
            return Err(p.refuse(format!(
                "a pipeline needs a layer for every rank and the model has {layers}; use at \
                 most {layers} ranks, or tensor parallelism"
            )));
        }
        Ok(Stage {
            group: p.group.clone(),
            rank: p.rank,
            size: p.size,
            layers: stages(layers, p.size)[p.rank as usize],
            by_collectives: p.collective_handoff,
        })
    }

    /// This rank's layers (global indices).
    pub fn layers(&self) -> Part {
        self.layers
    }

    /// Every rank's layers, in rank order, of a model of `layers`.
    pub fn every_rank(&self, layers: i32) -> Vec<Part> {
        stages(layers, self.size)
    }

    /// The stage's input: the embedded tokens on rank 0, the previous rank's output on the
    /// others. `embedded` stays in their graph all the same: its lookup is summed over every
    /// rank (vocabulary split).
    pub fn input(&self, embedded: &Array) -> Result<Array> {
        if self.rank == 0 {
            return Ok(embedded.clone());
        }
        if self.by_collectives {
            // The sums of the ranks before this one; the last of them carries its input.
            let mut got = self.zeros_after(embedded, embedded)?;
            for _ in 1..self.rank {
                got = self.zeros_after(&got, &got)?;
            }
            return Ok(got);
        }
        let got = self.group.recv_like(embedded, self.rank - 1)?;
        Ok(depends(&[&got], &[embedded])?.remove(0))
    }

    /// One hand-over sum to which this rank adds zeros shaped like `like`, issued after
    /// `after` (the previous sum, or this rank's embedding for its first).
    fn zeros_after(&self, like: &Array, after: &Array) -> Result<Array> {
        let zeros = Array::zeros(&like.shape(), like.dtype())?;
        let zeros = depends(&[&zeros], &[after])?.remove(0);
        Ok(self.group.all_sum(&zeros)?)
    }

    /// Hands this stage's output to the next rank and returns the last rank's output, on every
    /// rank; `caches` (this rank's) then depend on it, so evaluating them runs the hand-over.
    pub fn output(&self, h: &Array, caches: &mut [LayerCache]) -> Result<Array> {
        if self.by_collectives {
            // This rank's sum carries its output; then the sums of the ranks after it.
            let mut out = self.group.all_sum(h)?;
            for _ in self.rank + 1..self.size {
                out = self.zeros_after(&out, &out)?;
            }
            if let Some(c) = caches.last_mut() {
                c.depend_on(&out)?;
            }
            return Ok(out);
        }
        let h = if self.rank + 1 < self.size {
            let sent = self.group.send(h, self.rank + 1)?;
            depends(&[h], &[&sent])?.remove(0)
        } else {
            h.clone()
        };
        let rows = h.dim(0);
        let last = self.size - 1;
        let out = self
            .group
            .all_gather(&h)?
            .slice_axis(0, last * rows, (last + 1) * rows)?;
        if let Some(c) = caches.last_mut() {
            c.depend_on(&out)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::ParallelMode;
    use rmx_mlx::distributed::CommBackend;

    fn stage(rank: i32, size: i32, layers: i32) -> Result<Stage> {
        let group = Group::init(CommBackend::Any, false).expect("singleton group");
        let p = Parallel {
            group,
            rank,
            size,
            mode: ParallelMode::Pipeline,
            collective_handoff: false,
        };
        Stage::new(&p, layers)
    }

    #[test]
    fn layers_are_contiguous_ranges_low_ranks_taking_the_extra_ones() {
        let ranges: Vec<(i32, i32)> = (0..4)
            .map(|r| {
                let l = stage(r, 4, 6).expect("fits").layers();
                (l.start, l.len)
            })
            .collect();
        assert_eq!(ranges, vec![(0, 2), (2, 2), (4, 1), (5, 1)]);
        let err = stage(0, 4, 3).err().expect("too few layers").to_string();
        assert!(
            err.contains("the model has 3; use at most 3 ranks"),
            "{err}"
        );
    }
}
