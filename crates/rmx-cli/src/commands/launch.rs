//! `rmx launch`: starts the ranks of a model split over processes — rank 0 runs the user's
//! command, every other rank `rmx worker` — with the MLX backend's settings (the ring's
//! `MLX_RANK`, `MLX_HOSTFILE`; or nccl's, one GPU a rank), the backend (`RMX_COMM_BACKEND`)
//! and the split (`RMX_PARALLEL`) in their environment, and waits for rank 0. Commands that
//! load a model ask [`lead`] whether they are rank 0 of such a group.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rmx_engine::group::GroupLead;
use rmx_engine::ParallelMode;
use rmx_mlx::distributed::{CommBackend, Group, LocalRing, NcclHosts, RankExit, RingHosts};
use rmx_settings::EnvVars;

use crate::cli::{LaunchArgs, LaunchBackend, LaunchMode};

/// How long ranks wait for each other to start: long enough to start `rmx launch` on a second
/// machine by hand.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the other ranks get to end after rank 0 has.
const GRACE: Duration = Duration::from_secs(10);

/// The rmx commands that run over ranks so far.
const LAUNCHABLE: &[&str] = &["bench"];

pub fn run(args: LaunchArgs) -> Result<ExitCode> {
    let (program, rest) = args.command.split_first().context("no command to launch")?;
    let named_rmx = PathBuf::from(program)
        .file_name()
        .is_some_and(|n| n == "rmx");
    if !named_rmx {
        bail!("rmx launch runs rmx commands, as in `rmx launch -n 2 -- rmx bench MODEL`");
    }
    match rest.first().map(String::as_str) {
        Some(sub) if LAUNCHABLE.contains(&sub) => {}
        other => bail!(
            "rmx launch runs {} so far, not {}: serving (run, chat, serve) over ranks is the next \
             step (docs/distributed.md)",
            LAUNCHABLE.join(", "),
            other.map_or("nothing".into(), |s| format!("`{s}`"))
        ),
    }
    let backend = match args.backend {
        LaunchBackend::Ring => CommBackend::Ring,
        LaunchBackend::Nccl => CommBackend::Nccl,
    };
    if backend == CommBackend::Nccl {
        nccl_can_run(&args)?;
    }
    let (hosts, ranks) = match &args.hostfile {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let hosts =
                RingHosts::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let ranks = if args.rank.is_empty() {
                (0..hosts.size()).collect()
            } else {
                args.rank.clone()
            };
            (hosts, ranks)
        }
        None => {
            let n = args.processes.unwrap_or(0);
            if n < 2 {
                bail!("-n needs at least 2 ranks (a model on one process needs no launch)");
            }
            (RingHosts::loopback(n)?, (0..n).collect())
        }
    };
    // nccl's ranks meet at rank 0's port instead of the ring's hostfile; the loopback ring
    // above only counted them.
    let nccl = match backend {
        CommBackend::Nccl => {
            let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
            Some(NcclHosts::loopback(ranks.len(), visible.as_deref())?)
        }
        _ => None,
    };
    let exe = std::env::current_exe().context("finding the rmx executable")?;
    let dir = std::env::temp_dir().join(format!("rmx-launch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mode = match args.mode {
        LaunchMode::Tensor => "tensor",
        LaunchMode::Pipeline => "pipeline",
    };
    let command = |rank| {
        let mut c = Command::new(&exe);
        c.env(EnvVars::RMX_PARALLEL, mode)
            .env(EnvVars::RMX_COMM_BACKEND, backend.name());
        if rank == 0 {
            c.args(rest);
        } else {
            // A worker's stdout is nobody's; its errors go to the launcher's stderr.
            c.arg("worker").stdin(Stdio::null()).stdout(Stdio::null());
        }
        c
    };
    let ring = match &nccl {
        Some(nccl) => LocalRing::spawn_nccl(nccl, command),
        None => LocalRing::spawn_ranks(&hosts, &ranks, &dir, command),
    }
    .context("starting the ranks")?;
    // The first rank started here (rank 0 when it is one of them) runs for as long as the
    // work does; the others end with it (a follower when rank 0 says so or is gone).
    let exits = ring.wait_first(GRACE)?;
    let _ = std::fs::remove_dir_all(&dir);
    for (rank, exit) in ranks.iter().zip(&exits) {
        if !exit.success() && *rank != 0 {
            eprintln!("rmx: rank {rank} {}", describe(exit));
        }
    }
    Ok(match exits.first() {
        Some(RankExit::Exited(s)) if s.success() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// Refuses, before any rank starts, what the nccl backend cannot do here.
fn nccl_can_run(args: &LaunchArgs) -> Result<()> {
    if args.hostfile.is_some() {
        bail!(
            "--backend nccl starts this machine's ranks only (-n N, one GPU each); ranks on \
             several machines use --backend ring with --hostfile"
        );
    }
    if !CommBackend::Nccl.is_available() {
        bail!(
            "this MLX has no nccl backend (CPU build, or CUDA without NCCL): run with \
             --backend ring, or on a machine whose MLX is built with CUDA (docs/distributed.md)"
        );
    }
    Ok(())
}

fn describe(exit: &RankExit) -> String {
    match exit {
        RankExit::Exited(s) => format!("ended with {s}"),
        RankExit::Killed => "was still running and was stopped".into(),
    }
}

/// This process's split, when `rmx launch` started it as a rank.
fn launched_mode() -> Result<Option<ParallelMode>> {
    match rmx_settings::var(EnvVars::RMX_PARALLEL).as_deref() {
        None | Some("") => Ok(None),
        Some("tensor") => Ok(Some(ParallelMode::Tensor)),
        Some("pipeline") => Ok(Some(ParallelMode::Pipeline)),
        Some(other) => bail!(
            "{} is {other:?}: use tensor or pipeline",
            EnvVars::RMX_PARALLEL
        ),
    }
}

/// The backend `rmx launch` chose for this rank.
fn launched_backend() -> Result<CommBackend> {
    match rmx_settings::var(EnvVars::RMX_COMM_BACKEND).as_deref() {
        None | Some("ring") => Ok(CommBackend::Ring),
        Some("nccl") => Ok(CommBackend::Nccl),
        Some(other) => bail!(
            "{} is {other:?}: use ring or nccl",
            EnvVars::RMX_COMM_BACKEND
        ),
    }
}

/// Joins the ranks `rmx launch` started (either mode on either backend: a pipeline over nccl,
/// which has no send/recv, hands over by all_sum; pipeline.rs).
fn join_group() -> Result<Group> {
    let backend = launched_backend()?;
    Group::init_within(backend, START_TIMEOUT).context("joining the launched ranks")
}

/// Rank 0's lead of its group and the split, when `rmx launch` started this process.
pub fn lead() -> Result<Option<(GroupLead, ParallelMode)>> {
    let Some(mode) = launched_mode()? else {
        return Ok(None);
    };
    let group = join_group()?;
    let lead = GroupLead::new(group)?;
    eprintln!("rmx: split over {} ranks ({})", lead.size(), mode.name());
    Ok(Some((lead, mode)))
}

/// `rmx worker`: a rank other than 0, following rank 0 until it is done.
pub fn worker() -> Result<ExitCode> {
    // A worker learns the mode of each model from rank 0's load word (group.rs).
    if launched_mode()?.is_none() {
        bail!("rmx worker is started by rmx launch, not by hand");
    }
    let group = join_group()?;
    let rank = group.rank();
    rmx_engine::group::follow(group).with_context(|| format!("rank {rank}"))?;
    Ok(ExitCode::SUCCESS)
}
