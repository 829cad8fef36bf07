//! Several ranks as processes of this machine, joined by the ring backend over loopback (or by
//! nccl, one GPU each): what `rmx launch -n N` does without a hostfile, and how the tests run 2
//! and 4 ranks on one CPU machine. The caller builds each rank's command (program, arguments,
//! where its output goes); this adds the backend's environment, and stops every rank that
//! outlives a deadline or the `LocalRing` itself, so a rank waiting on a dead peer cannot hang
//! its launcher.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use super::{JacclHosts, NcclHosts, RingHosts};

/// Refuses a rank past a group of `size`.
fn in_group(ranks: &[usize], size: usize) -> io::Result<()> {
    match ranks.iter().find(|&&r| r >= size) {
        Some(bad) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("rank {bad} is not in a group of {size}"),
        )),
        None => Ok(()),
    }
}

/// Running ranks; dropping it kills those still running.
pub struct LocalRing {
    /// The ring's hostfile; `None` for nccl ranks, which need none.
    hostfile: Option<PathBuf>,
    children: Vec<Option<Child>>,
}

/// How one rank ended.
#[derive(Debug)]
pub enum RankExit {
    Exited(ExitStatus),
    /// Still running at the deadline, and killed.
    Killed,
}

impl RankExit {
    pub fn success(&self) -> bool {
        matches!(self, RankExit::Exited(s) if s.success())
    }
}

impl LocalRing {
    /// Starts `n` ranks: `command(rank)` with `MLX_RANK` and `MLX_HOSTFILE` set, the hostfile
    /// (free loopback ports) written as `dir/hostfile.json`.
    pub fn spawn(
        n: usize,
        dir: &Path,
        command: impl FnMut(usize) -> Command,
    ) -> io::Result<LocalRing> {
        let hosts = RingHosts::loopback(n)?;
        let ranks: Vec<usize> = (0..n).collect();
        LocalRing::spawn_ranks(&hosts, &ranks, dir, command)
    }

    /// Starts `ranks` of the ring `hosts` describes (this machine's share of a ring over
    /// several machines; the others start theirs), the hostfile written as
    /// `dir/hostfile.json`. The ranks are held in the order given.
    pub fn spawn_ranks(
        hosts: &RingHosts,
        ranks: &[usize],
        dir: &Path,
        command: impl FnMut(usize) -> Command,
    ) -> io::Result<LocalRing> {
        in_group(ranks, hosts.size())?;
        let hostfile = dir.join("hostfile.json");
        hosts.write(&hostfile)?;
        let env = |rank| RingHosts::env(rank, &hostfile);
        LocalRing::start(Some(hostfile.clone()), ranks, env, command)
    }

    /// Starts every rank `hosts` describes with the nccl backend's environment, one GPU each.
    pub fn spawn_nccl(
        hosts: &NcclHosts,
        command: impl FnMut(usize) -> Command,
    ) -> io::Result<LocalRing> {
        let ranks: Vec<usize> = (0..hosts.size).collect();
        LocalRing::start(None, &ranks, |rank| hosts.env(rank), command)
    }

    /// Starts `ranks` of the jaccl group `hosts` describes (this machine's share; the other
    /// machines start theirs), rank 0 coordinating on `port`, the devices file written as
    /// `dir/ibv_devices.json`.
    pub fn spawn_jaccl(
        hosts: &JacclHosts,
        ranks: &[usize],
        port: u16,
        dir: &Path,
        command: impl FnMut(usize) -> Command,
    ) -> io::Result<LocalRing> {
        in_group(ranks, hosts.size())?;
        let devices = dir.join("ibv_devices.json");
        std::fs::write(&devices, hosts.devices_json())?;
        LocalRing::start(None, ranks, |rank| hosts.env(rank, &devices, port), command)
    }

    fn start<E: IntoIterator<Item = (&'static str, String)>>(
        hostfile: Option<PathBuf>,
        ranks: &[usize],
        env: impl Fn(usize) -> E,
        mut command: impl FnMut(usize) -> Command,
    ) -> io::Result<LocalRing> {
        let mut ring = LocalRing {
            hostfile,
            children: Vec::with_capacity(ranks.len()),
        };
        for &rank in ranks {
            let mut c = command(rank);
            c.envs(env(rank));
            // On failure `ring` drops here and stops the ranks already started.
            ring.children.push(Some(c.spawn()?));
        }
        Ok(ring)
    }

    /// The ring's hostfile (`None` for nccl ranks).
    pub fn hostfile(&self) -> Option<&Path> {
        self.hostfile.as_deref()
    }

    /// The write end of the `i`-th started rank's stdin, when its command asked for a pipe
    /// (`Stdio::piped()`); taken once. A supervisor keeps it as a lifeline: closing it tells
    /// the rank its group is gone.
    pub fn take_stdin(&mut self, i: usize) -> Option<std::process::ChildStdin> {
        self.children.get_mut(i)?.as_mut()?.stdin.take()
    }

    /// The first rank found ended, without waiting: its index among the started ranks and its
    /// exit (the rank is no longer held). `None` while all still run.
    pub fn try_exited(&mut self) -> io::Result<Option<(usize, ExitStatus)>> {
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Some(s) = c.as_mut().map(Child::try_wait).transpose()?.flatten() {
                *c = None;
                return Ok(Some((i, s)));
            }
        }
        Ok(None)
    }

    /// Process ids of the ranks still held, in rank order.
    pub fn pids(&self) -> Vec<Option<u32>> {
        self.children
            .iter()
            .map(|c| c.as_ref().map(Child::id))
            .collect()
    }

    /// Waits for every rank until `timeout` has passed, then kills the rest.
    pub fn wait_within(mut self, timeout: Duration) -> io::Result<Vec<RankExit>> {
        let deadline = Instant::now() + timeout;
        let mut exits: Vec<Option<RankExit>> = self.children.iter().map(|_| None).collect();
        loop {
            for (c, exit) in self.children.iter_mut().zip(exits.iter_mut()) {
                if exit.is_none() {
                    if let Some(s) = c.as_mut().map(Child::try_wait).transpose()?.flatten() {
                        *exit = Some(RankExit::Exited(s));
                        *c = None;
                    }
                }
            }
            // A slot no longer held (wait_first's rank, taken before) has nothing to wait for;
            // counting it as running made every launch sit out the whole grace.
            let running = exits
                .iter()
                .zip(&self.children)
                .any(|(e, c)| e.is_none() && c.is_some());
            if !running {
                break;
            }
            if Instant::now() >= deadline {
                self.kill_all();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(exits
            .into_iter()
            .map(|e| e.unwrap_or(RankExit::Killed))
            .collect())
    }

    /// Waits for the first rank held (for as long as it runs: the one that does the work),
    /// then gives the others `grace` to end, and kills those still running.
    pub fn wait_first(mut self, grace: Duration) -> io::Result<Vec<RankExit>> {
        let first = match self.children.first_mut().and_then(Option::take) {
            Some(mut c) => Some(RankExit::Exited(c.wait()?)),
            None => None,
        };
        let rest = self.wait_within(grace)?;
        Ok(first.into_iter().chain(rest.into_iter().skip(1)).collect())
    }

    /// Kills every rank still running and reaps it.
    pub fn kill_all(&mut self) {
        for c in self.children.iter_mut().filter_map(Option::take) {
            let mut c = c;
            // Already gone is fine: either way it no longer runs.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LocalRing {
    fn drop(&mut self) {
        self.kill_all();
    }
}
