//! Configs that disagree with their weights, or ask for what rmx cannot do, fail at load with
//! an error naming the field (or tensor) and the file: an expert count that disagrees with the
//! stacked experts, an unknown rope type, a quantization mode MLX does not have.
#![allow(clippy::unwrap_used)]

use rmx_tests::models;

use std::path::{Path, PathBuf};

use rmx_engine::Engine;
use serde_json::Value;

/// A copy of the tiny model `family`/`quant` whose config.json `edit` changed.
fn variant(tmp: &Path, family: &str, quant: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let src = models::model(family, quant);
    let dir = tmp.join(format!("{family}-{quant}"));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        let to = dir.join(entry.file_name());
        if std::fs::hard_link(entry.path(), &to).is_err() {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
    let path = dir.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, config.to_string()).unwrap();
    dir
}

fn load_error(dir: &Path) -> String {
    match Engine::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_expert_count_that_disagrees_with_the_weights_names_the_tensor_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = variant(tmp.path(), "qwen3_moe", "f32", |c| {
        c["num_experts"] = 16.into()
    });
    let e = load_error(&dir);
    // The router is read first: its 8 rows against the config's 16 experts.
    assert!(
        e.contains("mlp.gate.weight") && e.contains("[8, 64], expected [16, 64]"),
        "{e}"
    );
    assert!(e.contains(".safetensors"), "{e}");
}

#[test]
fn more_experts_per_token_than_experts_names_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = variant(tmp.path(), "qwen3_moe", "f32", |c| {
        c["num_experts_per_tok"] = 9.into()
    });
    let e = load_error(&dir);
    assert!(e.contains("num_experts_per_tok"), "{e}");
    assert!(
        e.contains(&dir.join("config.json").display().to_string()),
        "{e}"
    );
}

#[test]
fn an_unknown_rope_type_names_the_field_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = variant(tmp.path(), "qwen3_yarn", "f32", |c| {
        c["rope_scaling"]["rope_type"] = "bogus".into()
    });
    let e = load_error(&dir);
    assert!(
        e.contains("rope_scaling.rope_type") && e.contains("bogus"),
        "{e}"
    );
    assert!(e.contains("yarn"), "lists what is supported: {e}");
    assert!(
        e.contains(&dir.join("config.json").display().to_string()),
        "{e}"
    );
}

#[test]
fn a_quantization_mode_mlx_lacks_names_the_field_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = variant(tmp.path(), "gpt_oss", "mxfp4", |c| {
        c["quantization"]["mode"] = "fp3".into()
    });
    let e = load_error(&dir);
    assert!(e.contains("quantization.mode") && e.contains("fp3"), "{e}");
    assert!(e.contains("mxfp4"), "lists the modes MLX has: {e}");
    assert!(
        e.contains(&dir.join("config.json").display().to_string()),
        "{e}"
    );
}

#[test]
fn a_hybrid_config_that_disagrees_with_its_weights_names_the_field_or_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let kernel = variant(&tmp.path().join("a"), "qwen3_5", "f32", |c| {
        c["text_config"]["linear_conv_kernel_dim"] = 3.into()
    });
    let e = load_error(&kernel);
    assert!(e.contains("conv1d.weight") && e.contains("expected"), "{e}");

    let heads = variant(&tmp.path().join("b"), "qwen3_5", "f32", |c| {
        c["text_config"]["linear_num_value_heads"] = 3.into()
    });
    let e = load_error(&heads);
    assert!(
        e.contains("linear_num_value_heads") && e.contains("linear_num_key_heads"),
        "{e}"
    );

    // Every layer full attention: layer 0's self_attn tensors are not in the files.
    let pattern = variant(&tmp.path().join("c"), "qwen3_5", "f32", |c| {
        c["text_config"]["full_attention_interval"] = 1.into()
    });
    let e = load_error(&pattern);
    assert!(e.contains("layers.0.self_attn"), "{e}");
}

/// Issue #20: zero or absurd sizes panicked the engine thread while it built the model (the
/// load answered "the engine thread has stopped"); they fail the load naming field and file.
#[test]
fn issue_20_zero_sizes_fail_the_load_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, field) in ["num_attention_heads", "hidden_size", "num_hidden_layers"]
        .into_iter()
        .enumerate()
    {
        let dir = variant(&tmp.path().join(i.to_string()), "llama", "f32", |c| {
            c[field] = 0.into()
        });
        let e = load_error(&dir);
        assert!(e.contains(&format!("{field} is 0")), "{e}");
        assert!(
            e.contains(&dir.join("config.json").display().to_string()),
            "{e}"
        );
    }
    // No head_dim, and heads that do not divide the width.
    let dir = variant(&tmp.path().join("split"), "llama", "f32", |c| {
        c.as_object_mut().unwrap().remove("head_dim");
        c["num_attention_heads"] = 3.into();
        c["num_key_value_heads"] = 3.into();
    });
    let e = load_error(&dir);
    assert!(
        e.contains("hidden_size (128)") && e.contains("head_dim"),
        "{e}"
    );
}
