//! Aider: `~/.aider.conf.yml`, its command-line options as top-level YAML keys. Edited line by
//! line so the user's comments stay.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::edit::{yaml_set_top, yaml_str};
use super::{Env, Integration, Target, PLACEHOLDER_KEY};

pub const INTEGRATION: Integration = Integration {
    name: "aider",
    title: "Aider",
    binaries: &["aider"],
    config_path,
    render,
    configured,
    try_command: "aider --message \"say hi\"",
    notes,
};

fn config_path(env: &Env) -> Option<PathBuf> {
    env.home.as_ref().map(|h| h.join(".aider.conf.yml"))
}

fn render(old: &str, _: &Path, t: &Target) -> Result<String> {
    let mut text = yaml_set_top(old, "openai-api-base", &yaml_str(&t.openai_base()));
    if !t.api_key_env {
        text = yaml_set_top(&text, "openai-api-key", &yaml_str(PLACEHOLDER_KEY));
    }
    text = yaml_set_top(&text, "model", &yaml_str(&format!("openai/{}", t.model)));
    Ok(text)
}

fn configured(text: &str, t: &Target) -> bool {
    text.lines()
        .any(|l| l.starts_with("openai-api-base:") && l.contains(&t.openai_base()))
}

fn notes(t: &Target) -> Vec<String> {
    if t.api_key_env {
        vec!["export OPENAI_API_KEY=\"$RMX_API_KEY\" where you run aider".into()]
    } else {
        Vec::new()
    }
}
