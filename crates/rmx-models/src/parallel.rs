//! One model over the ranks of a distributed group, in one of two ways:
//!
//! * **tensor** (tensor_parallel.rs): every layer split, each rank computing its share of every
//!   product, with a sum over the ranks after the attention and after the MLP: two collectives
//!   per layer, so it wants a fast link (RDMA, NVLink, local processes);
//! * **pipeline** (pipeline.rs): each rank runs a contiguous range of whole layers and hands
//!   its activations to the next rank: one message per rank and step, so it suits slower links
//!   (Ethernet), at the cost of ranks waiting on each other within a step.
//!
//! Both split the embedding and the output projection by vocabulary rows, so each rank holds
//! about 1/N of the model. The families [`crate::PARALLEL`] lists can be split.

use rmx_mlx::distributed::Group;

use crate::error::{ModelError, Result};

/// How a model is spread over its ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParallelMode {
    Tensor,
    Pipeline,
}

impl ParallelMode {
    pub fn name(self) -> &'static str {
        match self {
            ParallelMode::Tensor => "tensor",
            ParallelMode::Pipeline => "pipeline",
        }
    }
}

/// The group a model is split over, how, and this process's place in it.
#[derive(Clone, Debug)]
pub struct Parallel {
    pub(crate) group: Group,
    pub(crate) rank: i32,
    pub(crate) size: i32,
    pub(crate) mode: ParallelMode,
    /// Pipeline stages hand activations over by collectives instead of send/recv (pipeline.rs).
    pub(crate) collective_handoff: bool,
}

/// `start..start + len` of one axis (or of the layers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub start: i32,
    pub len: i32,
}

impl Part {
    pub fn scaled(self, by: i32) -> Part {
        Part {
            start: self.start * by,
            len: self.len * by,
        }
    }

    /// The part in units of `by` (start and length whole multiples of it).
    pub fn divided(self, by: i32) -> Part {
        Part {
            start: self.start / by,
            len: self.len / by,
        }
    }

    pub fn contains(self, i: i32) -> bool {
        (self.start..self.start + self.len).contains(&i)
    }
}

impl Parallel {
    pub fn new(group: Group, mode: ParallelMode) -> Parallel {
        let (rank, size) = (group.rank(), group.size());
        Parallel {
            collective_handoff: !group.has_send_recv(),
            group,
            rank,
            size,
            mode,
        }
    }

    /// Pipeline stages hand their activations over by `all_sum` (pipeline.rs), as they must on
    /// a backend without send/recv (nccl) — here on any group, so that path runs where nccl
    /// cannot (the ring on a CPU machine, in tests). Every rank must choose the same.
    pub fn with_collective_handoff(mut self) -> Parallel {
        self.collective_handoff = true;
        self
    }

    pub fn rank(&self) -> i32 {
        self.rank
    }

    pub fn size(&self) -> i32 {
        self.size
    }

    pub fn mode(&self) -> ParallelMode {
        self.mode
    }

    pub fn group(&self) -> &Group {
        &self.group
    }

    pub(crate) fn refuse(&self, message: String) -> ModelError {
        ModelError::Parallel {
            ranks: self.size,
            message,
        }
    }

    /// This rank's equal share of `total` items (`what` names them for the error).
    pub(crate) fn share(&self, total: i32, what: &str) -> Result<Part> {
        if total % self.size != 0 {
            return Err(self.refuse(format!(
                "{what} ({total}) do not divide evenly; use a number of ranks that divides {total}"
            )));
        }
        let len = total / self.size;
        Ok(Part {
            start: self.rank * len,
            len,
        })
    }
}
