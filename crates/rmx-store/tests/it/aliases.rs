//! Name resolution and user aliases.

use rmx_store::{
    AliasSource, ModelHints, ModelRef, ReasoningParser, Store, StoreConfig, StoreError, ToolParser,
};

fn store(dir: &tempfile::TempDir) -> Store {
    Store::new(StoreConfig::new(
        dir.path().join("hub"),
        dir.path().join("rmx"),
        "http://127.0.0.1:9",
    ))
}

#[test]
fn builtin_alias_resolves_to_its_repo_and_hints() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let ModelRef::Hub { repo, alias, .. } = store(&dir).resolve("qwen3-0.6b-4bit")? else {
        panic!("not a hub model")
    };
    assert_eq!(repo.as_str(), "mlx-community/Qwen3-0.6B-4bit");
    let alias = alias.expect("alias");
    assert_eq!(alias.source, AliasSource::Builtin);
    assert_eq!(alias.hints.tool_parser, ToolParser::Hermes);
    assert_eq!(alias.hints.reasoning_parser, ReasoningParser::Think);

    let ModelRef::Hub { repo, .. } = store(&dir).resolve("llama3.2-3b-4bit")? else {
        panic!("not a hub model")
    };
    assert_eq!(repo.as_str(), "mlx-community/Llama-3.2-3B-Instruct-4bit");
    Ok(())
}

#[test]
fn repo_ids_and_directories_resolve() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir);
    // A repo id nobody aliased.
    let ModelRef::Hub { repo, alias, .. } = s.resolve("someone/Some-Model-4bit")? else {
        panic!("not a hub model")
    };
    assert_eq!((repo.as_str(), alias), ("someone/Some-Model-4bit", None));
    // A repo id that an alias names picks up the alias (and its hints).
    let ModelRef::Hub { alias, .. } = s.resolve("mlx-community/gemma-3-1b-it-4bit")? else {
        panic!("not a hub model")
    };
    assert_eq!(alias.map(|a| a.name).as_deref(), Some("gemma3-1b-4bit"));
    // A model directory.
    let model = dir.path().join("m");
    std::fs::create_dir_all(&model).expect("mkdir");
    std::fs::write(model.join("config.json"), "{}").expect("write");
    let name = model.display().to_string();
    assert_eq!(
        s.resolve(&name)?,
        ModelRef::Local {
            name: name.clone(),
            path: model,
            alias: None,
        }
    );
    // A path without a model.
    assert!(matches!(
        s.resolve(&dir.path().display().to_string()),
        Err(StoreError::NotAModelDir { .. })
    ));
    Ok(())
}

#[test]
fn unknown_name_suggests_aliases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = store(&dir).resolve("qwen3-0.6b");
    let Err(err) = err else {
        panic!("resolved a non-name")
    };
    assert_eq!(
        err.to_string(),
        "unknown model `qwen3-0.6b`: not an alias, a Hugging Face repo id (owner/name) or a local \
         model directory; did you mean qwen3-0.6b-4bit, qwen3-0.6b-8bit, \
         qwen3-0.6b-embedding-bf16, qwen3-0.6b-reranker-bf16?"
    );
}

#[test]
fn user_aliases_add_override_list_and_remove() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir);
    let hints = ModelHints {
        tool_parser: ToolParser::Mistral,
        reasoning_parser: ReasoningParser::None,
        context_length: Some(8192),
        speculative: Some("draft:qwen3-0.6b-4bit".into()),
        draft_tokens: Some(4),
        ..ModelHints::default()
    };
    s.add_alias("mine", "me/My-Model-4bit", hints.clone())?;
    // Overriding a built-in.
    s.add_alias(
        "qwen3-0.6b-4bit",
        "me/Qwen3-0.6B-custom",
        ModelHints::default(),
    )?;

    let ModelRef::Hub { repo, alias, .. } = s.resolve("mine")? else {
        panic!("not a hub model")
    };
    assert_eq!(repo.as_str(), "me/My-Model-4bit");
    assert_eq!(
        alias.map(|a| (a.source, a.hints)),
        Some((AliasSource::User, hints))
    );
    let ModelRef::Hub { repo, .. } = s.resolve("qwen3-0.6b-4bit")? else {
        panic!("not a hub model")
    };
    assert_eq!(repo.as_str(), "me/Qwen3-0.6B-custom");

    let all = s.list_aliases()?;
    assert!(all.len() >= 41);
    let user: Vec<_> = all
        .iter()
        .filter(|a| a.source == AliasSource::User)
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(user, ["mine", "qwen3-0.6b-4bit"]);
    assert_eq!(
        all.iter().filter(|a| a.name == "qwen3-0.6b-4bit").count(),
        1
    );

    // The file is plain TOML the user can edit; their comments survive rmx's edits.
    let path = s.user_aliases_path();
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, format!("# my notes\n{text}")).expect("write");
    s.remove_alias("qwen3-0.6b-4bit")?;
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.starts_with("# my notes\n"), "{text}");
    insta::assert_snapshot!("user_aliases_file", text);
    let ModelRef::Hub { repo, .. } = s.resolve("qwen3-0.6b-4bit")? else {
        panic!("not a hub model")
    };
    assert_eq!(
        repo.as_str(),
        "mlx-community/Qwen3-0.6B-4bit",
        "built-in is back"
    );

    assert!(matches!(
        s.remove_alias("qwen3-0.6b-4bit"),
        Err(StoreError::BuiltinAlias { .. })
    ));
    assert!(matches!(
        s.remove_alias("nope"),
        Err(StoreError::NoSuchUserAlias { .. })
    ));
    assert!(matches!(
        s.add_alias("Bad/Name", "me/x", ModelHints::default()),
        Err(StoreError::InvalidAliasName { .. })
    ));
    assert!(matches!(
        s.add_alias("ok", "not a repo", ModelHints::default()),
        Err(StoreError::InvalidRepoId { .. })
    ));
    Ok(())
}

#[test]
fn user_alias_to_a_local_directory() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("weights");
    std::fs::create_dir_all(&model).expect("mkdir");
    std::fs::write(model.join("config.json"), "{}").expect("write");
    let s = store(&dir);
    s.add_alias("dev", &model.display().to_string(), ModelHints::default())?;
    assert!(matches!(s.resolve("dev")?, ModelRef::Local { path, .. } if path == model));
    Ok(())
}

/// Issue #21: the hints of an alias that names a folder reach whoever resolves it (they were
/// dropped, and the daemon and `rmx info` guessed from config.json instead).
#[test]
fn issue_21_a_folder_alias_keeps_its_hints() -> Result<(), StoreError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("weights");
    std::fs::create_dir_all(&model).expect("mkdir");
    // A llama config: guessing from it would say llama3_json, not hermes.
    std::fs::write(model.join("config.json"), r#"{"model_type": "llama"}"#).expect("write");
    let s = store(&dir);
    let hints = ModelHints {
        tool_parser: ToolParser::Hermes,
        reasoning_parser: ReasoningParser::Think,
        context_length: Some(4096),
        ..ModelHints::default()
    };
    s.add_alias("dev", &model.display().to_string(), hints.clone())?;
    let resolved = s.resolve("dev")?;
    assert_eq!(resolved.hints(), Some(hints.clone()));
    assert!(matches!(&resolved, ModelRef::Local { alias: Some(a), .. } if a.name == "dev"));
    let info = s.info("dev")?;
    assert_eq!(info.hints, hints);
    // By its path the same folder has no alias: the hints are guessed from config.json.
    let by_path = s.resolve(&model.display().to_string())?;
    assert_eq!(by_path.hints(), None);
    assert_eq!(
        s.info(&model.display().to_string())?.hints.tool_parser,
        ToolParser::Llama3Json
    );
    Ok(())
}

#[test]
fn broken_user_alias_file_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir);
    std::fs::create_dir_all(dir.path().join("rmx")).expect("mkdir");
    std::fs::write(s.user_aliases_path(), "[[alias]]\nname = 3\n").expect("write");
    let err = s.resolve("qwen3-0.6b-4bit");
    let Err(err) = err else {
        panic!("a broken alias file was accepted")
    };
    assert!(err.to_string().starts_with("failed to parse `"), "{err}");
    assert!(err.to_string().contains("aliases.toml"), "{err}");
}
