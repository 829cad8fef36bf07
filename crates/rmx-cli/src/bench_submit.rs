//! `rmx bench --submit`: offering a benchmark record to the community benchmarks repository.
//!
//! Nothing leaves the machine without consent: the exact bytes that would be sent are shown
//! first, then asked about (`--yes` is the only way around the question; without a terminal
//! and without it, the answer is no). After a yes, the record is kept under the rmx home and,
//! when the GitHub CLI is installed, proposed as a pull request through it (fork, branch,
//! file, PR: the user's own gh login, no token of ours). Without gh, or when gh fails
//! (offline, logged out), the saved file and where to propose it by hand are printed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context, Result};
use base64::Engine as _;

use crate::agents::{self, Env};

/// `owner/name` of the repository pull requests go to.
pub const ENV_BENCH_REPO: &str = rmx_settings::EnvVars::RMX_BENCH_REPO;
const DEFAULT_REPO: &str = "rmx-project/benchmarks";

/// One record and where it goes.
pub struct Submission {
    pub repo: String,
    /// `results/<chip>/<model>/<timestamp>.json`, the same below the local folder.
    pub rel_path: String,
    pub text: String,
}

impl Submission {
    pub fn new(record: &serde_json::Value, chip: &str, model: &str) -> Result<Submission> {
        let repo = rmx_settings::var(ENV_BENCH_REPO).unwrap_or_else(|| DEFAULT_REPO.to_string());
        if !valid_repo(&repo) {
            bail!("{ENV_BENCH_REPO}=`{repo}` is not a GitHub repository as owner/name");
        }
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        Ok(Submission {
            repo,
            rel_path: format!("results/{}/{}/{stamp}.json", slug(chip), slug(model)),
            text: serde_json::to_string_pretty(record)? + "\n",
        })
    }

    fn compare_url(&self) -> String {
        format!("https://github.com/{}/compare", self.repo)
    }
}

/// Shows the record, asks, keeps it, and sends it.
pub fn submit(sub: &Submission, yes: bool, home: &Path) -> Result<ExitCode> {
    println!(
        "This is the exact JSON `rmx bench --submit` would send to https://github.com/{} as {}:",
        sub.repo, sub.rel_path
    );
    print!("{}", sub.text);
    std::io::stdout().flush()?;
    if !yes && !consent(&sub.repo)? {
        eprintln!("not submitted: nothing was sent and nothing was saved");
        return Ok(ExitCode::FAILURE);
    }
    let saved = save(sub, home)?;
    eprintln!("saved {}", saved.display());
    if !agents::on_path("gh", &Env::from_process()) {
        eprintln!(
            "the GitHub CLI (gh) is not installed, so nothing was sent. To submit the result, \
             add {} to a fork of {} as {} and open a pull request: {}",
            saved.display(),
            sub.repo,
            sub.rel_path,
            sub.compare_url()
        );
        return Ok(ExitCode::SUCCESS);
    }
    match pull_request(sub) {
        Ok(url) => {
            println!("opened {url}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!(
                "rmx: could not open the pull request through gh: {e:#}\nAre you online and \
                 logged in (`gh auth status`)? The result is kept at {}; submit it again later \
                 or by hand: {}",
                saved.display(),
                sub.compare_url()
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Yes only from a person at a terminal.
fn consent(repo: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        eprintln!("rmx: not asking: standard input is not a terminal; pass --yes to send it");
        return Ok(false);
    }
    eprint!("Send this to github.com/{repo} as a pull request? [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

fn save(sub: &Submission, home: &Path) -> Result<PathBuf> {
    let rel = sub.rel_path.trim_start_matches("results/");
    let path = home.join("benchmarks").join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, &sub.text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Fork, a branch on the fork from the upstream default branch, the file on it, and the PR.
/// Returns what `gh pr create` prints (the PR's URL).
fn pull_request(sub: &Submission) -> Result<String> {
    let repo = &sub.repo;
    let name = repo.rsplit_once('/').map_or(repo.as_str(), |(_, n)| n);
    gh(&["repo", "fork", repo, "--clone=false", "--remote=false"])?;
    let login = gh(&["api", "user", "--jq", ".login"])?;
    let fork = format!("{login}/{name}");
    let base = gh(&["api", &format!("repos/{repo}"), "--jq", ".default_branch"])?;
    let sha = gh(&[
        "api",
        &format!("repos/{repo}/git/ref/heads/{base}"),
        "--jq",
        ".object.sha",
    ])?;
    let branch = format!(
        "bench-{}",
        sub.rel_path
            .trim_start_matches("results/")
            .trim_end_matches(".json")
            .replace('/', "-")
    );
    gh(&[
        "api",
        "-X",
        "POST",
        &format!("repos/{fork}/git/refs"),
        "-f",
        &format!("ref=refs/heads/{branch}"),
        "-f",
        &format!("sha={sha}"),
    ])?;
    let title = format!("bench: {}", sub.rel_path);
    gh(&[
        "api",
        "-X",
        "PUT",
        &format!("repos/{fork}/contents/{}", sub.rel_path),
        "-f",
        &format!("message={title}"),
        "-f",
        &format!(
            "content={}",
            base64::engine::general_purpose::STANDARD.encode(&sub.text)
        ),
        "-f",
        &format!("branch={branch}"),
    ])?;
    gh(&[
        "pr",
        "create",
        "--repo",
        repo,
        "--base",
        &base,
        "--head",
        &format!("{login}:{branch}"),
        "--title",
        &title,
        "--body",
        "Submitted with `rmx bench --submit`.",
    ])
}

/// Runs gh and returns its trimmed standard output; a failure carries its standard error.
fn gh(args: &[&str]) -> Result<String> {
    let out = Command::new("gh")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running gh")?;
    if !out.status.success() {
        bail!(
            "`gh {}` failed ({}): {}",
            args.iter().take(3).copied().collect::<Vec<_>>().join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn valid_repo(repo: &str) -> bool {
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    repo.split_once('/').is_some_and(|(o, n)| ok(o) && ok(n))
}

/// A path segment: lowercase letters, digits and single dashes.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() || out.chars().all(|c| c == '.') {
        "unknown".into()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_path_safe() {
        assert_eq!(slug("Apple M3 Max"), "apple-m3-max");
        assert_eq!(slug("Qwen3-4B-4bit"), "qwen3-4b-4bit");
        assert_eq!(slug(".."), "unknown");
        assert!(!slug("../..").contains('/'));
        assert_eq!(slug(""), "unknown");
    }

    #[test]
    fn repos_are_owner_and_name() {
        assert!(valid_repo("rmx-project/benchmarks"));
        assert!(!valid_repo("benchmarks"));
        assert!(!valid_repo("a/b/c"));
        assert!(!valid_repo("a/b;rm"));
    }
}
