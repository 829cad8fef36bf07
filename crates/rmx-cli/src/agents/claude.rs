//! Claude Code: `~/.claude/settings.json`, whose `env` object sets the Anthropic endpoint. The
//! daemon serves the Anthropic Messages API at `/v1/messages`, and Claude Code appends
//! `/v1/messages` itself, so the base URL is the daemon's root without `/v1`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::Value;

use super::edit::{json_child, json_object, json_text};
use super::{Env, Integration, Target, PLACEHOLDER_KEY};

pub const INTEGRATION: Integration = Integration {
    name: "claude",
    title: "Claude Code",
    binaries: &["claude"],
    config_path,
    render,
    configured,
    try_command: "claude -p \"say hi\"",
    notes,
};

fn config_path(env: &Env) -> Option<PathBuf> {
    (env.var)("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| env.home.as_ref().map(|h| h.join(".claude")))
        .map(|d| d.join("settings.json"))
}

fn render(old: &str, file: &Path, t: &Target) -> Result<String> {
    let mut map = json_object(old, file)?;
    let env = json_child(&mut map, "env");
    env.insert("ANTHROPIC_BASE_URL".into(), Value::String(t.root.clone()));
    if t.api_key_env {
        // The key stays in the user's environment: Claude Code reads ANTHROPIC_AUTH_TOKEN there.
        env.remove("ANTHROPIC_AUTH_TOKEN");
    } else {
        env.insert(
            "ANTHROPIC_AUTH_TOKEN".into(),
            Value::String(PLACEHOLDER_KEY.into()),
        );
    }
    env.insert("ANTHROPIC_MODEL".into(), Value::String(t.model.clone()));
    env.insert(
        "ANTHROPIC_SMALL_FAST_MODEL".into(),
        Value::String(t.model.clone()),
    );
    json_text(map)
}

fn configured(text: &str, t: &Target) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|v| {
        v.pointer("/env/ANTHROPIC_BASE_URL").and_then(Value::as_str) == Some(t.root.as_str())
    })
}

fn notes(t: &Target) -> Vec<String> {
    if t.api_key_env {
        vec!["export ANTHROPIC_AUTH_TOKEN=\"$RMX_API_KEY\" where you run claude".into()]
    } else {
        Vec::new()
    }
}
