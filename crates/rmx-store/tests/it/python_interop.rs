//! The cache is shared with Python's huggingface_hub both ways. Needs the test venv:
//! `. scripts/test-env.sh` (or run scripts/test.sh), which sets RMX_TEST_PYTHON.

use std::path::PathBuf;

use rmx_store::{ModelStatus, NoProgress, StoreError};

use crate::fixtures::{Env, COMMIT, REPO, TINY_PARAMS, WEIGHTS};

fn python() -> PathBuf {
    match std::env::var_os("RMX_TEST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => panic!(
            "RMX_TEST_PYTHON is not set: these tests need Python's huggingface_hub. \
             Run `. scripts/test-env.sh` first, or use scripts/test.sh"
        ),
    }
}

/// Run a snippet with huggingface_hub pointed at the fake hub and the test's cache; its
/// stdout is parsed as JSON.
async fn run_python(env: &Env, code: &str) -> serde_json::Value {
    let out = tokio::process::Command::new(python())
        .arg("-c")
        .arg(code)
        .env("HF_ENDPOINT", &env.hub.url)
        .env("HF_HOME", env.dir.path().join("hf"))
        .env("HF_HUB_CACHE", env.cache())
        .env("HF_HUB_DISABLE_TELEMETRY", "1")
        .env("HF_HUB_DISABLE_XET", "1")
        .env("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        .env("REPO", REPO)
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .await
        .expect("run RMX_TEST_PYTHON");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("python printed {stdout:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmx_lists_and_reuses_what_huggingface_hub_downloaded() -> Result<(), StoreError> {
    let env = Env::new().await;
    let out = run_python(
        &env,
        r#"
import json, os
from huggingface_hub import snapshot_download
path = snapshot_download(os.environ["REPO"])
print(json.dumps({"path": path}))
"#,
    )
    .await;
    let snapshot = env.repo_dir().join("snapshots").join(COMMIT);
    assert_eq!(
        out["path"].as_str(),
        Some(snapshot.display().to_string().as_str())
    );

    let store = env.store();
    let listed = store.list()?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].repo.as_str(), REPO);
    assert_eq!(listed[0].status, ModelStatus::Complete);
    assert_eq!(listed[0].commit.as_deref(), Some(COMMIT));
    let info = store.info(REPO)?;
    assert_eq!(info.parameters, Some(TINY_PARAMS));
    assert!(info.chat_template);

    // Same blob names: rmx's pull finds everything in place and fetches nothing.
    env.hub.reset_counters();
    let pulled = store.pull(REPO, &NoProgress).await?;
    assert_eq!(pulled.downloaded, 0);
    assert_eq!(env.hub.served_total(), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huggingface_hub_reads_what_rmx_pulled() -> Result<(), StoreError> {
    let env = Env::new().await;
    let pulled = env.store().pull(REPO, &NoProgress).await?;
    env.hub.reset_counters();
    let out = run_python(
        &env,
        r#"
import hashlib, json, os
from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download
repo = os.environ["REPO"]
offline = snapshot_download(repo, local_files_only=True)
weights = hf_hub_download(repo, "model.safetensors", local_files_only=True)
# Online too: huggingface_hub HEADs the file, sees the blob rmx wrote, downloads nothing.
config = hf_hub_download(repo, "config.json")
info = scan_cache_dir()
repos = [{"repo_id": r.repo_id, "size": r.size_on_disk, "files": r.nb_files,
          "refs": sorted(r.refs), "warnings": [str(w) for w in info.warnings]} for r in info.repos]
print(json.dumps({
    "offline": offline, "config": config,
    "sha": hashlib.sha256(open(weights, "rb").read()).hexdigest(), "repos": repos,
}))
"#,
    )
    .await;
    assert_eq!(
        out["offline"].as_str(),
        Some(pulled.snapshot.display().to_string().as_str())
    );
    assert_eq!(
        out["config"].as_str(),
        Some(
            pulled
                .snapshot
                .join("config.json")
                .display()
                .to_string()
                .as_str()
        )
    );
    assert_eq!(
        out["sha"].as_str(),
        Some(crate::fixtures::tiny_model_files()[5].sha256().as_str())
    );
    assert_eq!(
        out["repos"],
        serde_json::json!([{
            "repo_id": REPO, "size": env.store().list()?[0].size, "files": 4,
            "refs": ["main"], "warnings": [],
        }])
    );
    assert_eq!(env.hub.served_total(), 0, "{:?}", env.hub.ranges(WEIGHTS));
    Ok(())
}
