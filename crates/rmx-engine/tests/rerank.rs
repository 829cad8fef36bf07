//! Reranking parity: a tiny random Qwen3 named as a reranker scores (query, document) pairs the
//! way Qwen3-Reranker's model card computes them, checked against the same recipe run on mlx-lm
//! (tiny_models.py `rerank`, one document at a time; the engine batches them, left-padded).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use rmx_engine::{Engine, ModelKind};
use rmx_tests::models;

const QUERY: &str = "What is the capital of France?";
const INSTRUCTION: &str =
    "Given a web search query, retrieve relevant passages that answer the query";
const DOCUMENTS: &[&str] = &[
    "Paris is the capital and largest city of France.",
    "The Great Wall of China is visible from many places.",
    "France's capital hosts the Louvre, the world's most-visited museum, on the right bank of \
     the Seine.",
    "Bananas are rich in potassium.",
    "Berlin",
];

/// The tiny model's files under a folder whose name says "reranker" (what makes a Qwen3
/// checkpoint one: Qwen3-Reranker's files are a chat model's).
fn reranker(quant: &str, root: &Path) -> PathBuf {
    let src = models::model("qwen3", quant);
    let dir = root.join(format!("Qwen3-Reranker-tiny-{quant}"));
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path(), dir.join(e.file_name())).unwrap();
    }
    dir
}

struct Reference {
    ids: Vec<Vec<u32>>,
    scores: Vec<f32>,
}

fn reference(dir: &Path, tmp: &Path) -> Reference {
    let req = tmp.join(format!(
        "{}.json",
        dir.file_name().unwrap().to_string_lossy()
    ));
    let out = req.with_extension("out.json");
    let body =
        serde_json::json!({"query": QUERY, "documents": DOCUMENTS, "instruction": INSTRUCTION});
    std::fs::write(&req, body.to_string()).unwrap();
    models::run(&[
        "rerank",
        "--model",
        dir.to_str().unwrap(),
        "--request",
        req.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    Reference {
        ids: serde_json::from_value(v["ids"].clone()).unwrap(),
        scores: serde_json::from_value(v["scores"].clone()).unwrap(),
    }
}

fn check(quant: &str, tolerance: f32) {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let tmp = tempfile::tempdir().unwrap();
    let dir = reranker(quant, tmp.path());
    let want = reference(&dir, tmp.path());
    let engine = Engine::load(&dir).unwrap();
    assert_eq!(engine.kind(), ModelKind::Rerank);
    for (i, d) in DOCUMENTS.iter().enumerate() {
        let (ids, cut) =
            rmx_engine::rerank::prompt(engine.tokenizer(), INSTRUCTION, QUERY, d, 8192).unwrap();
        assert!(!cut);
        assert_eq!(ids, want.ids[i], "{quant}: document {i}'s prompt tokens");
    }
    let docs: Vec<String> = DOCUMENTS.iter().map(|d| d.to_string()).collect();
    let got = engine
        .rerank(QUERY, &docs, None, false)
        .unwrap()
        .1
        .blocking_recv()
        .unwrap()
        .unwrap();
    for (i, (g, w)) in got.iter().zip(&want.scores).enumerate() {
        assert!(
            (g - w).abs() <= tolerance,
            "{quant}: document {i}: score {g} vs mlx-lm {w}"
        );
    }
    let spread =
        got.iter().cloned().fold(f32::MIN, f32::max) - got.iter().cloned().fold(f32::MAX, f32::min);
    assert!(spread > 1e-3, "{quant}: the scores do not differ: {got:?}");
    if quant == "f32" {
        let order = |s: &[f32]| {
            let mut idx: Vec<usize> = (0..s.len()).collect();
            idx.sort_by(|&a, &b| s[b].total_cmp(&s[a]));
            idx
        };
        assert_eq!(order(&got), order(&want.scores), "{quant}: ranking");
    }
}

#[test]
fn f32_scores_and_order_match_the_model_cards_recipe() {
    check("f32", 1e-4);
}

#[test]
fn bf16_scores_match_within_rounding() {
    check("bf16", 0.02);
}

#[test]
fn a_chat_model_refuses_to_rerank_and_a_reranker_to_chat() {
    let chat = Engine::load(&models::model("qwen3", "f32")).unwrap();
    let e = chat
        .rerank("q", &["d".into()], None, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a reranker"), "{e}");
    let tmp = tempfile::tempdir().unwrap();
    let r = Engine::load(&reranker("f32", tmp.path())).unwrap();
    assert!(r
        .generate(rmx_engine::GenerateRequest::new(vec![1, 2], 2))
        .is_err());
    assert!(r.rerank("q", &[], None, true).is_err());
    // A document past the prompt's room: refused unless truncation is allowed, and then cut
    // from the pair's end, the judging prompt's suffix kept.
    let long = vec!["word ".repeat(20_000)];
    assert!(r.rerank("q", &long, None, false).is_err());
    let tok = r.tokenizer();
    let (whole, _) = rmx_engine::rerank::prompt(tok, INSTRUCTION, "q", "word", 8192).unwrap();
    let (ids, cut) = rmx_engine::rerank::prompt(tok, INSTRUCTION, "q", &long[0], 64).unwrap();
    assert!(cut);
    assert_eq!(ids.len(), 64);
    assert_eq!(ids[64 - 8..], whole[whole.len() - 8..]);
}
