//! `rmx bench --submit` with the real binary and a tiny Qwen3: a stand-in `gh` on PATH that
//! records its arguments, a failing one, none at all, and consent refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;

const REPO: &str = "test-owner/bench-repo";

struct Setup {
    home: tempfile::TempDir,
    bin: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            home: tempfile::tempdir().unwrap(),
            bin: tempfile::tempdir().unwrap(),
        }
    }

    fn recorder(&self) -> PathBuf {
        self.bin.path().join("gh.log")
    }

    /// A stand-in gh that appends each call's arguments (one a line, then `---`) to gh.log and
    /// answers the queries `rmx bench --submit` makes; `fail` makes every call fail the way
    /// gh does offline.
    fn gh(&self, fail: bool) {
        let answer = if fail {
            "echo 'error connecting to api.github.com' >&2\nexit 1\n".to_string()
        } else {
            format!(
                "case \"$*\" in\n\
                 'api user --jq .login') echo tester ;;\n\
                 *'--jq .default_branch') echo main ;;\n\
                 *'--jq .object.sha') echo 0123abc ;;\n\
                 'pr create'*) echo https://github.com/{REPO}/pull/7 ;;\n\
                 esac\n"
            )
        };
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> {log}; done\n\
             echo --- >> {log}\n{answer}",
            log = self.recorder().display()
        );
        let path = self.bin.path().join("gh");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn cmd(&self, extra: &[&str]) -> Command {
        let model = rmx_tests::models::tiny_qwen3();
        let mut c = Command::new(rmx_tests::rmx());
        c.arg("bench")
            .arg(&model)
            .args(["--rounds", "1", "--warmup", "0"])
            .args(["--prompt-tokens", "8", "--gen-tokens", "2", "--submit"])
            .args(extra)
            .env("RMX_HOME", self.home.path())
            .env("RMX_BENCH_REPO", REPO)
            // Only the stand-in (or nothing) where gh is looked for.
            .env("PATH", self.bin.path());
        c
    }

    fn run(&self, extra: &[&str]) -> Output {
        self.cmd(extra)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn saved(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        walk(&self.home.path().join("benchmarks"), &mut found);
        found
    }

    fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.recorder())
            .unwrap()
            .split("---\n")
            .filter(|c| !c.is_empty())
            .map(|c| c.lines().map(String::from).collect())
            .collect()
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            walk(&e.path(), out);
        } else {
            out.push(e.path());
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn with_gh_the_shown_json_is_saved_and_proposed_as_a_pull_request() {
    let s = Setup::new();
    s.gh(false);
    let out = s.run(&["--yes"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let saved = s.saved();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let file = std::fs::read_to_string(&saved[0]).unwrap();
    // What was shown is what was saved and sent, byte for byte.
    assert!(stdout.contains(&file), "{stdout}");
    let record: serde_json::Value = serde_json::from_str(&file).unwrap();
    assert_eq!(record["cases"][0]["prompt_tokens"], 8);
    assert!(stdout.contains(&format!("opened https://github.com/{REPO}/pull/7")));

    let calls = s.calls();
    let named = |first: &[&str]| {
        calls
            .iter()
            .find(|c| {
                c.iter()
                    .map(String::as_str)
                    .take(first.len())
                    .eq(first.iter().copied())
            })
            .unwrap_or_else(|| panic!("no `gh {first:?}` in {calls:?}"))
    };
    named(&["repo", "fork", REPO]);
    let put = named(&["api", "-X", "PUT"]);
    let rel = saved[0]
        .strip_prefix(s.home.path().join("benchmarks"))
        .unwrap()
        .display()
        .to_string();
    assert_eq!(
        put[3],
        format!("repos/tester/bench-repo/contents/results/{rel}")
    );
    let content = put.iter().find_map(|a| a.strip_prefix("content=")).unwrap();
    let sent = base64::engine::general_purpose::STANDARD
        .decode(content)
        .unwrap();
    assert_eq!(text(&sent), file);
    let pr = named(&["pr", "create"]);
    assert!(pr.windows(2).any(|w| w == ["--repo", REPO]), "{pr:?}");
    assert!(pr.iter().any(|a| a.starts_with("tester:bench-")), "{pr:?}");
    // Forked before the branch, the file before the PR.
    let order: Vec<&str> = calls.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(order.first(), Some(&"repo"));
    assert_eq!(order.last(), Some(&"pr"));
}

#[test]
fn a_failing_gh_says_so_keeps_the_file_and_fails() {
    let s = Setup::new();
    s.gh(true);
    let out = s.run(&["--yes"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("error connecting to api.github.com"),
        "{stderr}"
    );
    let saved = s.saved();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert!(stderr.contains(&saved[0].display().to_string()), "{stderr}");
}

#[test]
fn without_gh_it_prints_the_file_and_a_compare_url() {
    let s = Setup::new();
    let out = s.run(&["--yes"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let saved = s.saved();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert!(stderr.contains(&saved[0].display().to_string()), "{stderr}");
    assert!(
        stderr.contains(&format!("https://github.com/{REPO}/compare")),
        "{stderr}"
    );
}

#[test]
fn without_a_terminal_and_without_yes_nothing_is_sent_or_kept() {
    let s = Setup::new();
    s.gh(false);
    let out = s.run(&[]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stdout.contains("\"rmx_version\""),
        "the JSON was not shown: {stdout}"
    );
    assert!(stderr.contains("--yes"), "{stderr}");
    assert!(!s.recorder().exists(), "gh was called");
    assert!(s.saved().is_empty());
}

#[test]
fn answering_no_at_the_terminal_sends_nothing() -> Result<(), rexpect::error::Error> {
    let s = Setup::new();
    s.gh(false);
    let mut p = rexpect::session::spawn_command(s.cmd(&[]), Some(120_000))?;
    p.exp_string("[y/N]")?;
    p.send_line("n")?;
    p.exp_string("nothing was sent")?;
    p.exp_eof()?;
    assert!(!s.recorder().exists(), "gh was called");
    assert!(s.saved().is_empty());
    Ok(())
}
