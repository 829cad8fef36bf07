//! The newer families through the real `rmx` binary and daemon: `rmx run` on tiny 4-bit (as
//! the mlx-community conversions ship) Qwen3-MoE and Qwen3.5-MoE models, and `-v` telling what
//! each layer is and how a decode step runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rmx_tests::home::TestHome;
use rmx_tests::models;

/// `rmx run MODEL "Hello there" -v` in a fresh home: the home and the `layers:` line.
fn run_verbose(family: &str) -> (TestHome, String) {
    let home = TestHome::new();
    let model = models::model(family, "4bit").display().to_string();
    let out = home.run(&["run", &model, "Hello there", "--max-tokens", "8", "-v"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {stderr}\ndaemon log:\n{}",
        home.log()
    );
    assert!(!stdout.trim().is_empty(), "empty answer; stderr: {stderr}");
    assert!(stderr.contains("answer: 8 tokens"), "{stderr}");
    let layers = stderr
        .lines()
        .find_map(|l| l.strip_prefix("layers: "))
        .unwrap_or_else(|| panic!("no layers line: {stderr}"))
        .to_string();
    (home, layers)
}

#[test]
fn rmx_run_answers_with_a_qwen3_moe_model_and_v_lists_its_layer_kinds() {
    let (home, layers) = run_verbose("qwen3_moe");
    // tiny_models.py's qwen3_moe: four layers, layer 1 in mlp_only_layers.
    let kinds: Vec<&str> = layers.split(", ").collect();
    assert_eq!(
        kinds,
        ["3× attention + moe", "1× attention + dense"],
        "{layers}"
    );
    let ps = home.ps();
    assert_eq!(ps.len(), 1, "{ps:?}");
    assert_eq!(ps[0]["layers"].as_array().map(Vec::len), Some(2), "{ps:?}");
    // `rmx info` says the same while the daemon has the model loaded.
    let model = models::model("qwen3_moe", "4bit").display().to_string();
    let text = home.ok(&["info", &model]);
    assert!(
        text.contains("layers (loaded)   3× attention + moe"),
        "{text}"
    );
    assert!(text.contains("1× attention + dense"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&home.ok(&["info", &model, "--json"])).unwrap();
    assert_eq!(json["layers"].as_array().map(Vec::len), Some(2), "{json}");
}

#[test]
fn rmx_run_answers_with_a_hybrid_qwen3_5_moe_model() {
    let (_home, layers) = run_verbose("qwen3_5_moe");
    // tiny_models.py's qwen3_5_moe: DeltaNet and full attention alternating, experts on all.
    let kinds: Vec<&str> = layers.split(", ").collect();
    assert_eq!(
        kinds,
        [
            "2× linear attention (Gated DeltaNet) + moe",
            "2× attention + moe"
        ],
        "{layers}"
    );
}

#[test]
fn rmx_info_says_a_vision_language_checkpoint_runs_its_text_model_only() {
    let home = TestHome::new();
    // tiny_models.py's qwen3_5 keeps vision_config and a vision tensor, as mlx-vlm writes them.
    let model = models::model("qwen3_5", "4bit").display().to_string();
    let text = home.ok(&["info", &model]);
    assert!(
        text.contains("not loaded: image input is not supported for these files"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&home.ok(&["info", &model, "--json"])).unwrap();
    assert_eq!(json["vision_tower"], true, "{json}");
    // And the model still answers (the vision tensor is left unloaded, not an error).
    let answer = home.ok(&["run", &model, "Hi", "--max-tokens", "4"]);
    assert!(!answer.trim().is_empty());
}

#[test]
fn rmx_info_says_a_vision_language_checkpoint_with_its_tower_takes_images() {
    let home = TestHome::new();
    // tiny_vlm.py's Qwen3.5 and Mistral 3: the whole tower, as mlx-vlm writes it.
    for family in ["qwen3_5", "mistral3"] {
        let model = models::tiny_vlm_of(family, "f32").display().to_string();
        let text = home.ok(&["info", &model]);
        assert!(text.contains("takes images"), "{family}: {text}");
        let json: serde_json::Value =
            serde_json::from_str(&home.ok(&["info", &model, "--json"])).unwrap();
        assert_eq!(json["takes_images"], true, "{family}: {json}");
    }
}

/// `rmx run MODEL PROMPT` greedy in a fresh home with `env`: the answer.
fn greedy(family: &str, env: &[(&str, &str)]) -> String {
    let model = models::model(family, "f32").display().to_string();
    let prompt = "In the beginning of the long winter the villagers gathered wood, salted fish \
                  and mended the nets";
    let home = env
        .iter()
        .fold(TestHome::new(), |h, (k, v)| h.with_env(k, v));
    home.ok(&[
        "run",
        &model,
        prompt,
        "--raw",
        "--temperature",
        "0",
        "--max-tokens",
        "24",
    ])
}

/// GPT-OSS's attention with sinks through explicit products (`RMX_PRODUCT_ATTN=1`, what CUDA
/// takes by default) gives the tokens MLX's fused attention gives: on the CPU the products are
/// MLX's own fallback, so the greedy text is the same, over a prompt longer than the tiny
/// model's sliding window.
#[test]
fn gpt_oss_answers_the_same_with_attention_by_products() {
    let fused = greedy("gpt_oss", &[("RMX_PRODUCT_ATTN", "0")]);
    assert!(!fused.trim().is_empty());
    assert_eq!(fused, greedy("gpt_oss", &[("RMX_PRODUCT_ATTN", "1")]));
}

/// The same for a whole prompt (more than 17 queries) of a model without sinks when its scores
/// are under `RMX_PRODUCT_ATTN_SCORES`.
#[test]
fn llama_answers_the_same_with_a_prompt_attended_by_products() {
    let fused = greedy("llama", &[("RMX_PRODUCT_ATTN", "0")]);
    assert!(!fused.trim().is_empty());
    let products = [
        ("RMX_PRODUCT_ATTN", "1"),
        ("RMX_PRODUCT_ATTN_SCORES", "100000000"),
    ];
    assert_eq!(fused, greedy("llama", &products));
}
