//! MLX's distributed layer: a [`Group`] of processes (ranks) and the collective and
//! point-to-point ops between them, as lazy array ops like any other.
//!
//! * Backends are MLX's own: `ring` (TCP; several local processes over loopback, or Macs over
//!   Ethernet/Thunderbolt), `jaccl` (RDMA over Thunderbolt), `mpi`, `nccl` (CUDA). rmx adds no
//!   transport.
//! * How a rank finds its peers is the backend's business and comes from the environment, as
//!   `mlx.launch` sets it: the ring reads `MLX_RANK` and `MLX_HOSTFILE` (a JSON list, one entry
//!   per rank, each a list of `"ip:port"` the rank listens on); nccl reads `MLX_RANK`,
//!   `MLX_WORLD_SIZE`, `NCCL_HOST_IP` and `NCCL_PORT` (rank 0's); jaccl reads `MLX_RANK`,
//!   `MLX_JACCL_COORDINATOR` and `MLX_IBV_DEVICES` (jaccl.rs). rmx never sets these in its own
//!   process (setting the environment races with other threads reading it); a launcher sets
//!   them on the processes it starts.
//! * MLX's ring `init` waits for ever in `accept` when the rank on its left never comes (only the
//!   rank that connects first gives up, after about 30 s), so [`Group::init_within`] bounds the
//!   wait itself.
//! * A collective is evaluated like any op, under the process-wide eval lock: every rank must
//!   build and evaluate the same collectives in the same order, or they wait on each other.

mod jaccl;
mod local;
mod nccl;
mod ring;

pub use jaccl::{JacclHost, JacclHosts, DEFAULT_PORT as JACCL_DEFAULT_PORT};
pub use local::{LocalRing, RankExit};
pub use nccl::NcclHosts;
pub use ring::RingHosts;

use std::fmt;
use std::str::FromStr;
use std::sync::mpsc;
use std::time::Duration;

use cxx::UniquePtr;

use crate::array::{Array, List};
use crate::dtype::Dtype;
use crate::error::{check, Error, Result};
use crate::ffi::bridge;

/// Which of MLX's communication backends to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommBackend {
    /// TCP sockets in a ring (`MLX_RANK`, `MLX_HOSTFILE`).
    Ring,
    /// RDMA over Thunderbolt (macOS).
    Jaccl,
    /// An MPI launcher's processes (`mpirun`), through a libmpi found at run time.
    Mpi,
    /// NVIDIA's collectives, between CUDA devices.
    Nccl,
    /// The first backend that starts, in MLX's order.
    Any,
}

impl CommBackend {
    pub const ALL: [CommBackend; 5] = [
        CommBackend::Ring,
        CommBackend::Jaccl,
        CommBackend::Mpi,
        CommBackend::Nccl,
        CommBackend::Any,
    ];

    /// MLX's name for it.
    pub fn name(self) -> &'static str {
        match self {
            CommBackend::Ring => "ring",
            CommBackend::Jaccl => "jaccl",
            CommBackend::Mpi => "mpi",
            CommBackend::Nccl => "nccl",
            CommBackend::Any => "any",
        }
    }

    /// Whether this build of MLX has the backend at all (it may still fail to start).
    pub fn is_available(self) -> bool {
        bridge::distributed_available(self.name())
    }
}

impl fmt::Display for CommBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CommBackend {
    type Err = Error;

    fn from_str(s: &str) -> Result<CommBackend> {
        CommBackend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| Error::Invalid {
                op: "distributed backend",
                message: format!("unknown backend {s:?}: use ring, jaccl, mpi, nccl or any"),
            })
    }
}

/// A group of ranks that communicate. Cheap to clone (a shared handle).
pub struct Group {
    raw: UniquePtr<bridge::Group>,
    /// The backend asked for at init: MLX does not say which one a group runs on.
    backend: CommBackend,
}

// SAFETY: the C++ `Group` holds only a `shared_ptr` to the backend's group state, which MLX
// creates once and never mutates through the handle (rank, size and the ops read it; the ops'
// communication runs on the backend's own threads). Moving or sharing the handle between
// threads is what MLX's Python binding does with it as well. Arrays made by its ops stay on the
// thread that made them (`Array` is not `Send`).
unsafe impl Send for Group {}
// SAFETY: as above; every method takes `&self` and only reads the handle.
unsafe impl Sync for Group {}

impl Group {
    fn inner(&self) -> &bridge::Group {
        self.raw
            .as_ref()
            .expect("rmx-mlx invariant: Group holds a non-null pointer")
    }

    /// Starts `backend` and returns the group of every launched process, blocking as MLX does.
    /// `strict = false` gives a one-rank group (whose ops are no-ops) when the backend cannot
    /// start; `strict = true` makes that an error. MLX keeps the first group that starts and
    /// returns it to later calls.
    pub fn init(backend: CommBackend, strict: bool) -> Result<Group> {
        init_error(backend, bridge::distributed_init(strict, backend.name()))
    }

    /// Starts `backend` strictly, giving up after `timeout` when the peers do not all come.
    /// On a timeout MLX's own wait goes on in a thread of its own until the process exits
    /// (MLX has no way to cancel it), so a caller that gets one should end the process.
    pub fn init_within(backend: CommBackend, timeout: Duration) -> Result<Group> {
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("mlx-distributed-init".into())
            .spawn(move || {
                // The receiver is gone only after a timeout; nobody wants the group then.
                let _ = tx.send(Group::init(backend, true));
            });
        if let Err(e) = spawned {
            return Err(Error::Distributed {
                op: "distributed init",
                message: format!("could not start a thread to wait for the peers: {e}"),
            });
        }
        match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Error::Distributed {
                op: "distributed init",
                message: format!(
                    "the {backend} backend's peers did not all connect within {} s ({}): start \
                     every rank (`rmx launch` starts them all), and check that each rank's \
                     address (the ring's hostfile; nccl's NCCL_HOST_IP:NCCL_PORT; jaccl's \
                     coordinator and RDMA devices) is reachable \
                     and its port free",
                    timeout.as_secs_f32(),
                    launch_env(backend)
                ),
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::Distributed {
                op: "distributed init",
                message: "the thread starting the backend stopped without an answer".into(),
            }),
        }
    }

    pub fn rank(&self) -> i32 {
        bridge::group_rank(self.inner())
    }

    pub fn size(&self) -> i32 {
        bridge::group_size(self.inner())
    }

    /// The ranks that pass the same `color` form a new group, ordered by `key` (`-1`: by rank
    /// in this group). The ring backend does not support it.
    pub fn split(&self, color: i32, key: i32) -> Result<Group> {
        check("group split", bridge::group_split(self.inner(), color, key)).map(|raw| Group {
            raw,
            backend: self.backend,
        })
    }

    /// The backend this group was started with ([`CommBackend::Any`]: whichever started).
    pub fn backend(&self) -> CommBackend {
        self.backend
    }

    /// Whether [`send`](Group::send) and [`recv`](Group::recv) work on this group: MLX's nccl
    /// backend has only collectives ("Send not supported in NCCL backend").
    pub fn has_send_recv(&self) -> bool {
        self.backend != CommBackend::Nccl
    }

    /// The element-wise sum of `x` over every rank (same shape and dtype on each).
    pub fn all_sum(&self, x: &Array) -> Result<Array> {
        check("all_sum", bridge::all_sum(x.inner(), self.inner())).map(Array::from_raw)
    }

    /// Every rank's `x`, concatenated along axis 0 in rank order.
    pub fn all_gather(&self, x: &Array) -> Result<Array> {
        check("all_gather", bridge::all_gather(x.inner(), self.inner())).map(Array::from_raw)
    }

    /// The element-wise maximum of `x` over every rank.
    pub fn all_max(&self, x: &Array) -> Result<Array> {
        check("all_max", bridge::all_max(x.inner(), self.inner())).map(Array::from_raw)
    }

    /// The element-wise minimum of `x` over every rank.
    pub fn all_min(&self, x: &Array) -> Result<Array> {
        check("all_min", bridge::all_min(x.inner(), self.inner())).map(Array::from_raw)
    }

    /// Sends `x` to rank `dst` when the returned array is evaluated (the ring reaches only its
    /// two neighbours). The result holds nothing useful; evaluate it, or make later work
    /// [`depends`] on it.
    pub fn send(&self, x: &Array, dst: i32) -> Result<Array> {
        check("send", bridge::send(x.inner(), dst, self.inner())).map(Array::from_raw)
    }

    /// An array of `shape` and `dtype` received from rank `src` when evaluated.
    pub fn recv(&self, shape: &[i32], dtype: Dtype, src: i32) -> Result<Array> {
        check("recv", bridge::recv(shape, dtype.code(), src, self.inner())).map(Array::from_raw)
    }

    /// An array shaped and typed like `like`, received from rank `src`.
    pub fn recv_like(&self, like: &Array, src: i32) -> Result<Array> {
        check("recv", bridge::recv_like(like.inner(), src, self.inner())).map(Array::from_raw)
    }
}

impl Clone for Group {
    fn clone(&self) -> Group {
        Group {
            raw: bridge::group_clone(self.inner()),
            backend: self.backend,
        }
    }
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Group(rank {} of {})", self.rank(), self.size())
    }
}

/// `inputs`, unchanged in value, but evaluated only after `dependencies` (a `send` whose
/// result nobody reads, for instance).
pub fn depends(inputs: &[&Array], dependencies: &[&Array]) -> Result<Vec<Array>> {
    let (i, d) = (
        List::of(inputs.iter().copied()),
        List::of(dependencies.iter().copied()),
    );
    let out = check("depends", bridge::depends(i.inner(), d.inner()))?;
    List(out).into_vec("depends")
}

/// MLX's message for a backend that did not start, with what the launch looked like.
fn init_error(
    backend: CommBackend,
    r: std::result::Result<UniquePtr<bridge::Group>, cxx::Exception>,
) -> Result<Group> {
    r.map(|raw| Group { raw, backend })
        .map_err(|e| Error::Distributed {
            op: "distributed init",
            message: format!(
                "the {backend} backend did not start: {} ({})",
                e.what(),
                launch_env(backend)
            ),
        })
}

/// The backend's launch settings as this process sees them, for error messages.
fn launch_env(backend: CommBackend) -> String {
    let names: &[&str] = match backend {
        CommBackend::Nccl => &[
            "MLX_RANK",
            "MLX_WORLD_SIZE",
            "NCCL_HOST_IP",
            "NCCL_PORT",
            "CUDA_VISIBLE_DEVICES",
        ],
        CommBackend::Jaccl => &[
            "MLX_RANK",
            "MLX_JACCL_COORDINATOR",
            "MLX_IBV_DEVICES",
            "MLX_JACCL_RING",
        ],
        _ => &["MLX_RANK", "MLX_HOSTFILE"],
    };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| "unset".into());
    names
        .iter()
        .map(|k| format!("{k}={}", var(k)))
        .collect::<Vec<_>>()
        .join(", ")
}
