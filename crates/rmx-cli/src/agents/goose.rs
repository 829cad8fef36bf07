//! Goose: `~/.config/goose/config.yaml`, the OpenAI provider pointed at the daemon through
//! `OPENAI_HOST` and `OPENAI_BASE_PATH`. Edited line by line so comments stay.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::edit::{yaml_set_top, yaml_str};
use super::{Env, Integration, Target};

pub const INTEGRATION: Integration = Integration {
    name: "goose",
    title: "Goose",
    binaries: &["goose"],
    config_path,
    render,
    configured,
    try_command: "goose run -t \"say hi\"",
    notes,
};

fn config_path(env: &Env) -> Option<PathBuf> {
    env.config_dir()
        .map(|d| d.join("goose").join("config.yaml"))
}

fn render(old: &str, _: &Path, t: &Target) -> Result<String> {
    let mut text = yaml_set_top(old, "GOOSE_PROVIDER", "openai");
    text = yaml_set_top(&text, "GOOSE_MODEL", &yaml_str(&t.model));
    text = yaml_set_top(&text, "OPENAI_HOST", &yaml_str(&t.root));
    text = yaml_set_top(&text, "OPENAI_BASE_PATH", "v1/chat/completions");
    Ok(text)
}

fn configured(text: &str, t: &Target) -> bool {
    text.lines()
        .any(|l| l.starts_with("OPENAI_HOST:") && l.contains(&t.root))
}

fn notes(t: &Target) -> Vec<String> {
    // Goose keeps keys in the system keyring, not in config.yaml.
    if t.api_key_env {
        vec!["export OPENAI_API_KEY=\"$RMX_API_KEY\" where you run goose".into()]
    } else {
        vec!["if goose asks for an OpenAI key, any value works (export OPENAI_API_KEY=rmx)".into()]
    }
}
