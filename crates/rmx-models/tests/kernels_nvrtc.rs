//! Every CUDA kernel of the fast path (src/kernels/*.cuh) compiles under NVRTC the way MLX's
//! `cuda_kernel` wraps it, on a machine without a GPU (pip's NVRTC from the test venv): a kernel
//! that does not compile fails here instead of on the lent GPU's clock.

use std::process::Command;

/// What scripts/bench/`script` (with `args`) prints, asserting it succeeded.
fn bench_script(script: &str, args: &[&str]) -> String {
    let python = rmx_settings::var(rmx_settings::EnvVars::RMX_TEST_PYTHON).unwrap_or_else(|| {
        panic!("RMX_TEST_PYTHON is not set: run `. scripts/test-env.sh` first, or scripts/test.sh")
    });
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new(python)
        .arg(format!("{root}/scripts/bench/{script}"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn every_fast_path_kernel_section_compiles_under_nvrtc() {
    let text = bench_script("nvrtc_check.py", &[]);
    // The check must cover every section the engine launches kernels from.
    let launchers = [
        include_str!("../src/fastpath/gemv.rs"),
        include_str!("../src/fastpath/attention.rs"),
        include_str!("../src/fastpath/swiglu.rs"),
        include_str!("../src/fastpath/gated_delta.rs"),
        include_str!("../src/fastpath/pick.rs"),
        include_str!("../src/fastpath/embed_rows.rs"),
        include_str!("../src/decode_layer.rs"),
        include_str!("../src/moe_kernels.rs"),
    ];
    let sections: Vec<&str> = launchers
        .iter()
        .flat_map(|src| src.lines())
        .filter_map(|l| l.trim().strip_prefix("section: \""))
        .map(|l| l.trim_end_matches("\","))
        .collect();
    assert!(sections.len() >= 5, "sections found: {sections:?}");
    for s in sections {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.split_whitespace().nth(1) == Some(s)),
            "nvrtc_check.py compiled nothing of section {s}:\n{text}"
        );
    }
}

/// scripts/bench/mma_lab.py's kernels (the tensor-core product against the rows kernel's, for
/// the GPU machine) still compile against kernels/layer_rows.cuh as it changes.
#[test]
fn the_tensor_core_lab_compiles_under_nvrtc() {
    let text = bench_script("mma_lab.py", &["--nvrtc"]);
    // With the `<`: "lab_mma" alone would also match lab_mma2's line.
    for k in ["lab_dp4a<", "lab_mma<", "lab_mma2<"] {
        assert!(
            text.lines().any(|l| l.starts_with("ok") && l.contains(k)),
            "{k} not compiled:\n{text}"
        );
    }
}
