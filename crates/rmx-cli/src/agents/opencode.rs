//! OpenCode: `~/.config/opencode/opencode.json`, a custom provider through the AI SDK's
//! OpenAI-compatible package, chosen by the top-level `model` (`rmx/<model>`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{json, Value};

use super::edit::{json_child, json_object, json_text};
use super::{Env, Integration, Target};

pub const INTEGRATION: Integration = Integration {
    name: "opencode",
    title: "OpenCode",
    binaries: &["opencode"],
    config_path,
    render,
    configured,
    try_command: "opencode run \"say hi\"",
    notes,
};

fn config_path(env: &Env) -> Option<PathBuf> {
    env.config_dir()
        .map(|d| d.join("opencode").join("opencode.json"))
}

fn render(old: &str, file: &Path, t: &Target) -> Result<String> {
    let mut map = json_object(old, file)?;
    if map.is_empty() {
        map.insert("$schema".into(), json!("https://opencode.ai/config.json"));
    }
    let mut options = serde_json::Map::new();
    options.insert("baseURL".into(), json!(t.openai_base()));
    if t.api_key_env {
        options.insert("apiKey".into(), json!("{env:RMX_API_KEY}"));
    }
    let mut models = serde_json::Map::new();
    models.insert(t.model.clone(), json!({ "name": t.model }));
    json_child(&mut map, "provider").insert(
        "rmx".into(),
        json!({
            "npm": "@ai-sdk/openai-compatible",
            "name": "rmx (local)",
            "options": options,
            "models": models,
        }),
    );
    map.insert("model".into(), json!(format!("rmx/{}", t.model)));
    json_text(map)
}

fn configured(text: &str, t: &Target) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| {
        v.pointer("/provider/rmx/options/baseURL")
            .and_then(Value::as_str)
            == Some(t.openai_base().as_str())
    })
}

fn notes(_: &Target) -> Vec<String> {
    Vec::new()
}
