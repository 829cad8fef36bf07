//! One model split over 2 and 4 ranks (processes of this test binary joined by MLX's ring
//! backend over loopback, tensor parallel): every rank's engine must give the greedy tokens of
//! the whole model in one process, and hold about 1/N of its memory. The f32 tiny models have
//! no ties between logits, so the tokens must be equal although the split sums partial
//! products in another order.
//!
//! Each rank is given the same request, which is all it takes while one request runs: the
//! engine's steps follow from its requests alone.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use rmx_engine::{Engine, EngineOptions, Event, FinishReason, GenerateRequest};
use rmx_mlx::distributed::{CommBackend, Group, LocalRing, RankExit};
use rmx_models::TensorParallel;
use rmx_tests::models;

/// Set in a rank's process: the model folder it loads.
const MODEL_DIR: &str = "RMX_TEST_TP_MODEL";
const MAX_TOKENS: usize = 24;
const PROMPT: &str = "In the beginning of the long winter the villagers gathered wood";
/// Generous for 5 processes on a loaded 2-core machine; a hang fails instead of blocking.
const DEADLINE: Duration = Duration::from_secs(300);

/// What one process reports.
#[derive(Debug)]
struct Report {
    tokens: Vec<u32>,
    /// MLX's active memory once the answer is done (weights, with the cache freed).
    active_bytes: usize,
}

fn parse(out: &str) -> Option<Report> {
    // The harness prints "test NAME ... " before the test's own output, on the same line.
    let line = out
        .lines()
        .find_map(|l| l.split_once("TP-REPORT ").map(|(_, r)| r))?;
    let (tokens, bytes) = line.split_once(" active_bytes=")?;
    let tokens = tokens.strip_prefix("tokens=")?;
    Some(Report {
        tokens: tokens
            .split(',')
            .map(|t| t.parse().ok())
            .collect::<Option<Vec<u32>>>()?,
        active_bytes: bytes.trim().parse().ok()?,
    })
}

/// A rank's (or the single process's) part: load, generate greedily, report.
fn rank_main(dir: &Path) {
    let engine = if std::env::var("MLX_RANK").is_ok() {
        let group = Group::init_within(CommBackend::Ring, Duration::from_secs(120)).unwrap();
        let tp = TensorParallel::new(group);
        Engine::load_tensor_parallel(dir, EngineOptions::from_env(), tp).unwrap()
    } else {
        Engine::load(dir).unwrap()
    };
    let prompt = engine.tokenizer().encode(PROMPT, true).unwrap();
    let mut req = GenerateRequest::new(prompt, MAX_TOKENS);
    req.ignore_eos = true;
    req.no_prefix_cache = true;
    let mut rx = engine.generate(req).unwrap();
    let mut tokens = vec![];
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Token { id, .. } => tokens.push(id),
            Event::Done { finish, .. } => {
                assert_eq!(finish, FinishReason::Length);
                break;
            }
            Event::Error(e) => panic!("generation failed: {e}"),
        }
    }
    rmx_mlx::clear_cache();
    let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
    println!(
        "TP-REPORT tokens={} active_bytes={}",
        ids.join(","),
        rmx_mlx::active_memory()
    );
}

fn this_test(test: &str, dir: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(MODEL_DIR, dir)
        .stdin(Stdio::null());
    c
}

fn single_process(test: &str, dir: &Path) -> Report {
    let out = this_test(test, dir).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "single process:\n{text}");
    parse(&text).unwrap_or_else(|| panic!("no report from the single process:\n{text}"))
}

fn ranks(test: &str, dir: &Path, n: usize) -> Vec<Report> {
    let logs = tempfile::tempdir().unwrap();
    let log = |r: usize| logs.path().join(format!("rank{r}.log"));
    let ring = LocalRing::spawn(n, logs.path(), |rank| {
        let f = std::fs::File::create(log(rank)).unwrap();
        let mut c = this_test(test, dir);
        c.stdout(f.try_clone().unwrap()).stderr(f);
        c
    })
    .unwrap();
    let exits = ring.wait_within(DEADLINE).unwrap();
    exits
        .iter()
        .enumerate()
        .map(|(r, exit): (usize, &RankExit)| {
            let text = std::fs::read_to_string(log(r)).unwrap_or_default();
            assert!(exit.success(), "rank {r} of {n} {exit:?}:\n{text}");
            parse(&text).unwrap_or_else(|| panic!("no report from rank {r} of {n}:\n{text}"))
        })
        .collect()
}

/// The tokens of the whole model, then of 2 and 4 ranks, compared.
fn split_matches_whole(test: &str, family: &str) {
    if let Ok(dir) = std::env::var(MODEL_DIR) {
        return rank_main(&PathBuf::from(dir));
    }
    let dir = models::model(family, "f32");
    // Several tests' ranks at once would share the 2 cores of a CI machine with 9 processes.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let whole = single_process(test, &dir);
    assert_eq!(whole.tokens.len(), MAX_TOKENS);
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "{family}-f32 in one process: {:.2} MiB active, tokens {:?}",
        mib(whole.active_bytes),
        whole.tokens
    );
    for n in [2, 4] {
        let reports = ranks(test, &dir, n);
        for (r, rep) in reports.iter().enumerate() {
            println!(
                "{family}-f32 rank {r} of {n}: {:.2} MiB active ({:.3} of the whole; 1/{n} = {:.3})",
                mib(rep.active_bytes),
                rep.active_bytes as f64 / whole.active_bytes as f64,
                1.0 / n as f64
            );
            assert_eq!(
                rep.tokens, whole.tokens,
                "{family}: rank {r} of {n} differs from the whole model"
            );
            // The embedding and output projection dominate these models and are split evenly;
            // norms (kept whole) and KV heads copied to several ranks add a little.
            let share = whole.active_bytes / n;
            assert!(
                rep.active_bytes < share + share / 10,
                "{family}: rank {r} of {n} holds {} bytes, the whole model {} bytes",
                rep.active_bytes,
                whole.active_bytes
            );
        }
    }
}

#[test]
fn llama_split_over_2_and_4_ranks_gives_the_whole_models_tokens() {
    split_matches_whole(
        "llama_split_over_2_and_4_ranks_gives_the_whole_models_tokens",
        "llama",
    );
}

#[test]
fn qwen3_split_over_2_and_4_ranks_gives_the_whole_models_tokens() {
    split_matches_whole(
        "qwen3_split_over_2_and_4_ranks_gives_the_whole_models_tokens",
        "qwen3",
    );
}
