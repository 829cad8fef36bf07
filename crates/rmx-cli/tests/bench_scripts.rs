//! The GPU comparison scripts (scripts/bench/mlx_side.py writes the models, logits_check.py
//! compares rmx's log-probabilities with mlx-lm's) are meant for the lent GPU, where each minute
//! counts; here they run on the CPU backend against the real binary and a tiny random model, so
//! a change that breaks them, or rmx's `/v1/completions` logprobs they read, fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../rmx-engine/tests/common/mod.rs"]
mod engine_common;

use std::path::Path;
use std::process::Command;

#[test]
fn logits_check_runs_on_the_cpu_and_finds_rmx_where_mlx_lm_is() {
    let python = engine_common::python();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench");
    let model = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-scripts-tiny-4bit");
    if !model.join("config.json").exists() {
        let made = Command::new(&python)
            .arg(scripts.join("mlx_side.py"))
            .args(["make", "--shape", "tiny", "--quant", "4bit", "--out"])
            .arg(&model)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
    }
    let out = Command::new(&python)
        .arg(scripts.join("logits_check.py"))
        .arg(env!("CARGO_BIN_EXE_rmx"))
        .arg(&model)
        .args(["--prompt-len", "16", "80", "--gen", "8", "--drift"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, n) in lines.iter().zip([16, 80]) {
        assert_eq!(line["prompt_len"], n, "{line}");
        assert_eq!(line["steps"], 8, "{line}");
        // On the CPU rmx runs mlx-lm's ops one for one; what is left is the bf16 rounding of
        // the log-probabilities it reports (a step is 0.03 at this model's -ln(1000)).
        let diff = line["max_abs_logprob_diff"].as_f64().unwrap();
        assert!(diff < 0.02, "{line}");
        assert!(line["mlx_bf16_vs_f32"].as_f64().unwrap() >= 0.0, "{line}");
        assert!(
            line["worst_mismatch_bf16_steps"].as_f64().unwrap() <= 1.0,
            "{line}"
        );
    }
}
