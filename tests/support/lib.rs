//! What the tests of rmx share, in one place: the end-to-end suites beside this folder, and
//! the crates' own tests (rmx-engine, rmx-server, rmx-store take it as a dev-dependency).
//!
//! - [`rmx`]: the real `rmx` binary of this build, built on first use.
//! - [`models`]: tiny random-weight models written by mlx-lm (`py/tiny_models.py`) and mlx-lm's
//!   own outputs on them, through long-lived reference workers ([`py_worker`]); [`api`]: the
//!   tiny Qwen3 the HTTP suites share.
//! - [`home`]: a throwaway rmx home (store, socket, TCP port) that stops its daemon when dropped.
//! - [`fake_hub`], [`tiny_repo`] and [`hub_env`]: a local Hugging Face Hub, the tiny model repo it
//!   serves, and a home pointed at it.
//! - [`http`]: requests through a `Router` without a socket, a router on a real port, SSE parsing.
//!
//! No rmx crate is a dependency, so no crate's tests make a cycle by using this one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod api;
pub mod encoders;
pub mod fake_hub;
pub mod home;
pub mod http;
pub mod hub_env;
pub mod images;
pub mod models;
pub mod py_worker;
pub mod tiny_repo;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository's root.
pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
}

/// A script of `tests/py/`.
pub fn py(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("py")
        .join(script)
}

/// The Python with MLX, mlx-lm and the API clients (scripts/test-env.sh makes it). A test
/// that needs it fails, never skips, without it.
pub fn python() -> String {
    match std::env::var("RMX_TEST_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "RMX_TEST_PYTHON is not set: these tests need the test venv (MLX, mlx-lm and the \
             openai, anthropic and ollama clients). Run scripts/test.sh, or \
             `. scripts/test-env.sh` first."
        ),
    }
}

/// The running test executable's profile folder, `target/<profile>` (the executable sits in
/// its `deps/`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable sits in target/<profile>/deps")
        .to_path_buf()
}

/// Cargo's target folder of this build (`CARGO_TARGET_DIR` honoured, as the executable lives
/// there).
pub fn target_dir() -> PathBuf {
    profile_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .to_path_buf()
}

/// A folder under the target folder for what tests write and keep between runs (models).
pub fn target_tmp(name: &str) -> PathBuf {
    let dir = target_dir().join("tmp").join(name);
    std::fs::create_dir_all(dir.parent().expect("target/tmp")).expect("create target/tmp");
    dir
}

/// The real `rmx` binary, next to this test executable's profile folder.
///
/// Cargo sets `CARGO_BIN_EXE_rmx` only for rmx-cli's own tests, and `cargo test` builds a
/// package's binaries only for its own integration tests; so the first call in each test
/// process runs `cargo build -p rmx-cli --bin rmx` with the same profile and target folder
/// (a no-op when the binary is fresh). Cargo releases its build lock before it runs tests, so
/// this works inside `cargo test --workspace --all-targets` and `cargo test -p rmx-tests`.
pub fn rmx() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let profile_dir = profile_dir();
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "rmx-cli",
            "--bin",
            "rmx",
            "--target-dir",
        ])
        .arg(target_dir())
        .current_dir(repo_root());
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => {}
            Some("release") => {
                cmd.arg("--release");
            }
            Some(other) => {
                cmd.args(["--profile", other]);
            }
            None => panic!("no profile folder in {}", profile_dir.display()),
        }
        let out = cmd.output().expect("run cargo to build the rmx binary");
        assert!(
            out.status.success(),
            "`cargo build -p rmx-cli --bin rmx` failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = profile_dir.join(format!("rmx{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.is_file(), "cargo built no {}", bin.display());
        bin
    })
}
