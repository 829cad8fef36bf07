//! Embedding parity with mlx-embeddings: tiny random-weight models of each embedding family's
//! real layout (py/tiny_encoders.py), the engine's vectors against the reference's on the same
//! files. The engine runs all inputs as padded batches; the reference computes each input
//! alone, so this checks the padding masks too.
#![allow(clippy::unwrap_used)]

use rmx_engine::{Engine, ModelKind};
use rmx_tests::encoders::{self, cosine};

/// Inputs of different lengths (the batch pads all but the longest), with non-ASCII text.
const INPUTS: &[&str] = &[
    "The capital of France is Paris.",
    "A short one",
    "In the beginning of the long winter the villagers gathered wood, salted fish and mended \
     the nets, while the children counted the geese that flew south over the grey hills.",
    "Straße, café, naïve — 東京 and Zürich",
    "what is the boiling point of water at sea level?",
    "x",
];

fn least_cosine(quant: &str) -> f32 {
    match quant {
        "f32" => 0.9999,
        // bf16 and the quantized forms: both sides round alike, but not op for op.
        _ => 0.999,
    }
}

fn check(family: &str, quant: &str) {
    // Compared with Python's MLX bit for bit: float32 products as its Linux wheel makes them.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let dir = encoders::encoder(family, quant);
    let want = encoders::reference(&dir, INPUTS);
    let engine = Engine::load(&dir).unwrap_or_else(|e| panic!("{family}-{quant}: load: {e}"));
    assert_eq!(engine.kind(), ModelKind::Embedding, "{family}-{quant}");
    let ids: Vec<Vec<u32>> = INPUTS
        .iter()
        .map(|t| engine.embed_tokens(t, false).unwrap().0)
        .collect();
    assert_eq!(
        ids, want.ids,
        "{family}-{quant}: token ids differ from transformers'"
    );
    let got = engine.embed(ids).unwrap().blocking_recv().unwrap().unwrap();
    assert_eq!(got.len(), INPUTS.len());
    let least = got
        .iter()
        .zip(&want.single)
        .map(|(g, w)| cosine(g, w))
        .fold(f32::INFINITY, f32::min);
    eprintln!("{family}-{quant}: least cosine {least}");
    for (i, (g, w)) in got.iter().zip(&want.single).enumerate() {
        assert_eq!(g.len(), w.len(), "{family}-{quant}: input {i}'s dimension");
        let c = cosine(g, w);
        assert!(
            c >= least_cosine(quant),
            "{family}-{quant}: input {i}: cosine {c} to mlx-embeddings' vector"
        );
        let norm: f32 = g.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(
            (norm - 1.0).abs() < 1e-3,
            "{family}-{quant}: input {i}: norm {norm}"
        );
    }
    // Different inputs give different vectors (a collapsed model would pass the above).
    let spread = cosine(&got[0], &got[2]);
    assert!(
        spread < 0.99,
        "{family}-{quant}: inputs 0 and 2 at cosine {spread}"
    );
}

macro_rules! parity {
    ($($name:ident: $family:literal $quant:literal;)*) => {
        $(#[test]
        fn $name() {
            check($family, $quant);
        })*
    };
}

parity! {
    bert_f32: "bert" "f32";
    bert_bf16: "bert" "bf16";
    bert_4bit: "bert" "4bit";
    bert_cls_f32: "bert_cls" "f32";
    xlm_roberta_f32: "xlm_roberta" "f32";
    xlm_roberta_bf16: "xlm_roberta" "bf16";
    xlm_roberta_4bit: "xlm_roberta" "4bit";
    qwen3_embedding_f32: "qwen3_embedding" "f32";
    qwen3_embedding_bf16: "qwen3_embedding" "bf16";
    qwen3_embedding_4bit: "qwen3_embedding" "4bit";
    modernbert_f32: "modernbert" "f32";
    modernbert_bf16: "modernbert" "bf16";
    modernbert_4bit: "modernbert" "4bit";
}

/// A language model refuses embeddings, and an embedding model refuses to generate, each
/// saying what the model does.
#[test]
fn each_kind_refuses_the_other_kinds_work() {
    let chat = Engine::load(&rmx_tests::models::model("qwen3", "f32")).unwrap();
    assert_eq!(chat.kind(), ModelKind::Chat);
    let e = chat.embed(vec![vec![1, 2, 3]]).unwrap_err().to_string();
    assert!(e.contains("does not make embeddings"), "{e}");
    let enc = Engine::load(&encoders::encoder("bert", "f32")).unwrap();
    let e = enc
        .generate(rmx_engine::GenerateRequest::new(vec![1, 2, 3], 4))
        .unwrap_err()
        .to_string();
    assert!(e.contains("embedding or reranking model"), "{e}");
    // Bad inputs: an empty one, an id outside the vocabulary, one past the model's limit.
    assert!(enc.embed(vec![vec![]]).is_err());
    assert!(enc.embed(vec![vec![u32::MAX]]).is_err());
    let limit = enc.embed_limit().unwrap();
    assert_eq!(limit, 256, "sentence_bert_config.json's max_seq_length");
    assert!(enc.embed(vec![vec![5; limit + 1]]).is_err());
    // Truncation keeps the special tokens: [CLS] ... [SEP], `limit` in all.
    let long = "the sea ".repeat(400);
    let (whole, cut) = enc.embed_tokens(&long, false).unwrap();
    assert!(!cut && whole.len() > limit);
    let (ids, cut) = enc.embed_tokens(&long, true).unwrap();
    assert!(cut);
    assert_eq!(ids.len(), limit);
    assert_eq!((ids[0], ids[limit - 1]), (whole[0], *whole.last().unwrap()));
    assert_eq!(
        enc.embed(vec![ids])
            .unwrap()
            .blocking_recv()
            .unwrap()
            .unwrap()
            .len(),
        1
    );
}

/// Qwen3-Embedding as its vendor publishes it (Qwen/Qwen3-Embedding-*): saved from the base
/// model, so its tensors lack mlx-lm's `model.` prefix. The same weights give the same vectors.
#[test]
fn a_base_model_checkpoint_without_the_model_prefix_gives_the_same_vectors() {
    // Beside the comparisons with Python, which choose the process's float32 products.
    rmx_mlx::set_cpu_blas(rmx_mlx::CpuBlas::Mlx);
    let src = encoders::encoder("qwen3_embedding", "f32");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("Qwen3-Embedding-hf-layout");
    std::fs::create_dir(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".safetensors") {
            let t = rmx_mlx::io::load_safetensors(&e.path()).unwrap();
            let renamed: Vec<(String, rmx_mlx::Array)> = t
                .tensors
                .into_iter()
                .map(|(k, a)| (k.strip_prefix("model.").unwrap_or(&k).to_string(), a))
                .collect();
            assert!(renamed.iter().all(|(k, _)| !k.starts_with("model.")));
            let refs: Vec<(&str, &rmx_mlx::Array)> =
                renamed.iter().map(|(k, a)| (k.as_str(), a)).collect();
            rmx_mlx::io::save_safetensors(&dir.join(&name), &refs, &[("format", "pt")]).unwrap();
        } else if !name.ends_with(".index.json") {
            std::os::unix::fs::symlink(e.path(), dir.join(&name)).unwrap();
        }
    }
    let ids: Vec<Vec<u32>> = {
        let a = Engine::load(&src).unwrap();
        INPUTS
            .iter()
            .map(|t| a.embed_tokens(t, false).unwrap().0)
            .collect()
    };
    let vectors = |d: &std::path::Path| {
        let e = Engine::load(d).unwrap();
        e.embed(ids.clone())
            .unwrap()
            .blocking_recv()
            .unwrap()
            .unwrap()
    };
    for (a, b) in vectors(&src).iter().zip(&vectors(&dir)) {
        assert!(cosine(a, b) > 0.999999);
    }
}
