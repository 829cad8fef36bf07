//! `rmx rm <name>...`: delete downloaded models from the Hugging Face cache, and imported
//! models (folders under `$RMX_HOME/models`) together with their alias. Other local folders
//! are the user's own and are never deleted.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rmx_store::{human_bytes, ModelRef, Store, StoreError};

use crate::cli::RmArgs;
use crate::commands::pull::store;

/// What removing one name will delete.
enum Target {
    /// `dir` is the repo's folder in the cache (every snapshot lies under it).
    Hub {
        repo: String,
        dir: PathBuf,
        size: u64,
    },
    Imported {
        path: PathBuf,
        size: u64,
    },
}

pub fn run(args: RmArgs) -> Result<ExitCode> {
    let store = store()?;
    // Check every name before deleting anything: `rmx rm a typo` removes nothing.
    let mut targets = Vec::new();
    for name in &args.models {
        targets.push((name.as_str(), target(&store, name)?));
    }
    for (name, target) in targets {
        let (what, size) = match &target {
            Target::Hub { repo, size, .. } => (repo.clone(), *size),
            Target::Imported { path, size } => (path.display().to_string(), *size),
        };
        if !args.yes && !confirm(&format!("remove {name} ({what}, {})?", human_bytes(size)))? {
            println!("kept {name}");
            continue;
        }
        let dir = match &target {
            Target::Hub { dir, .. } => dir,
            Target::Imported { path, .. } => path,
        };
        unload(name, dir)?;
        let removed = store.remove(name)?;
        let what = match &removed.repo {
            Some(repo) => repo.to_string(),
            None => removed.path.display().to_string(),
        };
        println!(
            "removed {name} ({what}, freed {})",
            human_bytes(removed.freed)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn target(store: &Store, name: &str) -> Result<Target> {
    match store.resolve(name)? {
        ModelRef::Hub { repo, .. } => {
            let entry = store.list()?.into_iter().find(|e| e.repo == repo);
            match entry {
                Some(e) => Ok(Target::Hub {
                    dir: store.cache().repo_dir(&repo),
                    repo: repo.to_string(),
                    size: e.size,
                }),
                None => Err(StoreError::NotInStore {
                    name: name.to_string(),
                    repo: repo.to_string(),
                    cache: store.cache().root().to_path_buf(),
                }
                .into()),
            }
        }
        ModelRef::Local { path, .. } if store.is_imported(&path) => {
            let size = rmx_store::folder_size(&path);
            Ok(Target::Imported { path, size })
        }
        ModelRef::Local { path, .. } => Err(StoreError::LocalModel { path }.into()),
    }
}

/// A running daemon that has the model loaded keeps its weights mapped and would serve a
/// model whose files are gone: have it unload the model first. No daemon, nothing to do (and
/// none is started).
fn unload(name: &str, dir: &Path) -> Result<()> {
    crate::daemon::runtime()?.block_on(async {
        let Some(client) = crate::daemon::running().await? else {
            return Ok(());
        };
        let running = client
            .ps()
            .await
            .context("asking the daemon which models are loaded")?;
        for model in running.models {
            if Path::new(&model.path).starts_with(dir) {
                client
                    .stop(&model.name)
                    .await
                    .with_context(|| format!("asking the daemon to unload {name}"))?;
                println!("unloaded {name} from the daemon");
            }
        }
        Ok(())
    })
}

/// Ask, reading the answer from standard input (a terminal, or `yes |`); no answer at all
/// (stdin closed) refuses rather than guesses.
fn confirm(question: &str) -> Result<bool> {
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer)?;
    if read == 0 {
        println!();
        bail!("no answer on standard input; pass -y to remove without asking");
    }
    if !std::io::stdin().is_terminal() {
        // Echo the piped answer so a log reads like the terminal session would.
        println!("{}", answer.trim());
    }
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
