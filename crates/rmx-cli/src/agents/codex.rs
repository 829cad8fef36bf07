//! Codex CLI: `$CODEX_HOME/config.toml` (default `~/.codex`), a `[model_providers.rmx]` table
//! speaking the Responses API, chosen by the top-level `model` / `model_provider`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use toml_edit::{value, DocumentMut, Item, Table};

use super::{Env, Integration, Target};

pub const INTEGRATION: Integration = Integration {
    name: "codex",
    title: "Codex CLI",
    binaries: &["codex"],
    config_path,
    render,
    configured,
    try_command: "codex exec \"say hi\"",
    notes,
};

fn config_path(env: &Env) -> Option<PathBuf> {
    (env.var)("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| env.home.as_ref().map(|h| h.join(".codex")))
        .map(|d| d.join("config.toml"))
}

fn render(old: &str, file: &Path, t: &Target) -> Result<String> {
    let mut doc: DocumentMut = old
        .parse()
        .with_context(|| format!("{} is not valid TOML", file.display()))?;
    // Top-level keys must come before any table; toml_edit keeps them there.
    set_keeping_comment(doc.as_table_mut(), "model", &t.model);
    set_keeping_comment(doc.as_table_mut(), "model_provider", "rmx");
    let providers = doc
        .entry("model_providers")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .with_context(|| format!("model_providers in {} is not a table", file.display()))?;
    let rmx = providers
        .entry("rmx")
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_mut()
        .with_context(|| format!("model_providers.rmx in {} is not a table", file.display()))?;
    rmx["name"] = value("rmx");
    rmx["base_url"] = value(t.openai_base());
    rmx["wire_api"] = value("responses");
    if t.api_key_env {
        rmx["env_key"] = value("RMX_API_KEY");
    } else {
        rmx.remove("env_key");
    }
    Ok(doc.to_string())
}

/// Sets `key = "value"`, keeping the comment after the old value (`model = "x"  # mine`).
fn set_keeping_comment(table: &mut Table, key: &str, new: &str) {
    let mut v = toml_edit::Value::from(new);
    if let Some(old) = table.get(key).and_then(Item::as_value) {
        *v.decor_mut() = old.decor().clone();
    }
    table[key] = Item::Value(v);
}

fn configured(text: &str, t: &Target) -> bool {
    let Ok(doc) = text.parse::<DocumentMut>() else {
        return false;
    };
    doc.get("model_provider").and_then(|v| v.as_str()) == Some("rmx")
        && doc
            .get("model_providers")
            .and_then(|p| p.get("rmx"))
            .and_then(|r| r.get("base_url"))
            .and_then(|u| u.as_str())
            == Some(t.openai_base().as_str())
}

fn notes(t: &Target) -> Vec<String> {
    if t.api_key_env {
        vec!["Codex reads the key from RMX_API_KEY: keep it exported where you run codex".into()]
    } else {
        Vec::new()
    }
}
