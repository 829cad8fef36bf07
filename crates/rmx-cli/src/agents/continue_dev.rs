//! Continue (the VS Code / JetBrains extension): `~/.continue/config.yaml`, one entry named
//! `rmx (local)` in its `models:` list. Edited line by line so comments and the user's other
//! models stay; a second setup replaces rmx's entry instead of adding another.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::edit::yaml_str;
use super::{Env, Integration, Target};

pub const INTEGRATION: Integration = Integration {
    name: "continue",
    title: "Continue",
    binaries: &["cn"],
    config_path,
    render,
    configured,
    try_command: "cn -p \"say hi\"",
    notes,
};

const ENTRY_NAME: &str = "rmx (local)";

fn config_path(env: &Env) -> Option<PathBuf> {
    env.home
        .as_ref()
        .map(|h| h.join(".continue").join("config.yaml"))
}

/// rmx's list item, its dash indented by `dash` (the user's items' indent: all items of one
/// YAML list must line up).
fn entry(t: &Target, dash: &str) -> Vec<String> {
    let mut lines = vec![
        format!("{dash}- name: {}", yaml_str(ENTRY_NAME)),
        format!("{dash}  provider: openai"),
        format!("{dash}  model: {}", yaml_str(&t.model)),
        format!("{dash}  apiBase: {}", yaml_str(&t.openai_base())),
    ];
    if t.api_key_env {
        lines.push(format!("{dash}  apiKey: ${{{{ secrets.RMX_API_KEY }}}}"));
    }
    lines.push(format!("{dash}  roles: [chat, edit, apply]"));
    lines
}

fn render(old: &str, _: &Path, t: &Target) -> Result<String> {
    let mut lines: Vec<String> = old.lines().map(str::to_string).collect();
    if old.trim().is_empty() {
        lines = vec![
            "name: Local Assistant".into(),
            "version: 1.0.0".into(),
            "schema: v1".into(),
        ];
    }
    let header = lines.iter().position(|l| l.trim_end() == "models:");
    match header {
        None => {
            lines.push("models:".into());
            lines.extend(entry(t, "  "));
        }
        Some(h) => {
            let marker = format!("- name: {}", yaml_str(ENTRY_NAME));
            // Drop an earlier rmx entry: its "- name" line and the deeper-indented lines after.
            if let Some(start) = (h + 1..lines.len()).find(|&i| lines[i].trim() == marker) {
                let dash_indent = lines[start].len() - lines[start].trim_start().len();
                let mut end = start + 1;
                while end < lines.len() {
                    let l = &lines[end];
                    let indent = l.len() - l.trim_start().len();
                    if !l.trim().is_empty()
                        && indent > dash_indent
                        && !l.trim_start().starts_with('-')
                    {
                        end += 1;
                    } else {
                        break;
                    }
                }
                lines.drain(start..end);
            }
            let dash = lines[h + 1..]
                .iter()
                .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .filter(|l| l.trim_start().starts_with('-'))
                .map(|l| l[..l.len() - l.trim_start().len()].to_string())
                .unwrap_or_else(|| "  ".to_string());
            let at = h + 1;
            for (k, l) in entry(t, &dash).into_iter().enumerate() {
                lines.insert(at + k, l);
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    if !old.is_empty() && !old.ends_with('\n') {
        out.pop();
    }
    Ok(out)
}

fn configured(text: &str, t: &Target) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("apiBase:") && l.contains(&t.openai_base()))
}

fn notes(t: &Target) -> Vec<String> {
    let mut notes =
        vec!["in the editor, pick \"rmx (local)\" in Continue's model list".to_string()];
    if t.api_key_env {
        notes.push("add RMX_API_KEY to ~/.continue/.env".into());
    }
    notes
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            root: "http://127.0.0.1:8000".into(),
            model: "m".into(),
            api_key_env: false,
        }
    }

    #[test]
    fn the_entry_lines_up_with_unindented_items_and_replaces_itself() {
        let old = "models:\n- name: GPT\n  model: gpt-4o\n";
        let once = render(old, Path::new("c"), &target()).unwrap();
        assert!(once.starts_with("models:\n- name: \"rmx (local)\"\n  provider: openai\n"));
        assert!(once.ends_with("- name: GPT\n  model: gpt-4o\n"));
        let twice = render(&once, Path::new("c"), &target()).unwrap();
        assert_eq!(once, twice);
    }
}
