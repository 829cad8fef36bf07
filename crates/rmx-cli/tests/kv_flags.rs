//! Issue #24: `--kv-bits`, `--kv-group-size` and `--kv-quant-start` out of range are refused
//! by the CLI, saying what is allowed, before any daemon or model is touched.

use std::process::Command;

fn rmx(args: &[&str]) -> (bool, String) {
    // A home of its own, in case a refusal came too late and something started.
    let home = std::env::temp_dir().join(format!("rmx-kv-flags-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("home");
    let out = Command::new(env!("CARGO_BIN_EXE_rmx"))
        .args(args)
        .env("RMX_HOME", &home)
        .output()
        .expect("running rmx");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kv_flags_out_of_range_are_refused_with_what_is_allowed() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["run", "m", "hi", "--kv-bits", "3"],
            "[possible values: 4, 8]",
        ),
        (&["chat", "m", "--kv-bits", "16"], "[possible values: 4, 8]"),
        (
            &["run", "m", "hi", "--kv-bits", "8", "--kv-group-size", "48"],
            "[possible values: 32, 64, 128]",
        ),
        (
            &["run", "m", "hi", "--kv-bits", "8", "--kv-quant-start=-1"],
            "--kv-quant-start",
        ),
        (&["serve", "--kv-group-size", "32"], "--kv-bits <BITS>"),
        (
            &["bench", "m", "--kv-bits", "8", "--submit"],
            "leave out --kv-bits",
        ),
    ];
    for (args, want) in cases {
        let (ok, err) = rmx(args);
        assert!(!ok, "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
