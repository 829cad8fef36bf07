//! One model split over 2 and 4 ranks (processes of this test binary joined by MLX's ring
//! backend over loopback), tensor- and pipeline-parallel: every rank's engine must give the
//! greedy tokens of the whole model in one process, and hold about 1/N of its memory. The f32
//! tiny models have no ties between logits, so the tokens must be equal although a tensor
//! split sums partial products in another order.
//!
//! Each rank is given the same request, which is all it takes while one request runs: the
//! engine's steps follow from its requests alone.
//!
//! The tiny models have 3 layers and a pipeline needs one per rank, so 4 pipeline ranks run a
//! 5-layer copy of each model (layers 0 and 1 repeated as 3 and 4), against that copy whole.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use rmx_engine::{Engine, EngineOptions, Event, FinishReason, GenerateRequest};
use rmx_mlx::distributed::{CommBackend, Group, LocalRing, RankExit};
use rmx_models::{Parallel, ParallelMode};
use rmx_tests::models;

/// Set in a rank's process: the model folder it loads, and how it is split.
const MODEL_DIR: &str = "RMX_TEST_PARALLEL_MODEL";
const MODE: &str = "RMX_TEST_PARALLEL_MODE";
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
        .find_map(|l| l.split_once("PARALLEL-REPORT ").map(|(_, r)| r))?;
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
        let mode = match std::env::var(MODE).unwrap().as_str() {
            "tensor" => ParallelMode::Tensor,
            _ => ParallelMode::Pipeline,
        };
        let p = Parallel::new(group, mode);
        Engine::load_parallel(dir, EngineOptions::from_env(), p).unwrap()
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
        "PARALLEL-REPORT tokens={} active_bytes={}",
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

fn ranks(test: &str, dir: &Path, mode: &str, n: usize) -> Vec<Report> {
    let logs = tempfile::tempdir().unwrap();
    let log = |r: usize| logs.path().join(format!("rank{r}.log"));
    let ring = LocalRing::spawn(n, logs.path(), |rank| {
        let f = std::fs::File::create(log(rank)).unwrap();
        let mut c = this_test(test, dir);
        c.env(MODE, mode).stdout(f.try_clone().unwrap()).stderr(f);
        c
    })
    .unwrap();
    let exits = ring.wait_within(DEADLINE).unwrap();
    exits
        .iter()
        .enumerate()
        .map(|(r, exit): (usize, &RankExit)| {
            let text = std::fs::read_to_string(log(r)).unwrap_or_default();
            assert!(exit.success(), "{mode}: rank {r} of {n} {exit:?}:\n{text}");
            parse(&text)
                .unwrap_or_else(|| panic!("{mode}: no report from rank {r} of {n}:\n{text}"))
        })
        .collect()
}

fn mib(b: usize) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// `n` ranks of `mode` against the whole model's report.
fn check(label: &str, test: &str, dir: &Path, whole: &Report, mode: &str, n: usize) {
    for (r, rep) in ranks(test, dir, mode, n).iter().enumerate() {
        println!(
            "{label} {mode} rank {r} of {n}: {:.2} MiB active ({:.3} of the whole; 1/{n} = {:.3})",
            mib(rep.active_bytes),
            rep.active_bytes as f64 / whole.active_bytes as f64,
            1.0 / n as f64
        );
        assert_eq!(
            rep.tokens, whole.tokens,
            "{label}: {mode} rank {r} of {n} differs from the whole model"
        );
        // The vocabulary (embedding and output projection) dominates these models and is
        // split evenly; norms kept whole, KV heads copied to two ranks (tensor, 4 ranks) and
        // the extra layer of the first ranks (pipeline) add a little.
        let share = whole.active_bytes / n;
        assert!(
            rep.active_bytes < share + share / 10,
            "{label}: {mode} rank {r} of {n} holds {} bytes, the whole model {} bytes",
            rep.active_bytes,
            whole.active_bytes
        );
    }
}

fn whole(label: &str, test: &str, dir: &Path) -> Report {
    let rep = single_process(test, dir);
    assert_eq!(rep.tokens.len(), MAX_TOKENS);
    println!(
        "{label} in one process: {:.2} MiB active, tokens {:?}",
        mib(rep.active_bytes),
        rep.tokens
    );
    rep
}

/// `src` with layers 0 and 1 repeated as the last two: a 5-layer model of the same family.
fn deeper(src: &Path, out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let mut weights = vec![];
    for e in std::fs::read_dir(src).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".safetensors") {
            weights.push(path);
        } else if !name.ends_with(".safetensors.index.json") && path.is_file() {
            std::fs::copy(&path, out.join(&name)).unwrap();
        }
    }
    let config = out.join("config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let layers = c["num_hidden_layers"].as_i64().unwrap();
    assert_eq!(layers, 3, "the tiny models have 3 layers");
    c["num_hidden_layers"] = 5.into();
    std::fs::write(&config, serde_json::to_string_pretty(&c).unwrap()).unwrap();
    let mut tensors = vec![];
    let mut metadata = vec![];
    for f in weights {
        let t = rmx_mlx::io::load_safetensors(&f).unwrap();
        metadata = t.metadata;
        tensors.extend(t.tensors);
    }
    let copies: Vec<(String, rmx_mlx::Array)> = tensors
        .iter()
        .filter_map(|(k, a)| {
            let (from, to) = [("layers.0.", "layers.3."), ("layers.1.", "layers.4.")]
                .into_iter()
                .find(|(from, _)| k.contains(from))?;
            Some((k.replace(from, to), a.clone()))
        })
        .collect();
    tensors.extend(copies);
    let named: Vec<(&str, &rmx_mlx::Array)> =
        tensors.iter().map(|(k, a)| (k.as_str(), a)).collect();
    let meta: Vec<(&str, &str)> = metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    rmx_mlx::io::save_safetensors(&out.join("model.safetensors"), &named, &meta).unwrap();
}

/// The whole model's tokens, then 2 and 4 ranks of each mode's, compared.
fn split_matches_whole(test: &str, family: &str) {
    if let Ok(dir) = std::env::var(MODEL_DIR) {
        return rank_main(&PathBuf::from(dir));
    }
    let dir = models::model(family, "f32");
    // Several tests' ranks at once would share the 2 cores of a CI machine with 9 processes.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let label = format!("{family}-f32");
    let base = whole(&label, test, &dir);
    check(&label, test, &dir, &base, "tensor", 2);
    check(&label, test, &dir, &base, "tensor", 4);
    check(&label, test, &dir, &base, "pipeline", 2);

    let tmp = tempfile::tempdir().unwrap();
    let five = tmp.path().join(format!("{family}-f32-5-layers"));
    deeper(&dir, &five);
    let label = format!("{family}-f32 (5 layers)");
    let base = whole(&label, test, &five);
    check(&label, test, &five, &base, "pipeline", 4);
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
