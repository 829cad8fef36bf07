//! What the store CLI suites (store_cli, pull_daemon) share: a local Hub ([`crate::fake_hub`])
//! serving a tiny MLX-style model, a temporary `HF_HUB_CACHE` + `RMX_HOME`, and the real `rmx`
//! binary pointed at them. `rmx pull` runs in the daemon, which the first pull starts in that
//! home (on a free port) and dropping the [`Env`] stops.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::fake_hub::{FakeFile, FakeHub};

pub const REPO: &str = "test-org/tiny-llama-4bit";
pub const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
pub const WEIGHTS: &str = "model.safetensors";

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

/// A fake Hub with the tiny model, and a temporary home for everything rmx writes.
pub struct Env {
    pub hub: FakeHub,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Env {
    pub async fn new() -> Env {
        let hub = FakeHub::start().await;
        hub.add_repo(REPO, COMMIT, tiny_model_files());
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Env { hub, dir, port }
    }

    pub fn cache(&self) -> PathBuf {
        self.dir.path().join("hf").join("hub")
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("rmx")
    }

    /// The real binary, with the store, the hub and HOME pointed into the temp dir and
    /// nothing of the caller's environment that could change what it prints.
    pub fn rmx(&self) -> Command {
        let mut cmd = Command::new(crate::rmx());
        cmd.env("HOME", self.dir.path())
            .env("HF_HUB_CACHE", self.cache())
            .env("RMX_HOME", self.home())
            .env("HF_ENDPOINT", &self.hub.url)
            .env_remove("HF_HOME")
            .env_remove("HF_TOKEN")
            .env_remove("HF_TOKEN_PATH")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_RUNTIME_DIR")
            .env("RMX_HOST", format!("127.0.0.1:{}", self.port))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        cmd
    }

    /// The pid of the daemon running in this home, from its lock file.
    pub fn daemon_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.home().join("daemon.lock"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The daemon's log (what it says about a pull that went wrong).
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.home().join("logs/daemon.log")).unwrap_or_default()
    }

    /// Runs `rmx args...` (off the async runtime: the hub must keep serving meanwhile).
    pub async fn run(&self, args: &[&str]) -> Run {
        let mut cmd = self.rmx();
        cmd.args(args);
        self.run_cmd(cmd).await
    }

    pub async fn run_cmd(&self, mut cmd: Command) -> Run {
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("run rmx");
        Run::new(out, self)
    }

    /// Paths and clock-dependent text replaced by stable markers.
    pub fn mask(&self, text: &str) -> String {
        let tmp = self.dir.path().display().to_string();
        let mut out = text.replace(&tmp, "[TMP]").replace(&self.hub.url, "[HUB]");
        for unit in ["B", "KB", "MB", "GB"] {
            out = mask_rates(&out, unit);
        }
        out
    }
}

impl Drop for Env {
    /// Stops the daemon a pull started (SIGTERM, then SIGKILL).
    fn drop(&mut self) {
        let Some(pid) = self.daemon_pid() else { return };
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
        };
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let start = std::time::Instant::now();
        while alive() && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if alive() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// ` in 0.1s (3.5 MB/s)` -> ` in [TIME]`: the only clock-dependent text of a pull.
fn mask_rates(text: &str, unit: &str) -> String {
    text.lines()
        .map(
            |line| match (line.find(" in "), line.ends_with(&format!("{unit}/s)"))) {
                (Some(i), true) => format!("{} in [TIME]", &line[..i]),
                _ => line.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn new(out: Output, env: &Env) -> Run {
        Run {
            code: out.status.code(),
            stdout: env.mask(&String::from_utf8_lossy(&out.stdout)),
            stderr: env.mask(&String::from_utf8_lossy(&out.stderr)),
        }
    }

    pub fn ok(self) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "rmx failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    pub fn failed(self) -> Run {
        assert_ne!(
            self.code,
            Some(0),
            "rmx should have failed\nstdout:\n{}",
            self.stdout
        );
        self
    }
}

/// Every path under `dir`, relative, sorted.
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
