//! `rmx launch`: the real binary starts 2 ranks over loopback (MLX's ring), rank 0 runs `rmx
//! bench` on a model split over them, in both modes; rank 0's peak memory is about half the
//! whole model's, and its greedy tokens are the whole model's (the record's `tokens`); `--streams
//! 2` runs too. Commands that cannot run over ranks yet are refused with what to do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use rmx_tests::{models, rmx};

/// `rmx [launch ...] bench MODEL` (tiny sizes, one round); its JSON record.
fn bench(launch: &[&str], model: &Path) -> serde_json::Value {
    let mut args: Vec<&str> = launch.to_vec();
    if !launch.is_empty() {
        args.extend(["--", "rmx"]);
    }
    let model = model.to_str().unwrap();
    args.extend(["bench", model, "--prompt-tokens", "8", "--gen-tokens", "4"]);
    args.extend(["--rounds", "1", "--warmup", "0", "--streams", "2", "--json"]);
    let out = Command::new(rmx()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rmx {args:?}:\n{err}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("rmx {args:?} printed no JSON record ({e}):\n{err}"))
}

fn peak(record: &serde_json::Value) -> f64 {
    record["cases"][0]["peak_memory_bytes"].as_f64().unwrap()
}

#[test]
fn bench_runs_on_a_model_split_over_two_ranks_in_both_modes() {
    let model = models::model("llama", "f32");
    let whole_record = bench(&[], &model);
    let whole = peak(&whole_record);
    let tokens = &whole_record["cases"][0]["tokens"];
    assert_eq!(tokens.as_array().map(Vec::len), Some(4), "{whole_record}");
    for mode in ["tensor", "pipeline"] {
        let record = bench(&["launch", "-n", "2", "--mode", mode], &model);
        assert_eq!(record["parallel"]["ranks"], 2, "{record}");
        // f32: the split model's greedy tokens are the whole one's.
        assert_eq!(&record["cases"][0]["tokens"], tokens, "{mode}");
        let streams = &record["cases"][0]["concurrent"][0];
        assert_eq!(streams["streams"], 2, "{record}");
        assert!(streams["aggregate_tps"]["median"].as_f64().unwrap() > 0.0);
        let split = peak(&record);
        println!(
            "{mode}: rank 0's peak {:.1} MiB, the whole model's {:.1} MiB ({:.2})",
            split / 1048576.0,
            whole / 1048576.0,
            split / whole
        );
        // The weights (half of them a rank) are nearly all of the peak of this tiny model.
        assert!(split < 0.6 * whole, "{mode}: {split} of {whole} bytes");
    }
}

#[test]
fn launch_refuses_what_cannot_run_over_ranks_yet() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["-n", "2", "--", "rmx", "run", "m", "hi"],
            "serving (run, chat, serve) over ranks",
        ),
        (
            &["-n", "1", "--", "rmx", "bench", "m"],
            "-n needs at least 2 ranks",
        ),
        (
            &["-n", "2", "--", "python", "x.py"],
            "rmx launch runs rmx commands",
        ),
    ];
    for (args, says) in cases {
        let out = Command::new(rmx())
            .arg("launch")
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}:\n{err}");
    }
    let out = Command::new(rmx()).arg("worker").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("started by rmx launch"));
}

/// Issue #26: `--backend nccl` is refused before any rank starts where it cannot run: a
/// hostfile (nccl ranks are this machine's), and an MLX without the nccl backend (a CPU build,
/// as on CI), in either mode (a pipeline over nccl hands over by all_sum).
#[test]
fn launch_refuses_nccl_where_it_cannot_run() {
    let launch = |args: &[&str]| {
        let out = Command::new(rmx())
            .args(["launch", "--backend", "nccl"])
            .args(args)
            .args(["--", "rmx", "bench", "m"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = launch(&["--hostfile", "ring.json"]);
    assert!(err.contains("this machine's ranks only"), "{err}");

    // The rmx binary links the reference Python's libmlx here; ask it whether nccl is built in.
    let probe = Command::new(rmx_tests::python())
        .args([
            "-c",
            "import mlx.core as mx; print(mx.distributed.is_available('nccl'))",
        ])
        .output()
        .unwrap();
    let has_nccl = String::from_utf8_lossy(&probe.stdout).trim() == "True";
    if has_nccl {
        println!("this MLX has nccl: the CPU-build refusal is not checked here");
        return;
    }
    for mode in ["tensor", "pipeline"] {
        let err = launch(&["-n", "2", "--mode", mode]);
        assert!(
            err.contains("this MLX has no nccl backend (CPU build"),
            "{err}"
        );
        assert!(err.contains("--backend ring"), "{err}");
    }
}
