//! `rmx pull`, `ls`, `info`, `rm`, `models`, `alias` end to end: the real binary against a
//! local Hub (`rmx_tests::fake_hub`) and a temporary store, output snapshotted.
//! `rmx pull` goes through the daemon it starts in the test home.

use std::time::{Duration, Instant};

use rmx_tests::hub_env::Env;
use rmx_tests::tiny_repo::{tree, REPO, WEIGHTS};

/// Files finish in whatever order the parallel transfers do; sort each run of indented
/// per-file lines so the snapshot is stable.
fn sorted_file_lines(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with("  ") {
            block.push(line);
            continue;
        }
        block.sort_unstable();
        out.extend(block.drain(..).map(str::to_string));
        out.push(line.to_string());
    }
    block.sort_unstable();
    out.extend(block.drain(..).map(str::to_string));
    out.join("\n") + "\n"
}

/// The memory verdict depends on the machine running the test.
fn mask_memory(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("fits in memory") {
            Some(i) => format!("{}fits in memory    [MACHINE]", &l[..i]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn mask_json_time(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(items) = v.as_array_mut() {
        for item in items {
            if let Some(m) = item.get_mut("modified") {
                *m = serde_json::json!("[TIME]");
            }
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_ls_info_rm() {
    let env = Env::new().await;
    let ls = env.run(&["ls"]).await.ok();
    insta::assert_snapshot!("ls_empty", ls.stdout);

    env.run(&["alias", "add", "tiny", REPO, "--context-length", "4096"])
        .await
        .ok();
    assert!(env.daemon_pid().is_none());
    let pull = env.run(&["pull", "tiny"]).await.ok();
    insta::assert_snapshot!("pull_plain", sorted_file_lines(&pull.stdout));
    assert_eq!(pull.stderr, "", "plain mode draws nothing on stderr");
    assert!(
        env.daemon_pid().is_some() && env.daemon_log().contains("daemon (pid"),
        "the pull ran in a daemon it started:\n{}",
        env.daemon_log()
    );

    // A second pull transfers nothing.
    env.hub.reset_counters();
    let again = env.run(&["pull", REPO]).await.ok();
    assert_eq!(env.hub.served_total(), 0);
    insta::assert_snapshot!("pull_again", sorted_file_lines(&again.stdout));

    let ls = env.run(&["ls"]).await.ok();
    insta::assert_snapshot!("ls", ls.stdout);
    let json = env.run(&["ls", "--json"]).await.ok();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).expect("ls --json");
    insta::assert_json_snapshot!("ls_json", mask_json_time(json));

    let info = env.run(&["info", "tiny"]).await.ok();
    insta::assert_snapshot!("info", mask_memory(&info.stdout));
    let json = env.run(&["info", "tiny", "--json"]).await.ok();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).expect("info --json");
    assert_eq!(json["parameters"], 393_472);
    assert!(json["memory"]["total"].as_u64().is_some_and(|t| t > 0));

    // No answer (stdin closed) and "n" both keep the model.
    let refused = env.run(&["rm", "tiny"]).await.failed();
    insta::assert_snapshot!(
        "rm_no_answer",
        format!("{}{}", refused.stdout, refused.stderr)
    );
    let mut cmd = env.rmx();
    cmd.args(["rm", "tiny"]);
    let kept = run_with_stdin(&env, cmd, "n\n").await;
    insta::assert_snapshot!("rm_kept", kept);
    assert!(env
        .cache()
        .join("models--test-org--tiny-llama-4bit")
        .is_dir());

    let rm = env.run(&["rm", "-y", "tiny"]).await.ok();
    insta::assert_snapshot!("rm", rm.stdout);
    assert!(!env
        .cache()
        .join("models--test-org--tiny-llama-4bit")
        .exists());
    let missing = env.run(&["rm", "-y", "tiny"]).await.failed();
    insta::assert_snapshot!("rm_missing", missing.stderr);
    assert_eq!(env.run(&["ls"]).await.ok().stdout, ls_empty_text());
}

fn ls_empty_text() -> String {
    "no models yet: `rmx pull <name>` downloads one, `rmx models` lists the names\n".to_string()
}

async fn run_with_stdin(env: &Env, mut cmd: std::process::Command, input: &str) -> String {
    use std::io::Write;
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let input = input.to_string();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().expect("spawn rmx");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).expect("write stdin");
        }
        child.wait_with_output().expect("wait rmx")
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.mask(&String::from_utf8_lossy(&out.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_errors_are_clear() {
    let env = Env::new().await;
    let unknown = env.run(&["pull", "smollm2"]).await.failed();
    insta::assert_snapshot!("unknown_alias", unknown.stderr);

    let no_repo = env.run(&["pull", "nobody/nothing"]).await.failed();
    insta::assert_snapshot!("repo_missing", no_repo.stderr);

    env.hub.make_missing(REPO, "tokenizer.json");
    let no_file = env.run(&["pull", REPO]).await.failed();
    insta::assert_snapshot!("file_missing", no_file.stderr);
    assert!(
        !env.cache()
            .join("models--test-org--tiny-llama-4bit")
            .exists(),
        "a failed plan writes nothing"
    );

    let env = Env::new().await;
    let mut cmd = env.rmx();
    cmd.args(["pull", REPO]).env("RMX_DEBUG_FREE_SPACE", "1000");
    let full = env.run_cmd(cmd).await.failed();
    insta::assert_snapshot!("disk_full", full.stderr);
}

/// Ctrl-C in the middle of a transfer leaves the partial blob and says how to resume; the
/// next pull fetches only the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_pull_resumes() {
    let env = Env::new().await;
    env.hub.stall_after(WEIGHTS, 100_000);
    let mut cmd = env.rmx();
    cmd.args(["pull", REPO])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("spawn rmx");
    let blobs = env.cache().join("models--test-org--tiny-llama-4bit/blobs");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let partial = std::fs::read_dir(&blobs).ok().and_then(|entries| {
            entries.flatten().find(|e| {
                e.file_name().to_string_lossy().ends_with(".incomplete")
                    && e.metadata().is_ok_and(|m| m.len() >= 100_000)
            })
        });
        if partial.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stalled download never reached 100 KB: {:?}",
            tree(env.dir.path())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let stderr = env.mask(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(130), "stderr: {stderr}");
    insta::assert_snapshot!("interrupted", stderr);
    assert!(
        tree(env.dir.path())
            .iter()
            .any(|p| p.ends_with(".incomplete")),
        "the partial blob stays for the next pull"
    );

    env.hub.reset_counters();
    let resumed = env.run(&["pull", REPO]).await.ok();
    assert!(
        resumed
            .stdout
            .contains(&format!("  {WEIGHTS}: resuming at 100.0 KB")),
        "{}",
        resumed.stdout
    );
    let weights = rmx_tests::tiny_repo::tiny_safetensors().len() as u64;
    assert_eq!(env.hub.served(WEIGHTS), weights - 100_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_aliases() {
    let env = Env::new().await;
    let models = env.run(&["models"]).await.ok();
    assert!(models.stdout.starts_with("NAME"), "{}", models.stdout);
    assert!(
        models.stdout.contains("smollm2-"),
        "built-in aliases are listed"
    );
    let cached = env.run(&["models", "--cached"]).await.ok();
    insta::assert_snapshot!("models_cached_empty", cached.stdout);

    let bad = env.run(&["alias", "add", "Tiny!", REPO]).await.failed();
    insta::assert_snapshot!("alias_bad_name", bad.stderr);
    env.run(&[
        "alias",
        "add",
        "tiny",
        REPO,
        "--tool-parser",
        "hermes",
        "--reasoning-parser",
        "think",
        "--context-length",
        "4096",
    ])
    .await
    .ok();
    env.run(&["pull", "tiny"]).await.ok();
    let cached = env.run(&["models", "--cached"]).await.ok();
    insta::assert_snapshot!("models_cached", cached.stdout);
    let json = env.run(&["alias", "ls", "--json"]).await.ok();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).expect("alias ls --json");
    let tiny = json
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "tiny"))
        .expect("tiny is listed");
    insta::assert_json_snapshot!("alias_tiny", tiny);

    let builtin = env
        .run(&["alias", "rm", "smollm2-135m-8bit"])
        .await
        .failed();
    insta::assert_snapshot!("alias_rm_builtin", builtin.stderr);
    let rm = env.run(&["alias", "rm", "tiny"]).await.ok();
    assert_eq!(rm.stdout, "removed alias tiny\n");
    let gone = env.run(&["info", "tiny"]).await.failed();
    insta::assert_snapshot!("info_unknown", gone.stderr);
}

/// The list of families this rmx loads grows with rmx-models; snapshots show where it goes.
fn mask_supported(text: &str) -> String {
    const KEY: &str = "supported: ";
    text.lines()
        .map(|line| match line.find(KEY) {
            Some(i) => {
                let rest = &line[i + KEY.len()..];
                let end = rest.find(". ").unwrap_or(rest.len());
                format!("{}{KEY}[SUPPORTED]{}", &line[..i], &rest[end..])
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

/// A model folder (config.json of this family, the tiny weights) under the env's dir.
fn model_folder(env: &Env, name: &str, model_type: &str, architecture: &str) -> String {
    let dir = env.dir.path().join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut config: serde_json::Value =
        serde_json::from_str(&rmx_tests::tiny_repo::config_json()).expect("config");
    config["model_type"] = model_type.into();
    config["architectures"] = serde_json::json!([architecture]);
    std::fs::write(dir.join("config.json"), config.to_string()).expect("write config");
    std::fs::write(dir.join(WEIGHTS), rmx_tests::tiny_repo::tiny_safetensors())
        .expect("write weights");
    dir.display().to_string()
}

/// Issue #21: `rmx pull` of a family this rmx cannot load stops at config.json, before any
/// weight file is asked for, saying which families load and what to do; `rmx ls` and
/// `rmx info` mark such a model on disk, with the reason, in text and JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_21_unsupported_families_are_refused_by_pull_and_marked_by_ls_and_info() {
    const GEMMA3N: &str = "test-org/tiny-gemma3n";
    let env = Env::new().await;
    let files = rmx_tests::tiny_repo::tiny_model_files()
        .into_iter()
        .map(|f| match f.name.as_str() {
            "config.json" => rmx_tests::fake_hub::FakeFile::new(
                "config.json",
                br#"{"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n"}"#
                    .to_vec(),
                false,
            ),
            _ => f,
        })
        .collect();
    env.hub
        .add_repo(GEMMA3N, rmx_tests::tiny_repo::COMMIT, files);

    let pull = env.run(&["pull", GEMMA3N]).await.failed();
    assert!(
        pull.stderr.contains("supported: ") && pull.stderr.contains("llama"),
        "{}",
        pull.stderr
    );
    insta::assert_snapshot!("pull_unsupported_family", mask_supported(&pull.stderr));
    let requests = env.hub.requests();
    assert!(
        requests.iter().any(|r| r.ends_with("/config.json")),
        "{requests:?}"
    );
    assert!(
        !requests.iter().any(|r| r.contains(".safetensors")),
        "a weight file was requested: {requests:?}"
    );
    assert!(!env.cache().join("models--test-org--tiny-gemma3n").exists());

    // The same family on disk, named by a user alias, beside a model that loads.
    env.run(&["pull", REPO]).await.ok();
    let folder = model_folder(
        &env,
        "gemma3n-folder",
        "gemma3n",
        "Gemma3nForConditionalGeneration",
    );
    env.run(&["alias", "add", "g3n", &folder]).await.ok();
    let ls = env.run(&["ls"]).await.ok();
    let ls_text: String = ls
        .stdout
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string() + "\n")
        .collect();
    assert_eq!(
        ls_text, "NAME\ntest-org/tiny-llama-4bit\ng3n\n",
        "{}",
        ls.stdout
    );
    insta::assert_snapshot!(
        "ls_unsupported_family",
        mask_supported(&format!("{}--- stderr\n{}", ls.stdout, ls.stderr))
    );
    let json = env.run(&["ls", "--json"]).await.ok();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).expect("ls --json");
    let rows = json.as_array().expect("rows");
    let by_name = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(by_name(REPO)["cannot_load"], serde_json::Value::Null);
    let g3n = by_name("g3n");
    assert_eq!(g3n["cannot_load"]["family"], "gemma3n", "{json}");
    assert!(
        g3n["cannot_load"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("family `gemma3n` is not supported by this rmx")),
        "{json}"
    );

    let info = env.run(&["info", "g3n"]).await.ok();
    insta::assert_snapshot!(
        "info_unsupported_family",
        mask_supported(&mask_memory(&info.stdout))
    );
    let json = env.run(&["info", "g3n", "--json"]).await.ok();
    let json: serde_json::Value = serde_json::from_str(&json.stdout).expect("info --json");
    assert_eq!(json["cannot_load"]["family"], "gemma3n", "{json}");
}

/// Issue #21: `rmx alias add NAME /folder --tool-parser hermes` is honoured: `rmx info` shows
/// the alias's hints, not the ones guessed from config.json (llama: llama3_json).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_21_a_folder_alias_keeps_its_hints() {
    let env = Env::new().await;
    let folder = model_folder(&env, "llama-folder", "llama", "LlamaForCausalLM");
    let by_path = env.run(&["info", &folder, "--json"]).await.ok();
    let by_path: serde_json::Value = serde_json::from_str(&by_path.stdout).expect("info --json");
    assert_eq!(by_path["hints"]["tool_parser"], "llama3_json");
    env.run(&[
        "alias",
        "add",
        "mine",
        &folder,
        "--tool-parser",
        "hermes",
        "--reasoning-parser",
        "think",
    ])
    .await
    .ok();
    let info = env.run(&["info", "mine", "--json"]).await.ok();
    let info: serde_json::Value = serde_json::from_str(&info.stdout).expect("info --json");
    assert_eq!(
        info["hints"],
        serde_json::json!({"tool_parser": "hermes", "reasoning_parser": "think"})
    );
    let text = env.run(&["info", "mine"]).await.ok();
    assert!(
        text.stdout.contains("tool calls        hermes"),
        "{}",
        text.stdout
    );
}

/// Issue #24: a Qwen3.5 checkpoint as the Hub ships it, pulled from a local Hub, then `rmx
/// import REPO --quant 4bit` by its name: a 4-bit MLX model with its MTP head under the repo's
/// name, which `rmx info` marks and `rmx run --speculative mtp` answers with as without.
#[tokio::test]
async fn a_pulled_hub_checkpoint_imports_by_name_with_its_mtp_head() {
    const HUB_REPO: &str = "test-org/Qwen3.5-tiny-MTP";
    let dir =
        rmx_tests::models::mtp_scripted("scripted-hub", " Seven swans swim past quiet reeds.");
    let env = Env::new().await;
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let lfs = name.ends_with(".safetensors");
            rmx_tests::fake_hub::FakeFile::new(&name, std::fs::read(&p).unwrap(), lfs)
        })
        .collect();
    env.hub
        .add_repo(HUB_REPO, rmx_tests::tiny_repo::COMMIT, files);
    env.run(&["pull", HUB_REPO]).await.ok();
    let info = env.run(&["info", HUB_REPO]).await.ok();
    assert!(info.stdout.contains("its own MTP head"), "{}", info.stdout);
    let import = env.run(&["import", HUB_REPO, "--quant", "4bit"]).await.ok();
    assert!(
        import.stdout.contains("imported qwen3-5-tiny-mtp")
            && import.stdout.contains("with its MTP head"),
        "{}",
        import.stdout
    );
    let args = [
        "run",
        "qwen3-5-tiny-mtp",
        "Say it.\nassistant",
        "--raw",
        "--max-tokens",
        "6",
    ];
    let plain = env.run(&args).await.ok();
    let mut guessed = args.to_vec();
    guessed.extend(["--speculative", "mtp"]);
    let spec = env.run(&guessed).await.ok();
    assert_eq!(spec.stdout, plain.stdout);
}
