//! MLX's distributed layer through the bindings, with real ranks: each test starts 2 or 4
//! processes of this test binary (re-run with `RANK_ROLE` naming what a rank does) joined by
//! the ring backend over loopback, and checks what every rank computed.
#![allow(clippy::unwrap_used)] // test helpers panic on failure by design

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmx_mlx::distributed::{depends, CommBackend, Group, LocalRing, RankExit};
use rmx_mlx::{Array, Dtype, Error};

/// Set in a rank's process: which role it plays (the test's name).
const RANK_ROLE: &str = "RMX_TEST_RANK_ROLE";
/// Long enough for a loaded CI machine to start 4 processes; a hang fails, not blocks.
const RANKS_DEADLINE: Duration = Duration::from_secs(120);

/// Runs `test` (this binary's test of that name) as `n` ranks; each rank's stdout and stderr.
fn run_ranks(test: &str, n: usize, env: &[(&str, &str)]) -> Vec<(RankExit, String)> {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let log = |r: usize| dir.path().join(format!("rank{r}.log"));
    let ring = LocalRing::spawn(n, dir.path(), |rank| {
        let out = std::fs::File::create(log(rank)).unwrap();
        let mut c = Command::new(&exe);
        c.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(RANK_ROLE, test)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        c
    })
    .unwrap();
    let exits = ring.wait_within(RANKS_DEADLINE).unwrap();
    exits
        .into_iter()
        .enumerate()
        .map(|(r, e)| (e, std::fs::read_to_string(log(r)).unwrap_or_default()))
        .collect()
}

fn assert_all_ranks_pass(results: &[(RankExit, String)]) {
    for (rank, (exit, out)) in results.iter().enumerate() {
        assert!(exit.success(), "rank {rank} {exit:?}:\n{out}");
        assert!(out.contains("rank checks passed"), "rank {rank}:\n{out}");
    }
}

fn role() -> Option<String> {
    std::env::var(RANK_ROLE).ok()
}

fn f32s(a: &Array) -> Vec<f32> {
    a.to_vec::<f32>().unwrap()
}

/// What every rank checks: sums, gathers, max/min and a message to each ring neighbour.
fn collectives_rank() {
    let g = Group::init_within(CommBackend::Ring, Duration::from_secs(60)).unwrap();
    let (r, n) = (g.rank(), g.size());
    assert_eq!(n.to_string(), std::env::var("RANKS").unwrap());
    assert_eq!(r.to_string(), std::env::var("MLX_RANK").unwrap());
    let mine = Array::from_slice(&[r as f32 + 1.0, -10.0 * r as f32], &[1, 2]).unwrap();

    let sum = g.all_sum(&mine).unwrap();
    let total: f32 = (1..=n).map(|k| k as f32).sum();
    let neg: f32 = (0..n).map(|k| -10.0 * k as f32).sum();
    assert_eq!(f32s(&sum), vec![total, neg]);

    // An int32 step descriptor, as the engine broadcasts one: only rank 0 contributes.
    let step = if r == 0 { [7i32, -3, 2048] } else { [0; 3] };
    let got = g.all_sum(&Array::from_slice(&step, &[3]).unwrap()).unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), vec![7, -3, 2048]);

    let gathered = g.all_gather(&mine).unwrap();
    assert_eq!(gathered.shape(), vec![n, 2]);
    let want: Vec<f32> = (0..n)
        .flat_map(|k| [k as f32 + 1.0, -10.0 * k as f32])
        .collect();
    assert_eq!(f32s(&gathered), want);

    let bf = mine.astype(Dtype::Bf16).unwrap();
    let gathered = g.all_gather(&bf).unwrap();
    assert_eq!(gathered.dtype(), Dtype::Bf16);
    assert_eq!(f32s(&gathered), want);

    assert_eq!(f32s(&g.all_max(&mine).unwrap()), vec![n as f32, 0.0]);
    assert_eq!(
        f32s(&g.all_min(&mine).unwrap()),
        vec![1.0, -10.0 * (n - 1) as f32]
    );

    // Around the ring: send to the right, receive from the left. The receive depends on the
    // send, so every rank has sent before it waits (else all wait first and none sends).
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    let sent = g.send(&mine, right).unwrap();
    let got = g.recv(&[1, 2], Dtype::F32, left).unwrap();
    let got = depends(&[&got], &[&sent]).unwrap().remove(0);
    assert_eq!(f32s(&got), vec![left as f32 + 1.0, -10.0 * left as f32]);
    let got = g.recv_like(&mine, left).unwrap();
    let sent = g.send(&mine.multiply_scalar(2.0).unwrap(), right).unwrap();
    let got = depends(&[&got], &[&sent]).unwrap().remove(0);
    assert_eq!(
        f32s(&got),
        vec![2.0 * (left as f32 + 1.0), -20.0 * left as f32]
    );
    println!("rank {r}: rank checks passed");
}

#[test]
fn collectives_on_two_ranks() {
    if role().is_some() {
        return collectives_rank();
    }
    assert_all_ranks_pass(&run_ranks("collectives_on_two_ranks", 2, &[("RANKS", "2")]));
}

#[test]
fn collectives_on_four_ranks() {
    if role().is_some() {
        return collectives_rank();
    }
    assert_all_ranks_pass(&run_ranks(
        "collectives_on_four_ranks",
        4,
        &[("RANKS", "4")],
    ));
}

/// A rank whose peer never starts: the ring's rank 0 waits in `accept` for ever and rank 1
/// retries its connection for about 30 s, so `init_within` must give up on its own.
fn lonely_rank() {
    let wait = Duration::from_secs(3);
    let started = Instant::now();
    let err = Group::init_within(CommBackend::Ring, wait).unwrap_err();
    let took = started.elapsed();
    let msg = err.to_string();
    assert!(matches!(err, Error::Distributed { .. }), "{err:?}");
    assert!(msg.contains("did not all connect within 3 s"), "{msg}");
    assert!(msg.contains("rmx launch"), "{msg}");
    assert!(msg.contains("MLX_RANK="), "{msg}");
    println!("took {took:?}: {msg}");
    println!("rank checks passed");
    // MLX's wait goes on in its thread; ending the process is what the error asks for.
    std::process::exit(0);
}

#[test]
fn a_missing_peer_is_an_error_within_the_timeout() {
    if role().is_some() {
        return lonely_rank();
    }
    // Both sides of the missing link: the rank that accepts first and the one that connects
    // first, each alone in a ring of two.
    for rank in ["0", "1"] {
        let dir = tempfile::tempdir().unwrap();
        let hostfile: PathBuf = dir.path().join("hostfile.json");
        let hosts = rmx_mlx::distributed::RingHosts::loopback(2).unwrap();
        hosts.write(&hostfile).unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "a_missing_peer_is_an_error_within_the_timeout",
                "--exact",
                "--nocapture",
            ])
            .env(RANK_ROLE, "lonely")
            .env("MLX_RANK", rank)
            .env("MLX_HOSTFILE", &hostfile)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "rank {rank} alone:\n{text}");
        assert!(
            text.contains("rank checks passed"),
            "rank {rank} alone:\n{text}"
        );
    }
}

#[test]
fn strict_ring_without_its_environment_says_what_is_missing() {
    if role().is_some() {
        return;
    }
    // This process has no MLX_RANK / MLX_HOSTFILE (only the ranks started above get them).
    assert!(std::env::var("MLX_RANK").is_err());
    let err = Group::init(CommBackend::Ring, true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("MLX_RANK"), "{err}");
    assert!(err.contains("the ring backend did not start"), "{err}");
    assert!(CommBackend::Ring.is_available());
    assert!("ring".parse::<CommBackend>().unwrap() == CommBackend::Ring);
    let err = "tcp".parse::<CommBackend>().unwrap_err().to_string();
    assert!(err.contains("use ring, jaccl, mpi, nccl or any"), "{err}");
}

#[test]
fn a_single_process_group_passes_arrays_through() {
    if role().is_some() {
        return;
    }
    let g = Group::init(CommBackend::Any, false).unwrap();
    assert_eq!((g.rank(), g.size()), (0, 1));
    let x = Array::from_slice(&[1.5f32, -2.0], &[2]).unwrap();
    assert_eq!(f32s(&g.all_sum(&x).unwrap()), vec![1.5, -2.0]);
    assert_eq!(f32s(&g.clone().all_gather(&x).unwrap()), vec![1.5, -2.0]);
}
