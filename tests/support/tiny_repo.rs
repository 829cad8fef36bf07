//! The tiny MLX-style 4-bit model repo the local Hub serves to rmx-store's tests and the store
//! CLI suites: one "LFS" safetensors of a few hundred KB of random bytes, a config, a
//! tokenizer of one token; and [`tree`], to show what a test left on disk.

use std::path::Path;

use crate::fake_hub::FakeFile;

pub const REPO: &str = "test-org/tiny-llama-4bit";
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
pub const WEIGHTS: &str = "model.safetensors";
/// What count_parameters must find in [`tiny_safetensors`]: 256x256 embedding and q_proj, a
/// 1024x256 lm_head (8-bit, by per-layer override), a 256 norm.
pub const TINY_PARAMS: u64 = 256 * 256 * 2 + 1024 * 256 + 256;

pub fn config_json() -> String {
    serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 256,
        "num_hidden_layers": 1,
        "vocab_size": 1024,
        "max_position_embeddings": 2048,
        "torch_dtype": "bfloat16",
        "quantization": { "group_size": 64, "bits": 4, "lm_head": { "group_size": 64, "bits": 8 } },
    })
    .to_string()
}

/// Deterministic noise (xorshift), so sizes in snapshots stay stable.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A safetensors file with these tensors (`name`, dtype, shape) and noise for data.
pub fn safetensors(tensors: &[(String, &str, Vec<u64>)]) -> Vec<u8> {
    let width = |dtype: &str| match dtype {
        "U32" | "F32" => 4,
        "BF16" | "F16" => 2,
        _ => 1,
    };
    let mut header = serde_json::Map::new();
    header.insert(
        "__metadata__".into(),
        serde_json::json!({ "format": "mlx" }),
    );
    let mut offset = 0u64;
    for (name, dtype, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * width(dtype);
        header.insert(
            name.clone(),
            serde_json::json!({ "dtype": dtype, "shape": shape, "data_offsets": [offset, offset + bytes] }),
        );
        offset += bytes;
    }
    let mut json = serde_json::Value::Object(header).to_string().into_bytes();
    while !json.len().is_multiple_of(8) {
        json.push(b' ');
    }
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    out.extend(noise(offset as usize, 42));
    out
}

/// 4-bit embedding and q_proj (256x256), 8-bit lm_head (1024x256), a bf16 norm.
pub fn tiny_safetensors() -> Vec<u8> {
    let q = |name: &str, rows: u64, packed: u64| {
        let layer = name.trim_end_matches(".weight").to_string();
        vec![
            (name.to_string(), "U32", vec![rows, packed]),
            (format!("{layer}.scales"), "BF16", vec![rows, 4]),
            (format!("{layer}.biases"), "BF16", vec![rows, 4]),
        ]
    };
    let mut tensors = Vec::new();
    tensors.extend(q("model.embed_tokens.weight", 256, 32));
    tensors.extend(q("model.layers.0.self_attn.q_proj.weight", 256, 32));
    tensors.extend(q("lm_head.weight", 1024, 64));
    tensors.push(("model.norm.weight".to_string(), "BF16", vec![256]));
    safetensors(&tensors)
}

pub fn tiny_model_files() -> Vec<FakeFile> {
    vec![
        FakeFile::new(".gitattributes", b"*.safetensors filter=lfs\n".to_vec(), false),
        FakeFile::new("README.md", b"# tiny\n".to_vec(), false),
        FakeFile::new("config.json", config_json().into_bytes(), false),
        FakeFile::new(
            "tokenizer.json",
            br#"{"version":"1.0","model":{"type":"BPE","vocab":{"a":0},"merges":[]}}"#.to_vec(),
            false,
        ),
        FakeFile::new(
            "tokenizer_config.json",
            br#"{"chat_template":"{% for m in messages %}{{ m.content }}{% endfor %}","eos_token":"a"}"#
                .to_vec(),
            false,
        ),
        FakeFile::new(WEIGHTS, tiny_safetensors(), true),
    ]
}

pub fn weights_len() -> u64 {
    tiny_safetensors().len() as u64
}

/// Every path under `dir`, relative, sorted (to show what a test left behind).
pub fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}
