//! `Store::pull` against the fake hub: layout, resume, corruption, missing things, disk space.

use std::sync::Arc;

use rmx_store::{Families, ModelStatus, NoProgress, PullEvent, Store, StoreError};

use crate::fixtures::{
    sha256_hex, tiny_model_files, tree, weights_len, Env, Recorder, COMMIT, REPO, WEIGHTS,
};
use rmx_tests::fake_hub::FakeFile;

#[tokio::test]
async fn full_pull_writes_the_huggingface_layout() -> Result<(), StoreError> {
    let env = Env::new().await;
    let recorder = Recorder::default();
    let pulled = env.store().pull(REPO, &recorder).await?;

    assert_eq!(pulled.commit, COMMIT);
    assert_eq!(
        pulled.snapshot,
        env.repo_dir().join("snapshots").join(COMMIT)
    );
    assert_eq!(pulled.downloaded, pulled.total);
    let repo = env.repo_dir();
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main"))
            .ok()
            .as_deref(),
        Some(COMMIT)
    );

    // Only what the engine needs; README and .gitattributes stay on the Hub.
    let snapshot: Vec<String> = tree(&pulled.snapshot);
    assert_eq!(
        snapshot,
        [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    for file in crate::fixtures::tiny_model_files() {
        if file.name == "README.md" || file.name == ".gitattributes" {
            continue;
        }
        let link = pulled.snapshot.join(&file.name);
        // A relative symlink into blobs/, named by etag, as huggingface_hub makes them.
        let target = std::fs::read_link(&link).expect("snapshot entries are symlinks");
        assert_eq!(
            target,
            std::path::Path::new("../../blobs").join(file.etag())
        );
        assert_eq!(
            std::fs::read(&link).expect("read"),
            file.bytes,
            "{}",
            file.name
        );
    }
    assert_eq!(
        sha256_hex(&pulled.snapshot.join(WEIGHTS)),
        crate::fixtures::tiny_model_files()[5].sha256()
    );
    assert!(!tree(&repo).iter().any(|p| p.ends_with(".incomplete")));
    assert_eq!(env.hub.served_total(), pulled.total);

    // Events: planned first, finished last, and the byte counts add up.
    let events = recorder.events();
    let Some(PullEvent::Resolved {
        total,
        present,
        files,
        ..
    }) = events.first()
    else {
        panic!("first event is Resolved: {events:?}");
    };
    assert_eq!((*total, *present, files.len()), (pulled.total, 0, 4));
    assert!(
        matches!(events.last(), Some(PullEvent::Finished { downloaded, .. }) if *downloaded == pulled.total)
    );
    let last_progress = events.iter().rev().find_map(|e| match e {
        PullEvent::Progress { done, total, .. } => Some((*done, *total)),
        _ => None,
    });
    assert_eq!(last_progress, Some((pulled.total, pulled.total)));
    let weight_updates = events
        .iter()
        .filter(|e| matches!(e, PullEvent::Progress { file, .. } if file == WEIGHTS))
        .count();
    assert!(
        weight_updates >= 3,
        "per-file progress while a large file arrives"
    );

    // Pulling again fetches nothing.
    env.hub.reset_counters();
    let again = env.store().pull(REPO, &NoProgress).await?;
    assert_eq!(again.downloaded, 0);
    assert_eq!(env.hub.served_total(), 0);
    Ok(())
}

#[tokio::test]
async fn interrupted_pull_resumes_from_the_incomplete_blob() -> Result<(), StoreError> {
    let env = Env::new().await;
    env.hub.drop_after(WEIGHTS, 100_000);
    let err = env.store().pull(REPO, &NoProgress).await;
    assert!(
        matches!(
            err,
            Err(StoreError::Http { .. } | StoreError::Truncated { .. })
        ),
        "{err:?}"
    );

    // Resumable state: an .incomplete blob, no snapshot, no ref; `ls` says partial.
    let sha = crate::fixtures::tiny_model_files()[5].sha256();
    let part = env
        .repo_dir()
        .join("blobs")
        .join(format!("{sha}.incomplete"));
    let kept = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    assert!(kept > 0 && kept <= 100_000, "kept {kept} bytes");
    assert!(!env.repo_dir().join("refs/main").exists());
    assert!(!env.repo_dir().join("snapshots").exists());
    let listed = env.store().list()?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, ModelStatus::Partial);

    env.hub.reset_counters();
    let recorder = Recorder::default();
    let pulled = env.store().pull(REPO, &recorder).await?;
    // Only the rest of the file travelled, asked for with a Range header.
    assert_eq!(env.hub.served(WEIGHTS), weights_len() - kept);
    assert_eq!(env.hub.ranges(WEIGHTS), [Some(format!("bytes={kept}-"))]);
    assert!(recorder.events().iter().any(
        |e| matches!(e, PullEvent::FileStarted { file, offset, .. } if file == WEIGHTS && *offset == kept)
    ));
    assert_eq!(sha256_hex(&pulled.snapshot.join(WEIGHTS)), sha);
    assert_eq!(env.store().list()?[0].status, ModelStatus::Complete);
    Ok(())
}

#[tokio::test]
async fn cancelled_pull_leaves_a_resumable_state() -> Result<(), StoreError> {
    let env = Env::new().await;
    env.hub.stall_after(WEIGHTS, 120_000);
    let store = env.store();
    // Dropping the future is how a caller cancels (Ctrl-C in the CLI, a client hanging up).
    let cancelled = tokio::time::timeout(
        std::time::Duration::from_millis(1500),
        store.pull(REPO, &NoProgress),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the pull should still be waiting: {cancelled:?}"
    );
    let sha = crate::fixtures::tiny_model_files()[5].sha256();
    let part = env
        .repo_dir()
        .join("blobs")
        .join(format!("{sha}.incomplete"));
    let kept = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    assert!(kept > 0 && kept <= 120_000, "kept {kept} bytes");
    assert!(!env.repo_dir().join("refs/main").exists());
    assert_eq!(store.list()?[0].status, ModelStatus::Partial);

    env.hub.reset_counters();
    let pulled = store.pull(REPO, &NoProgress).await?;
    assert_eq!(env.hub.served(WEIGHTS), weights_len() - kept);
    assert_eq!(sha256_hex(&pulled.snapshot.join(WEIGHTS)), sha);
    Ok(())
}

#[tokio::test]
async fn lost_connection_is_retried_within_one_pull() -> Result<(), StoreError> {
    let env = Env::new().await;
    env.hub.drop_after(WEIGHTS, 50_000);
    let mut config = env.config();
    config.retries = 2;
    let recorder = Recorder::default();
    let pulled = rmx_store::Store::new(config).pull(REPO, &recorder).await?;
    assert!(recorder
        .events()
        .iter()
        .any(|e| matches!(e, PullEvent::Retrying { file, attempt: 1, .. } if file == WEIGHTS)));
    // The retry resumed: at most the cut-off 50 KB were sent twice.
    assert!(env.hub.served(WEIGHTS) <= weights_len() + 50_000);
    assert!(env.hub.ranges(WEIGHTS).len() == 2);
    assert_eq!(
        sha256_hex(&pulled.snapshot.join(WEIGHTS)),
        crate::fixtures::tiny_model_files()[5].sha256()
    );
    Ok(())
}

#[tokio::test]
async fn corrupted_download_is_detected_and_fetched_again() -> Result<(), StoreError> {
    let env = Env::new().await;
    env.hub.corrupt_once(WEIGHTS);

    // Without retries the checksum error surfaces, and the bad bytes are not kept.
    let err = env.store().pull(REPO, &NoProgress).await;
    assert!(
        matches!(err, Err(StoreError::ChecksumMismatch { ref file, .. }) if file == WEIGHTS),
        "{err:?}"
    );
    assert!(!tree(&env.repo_dir())
        .iter()
        .any(|p| p.contains(&crate::fixtures::tiny_model_files()[5].sha256())));

    // With a retry it is fetched again from byte 0 inside the same pull.
    env.hub.corrupt_once(WEIGHTS);
    env.hub.reset_counters();
    let mut config = env.config();
    config.retries = 1;
    let recorder = Recorder::default();
    let pulled = rmx_store::Store::new(config).pull(REPO, &recorder).await?;
    assert_eq!(env.hub.served(WEIGHTS), 2 * weights_len());
    assert!(recorder.events().iter().any(
        |e| matches!(e, PullEvent::Retrying { error, .. } if error.contains("checksum mismatch"))
    ));
    assert_eq!(
        sha256_hex(&pulled.snapshot.join(WEIGHTS)),
        crate::fixtures::tiny_model_files()[5].sha256()
    );
    Ok(())
}

#[tokio::test]
async fn corrupted_blob_on_disk_is_replaced_on_the_next_pull() -> Result<(), StoreError> {
    let env = Env::new().await;
    let pulled = env.store().pull(REPO, &NoProgress).await?;
    let blob = std::fs::canonicalize(pulled.snapshot.join(WEIGHTS)).expect("blob");
    let mut bytes = std::fs::read(&blob).expect("read");
    bytes[1000] ^= 0x55;
    std::fs::write(&blob, bytes).expect("write");

    env.hub.reset_counters();
    let again = env.store().pull(REPO, &NoProgress).await?;
    assert_eq!(again.downloaded, weights_len());
    assert_eq!(env.hub.served(WEIGHTS), weights_len());
    assert_eq!(env.hub.served("config.json"), 0, "good blobs are kept");
    assert_eq!(
        sha256_hex(&blob),
        crate::fixtures::tiny_model_files()[5].sha256()
    );
    Ok(())
}

#[tokio::test]
async fn missing_repo_is_a_clear_error_and_leaves_nothing() {
    let env = Env::new().await;
    let err = env
        .store()
        .pull("test-org/no-such-model", &NoProgress)
        .await;
    let Err(err) = err else {
        panic!("pull of a missing repo succeeded")
    };
    assert!(matches!(err, StoreError::RepoNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "model `test-org/no-such-model` was not found on {} (check the name; gated or private repos need HF_TOKEN)",
            env.hub.url
        )
    );
    assert_eq!(tree(env.dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn a_private_repo_needs_the_token_and_takes_it_per_pull_or_from_a_file_written_later() {
    let env = Env::new().await;
    env.hub.make_private(REPO, "hf_secret");
    let token_file = env.dir.path().join("token");
    let mut config = env.config();
    config.token_file = Some(token_file.clone());
    let store = Store::new(config);

    // Anonymous: the Hub says the repo does not exist, and nothing is written.
    let err = store.pull(REPO, &NoProgress).await;
    assert!(
        matches!(err, Err(StoreError::RepoNotFound { .. })),
        "{err:?}"
    );
    assert!(!env.repo_dir().exists());
    // A wrong token per pull is as good as none; the right one opens it.
    let err = store
        .pull_with_token(REPO, Some("hf_wrong".into()), &NoProgress)
        .await;
    assert!(
        matches!(err, Err(StoreError::RepoNotFound { .. })),
        "{err:?}"
    );
    store
        .pull_with_token(REPO, Some("hf_secret".into()), &NoProgress)
        .await
        .expect("the token opens the repo");

    // A fresh cache, the same store config: the token file `hf auth login` writes after the
    // store was made is read at the next pull.
    std::fs::remove_dir_all(env.cache()).expect("clear the cache");
    std::fs::write(&token_file, "hf_secret\n").expect("write the token file");
    store
        .pull(REPO, &NoProgress)
        .await
        .expect("the token file opens the repo");
}

#[tokio::test]
async fn missing_file_is_a_clear_error_and_leaves_nothing() {
    let env = Env::new().await;
    env.hub.make_missing(REPO, "tokenizer.json");
    let err = env.store().pull(REPO, &NoProgress).await;
    let Err(err) = err else {
        panic!("pull with a missing file succeeded")
    };
    assert!(
        matches!(err, StoreError::FileNotFound { ref file, .. } if file == "tokenizer.json"),
        "{err:?}"
    );
    assert!(err
        .to_string()
        .contains("file `tokenizer.json` of `test-org/tiny-llama-4bit` was not found"));
    assert_eq!(tree(env.dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn repo_without_weights_or_config_is_refused() {
    let env = Env::new().await;
    env.hub.add_repo(
        "test-org/pytorch-only",
        COMMIT,
        vec![
            FakeFile::new("config.json", b"{}".to_vec(), false),
            FakeFile::new("pytorch_model.bin", vec![0; 10], true),
        ],
    );
    let err = env.store().pull("test-org/pytorch-only", &NoProgress).await;
    assert!(matches!(err, Err(StoreError::NoWeights { .. })), "{err:?}");
    assert_eq!(tree(env.dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn not_enough_disk_space_is_refused_before_writing() {
    let env = Env::new().await;
    let mut config = env.config();
    config.free_space = Arc::new(|_| Ok(1_000));
    let err = rmx_store::Store::new(config).pull(REPO, &NoProgress).await;
    let Err(err) = err else {
        panic!("pull on a full disk succeeded")
    };
    let StoreError::NotEnoughSpace {
        needed, available, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*available, 1_000);
    assert!(*needed > weights_len());
    let text = err.to_string();
    assert!(text.starts_with("not enough disk space in `"), "{text}");
    assert!(text.contains("the download needs 35"), "{text}");
    assert!(text.ends_with(" KB more, 1.0 KB is free"), "{text}");
    assert_eq!(tree(env.dir.path()), Vec::<String>::new());
    assert_eq!(env.hub.served_total(), 0);
}

#[tokio::test]
async fn disk_check_counts_only_what_is_still_missing() -> Result<(), StoreError> {
    let env = Env::new().await;
    env.hub.drop_after(WEIGHTS, 200_000);
    let _ = env.store().pull(REPO, &NoProgress).await;
    let sha = crate::fixtures::tiny_model_files()[5].sha256();
    let kept = std::fs::metadata(
        env.repo_dir()
            .join("blobs")
            .join(format!("{sha}.incomplete")),
    )
    .map(|m| m.len())
    .unwrap_or(0);
    // Room for the rest (plus the few small files, in case they had not arrived) but not for
    // the whole model: accepted, because the partial blob counts as present.
    let room = weights_len() - kept + 10_000;
    assert!(room < weights_len());
    let recorder = Recorder::default();
    let mut config = env.config();
    config.free_space = Arc::new(move |_| Ok(room));
    rmx_store::Store::new(config).pull(REPO, &recorder).await?;
    let Some(PullEvent::Resolved { present, .. }) = recorder.events().first().cloned() else {
        panic!("no Resolved event")
    };
    assert!(present >= kept);
    Ok(())
}

/// Issue #21: a repo of a family the engine cannot load is refused from its config.json alone:
/// no weight file is asked for (not even by a HEAD) and nothing lands in the cache. A store
/// told nothing about the engine refuses nothing.
#[tokio::test]
async fn issue_21_an_unsupported_family_is_refused_before_any_weight_is_requested(
) -> Result<(), StoreError> {
    const GEMMA3N: &str = "test-org/tiny-gemma3n";
    let env = Env::new().await;
    let files = tiny_model_files()
        .into_iter()
        .map(|f| match f.name.as_str() {
            "config.json" => FakeFile::new(
                "config.json",
                br#"{"architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n"}"#
                    .to_vec(),
                false,
            ),
            _ => f,
        })
        .collect();
    env.hub.add_repo(GEMMA3N, COMMIT, files);
    let store = env.store().with_families(Families::new(["llama", "qwen3"]));

    let err = store.pull(GEMMA3N, &NoProgress).await;
    let Err(err @ StoreError::UnsupportedFamily { .. }) = err else {
        panic!("{err:?}")
    };
    let text = err.to_string();
    assert!(
        text.contains("family `gemma3n` is not supported by this rmx; supported: llama, qwen3")
            && text.contains("Nothing was downloaded")
            && text.contains("rmx models"),
        "{text}"
    );
    let requests = env.hub.requests();
    assert!(
        requests.contains(&format!("GET /{GEMMA3N}/resolve/{COMMIT}/config.json")),
        "{requests:?}"
    );
    assert!(
        !requests.iter().any(|r| r.contains(".safetensors")),
        "a weight file was requested: {requests:?}"
    );
    assert_eq!(tree(env.dir.path()), Vec::<String>::new());

    // The same store pulls a family it loads, and a second pull of it transfers nothing: the
    // family is judged from the config.json already in the cache.
    store.pull(REPO, &NoProgress).await?;
    env.hub.reset_counters();
    store.pull(REPO, &NoProgress).await?;
    assert_eq!(env.hub.served_total(), 0);

    // Without the engine's list the store does not judge.
    env.store().pull(GEMMA3N, &NoProgress).await?;
    Ok(())
}
