//! The checked-in completions/ and man/ are what the clap definitions generate. When this
//! fails, run `cargo run -p rmx-cli -- completions --write` and commit the result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let entry = entry.unwrap();
        out.insert(
            entry.file_name().to_string_lossy().into_owned(),
            std::fs::read(entry.path()).unwrap(),
        );
    }
    out
}

#[test]
fn completions_and_man_pages_are_in_sync_with_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(rmx_tests::rmx())
        .args(["completions", "--write", "--dir"])
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(status.success());
    let repo = rmx_tests::repo_root();
    for sub in ["completions", "man"] {
        let fresh = files(&tmp.path().join(sub));
        let checked_in = files(&repo.join(sub));
        let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&checked_in),
            names(&fresh),
            "{sub}/ is out of date: run `cargo run -p rmx-cli -- completions --write`"
        );
        for (name, bytes) in &fresh {
            assert!(
                checked_in[name] == *bytes,
                "{sub}/{name} is out of date: run `cargo run -p rmx-cli -- completions --write`"
            );
        }
    }
}

#[test]
fn completions_print_for_a_shell() {
    let out = std::process::Command::new(rmx_tests::rmx())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rmx") && text.contains("serve") && text.contains("chat"));
}
