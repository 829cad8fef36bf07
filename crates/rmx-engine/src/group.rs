//! A group of ranks serving one model at a time: rank 0 decides what to load and says so
//! ([`GroupLead`]), the other ranks wait for its word and load the same ([`follow`]); and before
//! a split model answers anything, every rank confirms that it loaded the same thing.
//!
//! The agreement is one `all_gather` of each rank's (loaded?, fingerprint) right after its
//! load, on every rank, whatever happened: a rank that failed, or whose files or settings differ
//! from rank 0's (another model version, another `RMX_MAX_BATCH`), makes every rank's load fail
//! with a message naming it, instead of a group whose ranks compute different things or wait
//! for ever on a collective one of them never joins.
//!
//! Control words cross the group as the engine's turns do (mirror.rs: MLX's `all_sum`), only
//! while no engine runs, so they never interleave with a model's collectives.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use rmx_mlx::distributed::Group;
use rmx_mlx::Array;
use rmx_models::{Loaded, ModelError, Parallel, ParallelMode};
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineOptions};
use crate::error::{EngineError, Result};
use crate::mirror;

/// How every error of a lost group begins: what a client reads, and what the daemon answers
/// with a 503 (come back later) rather than a 500.
pub const GROUP_LOST: &str = "the ranks of this model's group lost each other";

/// The first failure of this process's group, once one happened. Process-wide because MLX's
/// group is: `distributed::init` hands out the same group for a backend for the life of the
/// process, so once a peer is gone no new group can be joined here; the process must end and
/// be started again (`rmx launch` does that for `rmx serve`).
static FAILURE: OnceLock<String> = OnceLock::new();

/// Why this process's group failed, if it did.
pub fn failure() -> Option<&'static str> {
    FAILURE.get().map(String::as_str)
}

/// Records the group's failure (the first one stays) and returns what to tell clients.
pub(crate) fn lost(e: impl std::fmt::Display) -> String {
    let message = format!("{GROUP_LOST} ({e}); {}", what_next(launcher_alive()));
    let _ = FAILURE.set(message.clone());
    message
}

/// What a client can do about a lost group: wait for the launcher that restarts it, or have
/// the group started again.
fn what_next(restarted: bool) -> &'static str {
    if restarted {
        "rmx launch restarts the group: retry in a few seconds"
    } else {
        "nothing restarts it here: start the group again with rmx launch"
    }
}

/// Whether this rank runs under an `rmx launch` that restarts its group when a rank ends
/// (RMX_LAUNCHER_PID, set by that launcher) and the launcher is still its parent: a launcher
/// killed outright leaves its ranks behind, re-parented.
fn launcher_alive() -> bool {
    is_parent(
        rmx_settings::number::<u32>(rmx_settings::EnvVars::RMX_LAUNCHER_PID)
            .ok()
            .flatten(),
    )
}

fn is_parent(launcher: Option<u32>) -> bool {
    launcher.is_some_and(|pid| pid == std::os::unix::process::parent_id())
}

/// Ends every answer running on this process's group with the group's loss (`why`: what
/// happened), from any thread, the engine's included when it is stuck in a collective; returns
/// how many were ended. The group stays failed ([`failure`]).
pub fn fail_running(why: &str) -> usize {
    let message = lost(why);
    crate::mirror::fail_clients(failure().unwrap_or(&message))
}

/// How long rank 0's engine has been in its current step (`None` while it waits for requests):
/// a step that does not end is a rank or a link that stalls, which MLX's collectives wait on for
/// ever. `rmx serve` under `rmx launch` gives up on its group past `RMX_GROUP_STALL_SECS`.
pub fn step_running_for() -> Option<std::time::Duration> {
    crate::mirror::in_turn_for()
}

/// Whether `e` is a failure of the group's communication (MLX's backends name themselves in
/// their errors: "[ring] connection to a peer was lost") rather than of the model.
pub(crate) fn is_collective_failure(e: &str) -> bool {
    ["[ring]", "[nccl]", "[jaccl]", "[mpi]"]
        .iter()
        .any(|b| e.contains(b))
}

/// What rank 0 tells the others while no model runs.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
enum Control {
    /// Load this folder's model, split this way, with rank 0's scheduling settings.
    Load {
        dir: PathBuf,
        pipeline: bool,
        max_batch: usize,
        prefix_cache_bytes: usize,
    },
    /// The group is done: the followers return.
    Exit,
    /// Every rank reports its versions and backends, and `model`'s fingerprint when given
    /// (checkup.rs: `rmx launch -- rmx doctor`).
    Checkup { model: Option<PathBuf> },
}

/// Rank 0 of a group: loads models split over the group, one at a time.
pub struct GroupLead {
    group: Group,
    exited: bool,
}

impl GroupLead {
    pub fn new(group: Group) -> Result<GroupLead> {
        if group.rank() != 0 {
            return Err(EngineError::Invalid(format!(
                "rank {} cannot lead its group; rank 0 does",
                group.rank()
            )));
        }
        Ok(GroupLead {
            group,
            exited: false,
        })
    }

    pub fn size(&self) -> i32 {
        self.group.size()
    }

    /// The communication backend the group was started with.
    pub fn backend(&self) -> rmx_mlx::distributed::CommBackend {
        self.group.backend()
    }

    /// Loads `dir` split over the group (every rank reads its share from the same path on
    /// its machine). The previous model's engine must be dropped first: the group runs one
    /// model at a time.
    pub fn load(&self, dir: &Path, mode: ParallelMode, options: EngineOptions) -> Result<Engine> {
        let word = Control::Load {
            dir: dir.to_path_buf(),
            pipeline: mode == ParallelMode::Pipeline,
            max_batch: options.max_batch,
            prefix_cache_bytes: options.prefix_cache_bytes,
        };
        send(&self.group, &word)?;
        Engine::load_parallel(dir, options, Parallel::new(self.group.clone(), mode))
    }

    /// Every rank's versions, backends and (with `model`, the same path on every machine) that
    /// folder's fingerprint, in rank order.
    pub fn checkup(&self, model: Option<&Path>) -> Result<Vec<crate::checkup::RankReport>> {
        let word = Control::Checkup {
            model: model.map(Path::to_path_buf),
        };
        send(&self.group, &word)?;
        let mine = crate::checkup::RankReport::here(&self.group, model);
        crate::checkup::gather(&self.group, &mine)
    }

    /// Tells the followers the group is done (dropping the lead does too).
    pub fn exit(mut self) -> Result<()> {
        self.exited = true;
        send(&self.group, &Control::Exit)
    }
}

impl Drop for GroupLead {
    fn drop(&mut self) {
        if !self.exited {
            // A follower that misses it finds its peer gone at its next collective.
            let _ = send(&self.group, &Control::Exit);
        }
    }
}

/// A rank other than 0: loads what rank 0 says, runs its engine until rank 0's stops, and
/// waits for the next word, until rank 0 says the group is done. A model that fails to load
/// is reported here and the rank waits for the next word, as rank 0 gets the same failure.
pub fn follow(group: Group) -> Result<()> {
    loop {
        // Rank 0 rings before every word (doorbell.rs): no spinning while no model runs.
        crate::doorbell::wait()?;
        let bytes = mirror::broadcast(&group, &[])?;
        let word: Control = serde_json::from_slice(&bytes)
            .map_err(|e| EngineError::Invalid(format!("a word from rank 0: {e}")))?;
        match word {
            Control::Exit => return Ok(()),
            Control::Checkup { model } => {
                let mine = crate::checkup::RankReport::here(&group, model.as_deref());
                crate::checkup::gather(&group, &mine)?;
            }
            Control::Load {
                dir,
                pipeline,
                max_batch,
                prefix_cache_bytes,
            } => {
                let options = EngineOptions {
                    max_batch,
                    prefix_cache_bytes,
                    prefix_dir: None,
                    prefix_disk_bytes: 0,
                };
                let mode = if pipeline {
                    ParallelMode::Pipeline
                } else {
                    ParallelMode::Tensor
                };
                match Engine::load_parallel(&dir, options, Parallel::new(group.clone(), mode)) {
                    // Returns when rank 0's engine stops, and with it this one.
                    Ok(engine) => drop(engine),
                    Err(e) => {
                        eprintln!("rmx: rank {}: loading {}: {e}", group.rank(), dir.display())
                    }
                }
            }
        }
    }
}

fn send(group: &Group, word: &Control) -> Result<()> {
    let bytes = serde_json::to_vec(word)
        .map_err(|e| EngineError::Invalid(format!("a word to the group: {e}")))?;
    crate::doorbell::ring();
    mirror::broadcast(group, &bytes).map(|_| ())
}

/// Whether this rank has taken part in its load's agreement (a load that fails before its
/// engine thread starts must still take part, from the caller's thread).
#[derive(Clone, Default)]
pub(crate) struct Agreed(Arc<AtomicBool>);

impl Agreed {
    pub fn done(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Every rank's load, compared: `loaded` unchanged when all ranks loaded the same model with
/// the same settings, an error naming the ranks that did not otherwise.
pub(crate) fn agree(
    group: &Group,
    loaded: rmx_models::Result<Loaded>,
    dir: &Path,
    options: &EngineOptions,
    agreed: &Agreed,
) -> rmx_models::Result<Loaded> {
    let print = fingerprint(dir, options);
    let verdict = compare(group, loaded.is_ok(), print);
    agreed.0.store(true, Ordering::SeqCst);
    match (loaded, verdict) {
        (Ok(m), Ok(())) => Ok(m),
        // This rank's own failure says more than the group's.
        (Err(e), _) => Err(e),
        (Ok(_), Err(message)) => Err(ModelError::Parallel {
            ranks: group.size(),
            message,
        }),
    }
}

/// The agreement from a rank whose load failed before its engine thread started.
pub(crate) fn agree_failed(group: &Group) {
    // The others learn of the failure from this; this rank already has its own error.
    let _ = compare(group, false, 0);
}

/// Flags every rank must decide alike, true only where they are true on every rank of `group`
/// (one `all_sum` of the falses); alone, the flags as they are. A pipeline stage reads them off
/// its own layers' caches, and a hybrid model's stages differ (one may hold only attention
/// layers). A failed collective (the group is lost) leaves this rank's own: its next step
/// reports the loss.
pub(crate) fn on_every_rank<const N: usize>(group: Option<&Group>, flags: [bool; N]) -> [bool; N] {
    let Some(group) = group else {
        return flags;
    };
    let falses: Vec<i32> = flags.iter().map(|f| i32::from(!f)).collect();
    let sums = Array::from_slice(&falses, &[N as i32])
        .and_then(|a| group.all_sum(&a))
        .and_then(|a| a.to_vec::<i32>());
    match sums {
        Ok(s) if s.len() == N => std::array::from_fn(|i| s[i] == 0),
        _ => flags,
    }
}

/// One `all_gather` of (ok, fingerprint) over the group, checked against rank 0's.
fn compare(group: &Group, ok: bool, print: u64) -> std::result::Result<(), String> {
    let mine = [i32::from(ok), (print >> 32) as i32, print as i32];
    let all = Array::from_slice(&mine, &[1, 3])
        .and_then(|a| group.all_gather(&a))
        .and_then(|a| a.to_vec::<i32>())
        .map_err(|e| format!("the ranks could not compare their loads: {e}"))?;
    let rows: Vec<&[i32]> = all.chunks(3).collect();
    let failed: Vec<String> = (0..rows.len())
        .filter(|&r| rows[r][0] == 0)
        .map(|r| r.to_string())
        .collect();
    if !failed.is_empty() {
        return Err(format!(
            "rank(s) {} could not load the model (their own logs say why)",
            failed.join(", ")
        ));
    }
    let differ: Vec<String> = (1..rows.len())
        .filter(|&r| rows[r][1..] != rows[0][1..])
        .map(|r| r.to_string())
        .collect();
    if !differ.is_empty() {
        return Err(format!(
            "rank(s) {} have other model files or engine settings than rank 0 (config.json, \
             the weight files' names and sizes, RMX_MAX_BATCH, RMX_PREFIX_CACHE_MB): give every \
             rank the same model and settings",
            differ.join(", ")
        ));
    }
    Ok(())
}

/// FNV-1a of what must be the same on every rank: config.json, the weight files' names and
/// sizes (reading the weights whole would cost as much as loading them twice) and the engine
/// settings that shape its steps.
fn fingerprint(dir: &Path, options: &EngineOptions) -> u64 {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.add(&std::fs::read(dir.join("config.json")).unwrap_or_default());
    let mut weights: Vec<(String, u64)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let size = e.metadata().ok()?.len();
            name.ends_with(".safetensors").then_some((name, size))
        })
        .collect();
    weights.sort();
    for (name, size) in weights {
        h.add(name.as_bytes());
        h.add(&size.to_le_bytes());
    }
    h.add(&(options.max_batch as u64).to_le_bytes());
    h.add(&(options.prefix_cache_bytes as u64).to_le_bytes());
    h.0
}

struct Fnv(u64);

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_group_promises_a_restart_only_under_its_live_launcher() {
        let parent = std::os::unix::process::parent_id();
        assert!(is_parent(Some(parent)));
        // A launcher killed outright: its ranks now have another parent.
        assert!(!is_parent(Some(parent.wrapping_add(1))));
        // No launcher that restarts (a hostfile's rank, a client's private daemon).
        assert!(!is_parent(None));
        assert!(what_next(true).contains("rmx launch restarts the group"));
        assert!(what_next(false).contains("start the group again with rmx launch"));
    }

    #[test]
    fn fingerprints_see_config_weights_and_settings() {
        let dir = tempfile::tempdir().expect("temp dir");
        let opts = EngineOptions {
            max_batch: 8,
            prefix_cache_bytes: 0,
            prefix_dir: None,
            prefix_disk_bytes: 0,
        };
        std::fs::write(dir.path().join("config.json"), "{}").expect("write");
        std::fs::write(dir.path().join("model.safetensors"), [0u8; 16]).expect("write");
        let a = fingerprint(dir.path(), &opts);
        assert_eq!(a, fingerprint(dir.path(), &opts));
        std::fs::write(dir.path().join("model.safetensors"), [0u8; 17]).expect("write");
        let b = fingerprint(dir.path(), &opts);
        assert_ne!(a, b);
        let other = EngineOptions {
            max_batch: 4,
            ..opts.clone()
        };
        assert_ne!(b, fingerprint(dir.path(), &other));
        std::fs::write(dir.path().join("config.json"), "{\"x\": 1}").expect("write");
        assert_ne!(b, fingerprint(dir.path(), &opts));
    }

    #[test]
    fn control_words_cross_whole() {
        let w = Control::Load {
            dir: PathBuf::from("/models/x"),
            pipeline: true,
            max_batch: 4,
            prefix_cache_bytes: 1 << 20,
        };
        let back: Control =
            serde_json::from_slice(&serde_json::to_vec(&w).expect("json")).expect("parse");
        assert_eq!(back, w);
        let w = Control::Checkup {
            model: Some(PathBuf::from("/models/x")),
        };
        let back: Control =
            serde_json::from_slice(&serde_json::to_vec(&w).expect("json")).expect("parse");
        assert_eq!(back, w);
    }
}
