//! `rmx launch`: starts the ranks of a model split over processes — rank 0 runs the user's
//! command, every other rank `rmx worker` — with the MLX backend's settings (the ring's
//! `MLX_RANK`, `MLX_HOSTFILE`; or nccl's, one GPU a rank), the backend (`RMX_COMM_BACKEND`)
//! and the split (`RMX_PARALLEL`) in their environment, and waits for rank 0. Commands that
//! load a model ask [`lead`] whether they are rank 0 of such a group.
//!
//! A serving group (`rmx serve` as rank 0) is supervised: when a rank ends, every rank is
//! started again. MLX hands a process the same group for its whole life, and a group that
//! lost a peer stays broken, so rank 0 cannot join a new one in place: it fails its running
//! answers (a 503, or the stream's error event), ends with [`GROUP_LOST_EXIT`], and comes back
//! with the others. Rank 0's stdin is the launcher's lifeline: the launcher closes it when a
//! worker ends, which a rank 0 with no answer running (so no collective to fail) would not
//! otherwise notice.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rmx_engine::group::GroupLead;
use rmx_engine::ParallelMode;
use rmx_mlx::distributed::{
    CommBackend, Group, JacclHosts, LocalRing, NcclHosts, RankExit, RingHosts,
};
use rmx_settings::EnvVars;

use crate::cli::{LaunchArgs, LaunchBackend, LaunchMode};

/// How long ranks wait for each other to start: long enough to start `rmx launch` on a second
/// machine by hand.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the other ranks get to end after rank 0 has.
const GRACE: Duration = Duration::from_secs(10);

/// The rmx commands that run over ranks so far.
const LAUNCHABLE: &[&str] = &["bench", "chat", "doctor", "run", "serve"];

/// The clients of the daemon: under launch, rank 0 serves privately and the client runs
/// against it here (see [`run_client`]).
const CLIENTS: &[&str] = &["chat", "run"];

/// "bench, chat, doctor, run and serve".
fn launchable() -> String {
    match LAUNCHABLE.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Rank 0's exit when its group lost a rank (EX_TEMPFAIL): the launcher starts the group
/// again.
pub const GROUP_LOST_EXIT: u8 = 75;
/// How long rank 0 gets to fail its answers and end once its group is gone.
const RANK0_ENDS: Duration = Duration::from_secs(15);
/// A group that fails this soon after it started, this many times in a row, is not started
/// again: something other than a lost rank is wrong.
const QUICK_FAILURE: Duration = Duration::from_secs(10);
const QUICK_FAILURES: u32 = 3;

pub fn run(args: LaunchArgs) -> Result<ExitCode> {
    let (program, rest) = args.command.split_first().context("no command to launch")?;
    let named_rmx = PathBuf::from(program)
        .file_name()
        .is_some_and(|n| n == "rmx");
    if !named_rmx {
        bail!("rmx launch runs rmx commands, as in `rmx launch -n 2 -- rmx bench MODEL`");
    }
    let client = rest.first().filter(|s| CLIENTS.contains(&s.as_str()));
    match rest.first().map(String::as_str) {
        Some(sub) if LAUNCHABLE.contains(&sub) => {}
        other => bail!(
            "rmx launch runs {} so far, not {} (docs/distributed.md)",
            launchable(),
            other.map_or("nothing".into(), |s| format!("`{s}`"))
        ),
    }
    if let Some(sub) = client {
        if args.hostfile.is_some() {
            bail!(
                "`rmx launch --hostfile F -- rmx {sub}` is not supported: on several machines \
                 start `rmx launch --hostfile F --rank R -- rmx serve` on each, then `rmx {sub}` \
                 (without launch) on rank 0's machine talks to its daemon"
            );
        }
        // The client would talk to that daemon, unsplit, instead of the one started here.
        if crate::daemon::runtime()?
            .block_on(crate::daemon::running())?
            .is_some()
        {
            bail!(
                "an rmx daemon already runs for this rmx home ({}): `rmx launch -- rmx {sub}` \
                 starts its own, split over the ranks; stop the running one first, or start it \
                 as `rmx launch -n N -- rmx serve` and run `rmx {sub}` without launch",
                crate::daemon::paths()?.socket.display()
            );
        }
    }
    let backend = match args.backend {
        LaunchBackend::Ring => CommBackend::Ring,
        LaunchBackend::Nccl => CommBackend::Nccl,
        LaunchBackend::Jaccl => CommBackend::Jaccl,
    };
    if backend == CommBackend::Nccl {
        nccl_can_run(&args)?;
    }
    let jaccl = match backend {
        CommBackend::Jaccl => Some(jaccl_hosts(&args)?),
        _ => None,
    };
    let (hosts, ranks) = match &args.hostfile {
        // The jaccl group is its hostfile's; the ring below only counts its ranks.
        Some(_) if jaccl.is_some() => {
            let n = jaccl.as_ref().map_or(0, JacclHosts::size);
            let ranks = if args.rank.is_empty() {
                (0..n).collect()
            } else {
                args.rank.clone()
            };
            (RingHosts { ranks: Vec::new() }, ranks)
        }
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
    // A client's group serves it privately: rank 0 is a daemon that yields a taken TCP port.
    let rank0: Vec<String> = match client {
        Some(_) => vec!["serve".into(), "--background".into()],
        None => rest.to_vec(),
    };
    let serving = rank0.first().is_some_and(|s| s == "serve");
    // Every rank on this machine: rank 0 wakes the others by a Unix socket instead of their
    // polling while it idles (rmx-engine doorbell.rs); a new one for each start of the group.
    let local = args.hostfile.is_none();
    let generation = std::cell::Cell::new(0u32);
    // A client's ranks write to the daemon log, as a background daemon does, not into the
    // client's terminal.
    let client_log = match client {
        Some(_) => Some(crate::daemon::open_log(
            &crate::daemon::paths()?,
            "rmx launch",
        )?),
        None => None,
    };
    // A serving group whose ranks are all here is started again when one ends (a client's
    // private daemon is not: it ends with the client).
    let supervised = serving && client.is_none() && args.hostfile.is_none();
    let mut command = |rank| {
        let mut c = Command::new(&exe);
        if let Some(log) = &client_log {
            // Their own process group: a Ctrl-C at the client's prompt must not stop them.
            c.process_group(0)
                .stdout(log.try_clone().map_or(Stdio::null(), Stdio::from))
                .stderr(log.try_clone().map_or(Stdio::null(), Stdio::from));
        }
        c.env(EnvVars::RMX_PARALLEL, mode)
            .env(EnvVars::RMX_COMM_BACKEND, backend.name());
        if local {
            let bell = dir.join(format!("doorbell-{}", generation.get()));
            c.env(EnvVars::RMX_DOORBELL, bell);
        }
        if supervised {
            c.env(EnvVars::RMX_LAUNCHER_PID, std::process::id().to_string());
        }
        if rank == 0 {
            c.args(&rank0);
            if serving {
                c.stdin(Stdio::piped());
            }
        } else {
            // A worker's stdout is nobody's; its errors go to the launcher's stderr.
            c.arg("worker").stdin(Stdio::null());
            if client_log.is_none() {
                c.stdout(Stdio::null());
            }
        }
        c
    };
    if supervised {
        let code = supervise(&dir, |dir| {
            generation.set(generation.get() + 1);
            match &nccl {
                Some(nccl) => LocalRing::spawn_nccl(nccl, &mut command),
                None => {
                    let fresh = RingHosts::loopback(ranks.len())?;
                    LocalRing::spawn_ranks(&fresh, &ranks, dir, &mut command)
                }
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
        return code;
    }
    let mut ring = match (&nccl, &jaccl) {
        (Some(nccl), _) => LocalRing::spawn_nccl(nccl, command),
        (_, Some(j)) => LocalRing::spawn_jaccl(j, &ranks, args.coordinator_port, &dir, command),
        _ => LocalRing::spawn_ranks(&hosts, &ranks, &dir, command),
    }
    .context("starting the ranks")?;
    if client.is_some() {
        let code = run_client(&exe, rest, ring);
        let _ = std::fs::remove_dir_all(&dir);
        return code;
    }
    // A serving rank 0's lifeline (with a hostfile: not supervised) stays open until it ends;
    // waiting on a child would close it first.
    let lifeline = ring.take_stdin(0);
    // The first rank started here (rank 0 when it is one of them) runs for as long as the
    // work does; the others end with it (a follower when rank 0 says so or is gone).
    let exits = ring.wait_first(GRACE)?;
    drop(lifeline);
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

/// `rmx launch -- rmx run|chat`: waits for the group's daemon (rank 0) to answer on this rmx
/// home's socket, runs the client command against it with this terminal, then stops the group
/// (SIGTERM to rank 0, as to any daemon; the workers end with it). Not supervised: a rank that
/// dies fails the client's answer, and the group ends with the client.
fn run_client(exe: &Path, client: &[String], mut ring: LocalRing) -> Result<ExitCode> {
    let lifeline = ring.take_stdin(0);
    let rt = crate::daemon::runtime()?;
    // A Ctrl-C at the client's prompt reaches this process too (one terminal, one process
    // group): taken here, it leaves the launcher (and with it the group) running; the client
    // decides what a Ctrl-C means.
    let _interrupts = rt
        .block_on(async {
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        })
        .context("listening for Ctrl-C")?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if rt.block_on(crate::daemon::running())?.is_some() {
            break;
        }
        if let Some((i, status)) = ring.try_exited()? {
            ring.kill_all();
            bail!("rank {i} ended ({status}) before the group's daemon answered; its errors are above");
        }
        if Instant::now() >= deadline {
            ring.kill_all();
            bail!(
                "the group's daemon did not answer within {} s",
                START_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new(exe).args(client).status();
    if let Some(Some(pid)) = ring.pids().first() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    drop(lifeline);
    let exits = ring.wait_within(GRACE)?;
    for (rank, exit) in exits.iter().enumerate() {
        if !exit.success() {
            eprintln!("rmx: rank {rank} {}", describe(exit));
        }
    }
    let status = status.with_context(|| format!("running {}", exe.display()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}

/// Runs a serving group until rank 0 ends for another reason than a lost rank, starting every
/// rank again (`start`, on fresh loopback ports) whenever one ends.
fn supervise(
    dir: &Path,
    mut start: impl FnMut(&Path) -> std::io::Result<LocalRing>,
) -> Result<ExitCode> {
    let mut quick = 0;
    loop {
        let mut ring = start(dir).context("starting the ranks")?;
        let started = Instant::now();
        let lifeline = ring.take_stdin(0);
        let (first, status) = first_exit(&mut ring, None)?.context("no rank was started")?;
        // A worker that ended well was told by rank 0 that the group is done (its daemon is
        // stopping): what rank 0's own exit says decides.
        let rank0 = if first == 0 {
            Some(status)
        } else if status.success() {
            first_exit(&mut ring, Some(0))?.map(|(_, s)| s)
        } else {
            None
        };
        match rank0 {
            Some(s) if !lost_its_group(&s) => {
                // The daemon stopped (asked to, or an error of its own): the workers end too.
                drop(lifeline);
                let exits = ring.wait_within(GRACE)?;
                for (rank, exit) in exits.iter().enumerate().skip(1) {
                    if !exit.success() {
                        eprintln!("rmx: rank {rank} {}", describe(exit));
                    }
                }
                return Ok(if s.success() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                });
            }
            Some(s) => {
                eprintln!("rmx: rank 0 ended ({s}): starting every rank again");
                drop(lifeline);
            }
            None => {
                eprintln!("rmx: rank {first} ended ({status}): starting the group again");
                // Rank 0 fails its running answers and ends; then every rank starts again.
                drop(lifeline);
                if first_exit(&mut ring, Some(0))?.is_none() {
                    eprintln!("rmx: rank 0 did not end within {} s", RANK0_ENDS.as_secs());
                }
            }
        }
        ring.kill_all();
        quick = if started.elapsed() < QUICK_FAILURE {
            quick + 1
        } else {
            0
        };
        if quick >= QUICK_FAILURES {
            bail!(
                "the group failed {quick} times within {} s of starting: not starting it again \
                 (the ranks' errors above say why)",
                QUICK_FAILURE.as_secs()
            );
        }
    }
}

/// Whether rank 0 ended so that its group must start again: it said its group is gone, or it
/// died of a signal nobody sends to stop a daemon (killed by the OOM killer, a crash). SIGINT,
/// SIGTERM and SIGHUP stop it, as they stop a daemon of one process.
fn lost_its_group(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    const STOPS: [i32; 3] = [1, 2, 15]; // SIGHUP, SIGINT, SIGTERM
    status.code() == Some(i32::from(GROUP_LOST_EXIT))
        || status.signal().is_some_and(|s| !STOPS.contains(&s))
}

/// Waits for the first of the started ranks to end (`only`: for that one, at most
/// [`RANK0_ENDS`], `None` if it did not); its index and exit.
fn first_exit(ring: &mut LocalRing, only: Option<usize>) -> Result<Option<(usize, ExitStatus)>> {
    let deadline = Instant::now() + RANK0_ENDS;
    loop {
        match ring.try_exited()? {
            Some((i, s)) if only.is_none_or(|o| o == i) => return Ok(Some((i, s))),
            Some(_) => {}
            None if ring.pids().iter().all(Option::is_none) => return Ok(None),
            None if only.is_some() && Instant::now() >= deadline => return Ok(None),
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Refuses, before any rank starts, what the nccl backend cannot do here.
/// The jaccl group of `--hostfile` (mlx.launch's jaccl hostfile), refused where it cannot run:
/// without a hostfile (jaccl links machines; one machine's ranks use the ring) or on an MLX
/// without jaccl.
fn jaccl_hosts(args: &LaunchArgs) -> Result<JacclHosts> {
    let Some(file) = &args.hostfile else {
        bail!(
            "--backend jaccl links Macs by RDMA over Thunderbolt 5: give their hostfile              (--hostfile, mlx.launch's jaccl format) and --rank; ranks of one machine use              -n N with the ring"
        );
    };
    if !CommBackend::Jaccl.is_available() {
        bail!(
            "this MLX has no jaccl backend (it comes with MLX on macOS 26.2 and later, for RDMA              over Thunderbolt 5): run with --backend ring over the Thunderbolt bridge or              Ethernet (docs/distributed.md)"
        );
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    JacclHosts::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

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
    let group = Group::init_within(backend, START_TIMEOUT).context("joining the launched ranks")?;
    if let Some(bell) = rmx_settings::var(EnvVars::RMX_DOORBELL).filter(|b| !b.is_empty()) {
        // Every rank has the same variable, so either all ring or none: a rank that cannot
        // ends, and its group with it.
        let bell = PathBuf::from(bell);
        let followers = usize::try_from(group.size() - 1).unwrap_or(0);
        let rung = if group.rank() == 0 {
            rmx_engine::doorbell::lead(&bell, followers, START_TIMEOUT)
        } else {
            rmx_engine::doorbell::follow(&bell, START_TIMEOUT)
        };
        rung.with_context(|| format!("rank {}'s doorbell {}", group.rank(), bell.display()))?;
    }
    Ok(group)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_serving_rank_0_restarts_its_group_on_a_lost_group_or_a_crash_only() {
        // wait(2) statuses: an exit code in the second byte, a signal in the low bits.
        let exited = |code: i32| ExitStatus::from_raw(code << 8);
        let killed = |signal: i32| ExitStatus::from_raw(signal);
        assert!(lost_its_group(&exited(i32::from(GROUP_LOST_EXIT))));
        assert!(lost_its_group(&killed(9)), "SIGKILL (the OOM killer)");
        assert!(lost_its_group(&killed(11)), "SIGSEGV");
        assert!(!lost_its_group(&exited(0)));
        assert!(
            !lost_its_group(&exited(1)),
            "an error of its own, as a taken port"
        );
        for stop in [1, 2, 15] {
            assert!(
                !lost_its_group(&killed(stop)),
                "signal {stop} stops the daemon"
            );
        }
    }
}
