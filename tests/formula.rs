//! scripts/release-formula.sh on a tag of a throwaway clone: the Homebrew formula it writes is
//! valid Ruby (`ruby -c`, RMX_TEST_RUBY from scripts/test-env.sh), carries what a release needs
//! (the tag's URL, Homebrew's MLX, a test block running `rmx --version` and `rmx doctor --json`),
//! and its sha256 is that of the tag's `git archive`, the same bytes on every run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

const TAG: &str = "v9.9.9";

/// This checkout (not `rmx_tests::repo_root`: the support library may have been built from
/// another worktree sharing the target folder).
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn ruby() -> PathBuf {
    std::env::var_os("RMX_TEST_RUBY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!("RMX_TEST_RUBY is not set: `. scripts/test-env.sh` finds or fetches a ruby")
        })
}

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    out.stdout
}

/// Runs the release script (this tree's) in `clone`, writing into `out`; returns the formula.
fn release(clone: &Path, out: &Path) -> String {
    let script = repo().join("scripts/release-formula.sh");
    let run = Command::new("bash")
        .arg(script)
        .arg(TAG)
        .current_dir(clone)
        .env("RMX_FORMULA_OUT", out.join("rmx.rb"))
        .env("RMX_ARCHIVE_OUT", out.join("rmx.tar.gz"))
        .output()
        .unwrap();
    assert!(run.status.success(), "release-formula.sh: {run:?}");
    std::fs::read_to_string(out.join("rmx.rb")).unwrap()
}

fn field<'a>(formula: &'a str, key: &str) -> &'a str {
    formula
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix(key)?
                .trim()
                .strip_prefix('"')?
                .strip_suffix('"')
        })
        .unwrap_or_else(|| panic!("no {key} in the formula:\n{formula}"))
}

#[test]
fn the_release_formula_is_valid_ruby_and_sums_the_tags_archive() {
    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("rmx");
    git(
        dir.path(),
        &["clone", "--quiet", repo().to_str().unwrap(), "rmx"],
    );
    git(&clone, &["tag", TAG]);
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let formula = release(&clone, &first);

    let check = Command::new(ruby())
        .arg("-c")
        .arg(first.join("rmx.rb"))
        .output()
        .unwrap();
    assert!(
        check.status.success() && String::from_utf8_lossy(&check.stdout).contains("Syntax OK"),
        "ruby -c: {check:?}\n{formula}"
    );

    // The sum is the archive's, as git builds it for the tag (GitHub's prefix), not just the
    // script's own file's.
    let archive = git(
        &clone,
        &["archive", "--format=tar.gz", "--prefix=rmx-9.9.9/", TAG],
    );
    let sha256 = hex::encode(Sha256::digest(&archive));
    assert_eq!(field(&formula, "sha256"), sha256);
    assert_eq!(std::fs::read(first.join("rmx.tar.gz")).unwrap(), archive);
    // Deterministic: a second run writes the same formula.
    assert_eq!(release(&clone, &second), formula);

    assert!(field(&formula, "url").ends_with("/archive/refs/tags/v9.9.9.tar.gz"));
    for needed in [
        "depends_on \"mlx\"",
        "ENV[\"MLX_DIR\"] = Formula[\"mlx\"].opt_prefix",
        "test do",
        "rmx --version",
        "rmx doctor --json",
    ] {
        assert!(formula.contains(needed), "no {needed:?} in:\n{formula}");
    }
}

/// The checked-in formula (placeholders until the first release rewrites it) parses too.
#[test]
fn the_checked_in_formula_is_valid_ruby() {
    let check = Command::new(ruby())
        .arg("-c")
        .arg(repo().join("Formula/rmx.rb"))
        .output()
        .unwrap();
    assert!(check.status.success(), "ruby -c Formula/rmx.rb: {check:?}");
}
