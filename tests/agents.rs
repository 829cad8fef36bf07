//! `rmx agents --setup` against pre-existing configs full of the user's comments and settings:
//! those survive byte for byte, rmx's settings parse, `--dry-run` writes nothing and
//! `--restore` puts the original back exactly. Runs the real binary in a temporary HOME.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn rmx(&self, args: &[&str]) -> Output {
        let out = Command::new(rmx_tests::rmx())
            .args(args)
            .env_clear()
            .env("HOME", self.dir.path())
            .env("RMX_HOME", self.path(".rmx"))
            .env("CODEX_HOME", self.path("codex-home"))
            .env("PATH", "/usr/bin:/bin")
            // Nothing listens here: the setup must still finish and say how to start rmx.
            .env("RMX_HOST", "127.0.0.1:9")
            .output()
            .unwrap();
        eprintln!(
            "rmx {args:?}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every line of `old` appears in `new` in the same order (rmx only adds or changes its keys),
/// except the lines `changed` names.
fn assert_lines_kept(old: &str, new: &str, changed: &[&str]) {
    let mut rest = new.lines();
    for line in old.lines() {
        if changed.iter().any(|c| line.starts_with(c)) {
            continue;
        }
        assert!(
            rest.any(|l| l == line),
            "line {line:?} of the user's file is gone or moved:\n{new}"
        );
    }
}

fn setup_dry_run_restore(home: &Home, tool: &str, file: &Path, changed: &[&str]) -> String {
    let original = std::fs::read(file).unwrap();

    let out = home.rmx(&[
        "agents",
        tool,
        "--setup",
        "--dry-run",
        "--model",
        "qwen3-0.6b-4bit",
    ]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("+++ "), "no diff printed");
    assert_eq!(
        std::fs::read(file).unwrap(),
        original,
        "--dry-run changed the file"
    );
    assert!(!backup(file).exists());

    let out = home.rmx(&[
        "agents",
        tool,
        "--setup",
        "-y",
        "--model",
        "qwen3-0.6b-4bit",
    ]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("rmx serve"),
        "no hint to start the daemon: {text}"
    );
    assert!(text.contains("try it:"));
    assert_eq!(
        std::fs::read(backup(file)).unwrap(),
        original,
        "backup differs"
    );
    let new = std::fs::read_to_string(file).unwrap();
    assert_lines_kept(&String::from_utf8(original.clone()).unwrap(), &new, changed);

    // A second setup changes nothing and keeps the first backup.
    let out = home.rmx(&[
        "agents",
        tool,
        "--setup",
        "-y",
        "--model",
        "qwen3-0.6b-4bit",
    ]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("nothing to change"));
    assert_eq!(std::fs::read_to_string(file).unwrap(), new);

    let list = stdout(&home.rmx(&["agents"]));
    let row = list
        .lines()
        .find(|l| l.trim_start().starts_with(tool))
        .unwrap();
    assert!(row.contains("yes"), "not shown as configured: {row}");

    let out = home.rmx(&["agents", tool, "--restore"]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(file).unwrap(),
        original,
        "--restore is not exact"
    );
    assert!(!backup(file).exists());
    new
}

fn backup(file: &Path) -> PathBuf {
    PathBuf::from(format!("{}.rmx-backup", file.display()))
}

const CODEX: &str = r#"# My Codex settings
model = "gpt-5"   # the default I use at work
approval_policy = "on-request"

# Sandboxing
[sandbox_workspace_write]
network_access = false # keep it off

[model_providers.azure]
name = "Azure"
base_url = "https://example.openai.azure.com/openai"
env_key = "AZURE_OPENAI_API_KEY"

[profiles.fast]
model = "gpt-5-mini"
"#;

#[test]
fn codex_setup_keeps_comments_and_other_providers() {
    let home = Home::new();
    let file = home.write("codex-home/config.toml", CODEX);
    let new = setup_dry_run_restore(&home, "codex", &file, &["model = \"gpt-5\""]);
    let doc: toml_edit::DocumentMut = new.parse().unwrap();
    assert_eq!(doc["model"].as_str(), Some("qwen3-0.6b-4bit"));
    assert_eq!(doc["model_provider"].as_str(), Some("rmx"));
    let rmx = &doc["model_providers"]["rmx"];
    assert_eq!(rmx["name"].as_str(), Some("rmx"));
    assert_eq!(rmx["base_url"].as_str(), Some("http://127.0.0.1:9/v1"));
    assert_eq!(rmx["wire_api"].as_str(), Some("responses"));
    assert!(rmx.get("env_key").is_none(), "env_key without RMX_API_KEY");
    assert!(!new.contains("api_key"), "a key was written inline");
    assert_eq!(
        doc["model_providers"]["azure"]["env_key"].as_str(),
        Some("AZURE_OPENAI_API_KEY")
    );
    assert!(new.contains("model = \"qwen3-0.6b-4bit\"   # the default I use at work"));
}

#[test]
fn codex_setup_with_an_api_key_names_the_variable_not_the_key() {
    let home = Home::new();
    let file = home.write("codex-home/config.toml", CODEX);
    let out = Command::new(rmx_tests::rmx())
        .args(["agents", "codex", "--setup", "-y"])
        .env("HOME", home.dir.path())
        .env("CODEX_HOME", home.path("codex-home"))
        .env("RMX_HOST", "127.0.0.1:9")
        .env("RMX_API_KEY", "sekrit-123")
        .output()
        .unwrap();
    assert!(out.status.success());
    let new = std::fs::read_to_string(&file).unwrap();
    assert!(new.contains("env_key = \"RMX_API_KEY\""));
    assert!(!new.contains("sekrit-123"));
}

#[test]
fn claude_setup_merges_env_and_keeps_other_settings() {
    let home = Home::new();
    let original = r#"{
  "permissions": {
    "allow": [
      "Bash(npm run lint)"
    ],
    "deny": []
  },
  "env": {
    "MY_VAR": "1"
  },
  "theme": "dark"
}
"#;
    let file = home.write(".claude/settings.json", original);
    // A comma follows the last old key now: JSON is rewritten in the two-space layout these
    // tools write themselves, keys and values kept in order.
    let new = setup_dry_run_restore(&home, "claude", &file, &["    \"MY_VAR\""]);
    let v: serde_json::Value = serde_json::from_str(&new).unwrap();
    assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    assert_eq!(v["env"]["ANTHROPIC_MODEL"], "qwen3-0.6b-4bit");
    assert!(v["env"]["ANTHROPIC_AUTH_TOKEN"].is_string());
    assert_eq!(v["env"]["MY_VAR"], "1");
    assert_eq!(v["theme"], "dark");
    assert_eq!(v["permissions"]["allow"][0], "Bash(npm run lint)");
    // Key order is the user's: permissions first, theme last.
    assert!(new.find("permissions").unwrap() < new.find("theme").unwrap());
    assert!(new.find("\"env\"").unwrap() < new.find("theme").unwrap());
}

#[test]
fn aider_setup_edits_yaml_lines_and_keeps_comments() {
    let home = Home::new();
    let original = "# Aider config: mine\n\
        ## models\n\
        model: gpt-4o  # old favourite\n\
        \n\
        # UI\n\
        dark-mode: true\n\
        auto-commits: false\n";
    let file = home.write(".aider.conf.yml", original);
    let new = setup_dry_run_restore(&home, "aider", &file, &["model:"]);
    assert!(new.contains("model: \"openai/qwen3-0.6b-4bit\"  # old favourite\n"));
    assert!(new.contains("openai-api-base: \"http://127.0.0.1:9/v1\"\n"));
    assert!(new.starts_with("# Aider config: mine\n## models\n"));
}

#[test]
fn goose_setup_sets_the_openai_provider() {
    let home = Home::new();
    let original = "# goose\nGOOSE_PROVIDER: anthropic\nGOOSE_MODEL: claude-x\nextensions:\n  developer:\n    enabled: true # keep\n    name: developer\n";
    let file = home.write(".config/goose/config.yaml", original);
    let new = setup_dry_run_restore(&home, "goose", &file, &["GOOSE_PROVIDER:", "GOOSE_MODEL:"]);
    assert!(new.contains("GOOSE_PROVIDER: openai\n"));
    assert!(new.contains("OPENAI_HOST: \"http://127.0.0.1:9\"\n"));
    assert!(new.contains("    enabled: true # keep\n"));
}

#[test]
fn hermes_setup_fills_the_model_section() {
    let home = Home::new();
    let original = "# Hermes\nmodel:\n  default: \"anthropic/claude-opus\"\n  provider: \"auto\" # was auto\n\n# tools\nterminal:\n  backend: local\n";
    let file = home.write(".hermes/config.yaml", original);
    let new = setup_dry_run_restore(&home, "hermes", &file, &["  default:", "  provider:"]);
    assert!(new.contains("model:\n  default: \"qwen3-0.6b-4bit\"\n  provider: custom # was auto\n"));
    assert!(new.contains("  base_url: \"http://127.0.0.1:9/v1\"\n"));
    assert!(new.ends_with("# tools\nterminal:\n  backend: local\n"));
}

#[test]
fn opencode_and_continue_setups_keep_the_users_entries() {
    let home = Home::new();
    let file = home.write(
        ".config/opencode/opencode.json",
        "{\n  \"theme\": \"tokyonight\",\n  \"provider\": {\n    \"ollama\": {\n      \"npm\": \"x\"\n    }\n  }\n}\n",
    );
    // Closing braces gain a comma where rmx's keys follow them.
    let new = setup_dry_run_restore(&home, "opencode", &file, &["  }"]);
    let v: serde_json::Value = serde_json::from_str(&new).unwrap();
    assert_eq!(
        v["provider"]["rmx"]["options"]["baseURL"],
        "http://127.0.0.1:9/v1"
    );
    assert_eq!(v["provider"]["ollama"]["npm"], "x");
    assert_eq!(v["model"], "rmx/qwen3-0.6b-4bit");
    assert_eq!(v["theme"], "tokyonight");

    let original = "name: My Assistant # me\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: GPT\n    provider: openai\n    model: gpt-4o\n# rules\nrules:\n  - be brief\n";
    let file = home.write(".continue/config.yaml", original);
    let new = setup_dry_run_restore(&home, "continue", &file, &[]);
    assert!(new.contains("    apiBase: \"http://127.0.0.1:9/v1\"\n"));
    assert!(new.contains("  - name: GPT\n"));
}

#[test]
fn setup_of_a_missing_file_creates_it_and_restore_says_there_is_no_backup() {
    let home = Home::new();
    let out = home.rmx(&["agents", "claude", "--setup", "-y"]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(home.path(".claude/settings.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9");
    let out = home.rmx(&["agents", "claude", "--restore"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no backup"));
}

#[test]
fn setup_without_a_terminal_or_yes_refuses_and_changes_nothing() {
    let home = Home::new();
    let file = home.write("codex-home/config.toml", CODEX);
    let out = home.rmx(&["agents", "codex", "--setup"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-y"));
    assert_eq!(std::fs::read_to_string(file).unwrap(), CODEX);
}

#[test]
fn setup_says_when_the_daemon_answers_and_what_to_try() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            // Read the whole request head before answering and closing.
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 19\r\nConnection: close\r\n\r\n{\"version\":\"9.9.9\"}",
            );
        }
    });
    let home = Home::new();
    let out = Command::new(rmx_tests::rmx())
        .args(["agents", "codex", "--setup", "-y"])
        .env("HOME", home.dir.path())
        .env("CODEX_HOME", home.path("codex-home"))
        .env("RMX_HOST", format!("127.0.0.1:{port}"))
        .env_remove("RMX_API_KEY")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("answers at"), "{text}");
    assert!(text.contains("version 9.9.9"));
    assert!(text.contains("try it: codex exec \"say hi\""));
}

/// A model named by its folder: over HTTP the daemon serves folders only by a name, so the
/// setup adds an alias after the folder (with the family's tool-call format) and configures
/// the tool with it; a second setup reuses that alias; `--dry-run` adds nothing.
#[test]
fn setup_with_a_model_folder_names_it_by_an_alias() {
    let home = Home::new();
    let folder = home.path("models/My Qwen3");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("config.json"), r#"{"model_type": "qwen3"}"#).unwrap();
    let folder_arg = folder.to_str().unwrap();
    let file = home.path("codex-home/config.toml");

    let dry = home.rmx(&[
        "agents",
        "codex",
        "--setup",
        "--dry-run",
        "--model",
        folder_arg,
    ]);
    assert!(dry.status.success());
    assert!(
        stdout(&dry).contains("would add the alias `my-qwen3`"),
        "{}",
        stdout(&dry)
    );
    assert!(
        !home.path(".rmx/aliases.toml").exists(),
        "a dry run added an alias"
    );

    let out = home.rmx(&["agents", "codex", "--setup", "-y", "--model", folder_arg]);
    assert!(out.status.success());
    let doc: toml_edit::DocumentMut = std::fs::read_to_string(&file).unwrap().parse().unwrap();
    assert_eq!(doc["model"].as_str(), Some("my-qwen3"));
    let aliases = stdout(&home.rmx(&["alias", "ls", "--json"]));
    let listed: serde_json::Value = serde_json::from_str(&aliases).unwrap();
    let mine = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "my-qwen3")
        .unwrap_or_else(|| panic!("no alias my-qwen3 in {aliases}"));
    let canonical = std::fs::canonicalize(&folder).unwrap();
    assert_eq!(mine["repo"].as_str(), canonical.to_str());
    assert_eq!(mine["tool_parser"], "hermes", "{mine}");

    let again = home.rmx(&["agents", "aider", "--setup", "-y", "--model", folder_arg]);
    assert!(
        stdout(&again).contains("using the alias `my-qwen3`"),
        "{}",
        stdout(&again)
    );
    assert!(!aliases.contains("my-qwen3-2"));
    let listed_again = stdout(&home.rmx(&["alias", "ls", "--json"]));
    assert!(!listed_again.contains("my-qwen3-2"), "{listed_again}");
}
