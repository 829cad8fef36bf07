//! Hermes Agent (Nous Research): `~/.hermes/config.yaml`, whose `model:` section names a
//! custom OpenAI-compatible endpoint. Edited line by line so comments stay.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::edit::{yaml_set_nested, yaml_str};
use super::{Env, Integration, Target, PLACEHOLDER_KEY};

pub const INTEGRATION: Integration = Integration {
    name: "hermes",
    title: "Hermes Agent",
    binaries: &["hermes"],
    config_path,
    render,
    configured,
    try_command: "hermes chat -q \"say hi\"",
    notes,
};

fn config_path(env: &Env) -> Option<PathBuf> {
    (env.var)("HERMES_HOME")
        .map(PathBuf::from)
        .or_else(|| env.home.as_ref().map(|h| h.join(".hermes")))
        .map(|d| d.join("config.yaml"))
}

fn render(old: &str, _: &Path, t: &Target) -> Result<String> {
    let mut text = yaml_set_nested(old, "model", "provider", "custom");
    text = yaml_set_nested(&text, "model", "base_url", &yaml_str(&t.openai_base()));
    text = yaml_set_nested(&text, "model", "default", &yaml_str(&t.model));
    if !t.api_key_env {
        text = yaml_set_nested(&text, "model", "api_key", &yaml_str(PLACEHOLDER_KEY));
    }
    Ok(text)
}

fn configured(text: &str, t: &Target) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("base_url:") && l.contains(&t.openai_base()))
}

fn notes(t: &Target) -> Vec<String> {
    if t.api_key_env {
        vec!["export OPENAI_API_KEY=\"$RMX_API_KEY\" where you run hermes".into()]
    } else {
        Vec::new()
    }
}
