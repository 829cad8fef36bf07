//! The GPU comparison scripts (scripts/bench/mlx_side.py writes the models, logits_check.py
//! compares rmx's log-probabilities with mlx-lm's) are meant for the lent GPU, where each minute
//! counts; here they run on the CPU backend against the real binary and a tiny random model, so
//! a change that breaks them, or rmx's `/v1/completions` logprobs they read, fails in CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

/// Runs a script that prints a JSON object a line: its stdout and the objects, once it succeeded.
fn json_lines(cmd: &mut Command) -> (String, Vec<serde_json::Value>) {
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (text, lines)
}

#[test]
fn logits_check_runs_on_the_cpu_and_finds_rmx_where_mlx_lm_is() {
    let python = rmx_tests::python();
    let scripts = rmx_tests::repo_root().join("scripts/bench");
    let model = rmx_tests::target_tmp("bench-scripts-tiny-4bit");
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
    // --mlx-sdpa-ops: mlx-lm's prompt attention by MLX's fallback ops (what the GPU check of
    // GPT-OSS needs), the same bits as MLX's fused attention on this backend.
    let (text, lines) = json_lines(
        Command::new(&python)
            .arg(scripts.join("logits_check.py"))
            .arg(rmx_tests::rmx())
            .arg(&model)
            .args([
                "--prompt-len",
                "16",
                "80",
                "--gen",
                "8",
                "--drift",
                "--mlx-sdpa-ops",
            ]),
    );
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

/// scripts/bench/new_lengths.py against the real binary: a warm-up, each length new, each
/// length again, one line a request.
#[test]
fn new_lengths_times_each_request_of_a_new_and_a_seen_length() {
    let python = rmx_tests::python();
    let scripts = rmx_tests::repo_root().join("scripts/bench");
    let tmp = tempfile::tempdir().unwrap();
    let model = chat_model(&python, &scripts, tmp.path());
    let (text, lines) = json_lines(
        Command::new(&python)
            .arg(scripts.join("new_lengths.py"))
            .arg(rmx_tests::rmx())
            .arg(&model)
            .args(["--lengths", "5", "9"]),
    );
    let seen: Vec<(u64, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["prompt_len"].as_u64().unwrap(),
                l["length"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (8, "warm-up"),
            (5, "new"),
            (9, "new"),
            (5, "seen"),
            (9, "seen")
        ],
        "{text}"
    );
    assert!(
        lines.iter().all(|l| l["seconds"].as_f64().unwrap() > 0.0),
        "{text}"
    );
}

/// mlx_side.py's tiny model with a plain chat template, in `dir`.
fn chat_model(python: &str, scripts: &Path, dir: &Path) -> std::path::PathBuf {
    let model = dir.join("tiny-chat");
    let made = Command::new(python)
        .arg(scripts.join("mlx_side.py"))
        .args(["make", "--shape", "tiny", "--quant", "bf16", "--out"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let config_path = model.join("tokenizer_config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config_path).unwrap()).unwrap();
    config["chat_template"] = serde_json::json!(
        "{% for m in messages %}t2 {{ m['content'] }} t3 {% endfor %}{% if add_generation_prompt %}t4{% endif %}"
    );
    std::fs::write(&config_path, config.to_string()).unwrap();
    model
}

/// Runs `script` with `args` against a fresh `rmx serve` (home under `dir`) serving `model`.
fn against_rmx_serve(
    python: &str,
    script: &Path,
    dir: &Path,
    model: &Path,
    args: &[&str],
) -> std::process::Output {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Command::new(rmx_tests::rmx())
        .args(["serve", "--port", &port.to_string()])
        .env("RMX_HOME", dir.join("home"))
        // The script names the model by its folder: TCP clients may, under the model roots.
        .env("RMX_MODEL_ROOTS", model.parent().expect("a parent"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let out = up.then(|| {
        Command::new(python)
            .arg(script)
            .args(["--url", &format!("http://127.0.0.1:{port}/v1"), "--model"])
            .arg(model)
            .args(args)
            .output()
            .unwrap()
    });
    let _ = server.kill();
    let _ = server.wait();
    let out = out.expect("rmx serve did not listen");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// scripts/bench/agent_turn.py against the real daemon (`rmx serve`) on the tiny model with a
/// plain chat template: the second turn is served from the prefix cache, and the script reads
/// rmx's streamed usage.
#[test]
fn agent_turn_runs_against_rmx_serve_and_sees_the_cached_prefix() {
    let python = rmx_tests::python();
    let scripts = rmx_tests::repo_root().join("scripts/bench");
    let tmp = tempfile::tempdir().unwrap();
    let model = chat_model(&python, &scripts, tmp.path());
    let args = [
        "--prompt-words",
        "120",
        "--new-words",
        "10",
        "--max-tokens",
        "4",
        "--runs",
        "1",
        "--json",
        "--synthetic-vocab",
        "1000",
    ];
    let out = against_rmx_serve(
        &python,
        &scripts.join("agent_turn.py"),
        tmp.path(),
        &model,
        &args,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let first = summary["first_prompt_tokens"].as_u64().unwrap();
    let cached = summary["second_cached_tokens"].as_u64().unwrap();
    assert!(first > 120, "{summary}");
    assert!(cached >= first - 1, "{summary}");
    assert!(
        summary["second_prompt_tokens"].as_u64().unwrap() > cached,
        "{summary}"
    );
}

/// scripts/bench/streams.py against the real daemon: concurrent streams all finish, and the
/// script reports each concurrency's tokens and times.
#[test]
fn concurrent_streams_run_against_rmx_serve() {
    let python = rmx_tests::python();
    let scripts = rmx_tests::repo_root().join("scripts/bench");
    let tmp = tempfile::tempdir().unwrap();
    let model = chat_model(&python, &scripts, tmp.path());
    let args = [
        "--streams",
        "1,3",
        "--prompt-words",
        "20",
        "--max-tokens",
        "6",
        "--json",
        "--synthetic-vocab",
        "1000",
    ];
    let out = against_rmx_serve(
        &python,
        &scripts.join("streams.py"),
        tmp.path(),
        &model,
        &args,
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 2);
    for (row, n) in rows.iter().zip([1u64, 3]) {
        assert_eq!(row["streams"], n, "{row}");
        let tokens = row["completion_tokens"].as_u64().unwrap();
        // Each stream gets at least its first token and at most max_tokens (an EOS may end one).
        assert!((n..=6 * n).contains(&tokens), "{row}");
        assert!(row["ttft_p95_s"].as_f64().unwrap() >= row["ttft_median_s"].as_f64().unwrap());
    }
}

/// scripts/bench/fill_weights.py on a skeleton (tiny_vlm.py make --skeleton: names and shapes
/// only, as the real-shape towers travel to the GPU machine) makes a model that `rmx bench
/// --image-cost` loads and times.
#[test]
fn fill_weights_makes_a_skeleton_into_a_model_rmx_times() {
    let python = rmx_tests::python();
    let dir = rmx_tests::target_tmp("bench-scripts-skeleton");
    let _ = std::fs::remove_dir_all(&dir);
    let model = dir.join("mistral3");
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(Command::new(&python)
        .arg(rmx_tests::py("tiny_vlm.py"))
        .args([
            "make",
            "--quant",
            "bf16",
            "--family",
            "mistral3",
            "--skeleton",
            "--out",
        ])
        .arg(&model));
    assert!(model.join("weights.json").exists());
    assert!(!model.join("model.safetensors").exists());
    run(Command::new(&python)
        .arg(rmx_tests::repo_root().join("scripts/bench/fill_weights.py"))
        .arg(&model));
    let table = run(Command::new(rmx_tests::rmx())
        .env("RMX_HOME", dir.join("home"))
        .arg("bench")
        .arg(&model)
        .args(["--image-cost", "40x30", "--rounds", "1", "--warmup", "0"]));
    assert!(table.contains("vision tower"), "{table}");
}
