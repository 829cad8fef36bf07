//! `list`, `info`, `remove`: the structs the CLI prints, snapshotted as JSON (the CLI's
//! `--json` output), with the temporary paths and clock times masked.

use rmx_store::{
    Families, ModelHints, ModelStatus, NoProgress, ReasoningParser, StoreError, ToolParser,
    Unsupported,
};

use crate::fixtures::{Env, COMMIT, REPO, TINY_PARAMS};

fn masked(mut value: serde_json::Value, env: &Env) -> serde_json::Value {
    fn walk(v: &mut serde_json::Value, root: &str) {
        match v {
            serde_json::Value::String(s) if s.starts_with(root) => {
                *s = s.replacen(root, "[TMP]", 1);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|i| walk(i, root)),
            serde_json::Value::Object(map) => {
                for (k, item) in map.iter_mut() {
                    if k == "modified" {
                        *item = serde_json::json!("[TIME]");
                    } else {
                        walk(item, root);
                    }
                }
            }
            _ => {}
        }
    }
    walk(&mut value, &env.dir.path().display().to_string());
    value
}

#[tokio::test]
async fn list_info_remove() -> Result<(), StoreError> {
    let env = Env::new().await;
    let store = env.store();
    assert!(store.list()?.is_empty(), "an empty cache lists nothing");
    store.add_alias(
        "tiny",
        REPO,
        ModelHints {
            tool_parser: ToolParser::Hermes,
            reasoning_parser: ReasoningParser::Think,
            context_length: Some(4096),
            ..ModelHints::default()
        },
    )?;
    store.pull("tiny", &NoProgress).await?;

    let listed = store.list()?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, ModelStatus::Complete);
    assert!(listed[0].modified > 1_700_000_000);
    insta::assert_json_snapshot!(
        "list",
        masked(serde_json::to_value(&listed).expect("json"), &env)
    );

    let info = store.info("tiny")?;
    assert_eq!(info.parameters, Some(TINY_PARAMS));
    assert_eq!(info.commit.as_deref(), Some(COMMIT));
    insta::assert_json_snapshot!(
        "info",
        masked(serde_json::to_value(&info).expect("json"), &env)
    );

    // The same model by repo id finds the alias's hints; by path it is a local model.
    assert_eq!(store.info(REPO)?.hints.tool_parser, ToolParser::Hermes);
    let local = store.info(&info.path.display().to_string())?;
    assert_eq!(local.repo, None);
    assert_eq!(local.parameters, Some(TINY_PARAMS));
    assert_eq!(
        local.hints.tool_parser,
        ToolParser::Llama3Json,
        "guessed from model_type"
    );

    let removed = store.remove("tiny")?;
    assert_eq!(removed.freed, listed[0].size);
    assert!(store.list()?.is_empty());
    assert!(!env
        .cache()
        .join(".locks/models--test-org--tiny-llama-4bit")
        .exists());
    let again = store.remove("tiny");
    let Err(err) = again else {
        panic!("second remove succeeded")
    };
    assert_eq!(
        err.to_string(),
        format!(
            "`tiny` ({REPO}) is not in the store at `{}`; run `rmx pull tiny`",
            env.cache().display()
        )
    );
    assert!(matches!(
        store.info("tiny"),
        Err(StoreError::NotInStore { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn remove_refuses_local_directories() -> Result<(), StoreError> {
    let env = Env::new().await;
    let dir = env.dir.path().join("my-model");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("config.json"), "{}").expect("write");
    let err = env.store().remove(&dir.display().to_string());
    assert!(matches!(err, Err(StoreError::LocalModel { .. })), "{err:?}");
    assert!(dir.join("config.json").exists());
    Ok(())
}

/// Issue #20: an imported model (a folder under `$RMX_HOME/models` with a user alias) is listed
/// by `local_models` and removed by `remove` with its alias, which `rmx rm` and `/api/delete`
/// both go through; a folder a user alias names elsewhere is listed but never deleted.
#[tokio::test]
async fn imported_models_are_listed_and_removed_with_their_alias() -> Result<(), StoreError> {
    let env = Env::new().await;
    let store = env.store();
    let imported = store.imports_dir().join("imp");
    let own = env.dir.path().join("own");
    for dir in [&imported, &own] {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(dir.join("config.json"), crate::fixtures::config_json()).expect("write");
        std::fs::write(
            dir.join("model.safetensors"),
            crate::fixtures::tiny_safetensors(),
        )
        .expect("write");
    }
    store.add_alias(
        "imp",
        &imported.display().to_string(),
        ModelHints::default(),
    )?;
    store.add_alias("own", &own.display().to_string(), ModelHints::default())?;
    assert!(store.is_imported(&imported));
    assert!(!store.is_imported(&own));
    let names: Vec<String> = store.local_models()?.into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["imp", "own"]);

    let err = store.remove("own");
    assert!(matches!(err, Err(StoreError::LocalModel { .. })), "{err:?}");
    assert!(own.join("config.json").exists());

    let removed = store.remove("imp")?;
    assert_eq!(removed.repo, None);
    assert_eq!(removed.path, imported);
    assert!(removed.freed > 0);
    assert!(!imported.exists());
    assert!(
        store.aliases()?.get("imp").is_none(),
        "the alias goes with it"
    );
    let names: Vec<String> = store.local_models()?.into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["own"]);
    Ok(())
}

#[tokio::test]
async fn sharded_snapshot_missing_a_shard_is_partial() -> Result<(), StoreError> {
    // A cache written by someone else: snapshot files present, but the index names a shard
    // that never arrived.
    let env = Env::new().await;
    let snap = env
        .cache()
        .join("models--other--sharded/snapshots")
        .join(COMMIT);
    std::fs::create_dir_all(&snap).expect("mkdir");
    std::fs::write(snap.join("config.json"), crate::fixtures::config_json()).expect("write");
    std::fs::write(
        snap.join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}"#,
    )
    .expect("write");
    std::fs::write(
        snap.join("model-00001-of-00002.safetensors"),
        crate::fixtures::tiny_safetensors(),
    )
    .expect("write");
    let listed = env.store().list()?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].repo.as_str(), "other/sharded");
    assert_eq!(listed[0].status, ModelStatus::Partial);
    assert_eq!(listed[0].quantization.as_ref().map(|q| q.bits), Some(4));

    std::fs::write(
        snap.join("model-00002-of-00002.safetensors"),
        crate::fixtures::tiny_safetensors(),
    )
    .expect("write");
    assert_eq!(env.store().list()?[0].status, ModelStatus::Complete);
    Ok(())
}

/// Issue #21: a stored model whose family the engine cannot load is marked, with the reason,
/// by `info` and `list` (and so by `rmx info`, `rmx ls` and their `--json`).
#[tokio::test]
async fn issue_21_models_of_an_unsupported_family_are_marked() -> Result<(), StoreError> {
    let env = Env::new().await;
    env.store().pull(REPO, &NoProgress).await?;
    let loads_llama = env.store().with_families(Families::new(["llama"]));
    assert_eq!(loads_llama.info(REPO)?.cannot_load, None);
    assert_eq!(loads_llama.list()?[0].cannot_load, None);

    // The same files, as an rmx whose engine has no llama sees them.
    let lacks_llama = env
        .store()
        .with_families(Families::new(["qwen3", "gemma3_text"]));
    let expected = Unsupported::new("llama", ["qwen3", "gemma3_text"]);
    assert_eq!(lacks_llama.info(REPO)?.cannot_load, Some(expected.clone()));
    assert_eq!(lacks_llama.list()?[0].cannot_load, Some(expected.clone()));
    let json = serde_json::to_value(lacks_llama.info(REPO)?).expect("json");
    assert_eq!(
        json["cannot_load"],
        serde_json::json!({"family": "llama", "supported": ["qwen3", "gemma3_text"],
            "reason": "family `llama` is not supported by this rmx; supported: qwen3, gemma3_text"})
    );
    assert_eq!(
        expected.to_string(),
        "family `llama` is not supported by this rmx; supported: qwen3, gemma3_text"
    );
    Ok(())
}
