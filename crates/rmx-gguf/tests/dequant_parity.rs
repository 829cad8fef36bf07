//! The reader and dequantization against gguf-py (`gguf.quants.dequantize`): synthetic blocks of
//! every supported type, and real tensors of the two real models.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;

use common::{assert_same_f32, read_f32, real_gguf, run_python, script};
use rmx_gguf::{GgmlType, GgufFile, MetaValue};

#[test]
fn synthetic_file_matches_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    run_python(&[
        script("make_synthetic.py").as_os_str(),
        dir.path().as_os_str(),
    ]);
    let gguf = GgufFile::open(dir.path().join("synthetic.gguf")).unwrap();

    assert_eq!(gguf.version(), 3);
    assert_eq!(gguf.alignment(), 64);
    assert_eq!(gguf.data_offset() % 64, 0);
    let m = |k: &str| gguf.get(k).unwrap_or_else(|| panic!("missing {k}")).clone();
    assert_eq!(m("test.u8"), MetaValue::U8(200));
    assert_eq!(m("test.i8"), MetaValue::I8(-100));
    assert_eq!(m("test.u16"), MetaValue::U16(60000));
    assert_eq!(m("test.i16"), MetaValue::I16(-30000));
    assert_eq!(m("test.u32"), MetaValue::U32(4_000_000_000));
    assert_eq!(m("test.i32"), MetaValue::I32(-2_000_000_000));
    assert_eq!(m("test.f32"), MetaValue::F32(0.25));
    assert_eq!(m("test.u64"), MetaValue::U64(1 << 40));
    assert_eq!(m("test.i64"), MetaValue::I64(-(1 << 40)));
    assert_eq!(m("test.f64"), MetaValue::F64(1e-300));
    assert_eq!(m("test.bool"), MetaValue::Bool(true));
    assert_eq!(gguf.get_str("test.string"), Some("héllo ▁ world"));
    let strs: Vec<_> = m("test.array_str")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(strs, ["a", "bc", ""]);
    assert_eq!(
        m("test.array_i32"),
        MetaValue::Array(vec![
            MetaValue::I32(1),
            MetaValue::I32(-2),
            MetaValue::I32(3)
        ])
    );
    let nested = m("test.array_nested");
    assert_eq!(nested.as_array().map(|a| a.len()), Some(2));
    assert_eq!(gguf.architecture().unwrap(), "llama");

    let want_types = [
        ("t.f32", GgmlType::F32),
        ("t.f16", GgmlType::F16),
        ("t.bf16", GgmlType::Bf16),
        ("t.q8_0", GgmlType::Q8_0),
        ("t.q4_0", GgmlType::Q4_0),
        ("t.q4_1", GgmlType::Q4_1),
        ("t.q5_0", GgmlType::Q5_0),
        ("t.q5_1", GgmlType::Q5_1),
        ("t.q4_k", GgmlType::Q4K),
        ("t.q5_k", GgmlType::Q5K),
        ("t.q6_k", GgmlType::Q6K),
    ];
    assert_eq!(gguf.tensors().len(), want_types.len());
    for (name, ty) in want_types {
        let info = gguf.tensor(name).unwrap();
        assert_eq!(info.ggml_type, ty, "{name}");
        assert_eq!(info.shape(), vec![4, 512], "{name}");
        assert_eq!(info.offset % 64, 0, "{name} is not aligned");
        let want = read_f32(&dir.path().join("ref").join(format!("{name}.f32")));
        assert_same_f32(name, &gguf.tensor_f32(name).unwrap(), &want);
        // Reading a slab of rows gives the same values as that part of the whole.
        let slab = gguf.read_tensor_range_f32(info, 512, 1024).unwrap();
        assert_same_f32(&format!("{name} rows 1..3"), &slab, &want[512..1536]);
    }
}

/// Checks the tensor directory against gguf-py's and dequantizes `names` both ways.
fn check_real(var: &str, names: &[&str]) {
    let path = real_gguf(var);
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        script("dequant_ref.py").into_os_string(),
        path.clone().into_os_string(),
        dir.path().as_os_str().to_owned(),
    ];
    args.extend(names.iter().map(Into::into));
    run_python(&args);
    let gguf = GgufFile::open(&path).unwrap();

    let listing: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("tensors.json")).unwrap()).unwrap();
    assert_eq!(listing.len(), gguf.tensors().len());
    let ours: HashMap<&str, _> = gguf
        .tensors()
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    for t in &listing {
        let name = t["name"].as_str().unwrap();
        let info = ours[name];
        assert_eq!(
            info.ggml_type.to_string(),
            t["type"].as_str().unwrap(),
            "{name}"
        );
        let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
        assert_eq!(info.shape(), shape, "{name}");
        assert_eq!(info.offset, t["offset"].as_u64().unwrap(), "{name}");
    }
    for name in names {
        let want = read_f32(&dir.path().join(format!("{name}.f32")));
        assert_same_f32(name, &gguf.tensor_f32(name).unwrap(), &want);
    }
}

#[test]
fn smollm2_tensors_match_gguf_py() {
    check_real(
        "RMX_TEST_GGUF_SMOLLM2",
        &[
            "token_embd.weight",
            "blk.0.attn_q.weight",
            "blk.29.ffn_down.weight",
            "output_norm.weight",
        ],
    );
}

#[test]
fn gemma3_tensors_match_gguf_py() {
    check_real(
        "RMX_TEST_GGUF_GEMMA3",
        &[
            "blk.0.attn_output.weight", // Q4_K
            "blk.0.ffn_down.weight",    // Q6_K
            "blk.0.attn_q.weight",      // Q5_0
            "blk.0.attn_v.weight",      // Q8_0
            "blk.0.attn_q_norm.weight", // F32
        ],
    );
}
